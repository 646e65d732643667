// SPDX-License-Identifier: Apache-2.0
// LowerLoopSteps (transform.hpp): loops with a step as loops by 1 over a counter.
#include <backplane/ir/limits.hpp>
#include <backplane/ir/transform.hpp>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "deep.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {
namespace {

class StepLowering {
 public:
  explicit StepLowering(const PrimFunc& f) {
    for (const Param& p : f.params)
      names_.insert(p.is_buffer() ? p.buffer().name() : p.var().name());
    Names(f.body);
  }

  Stmt Lower(const Stmt& s) {
    if (!s) return s;
    switch (s.kind()) {
      case StmtKind::kSeq:
        return detail::MapSeq(s, [&](const Stmt& c) { return Lower(c); });
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        Stmt body = Lower(n->body);
        if (!n->step) return body.get() == n->body.get() ? s : WithBody(*n, body);
        return LowerStep(*n, body);
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        Stmt then_case = Lower(n->then_case);
        Stmt else_case = Lower(n->else_case);
        if (then_case.get() == n->then_case.get() && else_case.get() == n->else_case.get())
          return s;
        return IfThenElse(n->cond, then_case, else_case);
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        Stmt body = Lower(n->body);
        return body.get() == n->body.get() ? s : WithBody(*n, body);
      }
      case StmtKind::kAllocate: {
        const auto* n = s.As<AllocateNode>();
        Stmt body = Lower(n->body);
        return body.get() == n->body.get() ? s : Allocate(n->buffer, n->scope, body);
      }
      default:
        return s;
    }
  }

 private:
  Stmt LowerStep(const ForNode& n, const Stmt& body) {
    const DType t = n.var.dtype();
    const std::string base = n.var.name();
    std::vector<std::pair<Var, Expr>> lets;  // outermost first
    auto hoist = [&](const Expr& e, const char* suffix) -> Expr {
      if (e.kind() == ExprKind::kIntImm) return e;
      Var v(Fresh(base + suffix), t);
      lets.emplace_back(v, e);
      return std::move(v);
    };
    const Expr start = hoist(n.min, "_start");
    const Expr count = hoist(n.extent, "_count");
    const Expr step = hoist(n.step, "_step");
    Var k(Fresh(base + "_k"), t);
    const auto* zero = start.As<IntImmNode>();
    Expr offset = Binary(BinaryOp::kMul, k, step);
    Expr value =
        zero != nullptr && zero->value == 0 ? offset : Binary(BinaryOp::kAdd, start, offset);
    auto loop = std::make_shared<ForNode>(n);
    loop->var = k;
    loop->min = IntImm(t, 0);
    loop->extent = count;
    loop->step = Expr();
    loop->body = LetStmt(n.var, value, body);
    Stmt out(std::move(loop));
    for (size_t i = lets.size(); i-- > 0;) out = LetStmt(lets[i].first, lets[i].second, out);
    return out;
  }

  std::string Fresh(const std::string& want) {
    std::string name = want;
    for (int k = 1; names_.count(name) != 0; ++k) name = want + std::to_string(k);
    names_.insert(name);
    return name;
  }

  void Names(const Stmt& root) {
    std::vector<const StmtNode*> todo{root.get()};
    while (!todo.empty()) {
      const StmtNode* s = todo.back();
      todo.pop_back();
      if (s == nullptr) continue;
      switch (s->kind) {
        case StmtKind::kFor:
          names_.insert(static_cast<const ForNode*>(s)->var.name());
          break;
        case StmtKind::kLetStmt:
          names_.insert(static_cast<const LetStmtNode*>(s)->var.name());
          break;
        case StmtKind::kAllocate:
          names_.insert(static_cast<const AllocateNode*>(s)->buffer.name());
          break;
        default:
          break;
      }
      detail::ForEachChild(
          *s, [](const Expr&) {}, [&](const Stmt& c) { todo.push_back(c.get()); });
    }
  }

  std::unordered_set<std::string> names_;
};

}  // namespace

IRModule LowerLoopSteps(const IRModule& module) {
  IRModule out;
  detail::Deep(TreeDepth(module) + 4, [&] {
    for (const PrimFunc& f : module.functions()) {
      PrimFunc g = f;
      g.body = StepLowering(f).Lower(f.body);
      out.Add(std::move(g));
    }
  });
  return out;
}

namespace {

bool IsIndexArithmetic(const Expr& e) {
  if (e.kind() == ExprKind::kNeg) return true;
  if (e.kind() != ExprKind::kBinary) return false;
  const BinaryOp op = e.As<BinaryNode>()->op;
  return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul;
}

Expr Widen(const Expr& e) {
  if (e.kind() == ExprKind::kIntImm) return IntImm(Int64(), e.As<IntImmNode>()->value);
  if (!IsIndexArithmetic(e)) return Cast(Int64(), e);
  if (e.kind() == ExprKind::kNeg) return Neg(Widen(e.As<NegNode>()->a));
  const auto& b = *e.As<BinaryNode>();
  return Binary(b.op, Widen(b.a), Widen(b.b));
}

}  // namespace

const RampNode* ContiguousRamp(const Expr& last_index) {
  const RampNode* r = last_index.As<RampNode>();
  const IntImmNode* stride = r != nullptr ? r->stride.As<IntImmNode>() : nullptr;
  return stride != nullptr && stride->value == 1 ? r : nullptr;
}

Expr WidenIndex(const Expr& index) {
  const DType t = index.dtype();
  if (!index || t.lanes != 1 || !t.is_integer() || t.bits >= 64 || !IsIndexArithmetic(index)) {
    return index;
  }
  return Widen(index);
}

}  // namespace ir
}  // namespace backplane
