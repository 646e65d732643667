// SPDX-License-Identifier: Apache-2.0
// SplitHostDevice (docs/ir.md, "SplitHostDevice"): each thread-bound region of a function
// becomes a kernel, and the host launches it through call_packed.
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "deep.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {
namespace {

// What a region uses: variables and buffers defined outside it, and its thread axes.
class RegionUses {
 public:
  RegionUses(const PrimFunc& f, const Stmt& region) : func_(f) {
    Defs(region);
    Walk(region);
  }

  std::vector<const VarNode*> vars;  // free, in order of first use
  std::vector<Buffer> buffers;       // defined outside, in order of first use
  Expr extent[6];                    // by ThreadTag - 1; empty if the axis is not bound
  std::vector<Stmt> buffer_use;      // per entry of `buffers`: the statement of its first use

 private:
  [[noreturn]] void Fail(const std::string& problem, const Stmt& at) const {
    throw Error(ErrorKind::kVerify, "in function '" + func_.name + "': " + problem + " in `" +
                                        detail::StmtHead(at) + "`");
  }

  void Defs(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq:
        for (const Stmt& c : s.As<SeqNode>()->seq) Defs(c);
        return;
      case StmtKind::kFor:
        defined_.insert(s.As<ForNode>()->var.get());
        Defs(s.As<ForNode>()->body);
        return;
      case StmtKind::kIfThenElse:
        Defs(s.As<IfThenElseNode>()->then_case);
        if (s.As<IfThenElseNode>()->else_case) Defs(s.As<IfThenElseNode>()->else_case);
        return;
      case StmtKind::kLetStmt:
        defined_.insert(s.As<LetStmtNode>()->var.get());
        Defs(s.As<LetStmtNode>()->body);
        return;
      case StmtKind::kAllocate:
        allocated_.insert(s.As<AllocateNode>()->buffer.get());
        Defs(s.As<AllocateNode>()->body);
        return;
      default:
        return;
    }
  }

  void UseVar(const VarNode* v) {
    if (defined_.count(v) || seen_vars_.count(v)) return;
    seen_vars_.insert(v);
    vars.push_back(v);
  }
  void UseBuffer(const Buffer& b, const Stmt& at) {
    if (allocated_.count(b.get()) || seen_buffers_.count(b.get())) return;
    seen_buffers_.insert(b.get());
    buffers.push_back(b);
    buffer_use.push_back(at);
  }

  void E(const Expr& e, const Stmt& at) {
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return;
      case ExprKind::kVar:
        UseVar(e.As<VarNode>());
        return;
      case ExprKind::kBinary:
        E(e.As<BinaryNode>()->a, at);
        E(e.As<BinaryNode>()->b, at);
        return;
      case ExprKind::kNot:
        E(e.As<NotNode>()->a, at);
        return;
      case ExprKind::kNeg:
        E(e.As<NegNode>()->a, at);
        return;
      case ExprKind::kSelect:
        E(e.As<SelectNode>()->cond, at);
        E(e.As<SelectNode>()->a, at);
        E(e.As<SelectNode>()->b, at);
        return;
      case ExprKind::kCast:
        E(e.As<CastNode>()->value, at);
        return;
      case ExprKind::kLoad:
        UseBuffer(e.As<LoadNode>()->buffer, at);
        for (const Expr& i : e.As<LoadNode>()->indices) E(i, at);
        return;
      case ExprKind::kCall:
        for (const Expr& a : e.As<CallNode>()->args) E(a, at);
        return;
      case ExprKind::kCallPacked:
        for (const Expr& a : e.As<CallPackedNode>()->args) E(a, at);
        return;
      case ExprKind::kRamp:
        E(e.As<RampNode>()->base, at);
        E(e.As<RampNode>()->stride, at);
        return;
      case ExprKind::kBroadcast:
        E(e.As<BroadcastNode>()->value, at);
        return;
      case ExprKind::kBufferRef:
        UseBuffer(e.As<BufferRefNode>()->buffer, at);
        return;
    }
  }

  void Walk(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq:
        for (const Stmt& c : s.As<SeqNode>()->seq) Walk(c);
        return;
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        E(n->min, s);
        E(n->extent, s);
        if (n->step) E(n->step, s);
        if (n->for_kind == ForKind::kThreadBinding) Bind(*n, s);
        Walk(n->body);
        return;
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        E(n->cond, s);
        Walk(n->then_case);
        if (n->else_case) Walk(n->else_case);
        return;
      }
      case StmtKind::kLetStmt:
        E(s.As<LetStmtNode>()->value, s);
        Walk(s.As<LetStmtNode>()->body);
        return;
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        UseBuffer(n->buffer, s);
        for (const Expr& i : n->indices) E(i, s);
        E(n->value, s);
        return;
      }
      case StmtKind::kAllocate: {
        const Buffer& b = s.As<AllocateNode>()->buffer;
        for (const Expr& e : b->shape) E(e, s);
        for (const Expr& e : b->strides) E(e, s);
        Walk(s.As<AllocateNode>()->body);
        return;
      }
      case StmtKind::kEvaluate:
        E(s.As<EvaluateNode>()->value, s);
        return;
      case StmtKind::kAssign:
        UseVar(s.As<AssignNode>()->var.get());
        E(s.As<AssignNode>()->value, s);
        return;
      case StmtKind::kAtomic: {
        const auto* n = s.As<AtomicNode>();
        UseBuffer(n->buffer, s);
        for (const Expr& i : n->indices) E(i, s);
        E(n->value, s);
        return;
      }
      case StmtKind::kBarrier:
        return;
    }
  }

  void Bind(const ForNode& n, const Stmt& at) {
    const char* tag = ToString(n.thread);
    std::vector<const VarNode*> in_extent;
    CollectVars(n.extent, &in_extent);
    for (const VarNode* v : in_extent)
      if (defined_.count(v))
        Fail(std::string("the extent of the loop over ") + tag + " uses '" + v->name +
                 "', defined inside the kernel: the host computes launch extents, so they may " +
                 "only use variables defined outside the thread-bound loops",
             at);
    Expr& slot = extent[static_cast<int>(n.thread) - 1];
    if (!slot) {
      slot = n.extent;
    } else if (!StructuralEqual(slot, n.extent)) {
      Fail(std::string(tag) + " is bound twice in one kernel with different extents (" +
               detail::Quote(slot) + " and " + detail::Quote(n.extent) +
               "): bind each axis with one extent",
           at);
    }
  }

  static void CollectVars(const Expr& e, std::vector<const VarNode*>* out) {
    switch (e.kind()) {
      case ExprKind::kVar:
        out->push_back(e.As<VarNode>());
        return;
      case ExprKind::kBinary:
        CollectVars(e.As<BinaryNode>()->a, out);
        CollectVars(e.As<BinaryNode>()->b, out);
        return;
      case ExprKind::kNot:
        CollectVars(e.As<NotNode>()->a, out);
        return;
      case ExprKind::kNeg:
        CollectVars(e.As<NegNode>()->a, out);
        return;
      case ExprKind::kSelect:
        CollectVars(e.As<SelectNode>()->cond, out);
        CollectVars(e.As<SelectNode>()->a, out);
        CollectVars(e.As<SelectNode>()->b, out);
        return;
      case ExprKind::kCast:
        CollectVars(e.As<CastNode>()->value, out);
        return;
      case ExprKind::kLoad:
        for (const Expr& i : e.As<LoadNode>()->indices) CollectVars(i, out);
        return;
      case ExprKind::kCall:
        for (const Expr& a : e.As<CallNode>()->args) CollectVars(a, out);
        return;
      case ExprKind::kRamp:
        CollectVars(e.As<RampNode>()->base, out);
        CollectVars(e.As<RampNode>()->stride, out);
        return;
      case ExprKind::kBroadcast:
        CollectVars(e.As<BroadcastNode>()->value, out);
        return;
      default:
        return;
    }
  }

  const PrimFunc& func_;
  std::unordered_set<const VarNode*> defined_, seen_vars_;
  std::unordered_set<const BufferNode*> allocated_, seen_buffers_;
};

class Splitter {
 public:
  Splitter(const PrimFunc& f, bool device_is_cpu, const std::set<std::string>& taken)
      : func_(f), device_is_cpu_(device_is_cpu), taken_(taken) {
    for (const Param& p : f.params)
      if (p.is_buffer()) param_buffers_.insert(p.buffer().get());
  }

  PrimFunc Run() {
    regions_ = CountRegions(func_.body);
    Stmt body = Mutate(func_.body);
    return PrimFunc(func_.name, func_.params, body, func_.attrs);
  }

  std::vector<PrimFunc> kernels;

 private:
  [[noreturn]] void Fail(const std::string& problem, const Stmt& at) const {
    throw Error(ErrorKind::kVerify, "in function '" + func_.name + "': " + problem + " in `" +
                                        detail::StmtHead(at) + "`");
  }

  static int CountRegions(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq: {
        int n = 0;
        for (const Stmt& c : s.As<SeqNode>()->seq) n += CountRegions(c);
        return n;
      }
      case StmtKind::kFor:
        return s.As<ForNode>()->for_kind == ForKind::kThreadBinding
                   ? 1
                   : CountRegions(s.As<ForNode>()->body);
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        return CountRegions(n->then_case) + (n->else_case ? CountRegions(n->else_case) : 0);
      }
      case StmtKind::kLetStmt:
        return CountRegions(s.As<LetStmtNode>()->body);
      case StmtKind::kAllocate:
        return CountRegions(s.As<AllocateNode>()->body);
      default:
        return 0;
    }
  }

  // Host code: no load or store of a param buffer when the device has its own memory.
  void HostExpr(const Expr& e, const Stmt& at) {
    if (device_is_cpu_) return;
    switch (e.kind()) {
      case ExprKind::kBinary:
        HostExpr(e.As<BinaryNode>()->a, at);
        HostExpr(e.As<BinaryNode>()->b, at);
        return;
      case ExprKind::kNot:
        HostExpr(e.As<NotNode>()->a, at);
        return;
      case ExprKind::kNeg:
        HostExpr(e.As<NegNode>()->a, at);
        return;
      case ExprKind::kSelect:
        HostExpr(e.As<SelectNode>()->cond, at);
        HostExpr(e.As<SelectNode>()->a, at);
        HostExpr(e.As<SelectNode>()->b, at);
        return;
      case ExprKind::kCast:
        HostExpr(e.As<CastNode>()->value, at);
        return;
      case ExprKind::kLoad:
        HostAccess(e.As<LoadNode>()->buffer, at);
        for (const Expr& i : e.As<LoadNode>()->indices) HostExpr(i, at);
        return;
      case ExprKind::kCall:
        for (const Expr& a : e.As<CallNode>()->args) HostExpr(a, at);
        return;
      case ExprKind::kCallPacked:
        for (const Expr& a : e.As<CallPackedNode>()->args) HostExpr(a, at);
        return;
      case ExprKind::kRamp:
        HostExpr(e.As<RampNode>()->base, at);
        HostExpr(e.As<RampNode>()->stride, at);
        return;
      case ExprKind::kBroadcast:
        HostExpr(e.As<BroadcastNode>()->value, at);
        return;
      default:
        return;
    }
  }
  void HostAccess(const Buffer& b, const Stmt& at) {
    if (param_buffers_.count(b.get()))
      Fail("host code accesses buffer '" + b.name() + "', which lives in device memory: host " +
               "code cannot touch device memory; bind the loops that access it to " +
               "blockIdx/threadIdx",
           at);
  }

  Stmt Mutate(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq: {
        std::vector<Stmt> seq;
        bool changed = false;
        for (const Stmt& c : s.As<SeqNode>()->seq) {
          seq.push_back(Mutate(c));
          changed = changed || seq.back().get() != c.get();
        }
        return changed ? Seq(seq) : s;
      }
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        if (n->for_kind == ForKind::kThreadBinding) return Outline(s);
        HostExpr(n->min, s);
        HostExpr(n->extent, s);
        if (n->step) HostExpr(n->step, s);
        host_vars_.push_back(n->var);
        Stmt body = Mutate(n->body);
        host_vars_.pop_back();
        return body.get() == n->body.get() ? s : WithBody(*n, body);
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        HostExpr(n->cond, s);
        Stmt then_case = Mutate(n->then_case);
        Stmt else_case = n->else_case ? Mutate(n->else_case) : Stmt();
        if (then_case.get() == n->then_case.get() && else_case.get() == n->else_case.get())
          return s;
        return IfThenElse(n->cond, then_case, else_case);
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        HostExpr(n->value, s);
        host_vars_.push_back(n->var);
        Stmt body = Mutate(n->body);
        host_vars_.pop_back();
        return body.get() == n->body.get() ? s : WithBody(*n, body);
      }
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        if (!device_is_cpu_) HostAccess(n->buffer, s);
        for (const Expr& i : n->indices) HostExpr(i, s);
        HostExpr(n->value, s);
        return s;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.As<AllocateNode>();
        for (const Expr& e : n->buffer->shape) HostExpr(e, s);
        Stmt body = Mutate(n->body);
        return body.get() == n->body.get() ? s : Allocate(n->buffer, n->scope, body);
      }
      case StmtKind::kEvaluate:
        HostExpr(s.As<EvaluateNode>()->value, s);
        return s;
      case StmtKind::kAssign:
        HostExpr(s.As<AssignNode>()->value, s);
        return s;
      case StmtKind::kAtomic: {
        const auto* n = s.As<AtomicNode>();
        if (!device_is_cpu_) HostAccess(n->buffer, s);
        for (const Expr& i : n->indices) HostExpr(i, s);
        HostExpr(n->value, s);
        return s;
      }
      case StmtKind::kBarrier:
        return s;  // the verifier allows none outside a region
    }
    return s;
  }

  // A region: the kernel, and the host statement that launches it.
  Stmt Outline(const Stmt& region) {
    const std::string name =
        func_.name + "_kernel" + (regions_ > 1 ? std::to_string(next_++) : std::string());
    if (taken_.count(name))
      Fail("the kernel name '" + name +
               "' is taken by another function of the module: " + "rename that function",
           region);
    RegionUses uses(func_, region);

    std::vector<const BufferNode*> buffers;
    for (size_t k = 0; k < uses.buffers.size(); ++k) {
      const Buffer& b = uses.buffers[k];
      if (!param_buffers_.count(b.get()))
        Fail("buffer '" + b.name() + "' is allocated outside the kernel and used inside it: " +
                 "allocate it inside the thread-bound loops",
             uses.buffer_use[k]);
      buffers.push_back(b.get());
    }
    auto uses_buffer = [&](const BufferNode* b) {
      for (const BufferNode* x : buffers)
        if (x == b) return true;
      return false;
    };
    auto uses_var = [&](const VarNode* v) {
      for (const VarNode* x : uses.vars)
        if (x == v) return true;
      return false;
    };
    // Scalar params: used, or in the shape or strides of a used buffer.
    std::unordered_set<const VarNode*> in_shapes;
    for (const Param& p : func_.params) {
      if (!p.is_buffer() || !uses_buffer(p.buffer().get())) continue;
      std::vector<const VarNode*> vs;
      for (const Expr& e : p.buffer()->shape) Vars(e, &vs);
      for (const Expr& e : p.buffer()->strides) Vars(e, &vs);
      in_shapes.insert(vs.begin(), vs.end());
    }
    std::vector<Param> params;
    std::vector<Expr> args;
    std::unordered_set<const VarNode*> taken_vars;
    for (const Param& p : func_.params) {
      if (p.is_buffer()) continue;
      const VarNode* v = p.var().get();
      if (uses_var(v) || in_shapes.count(v)) {
        params.emplace_back(p.var());
        args.push_back(p.var());
        taken_vars.insert(v);
      }
    }
    // Host vars, outermost first.
    for (const Var& v : host_vars_) {
      if (!uses_var(v.get()) || taken_vars.count(v.get())) continue;
      params.emplace_back(v);
      args.push_back(v);
      taken_vars.insert(v.get());
    }
    for (const Param& p : func_.params) {
      if (!p.is_buffer() || !uses_buffer(p.buffer().get())) continue;
      params.emplace_back(p.buffer());
      args.push_back(Ref(p.buffer()));
    }
    std::string launch;
    for (int a = 0; a < 6; ++a) {
      if (!uses.extent[a]) continue;
      // The host computes the extent before the launch: it may not read device memory.
      if (const BufferNode* b = ParamBufferLoaded(uses.extent[a]); b != nullptr && !device_is_cpu_)
        Fail(std::string("the extent of the loop over ") + ToString(static_cast<ThreadTag>(a + 1)) +
                 " reads buffer '" + b->name +
                 "', which lives in device memory: the host computes launch extents and "
                 "cannot read device memory; pass the extent as a scalar param",
             region);
      launch += (launch.empty() ? "" : ",") + std::string(ToString(static_cast<ThreadTag>(a + 1)));
      args.push_back(Cast(Int64(), uses.extent[a]));
    }
    kernels.emplace_back(
        name, params, region,
        std::map<std::string, std::string>{{"kernel", "1"}, {"launch_params", launch}});
    return Evaluate(CallPacked(name, args));
  }

  // A param buffer that `e` loads from, or nullptr.
  const BufferNode* ParamBufferLoaded(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::kLoad: {
        const auto* n = e.As<LoadNode>();
        if (param_buffers_.count(n->buffer.get())) return n->buffer.get();
        for (const Expr& i : n->indices)
          if (const BufferNode* b = ParamBufferLoaded(i)) return b;
        return nullptr;
      }
      case ExprKind::kBinary: {
        const BufferNode* b = ParamBufferLoaded(e.As<BinaryNode>()->a);
        return b != nullptr ? b : ParamBufferLoaded(e.As<BinaryNode>()->b);
      }
      case ExprKind::kNot:
        return ParamBufferLoaded(e.As<NotNode>()->a);
      case ExprKind::kNeg:
        return ParamBufferLoaded(e.As<NegNode>()->a);
      case ExprKind::kSelect:
        for (const Expr* x :
             {&e.As<SelectNode>()->cond, &e.As<SelectNode>()->a, &e.As<SelectNode>()->b})
          if (const BufferNode* b = ParamBufferLoaded(*x)) return b;
        return nullptr;
      case ExprKind::kCast:
        return ParamBufferLoaded(e.As<CastNode>()->value);
      case ExprKind::kCall:
        for (const Expr& a : e.As<CallNode>()->args)
          if (const BufferNode* b = ParamBufferLoaded(a)) return b;
        return nullptr;
      default:
        return nullptr;
    }
  }

  static void Vars(const Expr& e, std::vector<const VarNode*>* out) {
    switch (e.kind()) {
      case ExprKind::kVar:
        out->push_back(e.As<VarNode>());
        return;
      case ExprKind::kBinary:
        Vars(e.As<BinaryNode>()->a, out);
        Vars(e.As<BinaryNode>()->b, out);
        return;
      case ExprKind::kNot:
        Vars(e.As<NotNode>()->a, out);
        return;
      case ExprKind::kNeg:
        Vars(e.As<NegNode>()->a, out);
        return;
      case ExprKind::kSelect:
        Vars(e.As<SelectNode>()->cond, out);
        Vars(e.As<SelectNode>()->a, out);
        Vars(e.As<SelectNode>()->b, out);
        return;
      case ExprKind::kCast:
        Vars(e.As<CastNode>()->value, out);
        return;
      default:
        return;
    }
  }

  const PrimFunc& func_;
  const bool device_is_cpu_;
  const std::set<std::string>& taken_;
  std::unordered_set<const BufferNode*> param_buffers_;
  std::vector<Var> host_vars_;  // in scope, outermost first
  int regions_ = 0;
  int next_ = 0;
};

}  // namespace

SplitResult SplitHostDevice(const IRModule& module, bool device_is_cpu) {
  Verify(module);
  std::set<std::string> taken;
  for (const PrimFunc& f : module.functions()) taken.insert(f.name);
  SplitResult result;
  detail::Deep(TreeDepth(module), [&] {
    for (const PrimFunc& f : module.functions()) {
      Splitter s(f, device_is_cpu, taken);
      result.host.Add(s.Run());
      for (PrimFunc& k : s.kernels) {
        taken.insert(k.name);
        result.device.Add(std::move(k));
      }
    }
  });
  return result;
}

}  // namespace ir
}  // namespace backplane
