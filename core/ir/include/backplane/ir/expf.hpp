// SPDX-License-Identifier: Apache-2.0
// The IR's float32 exp: one definition, compiled into the interpreter and written into the
// code the c code generator makes, so the two give the same bits (docs/ir.md, "float32 exp").
//
// Why not the C library's expf: a call cannot be vectorized (glibc's vector expf is offered
// only under -ffast-math), and a loop such as softmax's spent 80 % of its time in it. This one
// is branch-free arithmetic that a vectorizing compiler turns into vector code, and it is as
// accurate: it computes in float64 (x = n ln2 + r, |r| <= ln2 / 2, e^r by its degree-9 Taylor
// polynomial in Estrin's form, whose truncation error is below 2^-36 relative, times 2^n made
// from the bits), then rounds once to float32: at most 0.5001 ulp from the true value (over every
// third float32; tests/core/ir/ir_expf_test.cc sweeps every 61st), and the C library's result for
// all but about 1 in 25,000 inputs. Special values: NaN gives NaN, -inf and x < -103.97 give +0,
// +inf and x > 88.73 give +inf; results below 2^-126 are subnormal, correctly rounded from the
// float64 value.
//
// The function uses no call, no table and no float-to-integer conversion (2^n is made from the
// bits of the rounding constant's sum), so it has no undefined behaviour on any input. It must
// be compiled without contraction (-ffp-contract=off) where the results must match the
// interpreter's; the c target does that unless fast-math-contract is set.
#ifndef BACKPLANE_IR_EXPF_HPP_
#define BACKPLANE_IR_EXPF_HPP_

#include <stdint.h>
#include <string.h>

// The header is C too (without ExpF32CSource), for C that must compute exp as the IR does
// (tests/bench/c_twins.c).
#ifdef __cplusplus
#include <string>

namespace backplane {
namespace ir {
#endif

// Defines the function from its text and ExpF32CSourceTokens() returning that text.
#define BACKPLANE_IR_DEFINE_WITH_SOURCE(...) \
  __VA_ARGS__                                \
  static inline const char* ExpF32CSourceTokens(void) { return #__VA_ARGS__; }

// clang-format off
BACKPLANE_IR_DEFINE_WITH_SOURCE(
static inline float bp_expf(float xf) {
  const double x = (double)xf;
  const double lo = x < -104.0 ? -104.0 : x;
  const double xc = lo > 89.0 ? 89.0 : lo;
  const double shift = 0x1.8p52;
  const double kd = xc * 0x1.71547652b82fep0 + shift;
  const double n = kd - shift;
  const double r = xc - n * 0x1.62e42fefa39efp-1;
  uint64_t bits;
  memcpy(&bits, &kd, sizeof bits);
  const uint64_t scale_bits = (bits + 1023u) << 52;
  double scale;
  memcpy(&scale, &scale_bits, sizeof scale);
  const double r2 = r * r;
  const double r4 = r2 * r2;
  const double p01 = 1.0 + r;
  const double p23 = 0.5 + r * (1.0 / 6.0);
  const double p45 = (1.0 / 24.0) + r * (1.0 / 120.0);
  const double p67 = (1.0 / 720.0) + r * (1.0 / 5040.0);
  const double p89 = (1.0 / 40320.0) + r * (1.0 / 362880.0);
  const double p = (p01 + r2 * p23) + r4 * ((p45 + r2 * p67) + r4 * p89);
  return (float)(p * scale);
})
// clang-format on

#undef BACKPLANE_IR_DEFINE_WITH_SOURCE

#ifdef __cplusplus
// e^x in float32, as the IR defines it (the function above).
inline float ExpF32(float x) { return bp_expf(x); }

// The C text of bp_expf (needs <stdint.h> and <string.h>), one statement a line, for a code
// generator to put in front of the code that calls it.
inline const std::string& ExpF32CSource() {
  static const std::string kText = [] {
    const std::string tokens = ExpF32CSourceTokens();
    std::string out;
    int depth = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const char ch = tokens[i];
      if (ch == '{' || ch == ';') {
        if (ch == '{') ++depth;
        out += ch;
        out += '\n' + std::string(2 * depth, ' ');
        while (i + 1 < tokens.size() && tokens[i + 1] == ' ') ++i;
      } else if (ch == '}') {
        --depth;
        while (!out.empty() && out.back() == ' ') out.pop_back();
        out += "}\n";
      } else {
        out += ch;
      }
    }
    return out;
  }();
  return kText;
}

}  // namespace ir
}  // namespace backplane
#endif

#endif  // BACKPLANE_IR_EXPF_HPP_
