// SPDX-License-Identifier: Apache-2.0
// The verifier: well-formedness checks that the parser cannot make (or that builder-made IR
// may break). The list of checks is in docs/ir.md ("Verifier").
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "deep.hpp"
#include "quote.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {
namespace {

// The most messages VerifyErrors returns; past it the rest are counted in one last message, so
// a tree with a problem at each of its 100,000 nodes gives a report of bounded size.
constexpr size_t kMaxListed = 100;

class Verifier {
 public:
  Verifier(const PrimFunc& f, const VerifyOptions& o, std::vector<std::string>* errors,
           size_t* unlisted)
      : func_(f), options_(o), errors_(errors), unlisted_(unlisted) {}

  void Run() {
    scopes_.emplace_back();
    for (const Param& p : func_.params) {
      if (p.is_buffer()) {
        for (const Expr& e : p.buffer()->shape) Shape(e, p.buffer().name());
        for (const Expr& e : p.buffer()->strides) Shape(e, p.buffer().name());
        DefineBuffer(p.buffer());
      } else {
        DefineVar(p.var());
      }
    }
    if (func_.attrs.count("launch_params"))
      Report(
          "attrs holds \"launch_params\", which is the typed field PrimFunc::launch_axes; "
          "set launch_axes instead");
    if (func_.launch_axes) {
      for (ThreadTag t : *func_.launch_axes)
        if (t == ThreadTag::kNone)
          Report(
              "launch_axes lists ThreadTag::kNone, which is no thread axis; list only "
              "blockIdx.x/y/z and threadIdx.x/y/z");
    }
    if (!func_.body) {
      Report("the body is empty");
      return;
    }
    S(func_.body);
  }

 private:
  // What a scope defined; the lookups use the counts in names_, vars_ and buffers_, so a run
  // of 30,000 lets (30,000 nested scopes) costs no more a lookup than one scope.
  struct Scope {
    std::vector<const VarNode*> vars;
    std::vector<const BufferNode*> buffers;
    std::vector<std::string> names;
  };
  template <typename K>
  static void Forget(std::unordered_map<K, int>* counts, const K& k) {
    auto it = counts->find(k);
    if (it != counts->end() && --it->second == 0) counts->erase(it);
  }
  void PopScope() {
    const Scope& s = scopes_.back();
    for (const VarNode* v : s.vars) Forget(&vars_, v);
    for (const BufferNode* b : s.buffers) Forget(&buffers_, b);
    for (const std::string& n : s.names) Forget(&names_, n);
    scopes_.pop_back();
  }

  // Messages quote the statement's first line (and the expression at fault) through quoter_,
  // which prints the line once for all the problems found in it: a problem at each node of a
  // long expression must not print the expression again for each (quadratic time and text).
  bool Full() {
    if (errors_->size() < kMaxListed) return false;
    ++*unlisted_;
    return true;
  }
  void Report(const std::string& problem) {
    if (Full()) return;
    std::string msg = "in function '" + func_.name + "': " + problem;
    if (stmt_) msg += " in `" + quoter_.Line(stmt_) + "`";
    errors_->push_back(msg);
  }
  // The text of `e`, part of the current statement (or of a parameter's shape), elided.
  std::string Text(const Expr& e) {
    if (stmt_) return quoter_.Part(stmt_, e);
    if (shape_) return quoter_.Part(shape_, e);
    return detail::Quote(e);
  }

  bool NameVisible(const std::string& name) const { return names_.count(name) > 0; }
  void DefineName(const std::string& name) {
    if (NameVisible(name))
      Report("'" + name + "' is defined twice in nested scopes: rename one (the text form " +
             "resolves names, so a shadowed name cannot be printed)");
    scopes_.back().names.push_back(name);
    ++names_[name];
  }
  void DefineVar(const Var& v) {
    if (thread_depth_ > 0) region_vars_.insert(v.get());
    DefineName(v.name());
    scopes_.back().vars.push_back(v.get());
    ++vars_[v.get()];
  }
  void DefineBuffer(const Buffer& b) {
    DefineName(b.name());
    scopes_.back().buffers.push_back(b.get());
    ++buffers_[b.get()];
  }
  bool VarInScope(const VarNode* v) const { return vars_.count(v) > 0; }
  bool BufferInScope(const BufferNode* b) const { return buffers_.count(b) > 0; }

  void Shape(const Expr& e, const std::string& buffer) {
    shape_ = e;
    E(e);
    shape_ = Expr();
    if (e && !e.dtype().is_integer())
      Report("a dimension of buffer '" + buffer + "' is " + ToString(e.dtype()) +
             ": expected an integer");
  }

  void CheckBuffer(const Buffer& b, const std::vector<Expr>& indices) {
    if (!BufferInScope(b.get()))
      Report("undefined buffer '" + b.name() + "': pass it as a parameter or allocate it");
    if (indices.size() != b->shape.size())
      Report("rank mismatch: buffer '" + b.name() + "' has " + std::to_string(b->shape.size()) +
             " dimension(s) but is indexed with " + std::to_string(indices.size()));
    for (const Expr& i : indices) {
      E(i);
      if (!i.dtype().is_integer())
        Report("an index of buffer '" + b.name() + "' is " + ToString(i.dtype()) +
               ": expected an integer");
    }
  }

  void E(const Expr& e, bool packed_arg = false) {
    if (!e) {
      Report("an expression is empty");
      return;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        if (e.dtype().lanes != 1)
          Report("constant " + Text(e) + " has " + std::to_string(e.dtype().lanes) +
                 " lanes: write broadcast(value, lanes)");
        return;
      case ExprKind::kVar:
        if (!VarInScope(e.As<VarNode>()))
          Report("undefined variable '" + e.As<VarNode>()->name +
                 "': make it a parameter or bind it with for or let");
        return;
      case ExprKind::kBinary: {
        const auto* n = e.As<BinaryNode>();
        E(n->a);
        E(n->b);
        if (!n->a || !n->b) return;
        if (n->a.dtype() != n->b.dtype()) {
          // A float literal against another float type: say to write it in that type, since
          // casting it would keep the rounding of its own (float64(0.2f32) is not 0.2).
          std::string fix = "cast one side";
          for (const auto& [lit, other] :
               {std::make_pair(n->a, n->b), std::make_pair(n->b, n->a)}) {
            if (lit.kind() == ExprKind::kFloatImm && other.dtype().is_float() &&
                other.dtype().is_scalar())
              fix = "write the literal as " +
                    Print(FloatImm(other.dtype(), lit.As<FloatImmNode>()->value)) +
                    " (a cast would keep the rounding of " + ToString(lit.dtype()) + ")";
          }
          Report("type mismatch: " + ToString(n->a.dtype()) + " " + ToString(n->op) + " " +
                 ToString(n->b.dtype()) + " in " + Text(e) + ": " + fix);
        } else if (n->op == BinaryOp::kMod && !n->a.dtype().is_integer()) {
          Report("operator % takes integer operands, got " + ToString(n->a.dtype()) + " in " +
                 Text(e) +
                 (n->a.dtype().is_float()
                      ? ": for floats write floormod(a, b) (the remainder with the sign of b) or "
                        "a - trunc(a / b) * b (the sign of a, as C's fmod where a / b is exact)"
                      : ": cast the operands to an integer type"));
        } else if (IsLogical(n->op) && !n->a.dtype().is_bool()) {
          Report(std::string("operator ") + ToString(n->op) + " takes bool operands, got " +
                 ToString(n->a.dtype()) + " in " + Text(e));
        }
        return;
      }
      case ExprKind::kNot:
        E(e.As<NotNode>()->a);
        if (e.As<NotNode>()->a && !e.As<NotNode>()->a.dtype().is_bool())
          Report("operator ! takes a bool operand, got " + ToString(e.As<NotNode>()->a.dtype()) +
                 " in " + Text(e));
        return;
      case ExprKind::kNeg:
        E(e.As<NegNode>()->a);
        if (e.As<NegNode>()->a && e.As<NegNode>()->a.dtype().is_bool())
          Report("unary minus takes a number, got bool in " + Text(e) + ": use ! to negate a bool");
        return;
      case ExprKind::kSelect: {
        const auto* n = e.As<SelectNode>();
        E(n->cond);
        E(n->a);
        E(n->b);
        if (n->cond && !n->cond.dtype().is_bool())
          Report("the condition of select is " + ToString(n->cond.dtype()) + ": expected bool");
        if (n->a && n->b && n->a.dtype() != n->b.dtype())
          Report("type mismatch: select chooses between " + ToString(n->a.dtype()) + " and " +
                 ToString(n->b.dtype()) + " in " + Text(e));
        // A scalar condition picks a whole arm (the other is not evaluated); a vector one picks
        // lane by lane, so it has the arms' lanes (docs/ir.md, "select").
        if (n->cond && n->cond.dtype().is_bool() && n->a && n->cond.dtype().lanes != 1 &&
            n->cond.dtype().lanes != n->a.dtype().lanes)
          Report("the condition of select has " + std::to_string(n->cond.dtype().lanes) +
                 " lanes and its values " + std::to_string(n->a.dtype().lanes) +
                 ": a condition is a scalar bool or has its values' lanes, in " + Text(e));
        return;
      }
      case ExprKind::kCast:
      case ExprKind::kRamp:
      case ExprKind::kBroadcast:
        detail::ForEachChild(e, [&](const Expr& c) { E(c); });
        return;
      case ExprKind::kLoad: {
        const auto* n = e.As<LoadNode>();
        CheckBuffer(n->buffer, n->indices);
        return;
      }
      case ExprKind::kCall: {
        const auto* n = e.As<CallNode>();
        for (const Expr& a : n->args) {
          E(a);
          if (a && !a.dtype().is_float())
            Report("intrinsic " + n->name + " takes float arguments, got " + ToString(a.dtype()) +
                   ": cast it, e.g. float32(x)");
        }
        return;
      }
      case ExprKind::kCallPacked: {
        const auto* n = e.As<CallPackedNode>();
        if (thread_depth_ > 0)
          Report("call_packed(\"" + n->name + "\") inside a thread-bound region: a packed " +
                 "call runs on the host; move it out of the kernel");
        for (const Expr& a : n->args) E(a, true);
        return;
      }
      case ExprKind::kBufferRef: {
        const Buffer& b = e.As<BufferRefNode>()->buffer;
        if (!BufferInScope(b.get())) Report("undefined buffer '" + b.name() + "'");
        if (!packed_arg)
          Report("buffer '" + b.name() + "' used as a value: index it, or pass it to " +
                 "call_packed");
        return;
      }
    }
  }

  void S(const Stmt& s) {
    if (!s) {
      Report("a statement is empty");
      return;
    }
    const Stmt saved = stmt_;
    if (s.kind() != StmtKind::kSeq) stmt_ = s;
    switch (s.kind()) {
      case StmtKind::kSeq:
      case StmtKind::kEvaluate:
        detail::ForEachChild(
            s, [&](const Expr& e) { E(e); }, [&](const Stmt& c) { S(c); });
        break;
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        E(n->min);
        E(n->extent);
        if (n->step) E(n->step);
        DType t = n->var.dtype();
        if (!t.is_integer() || !t.is_scalar())
          Report("loop variable '" + n->var.name() + "' is " + ToString(t) +
                 ": expected a scalar integer");
        for (const Expr* bound : {&n->min, &n->extent})
          if (*bound && bound->dtype() != t)
            Report("type mismatch: loop variable '" + n->var.name() + "' is " + ToString(t) +
                   " but a bound is " + ToString(bound->dtype()));
        if (n->step && n->step.dtype() != t)
          Report("type mismatch: loop variable '" + n->var.name() + "' is " + ToString(t) +
                 " but its step is " + ToString(n->step.dtype()));
        bool bound_here = n->for_kind == ForKind::kThreadBinding;
        if (bound_here && n->step)
          Report("a loop bound to " + std::string(ToString(n->thread)) +
                 " takes no step: each thread runs one index; scale the index in the body");
        if (n->for_kind != ForKind::kParallel && n->schedule != ScheduleKind::kDefault)
          Report(std::string("a schedule on a ") + ToString(n->for_kind) +
                 " loop: only parallel loops take one");
        if (n->chunk < 0 || (n->chunk > 0 && n->schedule == ScheduleKind::kDefault))
          Report("chunk " + std::to_string(n->chunk) + " of loop '" + n->var.name() +
                 "': expected a positive chunk with a static, dynamic or guided schedule");
        const bool concurrent =
            bound_here || n->for_kind == ForKind::kParallel || n->for_kind == ForKind::kVectorized;
        if (concurrent) concurrent_.push_back(n);
        if (bound_here) {
          if (options_.device_is_cpu)
            Report(std::string("loop bound to ") + ToString(n->thread) +
                   " on a CPU target: use a parallel or serial loop");
          if (threads_.count(n->thread))
            Report(std::string(ToString(n->thread)) +
                   " is already bound by an enclosing loop: bind each axis once");
          threads_.insert(n->thread);
          ++thread_depth_;
        }
        scopes_.emplace_back();
        DefineVar(n->var);
        S(n->body);
        PopScope();
        if (bound_here) {
          --thread_depth_;
          threads_.erase(n->thread);
        }
        if (concurrent) concurrent_.pop_back();
        break;
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        E(n->cond);
        if (n->cond && (!n->cond.dtype().is_bool() || !n->cond.dtype().is_scalar()))
          Report("the condition of if is " + ToString(n->cond.dtype()) + ": expected bool");
        Scoped(n->then_case);
        if (n->else_case) Scoped(n->else_case);
        break;
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        E(n->value);
        if (n->value && n->value.dtype() != n->var.dtype())
          Report("type mismatch: let '" + n->var.name() + "' is " + ToString(n->var.dtype()) +
                 " but its value is " + ToString(n->value.dtype()));
        scopes_.emplace_back();
        DefineVar(n->var);
        if (n->assignable) {
          if (!n->var.dtype().is_scalar())
            Report("variable '" + n->var.name() + "' is " + ToString(n->var.dtype()) +
                   ": an assignable variable holds a scalar");
          assignable_[n->var.get()] = concurrent_.size();
        }
        S(n->body);
        PopScope();
        break;
      }
      case StmtKind::kAtomic: {
        const auto* n = s.As<AtomicNode>();
        CheckBuffer(n->buffer, n->indices);
        E(n->value);
        const DType t = n->buffer.dtype();
        const std::string what =
            std::string(ToString(n->op)) + " on buffer '" + n->buffer.name() + "'";
        if (!(t == Int32() || t == Int64() || t == Float32() || t == Float64()))
          Report(what + " of " + ToString(t) +
                 ": atomics take int32, int64, float32 or float64 elements; keep such a sum in "
                 "one of those types and convert after");
        for (const Expr& i : n->indices)
          if (i && !i.dtype().is_scalar())
            Report(what + ": an atomic updates one element; index it with scalars");
        if (n->value && n->value.dtype() != t)
          Report("type mismatch: " + what + " of " + ToString(t) + " with a value of " +
                 ToString(n->value.dtype()) + ": cast the value");
        auto scope = local_in_region_.find(n->buffer.get());
        if (scope != local_in_region_.end())
          Report(what +
                 ", a local allocation inside a thread-bound region: each thread has its "
                 "own, so no other thread can race on it; update it with a plain store");
        break;
      }
      case StmtKind::kAssign: {
        const auto* n = s.As<AssignNode>();
        E(n->value);
        if (!n->var) {
          Report("an assignment has no variable");
          break;
        }
        auto it = assignable_.find(n->var.get());
        if (!VarInScope(n->var.get())) {
          Report("undefined variable '" + n->var.name() +
                 "': declare it with var before assigning it");
        } else if (it == assignable_.end()) {
          Report("'" + n->var.name() + "' cannot be assigned: parameters, loop variables and " +
                 "let bindings are constant; declare it with var");
        } else if (it->second < concurrent_.size()) {
          const ForNode* loop = concurrent_[it->second];
          Report("variable '" + n->var.name() + "' is declared outside the " +
                 ToString(loop->for_kind) + " loop '" + loop->var.name() +
                 "' and assigned inside it: its iterations run at once and would race; declare "
                 "it inside the loop, or keep one value per iteration in a buffer (or use an "
                 "atomic)");
        }
        if (n->value && n->value.dtype() != n->var.dtype())
          Report("type mismatch: variable '" + n->var.name() + "' is " + ToString(n->var.dtype()) +
                 " but the value is " + ToString(n->value.dtype()));
        break;
      }
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        CheckBuffer(n->buffer, n->indices);
        E(n->value);
        uint16_t lanes = 1;
        for (const Expr& i : n->indices)
          if (i && i.dtype().lanes > lanes) lanes = i.dtype().lanes;
        DType want = n->buffer.dtype().WithLanes(lanes);
        if (n->value && n->value.dtype() != want)
          Report("type mismatch: storing " + ToString(n->value.dtype()) + " into buffer '" +
                 n->buffer.name() + "' of " + ToString(want) + ": cast the value");
        break;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.As<AllocateNode>();
        for (const Expr& e : n->buffer->shape) Shape(e, n->buffer.name());
        if (n->scope == StorageScope::kShared && thread_depth_ == 0)
          Report("shared allocation of '" + n->buffer.name() +
                 "' outside a thread-bound region: allocate it inside the kernel");
        if (n->scope == StorageScope::kShared && thread_depth_ > 0) {
          // One array per block, sized before its threads run: from values the host has.
          for (const Expr& e : n->buffer->shape) {
            std::string bad;
            AnyExpr(e, [&](const Expr& x) {
              if (x.kind() == ExprKind::kVar && region_vars_.count(x.As<VarNode>())) {
                bad = "variable '" + x.As<VarNode>()->name + "', defined inside its region";
              } else if (x.kind() == ExprKind::kLoad) {
                bad = "a load of '" + x.As<LoadNode>()->buffer.name() + "'";
              }
              return !bad.empty();
            });
            if (!bad.empty())
              Report("shared allocation of '" + n->buffer.name() + "' is sized by " + bad +
                     ": a block's shared memory is sized before its threads run; size it from "
                     "scalar params or values computed outside the thread-bound loops");
          }
        }
        if (n->scope == StorageScope::kLocal && thread_depth_ > 0)
          local_in_region_.insert(n->buffer.get());
        scopes_.emplace_back();
        DefineBuffer(n->buffer);
        S(n->body);
        PopScope();
        break;
      }
      case StmtKind::kBarrier:
        if (thread_depth_ == 0)
          Report("barrier outside a thread-bound region: a barrier synchronizes the threads " +
                 std::string("of a block; put it inside a loop bound to threadIdx"));
        break;
    }
    stmt_ = saved;
  }

  void Scoped(const Stmt& s) {
    scopes_.emplace_back();
    S(s);
    PopScope();
  }

  const PrimFunc& func_;
  const VerifyOptions& options_;
  std::vector<std::string>* errors_;
  size_t* unlisted_;
  detail::Quoter quoter_;
  Expr shape_;  // the parameter's shape being checked, outside any statement
  std::vector<Scope> scopes_;
  std::unordered_map<std::string, int> names_;
  std::unordered_map<const VarNode*, int> vars_;
  std::unordered_map<const BufferNode*, int> buffers_;
  Stmt stmt_;
  int thread_depth_ = 0;
  std::set<ThreadTag> threads_;
  // The parallel, vectorized and thread-bound loops around the statement, outermost first, and
  // for each assignable variable how many of them were open where it was declared.
  std::vector<const ForNode*> concurrent_;
  std::unordered_map<const VarNode*, size_t> assignable_;
  std::unordered_set<const BufferNode*> local_in_region_;  // per-thread allocations
  std::unordered_set<const VarNode*> region_vars_;         // defined inside a thread-bound region
};

}  // namespace

std::vector<std::string> VerifyErrors(const IRModule& module, const VerifyOptions& options) {
  std::vector<std::string> errors;
  size_t unlisted = 0;
  detail::Deep(TreeDepth(module), [&] {
    for (const PrimFunc& f : module.functions()) Verifier(f, options, &errors, &unlisted).Run();
  });
  if (unlisted > 0)
    errors.push_back("... and " + std::to_string(unlisted) + " more problem" +
                     (unlisted == 1 ? "" : "s") + " (only the first " + std::to_string(kMaxListed) +
                     " are listed)");
  return errors;
}

void Verify(const IRModule& module, const VerifyOptions& options) {
  std::vector<std::string> errors = VerifyErrors(module, options);
  if (errors.empty()) return;
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "\n") + e;
  throw Error(ErrorKind::kVerify, msg);
}

}  // namespace ir
}  // namespace backplane
