// SPDX-License-Identifier: Apache-2.0
// Node constructors, dtypes and the builder's operators.
#include <algorithm>
#include <backplane/ir/edit_distance.hpp>
#include <backplane/ir/ir.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "literal.hpp"
#include "names.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {

// ---- dtypes and enums -----------------------------------------------------------------------

std::string ToString(DType t) {
  std::string s;
  switch (t.code) {
    case DTypeCode::kInt:
      s = "int" + std::to_string(t.bits);
      break;
    case DTypeCode::kUInt:
      s = "uint" + std::to_string(t.bits);
      break;
    case DTypeCode::kFloat:
      s = "float" + std::to_string(t.bits);
      break;
    case DTypeCode::kBool:
      s = "bool";
      break;
    case DTypeCode::kHandle:
      s = "handle";
      break;
  }
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

bool ParseDType(const std::string& text, DType* out) {
  static const struct {
    const char* prefix;
    DTypeCode code;
  } kCodes[] = {{"uint", DTypeCode::kUInt},
                {"int", DTypeCode::kInt},
                {"float", DTypeCode::kFloat},
                {"bool", DTypeCode::kBool}};
  for (const auto& c : kCodes) {
    std::string prefix = c.prefix;
    if (text.compare(0, prefix.size(), prefix) != 0) continue;
    size_t pos = prefix.size();
    int bits = 8;
    if (c.code != DTypeCode::kBool) {
      size_t end = pos;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
      if (end == pos) return false;
      bits = std::atoi(text.substr(pos, end - pos).c_str());
      pos = end;
      bool ok = c.code == DTypeCode::kFloat ? (bits == 16 || bits == 32 || bits == 64)
                                            : (bits == 8 || bits == 16 || bits == 32 || bits == 64);
      if (!ok || text[prefix.size()] == '0') return false;
    }
    int lanes = 1;
    if (pos < text.size()) {
      if (text[pos] != 'x' || pos + 1 == text.size() || text[pos + 1] == '0') return false;
      for (size_t k = pos + 1; k < text.size(); ++k)
        if (!std::isdigit(static_cast<unsigned char>(text[k]))) return false;
      if (text.size() - pos > 6) return false;
      lanes = std::atoi(text.c_str() + pos + 1);
      if (lanes < 1 || lanes > 65535) return false;
    }
    *out = DType{c.code, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
    return true;
  }
  return false;
}

const char* ToString(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "floordiv";
    case BinaryOp::kFloorMod:
      return "floormod";
    case BinaryOp::kMin:
      return "min";
    case BinaryOp::kMax:
      return "max";
    case BinaryOp::kEq:
      return "==";
    case BinaryOp::kNe:
      return "!=";
    case BinaryOp::kLt:
      return "<";
    case BinaryOp::kLe:
      return "<=";
    case BinaryOp::kGt:
      return ">";
    case BinaryOp::kGe:
      return ">=";
    case BinaryOp::kAnd:
      return "&&";
    case BinaryOp::kOr:
      return "||";
    case BinaryOp::kMod:
      return "%";
  }
  return "?";
}

bool IsComparison(BinaryOp op) { return op >= BinaryOp::kEq && op <= BinaryOp::kGe; }
bool IsLogical(BinaryOp op) { return op == BinaryOp::kAnd || op == BinaryOp::kOr; }

const char* ToString(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kThreadBinding:
      return "thread";
  }
  return "?";
}

const char* ToString(ThreadTag tag) {
  switch (tag) {
    case ThreadTag::kNone:
      return "";
    case ThreadTag::kBlockIdxX:
      return "blockIdx.x";
    case ThreadTag::kBlockIdxY:
      return "blockIdx.y";
    case ThreadTag::kBlockIdxZ:
      return "blockIdx.z";
    case ThreadTag::kThreadIdxX:
      return "threadIdx.x";
    case ThreadTag::kThreadIdxY:
      return "threadIdx.y";
    case ThreadTag::kThreadIdxZ:
      return "threadIdx.z";
  }
  return "?";
}

bool ParseThreadTag(std::string_view name, ThreadTag* tag) {
  for (int t = 1; t <= 6; ++t) {
    if (name == ToString(static_cast<ThreadTag>(t))) {
      *tag = static_cast<ThreadTag>(t);
      return true;
    }
  }
  return false;
}

const char* ToString(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kDefault:
      return "default";
    case ScheduleKind::kStatic:
      return "static";
    case ScheduleKind::kDynamic:
      return "dynamic";
    case ScheduleKind::kGuided:
      return "guided";
  }
  return "?";
}

const char* ToString(AtomicOp op) {
  switch (op) {
    case AtomicOp::kAdd:
      return "atomic_add";
    case AtomicOp::kMin:
      return "atomic_min";
    case AtomicOp::kMax:
      return "atomic_max";
  }
  return "?";
}

const char* ToString(StorageScope scope) {
  switch (scope) {
    case StorageScope::kGlobal:
      return "global";
    case StorageScope::kShared:
      return "shared";
    case StorageScope::kLocal:
      return "local";
  }
  return "?";
}

namespace detail {

const std::vector<std::string>& Keywords() {
  static const std::vector<std::string> kKeywords = {
      "func",   "for",     "in",    "if",  "else", "let",    "alloc",  "barrier", "true",  "false",
      "buffer", "strides", "attrs", "inf", "nan",  "inff16", "inff64", "nanf16",  "nanf64"};
  return kKeywords;
}

bool IsIdentifier(const std::string& name) {
  if (name.empty()) return false;
  if (!std::isalpha(static_cast<unsigned char>(name[0])) && name[0] != '_') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  for (const auto& k : Keywords())
    if (name == k) return false;
  return true;
}

void CheckName(const std::string& what, const std::string& name) {
  if (!IsIdentifier(name))
    throw Error(ErrorKind::kValue,
                what + " name '" + Elide(name) +
                    "' is not an identifier: use letters, digits and '_', not starting with a "
                    "digit, and not a keyword of the text form");
}

constexpr size_t kTypoLength = 256;

std::string DidYouMean(const std::string& wanted, const std::vector<std::string>& names) {
  std::vector<std::pair<size_t, std::string>> close;
  const size_t limit = std::max<size_t>(1, wanted.size() / 3);
  for (const std::string& n : names) {
    if (n == wanted) continue;
    // The distance costs the product of the lengths: past kTypoLength a name is not measured
    // (a typo of a name that long is not worth the time a megabyte-long one would take).
    const size_t d = wanted.size() <= kTypoLength && n.size() <= kTypoLength
                         ? EditDistance(wanted, n, Edits::kWithSwaps)
                         : std::max(wanted.size(), n.size());
    const bool prefix =
        wanted.size() >= 2 && n.size() >= 2 && (n.rfind(wanted, 0) == 0 || wanted.rfind(n, 0) == 0);
    // A name is not a typo of another that shares none of its letters ('k' of 'a').
    if ((d <= limit && d < wanted.size()) || prefix)
      close.emplace_back(prefix ? std::min<size_t>(d, 1) : d, n);
  }
  if (close.empty()) return "";
  std::sort(close.begin(), close.end());
  std::string out = " (did you mean ";
  const size_t shown = std::min<size_t>(close.size(), 3);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += i + 1 == shown ? " or " : ", ";
    out += "'" + Elide(close[i].second) + "'";
  }
  return out + "?)";
}

}  // namespace detail

// ---- Expressions ----------------------------------------------------------------------------

namespace {
void Need(const Expr& e, const char* what) {
  if (!e) throw Error(ErrorKind::kValue, std::string(what) + ": an expression is empty");
}
void Need(const Stmt& s, const char* what) {
  if (!s) throw Error(ErrorKind::kValue, std::string(what) + ": a statement is empty");
}
}  // namespace

Expr::Expr(int value) {
  auto n = std::make_shared<IntImmNode>(Int32(), value);
  n->from_cxx_int = true;
  node_ = std::move(n);
}
Expr::Expr(double value) : Expr(FloatImm(Float32(), value)) {}

namespace detail {

bool ExactFloat(bool negative, uint64_t mag, DType t, std::string* why) {
  const int precision = t.bits == 16 ? 11 : t.bits == 32 ? 24 : 53;  // significand bits
  if (t.bits == 16 && mag > 65504) {
    *why = "is out of float16's range: expected a magnitude of at most 65504";
    return false;
  }
  int top = 63;
  while (top > 0 && ((mag >> top) & 1u) == 0) --top;
  if (mag == 0 || top < precision) return true;  // fewer significant bits than the type has
  const uint64_t ulp = uint64_t{1} << (top - precision + 1);
  const uint64_t low = mag & ~(ulp - 1);
  if (low == mag) return true;
  // The neighbours, in increasing order; the upper one may be 2^64.
  auto text = [](long double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.0Lf", v);
    return std::string(buf);
  };
  const long double lo = static_cast<long double>(low);
  const long double hi = lo + static_cast<long double>(ulp);
  const std::string a = negative ? "-" + text(hi) : text(lo);
  const std::string b = negative ? "-" + text(lo) : text(hi);
  *why = "is not exactly a " + ToString(t) + ": its neighbours in " + ToString(t) + " are " + a +
         " and " + b;
  return false;
}

}  // namespace detail

namespace {

// `e` as the builder types it where it wants `t`: a C++ int (Expr(int)) becomes the float
// constant of a float `t` if it converts exactly; anything else is left as it is.
Expr Typed(const Expr& e, DType t) {
  const auto* imm = e ? e.As<IntImmNode>() : nullptr;
  if (imm == nullptr || !imm->from_cxx_int || !t.is_float() || !t.is_scalar()) return e;
  const int64_t v = imm->value;
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string why;
  if (!detail::ExactFloat(v < 0, mag, t, &why))
    throw Error(ErrorKind::kValue, "integer literal " + std::to_string(v) + " " + why +
                                       ": write one of those as a float, or Cast(" + ToString(t) +
                                       "(), ...) to round it on purpose");
  return FloatImm(t, static_cast<double>(v));
}

// Two operands: a C++ int takes the other's float type.
void TypedPair(Expr* a, Expr* b) {
  const auto* ia = *a ? a->As<IntImmNode>() : nullptr;
  const auto* ib = *b ? b->As<IntImmNode>() : nullptr;
  const bool la = ia != nullptr && ia->from_cxx_int, lb = ib != nullptr && ib->from_cxx_int;
  if (la && !lb && *b) *a = Typed(*a, b->dtype());
  if (lb && !la && *a) *b = Typed(*b, a->dtype());
}

}  // namespace

Var::Var(std::string name, DType dtype) {
  detail::CheckName("variable", name);
  *static_cast<Expr*>(this) = Expr(std::make_shared<VarNode>(dtype, std::move(name)));
}

Buffer::Buffer(std::string name, DType dtype, std::vector<Expr> shape, std::vector<Expr> strides) {
  detail::CheckName("buffer", name);
  for (const auto& e : shape) Need(e, "Buffer shape");
  for (const auto& e : strides) Need(e, "Buffer strides");
  if (!strides.empty() && strides.size() != shape.size())
    throw Error(ErrorKind::kValue, "buffer '" + name + "' has " + std::to_string(shape.size()) +
                                       " dimensions but " + std::to_string(strides.size()) +
                                       " strides: give one stride a dimension, or none");
  auto node = std::make_shared<BufferNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  node->shape = std::move(shape);
  node->strides = std::move(strides);
  node_ = std::move(node);
}

Expr Buffer::operator[](Expr index) const { return Load(*this, {std::move(index)}); }
Expr Buffer::operator()(std::vector<Expr> indices) const { return Load(*this, std::move(indices)); }

const std::vector<Intrinsic>& Intrinsics() {
  static const std::vector<Intrinsic> kIntrinsics = {
      {"exp", 1},   {"exp2", 1},    {"log", 1}, {"log2", 1}, {"sqrt", 1},  {"rsqrt", 1},
      {"tanh", 1},  {"sigmoid", 1}, {"erf", 1}, {"fabs", 1}, {"floor", 1}, {"ceil", 1},
      {"round", 1}, {"trunc", 1},   {"sin", 1}, {"cos", 1},  {"pow", 2},   {"fma", 3}};
  return kIntrinsics;
}

const Intrinsic* FindIntrinsic(const std::string& name) {
  for (const auto& i : Intrinsics())
    if (name == i.name) return &i;
  return nullptr;
}

Expr IntImm(DType t, int64_t value) { return Expr(std::make_shared<IntImmNode>(t, value)); }
Expr FloatImm(DType t, double value) { return Expr(std::make_shared<FloatImmNode>(t, value)); }
Expr BoolImm(bool value) { return IntImm(Bool(), value ? 1 : 0); }

Expr Const(DType t, double v) {
  if (t.lanes != 1) return Broadcast(Const(t.Element(), v), t.lanes);
  if (t.is_float()) return FloatImm(t, v);
  if (t.is_bool()) return BoolImm(v != 0);
  return IntImm(t, static_cast<int64_t>(v));
}

Expr Binary(BinaryOp op, Expr a, Expr b) {
  Need(a, ToString(op));
  Need(b, ToString(op));
  TypedPair(&a, &b);
  DType t = a.dtype();
  if (IsComparison(op) || IsLogical(op)) t = Bool(t.lanes);
  return Expr(std::make_shared<BinaryNode>(t, op, std::move(a), std::move(b)));
}
Expr Not(Expr a) {
  Need(a, "!");
  DType t = a.dtype();
  return Expr(std::make_shared<NotNode>(t, std::move(a)));
}
Expr Neg(Expr a) {
  Need(a, "-");
  DType t = a.dtype();
  return Expr(std::make_shared<NegNode>(t, std::move(a)));
}
Expr operator-(Expr a) { return Neg(std::move(a)); }
Expr Select(Expr cond, Expr a, Expr b) {
  Need(cond, "select");
  Need(a, "select");
  Need(b, "select");
  TypedPair(&a, &b);
  DType t = a.dtype();
  return Expr(std::make_shared<SelectNode>(t, std::move(cond), std::move(a), std::move(b)));
}
Expr Cast(DType t, Expr value) {
  Need(value, "cast");
  return Expr(std::make_shared<CastNode>(t, std::move(value)));
}
Expr Load(Buffer buffer, std::vector<Expr> indices) {
  if (!buffer) throw Error(ErrorKind::kValue, "Load: the buffer is empty");
  uint16_t lanes = 1;
  for (const auto& i : indices) {
    Need(i, "Load");
    if (i.dtype().lanes > lanes) lanes = i.dtype().lanes;
  }
  DType t = buffer.dtype().WithLanes(lanes);
  return Expr(std::make_shared<LoadNode>(t, std::move(buffer), std::move(indices)));
}
Expr Call(const std::string& name, std::vector<Expr> args) {
  const Intrinsic* in = FindIntrinsic(name);
  if (!in) throw Error(ErrorKind::kValue, "'" + name + "' is not an intrinsic (see Intrinsics())");
  if (static_cast<int>(args.size()) != in->arity)
    throw Error(ErrorKind::kValue, "intrinsic '" + name + "' takes " + std::to_string(in->arity) +
                                       " argument(s), got " + std::to_string(args.size()));
  for (const auto& a : args) Need(a, name.c_str());
  // C++ ints take the type of the first argument that is not one (pow(x, 2)).
  for (const Expr& typed : args) {
    const auto* imm = typed.As<IntImmNode>();
    if (imm != nullptr && imm->from_cxx_int) continue;
    const DType want = typed.dtype();
    for (Expr& a : args) a = Typed(a, want);
    break;
  }
  DType t = args[0].dtype();
  return Expr(std::make_shared<CallNode>(t, name, std::move(args)));
}
Expr CallPacked(std::string name, std::vector<Expr> args) {
  for (const auto& a : args) Need(a, "call_packed");
  return Expr(std::make_shared<CallPackedNode>(std::move(name), std::move(args)));
}
Expr Ramp(Expr base, Expr stride, int lanes) {
  Need(base, "ramp");
  Need(stride, "ramp");
  if (lanes < 1 || lanes > 65535)
    throw Error(ErrorKind::kValue,
                "ramp: lanes must be in [1, 65535], got " + std::to_string(lanes));
  DType t = base.dtype().WithLanes(static_cast<uint16_t>(lanes));
  return Expr(std::make_shared<RampNode>(t, std::move(base), std::move(stride)));
}
Expr Broadcast(Expr value, int lanes) {
  Need(value, "broadcast");
  if (lanes < 1 || lanes > 65535)
    throw Error(ErrorKind::kValue,
                "broadcast: lanes must be in [1, 65535], got " + std::to_string(lanes));
  DType t = value.dtype().WithLanes(static_cast<uint16_t>(lanes));
  return Expr(std::make_shared<BroadcastNode>(t, std::move(value)));
}
Expr Ref(Buffer buffer) {
  if (!buffer) throw Error(ErrorKind::kValue, "Ref: the buffer is empty");
  return Expr(std::make_shared<BufferRefNode>(std::move(buffer)));
}
Expr FloorDiv(Expr a, Expr b) { return Binary(BinaryOp::kFloorDiv, std::move(a), std::move(b)); }
Expr FloorMod(Expr a, Expr b) { return Binary(BinaryOp::kFloorMod, std::move(a), std::move(b)); }
Expr Mod(Expr a, Expr b) { return Binary(BinaryOp::kMod, std::move(a), std::move(b)); }
Expr Min(Expr a, Expr b) { return Binary(BinaryOp::kMin, std::move(a), std::move(b)); }
Expr Max(Expr a, Expr b) { return Binary(BinaryOp::kMax, std::move(a), std::move(b)); }
Expr Eq(Expr a, Expr b) { return Binary(BinaryOp::kEq, std::move(a), std::move(b)); }
Expr Ne(Expr a, Expr b) { return Binary(BinaryOp::kNe, std::move(a), std::move(b)); }

namespace {
// A C++ int beside an operand of type `t`: Const, or for a float type the exact float (Typed).
Expr IntConst(DType t, int v) {
  if (t.is_float()) {
    Expr e = Typed(Expr(v), t.Element());
    return t.lanes == 1 ? e : Broadcast(e, t.lanes);
  }
  return Const(t, v);
}
}  // namespace

#define BACKPLANE_IR_DEFINE_OP(sym, code)                                                \
  Expr operator sym(Expr a, Expr b) { return Binary(code, std::move(a), std::move(b)); } \
  Expr operator sym(Expr a, int b) {                                                     \
    Need(a, #sym);                                                                       \
    Expr c = IntConst(a.dtype(), b);                                                     \
    return Binary(code, std::move(a), std::move(c));                                     \
  }                                                                                      \
  Expr operator sym(int a, Expr b) {                                                     \
    Need(b, #sym);                                                                       \
    Expr c = IntConst(b.dtype(), a); /* before b is moved from */                        \
    return Binary(code, std::move(c), std::move(b));                                     \
  }                                                                                      \
  Expr operator sym(Expr a, double b) {                                                  \
    Need(a, #sym);                                                                       \
    Expr c = Const(a.dtype(), b);                                                        \
    return Binary(code, std::move(a), std::move(c));                                     \
  }                                                                                      \
  Expr operator sym(double a, Expr b) {                                                  \
    Need(b, #sym);                                                                       \
    Expr c = Const(b.dtype(), a); /* before b is moved from */                           \
    return Binary(code, std::move(c), std::move(b));                                     \
  }
BACKPLANE_IR_DEFINE_OP(+, BinaryOp::kAdd)
BACKPLANE_IR_DEFINE_OP(-, BinaryOp::kSub)
BACKPLANE_IR_DEFINE_OP(*, BinaryOp::kMul)
BACKPLANE_IR_DEFINE_OP(/, BinaryOp::kDiv)
BACKPLANE_IR_DEFINE_OP(%, BinaryOp::kMod)
BACKPLANE_IR_DEFINE_OP(<, BinaryOp::kLt)
BACKPLANE_IR_DEFINE_OP(<=, BinaryOp::kLe)
BACKPLANE_IR_DEFINE_OP(>, BinaryOp::kGt)
BACKPLANE_IR_DEFINE_OP(>=, BinaryOp::kGe)
#undef BACKPLANE_IR_DEFINE_OP
Expr And(Expr a, Expr b) { return Binary(BinaryOp::kAnd, std::move(a), std::move(b)); }
Expr Or(Expr a, Expr b) { return Binary(BinaryOp::kOr, std::move(a), std::move(b)); }

// ---- Statements -----------------------------------------------------------------------------

Stmt For(Var var, Expr min, Expr extent, ForKind kind, Stmt body) {
  if (kind == ForKind::kThreadBinding)
    throw Error(ErrorKind::kValue, "For: use ThreadFor for a loop bound to a thread axis");
  Need(var, "for");
  Need(min, "for");
  Need(extent, "for");
  Need(body, "for");
  auto n = std::make_shared<ForNode>();
  n->var = std::move(var);
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = std::move(body);
  return Stmt(std::move(n));
}
Stmt For(Var var, Expr min, Expr extent, Expr step, ForKind kind, Stmt body) {
  Need(step, "for");
  Stmt s = For(std::move(var), std::move(min), std::move(extent), kind, std::move(body));
  auto n = std::make_shared<ForNode>(*s.As<ForNode>());
  n->step = std::move(step);
  return Stmt(std::move(n));
}
Stmt ForRange(Var var, Expr begin, Expr end, int64_t step, ForKind kind, Stmt body) {
  Need(var, "for");
  Need(begin, "for");
  Need(end, "for");
  if (step == 0) throw Error(ErrorKind::kValue, "ForRange: the step must not be 0");
  const DType t = var.dtype();
  // The trip count of C's loop: ceil((end - begin) / step), or none when begin is past end.
  Expr span = step > 0 ? end - begin : begin - end;
  const int64_t magnitude = step > 0 ? step : -step;
  Expr count = magnitude == 1 ? span : (span + IntImm(t, magnitude - 1)) / IntImm(t, magnitude);
  if (step == 1) return For(std::move(var), std::move(begin), std::move(count), kind, body);
  return For(std::move(var), std::move(begin), std::move(count), IntImm(t, step), kind,
             std::move(body));
}
Stmt ParallelFor(Var var, Expr min, Expr extent, ScheduleKind schedule, int64_t chunk, Stmt body) {
  if (chunk < 0) throw Error(ErrorKind::kValue, "ParallelFor: the chunk must not be negative");
  Stmt s =
      For(std::move(var), std::move(min), std::move(extent), ForKind::kParallel, std::move(body));
  auto n = std::make_shared<ForNode>(*s.As<ForNode>());
  n->schedule = schedule;
  n->chunk = chunk;
  return Stmt(std::move(n));
}
Stmt WithBody(const ForNode& loop, Stmt body) {
  Need(body, "for");
  auto n = std::make_shared<ForNode>(loop);
  n->body = std::move(body);
  return Stmt(std::move(n));
}
bool ForNode::HasStep() const {
  if (!step) return false;
  const auto* one = step.As<IntImmNode>();
  return one == nullptr || one->value != 1;
}
Stmt ThreadFor(Var var, ThreadTag tag, Expr min, Expr extent, Stmt body) {
  if (tag == ThreadTag::kNone)
    throw Error(ErrorKind::kValue, "ThreadFor: give a thread axis (blockIdx.x, threadIdx.x...)");
  Need(var, "for");
  Need(min, "for");
  Need(extent, "for");
  Need(body, "for");
  auto n = std::make_shared<ForNode>();
  n->var = std::move(var);
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = ForKind::kThreadBinding;
  n->thread = tag;
  n->body = std::move(body);
  return Stmt(std::move(n));
}
Stmt IfThenElse(Expr cond, Stmt then_case, Stmt else_case) {
  Need(cond, "if");
  Need(then_case, "if");
  auto n = std::make_shared<IfThenElseNode>();
  n->cond = std::move(cond);
  n->then_case = std::move(then_case);
  n->else_case = std::move(else_case);
  return Stmt(std::move(n));
}
Stmt LetStmt(Var var, Expr value, Stmt body) {
  Need(var, "let");
  Need(value, "let");
  Need(body, "let");
  auto n = std::make_shared<LetStmtNode>();
  n->value = Typed(value, var.dtype());
  n->var = std::move(var);
  n->body = std::move(body);
  return Stmt(std::move(n));
}
Stmt DeclareVar(Var var, Expr value, Stmt body) {
  Stmt s = LetStmt(std::move(var), std::move(value), std::move(body));
  auto n = std::make_shared<LetStmtNode>(*s.As<LetStmtNode>());
  n->assignable = true;
  return Stmt(std::move(n));
}
Stmt WithBody(const LetStmtNode& let, Stmt body) {
  Need(body, "let");
  auto n = std::make_shared<LetStmtNode>(let);
  n->body = std::move(body);
  return Stmt(std::move(n));
}
Stmt Assign(Var var, Expr value) {
  Need(var, "assignment");
  Need(value, "assignment");
  auto n = std::make_shared<AssignNode>();
  n->value = Typed(value, var.dtype());
  n->var = std::move(var);
  return Stmt(std::move(n));
}
Stmt Atomic(AtomicOp op, Buffer buffer, std::vector<Expr> indices, Expr value) {
  if (!buffer) throw Error(ErrorKind::kValue, "Atomic: the buffer is empty");
  for (const auto& i : indices) Need(i, ToString(op));
  Need(value, ToString(op));
  auto n = std::make_shared<AtomicNode>();
  n->op = op;
  n->value = Typed(value, buffer.dtype());
  n->buffer = std::move(buffer);
  n->indices = std::move(indices);
  return Stmt(std::move(n));
}
Stmt Store(Buffer buffer, std::vector<Expr> indices, Expr value) {
  if (!buffer) throw Error(ErrorKind::kValue, "Store: the buffer is empty");
  for (const auto& i : indices) Need(i, "Store");
  Need(value, "Store");
  auto n = std::make_shared<StoreNode>();
  n->value = Typed(value, buffer.dtype());
  n->buffer = std::move(buffer);
  n->indices = std::move(indices);
  return Stmt(std::move(n));
}
Stmt Allocate(Buffer buffer, StorageScope scope, Stmt body) {
  if (!buffer) throw Error(ErrorKind::kValue, "Allocate: the buffer is empty");
  Need(body, "alloc");
  auto n = std::make_shared<AllocateNode>();
  n->buffer = std::move(buffer);
  n->scope = scope;
  n->body = std::move(body);
  return Stmt(std::move(n));
}
Stmt Evaluate(Expr value) {
  Need(value, "Evaluate");
  auto n = std::make_shared<EvaluateNode>();
  n->value = std::move(value);
  return Stmt(std::move(n));
}
Stmt Barrier() { return Stmt(std::make_shared<BarrierNode>()); }
Stmt Seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    Need(s, "Seq");
    if (const auto* seq = s.As<SeqNode>()) {
      flat.insert(flat.end(), seq->seq.begin(), seq->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  auto n = std::make_shared<SeqNode>();
  n->seq = std::move(flat);
  return Stmt(std::move(n));
}

void IRModule::Add(PrimFunc func) {
  if (Find(func.name))
    throw Error(ErrorKind::kValue, "the module already has a function '" + func.name +
                                       "': give each PrimFunc its own name");
  functions_.push_back(std::move(func));
}

const PrimFunc* IRModule::Find(const std::string& name) const {
  for (const auto& f : functions_)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace ir
}  // namespace backplane
