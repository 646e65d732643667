// SPDX-License-Identifier: Apache-2.0
#include <backplane/ir/analysis.hpp>

#include "deep.hpp"

namespace backplane {
namespace ir {

namespace {

void CollectFromExpr(const Expr& e, std::vector<const BufferNode*>* out) {
  if (!e) return;
  if (const auto* c = e.As<CallPackedNode>()) {
    for (const Expr& a : c->args) {
      if (const auto* r = a.As<BufferRefNode>()) out->push_back(r->buffer.get());
    }
  }
}

void Collect(const Stmt& s, std::vector<const BufferNode*>* out) {
  if (!s) return;
  switch (s.kind()) {
    case StmtKind::kFor:
      Collect(s.As<ForNode>()->body, out);
      break;
    case StmtKind::kIfThenElse:
      Collect(s.As<IfThenElseNode>()->then_case, out);
      Collect(s.As<IfThenElseNode>()->else_case, out);
      break;
    case StmtKind::kLetStmt:
      CollectFromExpr(s.As<LetStmtNode>()->value, out);
      Collect(s.As<LetStmtNode>()->body, out);
      break;
    case StmtKind::kStore:
      out->push_back(s.As<StoreNode>()->buffer.get());
      break;
    case StmtKind::kAllocate:
      Collect(s.As<AllocateNode>()->body, out);
      break;
    case StmtKind::kEvaluate:
      CollectFromExpr(s.As<EvaluateNode>()->value, out);
      break;
    case StmtKind::kAtomic:
      out->push_back(s.As<AtomicNode>()->buffer.get());
      break;
    case StmtKind::kAssign:
      CollectFromExpr(s.As<AssignNode>()->value, out);
      break;
    case StmtKind::kBarrier:
      break;
    case StmtKind::kSeq:
      for (const Stmt& x : s.As<SeqNode>()->seq) Collect(x, out);
      break;
  }
}

}  // namespace

std::vector<const BufferNode*> WrittenBuffers(const Stmt& s) {
  std::vector<const BufferNode*> out;
  detail::Deep(TreeDepth(s), [&] { Collect(s, &out); });
  return out;
}

void ForEachStmt(const Stmt& s, const std::function<void(const Stmt&)>& visit) {
  std::vector<Stmt> todo = {s};  // a stack: children pushed last-first
  while (!todo.empty()) {
    const Stmt x = std::move(todo.back());
    todo.pop_back();
    if (!x) continue;
    visit(x);
    switch (x.kind()) {
      case StmtKind::kFor:
        todo.push_back(x.As<ForNode>()->body);
        break;
      case StmtKind::kIfThenElse:
        todo.push_back(x.As<IfThenElseNode>()->else_case);
        todo.push_back(x.As<IfThenElseNode>()->then_case);
        break;
      case StmtKind::kLetStmt:
        todo.push_back(x.As<LetStmtNode>()->body);
        break;
      case StmtKind::kAllocate:
        todo.push_back(x.As<AllocateNode>()->body);
        break;
      case StmtKind::kSeq: {
        const std::vector<Stmt>& seq = x.As<SeqNode>()->seq;
        todo.insert(todo.end(), seq.rbegin(), seq.rend());
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace ir
}  // namespace backplane
