// SPDX-License-Identifier: Apache-2.0
// Structural equality: same tree, with variables and buffers matched one to one.
#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <cstring>
#include <unordered_map>

#include "deep.hpp"

namespace backplane {
namespace ir {
namespace {

class Equal {
 public:
  bool E(const Expr& a, const Expr& b) {
    if (!a || !b) return !a && !b;
    if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
    switch (a.kind()) {
      case ExprKind::kIntImm:
        return a.As<IntImmNode>()->value == b.As<IntImmNode>()->value;
      case ExprKind::kFloatImm: {
        double x = a.As<FloatImmNode>()->value, y = b.As<FloatImmNode>()->value;
        return std::memcmp(&x, &y, sizeof x) == 0 || (x != x && y != y);
      }
      case ExprKind::kVar:
        return V(a.As<VarNode>(), b.As<VarNode>());
      case ExprKind::kBinary: {
        const auto *x = a.As<BinaryNode>(), *y = b.As<BinaryNode>();
        return x->op == y->op && E(x->a, y->a) && E(x->b, y->b);
      }
      case ExprKind::kNot:
        return E(a.As<NotNode>()->a, b.As<NotNode>()->a);
      case ExprKind::kNeg:
        return E(a.As<NegNode>()->a, b.As<NegNode>()->a);
      case ExprKind::kSelect: {
        const auto *x = a.As<SelectNode>(), *y = b.As<SelectNode>();
        return E(x->cond, y->cond) && E(x->a, y->a) && E(x->b, y->b);
      }
      case ExprKind::kCast:
        return E(a.As<CastNode>()->value, b.As<CastNode>()->value);
      case ExprKind::kLoad: {
        const auto *x = a.As<LoadNode>(), *y = b.As<LoadNode>();
        return B(x->buffer, y->buffer) && L(x->indices, y->indices);
      }
      case ExprKind::kCall: {
        const auto *x = a.As<CallNode>(), *y = b.As<CallNode>();
        return x->name == y->name && L(x->args, y->args);
      }
      case ExprKind::kCallPacked: {
        const auto *x = a.As<CallPackedNode>(), *y = b.As<CallPackedNode>();
        return x->name == y->name && L(x->args, y->args);
      }
      case ExprKind::kRamp: {
        const auto *x = a.As<RampNode>(), *y = b.As<RampNode>();
        return E(x->base, y->base) && E(x->stride, y->stride);
      }
      case ExprKind::kBroadcast:
        return E(a.As<BroadcastNode>()->value, b.As<BroadcastNode>()->value);
      case ExprKind::kBufferRef:
        return B(a.As<BufferRefNode>()->buffer, b.As<BufferRefNode>()->buffer);
    }
    return false;
  }

  bool S(const Stmt& a, const Stmt& b) {
    if (!a || !b) return !a && !b;
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
      case StmtKind::kFor: {
        const auto *x = a.As<ForNode>(), *y = b.As<ForNode>();
        return x->for_kind == y->for_kind && x->thread == y->thread && x->schedule == y->schedule &&
               x->chunk == y->chunk && E(x->min, y->min) && E(x->extent, y->extent) &&
               E(x->step, y->step) && Bind(x->var, y->var) && S(x->body, y->body);
      }
      case StmtKind::kIfThenElse: {
        const auto *x = a.As<IfThenElseNode>(), *y = b.As<IfThenElseNode>();
        return E(x->cond, y->cond) && S(x->then_case, y->then_case) &&
               S(x->else_case, y->else_case);
      }
      case StmtKind::kLetStmt: {
        const auto *x = a.As<LetStmtNode>(), *y = b.As<LetStmtNode>();
        return x->assignable == y->assignable && E(x->value, y->value) && Bind(x->var, y->var) &&
               S(x->body, y->body);
      }
      case StmtKind::kStore: {
        const auto *x = a.As<StoreNode>(), *y = b.As<StoreNode>();
        return B(x->buffer, y->buffer) && L(x->indices, y->indices) && E(x->value, y->value);
      }
      case StmtKind::kAllocate: {
        const auto *x = a.As<AllocateNode>(), *y = b.As<AllocateNode>();
        return x->scope == y->scope && BindBuffer(x->buffer, y->buffer) && S(x->body, y->body);
      }
      case StmtKind::kEvaluate:
        return E(a.As<EvaluateNode>()->value, b.As<EvaluateNode>()->value);
      case StmtKind::kBarrier:
        return true;
      case StmtKind::kAtomic: {
        const auto *x = a.As<AtomicNode>(), *y = b.As<AtomicNode>();
        return x->op == y->op && B(x->buffer, y->buffer) && L(x->indices, y->indices) &&
               E(x->value, y->value);
      }
      case StmtKind::kAssign: {
        const auto *x = a.As<AssignNode>(), *y = b.As<AssignNode>();
        return V(x->var.get(), y->var.get()) && E(x->value, y->value);
      }
      case StmtKind::kSeq: {
        const auto &x = a.As<SeqNode>()->seq, &y = b.As<SeqNode>()->seq;
        if (x.size() != y.size()) return false;
        for (size_t k = 0; k < x.size(); ++k)
          if (!S(x[k], y[k])) return false;
        return true;
      }
    }
    return false;
  }

  bool F(const PrimFunc& a, const PrimFunc& b) {
    if (a.name != b.name || a.attrs != b.attrs || a.launch_axes != b.launch_axes ||
        a.params.size() != b.params.size())
      return false;
    for (size_t k = 0; k < a.params.size(); ++k) {
      const Param &x = a.params[k], &y = b.params[k];
      if (x.is_buffer() != y.is_buffer()) return false;
      if (x.is_buffer() ? !BindBuffer(x.buffer(), y.buffer()) : !Bind(x.var(), y.var()))
        return false;
    }
    return S(a.body, b.body);
  }

 private:
  bool L(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (!E(a[k], b[k])) return false;
    return true;
  }
  // A binding site: from here on, x corresponds to y.
  bool Bind(const Var& x, const Var& y) {
    if (x.name() != y.name() || x.dtype() != y.dtype()) return false;
    vars_[x.get()] = y.get();
    return true;
  }
  // A use: free variables are matched on first sight.
  bool V(const VarNode* x, const VarNode* y) {
    if (x->name != y->name) return false;
    auto it = vars_.find(x);
    if (it == vars_.end()) {
      vars_[x] = y;
      return true;
    }
    return it->second == y;
  }
  bool BindBuffer(const Buffer& x, const Buffer& y) {
    if (x.name() != y.name() || x.dtype() != y.dtype() || !L(x->shape, y->shape) ||
        !L(x->strides, y->strides))
      return false;
    bufs_[x.get()] = y.get();
    return true;
  }
  bool B(const Buffer& x, const Buffer& y) {
    auto it = bufs_.find(x.get());
    if (it == bufs_.end()) return BindBuffer(x, y);
    return it->second == y.get();
  }

  std::unordered_map<const VarNode*, const VarNode*> vars_;
  std::unordered_map<const BufferNode*, const BufferNode*> bufs_;
};

}  // namespace

// The walk stops at the first difference, so the shallower tree bounds its depth.
bool StructuralEqual(const Expr& a, const Expr& b) {
  return detail::Deep(std::min(TreeDepth(a), TreeDepth(b)), [&] { return Equal().E(a, b); });
}
bool StructuralEqual(const Stmt& a, const Stmt& b) {
  return detail::Deep(std::min(TreeDepth(a), TreeDepth(b)), [&] { return Equal().S(a, b); });
}
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b) {
  return detail::Deep(std::min(TreeDepth(a), TreeDepth(b)), [&] { return Equal().F(a, b); });
}
bool StructuralEqual(const IRModule& a, const IRModule& b) {
  if (a.functions().size() != b.functions().size()) return false;
  for (size_t k = 0; k < a.functions().size(); ++k)
    if (!StructuralEqual(a.functions()[k], b.functions()[k])) return false;
  return true;
}

}  // namespace ir
}  // namespace backplane
