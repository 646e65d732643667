// SPDX-License-Identifier: Apache-2.0
// The C-family emitter's base: names, types, literals, expressions and loads. Statements and
// stores are in c_family_stmt.cc, the run-time checks and fault records in c_family_faults.cc.
#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/expf.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "c_family_internal.hpp"

namespace backplane {
namespace codegen {

namespace {

// C (and C++, OpenCL, CUDA) keywords and common macro names an IR name must not take.
const std::set<std::string>& ReservedWords() {
  static const std::set<std::string> kWords = {
      "auto",     "break",    "case",     "char",     "const",    "continue", "default",
      "do",       "double",   "else",     "enum",     "extern",   "float",    "for",
      "goto",     "if",       "inline",   "int",      "long",     "register", "restrict",
      "return",   "short",    "signed",   "sizeof",   "static",   "struct",   "switch",
      "typedef",  "union",    "unsigned", "void",     "volatile", "while",    "bool",
      "true",     "false",    "half",     "uchar",    "ushort",   "uint",     "ulong",
      "kernel",   "global",   "local",    "private",  "constant", "NULL",     "INFINITY",
      "NAN",      "new",      "delete",   "class",    "this",     "template", "namespace",
      "using",    "operator", "private",  "public",   "friend",   "virtual",  "asm",
      "main",     "errno",    "assert",   "min",      "max",      "abs",      "exp",
      "log",      "sqrt",     "pow",      "floor",    "ceil",     "round",    "trunc",
      "sin",      "cos",      "tanh",     "erf",      "fabs",     "fma",      "memcpy",
      "calloc",   "free",     "int8_t",   "int16_t",  "int32_t",  "int64_t",  "uint8_t",
      "uint16_t", "uint32_t", "uint64_t", "blockIdx", "threadIdx"};
  return kWords;
}

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

// ---- Base ---------------------------------------------------------------------------------

std::string CFamilyEmitter::Emit(const ir::IRModule& module) {
  out_.str("");
  pending_.assign(1, {});
  vector_types_.clear();
  uses_floordiv_ = false;
  float_to_int_.clear();
  sites_.clear();
  helpers_.clear();
  if (checks_.bounds_check && !HasFaultRecord()) {
    throw ir::Error(ir::ErrorKind::kValue,
                    std::string(DialectName()) +
                        " code generator: bounds checking (-bounds-check) is not supported for "
                        "this target yet; build without it");
  }
  // Loops with a step become loops by 1 over a counter (the dialects write loops by 1).
  const ir::IRModule lowered = ir::LowerLoopSteps(module);
  assignable_.clear();
  shared_allocs_.clear();
  for (const ir::PrimFunc& f : lowered.functions()) {
    func_ = &f;
    overflow_ =
        SignedArithmeticWraps() ? ir::SignedOverflowNodes{} : ir::SignedOverflowRiskNodes(f);
    indent_ = 0;
    parallel_depth_ = 0;
    temp_counter_ = 0;
    stack_bytes_ = 0;
    EmitFunction(f);
    out_ << "\n";
  }
  func_ = nullptr;
  return Prelude() + "\n" + out_.str();
}

void CFamilyEmitter::Fail(const std::string& what) const {
  std::string where = func_ != nullptr ? "in function '" + func_->name + "': " : "";
  throw ir::Error(ir::ErrorKind::kValue,
                  std::string(DialectName()) + " code generator: " + where + what);
}

void CFamilyEmitter::Unsupported(const std::string& what) const {
  std::string where = func_ != nullptr ? "in function '" + func_->name + "': " : "";
  throw ir::Error(ir::ErrorKind::kUnsupported,
                  std::string(DialectName()) + " code generator: " + where + what);
}

bool CFamilyEmitter::MentionsAssignable(const ir::Expr& e) const {
  if (assignable_.empty() || !e) return false;
  return ir::AnyExpr(e, [&](const ir::Expr& x) {
    return x.kind() == ExprKind::kVar && assignable_.count(x.As<ir::VarNode>()) != 0;
  });
}

std::string CFamilyEmitter::Temp() { return "bp_t" + std::to_string(temp_counter_++); }

void CFamilyEmitter::Line(const std::string& text) {
  if (pending_.size() != 1) {
    Fail("a statement was emitted inside an expression's arm (a bug of the code generator)");
  }
  const std::string pad(static_cast<size_t>(indent_) * 2, ' ');
  for (const std::string& line : pending_[0]) out_ << pad << line << "\n";
  pending_[0].clear();
  out_ << pad << text << "\n";
}

std::string CFamilyEmitter::Name(const std::string& ir_name) const {
  if (ReservedWords().count(ir_name) != 0 || ir_name.rfind("bp_", 0) == 0 ||
      ir_name.rfind("__", 0) == 0) {
    return ir_name + "_u";
  }
  return ir_name;
}

std::string CFamilyEmitter::TypeName(DType t) {
  std::string scalar;
  switch (t.code) {
    case ir::DTypeCode::kInt:
      scalar = "int" + std::to_string(t.bits) + "_t";
      break;
    case ir::DTypeCode::kUInt:
      scalar = "uint" + std::to_string(t.bits) + "_t";
      break;
    case ir::DTypeCode::kFloat:
      scalar = t.bits == 16 ? "_Float16" : t.bits == 32 ? "float" : "double";
      break;
    case ir::DTypeCode::kBool:
      scalar = "bool";
      break;
    case ir::DTypeCode::kHandle:
      return "void*";
  }
  if (t.lanes == 1) return scalar;
  if (!HasVectorTypes()) {
    Unsupported("vector type " + ir::ToString(t) + " is not supported; write scalar code");
  }
  if (!IsPowerOfTwo(t.lanes) || t.lanes > 64) {
    Fail("vector type " + ir::ToString(t) + " has " + std::to_string(t.lanes) +
         " lanes; vectors need a power of two up to 64 lanes (2, 4, 8, 16)");
  }
  // GNU vectors of _Bool do not exist: bool lanes are int8 holding 0 or 1.
  std::string element = t.is_bool() ? "int8_t" : scalar;
  std::string name = "bp_" + ir::ToString(t);
  int bytes = (t.is_bool() ? 8 : t.bits) / 8 * t.lanes;
  vector_types_.insert("typedef " + element + " " + name + " __attribute__((vector_size(" +
                       std::to_string(bytes) + ")));");
  return name;
}

std::string CFamilyEmitter::ThreadIndex(ir::ThreadTag tag) {
  Fail(std::string("a loop is bound to ") + ir::ToString(tag) + ", but the " + DialectName() +
       " target has no GPU threads; use parallel/vectorized loops, or build for a GPU target");
}

std::string CFamilyEmitter::BarrierStatement() {
  Fail(std::string("barrier has no meaning for the ") + DialectName() + " target");
}

std::string CFamilyEmitter::StorageQualifier(ir::StorageScope) { return ""; }

void CFamilyEmitter::EmitLoopPragma(const ir::ForNode&, const std::string&) {}
std::string CFamilyEmitter::ParallelRegionCondition(const ir::ForNode&, const std::string&) {
  return std::string();
}

std::string CFamilyEmitter::CallPacked(const ir::CallPackedNode& call) {
  Fail("call_packed(\"" + call.name + "\") cannot run in " + DialectName() + " device code");
}

std::string CFamilyEmitter::IntrinsicName(const std::string& name, DType t) {
  return t.bits == 32 ? name + "f" : name;
}

void CFamilyEmitter::EmitLoop(const ir::ForNode& loop, const std::string& type,
                              const std::string& var, const std::string& begin,
                              const std::string& end) {
  Line("for (" + type + " " + var + " = " + begin + "; " + var + " < " + end + "; ++" + var +
       ") {");
  ++indent_;
  EmitStmt(loop.body);
  --indent_;
  Line("}");
}

std::string CFamilyEmitter::CastText(const std::string& type, const std::string& operand) {
  return "(" + type + ")" + operand;
}

void CFamilyEmitter::EmitZeroedArray(const std::string& declaration, const std::string&,
                                     const std::string&, int64_t) {
  Line(declaration + " = {0};");
}

std::string CFamilyEmitter::FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                                        DType) {
  // min(x, y): x when x < y; else y when y < x or x is NaN; else (equal, or y NaN) x when y is
  // NaN or x is -0, y otherwise; max alike. Nested selects on compares, which compilers
  // vectorize (a call of fminf would not be, nor does it order the zeros). Not one condition
  // `x < y || isnan(y) || (x == y && signbit(x))`: GCC 12 with -fno-trapping-math takes the
  // `x == y` of that for `!(x < y)` when y is a constant, and picked a NaN x over infinity.
  const std::string lt = is_max ? " > " : " < ";
  return "(" + x + lt + y + " ? " + x + " : (" + y + lt + x + " || " + IsNanText(x) + ") ? " + y +
         " : (" + IsNanText(y) + " || " + (is_max ? "!" : "") + "signbit(" + x + ")) ? " + x +
         " : " + y + ")";
}

std::string CFamilyEmitter::FloatToInt(const std::string& x, DType from, DType to) {
  const std::string name = "bp_to_f" + std::to_string(from.bits) + "_" + ir::ToString(to);
  float_to_int_.emplace(name, std::make_pair(from, to));
  return name + "(" + x + ")";
}

std::string CFamilyEmitter::FloorDivHelpers(const std::string& qualifiers) {
  return "\n" + qualifiers +
         " int64_t bp_floordiv(int64_t a, int64_t b) {\n"
         "  int64_t q = a / b;\n"
         "  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
         "}\n" +
         qualifiers +
         " int64_t bp_floormod(int64_t a, int64_t b) {\n"
         "  int64_t r = a % b;\n"
         "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
         "}\n";
}

std::string CFamilyEmitter::NumericHelpers() {
  std::string text;
  for (const auto& [name, types] : float_to_int_) {
    const auto& [from, to] = types;
    const std::string T = TypeName(to), F = TypeName(from);
    std::string body;
    if (to.is_uint()) {
      const int64_t max = to.bits == 64 ? -1 : static_cast<int64_t>((uint64_t{1} << to.bits) - 1);
      body = "x <= " + FloatLiteral(-1.0, from) + " ? " + CastText(T, "0") +
             " : x >= " + FloatLiteral(std::ldexp(1.0, to.bits), from) + " ? " +
             EmitIntLiteral(max, to) + " : " + CastText(T, "x");
    } else {
      const double lim = std::ldexp(1.0, to.bits - 1);
      const int64_t max = static_cast<int64_t>((uint64_t{1} << (to.bits - 1)) - 1);
      body = "x >= " + FloatLiteral(lim, from) + " ? " + EmitIntLiteral(max, to) + " : x < " +
             FloatLiteral(-lim, from) + " ? " + EmitIntLiteral(-max - 1, to) + " : " +
             CastText(T, "x");
    }
    text += HelperQualifier() + " " + T + " " + name + "(" + F + " x) {\n  return " +
            IsNanText("x") + " ? " + CastText(T, "0") + " : " + body + ";\n}\n";
  }
  return text;
}

std::string CFamilyEmitter::FloatDivision(const std::string& x, const std::string& y, DType) {
  return "(" + x + " / " + y + ")";
}

std::string CFamilyEmitter::FloatLiteral(double v, DType t) {
  // float16: the value of the half nearest v (rounded once, as the interpreter rounds it),
  // written as the float32 it is exactly.
  if (t.bits == 16 && !std::isnan(v)) v = ir::HalfToFloat(ir::DoubleToHalf(v));
  std::string text;
  if (std::isnan(v)) {
    text = "NAN";
  } else if (std::isinf(v)) {
    text = v < 0 ? "(-INFINITY)" : "INFINITY";
  } else {
    char buf[64];
    std::snprintf(buf, sizeof(buf), t.bits == 64 ? "%.17g" : "%.9g", v);
    text = buf;
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    if (t.bits != 64) text += "f";
  }
  if (t.bits == 64 && (std::isnan(v) || std::isinf(v))) return "((double)" + text + ")";
  if (t.bits == 16) return "((" + TypeName(t.Element()) + ")" + text + ")";
  return text;
}

std::string CFamilyEmitter::EmitIntLiteral(int64_t v, DType t) {
  if (t.is_bool()) return v != 0 ? "1" : "0";
  // 64-bit literals take the suffix `l` and a cast to the type: OpenCL C's long is 64 bits
  // and its `long long` is reserved (PoCL's clang gives `2ull` a type wider than 64 bits, so
  // `a * 2ull` did not wrap at 64 bits), while in C and C++ a decimal literal with `l` that
  // does not fit a long takes the next wider type.
  if (t.is_uint()) {
    std::string text = std::to_string(static_cast<uint64_t>(v)) + "u";
    if (t.bits == 64) return "((" + TypeName(t) + ")" + text + "l)";
    return t.bits == 32 ? text : "((" + TypeName(t) + ")" + text + ")";
  }
  if (t.bits == 64) {
    if (v == INT64_MIN) return "((" + TypeName(t) + ")(-9223372036854775807l - 1))";
    return "((" + TypeName(t) + ")" + std::to_string(v) + "l)";
  }
  std::string text;
  if (t.bits == 32 && v == INT32_MIN) {
    text = "(-2147483647 - 1)";
  } else {
    text = v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
  }
  return t.bits == 32 ? text : "((" + TypeName(t) + ")" + text + ")";
}

std::vector<ir::Expr> CFamilyEmitter::AsIndexed(const std::vector<ir::Expr>& indices) {
  if (!WideIndices()) return indices;
  std::vector<ir::Expr> wide;
  wide.reserve(indices.size());
  for (const ir::Expr& i : indices) wide.push_back(ir::WidenIndex(i));
  return wide;
}

std::string CFamilyEmitter::FlatIndex(const ir::Buffer& buffer,
                                      const std::vector<ir::Expr>& indices) {
  // Strings of the indices; vector indices are not flattened here (EmitLoad handles them).
  const ir::BufferNode& b = *buffer.get();
  const std::vector<ir::Expr> wide = AsIndexed(indices);
  if (wide.size() == 1 && b.strides.empty()) return EmitExpr(wide[0]);
  const std::vector<std::string> idx = EmitInOrder(wide);
  std::string flat;
  if (!b.strides.empty()) {
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::string stride = EmitExpr(b.strides[k]);
      flat +=
          (k ? " + " : "") + std::string("(int64_t)(") + idx[k] + ") * (int64_t)(" + stride + ")";
    }
    return flat;
  }
  flat = "(int64_t)(" + idx[0] + ")";
  for (size_t k = 1; k < indices.size(); ++k) {
    const std::string extent = EmitExpr(b.shape[k]);
    flat = "(" + flat + ") * (int64_t)(" + extent + ") + (int64_t)(" + idx[k] + ")";
  }
  return flat;
}

std::string CFamilyEmitter::EmitExprText(const ir::Expr& e) {
  const DType t = e.dtype();
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return EmitIntLiteral(AsIntImm(e)->value, t);
    case ExprKind::kFloatImm:
      return FloatLiteral(e.As<ir::FloatImmNode>()->value, t);
    case ExprKind::kVar:
      return Name(e.As<ir::VarNode>()->name);
    case ExprKind::kBinary: {
      const auto& b = *e.As<ir::BinaryNode>();
      if (t.lanes == 1 && (b.op == BinaryOp::kAnd || b.op == BinaryOp::kOr)) {
        return EmitLogical(b, e);
      }
      const bool native_vector = b.op == BinaryOp::kAdd || b.op == BinaryOp::kSub ||
                                 b.op == BinaryOp::kMul || (b.op == BinaryOp::kDiv && t.is_float());
      if (t.lanes > 1 && (!native_vector || NeedsWrapping(e))) return EmitVectorElementwise(e);
      return EmitBinary(b, e);
    }
    case ExprKind::kNot:
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return "(!" + EmitExpr(e.As<ir::NotNode>()->a) + ")";
    case ExprKind::kNeg: {
      if (t.lanes > 1) return EmitVectorElementwise(e);
      if (NeedsWrapping(e)) {
        return WrappingArithmetic("-", t, ir::UInt(t.bits), "", EmitExpr(e.As<ir::NegNode>()->a));
      }
      const std::string neg = "(-" + EmitExpr(e.As<ir::NegNode>()->a) + ")";
      // C promotes int8/int16 (and their unsigned kinds) to int; the IR wraps at the width.
      if (t.is_integer() && t.bits < 32) return "(" + CastText(TypeName(t), neg) + ")";
      return neg;
    }
    case ExprKind::kSelect: {
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return EmitSelect(*e.As<ir::SelectNode>(), e);
    }
    case ExprKind::kCast: {
      if (t.lanes > 1) return EmitVectorElementwise(e);
      const ir::Expr& value = e.As<ir::CastNode>()->value;
      if (value.dtype().is_float() && t.is_integer()) {
        if (value.dtype().bits == 16) {  // every half is a float: saturate from there
          return FloatToInt(CastText(TypeName(ir::Float32()), "(" + EmitExpr(value) + ")"),
                            ir::Float32(), t);
        }
        return FloatToInt(EmitExpr(value), value.dtype(), t);
      }
      return "(" + CastText(TypeName(t), "(" + EmitExpr(value) + ")") + ")";
    }
    case ExprKind::kLoad:
      return EmitLoad(e);
    case ExprKind::kCall:
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return EmitCall(*e.As<ir::CallNode>());
    case ExprKind::kCallPacked: {
      std::string text = CallPacked(*e.As<ir::CallPackedNode>());
      ++effects_;  // the host may fail, and may write buffers
      ++writes_;
      return text;
    }
    case ExprKind::kRamp: {
      const auto& r = *e.As<ir::RampNode>();
      const std::vector<std::string> ops = EmitInOrder({r.base, r.stride}, /*duplicated=*/true);
      const std::string &base = ops[0], &stride = ops[1];
      std::vector<std::string> lanes;
      // Lanes that may pass the type's range wrap (SignedArithmeticWraps): base + l * stride
      // in the unsigned type.
      const bool wrapping = NeedsWrapping(e);
      const DType u = ir::UInt(t.bits);
      for (int l = 0; l < t.lanes; ++l) {
        if (l == 0) {
          lanes.push_back(base);
        } else if (wrapping) {
          lanes.push_back(WrappingArithmetic("+", t.Element(), u, base,
                                             CastText(TypeName(u), std::to_string(l)) + " * " +
                                                 CastText(TypeName(u), "(" + stride + ")")));
        } else {
          lanes.push_back(base + " + " + std::to_string(l) + " * " + stride);
        }
      }
      return VectorLiteral(t, lanes);
    }
    case ExprKind::kBroadcast: {
      const std::string v = EmitInOrder({e.As<ir::BroadcastNode>()->value}, /*duplicated=*/true)[0];
      return VectorLiteral(t, std::vector<std::string>(static_cast<size_t>(t.lanes), v));
    }
    case ExprKind::kBufferRef:
      Fail("a buffer reference (" + ir::Print(e) + ") is only allowed as a call_packed argument");
  }
  Fail("unknown expression kind in " + ir::Print(e));
}

std::string CFamilyEmitter::FloatFloorDivMod(bool mod, const std::string& x, const std::string& y,
                                             DType t) {
  // floor(a / b) and a - floor(a / b) * b. The interpreter computes a float16 one in float and
  // rounds once (its rule for every float16 operation): so does this, explicitly in float,
  // where C would compute `floor` in double.
  DType c = t.Element();
  std::string a = x, b = y;
  if (c.bits == 16) {
    c = ir::Float32();
    a = "(" + CastText(TypeName(c), x) + ")";
    b = "(" + CastText(TypeName(c), y) + ")";
  }
  const std::string q = IntrinsicName("floor", c) + "(" + FloatDivision(a, b, c) + ")";
  return mod ? "(" + a + " - " + q + " * " + b + ")" : q;
}

bool CFamilyEmitter::NeedsWrapping(const ir::Expr& e) const {
  const DType t = e.dtype().Element();
  if (SignedArithmeticWraps() || !t.is_int() || t.bits < 32) return false;
  if (e.kind() == ExprKind::kBinary) {
    const BinaryOp op = e.As<ir::BinaryNode>()->op;
    if (op != BinaryOp::kAdd && op != BinaryOp::kSub && op != BinaryOp::kMul) return false;
  } else if (e.kind() != ExprKind::kNeg && e.kind() != ExprKind::kRamp) {
    return false;
  }
  return overflow_.nodes.count(e.get()) != 0;
}

std::string CFamilyEmitter::WrappingArithmetic(const std::string& op, DType t, DType u,
                                               const std::string& x, const std::string& y) {
  // Unsigned arithmetic wraps in C and C++ alike; the conversion back to a signed type of the
  // same width keeps the bits (two's complement: C++20 defines it, C and OpenCL C leave it to
  // the implementation, and every compiler here keeps them).
  const std::string un = TypeName(u);
  const std::string left = x.empty() ? CastText(un, "0") : CastText(un, "(" + x + ")");
  return "(" +
         CastText(TypeName(t), "(" + left + " " + op + " " + CastText(un, "(" + y + ")") + ")") +
         ")";
}

std::string CFamilyEmitter::UncheckedRemainder(const std::string& x, const std::string& y,
                                               DType t) {
  // C's %, where nothing checks the divisor (cuda, opencl): by -1 it is x % 1, 0, as the IR
  // says, where INT_MIN % -1 would be undefined (x86 traps on it). The caller made y's text
  // safe to write twice (EmitInOrder's `duplicated`).
  if (t.Element().is_uint()) return "(" + x + " % " + y + ")";
  return "(" + x + " % (" + y + " == -1 ? 1 : " + y + "))";
}

std::string CFamilyEmitter::SignedRemainder(const std::string& x, const std::string& y, DType) {
  return "(" + x + " % " + y + ")";
}

std::string CFamilyEmitter::EmitBinary(const ir::BinaryNode& b, const ir::Expr& e) {
  const DType t = b.dtype;  // result type (bool for comparisons)
  const DType operand = b.a.dtype();
  // min, max and a float floormod write their operands twice.
  const bool duplicated = b.op == BinaryOp::kMin || b.op == BinaryOp::kMax ||
                          (b.op == BinaryOp::kFloorMod && operand.is_float()) ||
                          (b.op == BinaryOp::kMod && operand.is_int() && !HasFaultRecord());
  const std::vector<std::string> ops = EmitInOrder({b.a, b.b}, duplicated);
  const std::string &x = ops[0], &y = ops[1];
  auto wrap = [&](const std::string& text) {
    // C promotes int8/int16 to int; the IR wraps at the type's width. float16: the IR rounds
    // every operation to half, where C may keep a half expression in float (GCC does, for
    // _Float16): a cast rounds it.
    if ((t.is_integer() || t.is_float()) && t.bits < 32) {
      return "(" + CastText(TypeName(t), text) + ")";
    }
    return text;
  };
  const bool division = b.op == BinaryOp::kDiv || b.op == BinaryOp::kFloorDiv ||
                        b.op == BinaryOp::kFloorMod || b.op == BinaryOp::kMod;
  if (division && operand.is_integer() && HasFaultRecord()) {
    return "(" +
           CastText(TypeName(t), "(" + CheckedIntDivision(b.op, operand, x, y, b.b, e) + ")") + ")";
  }
  if (NeedsWrapping(e)) return WrappingArithmetic(ir::ToString(b.op), t, ir::UInt(t.bits), x, y);
  switch (b.op) {
    case BinaryOp::kAdd:
      return wrap("(" + x + " + " + y + ")");
    case BinaryOp::kSub:
      return wrap("(" + x + " - " + y + ")");
    case BinaryOp::kMul:
      // uint16 promotes to int, whose product can overflow: multiply in the unsigned int.
      if (t.is_uint() && t.bits == 16 && !SignedArithmeticWraps()) {
        return WrappingArithmetic("*", t, ir::UInt(32), x, y);
      }
      return wrap("(" + x + " * " + y + ")");
    case BinaryOp::kDiv:
      if (operand.is_float()) return wrap(FloatDivision(x, y, operand));
      return wrap("(" + x + " / " + y + ")");
    case BinaryOp::kFloorDiv:
    case BinaryOp::kFloorMod: {
      const bool mod = b.op == BinaryOp::kFloorMod;
      if (operand.is_float()) return wrap(FloatFloorDivMod(mod, x, y, operand));
      // Unsigned division already rounds toward negative infinity.
      if (operand.is_uint()) return wrap("(" + x + (mod ? " % " : " / ") + y + ")");
      uses_floordiv_ = true;
      return "(" +
             CastText(TypeName(t), std::string(mod ? "bp_floormod(" : "bp_floordiv(") +
                                       CastText("int64_t", "(" + x + ")") + ", " +
                                       CastText("int64_t", "(" + y + ")") + ")") +
             ")";
    }
    case BinaryOp::kMod:
      if (!operand.is_integer())
        Fail("operator % on " + ir::ToString(operand) + " in " + ir::Print(e));
      return wrap(UncheckedRemainder(x, y, operand));
    case BinaryOp::kMin:
      if (operand.is_float()) return FloatMinMax(false, x, y, operand);
      return "(" + x + " < " + y + " ? " + x + " : " + y + ")";
    case BinaryOp::kMax:
      if (operand.is_float()) return FloatMinMax(true, x, y, operand);
      return "(" + x + " > " + y + " ? " + x + " : " + y + ")";
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
    case BinaryOp::kAnd:
    case BinaryOp::kOr:
      // The IR spells its comparison and logical operators as C does.
      return "(" + x + " " + ir::ToString(b.op) + " " + y + ")";
  }
  Fail(std::string("unknown binary operator ") + ir::ToString(b.op));
}

std::string CFamilyEmitter::EmitCall(const ir::CallNode& call) {
  const DType t = call.dtype;
  if (!t.is_float()) {
    Fail("intrinsic " + call.name + " needs a float argument, got " + ir::ToString(t));
  }
  // float16 math runs in float32 and rounds back.
  const DType math = t.bits == 16 ? ir::Float32() : t;
  std::vector<std::string> args = EmitInOrder(call.args);
  for (std::string& a : args) {
    if (t.bits == 16) a = CastText(TypeName(ir::Float32()), "(" + a + ")");
  }
  std::string text;
  if (call.name == "rsqrt") {
    text =
        "(" + FloatLiteral(1.0, math) + " / " + IntrinsicName("sqrt", math) + "(" + args[0] + "))";
  } else if (call.name == "sigmoid") {
    text = "(" + FloatLiteral(1.0, math) + " / (" + FloatLiteral(1.0, math) + " + " +
           IntrinsicName("exp", math) + "(-(" + args[0] + "))))";
  } else {
    text = IntrinsicName(call.name, math) + "(";
    for (size_t i = 0; i < args.size(); ++i) text += (i ? ", " : "") + args[i];
    text += ")";
  }
  return t.bits == 16 ? "(" + CastText(TypeName(t), text) + ")" : text;
}

// A vector expression the language has no operator for, lane by lane:
//   ({ T r; A a = ...; B b = ...; for (int l = 0; l < N; ++l) r[l] = <scalar op>; r; })
std::string CFamilyEmitter::EmitVectorElementwise(const ir::Expr& e) {
  const DType t = e.dtype();
  const std::string r = Temp(), l = Temp();
  std::string decls = TypeName(t) + " " + r + "; ";
  // The operands, emitted in order before any is used.
  std::vector<ir::Expr> operands;
  switch (e.kind()) {
    case ExprKind::kBinary:
      operands = {e.As<ir::BinaryNode>()->a, e.As<ir::BinaryNode>()->b};
      break;
    case ExprKind::kNot:
      operands = {e.As<ir::NotNode>()->a};
      break;
    case ExprKind::kNeg:
      operands = {e.As<ir::NegNode>()->a};
      break;
    case ExprKind::kSelect:
      operands = {e.As<ir::SelectNode>()->cond, e.As<ir::SelectNode>()->a,
                  e.As<ir::SelectNode>()->b};
      break;
    case ExprKind::kCast:
      operands = {e.As<ir::CastNode>()->value};
      break;
    case ExprKind::kCall:
      operands = e.As<ir::CallNode>()->args;
      break;
    default:
      break;
  }
  const std::vector<std::string> texts = EmitInOrder(operands);
  size_t next = 0;
  // Binds the next operand to a temporary and returns its lane-l spelling.
  auto operand = [&](const ir::Expr& x) {
    std::string v = Temp();
    decls += TypeName(x.dtype()) + " " + v + " = " + texts.at(next++) + "; ";
    return x.dtype().lanes > 1 ? v + "[" + l + "]" : v;
  };
  std::string lane;
  const DType st = t.Element();
  switch (e.kind()) {
    case ExprKind::kBinary: {
      const auto& b = *e.As<ir::BinaryNode>();
      std::string x = operand(b.a), y = operand(b.b);
      const DType ot = b.a.dtype().Element();
      switch (b.op) {
        case BinaryOp::kMin:
          lane = ot.is_float() ? FloatMinMax(false, x, y, ot)
                               : "(" + x + " < " + y + " ? " + x + " : " + y + ")";
          break;
        case BinaryOp::kMax:
          lane = ot.is_float() ? FloatMinMax(true, x, y, ot)
                               : "(" + x + " > " + y + " ? " + x + " : " + y + ")";
          break;
        case BinaryOp::kDiv:
          lane = ot.is_integer() && HasFaultRecord() ? CheckedIntDivision(b.op, ot, x, y, b.b, e)
                 : ot.is_float()                     ? FloatDivision(x, y, ot)
                                                     : "(" + x + " / " + y + ")";
          break;
        case BinaryOp::kFloorDiv:
        case BinaryOp::kFloorMod: {
          if (ot.is_integer() && HasFaultRecord()) {
            lane = CheckedIntDivision(b.op, ot, x, y, b.b, e);
            break;
          }
          uses_floordiv_ = true;
          const bool mod = b.op == BinaryOp::kFloorMod;
          lane = ot.is_float()
                     ? FloatFloorDivMod(mod, x, y, ot)
                     : std::string(mod ? "bp_floormod(" : "bp_floordiv(") + x + ", " + y + ")";
          break;
        }
        case BinaryOp::kMod:
          lane = HasFaultRecord() ? CheckedIntDivision(b.op, ot, x, y, b.b, e)
                                  : UncheckedRemainder(x, y, ot);
          break;
        case BinaryOp::kAnd:
          lane = "(" + x + " && " + y + ")";
          break;
        case BinaryOp::kOr:
          lane = "(" + x + " || " + y + ")";
          break;
        default:
          if (NeedsWrapping(e)) {
            lane = WrappingArithmetic(ir::ToString(b.op), ot, ir::UInt(ot.bits), x, y);
          } else if (b.op == BinaryOp::kMul && ot.is_uint() && ot.bits == 16 &&
                     !SignedArithmeticWraps()) {
            lane = WrappingArithmetic("*", ot, ir::UInt(32), x, y);
          } else {
            lane = "(" + x + " " + ir::ToString(b.op) + " " + y + ")";
          }
          break;
      }
      break;
    }
    case ExprKind::kNot:
      lane = "(!" + operand(e.As<ir::NotNode>()->a) + ")";
      break;
    case ExprKind::kNeg:
      lane =
          NeedsWrapping(e)
              ? WrappingArithmetic("-", st, ir::UInt(st.bits), "", operand(e.As<ir::NegNode>()->a))
          : t.is_integer() && t.bits < 32
              ? "(" +
                    CastText(TypeName(t.Element()), "(-" + operand(e.As<ir::NegNode>()->a) + ")") +
                    ")"
              : "(-" + operand(e.As<ir::NegNode>()->a) + ")";
      break;
    case ExprKind::kSelect: {
      const auto& s = *e.As<ir::SelectNode>();
      std::string c = operand(s.cond), x = operand(s.a), y = operand(s.b);
      lane = "(" + c + " ? " + x + " : " + y + ")";
      break;
    }
    case ExprKind::kCast: {
      const ir::Expr& value = e.As<ir::CastNode>()->value;
      const DType from = value.dtype().Element();
      if (from.is_float() && st.is_integer()) {
        lane = from.bits == 16
                   ? FloatToInt(
                         "(" + CastText(TypeName(ir::Float32()), "(" + operand(value) + ")") + ")",
                         ir::Float32(), st)
                   : FloatToInt(operand(value), from, st);
      } else {
        lane = CastText(TypeName(st), "(" + operand(value) + ")");
      }
      break;
    }
    case ExprKind::kCall: {
      const auto& c = *e.As<ir::CallNode>();
      std::vector<std::string> args;
      for (const ir::Expr& a : c.args) args.push_back(operand(a));
      const DType math = st.bits == 16 ? ir::Float32() : st;
      if (c.name == "rsqrt") {
        lane = "(" + FloatLiteral(1.0, math) + " / " + IntrinsicName("sqrt", math) + "(" + args[0] +
               "))";
      } else if (c.name == "sigmoid") {
        lane = "(" + FloatLiteral(1.0, math) + " / (" + FloatLiteral(1.0, math) + " + " +
               IntrinsicName("exp", math) + "(-(" + args[0] + "))))";
      } else {
        lane = IntrinsicName(c.name, math) + "(";
        for (size_t i = 0; i < args.size(); ++i) lane += (i ? ", " : "") + args[i];
        lane += ")";
      }
      break;
    }
    default:
      Fail("cannot emit the vector expression " + ir::Print(e));
  }
  return StatementExpression(decls + "for (int " + l + " = 0; " + l + " < " +
                                 std::to_string(t.lanes) + "; ++" + l + ") " + r + "[" + l +
                                 "] = " + lane + ";",
                             r);
}

std::string CFamilyEmitter::EmitLoad(const ir::Expr& e) {
  const ir::LoadNode& load = *e.As<ir::LoadNode>();
  const DType t = load.dtype;
  const std::string buf = Name(load.buffer.name());
  const int site = AccessSite(load.buffer, checks_.bounds_check ? ir::Print(e) : "");
  ++reads_;
  if (site != 0) {
    ++effects_;  // a fault noted
    return EmitCheckedLoad(load, site);
  }
  if (t.lanes == 1)
    return ElementRead(load.buffer, buf + "[" + FlatIndex(load.buffer, load.indices) + "]");
  // Contiguous: every index scalar but the last, which is ramp(base, 1, lanes).
  ir::Expr base;
  if (Contiguous(load.buffer, load.indices, &base)) {
    std::vector<ir::Expr> idx = load.indices;
    idx.back() = base;
    const std::string flat = FlatIndex(load.buffer, idx);
    contiguous_alignment_ = AlignmentOf(load.buffer, idx);
    std::string text = ContiguousVectorLoad(load.buffer, t, flat);
    contiguous_alignment_ = 1;
    return text;
  }
  const std::string v = Temp();
  // Gather lane by lane.
  const std::string l = Temp();
  std::string decls;
  const std::string flat =
      LaneFlatIndex(load.buffer, load.indices, EmitInOrder(AsIndexed(load.indices)), l, &decls);
  return StatementExpression(TypeName(t) + " " + v + "; " + decls + "for (int " + l + " = 0; " + l +
                                 " < " + std::to_string(t.lanes) + "; ++" + l + ") " + v + "[" + l +
                                 "] = " + ElementRead(load.buffer, buf + "[" + flat + "]") + ";",
                             v);
}

// The flat index of lane `l` of a gather or scatter whose index texts are `lane_idx`: each
// vector index is bound to a temporary declared in `decls` and read at lane `l`.
std::string CFamilyEmitter::LaneFlatIndex(const ir::Buffer& buffer,
                                          const std::vector<ir::Expr>& indices,
                                          std::vector<std::string> lane_idx, const std::string& l,
                                          std::string* decls) {
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    const ir::Expr& i = indices[k];
    if (i.dtype().lanes > 1) {
      std::string iv = Temp();
      *decls += TypeName(i.dtype()) + " " + iv + " = " + lane_idx[k] + "; ";
      lane_idx[k] = iv + "[" + l + "]";
    }
  }
  std::vector<ir::Expr> lane_vars;
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    lane_vars.push_back(ir::Var("bp_lane_index_" + std::to_string(k), ir::Int64()));
  }
  std::string flat = FlatIndex(buffer, lane_vars);
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    const std::string name = Name("bp_lane_index_" + std::to_string(k));
    for (size_t pos; (pos = flat.find(name)) != std::string::npos;) {
      flat.replace(pos, name.size(), "(" + lane_idx[k] + ")");
    }
  }
  return flat;
}

std::string CFamilyEmitter::VectorLiteral(DType t, const std::vector<std::string>& lanes) {
  std::string text = "((" + TypeName(t) + "){";
  for (size_t l = 0; l < lanes.size(); ++l) text += (l ? ", " : "") + lanes[l];
  return text + "})";
}

std::string CFamilyEmitter::ContiguousVectorLoad(const ir::Buffer& buffer, DType t,
                                                 const std::string& flat) {
  const std::string v = Temp();
  return StatementExpression(TypeName(t) + " " + v + "; memcpy(&" + v + ", &" +
                                 Name(buffer.name()) + "[" + flat + "], sizeof(" + v + "));",
                             v);
}

std::string CFamilyEmitter::ContiguousVectorStore(const ir::Buffer& buffer, DType t,
                                                  const std::string& flat,
                                                  const std::string& value) {
  (void)t;
  return "memcpy(&" + Name(buffer.name()) + "[" + flat + "], &" + value + ", sizeof(" + value +
         "));";
}

}  // namespace codegen
}  // namespace backplane
