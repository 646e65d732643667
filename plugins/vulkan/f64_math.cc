// SPDX-License-Identifier: Apache-2.0
// The float64 math helpers of the GLSL dialect (f64_math.h). How each is computed, and the
// errors measured on lavapipe, are in docs/vulkan.md ("float64 math"); the constants and
// polynomial coefficients come from generated/f64_math_constants.py.
//
// Conventions: a double-double (hi + lo, |lo| <= ulp(hi) / 2) is a dvec2 (x = hi, y = lo).
// Every variable is `precise`: glslang then marks the operations that compute it
// NoContraction, which keeps a driver from fusing or reassociating them (Mesa: "exact") even
// under -fast-math-contract, where the code generator does not decorate the whole module.
// Special values are told apart by their bits (unpackDouble2x32), which no float
// optimization can assume away. There are no loops: a driver's loop limiter (lavapipe's,
// docs/vulkan.md) could otherwise cut one short without a trace.
#include "f64_math.h"

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "generated/f64_math_constants.h"

namespace backplane {
namespace vulkan {

namespace {

// A double as GLSL reads it back exactly (17 significant digits; glslang rounds correctly).
std::string L(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  s += "lf";
  return v < 0 ? "(" + s + ")" : s;
}

// c[0] + v * (c[1] + v * (... + v * c[n - 1])), Horner's rule.
template <size_t N>
std::string Horner(const std::string& v, const double (&c)[N]) {
  std::string s = L(c[N - 1]);
  for (size_t j = N - 1; j-- > 0;) s = L(c[j]) + " + " + v + " * (" + s + ")";
  return s;
}

// The digits of 2/pi (kTwoOverPiDigits) after four zeros (the digits "before the point"), as
// a GLSL constant array of dvec4s.
std::string TwoOverPiTable() {
  using f64::kTwoOverPiDigits;
  std::vector<double> padded(4, 0.0);
  padded.insert(padded.end(), std::begin(kTwoOverPiDigits), std::end(kTwoOverPiDigits));
  while (padded.size() % 4 != 0) padded.push_back(0.0);
  std::string s =
      "const dvec4 bp_d_2opi_digits[" + std::to_string(padded.size() / 4) + "] = dvec4[](";
  for (size_t j = 0; j < padded.size(); j += 4) {
    s += std::string(j ? ", " : "") + "dvec4(" + L(padded[j]) + ", " + L(padded[j + 1]) + ", " +
         L(padded[j + 2]) + ", " + L(padded[j + 3]) + ")";
  }
  return s + ");\n";
}

// |x| mod pi/2 for |x| >= 2^20 (Payne and Hanek), exactly but for the 2^-142 (absolute) that
// the digits of x (2/pi) past the seventh after the point would add. x is cut into four
// 24-bit digits at a multiple E = 24 m of 24 bits, so that the columns of the product x (2/pi)
// (sums of four digit products, each below 2^48, exact in double) have weights 2^(24 (m - n -
// 1)): column m - 1 is the units, the seven after it the fraction; columns above the units are
// multiples of 2^24 and cannot change the quadrant. After the carries, a fraction of 1/2 or
// more becomes its complement, negative, and the next quadrant; the digits are summed as a
// double-double from the smallest and multiplied by pi/2.
std::string RemPio2Large() {
  std::string s =
      "dvec2 bp_d_rem_pio2_large(double ax, out int q) {\n"
      "  int e = int((unpackDouble2x32(ax).y >> 20) & 0x7ffu) - 1023;\n"
      "  int m = e / 24;\n"
      "  precise double s0 = ax * bp_d_pow2(-24 * m);\n"
      "  precise double x0 = floor(s0);\n"
      "  precise double s1 = (s0 - x0) * 16777216.0lf;\n"
      "  precise double x1 = floor(s1);\n"
      "  precise double s2 = (s1 - x1) * 16777216.0lf;\n"
      "  precise double x2 = floor(s2);\n"
      "  precise double x3 = (s2 - x2) * 16777216.0lf;\n";
  // Digits m - 4 .. m + 6 of 2/pi: elements m .. m + 10 of the table (4 zeros first), read as
  // four dvec4s from m / 4 on and picked by m % 4 (dynamic indexing costs lavapipe seconds of
  // compilation per access).
  s += "  int w = m >> 2, o = m & 3;\n";
  for (int v = 0; v < 4; ++v) {
    s += "  dvec4 v" + std::to_string(v) + " = bp_d_2opi_digits[w + " + std::to_string(v) + "];\n";
  }
  const char* comp = "xyzw";
  for (int k = 0; k <= 10; ++k) {
    std::string pick[4];
    for (int o = 0; o < 4; ++o) {
      const int at = o + k;
      pick[o] = "v" + std::to_string(at / 4) + "." + comp[at % 4];
    }
    s += "  precise double f" + std::to_string(k) + " = o == 0 ? " + pick[0] + " : (o == 1 ? " +
         pick[1] + " : (o == 2 ? " + pick[2] + " : " + pick[3] + "));\n";
  }
  // Column m - 1 + t is the sum of x_i f_(t + 3 - i).
  for (int t = 0; t <= 7; ++t) {
    s += "  precise double c" + std::to_string(t) + " = ";
    for (int i = 0; i <= 3; ++i) {
      s += (i ? " + " : "") + std::string("x") + std::to_string(i) + " * f" +
           std::to_string(t + 3 - i);
    }
    s += ";\n";
  }
  for (int t = 7; t >= 1; --t) {
    const std::string c = "c" + std::to_string(t), up = "c" + std::to_string(t - 1);
    s += "  precise double k" + std::to_string(t) + " = floor(" + c +
         " * 5.9604644775390625e-08lf);\n  " + c + " = " + c + " - k" + std::to_string(t) +
         " * 16777216.0lf;\n  " + up + " = " + up + " + k" + std::to_string(t) + ";\n";
  }
  s += "  bool upper = c1 >= 8388608.0lf;\n"
       "  q = (int(mod(c0, 4.0lf)) + (upper ? 1 : 0)) & 3;\n";
  for (int t = 1; t <= 7; ++t) {
    s += "  precise double g" + std::to_string(t) + " = (upper ? 16777215.0lf - c" +
         std::to_string(t) + " : c" + std::to_string(t) + ") * bp_d_pow2(" +
         std::to_string(-24 * t) + ");\n";
  }
  s += "  precise dvec2 acc = dvec2(g7, 0.0lf);\n";
  for (int t = 6; t >= 1; --t) {
    s += "  precise dvec2 a" + std::to_string(t) + " = bp_dd_two_sum(g" + std::to_string(t) +
         ", acc.x);\n  acc = bp_dd_fast_two_sum(a" + std::to_string(t) + ".x, a" +
         std::to_string(t) + ".y + acc.y);\n";
  }
  s += "  precise dvec2 p = bp_dd_two_prod(acc.x, " + L(f64::kPio2) +
       ");\n"
       "  precise double pl = p.y + (acc.x * " +
       L(f64::kPio2Tail) + " + acc.y * " + L(f64::kPio2) +
       ");\n"
       "  precise dvec2 r = bp_dd_fast_two_sum(p.x, pl);\n"
       "  return upper ? -r : r;\n"
       "}\n";
  return s;
}

struct Helper {
  std::vector<std::string> needs;  // helpers it calls
  std::function<std::string()> text;
};

const std::map<std::string, Helper>& Helpers() {
  using namespace f64;  // NOLINT(build/namespaces): the generated constants
  static const std::map<std::string, Helper> kHelpers = {
      // ---- bits, scaling --------------------------------------------------------------------
      {"base",
       {{},
        [] {
          return std::string(
              "double bp_d_inf() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }\n"
              "double bp_d_nan() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }\n"
              "bool bp_d_isnan(double x) {\n"
              "  uvec2 u = unpackDouble2x32(x);\n"
              "  return (u.y & 0x7fffffffu) + (u.x != 0u ? 1u : 0u) > 0x7ff00000u;\n"
              "}\n"
              "// inf or NaN\n"
              "bool bp_d_special(double x) {\n"
              "  return (unpackDouble2x32(x).y & 0x7ff00000u) == 0x7ff00000u;\n"
              "}\n"
              "// 2^n for -1022 <= n <= 1023\n"
              "double bp_d_pow2(int n) { return packDouble2x32(uvec2(0u, uint(n + 1023) << 20)); "
              "}\n"
              "// x 2^n rounded once, |n| <= 2100: a first step keeps a result headed below "
              "2^-1022 normal\n"
              "double bp_d_ldexp(double x, int n) {\n"
              "  precise double y = x;\n"
              "  int m = n;\n"
              "  if (m > 1023) {\n"
              "    y = y * bp_d_pow2(1023);\n"
              "    m = m - 1023;\n"
              "    if (m > 1023) {\n"
              "      y = y * bp_d_pow2(1023);\n"
              "      m = min(m - 1023, 1023);\n"
              "    }\n"
              "  } else if (m < -1022) {\n"
              "    y = y * bp_d_pow2(-969);\n"
              "    m = m + 969;\n"
              "    if (m < -1022) {\n"
              "      y = y * bp_d_pow2(-969);\n"
              "      m = max(m + 969, -1022);\n"
              "    }\n"
              "  }\n"
              "  precise double r = y * bp_d_pow2(m);\n"
              "  return r;\n"
              "}\n");
        }}},
      // ---- double-double arithmetic (Knuth's two-sum, Dekker's product) ---------------------
      {"dd",
       {{},
        [] {
          return std::string(
              "// a + b exactly\n"
              "dvec2 bp_dd_two_sum(double a, double b) {\n"
              "  precise double s = a + b;\n"
              "  precise double v = s - a;\n"
              "  precise double e = (a - (s - v)) + (b - v);\n"
              "  return dvec2(s, e);\n"
              "}\n"
              "// a + b exactly, |a| >= |b| (or a == 0)\n"
              "dvec2 bp_dd_fast_two_sum(double a, double b) {\n"
              "  precise double s = a + b;\n"
              "  precise double e = b - (s - a);\n"
              "  return dvec2(s, e);\n"
              "}\n"
              "// a * b exactly (Dekker), |a|, |b| < 2^995 and no underflow; Vulkan's fma need "
              "not be fused\n"
              "dvec2 bp_dd_two_prod(double a, double b) {\n"
              "  precise double p = a * b;\n"
              "  precise double ta = 134217729.0lf * a;\n"
              "  precise double ah = ta - (ta - a);\n"
              "  precise double al = a - ah;\n"
              "  precise double tb = 134217729.0lf * b;\n"
              "  precise double bh = tb - (tb - b);\n"
              "  precise double bl = b - bh;\n"
              "  precise double e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;\n"
              "  return dvec2(p, e);\n"
              "}\n");
        }}},
      // ---- e^(h + l) ------------------------------------------------------------------------
      {"exp_dd",
       {{"base", "dd"},
        [] {
          return "// e^(hi + lo) for |hi| <= 0.3467, |lo| <= 2^-30: 1 + hi + hi^2 E(hi), then lo "
                 "to first order\n"
                 "double bp_d_exp_core(double hi, double lo) {\n"
                 "  precise double q = hi * hi * (" +
                 Horner("hi", kExpPoly) +
                 ");\n"
                 "  precise dvec2 o = bp_dd_fast_two_sum(1.0lf, hi);\n"
                 "  precise double e1 = 1.0lf + (hi + q);\n"
                 "  precise double t = o.y + (q + lo * e1);\n"
                 "  precise double r = o.x + t;\n"
                 "  return r;\n"
                 "}\n"
                 "// e^(h + l) for |h| <= 746 (beyond: inf or 0), |l| <= 2^-40 |h|: h = k ln2 + "
                 "r, k ln2 in two parts\n"
                 "double bp_d_exp_dd(double h, double l) {\n"
                 "  precise double hc = clamp(h, -746.0lf, 710.0lf);\n"
                 "  precise double k = roundEven(hc * " +
                 L(kInvLn2) +
                 ");\n"
                 "  precise double hi = hc - k * " +
                 L(kLn2Hi) +
                 ";\n"
                 "  precise double lo = l - k * " +
                 L(kLn2Lo) +
                 ";\n"
                 "  precise double r = bp_d_ldexp(bp_d_exp_core(hi, lo), int(k));\n"
                 "  return r;\n"
                 "}\n";
        }}},
      {"exp",
       {{"exp_dd"},
        [] {
          return std::string(
              "double bp_exp(double x) {\n"
              "  precise double r = bp_d_exp_dd(bp_d_isnan(x) ? 0.0lf : x, 0.0lf);\n"
              "  return bp_d_isnan(x) ? x : r;\n"
              "}\n");
        }}},
      {"exp2",
       {{"exp_dd"},
        [] {
          return "// 2^x = 2^k e^(f ln2), k = round(x), f ln2 as a double-double\n"
                 "double bp_exp2(double x) {\n"
                 "  precise double xc = bp_d_isnan(x) ? 0.0lf : clamp(x, -1080.0lf, 1030.0lf);\n"
                 "  precise double k = roundEven(xc);\n"
                 "  precise double f = xc - k;\n"
                 "  precise dvec2 p = bp_dd_two_prod(f, " +
                 L(kLn2) +
                 ");\n"
                 "  precise double lo = p.y + f * " +
                 L(kLn2Tail) +
                 ";\n"
                 "  precise double r = bp_d_ldexp(bp_d_exp_core(p.x, lo), int(k));\n"
                 "  return bp_d_isnan(x) ? x : r;\n"
                 "}\n";
        }}},
      // ---- log(m), x = 2^k m, m in [sqrt(2)/2, sqrt(2)), as a double-double ------------------
      {"log_dd",
       {{"base", "dd"},
        [] {
          return "// log(m) for x = 2^k m > 0 finite (subnormals too), m in [sqrt(2)/2, sqrt(2)): "
                 "2 atanh(s),\n"
                 "// s = f / (2 + f), f = m - 1, with s, s^2, s^3 and 2/3 s^3 as "
                 "double-doubles\n"
                 "dvec2 bp_d_log_m(double x, out int k) {\n"
                 "  bool sub = (unpackDouble2x32(x).y & 0x7ff00000u) == 0u;\n"
                 "  precise double xs = sub ? x * bp_d_pow2(54) : x;\n"
                 "  uvec2 u = unpackDouble2x32(xs);\n"
                 "  uint mh = u.y & 0x000fffffu;\n"
                 "  bool big = mh >= 0x6a09eu;\n"
                 "  k = int(u.y >> 20) - 1023 - (sub ? 54 : 0) + (big ? 1 : 0);\n"
                 "  precise double m = packDouble2x32(uvec2(u.x, mh | (big ? 0x3fe00000u : "
                 "0x3ff00000u)));\n"
                 "  precise double f = m - 1.0lf;\n"
                 "  precise dvec2 d = bp_dd_fast_two_sum(2.0lf, f);\n"
                 "  precise double sh = f / d.x;\n"
                 "  precise dvec2 p = bp_dd_two_prod(sh, d.x);\n"
                 "  precise double sl = (((f - p.x) - p.y) - sh * d.y) / d.x;\n"
                 "  precise dvec2 z0 = bp_dd_two_prod(sh, sh);\n"
                 "  precise double zl = z0.y + 2.0lf * sh * sl;\n"
                 "  precise dvec2 c0 = bp_dd_two_prod(sh, z0.x);\n"
                 "  precise double cl = c0.y + (sh * zl + sl * z0.x);\n"
                 "  precise dvec2 t0 = bp_dd_two_prod(" +
                 L(kTwoThirds) +
                 ", c0.x);\n"
                 "  precise double tl = t0.y + (" +
                 L(kTwoThirds) + " * cl + " + L(kTwoThirdsTail) +
                 " * c0.x);\n"
                 "  precise double u5 = c0.x * z0.x * (" +
                 Horner("z0.x", kLogPoly) +
                 ");\n"
                 "  precise dvec2 r = bp_dd_fast_two_sum(2.0lf * sh, t0.x);\n"
                 "  precise double rl = r.y + ((tl + u5) + 2.0lf * sl);\n"
                 "  return bp_dd_fast_two_sum(r.x, rl);\n"
                 "}\n"
                 "// log(x) = k ln2 + log(m) as a double-double, x > 0 finite\n"
                 "dvec2 bp_d_log_dd(double x) {\n"
                 "  int k;\n"
                 "  precise dvec2 lm = bp_d_log_m(x, k);\n"
                 "  precise double kd = double(k);\n"
                 "  precise dvec2 a = bp_dd_two_sum(kd * " +
                 L(kLn2Hi) +
                 ", lm.x);\n"
                 "  precise double al = a.y + (lm.y + kd * " +
                 L(kLn2Lo) +
                 ");\n"
                 "  return bp_dd_fast_two_sum(a.x, al);\n"
                 "}\n";
        }}},
      {"log",
       {{"log_dd"},
        [] {
          return std::string(
              "double bp_log(double x) {\n"
              "  bool zero = (unpackDouble2x32(x).y & 0x7fffffffu) == 0u && "
              "unpackDouble2x32(x).x == 0u;\n"
              "  bool neg = !zero && (unpackDouble2x32(x).y >> 31) != 0u;\n"
              "  bool sp = bp_d_special(x);\n"
              "  precise double r = bp_d_log_dd(zero || neg || sp ? 1.0lf : x).x;\n"
              "  r = zero ? -bp_d_inf() : r;\n"
              "  r = sp ? x : r;\n"
              "  return neg ? bp_d_nan() : r;\n"
              "}\n");
        }}},
      {"log2",
       {{"log_dd"},
        [] {
          return "// k + log(m) / ln2, the division a double-double product\n"
                 "double bp_log2(double x) {\n"
                 "  bool zero = (unpackDouble2x32(x).y & 0x7fffffffu) == 0u && "
                 "unpackDouble2x32(x).x == 0u;\n"
                 "  bool neg = !zero && (unpackDouble2x32(x).y >> 31) != 0u;\n"
                 "  bool sp = bp_d_special(x);\n"
                 "  int k;\n"
                 "  precise dvec2 lm = bp_d_log_m(zero || neg || sp ? 1.0lf : x, k);\n"
                 "  precise dvec2 p = bp_dd_two_prod(lm.x, " +
                 L(kInvLn2) +
                 ");\n"
                 "  precise double pl = p.y + (lm.x * " +
                 L(kInvLn2Tail) + " + lm.y * " + L(kInvLn2) +
                 ");\n"
                 "  precise dvec2 a = bp_dd_two_sum(double(k), p.x);\n"
                 "  precise double r = a.x + (a.y + pl);\n"
                 "  r = zero ? -bp_d_inf() : r;\n"
                 "  r = sp ? x : r;\n"
                 "  return neg ? bp_d_nan() : r;\n"
                 "}\n";
        }}},
      // ---- pow: e^(y log|x|), the product a double-double; C's special cases ----------------
      {"pow",
       {{"log_dd", "exp_dd"},
        [] {
          return std::string(
              "double bp_pow(double x, double y) {\n"
              "  uvec2 ux = unpackDouble2x32(x);\n"
              "  bool xnan = bp_d_isnan(x), ynan = bp_d_isnan(y);\n"
              "  bool xinf = bp_d_special(x) && !xnan, yinf = bp_d_special(y) && !ynan;\n"
              "  bool xzero = (ux.y & 0x7fffffffu) == 0u && ux.x == 0u;\n"
              "  bool xneg = (ux.y >> 31) != 0u;\n"
              "  precise double ax = abs(x);\n"
              "  bool yint = !ynan && !yinf && trunc(y) == y;\n"
              "  bool yodd = yint && abs(y) < 9007199254740992.0lf && fract(y * 0.5lf) != "
              "0.0lf;\n"
              "  bool finite = !xnan && !ynan && !xinf && !yinf && !xzero;\n"
              "  precise dvec2 lx = bp_d_log_dd(finite ? ax : 1.0lf);\n"
              "  precise double ys = finite ? y : 0.0lf;\n"
              "  precise double e = ys * lx.x;\n"
              "  bool inrange = abs(e) < 746.0lf;\n"
              "  precise double yr = inrange ? ys : 0.0lf;\n"
              "  precise dvec2 p = bp_dd_two_prod(yr, lx.x);\n"
              "  precise double pl = p.y + yr * lx.y;\n"
              "  precise double mag = inrange ? bp_d_exp_dd(p.x, pl) : (e > 0.0lf ? bp_d_inf() : "
              "0.0lf);\n"
              "  mag = xzero ? (y > 0.0lf ? 0.0lf : bp_d_inf()) : mag;\n"
              "  mag = xinf ? (y > 0.0lf ? bp_d_inf() : 0.0lf) : mag;\n"
              "  mag = yinf ? (ax == 1.0lf ? 1.0lf : ((ax > 1.0lf) == (y > 0.0lf) ? bp_d_inf() : "
              "0.0lf)) : mag;\n"
              "  precise double r = xneg && yodd ? -mag : mag;\n"
              "  r = (xneg && !xzero && !xinf && !xnan && !yint && !yinf) || xnan || ynan ? "
              "bp_d_nan() : r;\n"
              "  return (y == 0.0lf || x == 1.0lf) ? 1.0lf : r;\n"
              "}\n");
        }}},
      // ---- sin, cos ---------------------------------------------------------------------------
      {"trig",
       {{"base", "dd"},
        [] {
          return TwoOverPiTable() + RemPio2Large() +
                 "// x = k pi/2 + r, r a double-double (|r| <= pi/4); q = k mod 4. Below 1.6e6, "
                 "pi/2 in four\n"
                 "// parts (Cody and Waite): k times each of the first three is exact for |k| < "
                 "2^20, so the\n"
                 "// reduction is exact but for the last part's rounding; above, Payne and Hanek\n"
                 "dvec2 bp_d_rem_pio2(double x, out int q) {\n"
                 "  if (abs(x) >= 1.6e6lf) {\n"
                 "    int qa;\n"
                 "    dvec2 ra = bp_d_rem_pio2_large(abs(x), qa);\n"
                 "    bool neg = x < 0.0lf;\n"
                 "    q = neg ? (4 - qa) & 3 : qa;\n"
                 "    return neg ? -ra : ra;\n"
                 "  }\n"
                 "  precise double k = roundEven(x * " +
                 L(kTwoOverPi) +
                 ");\n"
                 "  precise double t = x - k * " +
                 L(kPio2_1) +
                 ";\n"
                 "  precise dvec2 a = bp_dd_two_sum(t, -(k * " +
                 L(kPio2_2) +
                 "));\n"
                 "  precise dvec2 b = bp_dd_two_sum(a.x, -(k * " +
                 L(kPio2_3) +
                 "));\n"
                 "  precise double lo = (a.y + b.y) - k * " +
                 L(kPio2_3Tail) +
                 ";\n"
                 "  q = int(mod(k, 4.0lf));\n"
                 "  return bp_dd_fast_two_sum(b.x, lo);\n"
                 "}\n"
                 "// sin(r.x + r.y), |r| <= pi/4\n"
                 "double bp_d_sin_kernel(dvec2 r) {\n"
                 "  precise double z = r.x * r.x;\n"
                 "  precise double s = r.x + (r.x * z * (" +
                 Horner("z", kSinPoly) +
                 ") + r.y * (1.0lf - 0.5lf * z));\n"
                 "  return s;\n"
                 "}\n"
                 "// cos(r.x + r.y), |r| <= pi/4: 1 - z/2 with its rounding error kept\n"
                 "double bp_d_cos_kernel(dvec2 r) {\n"
                 "  precise dvec2 z = bp_dd_two_prod(r.x, r.x);\n"
                 "  precise double hz = 0.5lf * z.x;\n"
                 "  precise double w = 1.0lf - hz;\n"
                 "  precise double c = w + ((((1.0lf - w) - hz) - 0.5lf * z.y) + (z.x * z.x * (" +
                 Horner("z.x", kCosPoly) +
                 ") - r.x * r.y));\n"
                 "  return c;\n"
                 "}\n";
        }}},
      {"sin",
       {{"trig"},
        [] {
          return std::string(
              "double bp_sin(double x) {\n"
              "  bool sp = bp_d_special(x);\n"
              "  int q;\n"
              "  precise dvec2 r = bp_d_rem_pio2(sp ? 0.0lf : x, q);\n"
              "  precise double v = (q & 1) == 0 ? bp_d_sin_kernel(r) : bp_d_cos_kernel(r);\n"
              "  v = (q & 2) == 0 ? v : -v;\n"
              "  v = abs(x) < 7.450580596923828e-09lf ? x : v;  // 2^-27: sin(x) rounds to x\n"
              "  return sp ? bp_d_nan() : v;\n"
              "}\n");
        }}},
      {"cos",
       {{"trig"},
        [] {
          return std::string(
              "double bp_cos(double x) {\n"
              "  bool sp = bp_d_special(x);\n"
              "  int q;\n"
              "  precise dvec2 r = bp_d_rem_pio2(sp ? 0.0lf : x, q);\n"
              "  precise double v = (q & 1) == 0 ? bp_d_cos_kernel(r) : bp_d_sin_kernel(r);\n"
              "  v = ((q + 1) & 2) == 0 ? v : -v;\n"
              "  return sp ? bp_d_nan() : v;\n"
              "}\n");
        }}},
      // ---- tanh --------------------------------------------------------------------------------
      {"tanh",
       {{"exp"},
        [] {
          return "// |x| < atanh(1/2): x + x z Q(z), z = x^2; above: 1 - 2 / (e^(2|x|) + 1), "
                 "which cannot overflow\n"
                 "double bp_tanh(double x) {\n"
                 "  precise double a = abs(x);\n"
                 "  precise double z = a * a;\n"
                 "  precise double small = a + a * z * (" +
                 Horner("(z - " + L(kTanhPolyCenter) + ")", kTanhPoly) +
                 ");\n"
                 "  precise double e = bp_exp(2.0lf * min(a, 22.0lf));\n"
                 "  precise double big = 1.0lf - 2.0lf / (e + 1.0lf);\n"
                 "  precise double r = a < 0.54930614433405489lf ? small : big;\n"
                 "  r = (unpackDouble2x32(x).y >> 31) != 0u ? -r : r;\n"
                 "  return bp_d_isnan(x) ? x : r;\n"
                 "}\n";
        }}},
      // ---- erf ---------------------------------------------------------------------------------
      {"erf",
       {{"exp_dd"},
        [] {
          auto piece = [](double center, const auto& c) {
            return Horner("(a - " + L(center) + ")", c);
          };
          return "// |x| < 1: x (2/sqrt(pi)) + x z P(z), z = x^2, the first product a "
                 "double-double;\n"
                 "// 1 <= |x| < 6: 1 - e^(-x^2) G(x), G in four pieces, x^2 a double-double; "
                 "past 6: 1\n"
                 "double bp_erf(double x) {\n"
                 "  precise double a = bp_d_isnan(x) ? 0.0lf : abs(x);\n"
                 "  precise double z = a * a;\n"
                 "  precise dvec2 p = bp_dd_two_prod(a, " +
                 L(kTwoOverSqrtPi) +
                 ");\n"
                 "  precise double small = p.x + (p.y + (a * " +
                 L(kTwoOverSqrtPiTail) + " + a * z * (" +
                 Horner("(z - " + L(kErfPolyCenter) + ")", kErfPoly) +
                 ")));\n"
                 "  precise double g;\n"
                 "  if (a < " +
                 L(kErfcPolyEnd0) + ") {\n    g = " + piece(kErfcPolyCenter0, kErfcPoly0) +
                 ";\n  } else if (a < " + L(kErfcPolyEnd1) +
                 ") {\n    g = " + piece(kErfcPolyCenter1, kErfcPoly1) + ";\n  } else if (a < " +
                 L(kErfcPolyEnd2) + ") {\n    g = " + piece(kErfcPolyCenter2, kErfcPoly2) +
                 ";\n  } else {\n    g = " + piece(kErfcPolyCenter3, kErfcPoly3) +
                 ";\n  }\n"
                 "  precise double ac = clamp(a, 1.0lf, 6.0lf);\n"
                 "  precise dvec2 s = bp_dd_two_prod(ac, ac);\n"
                 "  precise double big = 1.0lf - bp_d_exp_dd(-s.x, -s.y) * g;\n"
                 "  precise double r = a < 1.0lf ? small : (a < " +
                 L(kErfcPolyEnd3) +
                 " ? big : 1.0lf);\n"
                 "  r = (unpackDouble2x32(x).y >> 31) != 0u ? -r : r;\n"
                 "  return bp_d_isnan(x) ? x : r;\n"
                 "}\n";
        }}},
      // ---- fma: one rounding (Boldo and Melquiond: the sum's tail rounded to odd) ----------
      {"fma",
       {{"base", "dd"},
        [] {
          return std::string(
              "// a + b rounded to odd: an inexact sum gets the neighbour whose last bit is 1\n"
              "double bp_d_add_odd(double a, double b) {\n"
              "  precise dvec2 s = bp_dd_two_sum(a, b);\n"
              "  uvec2 u = unpackDouble2x32(s.x);\n"
              "  bool away = (unpackDouble2x32(s.y).y >> 31) == (u.y >> 31);\n"
              "  uvec2 v = away ? uvec2(u.x + 1u, u.y) : uvec2(u.x - 1u, u.x == 0u ? u.y - 1u : "
              "u.y);\n"
              "  return (s.y == 0.0lf || (u.x & 1u) == 1u) ? s.x : packDouble2x32(v);\n"
              "}\n"
              "// the exponent of finite nonzero x\n"
              "int bp_d_ilogb(double x) {\n"
              "  bool sub = (unpackDouble2x32(x).y & 0x7ff00000u) == 0u;\n"
              "  precise double xs = sub ? x * bp_d_pow2(54) : x;\n"
              "  return int((unpackDouble2x32(xs).y >> 20) & 0x7ffu) - 1023 - (sub ? 54 : 0);\n"
              "}\n"
              "// m 2^-e for x = m 2^e, any e in the range of finite doubles\n"
              "double bp_d_unscale(double x, int e) { return bp_d_ldexp(x, -e); }\n"
              "// a * b + c rounded once. The operands are scaled to the product's or c's "
              "exponent, the\n"
              "// smaller one replaced by a tiny value of its sign when it is below every "
              "rounding\n"
              "// boundary of the larger; the result is scaled back\n"
              "double bp_fma(double a, double b, double c) {\n"
              "  bool simple = bp_d_special(a) || bp_d_special(b) || bp_d_special(c) || a == "
              "0.0lf || b == 0.0lf || c == 0.0lf;\n"
              "  precise double as = simple ? 1.0lf : a;\n"
              "  precise double bs = simple ? 1.0lf : b;\n"
              "  precise double cs = simple ? 1.0lf : c;\n"
              "  int ea = bp_d_ilogb(as), eb = bp_d_ilogb(bs), ec = bp_d_ilogb(cs);\n"
              "  int s = max(ea + eb, ec);\n"
              "  precise double ma = bp_d_unscale(as, ea);\n"
              "  precise double mb = bp_d_unscale(bs, eb);\n"
              "  bool ptiny = ea + eb - s < -110;\n"
              "  ma = ptiny ? sign(ma) * bp_d_pow2(-60) : ma;\n"
              "  mb = ptiny ? sign(mb) * bp_d_pow2(-60) : mb;\n"
              "  precise double mc = ec - s < -110 ? sign(cs) * bp_d_pow2(-120) : "
              "bp_d_unscale(cs, s);\n"
              "  precise double pscale = ptiny ? 1.0lf : bp_d_pow2(ea + eb - s);\n"
              "  precise dvec2 u = bp_dd_two_prod(ma * pscale, mb);\n"
              "  precise dvec2 t = bp_dd_two_sum(mc, u.x);\n"
              "  precise double v = bp_d_add_odd(t.y, u.y);\n"
              "  precise double r = bp_d_ldexp(t.x + v, s);\n"
              "  // A subnormal result rounds to the grid of 2^-1074 in one step: the exact sum, "
              "scaled so\n"
              "  // that the grid is the integers, plus 2^52 (of its sign), rounded as a sum of "
              "three (the\n"
              "  // same rounding to odd), less 2^52\n"
              "  precise double gs = bp_d_pow2(min(1074 + s, 1023));\n"
              "  precise double big = (t.x != 0.0lf ? t.x : v) > 0.0lf ? 4503599627370496.0lf : "
              "-4503599627370496.0lf;\n"
              "  precise dvec2 e1 = bp_dd_two_sum(t.x * gs, v * gs);\n"
              "  precise dvec2 e2 = bp_dd_two_sum(big, e1.x);\n"
              "  precise double z = e2.x + bp_d_add_odd(e2.y, e1.y);\n"
              "  precise double sub = bp_d_ldexp(abs(z - big), -1074);\n"
              "  bool tiny = abs(r) <= bp_d_pow2(-1022) && (t.x != 0.0lf || v != 0.0lf);\n"
              "  r = tiny ? (big > 0.0lf ? sub : -sub) : r;  // an exact 0 stays +0\n"
              "  // c = 0: the product rounded, and its sign when it rounds to 0\n"
              "  precise double plain = c == 0.0lf && a != 0.0lf && b != 0.0lf ? a * b : a * b "
              "+ c;\n"
              "  bool cinf = bp_d_special(c) && !bp_d_isnan(c) && !bp_d_special(a) && "
              "!bp_d_special(b);\n"
              "  return cinf ? c : (simple ? plain : r);\n"
              "}\n");
        }}},
  };
  return kHelpers;
}

}  // namespace

bool IsFloat64MathHelper(const std::string& name) {
  static const std::set<std::string> kNames = {"exp", "exp2", "log",  "log2", "pow",
                                               "sin", "cos",  "tanh", "erf",  "fma"};
  return kNames.count(name) != 0;
}

std::string Float64MathGlsl(const std::set<std::string>& used) {
  std::set<std::string> done;
  std::string out;
  std::function<void(const std::string&)> add = [&](const std::string& name) {
    if (!done.insert(name).second) return;
    const Helper& h = Helpers().at(name);
    for (const std::string& n : h.needs) add(n);
    out += h.text();
  };
  for (const std::string& name : used) add(name);
  return out;
}

}  // namespace vulkan
}  // namespace backplane
