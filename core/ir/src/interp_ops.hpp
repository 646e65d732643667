// SPDX-License-Identifier: Apache-2.0
// Internal: the pieces the interpreter's compiler builds closures from -- element loads and
// stores with bounds checks, and the arithmetic of each dtype, as C computes it (docs/ir.md,
// "Interpreter"). Included by interp_compile.cc only.
#ifndef BACKPLANE_IR_SRC_INTERP_OPS_HPP_
#define BACKPLANE_IR_SRC_INTERP_OPS_HPP_

#include <algorithm>
#include <backplane/ir/expf.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "interp_runtime.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {
namespace detail {
namespace interp {

// IR that verifies but that the interpreter cannot run (the reason ends up in Run's error).
struct CompileError {
  std::string why;
};
[[noreturn]] inline void Fail(const std::string& why) { throw CompileError{why}; }

inline Val I(int64_t v) {
  Val r;
  r.i = v;
  return r;
}
inline Val F(double v) {
  Val r;
  r.f = v;
  return r;
}
inline uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

// The IR's float min and max (docs/ir.md, "Floats"): IEEE 754-2019's minimumNumber and
// maximumNumber. A NaN operand gives the other one, and -0 is below +0 (C's fmin leaves the
// sign of a zero from two zeros unspecified; glibc's depends on the operands' order).
template <typename T>
T MinNum(T x, T y) {
  if (x < y || std::isnan(y)) return x;
  if (y < x || std::isnan(x)) return y;
  return std::signbit(x) ? x : y;
}
template <typename T>
T MaxNum(T x, T y) {
  if (x > y || std::isnan(y)) return x;
  if (y > x || std::isnan(x)) return y;
  return std::signbit(x) ? y : x;
}

// ---- memory -----------------------------------------------------------------------------------

template <Elem K>
struct ElemT;
#define BACKPLANE_IR_INT_ELEM(kind, T)                        \
  template <>                                                 \
  struct ElemT<Elem::kind> {                                  \
    static constexpr size_t kSize = sizeof(T);                \
    static Val Load(const char* p) {                          \
      T x;                                                    \
      std::memcpy(&x, p, sizeof(T));                          \
      return I(static_cast<int64_t>(x));                      \
    }                                                         \
    static void Store(char* p, Val v) {                       \
      const T x = static_cast<T>(static_cast<uint64_t>(v.i)); \
      std::memcpy(p, &x, sizeof(T));                          \
    }                                                         \
  };
BACKPLANE_IR_INT_ELEM(kI8, int8_t)
BACKPLANE_IR_INT_ELEM(kI16, int16_t)
BACKPLANE_IR_INT_ELEM(kI32, int32_t)
BACKPLANE_IR_INT_ELEM(kI64, int64_t)
BACKPLANE_IR_INT_ELEM(kU8, uint8_t)
BACKPLANE_IR_INT_ELEM(kU16, uint16_t)
BACKPLANE_IR_INT_ELEM(kU32, uint32_t)
BACKPLANE_IR_INT_ELEM(kU64, uint64_t)
#undef BACKPLANE_IR_INT_ELEM
template <>
struct ElemT<Elem::kBool> {
  static constexpr size_t kSize = 1;
  static Val Load(const char* p) { return I(*p != 0 ? 1 : 0); }
  static void Store(char* p, Val v) { *p = v.i != 0 ? 1 : 0; }
};
template <>
struct ElemT<Elem::kF16> {
  static constexpr size_t kSize = 2;
  static Val Load(const char* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return F(HalfToFloat(h));
  }
  static void Store(char* p, Val v) {
    const uint16_t h = FloatToHalf(static_cast<float>(v.f));
    std::memcpy(p, &h, 2);
  }
};
template <>
struct ElemT<Elem::kF32> {
  static constexpr size_t kSize = 4;
  static Val Load(const char* p) {
    float x;
    std::memcpy(&x, p, 4);
    return F(x);
  }
  static void Store(char* p, Val v) {
    const auto x = static_cast<float>(v.f);
    std::memcpy(p, &x, 4);
  }
};
template <>
struct ElemT<Elem::kF64> {
  static constexpr size_t kSize = 8;
  static Val Load(const char* p) {
    double x;
    std::memcpy(&x, p, 8);
    return F(x);
  }
  static void Store(char* p, Val v) { std::memcpy(p, &v.f, 8); }
};

inline size_t ElemSize(Elem e) {
  switch (e) {
    case Elem::kI8:
    case Elem::kU8:
    case Elem::kBool:
      return 1;
    case Elem::kI16:
    case Elem::kU16:
    case Elem::kF16:
      return 2;
    case Elem::kI32:
    case Elem::kU32:
    case Elem::kF32:
      return 4;
    default:
      return 8;
  }
}

inline Elem ElemOf(DType t) {
  if (t.is_bool()) return Elem::kBool;
  if (t.is_float()) return t.bits == 16 ? Elem::kF16 : t.bits == 32 ? Elem::kF32 : Elem::kF64;
  const bool u = t.is_uint();
  switch (t.bits) {
    case 8:
      return u ? Elem::kU8 : Elem::kI8;
    case 16:
      return u ? Elem::kU16 : Elem::kI16;
    case 32:
      return u ? Elem::kU32 : Elem::kI32;
    default:
      return u ? Elem::kU64 : Elem::kI64;
  }
}

// Where a load or store is, for its errors. Its text is printed when an error needs it: printed
// for each access as it was compiled, nested loads (a[a[a[...]]]) took time quadratic in depth.
struct Site {
  std::string buffer;
  Expr load;   // a load, or
  Stmt store;  // a store
  std::string Text() const { return load ? Quote(load) : StmtHead(store); }
};
[[noreturn]] inline void ThrowOutOfBounds(const Frame& f, const Site& s, int d, int64_t i,
                                          int64_t ext) {
  throw Error(ErrorKind::kValue, f.run->func->name + ": index " + std::to_string(i) +
                                     " is out of bounds for dimension " + std::to_string(d) +
                                     " of buffer '" + s.buffer + "' (extent " +
                                     std::to_string(ext) + ") in `" + s.Text() + "`");
}
// `e`: the division, printed only now (for each division of a chain as it was compiled, the
// printing was quadratic in the chain's length).
[[noreturn]] inline void ThrowDivZero(const Frame& f, const Expr& e) {
  throw Error(ErrorKind::kValue,
              f.run->func->name + ": integer division by zero in `" + Quote(e) + "`");
}

// An access: index registers (a scalar index is used for every lane) and the closures that
// compute them. Returns the element offset of lane `l`, checking every index.
struct Access {
  int slot = 0;
  int off = 0;  // of the buffer's dims in the frame
  int nd = 0;
  std::vector<int> reg;
  std::vector<int> lanes;
  std::vector<Fn> fns;  // only the non-empty ones
  std::shared_ptr<const Site> site;

  void EvalIndices(Frame& f) const {
    for (const Fn& g : fns) g(f);
  }
  int64_t Offset(const Frame& f, int l) const {
    const Val* r = f.regs.data();
    const int64_t* dims = f.dims.data() + off;
    int64_t o = 0;
    for (int d = 0; d < nd; ++d) {
      const int64_t i =
          r[reg[static_cast<size_t>(d)] + (lanes[static_cast<size_t>(d)] == 1 ? 0 : l)].i;
      if (U(i) >= U(dims[d])) ThrowOutOfBounds(f, *site, d, i, dims[d]);
      o += i * dims[nd + d];
    }
    return o;
  }
};

template <Elem K>
Fn MakeLoad(Access a, int out, int lanes) {
  if (a.nd == 1 && lanes == 1) {  // the common case, without the loops
    const int r0 = a.reg[0];
    return [a = std::move(a), r0, out](Frame& f) {
      a.EvalIndices(f);
      const int64_t i = f.regs[static_cast<size_t>(r0)].i;
      const int64_t ext = f.dims[static_cast<size_t>(a.off)];
      if (U(i) >= U(ext)) ThrowOutOfBounds(f, *a.site, 0, i, ext);
      f.regs[static_cast<size_t>(out)] = ElemT<K>::Load(f.data[static_cast<size_t>(a.slot)] +
                                                        i * f.dims[static_cast<size_t>(a.off + 1)] *
                                                            static_cast<int64_t>(ElemT<K>::kSize));
    };
  }
  return [a = std::move(a), out, lanes](Frame& f) {
    a.EvalIndices(f);
    const char* base = f.data[static_cast<size_t>(a.slot)];
    for (int l = 0; l < lanes; ++l)
      f.regs[static_cast<size_t>(out + l)] =
          ElemT<K>::Load(base + a.Offset(f, l) * static_cast<int64_t>(ElemT<K>::kSize));
  };
}

template <Elem K>
Fn MakeStore(Access a, Fn fv, int rv, int vlanes, int lanes) {
  return [a = std::move(a), fv = std::move(fv), rv, vlanes, lanes](Frame& f) {
    // The value, then the indices, then their bounds: the order every code generator has
    // (docs/ir.md, "Interpreter"), so a store with faults in both reports the value's.
    Eval(fv, f);
    a.EvalIndices(f);
    char* base = f.data[static_cast<size_t>(a.slot)];
    for (int l = 0; l < lanes; ++l)
      ElemT<K>::Store(base + a.Offset(f, l) * static_cast<int64_t>(ElemT<K>::kSize),
                      f.regs[static_cast<size_t>(rv + (vlanes == 1 ? 0 : l))]);
  };
}

// Every atomic statement of every interpreter takes this lock around its read-modify-write: the
// threads of a simulated block that uses barriers run at once.
inline std::mutex& AtomicLock() {
  static std::mutex m;
  return m;
}

// `a` = `a` op `v` on one element of an int32, int64, float32 or float64 buffer (the verifier
// allows no other), computed as the IR's binary + / min / max of that type.
template <Elem K>
Fn MakeAtomic(Access a, Fn fv, int rv, AtomicOp op) {
  return [a = std::move(a), fv = std::move(fv), rv, op](Frame& f) {
    Eval(fv, f);  // the value, then the indices, as a store
    a.EvalIndices(f);
    char* p = f.data[static_cast<size_t>(a.slot)] +
              a.Offset(f, 0) * static_cast<int64_t>(ElemT<K>::kSize);
    const Val v = f.regs[static_cast<size_t>(rv)];
    std::lock_guard<std::mutex> lock(AtomicLock());
    const Val old = ElemT<K>::Load(p);
    Val r;
    if constexpr (K == Elem::kF32) {
      const float x = static_cast<float>(old.f), y = static_cast<float>(v.f);
      r = F(op == AtomicOp::kAdd ? x + y : op == AtomicOp::kMin ? MinNum(x, y) : MaxNum(x, y));
    } else if constexpr (K == Elem::kF64) {
      const double x = old.f, y = v.f;
      r = F(op == AtomicOp::kAdd ? x + y : op == AtomicOp::kMin ? MinNum(x, y) : MaxNum(x, y));
    } else {
      const int64_t x = old.i, y = v.i;
      r = I(op == AtomicOp::kAdd   ? static_cast<int64_t>(U(x) + U(y))
            : op == AtomicOp::kMin ? std::min(x, y)
                                   : std::max(x, y));
    }
    ElemT<K>::Store(p, r);
  };
}

// ---- arithmetic -------------------------------------------------------------------------------

// A compiled expression: its value is in registers [reg, reg + lanes) once fn (if any) ran.
struct CE {
  int reg = 0;
  int lanes = 1;
  Fn fn;
};

template <typename Op>
Fn Lanes2(CE& a, CE& b, int out, Op op) {
  Fn fa = std::move(a.fn), fb = std::move(b.fn);
  const int ra = a.reg, rb = b.reg, lanes = a.lanes;
  if (lanes == 1) {
    return [fa = std::move(fa), fb = std::move(fb), ra, rb, out, op](Frame& f) {
      Eval(fa, f);
      Eval(fb, f);
      Val* r = f.regs.data();
      r[out] = op(f, r[ra], r[rb]);
    };
  }
  return [fa = std::move(fa), fb = std::move(fb), ra, rb, out, lanes, op](Frame& f) {
    Eval(fa, f);
    Eval(fb, f);
    Val* r = f.regs.data();
    for (int l = 0; l < lanes; ++l) r[out + l] = op(f, r[ra + l], r[rb + l]);
  };
}

// `e`: the expression, named by a division's error.
inline Fn IntBinary(BinaryOp op, DType t, CE& a, CE& b, int out, const Expr& e) {
  const bool u = t.is_uint() || t.is_bool();
  switch (op) {
    case BinaryOp::kAdd:
      return Lanes2(a, b, out,
                    [t](Frame&, Val x, Val y) { return I(WrapInt(U(x.i) + U(y.i), t)); });
    case BinaryOp::kSub:
      return Lanes2(a, b, out,
                    [t](Frame&, Val x, Val y) { return I(WrapInt(U(x.i) - U(y.i), t)); });
    case BinaryOp::kMul:
      return Lanes2(a, b, out,
                    [t](Frame&, Val x, Val y) { return I(WrapInt(U(x.i) * U(y.i), t)); });
    case BinaryOp::kDiv:
      return Lanes2(a, b, out, [t, u, e](Frame& f, Val x, Val y) {
        if (y.i == 0) ThrowDivZero(f, e);
        return I(WrapInt(U(DivTrunc(x.i, y.i, u)), t));
      });
    case BinaryOp::kFloorDiv:
      return Lanes2(a, b, out, [t, u, e](Frame& f, Val x, Val y) {
        if (y.i == 0) ThrowDivZero(f, e);
        return I(WrapInt(U(FloorDivInt(x.i, y.i, u)), t));
      });
    case BinaryOp::kFloorMod:
      return Lanes2(a, b, out, [t, u, e](Frame& f, Val x, Val y) {
        if (y.i == 0) ThrowDivZero(f, e);
        return I(WrapInt(U(FloorModInt(x.i, y.i, u)), t));
      });
    case BinaryOp::kMod:  // C's %: the sign of x; INT_MIN % -1 is 0
      return Lanes2(a, b, out, [t, u, e](Frame& f, Val x, Val y) {
        if (y.i == 0) ThrowDivZero(f, e);
        return I(WrapInt(U(ModTrunc(x.i, y.i, u)), t));
      });
    case BinaryOp::kMin:
      return Lanes2(a, b, out, [u](Frame&, Val x, Val y) {
        return (u ? U(x.i) < U(y.i) : x.i < y.i) ? x : y;
      });
    case BinaryOp::kMax:
      return Lanes2(a, b, out, [u](Frame&, Val x, Val y) {
        return (u ? U(x.i) > U(y.i) : x.i > y.i) ? x : y;
      });
    case BinaryOp::kEq:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.i == y.i); });
    case BinaryOp::kNe:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.i != y.i); });
    case BinaryOp::kLt:
      return Lanes2(a, b, out,
                    [u](Frame&, Val x, Val y) { return I(u ? U(x.i) < U(y.i) : x.i < y.i); });
    case BinaryOp::kLe:
      return Lanes2(a, b, out,
                    [u](Frame&, Val x, Val y) { return I(u ? U(x.i) <= U(y.i) : x.i <= y.i); });
    case BinaryOp::kGt:
      return Lanes2(a, b, out,
                    [u](Frame&, Val x, Val y) { return I(u ? U(x.i) > U(y.i) : x.i > y.i); });
    case BinaryOp::kGe:
      return Lanes2(a, b, out,
                    [u](Frame&, Val x, Val y) { return I(u ? U(x.i) >= U(y.i) : x.i >= y.i); });
    case BinaryOp::kAnd:  // vector lanes; scalars short-circuit (Compiler::Binary)
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.i != 0 && y.i != 0); });
    case BinaryOp::kOr:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.i != 0 || y.i != 0); });
  }
  Fail("unknown binary operator");
}

// float32 is computed in float and float16 in float rounded to half after each op, as C
// computes them; float64 in double.
template <int Bits>
struct FloatT {
  using C = std::conditional_t<Bits == 64, double, float>;
  static double Out(C x) {
    if constexpr (Bits == 16) {
      return RoundToHalf(x);
    } else {
      return x;
    }
  }
};

template <int Bits>
Fn FloatBinary(BinaryOp op, CE& a, CE& b, int out) {
  using T = FloatT<Bits>;
  using C = typename T::C;
  switch (op) {
    case BinaryOp::kAdd:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return F(T::Out(C(x.f) + C(y.f))); });
    case BinaryOp::kSub:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return F(T::Out(C(x.f) - C(y.f))); });
    case BinaryOp::kMul:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return F(T::Out(C(x.f) * C(y.f))); });
    case BinaryOp::kDiv:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return F(T::Out(C(x.f) / C(y.f))); });
    case BinaryOp::kFloorDiv:
      return Lanes2(a, b, out,
                    [](Frame&, Val x, Val y) { return F(T::Out(std::floor(C(x.f) / C(y.f)))); });
    case BinaryOp::kFloorMod:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) {
        const C p = C(x.f), q = C(y.f);
        return F(T::Out(p - std::floor(p / q) * q));
      });
    case BinaryOp::kMin:
      return Lanes2(a, b, out,
                    [](Frame&, Val x, Val y) { return F(T::Out(MinNum(C(x.f), C(y.f)))); });
    case BinaryOp::kMax:
      return Lanes2(a, b, out,
                    [](Frame&, Val x, Val y) { return F(T::Out(MaxNum(C(x.f), C(y.f)))); });
    case BinaryOp::kEq:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.f == y.f); });
    case BinaryOp::kNe:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.f != y.f); });
    case BinaryOp::kLt:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.f < y.f); });
    case BinaryOp::kLe:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.f <= y.f); });
    case BinaryOp::kGt:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.f > y.f); });
    case BinaryOp::kGe:
      return Lanes2(a, b, out, [](Frame&, Val x, Val y) { return I(x.f >= y.f); });
    default:
      Fail(std::string("operator ") + ToString(op) + " on floats");
  }
}

inline Val CastVal(Val v, DType from, DType to) {
  if (to.is_float()) return F(from.is_float() ? RoundFloat(v.f, to) : IntToFloat(v.i, from, to));
  return I(from.is_float() ? FloatToInt(v.f, to) : WrapInt(U(v.i), to));
}

enum class Intrin {
  kExp,
  kExp2,
  kLog,
  kLog2,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kErf,
  kFabs,
  kFloor,
  kCeil,
  kRound,
  kTrunc,
  kSin,
  kCos,
  kPow,
  kFma
};

template <typename C>
C Intrinsic(Intrin id, C a, C b, C c) {
  switch (id) {
    case Intrin::kExp:
      if constexpr (std::is_same_v<C, float>) return ExpF32(a);  // the c target's (expf.hpp)
      return std::exp(a);
    case Intrin::kExp2:
      return std::exp2(a);
    case Intrin::kLog:
      return std::log(a);
    case Intrin::kLog2:
      return std::log2(a);
    case Intrin::kSqrt:
      return std::sqrt(a);
    case Intrin::kRsqrt:
      return C(1) / std::sqrt(a);
    case Intrin::kTanh:
      return std::tanh(a);
    case Intrin::kSigmoid:
      if constexpr (std::is_same_v<C, float>) return 1.0f / (1.0f + ExpF32(-a));
      return C(1) / (C(1) + std::exp(-a));
    case Intrin::kErf:
      return std::erf(a);
    case Intrin::kFabs:
      return std::fabs(a);
    case Intrin::kFloor:
      return std::floor(a);
    case Intrin::kCeil:
      return std::ceil(a);
    case Intrin::kRound:
      return std::round(a);
    case Intrin::kTrunc:
      return std::trunc(a);
    case Intrin::kSin:
      return std::sin(a);
    case Intrin::kCos:
      return std::cos(a);
    case Intrin::kPow:
      return std::pow(a, b);
    case Intrin::kFma:
      return std::fma(a, b, c);
  }
  return a;
}

template <int Bits>
Fn MakeIntrinsic(Intrin id, std::vector<CE> args, int out, int lanes) {
  using T = FloatT<Bits>;
  using C = typename T::C;
  std::vector<Fn> fns;
  for (CE& a : args)
    if (a.fn) fns.push_back(std::move(a.fn));
  int reg[3] = {0, 0, 0}, step[3] = {0, 0, 0};
  for (size_t k = 0; k < args.size(); ++k) {
    reg[k] = args[k].reg;
    step[k] = args[k].lanes == 1 ? 0 : 1;
  }
  for (size_t k = args.size(); k < 3; ++k) reg[k] = reg[0];
  return [id, fns = std::move(fns), reg0 = reg[0], reg1 = reg[1], reg2 = reg[2], s0 = step[0],
          s1 = step[1], s2 = step[2], out, lanes](Frame& f) {
    for (const Fn& g : fns) g(f);
    Val* r = f.regs.data();
    for (int l = 0; l < lanes; ++l)
      r[out + l].f = T::Out(
          Intrinsic<C>(id, C(r[reg0 + s0 * l].f), C(r[reg1 + s1 * l].f), C(r[reg2 + s2 * l].f)));
  };
}

}  // namespace interp
}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_INTERP_OPS_HPP_
