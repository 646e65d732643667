// SPDX-License-Identifier: Apache-2.0
// LowerToVersion (transform.hpp): a module rewritten into the constructs of an older version of
// the text form, for a code generator whose IR library reads only that version.
#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "deep.hpp"
#include "quote.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {
namespace {

// ---- constructs without an older form ---------------------------------------------------------

// A construct that text of the version asked for cannot express and that has no lowering.
struct Unlowerable {
  std::string construct;  // "atomic_add", "C's remainder %"
  std::string text;       // quoted as the library quotes IR
  int needs = 0;          // the version that has it
};

// The first such construct of `f` in the order of its text (params first), found without
// recursion; false if there is none.
bool FindUnlowerable(const PrimFunc& f, int version, Unlowerable* out) {
  struct Item {
    Stmt s;
    Expr e;
  };
  std::vector<Item> todo;  // popped from the back: pushed in reverse text order
  auto push_expr = [&](const Expr& e) {
    if (e) todo.push_back({Stmt(), e});
  };
  auto push_exprs = [&](const std::vector<Expr>& v) {
    for (size_t k = v.size(); k-- > 0;) push_expr(v[k]);
  };
  auto push_stmt = [&](const Stmt& s) {
    if (s) todo.push_back({s, Expr()});
  };
  push_stmt(f.body);
  for (size_t k = f.params.size(); k-- > 0;) {
    if (!f.params[k].is_buffer()) continue;
    const Buffer& b = f.params[k].buffer();
    push_exprs(b->strides);
    push_exprs(b->shape);
  }
  std::unordered_set<const void*> seen;  // shared subtrees are looked at once
  while (!todo.empty()) {
    const Item it = std::move(todo.back());
    todo.pop_back();
    const size_t first = todo.size();  // its children, pushed in text order, then reversed
    if (it.s) {
      if (!seen.insert(it.s.get()).second) continue;
      if (it.s.kind() == StmtKind::kAtomic && version < 2) {
        *out = {ToString(it.s.As<AtomicNode>()->op), detail::StmtHead(it.s), 2};
        return true;
      }
      detail::ForEachChild(it.s, push_expr, push_stmt);
    } else {
      if (!seen.insert(it.e.get()).second) continue;
      if (it.e.kind() == ExprKind::kBinary && it.e.As<BinaryNode>()->op == BinaryOp::kMod &&
          version < 3) {
        *out = {"C's remainder %", detail::Quote(it.e), 3};
        return true;
      }
      detail::ForEachChild(it.e, push_expr);
    }
    std::reverse(todo.begin() + static_cast<std::ptrdiff_t>(first), todo.end());
  }
  return false;
}

// ---- lowering to version 1 --------------------------------------------------------------------

// `value` as an integer of type `t`: wrapped to t's bits, sign-extended for a signed type, as
// the parser stores a literal of that type.
int64_t WrapTo(DType t, uint64_t value) {
  if (t.bits >= 64) return static_cast<int64_t>(value);
  const uint64_t mask = (uint64_t{1} << t.bits) - 1;
  value &= mask;
  if (t.is_int() && ((value >> (t.bits - 1)) & 1) != 0) value |= ~mask;
  return static_cast<int64_t>(value);
}

// -a in the constructs of version 1, a of type `t` (NegNode's meaning).
Expr Negate(const Expr& a, DType t) {
  if (t.lanes == 1) {
    if (const auto* n = a.As<IntImmNode>(); n != nullptr && t.is_integer())
      return IntImm(t, WrapTo(t, uint64_t{0} - static_cast<uint64_t>(n->value)));
    if (const auto* n = a.As<FloatImmNode>(); n != nullptr && t.is_float())
      return std::isnan(n->value) ? a : FloatImm(t, -n->value);
  }
  // A float times -1 flips its sign bit as negation does (0 - x would make +0.0 of +0.0); an
  // integer's 0 - x wraps as negation does, and is what text of version 1 writes as `-x`.
  if (t.is_float()) return Expr(std::make_shared<BinaryNode>(t, BinaryOp::kMul, a, Const(t, -1)));
  return Expr(std::make_shared<BinaryNode>(t, BinaryOp::kSub, Const(t, 0), a));
}

Expr LoadFirst(const Buffer& b) {
  return Expr(std::make_shared<LoadNode>(b.dtype(), b, std::vector<Expr>{IntImm(Int32(), 0)}));
}

Stmt StoreFirst(const Buffer& b, const Expr& value) {
  auto n = std::make_shared<StoreNode>();
  n->buffer = b;
  n->indices = {IntImm(Int32(), 0)};
  n->value = value;
  return Stmt(std::move(n));
}

Stmt Let(const Var& var, const Expr& value, const Stmt& body) {
  auto n = std::make_shared<LetStmtNode>();
  n->var = var;
  n->value = value;
  n->body = body;
  return Stmt(std::move(n));
}

// Rewrites one function into version 1's constructs, except loop steps (LowerLoopSteps's).
// Recursive over the tree: run it with the stack the tree's depth needs (detail::Deep).
class Version1Lowering {
 public:
  explicit Version1Lowering(const PrimFunc& f) : func_(f) {
    for (const Param& p : f.params)
      names_.insert(p.is_buffer() ? p.buffer().name() : p.var().name());
    ForEachStmt(f.body, [&](const Stmt& s) {
      if (const auto* n = s.As<ForNode>()) names_.insert(n->var.name());
      if (const auto* n = s.As<LetStmtNode>()) names_.insert(n->var.name());
      if (const auto* n = s.As<AllocateNode>()) names_.insert(n->buffer.name());
    });
  }

  PrimFunc Run() {
    PrimFunc g = func_;
    for (Param& p : g.params) {
      if (!p.is_buffer()) continue;
      const Buffer b = Rebuilt(p.buffer());
      if (b.get() != p.buffer().get()) p = Param(b);
    }
    g.body = Lower(func_.body);
    return g;
  }

 private:
  // An assignable variable in scope: the allocation that holds it, and how many parallel,
  // vectorized or thread-bound loops were open where it was declared.
  struct Held {
    Buffer buffer;
    size_t depth = 0;
  };
  // A parallel, vectorized or thread-bound loop being lowered: the variables declared outside
  // it that it reads, each as a let bound to its value right before the loop (the loop cannot
  // assign them, so the value is the same throughout).
  struct Frame {
    std::vector<std::pair<Var, Expr>> lets;
    std::unordered_map<const VarNode*, Var> by_var;
  };

  Stmt Lower(const Stmt& s) {
    if (!s) return s;
    switch (s.kind()) {
      case StmtKind::kSeq:
        return detail::MapSeq(s, [&](const Stmt& c) { return Lower(c); });
      case StmtKind::kFor:
        return LowerFor(s);
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        Expr cond = E(n->cond);
        Stmt then_case = Lower(n->then_case);
        Stmt else_case = Lower(n->else_case);
        if (cond.get() == n->cond.get() && then_case.get() == n->then_case.get() &&
            else_case.get() == n->else_case.get())
          return s;
        auto out = std::make_shared<IfThenElseNode>();
        out->cond = std::move(cond);
        out->then_case = std::move(then_case);
        out->else_case = std::move(else_case);
        return Stmt(std::move(out));
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        Expr value = E(n->value);
        if (n->assignable) return LowerVar(*n, value);
        Stmt body = Lower(n->body);
        if (value.get() == n->value.get() && body.get() == n->body.get()) return s;
        return Let(n->var, value, body);
      }
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        Buffer buffer = Mapped(n->buffer);
        std::vector<Expr> indices;
        bool changed = Exprs(n->indices, &indices) || buffer.get() != n->buffer.get();
        Expr value = E(n->value);
        if (!changed && value.get() == n->value.get()) return s;
        auto out = std::make_shared<StoreNode>();
        out->buffer = std::move(buffer);
        out->indices = std::move(indices);
        out->value = std::move(value);
        return Stmt(std::move(out));
      }
      case StmtKind::kAllocate: {
        // A shape reads variables through lets too: a `global` allocation of host code that a
        // kernel uses (a device workspace) or a `shared` one is sized by values, never by loads.
        const auto* n = s.As<AllocateNode>();
        Push();
        Buffer buffer = Rebuilt(n->buffer);
        const std::vector<std::pair<Var, Expr>> lets = Pop();
        Stmt body = Lower(n->body);
        if (buffer.get() == n->buffer.get() && body.get() == n->body.get()) return s;
        auto alloc = std::make_shared<AllocateNode>();
        alloc->buffer = std::move(buffer);
        alloc->scope = n->scope;
        alloc->body = std::move(body);
        Stmt out(std::move(alloc));
        for (size_t k = lets.size(); k-- > 0;) out = Let(lets[k].first, lets[k].second, out);
        return out;
      }
      case StmtKind::kEvaluate: {
        const auto* n = s.As<EvaluateNode>();
        Expr value = E(n->value);
        if (value.get() == n->value.get()) return s;
        auto out = std::make_shared<EvaluateNode>();
        out->value = std::move(value);
        return Stmt(std::move(out));
      }
      case StmtKind::kAssign: {
        const auto* n = s.As<AssignNode>();
        auto it = held_.find(n->var.get());
        if (it == held_.end())
          throw Error(ErrorKind::kValue,
                      "LowerToVersion: in function '" + func_.name + "': `" + detail::StmtHead(s) +
                          "` assigns '" + (n->var ? n->var.name() : std::string("<null>")) +
                          "', which is not an assignable variable in scope: expected a module "
                          "that passes Verify; declare it with var");
        return StoreFirst(it->second.buffer, E(n->value));
      }
      case StmtKind::kAtomic: {
        const auto* n = s.As<AtomicNode>();
        Buffer buffer = Mapped(n->buffer);
        std::vector<Expr> indices;
        bool changed = Exprs(n->indices, &indices) || buffer.get() != n->buffer.get();
        Expr value = E(n->value);
        if (!changed && value.get() == n->value.get()) return s;
        auto out = std::make_shared<AtomicNode>();
        out->op = n->op;
        out->buffer = std::move(buffer);
        out->indices = std::move(indices);
        out->value = std::move(value);
        return Stmt(std::move(out));
      }
      case StmtKind::kBarrier:
        return s;
    }
    return s;
  }

  // A loop without its schedule; a concurrent loop with the lets of the variables declared
  // outside it that it (its bounds included) reads.
  Stmt LowerFor(const Stmt& s) {
    const auto* n = s.As<ForNode>();
    const bool concurrent = n->for_kind == ForKind::kParallel ||
                            n->for_kind == ForKind::kVectorized ||
                            n->for_kind == ForKind::kThreadBinding;
    if (concurrent) Push();
    Expr min = E(n->min);
    Expr extent = E(n->extent);
    Expr step = E(n->step);
    Stmt body = Lower(n->body);
    std::vector<std::pair<Var, Expr>> lets;
    if (concurrent) lets = Pop();
    if (min.get() == n->min.get() && extent.get() == n->extent.get() &&
        step.get() == n->step.get() && body.get() == n->body.get() &&
        n->schedule == ScheduleKind::kDefault && n->chunk == 0 && lets.empty())
      return s;
    auto loop = std::make_shared<ForNode>(*n);
    loop->min = std::move(min);
    loop->extent = std::move(extent);
    loop->step = std::move(step);
    loop->body = std::move(body);
    loop->schedule = ScheduleKind::kDefault;
    loop->chunk = 0;
    Stmt out(std::move(loop));
    for (size_t k = lets.size(); k-- > 0;) out = Let(lets[k].first, lets[k].second, out);
    return out;
  }

  // `var s: T = value; body` as `alloc s: T[1] local; s[0] = value; body`, the body's reads and
  // assignments of s as loads and stores of s[0]. The allocation takes the variable's name: the
  // variable is gone, and no other name in its scope is the same (names are never shadowed).
  Stmt LowerVar(const LetStmtNode& n, const Expr& value) {
    const Buffer buffer(n.var.name(), n.var.dtype(), {IntImm(Int32(), 1)});
    held_[n.var.get()] = Held{buffer, frames_.size()};
    Stmt body = Lower(n.body);
    held_.erase(n.var.get());
    auto alloc = std::make_shared<AllocateNode>();
    alloc->buffer = buffer;
    alloc->scope = StorageScope::kLocal;
    alloc->body = body ? Seq({StoreFirst(buffer, value), body}) : StoreFirst(buffer, value);
    return Stmt(std::move(alloc));
  }

  // The expression in version 1's constructs; the same node if nothing in it changes.
  Expr E(const Expr& e) {
    if (!e) return e;
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return e;
      case ExprKind::kVar:
        return Read(e);
      case ExprKind::kBufferRef: {
        const Buffer b = Mapped(e.As<BufferRefNode>()->buffer);
        return b.get() == e.As<BufferRefNode>()->buffer.get()
                   ? e
                   : Expr(std::make_shared<BufferRefNode>(b));
      }
      default:
        break;
    }
    // Shared subtrees are rewritten once (per loop context: a read depends on it).
    auto memo = memo_.find(e.get());
    if (memo != memo_.end()) return memo->second;
    Expr out = Rewrite(e);
    memo_.emplace(e.get(), out);
    return out;
  }

  Expr Rewrite(const Expr& e) {
    const DType t = e.dtype();
    switch (e.kind()) {
      case ExprKind::kBinary: {
        const auto* n = e.As<BinaryNode>();
        Expr a = E(n->a), b = E(n->b);
        if (a.get() == n->a.get() && b.get() == n->b.get()) return e;
        return Expr(std::make_shared<BinaryNode>(t, n->op, std::move(a), std::move(b)));
      }
      case ExprKind::kNot: {
        const auto* n = e.As<NotNode>();
        Expr a = E(n->a);
        return a.get() == n->a.get() ? e : Expr(std::make_shared<NotNode>(t, std::move(a)));
      }
      case ExprKind::kNeg:
        return Negate(E(e.As<NegNode>()->a), t);
      case ExprKind::kSelect: {
        const auto* n = e.As<SelectNode>();
        Expr c = E(n->cond), a = E(n->a), b = E(n->b);
        if (c.get() == n->cond.get() && a.get() == n->a.get() && b.get() == n->b.get()) return e;
        return Expr(std::make_shared<SelectNode>(t, std::move(c), std::move(a), std::move(b)));
      }
      case ExprKind::kCast: {
        const auto* n = e.As<CastNode>();
        Expr v = E(n->value);
        return v.get() == n->value.get() ? e : Expr(std::make_shared<CastNode>(t, std::move(v)));
      }
      case ExprKind::kLoad: {
        const auto* n = e.As<LoadNode>();
        Buffer buffer = Mapped(n->buffer);
        std::vector<Expr> indices;
        if (!Exprs(n->indices, &indices) && buffer.get() == n->buffer.get()) return e;
        return Expr(std::make_shared<LoadNode>(t, std::move(buffer), std::move(indices)));
      }
      case ExprKind::kCall: {
        const auto* n = e.As<CallNode>();
        std::vector<Expr> args;
        if (!Exprs(n->args, &args)) return e;
        return Expr(std::make_shared<CallNode>(t, n->name, std::move(args)));
      }
      case ExprKind::kCallPacked: {
        const auto* n = e.As<CallPackedNode>();
        std::vector<Expr> args;
        if (!Exprs(n->args, &args)) return e;
        return Expr(std::make_shared<CallPackedNode>(n->name, std::move(args)));
      }
      case ExprKind::kRamp: {
        const auto* n = e.As<RampNode>();
        Expr base = E(n->base), stride = E(n->stride);
        if (base.get() == n->base.get() && stride.get() == n->stride.get()) return e;
        return Expr(std::make_shared<RampNode>(t, std::move(base), std::move(stride)));
      }
      case ExprKind::kBroadcast: {
        const auto* n = e.As<BroadcastNode>();
        Expr v = E(n->value);
        return v.get() == n->value.get() ? e
                                         : Expr(std::make_shared<BroadcastNode>(t, std::move(v)));
      }
      default:
        return e;
    }
  }

  // Each of `in` rewritten into `out`; whether any changed.
  bool Exprs(const std::vector<Expr>& in, std::vector<Expr>* out) {
    bool changed = false;
    out->clear();
    for (const Expr& e : in) {
      out->push_back(E(e));
      changed = changed || out->back().get() != e.get();
    }
    return changed;
  }

  // A read of a variable: of an assignable one, a load of its allocation, or inside a
  // concurrent loop that it is declared outside of, the let bound to its value before the
  // outermost such loop.
  Expr Read(const Expr& e) {
    auto it = held_.find(static_cast<const VarNode*>(e.get()));
    if (it == held_.end()) return e;
    const Held& held = it->second;
    if (held.depth >= frames_.size()) return LoadFirst(held.buffer);
    Frame& frame = frames_[held.depth];
    auto known = frame.by_var.find(it->first);
    if (known != frame.by_var.end()) return known->second;
    Var value(Fresh(held.buffer.name() + "_value"), held.buffer.dtype());
    frame.by_var.emplace(it->first, value);
    frame.lets.emplace_back(value, LoadFirst(held.buffer));
    return std::move(value);
  }

  // `b`, or the buffer that replaced it (its shape or strides rewritten).
  Buffer Mapped(const Buffer& b) const {
    auto it = buffers_.find(b.get());
    return it == buffers_.end() ? b : it->second;
  }

  // `b` with its shape and strides rewritten: `b` itself if they stay, else a new buffer that
  // replaces it from here on.
  Buffer Rebuilt(const Buffer& b) {
    if (!b) return b;
    std::vector<Expr> shape, strides;
    const bool shape_changed = Exprs(b->shape, &shape);
    const bool strides_changed = Exprs(b->strides, &strides);
    if (!shape_changed && !strides_changed) return b;
    Buffer out(b.name(), b.dtype(), std::move(shape), std::move(strides));
    buffers_[b.get()] = out;
    return out;
  }

  void Push() {
    frames_.emplace_back();
    memo_.clear();
  }
  std::vector<std::pair<Var, Expr>> Pop() {
    std::vector<std::pair<Var, Expr>> lets = std::move(frames_.back().lets);
    frames_.pop_back();
    memo_.clear();
    return lets;
  }

  std::string Fresh(const std::string& want) {
    std::string name = want;
    for (int k = 1; names_.count(name) != 0; ++k) name = want + std::to_string(k);
    names_.insert(name);
    return name;
  }

  const PrimFunc& func_;
  std::unordered_set<std::string> names_;
  std::unordered_map<const VarNode*, Held> held_;
  std::vector<Frame> frames_;
  std::unordered_map<const BufferNode*, Buffer> buffers_;
  std::unordered_map<const ExprNode*, Expr> memo_;
};

}  // namespace

IRModule LowerToVersion(const IRModule& module, int version) {
  if (version < 1 || version > kTextFormatVersion)
    throw Error(ErrorKind::kValue, "LowerToVersion: there is no IR text version " +
                                       std::to_string(version) + ": expected a version from 1 to " +
                                       std::to_string(kTextFormatVersion) +
                                       " (those this library reads and writes)");
  if (TextVersion(module) <= version) return module;
  IRModule out;
  detail::Deep(TreeDepth(module) + 4, [&] {
    for (const PrimFunc& f : module.functions()) {
      Unlowerable u;
      if (FindUnlowerable(f, version, &u))
        throw Error(ErrorKind::kUnsupported,
                    "function '" + f.name + "' uses " + u.construct + " (`" + u.text +
                        "`), which needs IR text version " + std::to_string(u.needs));
    }
    // Only `%` is of version 3, and it has no older form: what remains is for version 1.
    for (const PrimFunc& f : module.functions()) out.Add(Version1Lowering(f).Run());
  });
  return LowerLoopSteps(out);
}

}  // namespace ir
}  // namespace backplane
