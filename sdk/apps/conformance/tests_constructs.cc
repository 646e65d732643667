// SPDX-License-Identifier: Apache-2.0
// One clause per construct of the kernel IR and dtype (docs/conformance.md,
// "Construct clauses"): every arithmetic operator, negation, comparison, select, cast and
// exact intrinsic on int32, int64, float32 and float64, the loop kinds, shared memory with a
// barrier and the atomics, each a small kernel built for the device's Target, run there on
// random inputs that cover the dtype's range (wrapping integers, subnormal, infinite and NaN
// floats) and compared with the IR interpreter bit for bit: the IR defines these results
// exactly (docs/ir.md, "The interpreter"), so a code generator whose language rounds, flushes
// or saturates otherwise must compute them the IR's way. A NaN matches any NaN.
#include <algorithm>
#include <backplane/hash.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/ir.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "conformance.h"
#include "constructs.h"
#include "device_util.h"

namespace backplane {
namespace conformance {
namespace constructs {

// The dtypes are the IR's (ir::DType, spelled as ir::ToString spells them).
using ir::DType;
const DType kAllDtypes[] = {ir::Int(32), ir::Int(64), ir::Float(32), ir::Float(64)};
const DType kFloatDtypes[] = {ir::Float(32), ir::Float(64)};
// The other scalar dtypes: the operators on each, and casts between each and the four above.
const DType kMoreDtypes[] = {ir::Int(8),   ir::Int(16),  ir::UInt(8),  ir::UInt(16),
                             ir::UInt(32), ir::UInt(64), ir::Float(16)};

// The bytes of one element.
int Bytes(DType t) { return t.bits / 8; }
// A dtype a device or its code generator may lack (its refusal, BP_ERR_UNSUPPORTED, skips):
// every one but int32, uint32 and float32.
bool OptionalDtype(DType t) { return t != ir::Int(32) && t != ir::UInt(32) && t != ir::Float(32); }

// What a construct's inputs must avoid.
enum class Inputs {
  kAny,          // the whole range, specials included
  kNonzeroB,     // b != 0 (integer division by zero is an error of the IR's, not a result)
  kCastFloatIn,  // a float converted to an integer: in range, and out of range and NaN too
};

// A construct: its clause name, a description, its expression over a[i] and b[i], and the
// dtype of the result (empty: the operand dtype).
struct Construct {
  std::string name;
  std::string what;
  std::string expr;
  std::string result;  // "int32", or "" for the operands' dtype
  Inputs inputs = Inputs::kAny;
  bool optional = false;  // a type inside `expr` that a device may lack (its refusal skips)
};

// A stable seed for a clause: FNV-1a of its name (std::hash differs between standard
// libraries, and a failure's inputs should be the same wherever the kit is built). The basis
// is not FNV's (a digit short of it): it is kept, as every clause's inputs derive from it.
uint64_t SeedOf(const std::string& clause) {
  return Fnv1a64(clause, 1469598103934665603ull) & 0xffffff;
}

// An integer for element k: a third small (results that stay small), a third over the whole
// range (so + - * wrap), a third the edges.
template <typename I, size_t N>
I RandomInt(uint64_t r, int64_t k, const I (&edges)[N]) {
  return k % 3 == 0   ? static_cast<I>(static_cast<int64_t>(r % 201) - 100)
         : k % 3 == 1 ? static_cast<I>(r)
                      : edges[r % N];
}

// A float for element k: a quarter each of specials, values near 1, and random bits over every
// exponent (subnormals too; the all-ones exponent, infinity and NaN, only among the specials).
// With `cast_in`, half the values are in [-125000, 125000] (in range of every integer type).
template <typename F, typename U, size_t N>
F RandomFloat(uint64_t r, int64_t k, bool cast_in, const F (&specials)[N]) {
  if (cast_in && k % 2 == 0) {
    return static_cast<F>(static_cast<double>(static_cast<int64_t>(r % 2000001) - 1000000) / 8.0);
  }
  if (k % 4 == 3) return specials[r % N];
  if (k % 4 == 2) return static_cast<F>(static_cast<double>(r % 20001) / 1000.0 - 10.0);
  constexpr int kFraction = std::numeric_limits<F>::digits - 1;
  constexpr U kExponent = (U{1} << (sizeof(U) * 8 - 1)) - (U{1} << kFraction);
  U bits = static_cast<U>(r);
  if ((bits & kExponent) == kExponent) bits ^= U{1} << kFraction;  // not infinity or NaN
  F v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// Random elements of `t` (fixed seed per clause) that cover its range.
std::vector<uint8_t> RandomElements(DType t, Inputs inputs, bool second, uint64_t seed) {
  static const int32_t kEdges32[] = {0, 1, -1, 2, -2, INT32_MIN, INT32_MAX, INT32_MIN + 1, 7};
  static const int64_t kEdges64[] = {
      0, 1, -1, INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, int64_t{1} << 32, -(int64_t{1} << 40)};
  static const float kSpecials32[] = {
      0.0f, -0.0f,  1.0f,    -1.0f,  0.5f,    2.5f,   -2.5f,   1.5f,   INFINITY, -INFINITY,
      NAN,  1e-45f, -1e-45f, 1e-40f, 3.4e38f, 2.1e9f, -2.2e9f, 4.0e9f, 9.3e18f,  -9.3e18f};
  static const double kSpecials64[] = {0.0,     -0.0,     1.0,       -1.0,  0.5,    2.5,     -2.5,
                                       1.5,     INFINITY, -INFINITY, NAN,   5e-324, -5e-324, 1e-310,
                                       1.7e308, 2.1e9,    -2.2e9,    4.0e9, 9.3e18, -9.3e18};
  static const int8_t kEdges8[] = {0, 1, -1, 2, -2, INT8_MIN, INT8_MAX, INT8_MIN + 1, 7};
  static const int16_t kEdges16[] = {0, 1, -1, 2, -2, INT16_MIN, INT16_MAX, INT16_MIN + 1, 255};
  static const uint8_t kEdgesU8[] = {0, 1, 2, 127, 128, 255, 254, 7};
  static const uint16_t kEdgesU16[] = {0, 1, 2, 255, 256, 32767, 32768, 65535, 65534};
  static const uint32_t kEdgesU32[] = {0u,          1u,          2u,          0x7fffffffu,
                                       0x80000000u, 0xffffffffu, 0xfffffffeu, 65536u};
  static const uint64_t kEdgesU64[] = {0u,
                                       1u,
                                       2u,
                                       0x7fffffffffffffffull,
                                       0x8000000000000000ull,
                                       0xffffffffffffffffull,
                                       0xffffffffull,
                                       0x100000000ull};
  // float16 bits: zeros, ones, halves, infinities, NaN, the smallest subnormal, a subnormal,
  // the largest finite, values past every narrow integer's range.
  static const uint16_t kSpecials16[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x4100, 0xc100,
                                         0x3e00, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x8001, 0x0200,
                                         0x7bff, 0xfbff, 0x5bf8, 0xd80a, 0x7800, 0xf800};
  const bool cast_in = inputs == Inputs::kCastFloatIn;
  const bool nonzero = inputs == Inputs::kNonzeroB && second;
  std::mt19937_64 rng(seed * 2 + (second ? 1 : 0));
  std::vector<uint8_t> bytes(static_cast<size_t>(kElements) * Bytes(t));
  // An integer of type I for element k (RandomInt), never 0 where b must not be.
  auto put_int = [&](auto v, uint8_t* at) {
    if (nonzero && v == 0) v = 3;
    std::memcpy(at, &v, sizeof(v));
  };
  for (int64_t k = 0; k < kElements; ++k) {
    uint8_t* at = bytes.data() + k * Bytes(t);
    const uint64_t r = rng();
    if (t == ir::Int(8)) {
      put_int(RandomInt(r, k, kEdges8), at);
    } else if (t == ir::Int(16)) {
      put_int(RandomInt(r, k, kEdges16), at);
    } else if (t == ir::UInt(8)) {
      put_int(RandomInt(r, k, kEdgesU8), at);
    } else if (t == ir::UInt(16)) {
      put_int(RandomInt(r, k, kEdgesU16), at);
    } else if (t == ir::UInt(32)) {
      put_int(RandomInt(r, k, kEdgesU32), at);
    } else if (t == ir::UInt(64)) {
      put_int(RandomInt(r, k, kEdgesU64), at);
    } else if (t == ir::Float(16)) {
      uint16_t h = 0;
      if (cast_in && k % 2 == 0) {
        h = ir::FloatToHalf(static_cast<float>(
            static_cast<double>(static_cast<int64_t>(r % 2000001) - 1000000) / 8.0 / 64.0));
      } else if (k % 4 == 3) {
        h = kSpecials16[r % (sizeof(kSpecials16) / sizeof(kSpecials16[0]))];
      } else if (k % 4 == 2) {
        h = ir::FloatToHalf(static_cast<float>(static_cast<double>(r % 20001) / 1000.0 - 10.0));
      } else {
        h = static_cast<uint16_t>(r);
        if ((h & 0x7c00u) == 0x7c00u) h ^= 0x0400u;  // not infinity or NaN
      }
      std::memcpy(at, &h, 2);
    } else if (t == ir::Int(32)) {
      int32_t v = RandomInt(r, k, kEdges32);
      if (nonzero && v == 0) v = 3;
      std::memcpy(at, &v, 4);
    } else if (t == ir::Int(64)) {
      int64_t v = RandomInt(r, k, kEdges64);
      if (nonzero && v == 0) v = 3;
      std::memcpy(at, &v, 8);
    } else if (t == ir::Float(32)) {
      const float v = RandomFloat<float, uint32_t>(r, k, cast_in, kSpecials32);
      std::memcpy(at, &v, 4);
    } else {
      const double v = RandomFloat<double, uint64_t>(r, k, cast_in, kSpecials64);
      std::memcpy(at, &v, 8);
    }
  }
  return bytes;
}

// Float64 clauses skip on a device that says it lacks float64 (BP_ATTR_SUPPORTS_FP64 is 0).
// Float16 clauses run everywhere: BP_ATTR_SUPPORTS_FP16 says whether the device computes in
// float16 natively, and a code generator may run float16 without it (opencl without
// cl_khr_fp16 computes in float and rounds to half after every operation); one that cannot
// refuses with BP_ERR_UNSUPPORTED at the build or the launch, which skips the clause with the
// refusal as the reason (RunExact's `optional`).
void SkipWithoutFloatType(Context& ctx, DType t) {
  if (t != ir::Float(64)) return;
  ctx.Load();
  ctx.SetUpDevice();
  try {
    const Any v = DeviceAPI::Get(Device(ctx.dev)).GetAttr(BP_ATTR_SUPPORTS_FP64);
    if (!v.is_none() && v.AsInt() == 0)
      Skip(DeviceString(ctx.dev) + " does not compute in float64 (BP_ATTR_SUPPORTS_FP64 is 0)");
  } catch (const Error&) {
  }
}

// A construct over a[i] (and b[i]) of dtype `t`.
void RunConstruct(Context& ctx, const Construct& c, DType t, const std::string& clause) {
  SkipWithoutFloatType(ctx, t);
  const std::string dtype = ir::ToString(t);
  const std::string result = c.result.empty() ? dtype : c.result;
  const std::string params = "a: buffer<" + dtype + ">[" + std::to_string(kElements) +
                             "], b: buffer<" + dtype + ">[" + std::to_string(kElements) +
                             "], c: buffer<" + result + ">[" + std::to_string(kElements) + "]";
  const std::string body = "c[i] = " + c.expr;
  const uint64_t seed = SeedOf(clause);
  std::vector<runner::CheckArg> args = {
      Buffer("a", dtype, RandomElements(t, c.inputs, false, seed)),
      Buffer("b", dtype, RandomElements(t, c.inputs, true, seed)),
      Filled("c", result, kElements, 0xa5)};
  const bool optional =
      c.optional || OptionalDtype(t) ||
      (!c.result.empty() && c.result != "int32" && c.result != "uint32" && c.result != "float32");
  RunExact(
      ctx, clause, [&](bool gpu) { return KernelText(params, body, gpu); }, args, optional);
}

const std::vector<Construct>& Operators() {
  static const std::vector<Construct> kOps = {
      {"add", "a + b", "a[i] + b[i]", "", Inputs::kAny},
      {"sub", "a - b", "a[i] - b[i]", "", Inputs::kAny},
      {"mul", "a * b", "a[i] * b[i]", "", Inputs::kAny},
      {"div", "a / b (integers: truncating, b != 0)", "a[i] / b[i]", "", Inputs::kNonzeroB},
      {"floordiv", "floordiv(a, b) (b != 0 for integers)", "floordiv(a[i], b[i])", "",
       Inputs::kNonzeroB},
      {"floormod", "floormod(a, b) (b != 0 for integers)", "floormod(a[i], b[i])", "",
       Inputs::kNonzeroB},
      {"min", "min(a, b)", "min(a[i], b[i])", "", Inputs::kAny},
      {"max", "max(a, b)", "max(a[i], b[i])", "", Inputs::kAny},
      {"neg", "-a", "-a[i]", "", Inputs::kAny},
      {"select", "select(a < b, a, b)", "select(a[i] < b[i], a[i], b[i])", "", Inputs::kAny},
      {"lt", "a < b", "select(a[i] < b[i], 1, 0)", "int32", Inputs::kAny},
      {"le", "a <= b", "select(a[i] <= b[i], 1, 0)", "int32", Inputs::kAny},
      {"gt", "a > b", "select(a[i] > b[i], 1, 0)", "int32", Inputs::kAny},
      {"ge", "a >= b", "select(a[i] >= b[i], 1, 0)", "int32", Inputs::kAny},
      {"eq", "a == b", "select(a[i] == b[i], 1, 0)", "int32", Inputs::kAny},
      {"ne", "a != b", "select(a[i] != b[i], 1, 0)", "int32", Inputs::kAny},
  };
  return kOps;
}

// The operators of integers only: C's remainder `%` (docs/ir.md, "Interpreter"), by values
// that cover the range, by -1 computed at run time (INT_MIN % -1 is 0, no trap) and by a
// constant (the code generators' unchecked form; GLSL's own % differs on negative operands).
const std::vector<Construct>& IntegerOperators() {
  static const std::vector<Construct> kOps = {
      {"mod", "a % b (C's remainder: the sign of a, b != 0)", "a[i] % b[i]", "", Inputs::kNonzeroB},
      {"mod.minus_one", "a % -1 (0 for every a, INT_MIN too; the divisor computed at run time)",
       "a[i] % (b[i] - b[i] - 1)", "", Inputs::kAny},
      {"mod.constant", "a % 7 and a % 6 (constant divisors)", "a[i] % 7 + a[i] % 6", "",
       Inputs::kAny},
      // C and C++ (OpenCL C, CUDA) leave signed overflow undefined and their compilers fold
      // these tests as if it never happened; the IR wraps, so each is false where the
      // arithmetic wraps.
      {"wrap",
       "+, - and * wrap at the type's width where a compiler may assume they do not: a + b > a, "
       "a - b < a, a * 2 / 2 == a, (-a < 0) == (a > 0)",
       "select(a[i] + b[i] > a[i], 1, 0) + select(a[i] - b[i] < a[i], 2, 0) + "
       "select(a[i] * 2 / 2 == a[i], 4, 0) + select((-a[i] < 0) == (a[i] > 0), 8, 0)",
       "int32", Inputs::kAny},
  };
  return kOps;
}

const std::vector<Construct>& ExactIntrinsics() {
  static const std::vector<Construct> kFns = {
      {"fabs", "fabs(a)", "fabs(a[i])", "", Inputs::kAny},
      {"floor", "floor(a)", "floor(a[i])", "", Inputs::kAny},
      {"ceil", "ceil(a)", "ceil(a[i])", "", Inputs::kAny},
      {"trunc", "trunc(a)", "trunc(a[i])", "", Inputs::kAny},
      {"round", "round(a) (half away from zero)", "round(a[i])", "", Inputs::kAny},
      {"sqrt", "sqrt(a), correctly rounded", "sqrt(a[i])", "", Inputs::kAny},
      // The product's rounding error: 0 where a*b is rounded before the add, so only a fused
      // multiply-add (the IR's: rounded once) passes.
      {"fma", "fma(a, b, -(a * b)), rounded once", "fma(a[i], b[i], -(a[i] * b[i]))", "",
       Inputs::kAny},
  };
  return kFns;
}

// The inexact intrinsics: each with its inputs' domain and its bound in ulps of the IR
// interpreter's result (OpenCL C's full-profile bounds: docs/conformance.md).
struct Inexact {
  std::string name;
  std::string expr;
  double lo, hi;      // inputs uniform in [lo, hi]
  bool positive_exp;  // instead: positive normal values of every exponent
  double ulps;        // the bound (OpenCL C's)
  // The vulkan kind's float32 bound, GLSL's (the Vulkan specification's precision of
  // SPIR-V's GLSL.std.450): `vk_ulps + vk_per_x * |x|` with x the argument of exp or exp2
  // (which the specification bounds by 3 + 2|x| ulp), or, where it bounds nothing, lavapipe's
  // measured error with margin. < 0: the same as `ulps`.
  double vk_ulps = -1, vk_per_x = 0;
  double vk_abs = 0;  // and at least this absolute error (sin, cos: 2^-11; log, log2, tanh: 2^-21)
};

const std::vector<Inexact>& InexactIntrinsics() {
  static const std::vector<Inexact> kFns = {
      {"exp", "exp(a[i])", -87, 88, false, 3, 3, 2 * 1.4426950408889634},
      {"exp2", "exp2(a[i])", -125, 127, false, 3, 3, 2},
      {"log", "log(a[i])", 0, 0, true, 3, 3, 0, 0x1p-21},
      {"log2", "log2(a[i])", 0, 0, true, 3, 3, 0, 0x1p-21},
      {"rsqrt", "rsqrt(a[i])", 0, 0, true, 2},
      // GLSL's tanh loses relative precision near 0 (lavapipe: 89 ulp at x = -0.0104).
      {"tanh", "tanh(a[i])", -10, 10, false, 5, 64, 0, 0x1p-21},
      {"sigmoid", "sigmoid(a[i])", -20, 20, false, 8, 8, 2 * 1.4426950408889634},
      {"erf", "erf(a[i])", -4, 4, false, 16},
      {"sin", "sin(a[i])", -3.14159, 3.14159, false, 4, 4, 0, 0x1p-11},
      {"cos", "cos(a[i])", -3.14159, 3.14159, false, 4, 4, 0, 0x1p-11},
      {"pow", "pow(fabs(a[i]) * 0.0625 + 0.001, b[i] * 0.25)", -40, 40, false, 16, 64},
  };
  return kFns;
}

// Floats of `t`: uniform in [lo, hi], or with `positive_exp` positive normal values of every
// exponent.
std::vector<uint8_t> DomainElements(DType t, double lo_value, double hi_value, bool positive_exp,
                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(kElements) * Bytes(t));
  for (int64_t k = 0; k < kElements; ++k) {
    double v;
    if (positive_exp) {  // 2^e * [1, 2) over the normal exponents
      const int lo = t == ir::Float(32) ? -126 : -1022, hi = t == ir::Float(32) ? 127 : 1023;
      const int e = lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
      v = std::ldexp(1.0 + static_cast<double>(rng() >> 11) * 0x1p-53, e);
    } else {
      v = lo_value + (hi_value - lo_value) * (static_cast<double>(rng() >> 11) * 0x1p-53);
    }
    if (t == ir::Float(32)) {
      const float x = static_cast<float>(v);
      std::memcpy(bytes.data() + k * 4, &x, 4);
    } else {
      std::memcpy(bytes.data() + k * 8, &v, 8);
    }
  }
  return bytes;
}

void RunInexact(Context& ctx, const Inexact& f, DType t, const std::string& clause) {
  SkipWithoutFloatType(ctx, t);
  const std::string dtype = ir::ToString(t);
  const std::string n = std::to_string(kElements);
  const std::string params = "a: buffer<" + dtype + ">[" + n + "], b: buffer<" + dtype + ">[" + n +
                             "], c: buffer<" + dtype + ">[" + n + "]";
  const std::string body = "c[i] = " + f.expr;
  const uint64_t seed = SeedOf(clause);
  const std::vector<runner::CheckArg> args = {
      Buffer("a", dtype, DomainElements(t, f.lo, f.hi, f.positive_exp, seed)),
      Buffer("b", dtype, DomainElements(t, f.lo, f.hi, f.positive_exp, seed + 1)),
      Filled("c", dtype, kElements, 0xa5)};
  const runner::CheckArg& a = args[0];
  auto bound = [&](const std::string& kind, size_t k, double ulp) {
    if (kind != "vulkan" || t != ir::Float(32) || f.vk_ulps < 0) return f.ulps;
    float x;
    std::memcpy(&x, a.bytes.data() + k * 4, 4);
    return std::max(f.vk_ulps + f.vk_per_x * std::fabs(static_cast<double>(x)), f.vk_abs / ulp);
  };
  RunExact(
      ctx, clause, [&](bool gpu) { return KernelText(params, body, gpu); }, args,
      /*optional=*/t == ir::Float(64) || t == ir::Float(16), bound);
}

// A cast from `from` to `to`: in range, and (float to integer) out of range and NaN, which
// the IR defines (NaN gives 0, out of range saturates).
void RunCast(Context& ctx, DType from, DType to, const std::string& clause) {
  SkipWithoutFloatType(ctx, from);
  SkipWithoutFloatType(ctx, to);
  const Construct c{"cast", "", std::string(ir::ToString(to)) + "(a[i])", ir::ToString(to),
                    from.is_float() && !to.is_float() ? Inputs::kCastFloatIn : Inputs::kAny};
  RunConstruct(ctx, c, from, clause);
}

// A float of type `wide` cast to the narrower `narrow` and back in one expression: the value
// rounded to `narrow`, read as `wide`. A compiler that folds wide(narrow(x)) to x (NVIDIA's
// Vulkan compiler did, for float16) skips the rounding; storing the narrow value does not show it.
void RunCastRoundTrip(Context& ctx, DType wide, DType narrow, const std::string& clause) {
  SkipWithoutFloatType(ctx, wide);
  SkipWithoutFloatType(ctx, narrow);
  const std::string w = ir::ToString(wide);
  Construct c{"cast", "", w + "(" + ir::ToString(narrow) + "(a[i]))", w};
  c.optional = OptionalDtype(narrow);
  RunConstruct(ctx, c, wide, clause);
}

// Random int32 elements in [-1000, 1000].
std::vector<uint8_t> SmallI32(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(kElements * 4);
  for (int64_t k = 0; k < kElements; ++k) {
    const int32_t v = static_cast<int32_t>(rng() % 2001) - 1000;
    std::memcpy(bytes.data() + k * 4, &v, 4);
  }
  return bytes;
}

// ---- fmin/fmax with NaN, a fault's text, the order of a store's faults ---------------------

// min and max of floats are IEEE 754-2019's minimumNumber and maximumNumber: with one NaN
// operand the other operand, NaN only when both are, and -0 below +0. Three elements in four
// have a NaN (a's, b's, both; either sign), the fourth the clause's random values or, in one
// of four groups each, zeros of opposite signs either way round or both -0; scalar code, or
// with `vector` 4 lanes a group (every group holds each case).
void RunMinMaxNaN(Context& ctx, DType t, bool vector, const std::string& clause) {
  SkipWithoutFloatType(ctx, t);
  const std::string dtype = ir::ToString(t);
  const std::string n = std::to_string(kElements);
  const uint64_t seed = SeedOf(clause);
  std::vector<uint8_t> a = RandomElements(t, Inputs::kAny, false, seed);
  std::vector<uint8_t> b = RandomElements(t, Inputs::kAny, true, seed);
  const int w = Bytes(t);
  for (int64_t k = 0; k < kElements; ++k) {
    const bool negative = k % 8 >= 4;
    uint8_t nan[8] = {};
    if (t == ir::Float(16)) {
      const uint16_t h = negative ? 0xfe00u : 0x7e00u;
      std::memcpy(nan, &h, 2);
    } else if (t == ir::Float(32)) {
      const uint32_t f = negative ? 0xffc00000u : 0x7fc00000u;
      std::memcpy(nan, &f, 4);
    } else {
      const uint64_t d = negative ? 0xfff8000000000000ull : 0x7ff8000000000000ull;
      std::memcpy(nan, &d, 8);
    }
    if (k % 4 == 0 || k % 4 == 2) std::memcpy(a.data() + k * w, nan, static_cast<size_t>(w));
    if (k % 4 == 1 || k % 4 == 2) std::memcpy(b.data() + k * w, nan, static_cast<size_t>(w));
    if (k % 4 == 3 && k % 16 != 15) {
      // -0 and +0, +0 and -0, -0 and -0: the sign bit alone (every float dtype's top bit).
      std::memset(a.data() + k * w, 0, static_cast<size_t>(w));
      std::memset(b.data() + k * w, 0, static_cast<size_t>(w));
      if (k % 16 != 7) a[static_cast<size_t>((k + 1) * w - 1)] = 0x80;
      if (k % 16 != 3) b[static_cast<size_t>((k + 1) * w - 1)] = 0x80;
    }
  }
  const std::string params = "a: buffer<" + dtype + ">[" + n + "], b: buffer<" + dtype + ">[" + n +
                             "], c: buffer<" + dtype + ">[" + n + "], d: buffer<" + dtype + ">[" +
                             n + "]";
  const std::string body =
      vector ? "if (floormod(i, 4) == 0) {\n"
               "        c[ramp(i, 1, 4)] = min(a[ramp(i, 1, 4)], b[ramp(i, 1, 4)])\n"
               "        d[ramp(i, 1, 4)] = max(a[ramp(i, 1, 4)], b[ramp(i, 1, 4)])\n"
               "      }"
             : "c[i] = min(a[i], b[i])\n      d[i] = max(a[i], b[i])";
  const std::vector<runner::CheckArg> args = {
      Buffer("a", dtype, std::move(a)), Buffer("b", dtype, std::move(b)),
      Filled("c", dtype, kElements, 0xa5), Filled("d", dtype, kElements, 0xa5)};
  RunExact(
      ctx, clause, [&](bool gpu) { return KernelText(params, body, gpu); }, args,
      /*optional=*/OptionalDtype(t) || vector);
}

// A kernel that faults at one element (i = 37): the device's call fails with
// BP_ERR_INVALID_ARGUMENT (or, on a device that runs its queue asynchronously, the next
// synchronization with BP_ERR_DEVICE) and a message that carries the IR interpreter's word for
// word (a device may say first where it raised it: "'construct_kernel' (called by host function
// ...): ").
void RunFault(Context& ctx, const std::string& clause, const std::string& params,
              const std::string& body, const std::vector<runner::CheckArg>& args) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  const std::string text = KernelText(params, body, !RunsCpuCode(ctx.dev));
  std::string want;
  try {
    std::vector<runner::CheckArg> w = args;
    runner::Oracle(ir::Parse(text, clause)).Run("construct", &w);
  } catch (const Error& e) {
    want = e.what();
  }
  if (want.empty()) {
    Fail(
        "the IR interpreter ran the clause's kernel without the fault it was written to raise (a "
        "defect of the kit)\n" +
        text);
  }
  // From the fault on: the interpreter names the function (construct), a device its kernel
  // (construct_kernel on a GPU), each after what ran it.
  const size_t func = want.find("construct");
  if (func != std::string::npos && want.find(": ", func) != std::string::npos)
    want = want.substr(want.find(": ", func) + 2);
  for (const std::string& kind : kinds) {
    const Target target = TargetFor(ctx, kind);
    Module m;
    try {
      m = Build(text, target);
    } catch (const Error& e) {
      SkipIfRefused(e, kind + " on " + DeviceString(ctx.dev));
      Fail(clause + " built by target.build." + kind + " failed: " + e.what() + "\nthe kernel:\n" +
           text);
    }
    std::string got;
    int kind_got = 0;
    try {
      std::vector<runner::CheckArg> out = args;
      const runner::CheckDeviceArgs dargs(out, Device(ctx.dev));
      try {
        m.GetFunction("construct")
            .CallPacked(dargs.values().data(), static_cast<int32_t>(dargs.values().size()));
        dargs.Download(&out);
        DeviceAPI::Get(Device(ctx.dev)).StreamSync(nullptr);
      } catch (const Error&) {
        // The launch's work ends before its buffers are freed, whatever failed (a host that
        // frees memory a faulted launch may still use is what the validation layer flags).
        try {
          DeviceAPI::Get(Device(ctx.dev)).StreamSync(nullptr);
        } catch (const Error&) {
        }
        throw;
      }
    } catch (const Error& e) {
      got = e.what();
      kind_got = e.kind();
    }
    if (got.empty()) {
      Fail(clause + " built by target.build." + kind + " ran on " + DeviceString(ctx.dev) +
           " without an error, where the IR interpreter raises `" + want + "`\nthe kernel:\n" +
           text);
    }
    // BP_ERR_INVALID_ARGUMENT from the call, or BP_ERR_DEVICE from a later synchronization on
    // a device that runs its queue asynchronously ("queued work failed: ...").
    if ((kind_got != BP_ERR_INVALID_ARGUMENT && kind_got != BP_ERR_DEVICE) ||
        got.find(want) == std::string::npos) {
      Fail(clause + " built by target.build." + kind + " on " + DeviceString(ctx.dev) +
           ": the call failed with `" + got + "` (kind " + std::to_string(kind_got) +
           "), which is not BP_ERR_INVALID_ARGUMENT (or BP_ERR_DEVICE at a synchronization) "
           "with the IR interpreter's message `" +
           want + "`\nthe kernel:\n" + text);
    }
    ctx.Detail(kind + ": " + got);
  }
}

// int32 elements in [-1000, 1000], none 0 but element 37.
std::vector<uint8_t> DivisorsZeroAt37(uint64_t seed) {
  std::vector<uint8_t> bytes = SmallI32(seed);
  for (int64_t k = 0; k < kElements; ++k) {
    int32_t v;
    std::memcpy(&v, bytes.data() + k * 4, 4);
    if (v == 0 || k == 37) v = k == 37 ? 0 : 1;
    std::memcpy(bytes.data() + k * 4, &v, 4);
  }
  return bytes;
}

// An int32 input of a fault clause: its name and how its elements are made from a seed.
struct Int32Input {
  const char* name;
  std::vector<uint8_t> (*make)(uint64_t seed);
};

// A fault clause's kernel over int32 buffers of kElements: `inputs` (the k-th made from the
// clause's seed + k), then an output c of zeros, and `body`, which faults where the
// interpreter does (RunFault).
void RunInt32Fault(Context& ctx, const std::string& clause, const std::vector<Int32Input>& inputs,
                   const std::string& body) {
  const std::string n = std::to_string(kElements);
  const uint64_t seed = SeedOf(clause);
  std::string params;
  std::vector<runner::CheckArg> buffers;
  for (size_t k = 0; k < inputs.size(); ++k) {
    params += std::string(inputs[k].name) + ": buffer<int32>[" + n + "], ";
    buffers.push_back(Buffer(inputs[k].name, "int32", inputs[k].make(seed + k)));
  }
  params += "c: buffer<int32>[" + n + "]";
  buffers.push_back(Filled("c", "int32", kElements, 0));
  RunFault(ctx, clause, params, body, buffers);
}

// The division's fault: an expression of 24 loads divided by b[i], whose text (over 200
// characters) the message quotes as the interpreter does, its middle elided.
void RunDivisionFault(Context& ctx, const std::string& clause) {
  const std::string n = std::to_string(kElements);
  std::string sum;
  for (int j = 0; j < 24; ++j)
    sum += (j ? " + " : "") + std::string("a[floormod(i + ") + std::to_string(j) + ", " + n + ")]";
  RunInt32Fault(ctx, clause, {{"a", SmallI32}, {"b", DivisorsZeroAt37}},
                "c[i] = (" + sum + ") / b[i]");
}

// C's remainder by zero: the same fault as a division's.
void RunModFault(Context& ctx, const std::string& clause) {
  RunInt32Fault(ctx, clause, {{"a", SmallI32}, {"b", DivisorsZeroAt37}}, "c[i] = a[i] % b[i] + 1");
}

// A store evaluates its value, then its indices (docs/ir.md, "Interpreter"): where both fault,
// the value's fault is the one reported.
void RunStoreOrderFault(Context& ctx, const std::string& clause) {
  const std::string n = std::to_string(kElements);
  RunInt32Fault(ctx, clause, {{"a", SmallI32}, {"k", SmallI32}, {"b", DivisorsZeroAt37}},
                "c[floormod(i + k[i] / b[i], " + n + ")] = a[i] / b[i] + 1");
}

}  // namespace constructs

// The helpers above are this file's own, as if in an unnamed namespace; constructs.h shares
// some with tests_structural.cc.
using namespace constructs;  // NOLINT(google-build-using-namespace)

void AddConstructTests(std::vector<TestCase>* out) {
  const unsigned needs = kNeedsDevice | kNeedsCodegen;
  std::vector<DType> every(std::begin(kAllDtypes), std::end(kAllDtypes));
  every.insert(every.end(), std::begin(kMoreDtypes), std::end(kMoreDtypes));
  // An operator on one dtype, checked bit for bit against the interpreter.
  const auto add_operator = [&](const Construct& c, DType t) {
    const std::string name = "codegen.construct." + c.name + "." + ir::ToString(t);
    out->push_back({name,
                    std::string(c.what) + " on " + ir::ToString(t) +
                        " matches the IR interpreter bit for bit on random inputs over the "
                        "dtype's range" +
                        (OptionalDtype(t) ? " (a device or code generator may lack the dtype: "
                                            "its refusal skips)"
                                          : ""),
                    "", needs, [c, t, name](Context& ctx) { RunConstruct(ctx, c, t, name); }});
  };
  for (const Construct& c : Operators()) {
    for (DType t : every) add_operator(c, t);
  }
  for (const Construct& c : IntegerOperators()) {
    for (DType t : every) {
      if (!t.is_float()) add_operator(c, t);
    }
  }
  for (const Construct& c : ExactIntrinsics()) {
    for (DType t : kFloatDtypes) {
      const std::string name = "codegen.construct." + c.name + "." + ir::ToString(t);
      out->push_back({name,
                      std::string(c.what) + " on " + ir::ToString(t) +
                          " matches the IR interpreter bit for bit (an exact function)",
                      "", needs, [c, t, name](Context& ctx) { RunConstruct(ctx, c, t, name); }});
    }
  }
  for (const Inexact& f : InexactIntrinsics()) {
    for (DType t : kFloatDtypes) {
      const std::string name = "codegen.construct." + f.name + "." + ir::ToString(t);
      char bound[32];
      std::snprintf(bound, sizeof(bound), "%g", f.ulps);
      out->push_back({name,
                      f.expr + " on " + ir::ToString(t) + " is within " + bound +
                          " ulp of the IR interpreter's result over its domain",
                      "", needs, [f, t, name](Context& ctx) { RunInexact(ctx, f, t, name); }});
    }
  }
  AddStructuralTests(out, needs);
  for (DType t : {ir::Float(32), ir::Float(64), ir::Float(16)}) {
    for (bool vector : {false, true}) {
      const std::string name = std::string("codegen.construct.minmax_nan.") +
                               (vector ? "vector." : "") + ir::ToString(t);
      out->push_back(
          {name,
           std::string("min and max of ") + ir::ToString(t) + (vector ? " vectors" : "") +
               " with a NaN operand give the other operand (NaN only when both are) and "
               "order -0 below +0, as IEEE 754-2019's minimumNumber and maximumNumber, bit "
               "for bit" +
               (OptionalDtype(t) || vector ? " (a device or code generator may lack "
                                             "the type: its refusal skips)"
                                           : ""),
           "", needs, [t, vector, name](Context& ctx) { RunMinMaxNaN(ctx, t, vector, name); }});
    }
  }
  out->push_back({"codegen.construct.fault.division",
                  "an integer division by zero fails the call (or the next synchronization) with "
                  "the IR interpreter's message, its quote of a long expression elided as the "
                  "interpreter's",
                  "", needs,
                  [](Context& ctx) { RunDivisionFault(ctx, "codegen.construct.fault.division"); }});
  out->push_back({"codegen.construct.fault.mod",
                  "a remainder (%) by zero fails the call (or the next synchronization) with "
                  "the IR interpreter's message, as a division by zero",
                  "", needs,
                  [](Context& ctx) { RunModFault(ctx, "codegen.construct.fault.mod"); }});
  out->push_back({"codegen.construct.fault.store_order",
                  "a store evaluates its value, then its indices: with a division by zero in "
                  "both, the value's is the fault reported, as by the IR interpreter",
                  "", needs, [](Context& ctx) {
                    RunStoreOrderFault(ctx, "codegen.construct.fault.store_order");
                  }});
  std::vector<std::pair<DType, DType>> casts;
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      if (from != to) casts.emplace_back(from, to);
    }
  }
  for (DType more : kMoreDtypes) {
    for (DType t : kAllDtypes) {
      casts.emplace_back(more, t);
      casts.emplace_back(t, more);
    }
  }
  for (const std::pair<DType, DType>& trip :
       {std::make_pair(ir::Float(32), ir::Float(16)), std::make_pair(ir::Float(64), ir::Float(16)),
        std::make_pair(ir::Float(64), ir::Float(32))}) {
    const DType wide = trip.first, narrow = trip.second;
    const std::string name = std::string("codegen.construct.cast.round_trip.") +
                             ir::ToString(wide) + "_via_" + ir::ToString(narrow);
    out->push_back({name,
                    std::string(ir::ToString(wide)) + "(" + ir::ToString(narrow) +
                        "(x)) rounds x to " + ir::ToString(narrow) +
                        " and reads it back, bit for bit as the IR interpreter (no compiler "
                        "folds the two casts away; a device or code generator may lack the "
                        "narrower type: its refusal skips)",
                    "", needs, [wide, narrow, name](Context& ctx) {
                      RunCastRoundTrip(ctx, wide, narrow, name);
                    }});
  }
  for (const std::pair<DType, DType>& cast : casts) {
    {
      const DType from = cast.first, to = cast.second;
      const std::string name =
          std::string("codegen.construct.cast.") + ir::ToString(from) + "_to_" + ir::ToString(to);
      out->push_back({name,
                      std::string("casting ") + ir::ToString(from) + " to " + ir::ToString(to) +
                          " as the IR says (integers wrap, floats round to nearest, a float "
                          "to an integer truncates, saturates out of range, NaN gives 0)",
                      "", needs, [from, to, name](Context& ctx) { RunCast(ctx, from, to, name); }});
    }
  }
}

}  // namespace conformance
}  // namespace backplane
