// SPDX-License-Identifier: Apache-2.0
// A catalog kernel run for the last iterations of its outer loops only, so that sizes around
// 2^31 run in little time and memory (kernels_sizes_test.cc, kernels_sizes_cpu_test.cc).
#ifndef BACKPLANE_TESTS_KERNELS_LAST_ITERATIONS_H_
#define BACKPLANE_TESTS_KERNELS_LAST_ITERATIONS_H_

#include <backplane/ir/ir.hpp>
#include <map>
#include <string>
#include <vector>

namespace backplane {
namespace sizes_test {

namespace ir = backplane::ir;

// Rebuilds `s` with each loop named in `last` running only its last K iterations (the count and
// the body unchanged): `for v in k(min, E)` becomes `for v_last in k(0, min(E, K)) { let v =
// min + v_last + max(E - K, 0) ... }`, a loop bound to a thread axis likewise.
inline ir::Stmt Restrict(const ir::Stmt& s, const std::map<std::string, int>& last) {
  if (!s) return s;
  switch (s.kind()) {
    case ir::StmtKind::kFor: {
      const auto& f = *s.As<ir::ForNode>();
      ir::Stmt body = Restrict(f.body, last);
      auto it = last.find(f.var.name());
      if (it == last.end()) return ir::WithBody(f, body);
      const ir::DType t = f.var.dtype();
      const ir::Expr k = ir::IntImm(t, it->second);
      const ir::Expr skip = ir::Max(f.extent - k, ir::IntImm(t, 0));
      ir::Var inner(f.var.name() + "_last", t);
      ir::Stmt let = ir::LetStmt(f.var, f.min + inner + skip, body);
      if (f.for_kind == ir::ForKind::kThreadBinding) {
        return ir::ThreadFor(inner, f.thread, ir::IntImm(t, 0), ir::Min(f.extent, k), let);
      }
      return ir::For(inner, ir::IntImm(t, 0), ir::Min(f.extent, k), f.for_kind, let);
    }
    case ir::StmtKind::kIfThenElse: {
      const auto& n = *s.As<ir::IfThenElseNode>();
      return ir::IfThenElse(n.cond, Restrict(n.then_case, last), Restrict(n.else_case, last));
    }
    case ir::StmtKind::kLetStmt: {
      const auto& n = *s.As<ir::LetStmtNode>();
      return ir::WithBody(n, Restrict(n.body, last));
    }
    case ir::StmtKind::kAllocate: {
      const auto& n = *s.As<ir::AllocateNode>();
      return ir::Allocate(n.buffer, n.scope, Restrict(n.body, last));
    }
    case ir::StmtKind::kSeq: {
      std::vector<ir::Stmt> items;
      for (const ir::Stmt& x : s.As<ir::SeqNode>()->seq) items.push_back(Restrict(x, last));
      return ir::Seq(items);
    }
    default:
      return s;
  }
}

}  // namespace sizes_test
}  // namespace backplane

#endif  // BACKPLANE_TESTS_KERNELS_LAST_ITERATIONS_H_
