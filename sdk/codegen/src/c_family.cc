// SPDX-License-Identifier: Apache-2.0
// The C-family emitter's base (expressions, statements, buffers, vectors) and the C dialect.
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace backplane {
namespace codegen {

using ir::BinaryOp;
using ir::DType;
using ir::ExprKind;
using ir::StmtKind;

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

const ir::IntImmNode* AsIntImm(const ir::Expr& e) { return e.As<ir::IntImmNode>(); }

}  // namespace

// ---- Base ---------------------------------------------------------------------------------

std::string CFamilyEmitter::Emit(const ir::IRModule& module) {
  out_.str("");
  vector_types_.clear();
  uses_floordiv_ = false;
  for (const ir::PrimFunc& f : module.functions()) {
    func_ = &f;
    indent_ = 0;
    parallel_depth_ = 0;
    temp_counter_ = 0;
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

std::string CFamilyEmitter::Temp() { return "bp_t" + std::to_string(temp_counter_++); }

void CFamilyEmitter::Line(const std::string& text) {
  out_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << text << "\n";
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
  if (!HasVectorTypes()) Fail("vector type " + ir::ToString(t) + " is not supported");
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

void CFamilyEmitter::EmitLoopPragma(const ir::ForNode&) {}

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

std::string CFamilyEmitter::FloatLiteral(double v, DType t) {
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
  if (t.is_uint()) {
    std::string text = std::to_string(static_cast<uint64_t>(v)) + "u";
    if (t.bits == 64) text += "ll";
    return t.bits == 32 || t.bits == 64 ? text : "((" + TypeName(t) + ")" + text + ")";
  }
  if (t.bits == 64) {
    if (v == INT64_MIN) return "(-9223372036854775807ll - 1)";
    return "((int64_t)" + std::to_string(v) + "ll)";
  }
  std::string text;
  if (t.bits == 32 && v == INT32_MIN) {
    text = "(-2147483647 - 1)";
  } else {
    text = v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
  }
  return t.bits == 32 ? text : "((" + TypeName(t) + ")" + text + ")";
}

std::string CFamilyEmitter::FlatIndex(const ir::Buffer& buffer,
                                      const std::vector<ir::Expr>& indices) {
  // Strings of the indices; vector indices are not flattened here (EmitLoad handles them).
  const ir::BufferNode& b = *buffer.get();
  if (indices.size() == 1 && b.strides.empty()) return EmitExpr(indices[0]);
  std::string flat;
  if (!b.strides.empty()) {
    for (size_t k = 0; k < indices.size(); ++k) {
      std::string term =
          "(int64_t)(" + EmitExpr(indices[k]) + ") * (int64_t)(" + EmitExpr(b.strides[k]) + ")";
      flat = flat.empty() ? term : flat + " + " + term;
    }
    return flat;
  }
  flat = "(int64_t)(" + EmitExpr(indices[0]) + ")";
  for (size_t k = 1; k < indices.size(); ++k) {
    flat = "(" + flat + ") * (int64_t)(" + EmitExpr(b.shape[k]) + ") + (int64_t)(" +
           EmitExpr(indices[k]) + ")";
  }
  return flat;
}

std::string CFamilyEmitter::EmitExpr(const ir::Expr& e) {
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
      const bool native_vector = b.op == BinaryOp::kAdd || b.op == BinaryOp::kSub ||
                                 b.op == BinaryOp::kMul || (b.op == BinaryOp::kDiv && t.is_float());
      if (t.lanes > 1 && !native_vector) return EmitVectorElementwise(e);
      return EmitBinary(b);
    }
    case ExprKind::kNot:
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return "(!" + EmitExpr(e.As<ir::NotNode>()->a) + ")";
    case ExprKind::kSelect: {
      if (t.lanes > 1) return EmitVectorElementwise(e);
      const auto& s = *e.As<ir::SelectNode>();
      return "(" + EmitExpr(s.cond) + " ? " + EmitExpr(s.a) + " : " + EmitExpr(s.b) + ")";
    }
    case ExprKind::kCast:
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return "(" + CastText(TypeName(t), "(" + EmitExpr(e.As<ir::CastNode>()->value) + ")") + ")";
    case ExprKind::kLoad:
      return EmitLoad(*e.As<ir::LoadNode>());
    case ExprKind::kCall:
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return EmitCall(*e.As<ir::CallNode>());
    case ExprKind::kCallPacked:
      return CallPacked(*e.As<ir::CallPackedNode>());
    case ExprKind::kRamp: {
      const auto& r = *e.As<ir::RampNode>();
      std::string base = EmitExpr(r.base), stride = EmitExpr(r.stride);
      std::string text = "((" + TypeName(t) + "){";
      for (int l = 0; l < t.lanes; ++l) {
        text += (l ? ", " : "") + base + (l ? " + " + std::to_string(l) + " * " + stride : "");
      }
      return text + "})";
    }
    case ExprKind::kBroadcast: {
      std::string v = EmitExpr(e.As<ir::BroadcastNode>()->value);
      std::string text = "((" + TypeName(t) + "){";
      for (int l = 0; l < t.lanes; ++l) text += (l ? ", " : "") + v;
      return text + "})";
    }
    case ExprKind::kBufferRef:
      Fail("a buffer reference (" + ir::Print(e) + ") is only allowed as a call_packed argument");
  }
  Fail("unknown expression kind in " + ir::Print(e));
}

std::string CFamilyEmitter::EmitBinary(const ir::BinaryNode& b) {
  const DType t = b.dtype;  // result type (bool for comparisons)
  const DType operand = b.a.dtype();
  std::string x = EmitExpr(b.a), y = EmitExpr(b.b);
  auto wrap = [&](const std::string& text) {
    // C promotes int8/int16 to int; the IR wraps at the type's width.
    if (t.is_integer() && t.bits < 32) return "((" + TypeName(t) + ")" + text + ")";
    return text;
  };
  switch (b.op) {
    case BinaryOp::kAdd:
      return wrap("(" + x + " + " + y + ")");
    case BinaryOp::kSub:
      return wrap("(" + x + " - " + y + ")");
    case BinaryOp::kMul:
      return wrap("(" + x + " * " + y + ")");
    case BinaryOp::kDiv:
      return wrap("(" + x + " / " + y + ")");
    case BinaryOp::kFloorDiv:
      if (operand.is_float()) {
        return CastText(TypeName(t), IntrinsicName("floor", operand) + "(" + x + " / " + y + ")");
      }
      if (operand.is_uint()) return wrap("(" + x + " / " + y + ")");
      uses_floordiv_ = true;
      return "(" +
             CastText(TypeName(t), "bp_floordiv(" + CastText("int64_t", "(" + x + ")") + ", " +
                                       CastText("int64_t", "(" + y + ")") + ")") +
             ")";
    case BinaryOp::kFloorMod:
      if (operand.is_float()) {
        return "(" + x + " - " + IntrinsicName("floor", operand) + "(" + x + " / " + y + ") * " +
               y + ")";
      }
      if (operand.is_uint()) return wrap("(" + x + " % " + y + ")");
      uses_floordiv_ = true;
      return "(" +
             CastText(TypeName(t), "bp_floormod(" + CastText("int64_t", "(" + x + ")") + ", " +
                                       CastText("int64_t", "(" + y + ")") + ")") +
             ")";
    case BinaryOp::kMin:
      return "(" + x + " < " + y + " ? " + x + " : " + y + ")";
    case BinaryOp::kMax:
      return "(" + x + " > " + y + " ? " + x + " : " + y + ")";
    case BinaryOp::kEq:
      return "(" + x + " == " + y + ")";
    case BinaryOp::kNe:
      return "(" + x + " != " + y + ")";
    case BinaryOp::kLt:
      return "(" + x + " < " + y + ")";
    case BinaryOp::kLe:
      return "(" + x + " <= " + y + ")";
    case BinaryOp::kGt:
      return "(" + x + " > " + y + ")";
    case BinaryOp::kGe:
      return "(" + x + " >= " + y + ")";
    case BinaryOp::kAnd:
      return "(" + x + " && " + y + ")";
    case BinaryOp::kOr:
      return "(" + x + " || " + y + ")";
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
  std::vector<std::string> args;
  for (const ir::Expr& a : call.args) {
    std::string text = EmitExpr(a);
    args.push_back(t.bits == 16 ? "(float)(" + text + ")" : text);
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
  return t.bits == 16 ? "((" + TypeName(t) + ")" + text + ")" : text;
}

// A vector expression the language has no operator for, lane by lane:
//   ({ T r; A a = ...; B b = ...; for (int l = 0; l < N; ++l) r[l] = <scalar op>; r; })
std::string CFamilyEmitter::EmitVectorElementwise(const ir::Expr& e) {
  const DType t = e.dtype();
  const std::string r = Temp(), l = Temp();
  std::string decls = TypeName(t) + " " + r + "; ";
  // Binds an operand to a temporary and returns its lane-l spelling.
  auto operand = [&](const ir::Expr& x) {
    std::string v = Temp();
    decls += TypeName(x.dtype()) + " " + v + " = " + EmitExpr(x) + "; ";
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
          lane = "(" + x + " < " + y + " ? " + x + " : " + y + ")";
          break;
        case BinaryOp::kMax:
          lane = "(" + x + " > " + y + " ? " + x + " : " + y + ")";
          break;
        case BinaryOp::kDiv:
          lane = "(" + x + " / " + y + ")";
          break;
        case BinaryOp::kFloorDiv:
          uses_floordiv_ = true;
          lane = ot.is_float() ? IntrinsicName("floor", ot) + "(" + x + " / " + y + ")"
                               : "bp_floordiv(" + x + ", " + y + ")";
          break;
        case BinaryOp::kFloorMod:
          uses_floordiv_ = true;
          lane = ot.is_float() ? "(" + x + " - " + IntrinsicName("floor", ot) + "(" + x + " / " +
                                     y + ") * " + y + ")"
                               : "bp_floormod(" + x + ", " + y + ")";
          break;
        case BinaryOp::kAnd:
          lane = "(" + x + " && " + y + ")";
          break;
        case BinaryOp::kOr:
          lane = "(" + x + " || " + y + ")";
          break;
        default:
          lane = "(" + x + " " + ir::ToString(b.op) + " " + y + ")";
          break;
      }
      break;
    }
    case ExprKind::kNot:
      lane = "(!" + operand(e.As<ir::NotNode>()->a) + ")";
      break;
    case ExprKind::kSelect: {
      const auto& s = *e.As<ir::SelectNode>();
      std::string c = operand(s.cond), x = operand(s.a), y = operand(s.b);
      lane = "(" + c + " ? " + x + " : " + y + ")";
      break;
    }
    case ExprKind::kCast:
      lane = "(" + TypeName(st) + ")(" + operand(e.As<ir::CastNode>()->value) + ")";
      break;
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
  return "({ " + decls + "for (int " + l + " = 0; " + l + " < " + std::to_string(t.lanes) + "; ++" +
         l + ") " + r + "[" + l + "] = " + lane + "; " + r + "; })";
}

std::string CFamilyEmitter::EmitLoad(const ir::LoadNode& load) {
  const DType t = load.dtype;
  const std::string buf = Name(load.buffer.name());
  if (t.lanes == 1) return buf + "[" + FlatIndex(load.buffer, load.indices) + "]";
  // Contiguous: every index scalar but the last, which is ramp(base, 1, lanes).
  const size_t last = load.indices.size() - 1;
  bool contiguous = load.buffer->strides.empty();
  for (size_t k = 0; k < last; ++k) contiguous = contiguous && load.indices[k].dtype().lanes == 1;
  const ir::RampNode* ramp = load.indices[last].As<ir::RampNode>();
  contiguous = contiguous && ramp != nullptr && AsIntImm(ramp->stride) != nullptr &&
               AsIntImm(ramp->stride)->value == 1;
  const std::string v = Temp();
  if (contiguous) {
    std::vector<ir::Expr> idx = load.indices;
    idx[last] = ramp->base;
    return "({ " + TypeName(t) + " " + v + "; memcpy(&" + v + ", &" + buf + "[" +
           FlatIndex(load.buffer, idx) + "], sizeof(" + v + ")); " + v + "; })";
  }
  // Gather lane by lane.
  const std::string l = Temp();
  std::string decls;
  std::vector<std::string> lane_idx;
  for (const ir::Expr& i : load.indices) {
    if (i.dtype().lanes == 1) {
      lane_idx.push_back(EmitExpr(i));
    } else {
      std::string iv = Temp();
      decls += TypeName(i.dtype()) + " " + iv + " = " + EmitExpr(i) + "; ";
      lane_idx.push_back(iv + "[" + l + "]");
    }
  }
  std::vector<ir::Expr> lane_vars;
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    lane_vars.push_back(ir::Var("bp_lane_index_" + std::to_string(k), ir::Int64()));
  }
  std::string flat = FlatIndex(load.buffer, lane_vars);
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    const std::string name = Name("bp_lane_index_" + std::to_string(k));
    for (size_t pos; (pos = flat.find(name)) != std::string::npos;) {
      flat.replace(pos, name.size(), "(" + lane_idx[k] + ")");
    }
  }
  return "({ " + TypeName(t) + " " + v + "; " + decls + "for (int " + l + " = 0; " + l + " < " +
         std::to_string(t.lanes) + "; ++" + l + ") " + v + "[" + l + "] = " + buf + "[" + flat +
         "]; " + v + "; })";
}

void CFamilyEmitter::EmitStore(const ir::StoreNode& store) {
  const DType t = store.value.dtype();
  const std::string buf = Name(store.buffer.name());
  if (t.lanes == 1) {
    Line(buf + "[" + FlatIndex(store.buffer, store.indices) + "] = " + EmitExpr(store.value) + ";");
    return;
  }
  const size_t last = store.indices.size() - 1;
  bool contiguous = store.buffer->strides.empty();
  for (size_t k = 0; k < last; ++k) contiguous = contiguous && store.indices[k].dtype().lanes == 1;
  const ir::RampNode* ramp = store.indices[last].As<ir::RampNode>();
  contiguous = contiguous && ramp != nullptr && AsIntImm(ramp->stride) != nullptr &&
               AsIntImm(ramp->stride)->value == 1;
  const std::string v = Temp();
  if (contiguous) {
    std::vector<ir::Expr> idx = store.indices;
    idx[last] = ramp->base;
    Line("{ " + TypeName(t) + " " + v + " = " + EmitExpr(store.value) + "; memcpy(&" + buf + "[" +
         FlatIndex(store.buffer, idx) + "], &" + v + ", sizeof(" + v + ")); }");
    return;
  }
  const std::string l = Temp();
  std::string decls;
  std::vector<std::string> lane_idx;
  for (const ir::Expr& i : store.indices) {
    if (i.dtype().lanes == 1) {
      lane_idx.push_back(EmitExpr(i));
    } else {
      std::string iv = Temp();
      decls += TypeName(i.dtype()) + " " + iv + " = " + EmitExpr(i) + "; ";
      lane_idx.push_back(iv + "[" + l + "]");
    }
  }
  std::vector<ir::Expr> lane_vars;
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    lane_vars.push_back(ir::Var("bp_lane_index_" + std::to_string(k), ir::Int64()));
  }
  std::string flat = FlatIndex(store.buffer, lane_vars);
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    const std::string name = Name("bp_lane_index_" + std::to_string(k));
    for (size_t pos; (pos = flat.find(name)) != std::string::npos;) {
      flat.replace(pos, name.size(), "(" + lane_idx[k] + ")");
    }
  }
  Line("{ " + TypeName(t) + " " + v + " = " + EmitExpr(store.value) + "; " + decls + "for (int " +
       l + " = 0; " + l + " < " + std::to_string(t.lanes) + "; ++" + l + ") " + buf + "[" + flat +
       "] = " + v + "[" + l + "]; }");
}

void CFamilyEmitter::EmitStmt(const ir::Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto& f = *s.As<ir::ForNode>();
      const std::string var = Name(f.var.name());
      const std::string type = TypeName(f.var.dtype());
      if (f.for_kind == ir::ForKind::kThreadBinding) {
        Line("{");
        ++indent_;
        std::string index = ThreadIndex(f.thread);
        const ir::IntImmNode* min = AsIntImm(f.min);
        Line("const " + type + " " + var + " = " +
             (min != nullptr && min->value == 0
                  ? CastText(type, index)
                  : CastText(type, "(" + EmitExpr(f.min) + " + " + index + ")")) +
             ";");
        EmitStmt(f.body);
        --indent_;
        Line("}");
        return;
      }
      const ir::IntImmNode* min = AsIntImm(f.min);
      std::string end = min != nullptr && min->value == 0
                            ? EmitExpr(f.extent)
                            : EmitExpr(f.min) + " + " + EmitExpr(f.extent);
      EmitLoopPragma(f);
      const bool parallel = f.for_kind == ir::ForKind::kParallel;
      if (parallel) ++parallel_depth_;
      EmitLoop(f, type, var, EmitExpr(f.min), end);
      if (parallel) --parallel_depth_;
      return;
    }
    case StmtKind::kIfThenElse: {
      const auto* n = s.As<ir::IfThenElseNode>();
      Line("if (" + EmitExpr(n->cond) + ") {");
      for (;;) {
        ++indent_;
        EmitStmt(n->then_case);
        --indent_;
        if (!n->else_case) break;
        const auto* chained = n->else_case.As<ir::IfThenElseNode>();
        if (chained != nullptr) {
          Line("} else if (" + EmitExpr(chained->cond) + ") {");
          n = chained;
          continue;
        }
        Line("} else {");
        ++indent_;
        EmitStmt(n->else_case);
        --indent_;
        break;
      }
      Line("}");
      return;
    }
    case StmtKind::kLetStmt: {
      const auto& n = *s.As<ir::LetStmtNode>();
      Line("const " + TypeName(n.var.dtype()) + " " + Name(n.var.name()) + " = " +
           EmitExpr(n.value) + ";");
      EmitStmt(n.body);
      return;
    }
    case StmtKind::kStore:
      EmitStore(*s.As<ir::StoreNode>());
      return;
    case StmtKind::kAllocate: {
      const auto& n = *s.As<ir::AllocateNode>();
      const std::string name = Name(n.buffer.name());
      const std::string type = TypeName(n.buffer.dtype());
      int64_t count = 1;
      bool constant = true;
      std::string size;
      for (const ir::Expr& d : n.buffer->shape) {
        const ir::IntImmNode* c = AsIntImm(d);
        if (c == nullptr) constant = false;
        count *= c != nullptr ? c->value : 1;
        size += (size.empty() ? "" : " * ") + std::string("(size_t)(") + EmitExpr(d) + ")";
      }
      const int64_t bytes = count * ((n.buffer.dtype().bits + 7) / 8) * n.buffer.dtype().lanes;
      if (constant && (n.scope != ir::StorageScope::kGlobal || bytes <= 64 * 1024)) {
        const std::string elements = "[" + std::to_string(count) + "]";
        if (n.scope == ir::StorageScope::kShared) {
          EmitSharedAllocation(n, type, name, count);
        } else if (RestrictStackArrays()) {
          // Accessed through a restrict pointer: once the compiler's induction variables turn
          // `&array[i]` into plain integers, the restrict tag is what still tells it that the
          // array aliases nothing else, so it can keep a local accumulator tile in registers
          // across a loop (store motion) instead of loading and storing it at every step.
          const std::string storage = "bp_storage_" + name;
          EmitZeroedArray(StorageQualifier(n.scope) + type + " " + storage + elements, type,
                          storage, count);
          Line(type + "* restrict " + name + " = " + storage + ";");
        } else {
          EmitZeroedArray(StorageQualifier(n.scope) + type + " " + name + elements, type, name,
                          count);
        }
        EmitStmt(n.body);
        return;
      }
      if (n.scope == ir::StorageScope::kShared) {
        Fail("shared allocation '" + n.buffer.name() +
             "' needs a constant size (its shape must be numbers)");
      }
      EmitHeapAllocation(n, type, name, size);
      return;
    }
    case StmtKind::kEvaluate: {
      const ir::Expr& v = s.As<ir::EvaluateNode>()->value;
      Line("(void)" + EmitExpr(v) + ";");
      return;
    }
    case StmtKind::kBarrier:
      Line(BarrierStatement());
      return;
    case StmtKind::kSeq:
      for (const ir::Stmt& x : s.As<ir::SeqNode>()->seq) EmitStmt(x);
      return;
  }
  Fail("unknown statement kind");
}

void CFamilyEmitter::EmitSharedAllocation(const ir::AllocateNode& n, const std::string& type,
                                          const std::string& name, int64_t count) {
  Line(StorageQualifier(n.scope) + type + " " + name + "[" + std::to_string(count) + "];");
}

void CFamilyEmitter::EmitHeapAllocation(const ir::AllocateNode& n, const std::string& type,
                                        const std::string& /*name*/, const std::string& size) {
  Fail("allocation '" + n.buffer.name() + "' (" + type + ", " + size +
       " elements) is too large or not of constant size for the " + DialectName() + " target");
}

// ---- C dialect ----------------------------------------------------------------------------

std::string CEmitter::Prelude() {
  std::string p =
      "/* Generated by Backplane's c code generator. */\n"
      "#include <math.h>\n"
      "#include <stdbool.h>\n"
      "#include <stddef.h>\n"
      "#include <stdint.h>\n"
      "#include <stdlib.h>\n"
      "#include <string.h>\n"
      "\n"
      "#define BP_EXPORT __attribute__((visibility(\"default\")))\n"
      "#define BP_OUT_OF_MEMORY 4\n"
      "typedef union { int64_t i; double f; void* p; } bp_arg_t;\n"
      "typedef struct bp_ctx bp_ctx_t;\n"
      "struct bp_ctx {\n"
      "  int32_t (*call_packed)(bp_ctx_t* ctx, const char* name, int32_t num_args,\n"
      "                         const int32_t* codes, const bp_arg_t* args);\n"
      "};\n";
  if (uses_floordiv_) {
    p += "\nstatic inline int64_t bp_floordiv(int64_t a, int64_t b) {\n"
         "  int64_t q = a / b;\n"
         "  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
         "}\n"
         "static inline int64_t bp_floormod(int64_t a, int64_t b) {\n"
         "  int64_t r = a % b;\n"
         "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
         "}\n";
  }
  if (!vector_types_.empty()) p += "\n";
  for (const std::string& t : vector_types_) p += t + "\n";
  return p;
}

void CEmitter::EmitFunction(const ir::PrimFunc& func) {
  Line("BP_EXPORT int32_t " + std::string(kEntryPrefix) + func.name +
       "(const bp_arg_t* bp_args, bp_ctx_t* bp_ctx) {");
  ++indent_;
  Line("(void)bp_ctx;");
  for (size_t i = 0; i < func.params.size(); ++i) {
    const ir::Param& p = func.params[i];
    const std::string arg = "bp_args[" + std::to_string(i) + "]";
    if (p.is_buffer()) {
      const std::string type = TypeName(p.buffer().dtype());
      Line(type + "* restrict " + Name(p.buffer().name()) + " = (" + type + "*)" + arg + ".p;");
    } else {
      const DType t = p.var().dtype();
      Line("const " + TypeName(t) + " " + Name(p.var().name()) + " = (" + TypeName(t) + ")" + arg +
           (t.is_float() ? ".f;" : ".i;"));
    }
  }
  EmitStmt(func.body);
  Line("return 0;");
  --indent_;
  Line("}");
}

void CEmitter::EmitLoopPragma(const ir::ForNode& loop) {
  switch (loop.for_kind) {
    case ir::ForKind::kParallel:
      // OpenMP does not nest by default; an inner parallel loop runs serially anyway.
      if (parallel_depth_ == 0) {
        Line("#pragma omp parallel for schedule(static)" +
             (options_.num_threads > 0
                  ? " num_threads(" + std::to_string(options_.num_threads) + ")"
                  : std::string()));
      }
      return;
    case ir::ForKind::kVectorized:
      Line("#pragma omp simd");
      return;
    case ir::ForKind::kUnrolled: {
      const ir::IntImmNode* extent = AsIntImm(loop.extent);
      if (extent != nullptr && extent->value > 0 && extent->value <= 64) {
        Line("#pragma GCC unroll " + std::to_string(extent->value));
      }
      return;
    }
    default:
      return;
  }
}

std::string CEmitter::CallPacked(const ir::CallPackedNode& call) {
  if (parallel_depth_ > 0) {
    Fail("call_packed(\"" + call.name +
         "\") inside a parallel loop: the c target cannot stop a parallel loop when the call "
         "fails; move the call out of the loop or make the loop serial");
  }
  std::string name;
  for (char c : call.name) {
    if (c == '"' || c == '\\') name += '\\';
    name += c;
  }
  const size_t n = call.args.size();
  const std::string args = Temp(), codes = Temp(), rc = Temp();
  std::string values, kinds;
  for (size_t i = 0; i < n; ++i) {
    const ir::Expr& a = call.args[i];
    std::string sep = i ? ", " : "";
    if (const auto* ref = a.As<ir::BufferRefNode>()) {
      size_t index = func_->params.size();
      for (size_t k = 0; k < func_->params.size(); ++k) {
        if (func_->params[k].is_buffer() && func_->params[k].buffer().get() == ref->buffer.get()) {
          index = k;
        }
      }
      if (index == func_->params.size()) {
        Fail("call_packed(\"" + call.name + "\") gets buffer '" + ref->buffer.name() +
             "', which is not a parameter; the c target passes only parameter buffers");
      }
      values += sep + "{.i = " + std::to_string(index) + "}";
      kinds += sep + std::to_string(kArgParamBuffer);
    } else if (a.dtype().is_float()) {
      values += sep + "{.f = (double)(" + EmitExpr(a) + ")}";
      kinds += sep + std::to_string(kArgFloat);
    } else {
      values += sep + "{.i = (int64_t)(" + EmitExpr(a) + ")}";
      kinds += sep + std::to_string(kArgInt);
    }
  }
  if (n == 0) {
    values = "{.i = 0}";
    kinds = "0";
  }
  return "({ const bp_arg_t " + args + "[] = {" + values + "}; const int32_t " + codes + "[] = {" +
         kinds + "}; int32_t " + rc + " = bp_ctx->call_packed(bp_ctx, \"" + name + "\", " +
         std::to_string(n) + ", " + codes + ", " + args + "); if (" + rc + " != 0) return " + rc +
         "; (int32_t)0; })";
}

void CEmitter::EmitHeapAllocation(const ir::AllocateNode& n, const std::string& type,
                                  const std::string& name, const std::string& size) {
  Line(type + "* restrict " + name + " = (" + type + "*)calloc(" + size + ", sizeof(" + type +
       "));");
  Line("if (" + name + " == NULL) return BP_OUT_OF_MEMORY;");
  EmitStmt(n.body);
  Line("free(" + name + ");");
}

}  // namespace codegen
}  // namespace backplane
