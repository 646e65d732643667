// SPDX-License-Identifier: Apache-2.0
// Internal: the children of each node kind, written once for every pass that walks the tree.
//
// A pass switches over the kinds it treats specially and hands the rest to ForEachChild, which
// calls it back on each child in field order:
//
//   void E(const Expr& e) {
//     if (e.kind() == ExprKind::kVar) return Use(e.As<VarNode>());
//     detail::ForEachChild(e, [&](const Expr& c) { E(c); });
//   }
//
// The switches here name every kind and have no default, so a new node kind is an error
// (-Wswitch) here and nowhere else.
#ifndef BACKPLANE_IR_SRC_VISIT_HPP_
#define BACKPLANE_IR_SRC_VISIT_HPP_

#include <backplane/ir/ir.hpp>
#include <utility>
#include <vector>

namespace backplane {
namespace ir {
namespace detail {

// Calls fn(const Expr&) on each operand of `n`, in field order: Binary a, b; Not, Neg a;
// Select cond, a, b; Cast, Broadcast value; Load indices; Call, CallPacked args; Ramp base,
// stride. Every operand is passed, an empty one too (the verifier reports it); constants,
// variables and buffer references have none. A Load's or BufferRef's buffer is not an operand.
template <typename F>
void ForEachChild(const ExprNode& n, F&& fn) {
  switch (n.kind) {
    case ExprKind::kBinary: {
      const auto& b = static_cast<const BinaryNode&>(n);
      fn(b.a);
      fn(b.b);
      return;
    }
    case ExprKind::kNot:
      fn(static_cast<const NotNode&>(n).a);
      return;
    case ExprKind::kNeg:
      fn(static_cast<const NegNode&>(n).a);
      return;
    case ExprKind::kSelect: {
      const auto& s = static_cast<const SelectNode&>(n);
      fn(s.cond);
      fn(s.a);
      fn(s.b);
      return;
    }
    case ExprKind::kCast:
      fn(static_cast<const CastNode&>(n).value);
      return;
    case ExprKind::kLoad:
      for (const Expr& i : static_cast<const LoadNode&>(n).indices) fn(i);
      return;
    case ExprKind::kCall:
      for (const Expr& a : static_cast<const CallNode&>(n).args) fn(a);
      return;
    case ExprKind::kCallPacked:
      for (const Expr& a : static_cast<const CallPackedNode&>(n).args) fn(a);
      return;
    case ExprKind::kRamp: {
      const auto& r = static_cast<const RampNode&>(n);
      fn(r.base);
      fn(r.stride);
      return;
    }
    case ExprKind::kBroadcast:
      fn(static_cast<const BroadcastNode&>(n).value);
      return;
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
    case ExprKind::kBufferRef:
      return;
  }
}
template <typename F>
void ForEachChild(const Expr& e, F&& fn) {
  ForEachChild(*e.get(), fn);
}

// Calls on_expr(const Expr&) on each expression statement `n` holds itself and on_stmt(const
// Stmt&) on each statement nested in it, in field order: For min, extent, step, body;
// IfThenElse cond, then_case, else_case; LetStmt value, body; Store and Atomic indices, value;
// Allocate the buffer's shape and strides, body; Evaluate and Assign value; Seq each statement.
// A required child is passed even when empty (the verifier reports it); the optional ones, a
// loop's step and an if's else_case, only when set. Assign's var and the buffer a statement
// stores to are not children.
template <typename FE, typename FS>
void ForEachChild(const StmtNode& n, FE&& on_expr, FS&& on_stmt) {
  switch (n.kind) {
    case StmtKind::kFor: {
      const auto& f = static_cast<const ForNode&>(n);
      on_expr(f.min);
      on_expr(f.extent);
      if (f.step) on_expr(f.step);
      on_stmt(f.body);
      return;
    }
    case StmtKind::kIfThenElse: {
      const auto& i = static_cast<const IfThenElseNode&>(n);
      on_expr(i.cond);
      on_stmt(i.then_case);
      if (i.else_case) on_stmt(i.else_case);
      return;
    }
    case StmtKind::kLetStmt: {
      const auto& l = static_cast<const LetStmtNode&>(n);
      on_expr(l.value);
      on_stmt(l.body);
      return;
    }
    case StmtKind::kStore: {
      const auto& s = static_cast<const StoreNode&>(n);
      for (const Expr& i : s.indices) on_expr(i);
      on_expr(s.value);
      return;
    }
    case StmtKind::kAllocate: {
      const auto& a = static_cast<const AllocateNode&>(n);
      if (a.buffer) {
        for (const Expr& e : a.buffer->shape) on_expr(e);
        for (const Expr& e : a.buffer->strides) on_expr(e);
      }
      on_stmt(a.body);
      return;
    }
    case StmtKind::kEvaluate:
      on_expr(static_cast<const EvaluateNode&>(n).value);
      return;
    case StmtKind::kAssign:
      on_expr(static_cast<const AssignNode&>(n).value);
      return;
    case StmtKind::kAtomic: {
      const auto& a = static_cast<const AtomicNode&>(n);
      for (const Expr& i : a.indices) on_expr(i);
      on_expr(a.value);
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& s : static_cast<const SeqNode&>(n).seq) on_stmt(s);
      return;
    case StmtKind::kBarrier:
      return;
  }
}
template <typename FE, typename FS>
void ForEachChild(const Stmt& s, FE&& on_expr, FS&& on_stmt) {
  ForEachChild(*s.get(), on_expr, on_stmt);
}

// The statements nested in `s` only (its expressions skipped).
template <typename FS>
void ForEachChildStmt(const Stmt& s, FS&& on_stmt) {
  ForEachChild(
      *s.get(), [](const Expr&) {}, on_stmt);
}

// Calls fn(const VarNode*) on each variable `e` mentions through arithmetic, selects and casts
// (not inside a load, call, ramp or broadcast), in order, repeats included: the variables of a
// shape expression, as the argument check and SplitHostDevice read them.
template <typename F>
void ForEachArithmeticVar(const Expr& e, F&& fn) {
  if (!e) return;
  switch (e.kind()) {
    case ExprKind::kVar:
      fn(static_cast<const VarNode*>(e.get()));
      return;
    case ExprKind::kBinary:
    case ExprKind::kNot:
    case ExprKind::kNeg:
    case ExprKind::kSelect:
    case ExprKind::kCast:
      ForEachChild(e, [&](const Expr& c) { ForEachArithmeticVar(c, fn); });
      return;
    default:
      return;
  }
}

// The sequence `s` (a SeqNode) with each statement replaced by fn(statement) (a Stmt), or `s`
// itself when fn returns every statement as it was: the one rewriting step the rewriting passes
// share (their other nodes each rebuild in their own way).
template <typename F>
Stmt MapSeq(const Stmt& s, F&& fn) {
  std::vector<Stmt> seq;
  bool changed = false;
  for (const Stmt& c : static_cast<const SeqNode&>(*s.get()).seq) {
    seq.push_back(fn(c));
    changed = changed || seq.back().get() != c.get();
  }
  return changed ? Seq(std::move(seq)) : s;
}

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_VISIT_HPP_
