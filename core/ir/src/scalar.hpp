// SPDX-License-Identifier: Apache-2.0
// Internal: the scalar arithmetic that the interpreter and EvalIntExpr share, so that a shape
// or launch extent computes to the same number in both. Integers are held in 64 bits,
// normalized to their dtype (sign-extended for intN, zero-extended for uintN, 0/1 for bool);
// every op wraps at the dtype's width as C does for unsigned types (and as two's complement
// hardware does for signed ones, where C would be undefined).
#ifndef BACKPLANE_IR_SRC_SCALAR_HPP_
#define BACKPLANE_IR_SRC_SCALAR_HPP_

#include <backplane/ir/half.hpp>
#include <backplane/ir/ir.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace backplane {
namespace ir {
namespace detail {

// Reduces `x` to the width of an integer or bool dtype.
inline int64_t WrapInt(uint64_t x, DType t) {
  if (t.is_bool()) return x != 0 ? 1 : 0;
  const int shift = 64 - t.bits;
  if (shift <= 0) return static_cast<int64_t>(x);
  if (t.is_uint()) return static_cast<int64_t>((x << shift) >> shift);
  // Arithmetic right shift of the signed value (two's complement; GCC and Clang define it).
  return static_cast<int64_t>(x << shift) >> shift;
}

// C's truncating division on normalized values; `b` is not 0. INT64_MIN / -1 wraps.
inline int64_t DivTrunc(int64_t a, int64_t b, bool is_unsigned) {
  if (is_unsigned) return static_cast<int64_t>(static_cast<uint64_t>(a) / static_cast<uint64_t>(b));
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  return a / b;
}
inline int64_t ModTrunc(int64_t a, int64_t b, bool is_unsigned) {
  if (is_unsigned) return static_cast<int64_t>(static_cast<uint64_t>(a) % static_cast<uint64_t>(b));
  if (b == -1) return 0;
  return a % b;
}
// Division rounding toward negative infinity, and its remainder (the sign of `b`).
inline int64_t FloorDivInt(int64_t a, int64_t b, bool is_unsigned) {
  int64_t q = DivTrunc(a, b, is_unsigned);
  if (!is_unsigned && ModTrunc(a, b, false) != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
inline int64_t FloorModInt(int64_t a, int64_t b, bool is_unsigned) {
  int64_t r = ModTrunc(a, b, is_unsigned);
  if (!is_unsigned && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// IEEE binary16 <-> float (backplane/ir/half.hpp).
using ::backplane::ir::DoubleToHalf;
using ::backplane::ir::FloatToHalf;
using ::backplane::ir::HalfToFloat;
inline float RoundToHalf(float f) { return HalfToFloat(FloatToHalf(f)); }

// A float value of dtype `t` held as a double: rounded (once) to float32 or float16 as `t` says.
inline double RoundFloat(double v, DType t) {
  if (t.bits == 32) return static_cast<float>(v);
  if (t.bits == 16) return HalfToFloat(DoubleToHalf(v));
  return v;
}

// C's float-to-integer conversion, made total: NaN gives 0 and a value out of the range of
// `t` saturates (C leaves both undefined). Returns the normalized integer.
inline int64_t FloatToInt(double v, DType t) {
  if (t.is_bool()) return v != 0 ? 1 : 0;
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (t.is_uint()) {
    if (v <= 0) return 0;
    const double max = std::ldexp(1.0, t.bits);  // 2^bits, exactly representable
    if (v >= max) return WrapInt(~uint64_t{0}, t);
    return WrapInt(static_cast<uint64_t>(v), t);
  }
  const double lim = std::ldexp(1.0, t.bits - 1);
  if (v >= lim) return WrapInt((uint64_t{1} << (t.bits - 1)) - 1, t);
  if (v < -lim) return WrapInt(~uint64_t{0} << (t.bits - 1), t);
  return static_cast<int64_t>(v);
}

// A normalized integer of dtype `from` as a float of dtype `to`, as C converts it.
inline double IntToFloat(int64_t v, DType from, DType to) {
  if (to.bits == 64) {
    return from.is_uint() ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
  }
  const float f =
      from.is_uint() ? static_cast<float>(static_cast<uint64_t>(v)) : static_cast<float>(v);
  return to.bits == 16 ? RoundToHalf(f) : f;
}

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_SCALAR_HPP_
