// SPDX-License-Identifier: Apache-2.0
// The C-family emitter's base (expressions, statements, buffers, vectors) and the C dialect.
#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/expf.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
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

// ---- Faults -------------------------------------------------------------------------------

std::string FaultMessage(const FaultSite& site, const FaultRecord& r) {
  switch (site.kind) {
    case FaultSite::Kind::kDivisionByZero:  // quoted again: a module saved by an older build
      return site.func + ": integer division by zero in `" + ir::QuoteText(site.text) + "`";
    case FaultSite::Kind::kOutOfBounds:
      return site.func + ": index " + std::to_string(r.arg[0]) +
             " is out of bounds for dimension " + std::to_string(r.arg[2]) + " of buffer '" +
             site.buffer + "' (extent " + std::to_string(r.arg[1]) + ") in `" +
             ir::QuoteText(site.text) + "`";
    case FaultSite::Kind::kAllocation: {
      const std::string what =
          "allocation '" + site.buffer + "' (" + site.dtype + ", shape " + site.text + ")";
      if (r.arg[0] == 1) {
        return site.func + ": " + what + " has extent " + std::to_string(r.arg[2]) +
               " in dimension " + std::to_string(r.arg[1]) +
               "; an extent must be >= 0 (check the scalar arguments its shape uses)";
      }
      if (r.arg[0] == 2) {
        return site.func + ": out of host memory for " + what + " of " + std::to_string(r.arg[1]) +
               " bytes; free memory or make it smaller";
      }
      double bytes = 0;
      std::memcpy(&bytes, &r.arg[1], sizeof(bytes));
      char text[32];
      std::snprintf(text, sizeof(text), "%.6g", bytes);
      return site.func + ": " + what + " needs " + text +
             " bytes, more than the address space holds (its size overflows); make it smaller";
    }
  }
  return site.func + ": a run-time check failed";
}

std::string FaultMessage(const std::vector<FaultSite>& sites, const FaultRecord& record) {
  if (record.site == 0) return "";
  if (record.site < 0 || static_cast<size_t>(record.site) > sites.size()) {
    return "a run-time check of site " + std::to_string(record.site) +
           " failed, and the module has no such site (the module is damaged; rebuild it)";
  }
  return FaultMessage(sites[static_cast<size_t>(record.site) - 1], record);
}

bool FaultIsOutOfMemory(const std::vector<FaultSite>& sites, const FaultRecord& record) {
  if (record.site <= 0 || static_cast<size_t>(record.site) > sites.size()) return false;
  return sites[static_cast<size_t>(record.site) - 1].kind == FaultSite::Kind::kAllocation &&
         record.arg[0] == 2;
}

namespace {

// JSON string escaping for the site table (names and IR text: printable ASCII and `\n`).
std::string Quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      q += buf;
    } else {
      q += c;
    }
  }
  return q + "\"";
}

}  // namespace

std::string FaultSitesToJson(const std::vector<FaultSite>& sites) {
  std::string j = "[";
  for (size_t i = 0; i < sites.size(); ++i) {
    const FaultSite& f = sites[i];
    j += std::string(i ? "," : "") + "[" + std::to_string(static_cast<int>(f.kind)) + "," +
         Quote(f.func) + "," + Quote(f.buffer) + "," + Quote(f.text) + "," + Quote(f.dtype) + "]";
  }
  return j + "]";
}

std::vector<FaultSite> FaultSitesFromJson(const std::string& json) {
  // The inverse of FaultSitesToJson: an array of [kind, func, buffer, text, dtype].
  std::vector<FaultSite> sites;
  size_t pos = 0;
  auto fail = [&]() -> void {
    throw ir::Error(ir::ErrorKind::kValue,
                    "the fault site table of a saved module is damaged near byte " +
                        std::to_string(pos) + "; build and save the module again");
  };
  auto expect = [&](char c) {
    if (pos >= json.size() || json[pos] != c) fail();
    ++pos;
  };
  auto string = [&]() {
    expect('"');
    std::string out;
    while (pos < json.size() && json[pos] != '"') {
      char c = json[pos++];
      if (c == '\\') {
        if (pos >= json.size()) fail();
        c = json[pos++];
        if (c == 'u') {
          if (pos + 4 > json.size()) fail();
          c = static_cast<char>(std::stoi(json.substr(pos, 4), nullptr, 16));
          pos += 4;
        }
      }
      out += c;
    }
    expect('"');
    return out;
  };
  expect('[');
  while (pos < json.size() && json[pos] != ']') {
    if (!sites.empty()) expect(',');
    expect('[');
    FaultSite f;
    if (pos >= json.size() || json[pos] < '0' || json[pos] > '2') fail();
    f.kind = static_cast<FaultSite::Kind>(json[pos++] - '0');
    expect(',');
    f.func = string();
    expect(',');
    f.buffer = string();
    expect(',');
    f.text = string();
    expect(',');
    f.dtype = string();
    expect(']');
    sites.push_back(std::move(f));
  }
  expect(']');
  return sites;
}

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
  // fmax(x, y): x when x > y or y is NaN, else y (so a NaN x gives y). A compare and a select,
  // which compilers vectorize; a call of fmaxf would not be.
  return "(" + x + (is_max ? " > " : " < ") + y + " || " + IsNanText(y) + " ? " + x + " : " + y +
         ")";
}

std::string CFamilyEmitter::FloatToInt(const std::string& x, DType from, DType to) {
  const std::string name = "bp_to_f" + std::to_string(from.bits) + "_" + ir::ToString(to);
  float_to_int_.emplace(name, std::make_pair(from, to));
  return name + "(" + x + ")";
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
      if (t.lanes > 1 && !native_vector) return EmitVectorElementwise(e);
      return EmitBinary(b, e);
    }
    case ExprKind::kNot:
      if (t.lanes > 1) return EmitVectorElementwise(e);
      return "(!" + EmitExpr(e.As<ir::NotNode>()->a) + ")";
    case ExprKind::kNeg: {
      if (t.lanes > 1) return EmitVectorElementwise(e);
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
      for (int l = 0; l < t.lanes; ++l) {
        lanes.push_back(base + (l ? " + " + std::to_string(l) + " * " + stride : ""));
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
  switch (b.op) {
    case BinaryOp::kAdd:
      return wrap("(" + x + " + " + y + ")");
    case BinaryOp::kSub:
      return wrap("(" + x + " - " + y + ")");
    case BinaryOp::kMul:
      return wrap("(" + x + " * " + y + ")");
    case BinaryOp::kDiv:
      if (operand.is_float()) return wrap(FloatDivision(x, y, operand));
      return wrap("(" + x + " / " + y + ")");
    case BinaryOp::kFloorDiv:
      if (operand.is_float()) return wrap(FloatFloorDivMod(false, x, y, operand));
      if (operand.is_uint()) return wrap("(" + x + " / " + y + ")");
      uses_floordiv_ = true;
      return "(" +
             CastText(TypeName(t), "bp_floordiv(" + CastText("int64_t", "(" + x + ")") + ", " +
                                       CastText("int64_t", "(" + y + ")") + ")") +
             ")";
    case BinaryOp::kFloorMod:
      if (operand.is_float()) return wrap(FloatFloorDivMod(true, x, y, operand));
      if (operand.is_uint()) return wrap("(" + x + " % " + y + ")");
      uses_floordiv_ = true;
      return "(" +
             CastText(TypeName(t), "bp_floormod(" + CastText("int64_t", "(" + x + ")") + ", " +
                                       CastText("int64_t", "(" + y + ")") + ")") +
             ")";
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
          if (ot.is_integer() && HasFaultRecord()) {
            lane = CheckedIntDivision(b.op, ot, x, y, b.b, e);
            break;
          }
          uses_floordiv_ = true;
          lane = ot.is_float() ? FloatFloorDivMod(false, x, y, ot)
                               : "bp_floordiv(" + x + ", " + y + ")";
          break;
        case BinaryOp::kFloorMod:
          if (ot.is_integer() && HasFaultRecord()) {
            lane = CheckedIntDivision(b.op, ot, x, y, b.b, e);
            break;
          }
          uses_floordiv_ = true;
          lane = ot.is_float() ? FloatFloorDivMod(true, x, y, ot)
                               : "bp_floormod(" + x + ", " + y + ")";
          break;
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
          lane = "(" + x + " " + ir::ToString(b.op) + " " + y + ")";
          break;
      }
      break;
    }
    case ExprKind::kNot:
      lane = "(!" + operand(e.As<ir::NotNode>()->a) + ")";
      break;
    case ExprKind::kNeg:
      lane =
          t.is_integer() && t.bits < 32
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

// The parts of a bounds-checked access (docs/codegen-guide.md, "Run-time checks"): its
// index is computed once into `index` through bp_chk/bp_chkv, which clear the flag `ok` when
// an index is out of bounds (after recording the fault); the access then does not happen, so
// even an empty buffer with a null pointer is never touched.
struct CFamilyEmitter::CheckedAccess {
  std::string ok;     // the flag's name
  std::string index;  // the flat index's name
  std::string decls;  // "int ok = 1; " (the index is declared where it is computed)
};

CFamilyEmitter::CheckedAccess CFamilyEmitter::BeginCheckedAccess() {
  CheckedAccess a;
  a.ok = Temp();
  a.index = Temp();
  a.decls = "int " + a.ok + " = 1; ";
  return a;
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
  const size_t last = load.indices.size() - 1;
  bool contiguous = load.buffer->strides.empty();
  for (size_t k = 0; k < last; ++k) contiguous = contiguous && load.indices[k].dtype().lanes == 1;
  const ir::RampNode* ramp = load.indices[last].As<ir::RampNode>();
  contiguous = contiguous && ramp != nullptr && AsIntImm(ramp->stride) != nullptr &&
               AsIntImm(ramp->stride)->value == 1;
  if (contiguous) {
    std::vector<ir::Expr> idx = load.indices;
    idx[last] = ramp->base;
    return ContiguousVectorLoad(load.buffer, t, FlatIndex(load.buffer, idx));
  }
  const std::string v = Temp();
  // Gather lane by lane.
  const std::string l = Temp();
  std::string decls;
  std::vector<std::string> lane_idx = EmitInOrder(AsIndexed(load.indices));
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    const ir::Expr& i = load.indices[k];
    if (i.dtype().lanes > 1) {
      std::string iv = Temp();
      decls += TypeName(i.dtype()) + " " + iv + " = " + lane_idx[k] + "; ";
      lane_idx[k] = iv + "[" + l + "]";
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
  return StatementExpression(TypeName(t) + " " + v + "; " + decls + "for (int " + l + " = 0; " + l +
                                 " < " + std::to_string(t.lanes) + "; ++" + l + ") " + v + "[" + l +
                                 "] = " + ElementRead(load.buffer, buf + "[" + flat + "]") + ";",
                             v);
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

// The checked flat index of an access: `scalar` are the index texts of every dimension (for a
// contiguous vector access the last is its base, checked for `lanes` elements).
std::string CFamilyEmitter::CheckedAccessIndex(const ir::Buffer& buffer,
                                               const std::vector<std::string>& scalar, int lanes,
                                               int site, const std::string& ok) {
  const ir::BufferNode& bn = *buffer.get();
  std::vector<std::string> texts;
  for (size_t k = 0; k < scalar.size(); ++k) {
    const std::string extent = EmitExpr(bn.shape[k]);
    if (lanes > 1 && k + 1 == scalar.size()) {
      texts.push_back("bp_chkv(bp_fault, " + std::to_string(site) + ", " + std::to_string(k) +
                      ", (int64_t)(" + scalar[k] + "), " + std::to_string(lanes) + ", (int64_t)(" +
                      extent + "), &" + ok + ")");
    } else {
      texts.push_back(CheckedIndex(scalar[k], extent, static_cast<int>(k), site) + ok + ")");
    }
  }
  return CheckedFlat(buffer, texts);
}

// An access is contiguous when every index is scalar but the last, a ramp of stride 1, and
// the buffer has no declared strides; `base` gets the ramp's base.
static bool Contiguous(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                       ir::Expr* base) {
  const size_t last = indices.size() - 1;
  bool contiguous = buffer->strides.empty();
  for (size_t k = 0; k < last; ++k) contiguous = contiguous && indices[k].dtype().lanes == 1;
  const ir::RampNode* ramp = indices[last].As<ir::RampNode>();
  contiguous = contiguous && ramp != nullptr && AsIntImm(ramp->stride) != nullptr &&
               AsIntImm(ramp->stride)->value == 1;
  if (contiguous) *base = ramp->base;
  return contiguous;
}

std::string CFamilyEmitter::EmitCheckedLoad(const ir::LoadNode& load, int site) {
  const DType t = load.dtype;
  const std::string buf = Name(load.buffer.name());
  const CheckedAccess a = BeginCheckedAccess();
  std::vector<std::string> idx;
  if (t.lanes == 1) {
    idx = EmitInOrder(AsIndexed(load.indices));
    return StatementExpression(
        a.decls + "const int64_t " + a.index + " = " +
            CheckedAccessIndex(load.buffer, idx, 1, site, a.ok) + ";",
        a.ok + " ? " + buf + "[" + a.index + "] : " + CastText(TypeName(t), "0"));
  }
  const std::string v = Temp(), l = Temp();
  const std::string zero = "for (int " + l + " = 0; " + l + " < " + std::to_string(t.lanes) +
                           "; ++" + l + ") " + v + "[" + l + "] = 0;";
  ir::Expr base;
  if (Contiguous(load.buffer, load.indices, &base)) {
    std::vector<ir::Expr> scalar = load.indices;
    scalar.back() = base;
    idx = EmitInOrder(AsIndexed(scalar));
    return StatementExpression(
        TypeName(t) + " " + v + "; " + a.decls + "const int64_t " + a.index + " = " +
            CheckedAccessIndex(load.buffer, idx, t.lanes, site, a.ok) + "; if (" + a.ok +
            ") memcpy(&" + v + ", &" + buf + "[" + a.index + "], sizeof(" + v + ")); else " + zero,
        v);
  }
  // Gather lane by lane; after a lane out of bounds the rest are 0.
  std::string decls;
  idx = EmitInOrder(AsIndexed(load.indices));
  for (size_t k = 0; k < idx.size(); ++k) {
    if (load.indices[k].dtype().lanes > 1) {
      std::string iv = Temp();
      decls += TypeName(load.indices[k].dtype()) + " " + iv + " = " + idx[k] + "; ";
      idx[k] = iv + "[" + l + "]";
    }
  }
  return StatementExpression(TypeName(t) + " " + v + "; " + decls + a.decls + "for (int " + l +
                                 " = 0; " + l + " < " + std::to_string(t.lanes) + "; ++" + l +
                                 ") { const int64_t " + a.index + " = " +
                                 CheckedAccessIndex(load.buffer, idx, 1, site, a.ok) + "; " + v +
                                 "[" + l + "] = " + a.ok + " ? " + buf + "[" + a.index + "] : 0; }",
                             v);
}

void CFamilyEmitter::EmitCheckedStore(const ir::StoreNode& store, int site) {
  const DType t = store.value.dtype();
  const std::string buf = Name(store.buffer.name());
  // The value first, as the interpreter: a bad load in it is the error, not the store.
  const std::string v = Temp();
  Operand value = EmitOperand(store.value);
  const CheckedAccess a = BeginCheckedAccess();
  const int lanes = store.indices.back().dtype().lanes;
  std::vector<ir::Expr> indices = store.indices;
  ir::Expr base;
  const bool scalar = lanes == 1 && t.lanes == 1;
  const bool contiguous = !scalar && Contiguous(store.buffer, store.indices, &base);
  if (contiguous) indices.back() = base;
  std::vector<std::string> idx = EmitInOrder(AsIndexed(indices));
  KeepInOrder(&value);
  const std::string decl = TypeName(t) + " " + v + " = " + value.text + "; ";
  if (scalar) {
    Line("{ const " + decl + a.decls + "const int64_t " + a.index + " = " +
         CheckedAccessIndex(store.buffer, idx, 1, site, a.ok) + "; if (" + a.ok + ") " + buf + "[" +
         a.index + "] = " + v + "; }");
    return;
  }
  if (contiguous) {
    Line("{ " + decl + a.decls + "const int64_t " + a.index + " = " +
         CheckedAccessIndex(store.buffer, idx, t.lanes, site, a.ok) + "; if (" + a.ok +
         ") memcpy(&" + buf + "[" + a.index + "], &" + v + ", sizeof(" + v + ")); }");
    return;
  }
  // Scatter lane by lane; after a lane out of bounds the rest are not stored.
  const std::string l = Temp();
  std::string decls;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (store.indices[k].dtype().lanes > 1) {
      std::string iv = Temp();
      decls += TypeName(store.indices[k].dtype()) + " " + iv + " = " + idx[k] + "; ";
      idx[k] = iv + "[" + l + "]";
    }
  }
  Line("{ " + decl + decls + a.decls + "for (int " + l + " = 0; " + l + " < " +
       std::to_string(t.lanes) + "; ++" + l + ") { const int64_t " + a.index + " = " +
       CheckedAccessIndex(store.buffer, idx, 1, site, a.ok) + "; if (" + a.ok + ") " + buf + "[" +
       a.index + "] = " + (t.lanes > 1 ? v + "[" + l + "]" : v) + "; } }");
}

std::string CFamilyEmitter::AtomicStatement(ir::AtomicOp op, DType t, const std::string&,
                                            const std::string&, bool) {
  Fail(std::string(ir::ToString(op)) + " on " + ir::ToString(t) + ": the " + DialectName() +
       " code generator has no atomics");
}

void CFamilyEmitter::EmitAtomic(const ir::Stmt& s) {
  const ir::AtomicNode& a = *s.As<ir::AtomicNode>();
  const DType t = a.buffer.dtype();
  if (checks_.bounds_check) {
    std::string text = ir::Print(s, 0);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EmitCheckedAtomic(a, AccessSite(a.buffer, text));
    return;
  }
  // The value, then the indices (as a store).
  Operand value = EmitOperand(a.value);
  const std::string flat = FlatIndex(a.buffer, a.indices);
  KeepInOrder(&value);
  const std::string v = Temp();
  Line("{ const " + TypeName(t) + " " + v + " = " + value.text + "; " +
       AtomicStatement(a.op, t, Name(a.buffer.name()) + "[" + flat + "]", v, IsShared(a.buffer)) +
       " }");
}

void CFamilyEmitter::EmitCheckedAtomic(const ir::AtomicNode& atomic, int site) {
  const DType t = atomic.buffer.dtype();
  const std::string v = Temp();
  Operand value = EmitOperand(atomic.value);
  const CheckedAccess a = BeginCheckedAccess();
  std::vector<std::string> idx = EmitInOrder(AsIndexed(atomic.indices));
  KeepInOrder(&value);
  Line("{ const " + TypeName(t) + " " + v + " = " + value.text + "; " + a.decls + "const int64_t " +
       a.index + " = " + CheckedAccessIndex(atomic.buffer, idx, 1, site, a.ok) + "; if (" + a.ok +
       ") { " +
       AtomicStatement(atomic.op, t, Name(atomic.buffer.name()) + "[" + a.index + "]", v,
                       IsShared(atomic.buffer)) +
       " } }");
}

void CFamilyEmitter::EmitStore(const ir::Stmt& s) {
  const ir::StoreNode& store = *s.As<ir::StoreNode>();
  const DType t = store.value.dtype();
  const std::string buf = Name(store.buffer.name());
  if (checks_.bounds_check) {
    std::string text = ir::Print(s, 0);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EmitCheckedStore(store, AccessSite(store.buffer, text));
    return;
  }
  // The value, then the indices (as the checked store has them).
  Operand value = EmitOperand(store.value);
  if (t.lanes == 1) {
    const int64_t effects = effects_;
    const std::string flat = FlatIndex(store.buffer, store.indices);
    const std::string text = value.text;
    KeepInOrder(&value);
    // C leaves the order of `a[i] = v`'s operands unspecified and GLSL computes the index first;
    // the IR computes the value first (docs/ir.md), so where both note faults the value goes
    // into a temporary before the store.
    if (value.text == text && !value.simple && value.effects && effects_ != effects) {
      BindAt(&value);
    }
    Line(ElementWrite(store.buffer, buf + "[" + flat + "]", value.text) + ";");
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
    const std::string flat = FlatIndex(store.buffer, idx);
    KeepInOrder(&value);
    Line("{ " + TypeName(t) + " " + v + " = " + value.text + "; " +
         ContiguousVectorStore(store.buffer, t, flat, v) + " }");
    return;
  }
  const std::string l = Temp();
  std::string decls;
  std::vector<std::string> lane_idx = EmitInOrder(AsIndexed(store.indices));
  KeepInOrder(&value);
  for (size_t k = 0; k < lane_idx.size(); ++k) {
    const ir::Expr& i = store.indices[k];
    if (i.dtype().lanes > 1) {
      std::string iv = Temp();
      decls += TypeName(i.dtype()) + " " + iv + " = " + lane_idx[k] + "; ";
      lane_idx[k] = iv + "[" + l + "]";
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
  Line("{ " + TypeName(t) + " " + v + " = " + value.text + "; " + decls + "for (int " + l +
       " = 0; " + l + " < " + std::to_string(t.lanes) + "; ++" + l + ") " +
       ElementWrite(store.buffer, buf + "[" + flat + "]", v + "[" + l + "]") + "; }");
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
      // The IR evaluates min and extent once, as the loop starts. A C `for` evaluates its
      // condition at every iteration, so a bound that loads from a buffer (which the body may
      // write) or has an effect is computed once, into a const before the loop; a bound of
      // variables and literals reads the same every time and is written as it is. The
      // temporaries a deep bound needs come before the loop either way.
      const ir::IntImmNode* min = AsIntImm(f.min);
      const bool from_zero = min != nullptr && min->value == 0;
      Operand lo = EmitOperand(f.min);
      Operand extent = EmitOperand(f.extent);
      // A variable that the body may assign (`var`) changes under a C condition too.
      auto once = [&](const Operand& op) {
        return (!op.simple && (op.effects || op.reads || op.writes)) || MentionsAssignable(f.min) ||
               MentionsAssignable(f.extent);
      };
      if (once(extent)) BindAt(&extent);
      if (once(lo)) {
        BindAt(&lo);
      } else {
        KeepInOrder(&lo);
      }
      const std::string end = from_zero ? extent.text : lo.text + " + " + extent.text;
      const bool parallel = f.for_kind == ir::ForKind::kParallel;
      const std::string region = parallel ? ParallelRegionCondition(f, extent.text) : "";
      if (!region.empty()) {
        // The loop twice: in a parallel region when `region` holds, else a plain loop. (A
        // region that its `if` clause turns off still costs the runtime's team set-up, about
        // 0.3 to 0.7 us, more than a small kernel's work.)
        Line("if (" + region + ") {");
        ++indent_;
        EmitLoopPragma(f, extent.text);
        ++parallel_depth_;
        EmitLoop(f, type, var, lo.text, end);
        --indent_;
        Line("} else {");
        ++indent_;
        EmitLoop(f, type, var, lo.text, end);
        --parallel_depth_;
        --indent_;
        Line("}");
        return;
      }
      EmitLoopPragma(f, extent.text);
      if (parallel) ++parallel_depth_;
      EmitLoop(f, type, var, lo.text, end);
      if (parallel) --parallel_depth_;
      return;
    }
    case StmtKind::kIfThenElse:
      EmitIf(*s.As<ir::IfThenElseNode>());
      return;
    case StmtKind::kLetStmt: {
      const auto& n = *s.As<ir::LetStmtNode>();
      if (n.assignable) assignable_.insert(n.var.get());
      Line((n.assignable ? "" : "const ") + TypeName(n.var.dtype()) + " " + Name(n.var.name()) +
           " = " + EmitExpr(n.value) + ";");
      EmitStmt(n.body);
      return;
    }
    case StmtKind::kAssign: {
      const auto& n = *s.As<ir::AssignNode>();
      Line(Name(n.var.name()) + " = " + EmitExpr(n.value) + ";");
      return;
    }
    case StmtKind::kAtomic:
      EmitAtomic(s);
      return;
    case StmtKind::kStore:
      EmitStore(s);
      return;
    case StmtKind::kAllocate: {
      const auto& n = *s.As<ir::AllocateNode>();
      if (n.scope == ir::StorageScope::kShared) shared_allocs_.insert(n.buffer.get());
      const std::string name = Name(n.buffer.name());
      const std::string type = TypeName(n.buffer.dtype());
      const int64_t count = ConstantElements(n.buffer, /*must_be_constant=*/false);
      if (n.scope == ir::StorageScope::kShared) {  // count -1: sized at launch
        EmitSharedAllocation(n, type, name, count);
        EmitStmt(n.body);
        return;
      }
      const int64_t bytes = count * ((n.buffer.dtype().bits + 7) / 8) * n.buffer.dtype().lanes;
      // Device code keeps a `local` array in each thread's private memory, which no GPU has
      // more than 512 KiB of (CUDA's local memory a thread): a larger one is refused here, as
      // a 400 MB one made lavapipe exhaust the host's memory when the kernel ran. The arrays
      // it is nested in count too (stack_bytes_): they all live while its body runs.
      if (StackBudget() < 0 && n.scope == ir::StorageScope::kLocal && count >= 0 &&
          (count > kDevicePrivateBytes || bytes > kDevicePrivateBytes - stack_bytes_)) {
        Fail("allocation '" + n.buffer.name() + "' (" + ir::ToString(n.buffer.dtype()) + ", " +
             std::to_string(count) + " elements, local) takes more than " +
             std::to_string(kDevicePrivateBytes - stack_bytes_) + " bytes a thread" +
             (stack_bytes_ > 0 ? " (with the " + std::to_string(stack_bytes_) +
                                     " bytes of the local arrays it is nested in, " +
                                     std::to_string(kDevicePrivateBytes) + ")"
                               : std::string()) +
             ", the most " + DialectName() +
             " device code allows (CUDA's local memory a thread); use a global buffer, or "
             "shared memory for what a block shares");
      }
      // (count is compared first: count times the element's bytes may not fit in an int64.)
      const bool within_budget =
          StackBudget() < 0 || (count <= StackBudget() && bytes <= StackBudget() - stack_bytes_);
      const bool small = count <= 64 * 1024 && bytes <= 64 * 1024;
      if (count >= 0 && (n.scope != ir::StorageScope::kGlobal || small) && within_budget) {
        stack_bytes_ += bytes;
        const std::string elements = "[" + std::to_string(count) + "]";
        if (RestrictStackArrays()) {
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
        stack_bytes_ -= bytes;
        return;
      }
      std::string size;  // for messages
      for (const ir::Expr& d : n.buffer->shape) {
        size += (size.empty() ? "" : " * ") + ir::Print(d);
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

int64_t CFamilyEmitter::ConstantElements(const ir::Buffer& buffer, bool must_be_constant) const {
  const int64_t elem_bytes =
      std::max<int64_t>((buffer.dtype().bits + 7) / 8 * int64_t{buffer.dtype().lanes}, 1);
  int64_t count = 1;
  for (const ir::Expr& d : buffer->shape) {
    const ir::IntImmNode* c = AsIntImm(d);
    if (c == nullptr) {
      if (!must_be_constant) return -1;
      Fail("allocation '" + buffer.name() + "' in " + DialectName() +
           " needs a constant size (its shape must be numbers)");
    }
    if (c->value < 0 || (c->value != 0 && count > INT64_MAX / elem_bytes / c->value)) {
      Fail("allocation '" + buffer.name() + "' has " + std::to_string(buffer->shape.size()) +
           " dimensions whose product in bytes passes INT64_MAX (or a negative one); give it a "
           "size that fits the device");
    }
    count *= c->value;
  }
  return count;
}

void CFamilyEmitter::EmitSharedAllocation(const ir::AllocateNode& n, const std::string& type,
                                          const std::string& name, int64_t count) {
  if (count < 0) {
    std::string shape;
    for (const ir::Expr& d : n.buffer->shape) shape += (shape.empty() ? "" : ", ") + ir::Print(d);
    Fail("shared allocation '" + n.buffer.name() + "' is sized at launch ([" + shape +
         "]), which " + DialectName() + " cannot declare; give it a constant size");
  }
  Line(StorageQualifier(n.scope) + type + " " + name + "[" + std::to_string(count) + "];");
}

void CFamilyEmitter::EmitHeapAllocation(const ir::AllocateNode& n, const std::string& type,
                                        const std::string& /*name*/, const std::string& size) {
  Fail("allocation '" + n.buffer.name() + "' (" + type + ", " + size +
       " elements) is too large or not of constant size for the " + DialectName() + " target");
}

// ---- Run-time checks ----------------------------------------------------------------------

std::string CFamilyEmitter::StatementExpression(const std::string& statements,
                                                const std::string& value) {
  return "({ " + statements + " " + value + "; })";
}

std::string CFamilyEmitter::HoistStatements(const std::string& statements,
                                            const std::string& value) {
  pending_.back().push_back(statements);
  return value;
}

std::string CFamilyEmitter::FaultClaim(const std::string& record, const std::string& site) {
  return "__sync_bool_compare_and_swap(&" + record + "->site, 0, " + site + ")";
}

int CFamilyEmitter::AddFaultSite(FaultSite::Kind kind, const std::string& buffer,
                                 const std::string& text, const std::string& dtype) {
  FaultSite site;
  site.kind = kind;
  site.func = func_ != nullptr ? func_->name : "";
  site.buffer = buffer;
  // The interpreter's quote of the expression or statement (at most 200 characters), so the
  // fault's message is the interpreter's, and a site of a 99,000-term chain is not its text.
  site.text = kind == FaultSite::Kind::kAllocation ? text : ir::QuoteText(text);
  site.dtype = dtype;
  sites_.push_back(std::move(site));
  if (sites_.size() > static_cast<size_t>(INT32_MAX) - 1) Fail("too many run-time checks");
  return static_cast<int>(sites_.size());
}

std::string CFamilyEmitter::CheckedIntDivision(BinaryOp op, DType t, const std::string& x,
                                               const std::string& y, const ir::Expr& divisor,
                                               const ir::Expr& e) {
  // A constant divisor other than 0 (and -1 for signed types) needs no check.
  const ir::IntImmNode* c = AsIntImm(divisor);
  if (c == nullptr) {
    if (const auto* bc = divisor.As<ir::BroadcastNode>()) c = AsIntImm(bc->value);
  }
  const bool safe = c != nullptr && c->value != 0 && !(t.is_int() && c->value == -1);
  const std::string width = t.bits <= 32 ? "32" : "64";
  if (safe) {
    if (op == BinaryOp::kMod)
      return t.is_uint() ? "(" + x + " % " + y + ")" : SignedRemainder(x, y, t);
    if (op == BinaryOp::kDiv || t.is_uint()) {
      return "(" + x + (op == BinaryOp::kFloorMod ? " % " : " / ") + y + ")";
    }
    uses_floordiv_ = true;
    return std::string(op == BinaryOp::kFloorDiv ? "bp_floordiv(" : "bp_floormod(") +
           CastText("int64_t", "(" + x + ")") + ", " + CastText("int64_t", "(" + y + ")") + ")";
  }
  std::string text = ir::Print(e);
  const std::string site = std::to_string(AddFaultSite(FaultSite::Kind::kDivisionByZero, "", text));
  ++effects_;  // a fault noted: kept in the IR's order with the other operands
  std::string helper;
  if (t.is_uint()) {
    helper = (op == BinaryOp::kFloorMod || op == BinaryOp::kMod ? "mod_u" : "div_u") + width;
  } else if (op == BinaryOp::kDiv) {
    helper = "div_i" + width;
  } else if (op == BinaryOp::kMod) {
    helper = "mod_i" + width;
  } else {
    helper = op == BinaryOp::kFloorDiv ? "floordiv_chk" : "floormod_chk";
  }
  helpers_.insert(helper);
  return "bp_" + helper + "(bp_fault, " + site + ", " + x + ", " + y + ")";
}

int CFamilyEmitter::AccessSite(const ir::Buffer& buffer, const std::string& text) {
  if (!checks_.bounds_check) return 0;
  helpers_.insert("chk");
  return AddFaultSite(FaultSite::Kind::kOutOfBounds, buffer.name(), text);
}

std::string CFamilyEmitter::CheckedIndex(const std::string& index, const std::string& extent,
                                         int dim, int site) {
  return "bp_chk(bp_fault, " + std::to_string(site) + ", " + std::to_string(dim) + ", (int64_t)(" +
         index + "), (int64_t)(" + extent + "), &";
}

std::string CFamilyEmitter::CheckedFlat(const ir::Buffer& buffer,
                                        const std::vector<std::string>& idx) {
  const ir::BufferNode& b = *buffer.get();
  if (idx.size() == 1 && b.strides.empty()) return idx[0];
  std::string flat;
  if (!b.strides.empty()) {
    for (size_t k = 0; k < idx.size(); ++k) {
      flat += (k ? " + " : "") + idx[k] + " * (int64_t)(" + EmitExpr(b.strides[k]) + ")";
    }
    return flat;
  }
  flat = idx[0];
  for (size_t k = 1; k < idx.size(); ++k) {
    flat = "(" + flat + ") * (int64_t)(" + EmitExpr(b.shape[k]) + ") + " + idx[k];
  }
  return flat;
}

std::string CFamilyEmitter::FaultHelpers() {
  const std::string q = HelperQualifier() + " ";
  const std::string r = FaultRecordType();
  std::string p =
      "\n/* The fault record: the first run-time check that fails claims it "
      "(docs/codegen-guide.md). */\n"
      "typedef struct { int32_t site; int32_t reserved; int64_t arg[3]; } bp_fault_t;\n";
  if (helpers_.empty()) return p;
  p += q + "void bp_fault_set(" + r +
       " f, int32_t site, int64_t a0, int64_t a1, int64_t a2) {\n"
       "  if (" +
       FaultClaim("f", "site") +
       ") {\n"
       "    f->arg[0] = a0;\n"
       "    f->arg[1] = a1;\n"
       "    f->arg[2] = a2;\n"
       "  }\n"
       "}\n";
  for (const char* w : {"32", "64"}) {
    const std::string it = std::string("int") + w + "_t", ut = std::string("uint") + w + "_t";
    if (helpers_.count(std::string("div_i") + w)) {
      // b == 0 or b == -1 in one compare; -1 negates with wrap-around (INT_MIN / -1 = INT_MIN).
      p += q + it + " bp_div_i" + w + "(" + r + " f, int32_t site, " + it + " a, " + it +
           " b) {\n"
           "  if ((" +
           ut +
           ")b + 1u <= 1u) {\n"
           "    if (b == 0) { bp_fault_set(f, site, 0, 0, 0); return 0; }\n"
           "    return (" +
           it + ")((" + ut + ")0 - (" + ut +
           ")a);\n"
           "  }\n"
           "  return a / b;\n"
           "}\n";
    }
    if (helpers_.count(std::string("mod_i") + w)) {
      // C's %: by -1 it is 0 (INT_MIN % -1 would trap), by 0 a fault.
      p += q + it + " bp_mod_i" + w + "(" + r + " f, int32_t site, " + it + " a, " + it +
           " b) {\n"
           "  if ((" +
           ut +
           ")b + 1u <= 1u) {\n"
           "    if (b == 0) bp_fault_set(f, site, 0, 0, 0);\n"
           "    return 0;\n"
           "  }\n"
           "  return a % b;\n"
           "}\n";
    }
    for (const char* op : {"div", "mod"}) {
      if (!helpers_.count(std::string(op) + "_u" + w)) continue;
      p += q + ut + " bp_" + op + "_u" + w + "(" + r + " f, int32_t site, " + ut + " a, " + ut +
           " b) {\n"
           "  if (b == 0u) { bp_fault_set(f, site, 0, 0, 0); return 0u; }\n"
           "  return a " +
           (std::string(op) == "div" ? "/" : "%") +
           " b;\n"
           "}\n";
    }
  }
  if (helpers_.count("floordiv_chk")) {
    p += q + "int64_t bp_floordiv_chk(" + r +
         " f, int32_t site, int64_t a, int64_t b) {\n"
         "  if ((uint64_t)b + 1u <= 1u) {\n"
         "    if (b == 0) { bp_fault_set(f, site, 0, 0, 0); return 0; }\n"
         "    return (int64_t)((uint64_t)0 - (uint64_t)a);\n"
         "  }\n"
         "  int64_t q = a / b;\n"
         "  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
         "}\n";
  }
  if (helpers_.count("floormod_chk")) {
    p += q + "int64_t bp_floormod_chk(" + r +
         " f, int32_t site, int64_t a, int64_t b) {\n"
         "  if ((uint64_t)b + 1u <= 1u) {\n"
         "    if (b == 0) bp_fault_set(f, site, 0, 0, 0);\n"
         "    return 0;\n"
         "  }\n"
         "  int64_t r = a % b;\n"
         "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
         "}\n";
  }
  if (helpers_.count("chk")) {
    // An index out of bounds clears *ok: the access is skipped (a load gives 0).
    p += q + "int64_t bp_chk(" + r +
         " f, int32_t site, int32_t dim, int64_t i, int64_t n, int* ok) {\n"
         "  if ((uint64_t)i < (uint64_t)n) return i;\n"
         "  bp_fault_set(f, site, i, n, dim);\n"
         "  *ok = 0;\n"
         "  return 0;\n"
         "}\n"
         // A contiguous vector access of `lanes` elements from i. The index reported is the
         // first lane's out of bounds, as the interpreter's: n when i is in bounds.
         + q + "int64_t bp_chkv(" + r +
         " f, int32_t site, int32_t dim, int64_t i, int64_t lanes, int64_t n, int* ok) {\n"
         "  if ((uint64_t)i < (uint64_t)n && (uint64_t)(i + lanes - 1) < (uint64_t)n) return i;\n"
         "  bp_fault_set(f, site, (uint64_t)i < (uint64_t)n ? n : i, n, dim);\n"
         "  *ok = 0;\n"
         "  return 0;\n"
         "}\n";
  }
  if (helpers_.count("alloc")) {
    // The bytes of an allocation, or 0 after recording why it cannot be made. Never 0
    // otherwise (an empty allocation takes one byte, so calloc's NULL always means failure).
    p += q + "size_t bp_alloc_bytes(" + r +
         " f, int32_t site, int64_t elem, int32_t ndim, const int64_t* dims) {\n"
         "  uint64_t bytes = (uint64_t)elem;\n"
         "  double approx = (double)elem;\n"
         "  int overflow = 0;\n"
         "  for (int32_t k = 0; k < ndim; ++k) {\n"
         "    if (dims[k] < 0) { bp_fault_set(f, site, 1, k, dims[k]); return 0; }\n"
         "    approx *= (double)dims[k];\n"
         "    overflow |= __builtin_mul_overflow(bytes, (uint64_t)dims[k], &bytes);\n"
         "  }\n"
         "  if (overflow || bytes > (uint64_t)PTRDIFF_MAX) {\n"
         "    int64_t bits;\n"
         "    memcpy(&bits, &approx, sizeof(bits));\n"
         "    bp_fault_set(f, site, 0, bits, 0);\n"
         "    return 0;\n"
         "  }\n"
         "  return bytes == 0 ? 1 : (size_t)bytes;\n"
         "}\n";
  }
  return p;
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
      "#define BP_FAULT 5\n";
  p += FaultHelpers();
  p += NumericHelpers();
  p += "typedef union { int64_t i; double f; void* p; } bp_arg_t;\n"
       "typedef struct bp_ctx bp_ctx_t;\n"
       "struct bp_ctx {\n"
       "  int32_t (*call_packed)(bp_ctx_t* ctx, const char* name, int32_t num_args,\n"
       "                         const int32_t* codes, const bp_arg_t* args);\n"
       "  bp_fault_t* fault;\n"
       "};\n";
  p += PackedEntryTypes();
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
  if (helpers_.count("expf")) {
    p += "\n/* float32 exp: the IR's own (docs/ir.md, \"float32 exp\"). */\n" + ir::ExpF32CSource();
  }
  if (!vector_types_.empty()) p += "\n";
  for (const std::string& t : vector_types_) p += t + "\n";
  return p;
}

std::string CEmitter::IntrinsicName(const std::string& name, DType t) {
  if (name == "exp" && t.bits == 32) {
    helpers_.insert("expf");
    return "bp_expf";
  }
  return CFamilyEmitter::IntrinsicName(name, t);
}

void CEmitter::EmitFunction(const ir::PrimFunc& func) {
  calls_packed_ = false;
  // The body is a static function, so the exported entries inline it (an exported function
  // may be interposed: gcc does not inline it into a caller even in its own file).
  Line("static int32_t " + std::string(kKernelPrefix) + func.name +
       "(const bp_arg_t* bp_args, bp_ctx_t* bp_ctx) {");
  ++indent_;
  Line("bp_fault_t* const bp_fault = bp_ctx->fault;");
  Line("(void)bp_fault;");
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
  // A fault let the function run on with harmless values; the caller reads the record.
  Line("return bp_fault->site != 0 ? BP_FAULT : 0;");
  --indent_;
  Line("}");
  Line("BP_EXPORT int32_t " + std::string(kEntryPrefix) + func.name +
       "(const bp_arg_t* bp_args, bp_ctx_t* bp_ctx) {");
  Line("  return " + std::string(kKernelPrefix) + func.name + "(bp_args, bp_ctx);");
  Line("}");
  if (!calls_packed_) EmitPackedEntry(func);
}

namespace {
// The OpenMP schedule of a parallel loop: the IR's, or static by default.
std::string Schedule(const ir::ForNode& loop) {
  if (loop.schedule == ir::ScheduleKind::kDefault) return "static";
  std::string text = ir::ToString(loop.schedule);
  if (loop.chunk > 0) text += ", " + std::to_string(loop.chunk);
  return text;
}

// An estimate of one iteration's work of `loop`: the statements of its body times the trips of
// the loops nested in it, saturating; -1 when a nested loop's trips are known only at run time.
// An over-estimate (both arms of an if count) errs toward a parallel region, which is what
// every loop got before the estimate existed.
int64_t IterationCost(const ir::ForNode& loop) {
  int64_t statements = 0, trips = 1;
  bool unknown = false;
  ir::ForEachStmt(loop.body, [&](const ir::Stmt& s) {
    ++statements;
    if (const auto* f = s.As<ir::ForNode>()) {
      const ir::IntImmNode* e = AsIntImm(f->extent);
      if (e == nullptr) {
        unknown = true;
      } else if (e->value > 1 && __builtin_mul_overflow(trips, e->value, &trips)) {
        trips = INT64_MAX;
      }
    }
  });
  if (unknown) return -1;
  int64_t cost = 0;
  if (__builtin_mul_overflow(statements, trips, &cost)) cost = INT64_MAX;
  return cost;
}
}  // namespace

std::string CEmitter::ParallelRegionCondition(const ir::ForNode& loop, const std::string& trips) {
  // OpenMP does not nest by default; an inner parallel loop runs serially anyway. One thread:
  // a plain loop. Otherwise a region starts only when there are two iterations or more to
  // share and, where the work of an iteration is known, enough work to pay for waking the
  // pool's threads (kParallelMinWork: a sleeping thread's wake-up is 10 to 30 us,
  // docs/performance.md "Small parallel kernels").
  if (parallel_depth_ > 0 || options_.num_threads == 1) return std::string();
  std::string condition = "(" + trips + ") > 1";
  const int64_t cost = IterationCost(loop);
  if (cost > 0 && cost < kParallelMinWork) {
    condition += " && (int64_t)(" + trips + ") >= INT64_C(" +
                 std::to_string((kParallelMinWork + cost - 1) / cost) + ")";
  }
  return condition;
}

void CEmitter::EmitLoopPragma(const ir::ForNode& loop, const std::string& /*trips*/) {
  switch (loop.for_kind) {
    case ir::ForKind::kParallel:
      // Only inside the branch that ParallelRegionCondition chose.
      if (parallel_depth_ == 0 && options_.num_threads != 1) {
        Line("#pragma omp parallel for schedule(" + Schedule(loop) + ")" +
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

// An atomic on a C object: an integer add is GCC's __atomic_fetch_add; every other update a
// compare-and-swap loop with the generic __atomic builtins (bitwise, so any type, and no
// aliasing through another pointer type).
std::string CEmitter::AtomicStatement(ir::AtomicOp op, DType t, const std::string& element,
                                      const std::string& value, bool) {
  if (op == ir::AtomicOp::kAdd && t.is_integer()) {
    return "__atomic_fetch_add(&" + element + ", " + value + ", __ATOMIC_RELAXED);";
  }
  const std::string type = TypeName(t), p = Temp(), o = Temp(), n = Temp();
  std::string update;
  switch (op) {
    case ir::AtomicOp::kAdd:
      update = o + " + " + value;
      break;
    case ir::AtomicOp::kMin:
      update = t.is_float()
                   ? std::string(t.bits == 64 ? "fmin(" : "fminf(") + o + ", " + value + ")"
                   : "(" + value + " < " + o + " ? " + value + " : " + o + ")";
      break;
    case ir::AtomicOp::kMax:
      update = t.is_float()
                   ? std::string(t.bits == 64 ? "fmax(" : "fmaxf(") + o + ", " + value + ")"
                   : "(" + value + " > " + o + " ? " + value + " : " + o + ")";
      break;
  }
  return "{ " + type + "* " + p + " = &" + element + "; " + type + " " + o + ", " + n +
         "; __atomic_load(" + p + ", &" + o + ", __ATOMIC_RELAXED); do { " + n + " = " + update +
         "; } while (!__atomic_compare_exchange(" + p + ", &" + o + ", &" + n +
         ", 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); }";
}

std::string CEmitter::CallPacked(const ir::CallPackedNode& call) {
  calls_packed_ = true;
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
  std::vector<ir::Expr> scalars;  // the arguments that are values, emitted in order
  for (const ir::Expr& a : call.args) {
    if (a.As<ir::BufferRefNode>() == nullptr) scalars.push_back(a);
  }
  const std::vector<std::string> texts = EmitInOrder(scalars);
  size_t next = 0;
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
      values += sep + "{.f = (double)(" + texts[next++] + ")}";
      kinds += sep + std::to_string(kArgFloat);
    } else {
      values += sep + "{.i = (int64_t)(" + texts[next++] + ")}";
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
                                  const std::string& name, const std::string& /*size*/) {
  // The size is computed with overflow checks (never a wrapped size), and a size that cannot
  // be allocated is a fault naming the allocation; the body then does not run.
  std::string shape, dims;
  const std::vector<std::string> extents = EmitInOrder(n.buffer->shape);
  for (size_t k = 0; k < extents.size(); ++k) {
    shape += (shape.empty() ? "" : ", ") + ir::Print(n.buffer->shape[k]);
    dims += (dims.empty() ? "" : ", ") + std::string("(int64_t)(") + extents[k] + ")";
  }
  helpers_.insert("alloc");
  const int site = AddFaultSite(FaultSite::Kind::kAllocation, n.buffer.name(), "[" + shape + "]",
                                ir::ToString(n.buffer.dtype()));
  const std::string bytes = Temp();
  Line("const size_t " + bytes + " = bp_alloc_bytes(bp_fault, " + std::to_string(site) +
       ", (int64_t)sizeof(" + type + "), " + std::to_string(n.buffer->shape.size()) +
       ", (const int64_t[]){" + dims + "});");
  Line(type + "* restrict " + name + " = " + bytes + " != 0 ? (" + type + "*)calloc(" + bytes +
       ", 1) : NULL;");
  Line("if (" + name + " != NULL) {");
  ++indent_;
  EmitStmt(n.body);
  Line("free(" + name + ");");
  --indent_;
  Line("} else if (" + bytes + " != 0) {");
  Line("  bp_fault_set(bp_fault, " + std::to_string(site) + ", 2, (int64_t)" + bytes + ", 0);");
  Line("}");
}

}  // namespace codegen
}  // namespace backplane
