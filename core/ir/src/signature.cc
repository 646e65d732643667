// SPDX-License-Identifier: Apache-2.0
// CheckArgs and EvalIntExpr (docs/ir.md, "Argument checking").
#include <algorithm>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <cstdio>
#include <string>

#include "deep.hpp"
#include "quote.hpp"
#include "scalar.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {
namespace {

// The index of the scalar param that `v` names: by node, else by name; -1 if none.
int FindScalarParam(const PrimFunc& func, const VarNode* v) {
  for (size_t k = 0; k < func.params.size(); ++k)
    if (!func.params[k].is_buffer() && func.params[k].var().get() == v) return static_cast<int>(k);
  for (size_t k = 0; k < func.params.size(); ++k)
    if (!func.params[k].is_buffer() && func.params[k].var().name() == v->name)
      return static_cast<int>(k);
  return -1;
}

class IntEvaluator {
 public:
  IntEvaluator(const PrimFunc& f, const std::vector<ArgView>& a) : func_(f), args_(a) {}

  int64_t Eval(const Expr& e) {
    if (!e) Fail("an expression is empty");
    const DType t = e.dtype();
    if (!t.is_scalar() || !(t.is_integer() || t.is_bool()))
      Fail("`" + detail::Quote(e) + "` is " + ToString(t) + ", not a scalar integer");
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return detail::WrapInt(static_cast<uint64_t>(e.As<IntImmNode>()->value), t);
      case ExprKind::kVar:
        return VarValue(*e.As<VarNode>());
      case ExprKind::kBinary:
        return Binary(*e.As<BinaryNode>(), e);
      case ExprKind::kNot:
        return Eval(e.As<NotNode>()->a) == 0 ? 1 : 0;
      case ExprKind::kNeg:
        return detail::WrapInt(0 - static_cast<uint64_t>(Eval(e.As<NegNode>()->a)), t);
      case ExprKind::kSelect: {
        const auto* n = e.As<SelectNode>();
        // The chosen arm only (docs/ir.md): `select(d != 0, n / d, 0)` is 0 when d is 0.
        return Eval(n->cond) != 0 ? Eval(n->a) : Eval(n->b);
      }
      case ExprKind::kCast: {
        const Expr& v = e.As<CastNode>()->value;
        return detail::WrapInt(static_cast<uint64_t>(Eval(v)), t);
      }
      default:
        Fail("`" + detail::Quote(e) + "` is not an integer expression over scalar parameters");
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(ErrorKind::kValue, func_.name + ": " + what);
  }

  int64_t VarValue(const VarNode& v) {
    const int k = FindScalarParam(func_, &v);
    if (k < 0)
      Fail("'" + v.name + "' is not a scalar parameter: an integer expression evaluated from " +
           "the arguments may only use scalar parameters");
    if (static_cast<size_t>(k) >= args_.size())
      Fail("no argument for '" + v.name + "' (argument " + std::to_string(k) + "): pass one " +
           "argument per parameter");
    const ArgView& a = args_[static_cast<size_t>(k)];
    if (a.kind != ArgView::Kind::kInt)
      Fail("argument " + std::to_string(k) + " '" + v.name + "' is not an integer");
    return detail::WrapInt(static_cast<uint64_t>(a.i), v.dtype);
  }

  int64_t Binary(const BinaryNode& n, const Expr& e) {
    const DType t = n.a.dtype();
    if (n.op == BinaryOp::kAnd) return Eval(n.a) != 0 && Eval(n.b) != 0;
    if (n.op == BinaryOp::kOr) return Eval(n.a) != 0 || Eval(n.b) != 0;
    const int64_t a = Eval(n.a);
    const int64_t b = Eval(n.b);
    const bool u = t.is_uint() || t.is_bool();
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (n.op) {
      case BinaryOp::kAdd:
        return detail::WrapInt(ua + ub, t);
      case BinaryOp::kSub:
        return detail::WrapInt(ua - ub, t);
      case BinaryOp::kMul:
        return detail::WrapInt(ua * ub, t);
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv:
      case BinaryOp::kFloorMod:
      case BinaryOp::kMod: {
        if (b == 0) Fail("integer division by zero in `" + detail::Quote(e) + "`");
        int64_t r = n.op == BinaryOp::kDiv        ? detail::DivTrunc(a, b, u)
                    : n.op == BinaryOp::kFloorDiv ? detail::FloorDivInt(a, b, u)
                    : n.op == BinaryOp::kMod      ? detail::ModTrunc(a, b, u)
                                                  : detail::FloorModInt(a, b, u);
        return detail::WrapInt(static_cast<uint64_t>(r), t);
      }
      case BinaryOp::kMin:
        return u ? (ua < ub ? a : b) : (a < b ? a : b);
      case BinaryOp::kMax:
        return u ? (ua > ub ? a : b) : (a > b ? a : b);
      case BinaryOp::kEq:
        return a == b;
      case BinaryOp::kNe:
        return a != b;
      case BinaryOp::kLt:
        return u ? ua < ub : a < b;
      case BinaryOp::kLe:
        return u ? ua <= ub : a <= b;
      case BinaryOp::kGt:
        return u ? ua > ub : a > b;
      case BinaryOp::kGe:
        return u ? ua >= ub : a >= b;
      default:
        Fail("`" + detail::Quote(e) + "` is not an integer expression");
    }
  }

  const PrimFunc& func_;
  const std::vector<ArgView>& args_;
};

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + v[k];
  return s;
}
std::string List(const int64_t* v, int n) {
  std::string s = "[";
  for (int k = 0; k < n; ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}
std::string List(const std::vector<int64_t>& v) {
  return List(v.data(), static_cast<int>(v.size()));
}
std::string ExprList(const std::vector<Expr>& v) {
  std::vector<std::string> s;
  for (const Expr& e : v) s.push_back(detail::Quote(e));
  return "[" + Join(s) + "]";
}

// The scalar params that `e` mentions, in order of first appearance.
void CollectVars(const Expr& e, std::vector<const VarNode*>* out) {
  detail::ForEachArithmeticVar(e, [out](const VarNode* v) {
    for (const VarNode* x : *out)
      if (x == v || x->name == v->name) return;
    out->push_back(v);
  });
}

std::string DescribeScalar(const ArgView& a) {
  switch (a.kind) {
    case ArgView::Kind::kInt:
      return "an integer (" + std::to_string(a.i) + ")";
    case ArgView::Kind::kFloat: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17g", a.f);
      return std::string("a float (") + buf + ")";
    }
    case ArgView::Kind::kBuffer:
      break;
  }
  return "a buffer";
}

class ArgChecker {
 public:
  ArgChecker(const PrimFunc& f, const std::vector<ArgView>& a) : func_(f), args_(a) {}

  std::string Run() {
    if (args_.size() != func_.params.size()) {
      std::vector<std::string> names;
      for (const Param& p : func_.params)
        names.push_back(p.is_buffer() ? p.buffer().name() : p.var().name());
      return func_.name + ": expected " + std::to_string(func_.params.size()) + " argument" +
             (func_.params.size() == 1 ? "" : "s") + " (" + Join(names) + "), got " +
             std::to_string(args_.size()) + "; pass one argument per parameter";
    }
    for (size_t k = 0; k < args_.size(); ++k) {
      const Param& p = func_.params[k];
      std::string msg = p.is_buffer() ? CheckBuffer(k, p.buffer()) : CheckScalar(k, p.var());
      if (!msg.empty()) return msg;
    }
    return "";
  }

 private:
  std::string Head(size_t k, const std::string& name) const {
    return func_.name + ": argument " + std::to_string(k) + " '" + name + "'";
  }

  std::string CheckScalar(size_t k, const Var& v) const {
    const ArgView& a = args_[k];
    const DType t = v.dtype();
    auto head = [&] { return Head(k, v.name()); };  // only for a message
    auto want = [&] {                               // only for a message
      return t.is_float() ? "a " + ToString(t) + " scalar; pass a number"
                          : "an " + ToString(t) + " scalar; pass an integer";
    };
    if (!t.is_scalar() || t.is_handle())
      return head() + " has the unsupported parameter type " + ToString(t) +
             ": declare scalar parameters with a scalar dtype";
    if (t.is_float()) {
      if (a.kind == ArgView::Kind::kBuffer) return head() + " is a buffer, expected " + want();
      return "";
    }
    // int, uint, bool
    if (t.is_bool()) {
      const std::string bwant = "a bool scalar; pass 0 or 1";
      if (a.kind != ArgView::Kind::kInt)
        return head() + " is " + DescribeScalar(a) + ", expected " + bwant;
      if (a.i != 0 && a.i != 1)
        return head() + " is " + std::to_string(a.i) + ", out of the range of bool [0, 1]; pass " +
               "0 or 1";
      return "";
    }
    if (a.kind != ArgView::Kind::kInt)
      return head() + " is " + DescribeScalar(a) + ", expected " + want();
    int64_t lo, hi;
    std::string hi_text;
    if (t.is_uint()) {
      lo = 0;
      hi = t.bits == 64 ? INT64_MAX : static_cast<int64_t>((uint64_t{1} << t.bits) - 1);
      hi_text = t.bits == 64 ? "18446744073709551615" : std::to_string(hi);
    } else {
      lo = t.bits == 64 ? INT64_MIN : -(int64_t{1} << (t.bits - 1));
      hi = t.bits == 64 ? INT64_MAX : (int64_t{1} << (t.bits - 1)) - 1;
      hi_text = std::to_string(hi);
    }
    if (a.i < lo || a.i > hi)
      return head() + " is " + std::to_string(a.i) + ", out of the range of " + ToString(t) + " [" +
             std::to_string(lo) + ", " + hi_text + "]; pass a value in that range";
    return "";
  }

  // Evaluates `exprs` into *values; false with *error set if they cannot be evaluated. Builds
  // no text: every call of a kernel runs this, and the text is needed only for a message.
  bool Evaluate(const std::vector<Expr>& exprs, std::vector<int64_t>* values,
                std::string* error) const {
    values->clear();
    for (const Expr& e : exprs) {
      try {
        // Within Run, which Deep gave the stack the deepest shape or stride needs.
        values->push_back(IntEvaluator(func_, args_).Eval(e));
      } catch (const Error& err) {
        *error = err.what();
        return false;
      }
    }
    return true;
  }

  // "[k, n] = [64, 32] (k = 64, n = 32 from the scalar arguments)", or "[64, 32]" when the
  // expressions are constants, for `values` that Evaluate gave for `exprs`.
  std::string Expected(const std::vector<Expr>& exprs, const std::vector<int64_t>& values) const {
    std::vector<const VarNode*> vars;
    for (const Expr& e : exprs) CollectVars(e, &vars);
    const std::string nums = List(values);
    if (vars.empty()) return nums;
    std::vector<std::string> binds;
    for (const VarNode* v : vars) {
      const int p = FindScalarParam(func_, v);
      binds.push_back(v->name + " = " +
                      std::to_string(detail::WrapInt(
                          static_cast<uint64_t>(args_[static_cast<size_t>(p)].i), v->dtype)));
    }
    return ExprList(exprs) + " = " + nums + " (" + Join(binds) + " from the scalar arguments)";
  }

  std::string CheckBuffer(size_t k, const Buffer& b) const {
    const ArgView& a = args_[k];
    auto head = [&] { return Head(k, b.name()); };  // only for a message
    if (a.kind != ArgView::Kind::kBuffer)
      return head() + " is " + DescribeScalar(a) + ", expected a buffer<" + ToString(b.dtype()) +
             ">" + ExprList(b->shape) + "; pass a tensor";
    if (a.dtype != b.dtype())
      return head() + " has dtype " + ToString(a.dtype) + ", expected " + ToString(b.dtype()) +
             "; pass a " + ToString(b.dtype()) + " tensor";
    const int rank = static_cast<int>(b->shape.size());
    if (a.ndim < 0 || (a.ndim > 0 && a.shape == nullptr))
      return head() + " has " + std::to_string(a.ndim) + " dimensions and " +
             (a.shape == nullptr ? "no shape (a null pointer)" : "a shape") + ", expected rank " +
             std::to_string(rank) + "; pass a tensor with its shape";
    // Scratch reused by every call on this thread: a launch allocates nothing here.
    struct Scratch {
      std::vector<int64_t> want, compact, given, want_strides;
    };
    thread_local Scratch scratch;  // one TLS lookup
    std::vector<int64_t>& want = scratch.want;
    std::vector<int64_t>& compact = scratch.compact;
    std::vector<int64_t>& given = scratch.given;
    std::vector<int64_t>& want_strides = scratch.want_strides;
    std::string error;
    if (!Evaluate(b->shape, &want, &error))
      return head() + ": cannot evaluate its shape " + ExprList(b->shape) + " (" + error +
             "); pass scalar arguments that give a valid shape";
    for (int d = 0; d < rank; ++d)
      if (want[static_cast<size_t>(d)] < 0)
        return head() + ": its shape " + Expected(b->shape, want) +
               " has a negative extent; pass scalar arguments that give non-negative extents";
    if (a.ndim != rank)
      return head() + " has rank " + std::to_string(a.ndim) + " (shape " + List(a.shape, a.ndim) +
             "), expected rank " + std::to_string(rank) + ": " + Expected(b->shape, want) +
             "; pass a tensor of that shape";
    for (int d = 0; d < rank; ++d)
      if (a.shape[d] != want[static_cast<size_t>(d)])
        return head() + " has shape " + List(a.shape, a.ndim) + ", expected " +
               Expected(b->shape, want) + "; pass a tensor of that shape";
    bool empty = false;
    for (int64_t e : want) empty = empty || e == 0;
    if (a.data == nullptr && !empty)
      return head() + " has no data (a null pointer); pass an allocated tensor";
    // Strides: the declared ones, or compact row-major.
    compact.assign(static_cast<size_t>(rank), 0);
    uint64_t s = 1;  // wraps for absurd shapes instead of overflowing
    for (int d = rank - 1; d >= 0; --d) {
      compact[static_cast<size_t>(d)] = static_cast<int64_t>(s);
      s *= static_cast<uint64_t>(want[static_cast<size_t>(d)]);
    }
    if (a.strides != nullptr) {
      given.assign(a.strides, a.strides + rank);
    } else {
      given = compact;
    }
    auto given_text = [&] {
      return (a.strides != nullptr ? "strides " : "compact row-major strides ") + List(given);
    };
    if (b->strides.empty()) {
      if (!SameStrides(given, compact, want))
        return head() + " has " + given_text() + ", expected compact row-major strides " +
               List(compact) + "; pass a contiguous tensor (or declare strides on the parameter)";
      return "";
    }
    if (!Evaluate(b->strides, &want_strides, &error))
      return head() + ": cannot evaluate its strides " + ExprList(b->strides) + " (" + error +
             "); pass scalar arguments that give valid strides";
    if (!SameStrides(given, want_strides, want))
      return head() + " has " + given_text() + ", expected " + Expected(b->strides, want_strides) +
             "; pass a tensor with those strides";
    return "";
  }

  static bool SameStrides(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                          const std::vector<int64_t>& shape) {
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != 1 && a[d] != b[d]) return false;
    return true;
  }

  const PrimFunc& func_;
  const std::vector<ArgView>& args_;
};

}  // namespace

int64_t EvalIntExpr(const PrimFunc& func, const Expr& e, const std::vector<ArgView>& args) {
  return detail::Deep(TreeDepth(e), [&] { return IntEvaluator(func, args).Eval(e); });
}

int64_t ArgCheckDepth(const PrimFunc& func) {
  int64_t depth = 0;  // the checker walks the parameters' shapes and strides
  for (const Param& p : func.params) {
    if (!p.is_buffer()) continue;
    for (const Expr& e : p.buffer()->shape) depth = std::max(depth, TreeDepth(e));
    for (const Expr& e : p.buffer()->strides) depth = std::max(depth, TreeDepth(e));
  }
  return depth;
}

std::string CheckArgs(const PrimFunc& func, const std::vector<ArgView>& args, int64_t depth) {
  return detail::Deep(depth, [&] { return ArgChecker(func, args).Run(); });
}

std::string CheckArgs(const PrimFunc& func, const std::vector<ArgView>& args) {
  return CheckArgs(func, args, ArgCheckDepth(func));
}

ArgCheck::ArgCheck(const PrimFunc& func) : func_(&func), depth_(ArgCheckDepth(func)) {
  // A term the fast path can read, or fast_ = false.
  auto term = [&](const Expr& e) {
    Term t;
    const DType d = e ? e.dtype() : DType();
    if (!e || !d.is_scalar() || !(d.is_integer() || d.is_bool())) {
      fast_ = false;
    } else if (const auto* c = e.As<IntImmNode>()) {
      t.value = detail::WrapInt(static_cast<uint64_t>(c->value), d);
    } else if (const auto* v = e.As<VarNode>(); v != nullptr && FindScalarParam(func, v) >= 0) {
      t.param = FindScalarParam(func, v);
      t.dtype = v->dtype;
    } else {
      fast_ = false;
    }
    terms_.push_back(t);
  };
  for (const Param& p : func.params) {
    ParamCheck c;
    c.buffer = p.is_buffer();
    if (c.buffer) {
      const Buffer& b = p.buffer();
      c.dtype = b.dtype();
      c.rank = static_cast<int>(b->shape.size());
      c.has_strides = !b->strides.empty();
      if (c.rank > kMaxRank || (c.has_strides && b->strides.size() != b->shape.size())) {
        fast_ = false;
      }
      c.shape = terms_.size();
      for (const Expr& e : b->shape) term(e);
      c.strides = terms_.size();
      for (const Expr& e : b->strides) term(e);
    } else {
      const DType t = p.var().dtype();
      c.dtype = t;
      if (!t.is_scalar() || t.is_handle()) fast_ = false;  // CheckArgs says why
      if (t.bits == 0 || t.bits > 64) {
        fast_ = false;  // no range to shift out: CheckArgs decides
      } else if (t.is_bool()) {
        c.hi = 1;
      } else if (t.is_uint()) {
        c.hi = t.bits == 64 ? INT64_MAX : static_cast<int64_t>((uint64_t{1} << t.bits) - 1);
      } else if (!t.is_float()) {
        c.lo = t.bits == 64 ? INT64_MIN : -(int64_t{1} << (t.bits - 1));
        c.hi = t.bits == 64 ? INT64_MAX : (int64_t{1} << (t.bits - 1)) - 1;
      }
    }
    params_.push_back(c);
  }
}

bool ArgCheck::Read(const Term& t, const std::vector<ArgView>& args, int64_t* out) const {
  if (t.param < 0) {
    *out = t.value;
    return true;
  }
  const ArgView& a = args[static_cast<size_t>(t.param)];
  if (a.kind != ArgView::Kind::kInt) return false;
  *out = detail::WrapInt(static_cast<uint64_t>(a.i), t.dtype);
  return true;
}

bool ArgCheck::Passes(const std::vector<ArgView>& args) const {
  if (!fast_ || args.size() != params_.size()) return false;
  for (size_t k = 0; k < args.size(); ++k) {
    const ParamCheck& c = params_[k];
    const ArgView& a = args[k];
    if (!c.buffer) {
      if (c.dtype.is_float()) {
        if (a.kind == ArgView::Kind::kBuffer) return false;
      } else if (a.kind != ArgView::Kind::kInt || a.i < c.lo || a.i > c.hi) {
        return false;
      }
      continue;
    }
    if (a.kind != ArgView::Kind::kBuffer || a.dtype != c.dtype || a.ndim != c.rank ||
        (c.rank > 0 && a.shape == nullptr)) {
      return false;
    }
    int64_t want[kMaxRank];
    bool empty = false;
    for (int d = 0; d < c.rank; ++d) {
      if (!Read(terms_[c.shape + static_cast<size_t>(d)], args, &want[d]) || want[d] < 0 ||
          a.shape[d] != want[d]) {
        return false;
      }
      empty = empty || want[d] == 0;
    }
    if (a.data == nullptr && !empty) return false;
    if (a.strides == nullptr && !c.has_strides) continue;  // compact, as wanted
    uint64_t compact = 1;  // wraps for absurd shapes, as CheckArgs's does
    for (int d = c.rank - 1; d >= 0; --d) {
      const int64_t given = a.strides != nullptr ? a.strides[d] : static_cast<int64_t>(compact);
      int64_t expected = static_cast<int64_t>(compact);
      if (c.has_strides && !Read(terms_[c.strides + static_cast<size_t>(d)], args, &expected)) {
        return false;
      }
      if (want[d] != 1 && given != expected) return false;
      compact *= static_cast<uint64_t>(want[d]);
    }
  }
  return true;
}

std::string ArgCheck::operator()(const std::vector<ArgView>& args) const {
  if (Passes(args)) return std::string();
  return CheckArgs(*func_, args, depth_);
}

}  // namespace ir
}  // namespace backplane
