// SPDX-License-Identifier: Apache-2.0
// The IR's float32 exp (backplane/ir/expf.hpp): its accuracy against float64's exp over a
// sweep of every float32 class, its special values, and its C text, which is the definition the
// interpreter compiles (the c target's results are checked against the interpreter's in
// tests/plugins/cpu/codegen_test.cc).
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>

#include <backplane/ir/expf.hpp>
#include <cmath>
#include <limits>
#include <string>

namespace {

using backplane::ir::ExpF32;

float FromBits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

uint32_t Bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

// |got - e^x| in ulps of the float32 nearest e^x (float64's exp is 2^29 times finer).
double UlpError(float got, float x) {
  const double want = std::exp(static_cast<double>(x));
  const float near = static_cast<float>(want);
  if (std::isinf(near)) return std::isinf(got) ? 0.0 : 1e9;
  double ulp = std::nextafter(std::fabs(near), std::numeric_limits<float>::infinity()) -
               static_cast<double>(std::fabs(near));
  if (near == 0.0f) ulp = std::numeric_limits<float>::denorm_min();
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Every 61st float32 bit pattern (70 million; both signs, every exponent, subnormal inputs and
// results), and the 8193 float32 around the worst case of a sweep over every third: within
// 0.5005 ulp (that sweep: 0.50010).
TEST(IrExpF32, IsWithinHalfAnUlpAndAHairOfTheTrueValue) {
  double worst = 0;
  float worst_at = 0;
  int64_t checked = 0;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 61) {
    const float x = FromBits(static_cast<uint32_t>(b));
    if (std::isnan(x)) continue;
    const double e = UlpError(ExpF32(x), x);
    ++checked;
    if (e > worst) {
      worst = e;
      worst_at = x;
    }
  }
  for (uint32_t b = Bits(0x1.63b0b6p-2f) - 4096; b <= Bits(0x1.63b0b6p-2f) + 4096; ++b) {
    const double e = UlpError(ExpF32(FromBits(b)), FromBits(b));
    if (e > worst) {
      worst = e;
      worst_at = FromBits(b);
    }
  }
  EXPECT_GT(checked, 60000000);
  EXPECT_LE(worst, 0.5005) << "at x = " << std::hexfloat << worst_at;
  EXPECT_GT(worst, 0.5) << "the sweep reaches the cases that round the hard way";
}

TEST(IrExpF32, SpecialValuesAndTheEdgesOfTheRange) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(ExpF32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(ExpF32(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(ExpF32(inf), inf);
  EXPECT_EQ(Bits(ExpF32(-inf)), 0u) << "+0";
  EXPECT_EQ(ExpF32(0.0f), 1.0f);
  EXPECT_EQ(ExpF32(-0.0f), 1.0f);
  EXPECT_EQ(ExpF32(1.0f), 0x1.5bf0a8p+1f);
  // The largest x with a finite e^x, and the next float32 above it.
  EXPECT_EQ(ExpF32(0x1.62e42ep+6f), static_cast<float>(std::exp(0x1.62e42ep+6)));
  EXPECT_LT(ExpF32(0x1.62e42ep+6f), inf);
  EXPECT_EQ(ExpF32(0x1.62e430p+6f), inf);
  EXPECT_EQ(ExpF32(1000.0f), inf);
  EXPECT_EQ(ExpF32(std::numeric_limits<float>::max()), inf);
  // Subnormal results, rounded once: e^-103.9 is about 2^-149.9, the smallest subnormal.
  EXPECT_EQ(ExpF32(-103.9f), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(ExpF32(-87.5f), static_cast<float>(std::exp(-87.5)));
  EXPECT_EQ(Bits(ExpF32(-104.0f)), 0u);
  EXPECT_EQ(Bits(ExpF32(-std::numeric_limits<float>::max())), 0u);
  // Tiny arguments: e^x rounds to 1 or its neighbours as the true value does.
  EXPECT_EQ(ExpF32(1e-30f), 1.0f);
  EXPECT_EQ(ExpF32(-0x1p-25f), 1.0f);
  EXPECT_EQ(ExpF32(0x1p-24f), 1.0f + 0x1p-23f) << "e^(2^-24) is just above the midpoint";
  EXPECT_EQ(ExpF32(0x1p-23f), static_cast<float>(std::exp(0x1p-23)));
}

// The text a code generator writes is the definition the interpreter compiled: one statement a
// line, the same tokens.
TEST(IrExpF32, TheCTextIsTheCompiledDefinition) {
  const std::string text = backplane::ir::ExpF32CSource();
  EXPECT_EQ(text.rfind("static inline float bp_expf(float xf) {\n", 0), 0u) << text;
  EXPECT_NE(text.find("\n  const double kd = xc * 0x1.71547652b82fep0 + shift;\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.size() - 2), "}\n");
  std::string squeezed;
  for (char ch : text) {
    if (ch == '\n') continue;
    if (ch == ' ' && !squeezed.empty() && squeezed.back() == ' ') continue;
    squeezed += ch;
  }
  std::string tokens = backplane::ir::ExpF32CSourceTokens();
  auto strip = [](std::string s) {
    std::string out;
    for (char ch : s)
      if (ch != ' ') out += ch;
    return out;
  };
  EXPECT_EQ(strip(squeezed), strip(tokens));
}

}  // namespace
