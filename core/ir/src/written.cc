// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <cstddef>
#include <vector>

#include "deep.hpp"
#include "visit.hpp"

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
    case StmtKind::kLetStmt:
      CollectFromExpr(s.As<LetStmtNode>()->value, out);
      break;
    case StmtKind::kStore:
      out->push_back(s.As<StoreNode>()->buffer.get());
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
    default:
      break;
  }
  detail::ForEachChildStmt(s, [out](const Stmt& c) { Collect(c, out); });
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
    const size_t first = todo.size();
    detail::ForEachChildStmt(x, [&](const Stmt& c) { todo.push_back(c); });
    std::reverse(todo.begin() + static_cast<std::ptrdiff_t>(first), todo.end());
  }
}

}  // namespace ir
}  // namespace backplane
