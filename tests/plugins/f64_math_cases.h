// SPDX-License-Identifier: Apache-2.0
// float64 math intrinsics on a device against the IR interpreter, shared by
// the vulkan, opencl and c tests. For each intrinsic a kernel y[i] = f(a[i], b[i], c[i]) runs
// on the device and in the interpreter (<cmath> in double) on the same inputs: random inputs
// over the function's domain (fixed seeds), compared in ulps, and special values (zeros,
// infinities, NaN, exact results, thresholds), compared bit for bit (any NaN matches any NaN).
// The error against the true value (long double <cmath>, 64-bit significands) is measured
// too, for docs/vulkan.md. BACKPLANE_F64_MATH_SAMPLES sets the number of random inputs per
// function (default 4096).
#ifndef BACKPLANE_TESTS_PLUGINS_F64_MATH_CASES_H_
#define BACKPLANE_TESTS_PLUGINS_F64_MATH_CASES_H_

#include <stdlib.h>

#include <array>
#include <backplane/backplane.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace bptest {
namespace f64math {

using Args = std::array<double, 3>;

// One intrinsic: its IR expression over a[i], b[i], c[i] (the elements of three float64
// inputs), its true value, its random inputs and its special inputs.
struct Case {
  std::string name;  // "exp", "pow", ...
  std::string expr;  // "exp(a[i])"
  std::function<long double(const Args&)> truth;
  std::vector<Args> random;
  std::vector<Args> special;
};

inline double Bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}
inline uint64_t BitsOf(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kMax = std::numeric_limits<double>::max();
constexpr double kMinNormal = std::numeric_limits<double>::min();
constexpr double kMinSub = std::numeric_limits<double>::denorm_min();

// The distance between two doubles in units in the last place of the grid between them
// (0 for +0 and -0; both NaN: 0; one NaN: infinity).
inline double UlpDistance(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : kInf;
  auto ordered = [](double x) -> long double {  // 64-bit significand: every int64 exactly
    const int64_t i = static_cast<int64_t>(BitsOf(x));
    return i < 0 ? -static_cast<long double>(i & INT64_MAX) : static_cast<long double>(i);
  };
  return static_cast<double>(std::fabs(ordered(a) - ordered(b)));
}

// |got - t| in ulps of the double binade of the true value t (subnormal ulps below 2^-1022).
inline double UlpError(double got, long double t) {
  if (std::isnan(got) || std::isnan(t)) return std::isnan(got) && std::isnan(t) ? 0 : kInf;
  const double td = static_cast<double>(t);  // past the largest double: infinity
  if (std::isinf(got) || std::isinf(td)) return got == td ? 0 : kInf;
  const long double at = std::fabs(t);
  int e = at < static_cast<long double>(kMinNormal) ? -1022 : std::ilogb(at);
  if (e > 1023) e = 1023;  // past the largest double: in its ulps
  return static_cast<double>(std::fabs(static_cast<long double>(got) - t) /
                             std::ldexp(1.0L, e - 52));
}

inline bool SameBits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || BitsOf(a) == BitsOf(b);
}

// ---- Inputs ---------------------------------------------------------------------------------

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  double Uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // A double of magnitude in [2^lo, 2^(hi + 1)), every significand equally likely; lo < -1022
  // gives subnormals; sign: +1, -1 or 0 (either).
  double LogUniform(int lo, int hi, int sign = 0) {
    const int e = Int(lo, hi);
    const uint64_t mant = rng_() & 0x000fffffffffffffull;
    double m = Bits(mant | 0x3ff0000000000000ull);  // [1, 2)
    double v = std::ldexp(m, e);
    if (v == 0) v = kMinSub;
    const int s = sign != 0 ? sign : (rng_() & 1 ? 1 : -1);
    return s * v;
  }
  // Any finite double, every bit pattern equally likely.
  double AnyFinite() {
    for (;;) {
      const double d = Bits(rng_());
      if (std::isfinite(d)) return d;
    }
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

inline int Samples() {
  const char* s = getenv("BACKPLANE_F64_MATH_SAMPLES");
  return s != nullptr && atoi(s) > 0 ? atoi(s) : 4096;
}

// Fills `n` random inputs from `pick`, which draws from several ranges in turn.
inline std::vector<Args> Draw(int n, uint64_t seed, const std::function<Args(Gen&, int)>& pick) {
  Gen g(seed);
  std::vector<Args> v;
  v.reserve(n);
  for (int i = 0; i < n; ++i) v.push_back(pick(g, i));
  return v;
}

inline std::vector<Args> Unary(std::initializer_list<double> xs) {
  std::vector<Args> v;
  for (double x : xs) v.push_back({x, 0.0, 0.0});
  return v;
}

// Zeros, infinities, NaN: their results are exact for every function here.
inline std::vector<double> Specials() { return {0.0, -0.0, kInf, -kInf, kNan, -kNan}; }

// The cases. `n` random inputs each.
inline std::vector<Case> Cases(int n) {
  std::vector<Case> cases;
  const double pi = 3.14159265358979323846;
  auto unary_specials = [](std::initializer_list<double> more) {
    std::vector<Args> v = Unary({});
    for (double x : Specials()) v.push_back({x, 0, 0});
    for (double x : more) v.push_back({x, 0, 0});
    return v;
  };
  // exp: the whole range of finite results (subnormal ones included), small arguments.
  cases.push_back({"exp", "exp(a[i])",
                   [](const Args& a) { return std::exp(static_cast<long double>(a[0])); },
                   Draw(n, 1,
                        [](Gen& g, int i) -> Args {
                          switch (i % 4) {
                            case 0:
                              return {g.Uniform(-745.1, 709.78), 0, 0};
                            case 1:
                              return {g.Uniform(-1, 1), 0, 0};
                            case 2:
                              return {g.LogUniform(-60, 9), 0, 0};
                            default:
                              return {g.Uniform(-745.13, -708.3), 0, 0};  // subnormal
                          }
                        }),
                   unary_specials({746.0, 709.79, -745.14, -800.0, 1e300, -1e300, kMinSub})});
  cases.push_back({"exp2", "exp2(a[i])",
                   [](const Args& a) { return std::exp2(static_cast<long double>(a[0])); },
                   Draw(n, 2,
                        [](Gen& g, int i) -> Args {
                          switch (i % 3) {
                            case 0:
                              return {g.Uniform(-1074.9, 1023.99), 0, 0};
                            case 1:
                              return {g.Uniform(-1, 1), 0, 0};
                            default:
                              return {g.LogUniform(-60, 9), 0, 0};
                          }
                        }),
                   [] {
                     std::vector<Args> v = Unary({1024.0, 1030.0, -1075.0, -1080.0, 1e300, -1e300});
                     for (double x : Specials()) v.push_back({x, 0, 0});
                     for (int k = -1074; k <= 1023; k += 7) v.push_back({double(k), 0, 0});
                     v.push_back({1023.0, 0, 0});
                     v.push_back({-1074.0, 0, 0});
                     return v;
                   }()});
  auto positive = [](Gen& g, int i) -> Args {
    switch (i % 4) {
      case 0:
        return {g.LogUniform(-1074, 1023, 1), 0, 0};  // every binade, subnormals too
      case 1:
        return {1.0 + g.Uniform(-0.3, 0.42), 0, 0};
      case 2:
        return {1.0 + g.LogUniform(-52, -8), 0, 0};  // near 1, both sides
      default:
        return {g.LogUniform(-8, 8, 1), 0, 0};
    }
  };
  auto log_specials = [] {
    std::vector<Args> v = Unary({1.0, -1.0, -kMinSub, -kMax});
    for (double x : Specials()) v.push_back({x, 0, 0});
    return v;
  };
  cases.push_back({"log", "log(a[i])",
                   [](const Args& a) { return std::log(static_cast<long double>(a[0])); },
                   Draw(n, 3, positive), log_specials()});
  cases.push_back({"log2", "log2(a[i])",
                   [](const Args& a) { return std::log2(static_cast<long double>(a[0])); },
                   Draw(n, 4, positive),
                   [&] {
                     std::vector<Args> v = log_specials();
                     for (int k = -1074; k <= 1023; k += 3) v.push_back({std::ldexp(1.0, k), 0, 0});
                     return v;
                   }()});
  // pow: y log x in [-745, 709.7] (every finite result, subnormal ones too), x near 1 with large y,
  // negative x with integer y; the specials are C's table (C11 F.10.4.4) on a grid.
  cases.push_back(
      {"pow", "pow(a[i], b[i])",
       [](const Args& a) {
         return std::pow(static_cast<long double>(a[0]), static_cast<long double>(a[1]));
       },
       Draw(n, 5,
            [](Gen& g, int i) -> Args {
              double x;
              switch (i % 4) {
                case 0:
                  x = g.LogUniform(-1000, 1000, 1);
                  break;
                case 1:
                  x = g.LogUniform(-20, 20, 1);
                  break;
                case 2:
                  x = 1.0 + g.LogUniform(-50, -4);
                  break;
                default: {
                  x = -g.LogUniform(-30, 30, 1);
                  const double lim = std::floor(700 / std::fabs(std::log(-x)));
                  return {x, std::trunc(g.Uniform(-std::min(lim, 1e6), std::min(lim, 1e6))), 0};
                }
              }
              // y ln x in [-745, 709.7]: every result from subnormals to near overflow
              const double l = std::log(x);
              return {x, g.Uniform(-745, 709.7) / (l != 0 ? l : 1), 0};
            }),
       [] {
         std::vector<Args> v;
         for (double x : {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, -3.0, kInf, -kInf, kNan,
                          kMinSub, -kMinSub, kMax})
           for (double y : {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, kInf, -kInf,
                            kNan, 1e300, -1e300, 2048.0, -1075.0, 9007199254740993.0})
             v.push_back({x, y, 0});
         v.push_back({2.0, 1023.0, 0});
         v.push_back({2.0, -1074.0, 0});
         v.push_back({10.0, 400.0, 0});
         v.push_back({0.1, 400.0, 0});
         return v;
       }()});
  // sin, cos: small arguments, the range of the Cody-Waite reduction, arguments next to
  // multiples of pi/2 (where the reduction cancels), large arguments.
  auto trig = [pi](uint64_t seed, int count) {
    return Draw(count, seed, [pi](Gen& g, int i) -> Args {
      switch (i % 7) {
        case 0:
          return {g.Uniform(-pi / 4, pi / 4), 0, 0};
        case 1:
          return {g.Uniform(-10, 10), 0, 0};
        case 2:
          return {g.Uniform(-1e5, 1e5), 0, 0};
        case 3:
          return {g.Uniform(-1.6e6, 1.6e6), 0, 0};
        case 4: {  // the double nearest k pi/2, a few ulps either way
          const double k = g.Int(1, 1000000);
          double x = static_cast<double>(k * (static_cast<long double>(pi) / 2));
          for (int s = g.Int(-3, 3); s != 0; s += s > 0 ? -1 : 1)
            x = std::nextafter(x, s > 0 ? kInf : -kInf);
          return {g.rng()() & 1 ? x : -x, 0, 0};
        }
        case 5:
          return {g.LogUniform(20, 1023), 0, 0};  // Payne-Hanek
        default:
          return {g.LogUniform(-40, -1), 0, 0};
      }
    });
  };
  cases.push_back({"sin", "sin(a[i])",
                   [](const Args& a) { return std::sin(static_cast<long double>(a[0])); },
                   trig(6, n),
                   unary_specials({1e-9, -1e-9, kMinSub, -kMinSub, kMinNormal, kMax, -kMax, 1e22,
                                   0x1p1023, 6381956970095103.0 * 0x1p797, 1.6e6, -1.6e6})});
  cases.push_back({"cos", "cos(a[i])",
                   [](const Args& a) { return std::cos(static_cast<long double>(a[0])); },
                   trig(7, n),
                   unary_specials({1e-9, -1e-9, kMinSub, kMax, -kMax, 1e22, 0x1p1023,
                                   6381956970095103.0 * 0x1p797, 1.6e6, -1.6e6})});
  cases.push_back({"tanh", "tanh(a[i])",
                   [](const Args& a) { return std::tanh(static_cast<long double>(a[0])); },
                   Draw(n, 8,
                        [](Gen& g, int i) -> Args {
                          switch (i % 4) {
                            case 0:
                              return {g.Uniform(-25, 25), 0, 0};
                            case 1:
                              return {g.Uniform(-1, 1), 0, 0};
                            case 2:
                              return {g.LogUniform(-60, 0), 0, 0};
                            default:
                              return {g.Uniform(0.54, 0.56) * (g.rng()() & 1 ? 1 : -1), 0, 0};
                          }
                        }),
                   unary_specials({30.0, -30.0, 1e300, -1e300, 1e-10, kMinSub, -kMinSub})});
  cases.push_back(
      {"sigmoid", "sigmoid(a[i])",
       [](const Args& a) { return 1.0L / (1.0L + std::exp(-static_cast<long double>(a[0]))); },
       Draw(n, 9,
            [](Gen& g, int i) -> Args {
              // below -709.78, e^-x overflows and the IR's 1 / (1 + e^-x) is 0
              return {i % 2 ? g.Uniform(-40, 40) : g.Uniform(-709.7, 740), 0, 0};
            }),
       unary_specials({750.0, -750.0, 1e300, -1e300})});
  cases.push_back({"erf", "erf(a[i])",
                   [](const Args& a) { return std::erf(static_cast<long double>(a[0])); },
                   Draw(n, 10,
                        [](Gen& g, int i) -> Args {
                          switch (i % 3) {
                            case 0:
                              return {g.Uniform(-7, 7), 0, 0};
                            case 1:
                              return {g.Uniform(-1, 1), 0, 0};
                            default:
                              return {g.LogUniform(-60, 2), 0, 0};
                          }
                        }),
                   unary_specials({6.0, -6.0, 10.0, -10.0, 1e300, -1e300})});
  // Functions GLSL has for double (sqrt) or that are exact: every finite double.
  cases.push_back({"sqrt", "sqrt(a[i])",
                   [](const Args& a) { return std::sqrt(static_cast<long double>(a[0])); },
                   Draw(n, 11,
                        [](Gen& g, int) -> Args {
                          return {g.LogUniform(-1074, 1023, 1), 0, 0};
                        }),
                   unary_specials({4.0, -1.0, kMinSub, kMax})});
  cases.push_back({"rsqrt", "rsqrt(a[i])",
                   [](const Args& a) { return 1.0L / std::sqrt(static_cast<long double>(a[0])); },
                   Draw(n, 12,
                        [](Gen& g, int) -> Args {
                          return {g.LogUniform(-1022, 1023, 1), 0, 0};
                        }),
                   unary_specials({4.0, -1.0})});
  auto any = [](uint64_t seed, int count) {
    return Draw(count, seed, [](Gen& g, int i) -> Args {
      switch (i % 3) {
        case 0:
          return {g.AnyFinite(), 0, 0};
        case 1:
          return {std::trunc(g.Uniform(-1e6, 1e6)) + 0.5, 0, 0};  // halves
        default:
          return {g.Uniform(-1e3, 1e3), 0, 0};
      }
    });
  };
  const std::vector<Args> exact_specials = unary_specials({0.5, -0.5, 2.5, -2.5, kMinSub, -kMax});
  for (const char* f : {"fabs", "floor", "ceil", "round", "trunc"}) {
    std::function<long double(const Args&)> t;
    const std::string s = f;
    if (s == "fabs") t = [](const Args& a) { return std::fabs(static_cast<long double>(a[0])); };
    if (s == "floor") t = [](const Args& a) { return std::floor(static_cast<long double>(a[0])); };
    if (s == "ceil") t = [](const Args& a) { return std::ceil(static_cast<long double>(a[0])); };
    if (s == "round") t = [](const Args& a) { return std::round(static_cast<long double>(a[0])); };
    if (s == "trunc") t = [](const Args& a) { return std::trunc(static_cast<long double>(a[0])); };
    cases.push_back({s, s + "(a[i])", t, any(13 + cases.size(), n), exact_specials});
  }
  // fma: one rounding. Random operands; c = -(a * b rounded) and nearby (the result is the
  // product's rounding error: every bit of the product counts); products at a tie broken by a
  // tiny c; operands whose product or sum leaves the range of doubles.
  cases.push_back(
      {"fma", "fma(a[i], b[i], c[i])",
       [](const Args& a) { return std::fma(a[0], a[1], a[2]); },  // exact
       Draw(n, 20,
            [](Gen& g, int i) -> Args {
              const double a = g.LogUniform(-30, 30), b = g.LogUniform(-30, 30);
              switch (i % 7) {
                case 0:
                  return {a, b, g.LogUniform(-60, 60)};
                case 1:
                  return {a, b, -(a * b)};
                case 2:
                  return {a, b, std::nextafter(-(a * b), g.rng()() & 1 ? kInf : -kInf)};
                case 3: {  // a * b exactly halfway between two doubles, c breaks the tie
                  const double x = 1.0 + g.Int(1, 1 << 26) * 0x1p-26;
                  const double y = 1.0 + 0x1p-27 * (2 * g.Int(0, 1 << 20) + 1);
                  return {x, y, g.rng()() & 1 ? 0x1p-200 : -0x1p-200};
                }
                case 4:
                  return {g.LogUniform(500, 530), g.LogUniform(480, 500), g.LogUniform(1000, 1023)};
                case 5: {  // subnormal results
                  const double x = g.LogUniform(-540, -520), y = g.LogUniform(-540, -520);
                  return {x, y, g.rng()() & 1 ? g.LogUniform(-1074, -1040) : -(x * y)};
                }
                default:
                  return {g.LogUniform(-540, -500), g.LogUniform(-520, -480),
                          g.LogUniform(-1000, -900)};
              }
            }),
       [] {
         std::vector<Args> v;
         const std::vector<double> xs = {0.0,  -0.0,  1.0,  -1.0, 3.0,
                                         kInf, -kInf, kNan, kMax, kMinSub};
         for (double a : xs)
           for (double b : xs)
             for (double c : xs) v.push_back({a, b, c});
         // A subnormal result just above a tie of the subnormal grid: a * b = 2^-1046 (1 +
         // 2^-29 + 2^-60), 2^-1075 is half the grid's step; rounded to 53 bits first, the
         // result would be the tie and round to even, down.
         const double p = (1 + 0x1p-30) * 0x1p-523;
         for (double c : {2 * kMinSub, 6 * kMinSub, -2 * kMinSub, 0x1p-1060}) {
           v.push_back({p, p, c});
           v.push_back({-p, p, -c});
           v.push_back({p, p * 0x1p-20, c});
         }
         v.push_back({kMax, 2.0, -kMax});    // the product overflows, the sum does not
         v.push_back({1e300, 1e10, -kInf});  // a finite product and -inf: -inf
         return v;
       }()});
  return cases;
}

// ---- Running --------------------------------------------------------------------------------

// The kernel of `c`: one result per element; on a GPU kind 64 threads a block.
inline std::string KernelText(const Case& c, bool gpu) {
  std::string s =
      "# backplane-ir 1\nfunc f(n: int32, a: buffer<float64>[n], b: buffer<float64>[n], "
      "c: buffer<float64>[n], r: buffer<float64>[n]) {\n";
  if (gpu) {
    return s +
           "  for bx in thread(blockIdx.x, 0, n / 64) {\n"
           "    for tx in thread(threadIdx.x, 0, 64) {\n"
           "      let i: int32 = bx * 64 + tx\n"
           "      r[i] = " +
           c.expr + "\n    }\n  }\n}\n";
  }
  return s + "  for i in parallel(0, n) {\n    r[i] = " + c.expr + "\n  }\n}\n";
}

// What one case measured.
struct Outcome {
  double max_ulp = 0;  // against the interpreter, random inputs
  Args worst{};
  double max_true_ulp = 0;  // against the true value, random inputs
  Args worst_true{};
  int over_bound = 0;  // random inputs off the interpreter by more than the bound
  int special_mismatches = 0;
  int interpreter_off = 0;  // inputs where the interpreter (glibc) is off, not the device
  std::string report;       // the first few mismatches
};

// Runs `c` through `module` (built from KernelText) on `dev`, and through the interpreter.
inline Outcome Run(const Case& c, backplane::Module& module, backplane::Device dev, bool gpu,
                   double bound) {
  std::vector<Args> in = c.random;
  in.insert(in.end(), c.special.begin(), c.special.end());
  const size_t used = in.size();
  while (in.size() % 64 != 0) in.push_back({1.0, 1.0, 1.0});
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<double> a(n), b(n), cc(n), want(n, 0.0), got(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = in[i][0];
    b[i] = in[i][1];
    cc[i] = in[i][2];
  }
  const DLDataType f64{kDLFloat, 64, 1};
  auto up = [&](const std::vector<double>& v) {
    backplane::Tensor t = backplane::Tensor::Empty({n}, f64, dev);
    t.CopyFromBytes(v.data(), v.size() * sizeof(double));
    return t;
  };
  backplane::Tensor ta = up(a), tb = up(b), tc = up(cc), tr = up(got);
  module.GetFunction("f")(static_cast<int32_t>(n), ta.dl(), tb.dl(), tc.dl(), tr.dl());
  tr.CopyToBytes(got.data(), got.size() * sizeof(double));

  namespace ir = backplane::ir;
  const int64_t shape[] = {n};
  std::vector<double> ia(a), ib(b), ic(cc);
  ir::Interpreter(ir::Parse(KernelText(c, gpu), c.name))
      .Run("f", {ir::IntArg(n), ir::BufferArg(ia.data(), ir::Float64(), 1, shape),
                 ir::BufferArg(ib.data(), ir::Float64(), 1, shape),
                 ir::BufferArg(ic.data(), ir::Float64(), 1, shape),
                 ir::BufferArg(want.data(), ir::Float64(), 1, shape)});

  Outcome o;
  int reported = 0;
  auto note = [&](const char* what, size_t i) {
    if (reported++ >= 8) return;
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "  %s: %s(%.17g, %.17g, %.17g) = %.17g (%a), interpreter %.17g (%a)\n", what,
                  c.name.c_str(), in[i][0], in[i][1], in[i][2], got[i], got[i], want[i], want[i]);
    o.report += buf;
  };
  // Within `bound` of the interpreter; or, where the interpreter itself is further than that
  // from the true value, within 1 ulp of the true value (glibc's cos is 8 ulp off at
  // 6381956970095103 * 2^797, where the argument comes closest to a multiple of pi/2).
  auto close = [&](size_t i, double d) {
    if (d <= bound) return true;
    const long double t = c.truth(in[i]);
    if (UlpError(want[i], t) > bound && UlpError(got[i], t) <= 1) {
      ++o.interpreter_off;
      note("the interpreter is off, not the device", i);
      return true;
    }
    return false;
  };
  for (size_t i = 0; i < used; ++i) {
    if (i >= c.random.size()) {
      // An exact result (NaN, infinities, zeros, 2^k, ...) bit for bit, others within bound.
      const long double t = c.truth(in[i]);
      const bool exact = std::isnan(t) || static_cast<long double>(static_cast<double>(t)) == t;
      if (exact ? !SameBits(got[i], want[i]) : !close(i, UlpDistance(got[i], want[i]))) {
        ++o.special_mismatches;
        note("special value", i);
      }
      continue;
    }
    const double d = UlpDistance(got[i], want[i]);
    if (d > o.max_ulp) {
      o.max_ulp = d;
      o.worst = in[i];
    }
    // Results the interpreter gives exactly (NaN, infinities, zeros) must match bit for bit.
    const bool exact = std::isnan(want[i]) || std::isinf(want[i]) || want[i] == 0;
    if (exact ? !SameBits(got[i], want[i]) : !close(i, d)) {
      ++o.over_bound;
      note("off", i);
    }
    const double t = UlpError(got[i], c.truth(in[i]));
    if (t > o.max_true_ulp) {
      o.max_true_ulp = t;
      o.worst_true = in[i];
    }
  }
  return o;
}

}  // namespace f64math
}  // namespace bptest

#endif  // BACKPLANE_TESTS_PLUGINS_F64_MATH_CASES_H_
