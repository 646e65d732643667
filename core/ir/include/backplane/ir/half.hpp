// SPDX-License-Identifier: Apache-2.0
// IEEE binary16 <-> float32 and float64, rounding to nearest even: the conversions the
// interpreter, the launch kit (a float16 scalar argument) and the code generators (a float16
// literal) share, so a value rounds the same everywhere.
#ifndef BACKPLANE_IR_HALF_HPP_
#define BACKPLANE_IR_HALF_HPP_

#include <cstdint>
#include <cstring>

namespace backplane {
namespace ir {

// The binary16 bits of `f`, rounded to nearest even (overflow to infinity, NaN stays NaN).
inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {                                      // a subnormal half (or zero)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24: the mantissa shift for 2^-24 units
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));  // rebias the exponent 127 -> 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
// The binary16 bits of `d`, rounded once to nearest even, as C converts a double to _Float16
// and PTX's cvt.rn.f16.f64 does. Through float with round to odd: when the float nearest `d`
// is not exact, the float toward zero with its last bit set stands for it, which rounds to the
// same half as `d` itself (float has 24 bits, more than a half's 11 + 2); a plain float cast
// would round twice (1 + 2^-11 + 2^-40 would give the tie 1 + 2^-11, then 1.0).
inline uint16_t DoubleToHalf(double d) {
  float f = static_cast<float>(d);
  if (d == d && static_cast<double>(f) != d) {
    const bool away = (f < 0 ? -static_cast<double>(f) : static_cast<double>(f)) >
                      (d < 0 ? -d : d);  // f's magnitude is past d's (inf included)
    uint32_t x;
    std::memcpy(&x, &f, sizeof(x));
    if (away) --x;  // the float next toward zero: one less in magnitude
    x |= 1u;
    std::memcpy(&f, &x, sizeof(f));
  }
  return FloatToHalf(f);
}

// The float32 value of the binary16 bits `h` (exact).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    x = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    x = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_HALF_HPP_
