// SPDX-License-Identifier: Apache-2.0
// Internal: the expressions a statement holds itself, for the walkers of SplitHostDevice
// (split.cc) and of SplitErrors (split_check.cc), which must see the same ones.
#ifndef BACKPLANE_IR_SRC_OWN_EXPRS_HPP_
#define BACKPLANE_IR_SRC_OWN_EXPRS_HPP_

#include <backplane/ir/ir.hpp>
#include <functional>
#include <vector>

namespace backplane {
namespace ir {
namespace detail {

// Calls `fn` on each expression that statement `s` holds itself (not those of nested
// statements).
inline void ForEachOwnExpr(const Stmt& s, const std::function<void(const Expr&)>& fn) {
  auto each = [&](const std::vector<Expr>& v) {
    for (const Expr& e : v)
      if (e) fn(e);
  };
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* n = s.As<ForNode>();
      each({n->min, n->extent, n->step});
      return;
    }
    case StmtKind::kIfThenElse:
      fn(s.As<IfThenElseNode>()->cond);
      return;
    case StmtKind::kLetStmt:
      fn(s.As<LetStmtNode>()->value);
      return;
    case StmtKind::kStore:
      each(s.As<StoreNode>()->indices);
      fn(s.As<StoreNode>()->value);
      return;
    case StmtKind::kAtomic:
      each(s.As<AtomicNode>()->indices);
      fn(s.As<AtomicNode>()->value);
      return;
    case StmtKind::kAllocate:
      each(s.As<AllocateNode>()->buffer->shape);
      each(s.As<AllocateNode>()->buffer->strides);
      return;
    case StmtKind::kEvaluate:
      fn(s.As<EvaluateNode>()->value);
      return;
    case StmtKind::kAssign:
      fn(s.As<AssignNode>()->value);
      return;
    default:
      return;
  }
}

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_OWN_EXPRS_HPP_
