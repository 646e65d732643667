// SPDX-License-Identifier: Apache-2.0
// SplitHostDevice (docs/ir.md, "SplitHostDevice"): each thread-bound region of a function
// becomes a kernel, and the host launches it through call_packed.
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "deep.hpp"
#include "own_exprs.hpp"
#include "quote.hpp"
#include "visit.hpp"

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
  bool Defined(const VarNode* v) const { return defined_.count(v) != 0; }

 private:
  [[noreturn]] void Fail(const std::string& problem, const Stmt& at) const {
    throw Error(ErrorKind::kVerify, "in function '" + func_.name + "': " + problem + " in `" +
                                        detail::StmtHead(at) + "`");
  }

  void Defs(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kFor:
        defined_.insert(s.As<ForNode>()->var.get());
        break;
      case StmtKind::kLetStmt:
        defined_.insert(s.As<LetStmtNode>()->var.get());
        break;
      case StmtKind::kAllocate:
        allocated_.insert(s.As<AllocateNode>()->buffer.get());
        break;
      default:
        break;
    }
    detail::ForEachChildStmt(s, [&](const Stmt& c) { Defs(c); });
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
      case ExprKind::kVar:
        UseVar(e.As<VarNode>());
        return;
      case ExprKind::kLoad:
        UseBuffer(e.As<LoadNode>()->buffer, at);
        break;
      case ExprKind::kBufferRef:
        UseBuffer(e.As<BufferRefNode>()->buffer, at);
        return;
      default:
        break;
    }
    detail::ForEachChild(e, [&](const Expr& c) { E(c, at); });
  }

  // Bind reads only what Defs found, so checking a thread-bound loop before its expressions are
  // walked finds what checking it after would.
  void Walk(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        if (n->for_kind == ForKind::kThreadBinding) Bind(*n, s);
        break;
      }
      case StmtKind::kStore:
        UseBuffer(s.As<StoreNode>()->buffer, s);
        break;
      case StmtKind::kAtomic:
        UseBuffer(s.As<AtomicNode>()->buffer, s);
        break;
      case StmtKind::kAssign:
        UseVar(s.As<AssignNode>()->var.get());
        break;
      default:
        break;
    }
    detail::ForEachChild(
        s, [&](const Expr& e) { E(e, s); }, [&](const Stmt& c) { Walk(c); });
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

  // The variables `e` mentions (a call_packed's arguments not included).
  static void CollectVars(const Expr& e, std::vector<const VarNode*>* out) {
    switch (e.kind()) {
      case ExprKind::kVar:
        out->push_back(e.As<VarNode>());
        return;
      case ExprKind::kCallPacked:
        return;
      default:
        detail::ForEachChild(e, [out](const Expr& c) { CollectVars(c, out); });
        return;
    }
  }

  const PrimFunc& func_;
  std::unordered_set<const VarNode*> defined_, seen_vars_;
  std::unordered_set<const BufferNode*> allocated_, seen_buffers_;
};

// Runtime-sized `local` arrays of a region (docs/ir.md, "Local arrays sized at run time"): each
// becomes a slice a thread of one workspace that host code allocates before the launch, of
// (threads of the grid) x (the array's elements), the thread's slice zero-filled where the
// array was allocated (as a local array is) and every access indexed into it.
class LocalLowering {
 public:
  LocalLowering(const PrimFunc& f, const RegionUses& uses) : func_(f), uses_(uses) {}

  // The region with its runtime-sized local arrays lowered; their workspaces in `workspaces`,
  // outermost first.
  Stmt Run(const Stmt& region, std::vector<Buffer>* workspaces) {
    workspaces_ = workspaces;
    return S(region);
  }

 private:
  struct Slice {
    Buffer ws;
    std::vector<Expr> dims;  // the local array's extents, as int64
    Expr elems;              // their product
    Expr base;               // the thread's first element in ws
  };

  [[noreturn]] void Fail(const std::string& problem, const Stmt& at) const {
    throw Error(ErrorKind::kVerify, "in function '" + func_.name + "': " + problem + " in `" +
                                        detail::StmtHead(at) + "`");
  }

  // `e` as int64: a constant as an int64 constant, an int64 expression as it is.
  static Expr I64(const Expr& e) {
    if (e.dtype() == Int64()) return e;
    if (e.kind() == ExprKind::kIntImm) return IntImm(Int64(), e.As<IntImmNode>()->value);
    return Cast(Int64(), e);
  }

  static bool Constant(const Buffer& b) {
    for (const Expr& e : b->shape)
      if (e.kind() != ExprKind::kIntImm) return false;
    return true;
  }

  Stmt Lower(const AllocateNode& n, const Stmt& at) {
    const Buffer& b = n.buffer;
    // The size must be known before the threads start: the host allocates the workspace.
    for (const Expr& e : b->shape) {
      const VarNode* inside = nullptr;
      bool load = false;
      AnyExpr(e, [&](const Expr& x) {
        if (x.kind() == ExprKind::kLoad) load = true;
        if (x.kind() == ExprKind::kVar && uses_.Defined(x.As<VarNode>()) && inside == nullptr)
          inside = x.As<VarNode>();
        return false;
      });
      if (inside != nullptr || load)
        Fail("local allocation of '" + b.name() + "' is sized by " +
                 (inside != nullptr ? "variable '" + inside->name + "', defined inside its region"
                                    : std::string("a load from memory")) +
                 ": a runtime-sized local array of device code is a slice a thread of a "
                 "workspace the host allocates before the threads start; size it with params "
                 "or variables of host code",
             at);
    }
    if (!b->strides.empty())
      Fail("local allocation of '" + b.name() +
               "' has strides and a size known only at run "
               "time; allocate it without strides",
           at);
    // The thread's linear index in the grid, and the grid's thread count, in int64.
    Expr tid, total;
    for (int a = 0; a < 6; ++a) {
      if (!uses_.extent[a]) continue;
      const ForNode* loop = nullptr;
      for (const ForNode* l : bound_)
        if (static_cast<int>(l->thread) - 1 == a) loop = l;
      if (loop == nullptr)
        Fail("local allocation of '" + b.name() +
                 "' is sized at run time and made outside the "
                 "loop over " +
                 ToString(static_cast<ThreadTag>(a + 1)) +
                 " of its kernel: a thread's slice of the workspace is found from its index on "
                 "every axis; allocate it inside every thread-bound loop",
             at);
      const Expr ext = I64(uses_.extent[a]);
      const bool from_zero =
          loop->min.kind() == ExprKind::kIntImm && loop->min.As<IntImmNode>()->value == 0;
      const Expr idx = I64(from_zero ? Expr(loop->var) : loop->var - loop->min);
      tid = tid ? tid * ext + idx : idx;
      total = total ? total * ext : ext;
    }
    Slice sl;
    for (const Expr& e : b->shape) {
      sl.dims.push_back(I64(e));
      sl.elems = sl.elems ? sl.elems * sl.dims.back() : sl.dims.back();
    }
    sl.ws = Buffer(b.name(), b.dtype(), {total * sl.elems});
    sl.base = tid * sl.elems;
    workspaces_->push_back(sl.ws);
    slices_.emplace(b.get(), sl);
    // Zero-filled where it was allocated, as a local array is.
    Var z(FreshName(b.name() + "_zero"), Int64());
    Stmt zero = For(z, IntImm(Int64(), 0), sl.elems, ForKind::kSerial,
                    Store(sl.ws, {sl.base + z}, Const(b.dtype(), 0)));
    Stmt body = S(n.body);
    return Seq({zero, body});
  }

  // `base`, or base with a number, that no variable or buffer of the function is named.
  std::string FreshName(const std::string& base) {
    if (names_.empty()) {
      names_.insert("");
      for (const Param& p : func_.params)
        names_.insert(p.is_buffer() ? p.buffer().name() : p.var().name());
      ForEachStmt(func_.body, [&](const Stmt& st) {
        if (st.kind() == StmtKind::kFor) names_.insert(st.As<ForNode>()->var.name());
        if (st.kind() == StmtKind::kLetStmt) names_.insert(st.As<LetStmtNode>()->var.name());
        if (st.kind() == StmtKind::kAllocate) names_.insert(st.As<AllocateNode>()->buffer.name());
      });
    }
    std::string name = base;
    for (int k = 1; names_.count(name) != 0; ++k) name = base + std::to_string(k);
    names_.insert(name);
    return name;
  }

  // The index into the workspace of an access to the local array.
  Expr Index(const Slice& sl, const std::vector<Expr>& indices, const Stmt& at) {
    Expr lin;
    for (size_t d = 0; d < indices.size(); ++d) {
      if (indices[d].dtype().lanes != 1)
        Fail("a vector access of local array '" + sl.ws.name() +
                 "', which is sized at run time; access it one element at a time",
             at);
      const Expr i64 = I64(E(indices[d], at));
      lin = lin ? lin * sl.dims[d] + i64 : i64;
    }
    return sl.base + lin;
  }

  std::vector<Expr> Es(const std::vector<Expr>& v, const Stmt& at, bool* changed) {
    std::vector<Expr> out;
    for (const Expr& e : v) {
      out.push_back(E(e, at));
      *changed = *changed || out.back().get() != e.get();
    }
    return out;
  }

  Expr E(const Expr& e, const Stmt& at) {
    if (!e) return e;
    switch (e.kind()) {
      case ExprKind::kBinary: {
        const auto* n = e.As<BinaryNode>();
        Expr a = E(n->a, at), b = E(n->b, at);
        return a.get() == n->a.get() && b.get() == n->b.get() ? e : Binary(n->op, a, b);
      }
      case ExprKind::kNot: {
        Expr a = E(e.As<NotNode>()->a, at);
        return a.get() == e.As<NotNode>()->a.get() ? e : Not(a);
      }
      case ExprKind::kNeg: {
        Expr a = E(e.As<NegNode>()->a, at);
        return a.get() == e.As<NegNode>()->a.get() ? e : Neg(a);
      }
      case ExprKind::kSelect: {
        const auto* n = e.As<SelectNode>();
        Expr c = E(n->cond, at), a = E(n->a, at), b = E(n->b, at);
        return c.get() == n->cond.get() && a.get() == n->a.get() && b.get() == n->b.get()
                   ? e
                   : Select(c, a, b);
      }
      case ExprKind::kCast: {
        Expr v = E(e.As<CastNode>()->value, at);
        return v.get() == e.As<CastNode>()->value.get() ? e : Cast(e.dtype(), v);
      }
      case ExprKind::kLoad: {
        const auto* n = e.As<LoadNode>();
        auto it = slices_.find(n->buffer.get());
        if (it != slices_.end()) return Load(it->second.ws, {Index(it->second, n->indices, at)});
        bool changed = false;
        std::vector<Expr> idx = Es(n->indices, at, &changed);
        return changed ? Load(n->buffer, idx) : e;
      }
      case ExprKind::kCall: {
        const auto* n = e.As<CallNode>();
        bool changed = false;
        std::vector<Expr> args = Es(n->args, at, &changed);
        return changed ? Call(n->name, args) : e;
      }
      case ExprKind::kRamp: {
        const auto* n = e.As<RampNode>();
        Expr b = E(n->base, at), st = E(n->stride, at);
        return b.get() == n->base.get() && st.get() == n->stride.get()
                   ? e
                   : Ramp(b, st, e.dtype().lanes);
      }
      case ExprKind::kBroadcast: {
        Expr v = E(e.As<BroadcastNode>()->value, at);
        return v.get() == e.As<BroadcastNode>()->value.get() ? e : Broadcast(v, e.dtype().lanes);
      }
      default:
        return e;
    }
  }

  Stmt S(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq: {
        std::vector<Stmt> seq;
        bool changed = false;
        for (const Stmt& c : s.As<SeqNode>()->seq) {
          Stmt x = S(c);
          changed = changed || x.get() != c.get();
          if (x.kind() == StmtKind::kSeq) {  // a lowered allocation: never nest a Seq
            for (const Stmt& y : x.As<SeqNode>()->seq) seq.push_back(y);
          } else {
            seq.push_back(x);
          }
        }
        return changed ? Seq(seq) : s;
      }
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        const bool bound = n->for_kind == ForKind::kThreadBinding;
        if (bound) bound_.push_back(n);
        Stmt body = S(n->body);
        if (bound) bound_.pop_back();
        Expr mn = E(n->min, s), ext = E(n->extent, s), st = n->step ? E(n->step, s) : n->step;
        if (mn.get() != n->min.get() || ext.get() != n->extent.get() || st.get() != n->step.get()) {
          // A loop bound that reads a lowered array (a thread's own value): rebuild it.
          Stmt loop = st ? For(n->var, mn, ext, st, n->for_kind, body)
                         : For(n->var, mn, ext, n->for_kind, body);
          return bound ? ThreadFor(n->var, n->thread, mn, ext, body) : loop;
        }
        return body.get() == n->body.get() ? s : WithBody(*n, body);
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        Expr c = E(n->cond, s);
        Stmt t = S(n->then_case);
        Stmt el = n->else_case ? S(n->else_case) : Stmt();
        if (c.get() == n->cond.get() && t.get() == n->then_case.get() &&
            el.get() == n->else_case.get())
          return s;
        return IfThenElse(c, t, el);
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        Expr v = E(n->value, s);
        Stmt body = S(n->body);
        if (v.get() == n->value.get()) return body.get() == n->body.get() ? s : WithBody(*n, body);
        return n->assignable ? DeclareVar(n->var, v, body) : LetStmt(n->var, v, body);
      }
      case StmtKind::kAllocate: {
        const auto* n = s.As<AllocateNode>();
        if (n->scope == StorageScope::kLocal && !Constant(n->buffer)) return Lower(*n, s);
        Stmt body = S(n->body);
        return body.get() == n->body.get() ? s : Allocate(n->buffer, n->scope, body);
      }
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        Expr v = E(n->value, s);
        auto it = slices_.find(n->buffer.get());
        if (it != slices_.end()) return Store(it->second.ws, {Index(it->second, n->indices, s)}, v);
        bool changed = v.get() != n->value.get();
        std::vector<Expr> idx = Es(n->indices, s, &changed);
        return changed ? Store(n->buffer, idx, v) : s;
      }
      case StmtKind::kAtomic: {
        const auto* n = s.As<AtomicNode>();
        Expr v = E(n->value, s);
        auto it = slices_.find(n->buffer.get());
        if (it != slices_.end())
          return Atomic(n->op, it->second.ws, {Index(it->second, n->indices, s)}, v);
        bool changed = v.get() != n->value.get();
        std::vector<Expr> idx = Es(n->indices, s, &changed);
        return changed ? Atomic(n->op, n->buffer, idx, v) : s;
      }
      case StmtKind::kEvaluate: {
        Expr v = E(s.As<EvaluateNode>()->value, s);
        return v.get() == s.As<EvaluateNode>()->value.get() ? s : Evaluate(v);
      }
      case StmtKind::kAssign: {
        const auto* n = s.As<AssignNode>();
        Expr v = E(n->value, s);
        return v.get() == n->value.get() ? s : Assign(n->var, v);
      }
      default:
        return s;
    }
  }

  const PrimFunc& func_;
  const RegionUses& uses_;
  std::vector<Buffer>* workspaces_ = nullptr;
  std::vector<const ForNode*> bound_;  // enclosing thread-bound loops, outermost first
  std::unordered_map<const BufferNode*, Slice> slices_;
  std::set<std::string> names_;  // of the function's variables and buffers, once needed
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
    DeviceBuffers(func_.body);
    Stmt body = Mutate(func_.body);
    PrimFunc host(func_.name, func_.params, body, func_.attrs);
    host.launch_axes = func_.launch_axes;
    return host;
  }

  std::vector<PrimFunc> kernels;

 private:
  [[noreturn]] void Fail(const std::string& problem, const Stmt& at) const {
    throw Error(ErrorKind::kVerify, "in function '" + func_.name + "': " + problem + " in `" +
                                        detail::StmtHead(at) + "`");
  }

  static int CountRegions(const Stmt& s) {
    if (s.kind() == StmtKind::kFor && s.As<ForNode>()->for_kind == ForKind::kThreadBinding)
      return 1;
    int n = 0;
    detail::ForEachChildStmt(s, [&](const Stmt& c) { n += CountRegions(c); });
    return n;
  }

  // The buffers that live in device memory besides the params: those used inside a region
  // or passed to call_packed by host code (the workspaces, when host code allocates them).
  void DeviceBuffers(const Stmt& s) {
    ForEachStmt(s, [&](const Stmt& st) {
      if (st.kind() == StmtKind::kFor && st.As<ForNode>()->for_kind == ForKind::kThreadBinding) {
        RegionUses uses(func_, st);
        for (const Buffer& b : uses.buffers) device_buffers_.insert(b.get());
      }
      detail::ForEachOwnExpr(st, [&](const Expr& e) {
        AnyExpr(e, [&](const Expr& x) {
          if (x.kind() == ExprKind::kBufferRef)
            device_buffers_.insert(x.As<BufferRefNode>()->buffer.get());
          return false;
        });
      });
    });
  }

  // Host code: no load or store of a param buffer when the device has its own memory.
  void HostExpr(const Expr& e, const Stmt& at) {
    if (device_is_cpu_) return;
    if (e.kind() == ExprKind::kLoad) HostAccess(e.As<LoadNode>()->buffer, at);
    detail::ForEachChild(e, [&](const Expr& c) { HostExpr(c, at); });
  }
  void HostAccess(const Buffer& b, const Stmt& at) {
    if (HostAlloc(b.get()) != nullptr && device_buffers_.count(b.get()))
      Fail("host code accesses buffer '" + b.name() + "', a workspace that kernels use, " +
               "which lives in device memory: host code cannot touch device memory; use it " +
               "only inside the thread-bound loops (or allocate a separate buffer for the host)",
           at);
    if (param_buffers_.count(b.get()))
      Fail("host code accesses buffer '" + b.name() + "', which lives in device memory: host " +
               "code cannot touch device memory; bind the loops that access it to " +
               "blockIdx/threadIdx",
           at);
  }

  Stmt Mutate(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq:
        return detail::MapSeq(s, [&](const Stmt& c) { return Mutate(c); });
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
        host_allocs_.push_back(n);
        Stmt body = Mutate(n->body);
        host_allocs_.pop_back();
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
    // Runtime-sized local arrays become workspaces of host code around the launch.
    std::vector<Buffer> local_ws;
    const Stmt lowered = [&] {
      RegionUses before(func_, region);
      return LocalLowering(func_, before).Run(region, &local_ws);
    }();
    std::vector<Stmt> local_allocs;  // placeholders: host_allocs_ points into them
    for (const Buffer& w : local_ws) {
      local_allocs.push_back(Allocate(w, StorageScope::kGlobal, Evaluate(IntImm(Int32(), 0))));
      host_allocs_.push_back(local_allocs.back().As<AllocateNode>());
    }
    struct PopAllocs {
      std::vector<const AllocateNode*>& v;
      size_t n;
      ~PopAllocs() { v.resize(v.size() - n); }
    } pop{host_allocs_, local_ws.size()};
    RegionUses uses(func_, lowered);

    std::vector<const BufferNode*> buffers;
    std::vector<Buffer> workspaces;  // allocated by host code, outermost first
    for (size_t k = 0; k < uses.buffers.size(); ++k) {
      const Buffer& b = uses.buffers[k];
      if (!param_buffers_.count(b.get())) CheckWorkspace(b, uses.buffer_use[k]);
      buffers.push_back(b.get());
    }
    for (const AllocateNode* alloc : host_allocs_) {
      for (const BufferNode* x : buffers)
        if (x == alloc->buffer.get()) workspaces.push_back(alloc->buffer);
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
    auto add_var = [&](const VarNode* v) { in_shapes.insert(v); };
    for (const Param& p : func_.params) {
      if (!p.is_buffer() || !uses_buffer(p.buffer().get())) continue;
      for (const Expr& e : p.buffer()->shape) detail::ForEachArithmeticVar(e, add_var);
      for (const Expr& e : p.buffer()->strides) detail::ForEachArithmeticVar(e, add_var);
    }
    for (const Buffer& w : workspaces) {
      for (const Expr& e : w->shape) detail::ForEachArithmeticVar(e, add_var);
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
      if ((!uses_var(v.get()) && !in_shapes.count(v.get())) || taken_vars.count(v.get())) continue;
      params.emplace_back(v);
      args.push_back(v);
      taken_vars.insert(v.get());
    }
    for (const Param& p : func_.params) {
      if (!p.is_buffer() || !uses_buffer(p.buffer().get())) continue;
      params.emplace_back(p.buffer());
      args.push_back(Ref(p.buffer()));
    }
    for (const Buffer& w : workspaces) {
      params.emplace_back(w);
      args.push_back(Ref(w));
    }
    std::vector<ThreadTag> launch;
    for (int a = 0; a < 6; ++a) {
      if (!uses.extent[a]) continue;
      // The host computes the extent before the launch: it may not read device memory.
      if (const BufferNode* b = ParamBufferLoaded(uses.extent[a]); b != nullptr && !device_is_cpu_)
        Fail(std::string("the extent of the loop over ") + ToString(static_cast<ThreadTag>(a + 1)) +
                 " reads buffer '" + b->name +
                 "', which lives in device memory: the host computes launch extents and "
                 "cannot read device memory; pass the extent as a scalar param",
             region);
      launch.push_back(static_cast<ThreadTag>(a + 1));
      args.push_back(Cast(Int64(), uses.extent[a]));
    }
    // The function's attrs go with each kernel (a backend's hints, such as CUDA's
    // "cuda.min_blocks_per_sm", are read from the kernel it compiles), marked as a kernel.
    std::map<std::string, std::string> attrs = func_.attrs;
    attrs["kernel"] = "1";
    kernels.emplace_back(name, params, lowered, std::move(attrs));
    kernels.back().launch_axes = std::move(launch);
    Stmt call = Evaluate(CallPacked(name, args));
    for (size_t k = local_ws.size(); k-- > 0;)
      call = Allocate(local_ws[k], StorageScope::kGlobal, call);
    return call;
  }

  // A buffer that host code allocates and a kernel uses: a device workspace, allocated by the
  // host part for the duration of its statement and passed to each kernel as a buffer param.
  void CheckWorkspace(const Buffer& b, const Stmt& use) const {
    const AllocateNode* alloc = HostAlloc(b.get());
    if (alloc == nullptr || alloc->scope != StorageScope::kGlobal)
      Fail("buffer '" + b.name() + "' is allocated " +
               (alloc == nullptr
                    ? std::string("outside the kernel")
                    : "`" + std::string(ToString(alloc->scope)) + "` outside the kernel") +
               " and used inside it: a buffer that kernels share is a `global` allocation of " +
               "host code (a device workspace); allocate it `global` outside the thread-bound " +
               "loops, or inside them",
           use);
    if (!b->strides.empty())
      Fail("workspace '" + b.name() + "' has strides: a device workspace is compact; " +
               "allocate it without strides",
           use);
    for (const Expr& e : b->shape) {
      if (AnyExpr(e, [](const Expr& x) { return x.kind() == ExprKind::kLoad; }))
        Fail("the shape of workspace '" + b.name() + "' (`" + detail::Quote(e) +
                 "`) loads from memory: the kernels take the shape from scalar params; " +
                 "compute it into a `let` first",
             use);
    }
  }

  // The allocation of host code in scope that makes `b`, or nullptr.
  const AllocateNode* HostAlloc(const BufferNode* b) const {
    for (const AllocateNode* a : host_allocs_)
      if (a->buffer.get() == b) return a;
    return nullptr;
  }

  // A param buffer that `e` loads from, or nullptr.
  const BufferNode* ParamBufferLoaded(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::kLoad:
        if (param_buffers_.count(e.As<LoadNode>()->buffer.get()))
          return e.As<LoadNode>()->buffer.get();
        break;
      case ExprKind::kBinary:
      case ExprKind::kNot:
      case ExprKind::kNeg:
      case ExprKind::kSelect:
      case ExprKind::kCast:
      case ExprKind::kCall:
        break;
      default:
        return nullptr;
    }
    const BufferNode* found = nullptr;
    detail::ForEachChild(e, [&](const Expr& c) {
      if (found == nullptr) found = ParamBufferLoaded(c);
    });
    return found;
  }

  const PrimFunc& func_;
  const bool device_is_cpu_;
  const std::set<std::string>& taken_;
  std::unordered_set<const BufferNode*> param_buffers_;
  std::vector<Var> host_vars_;                            // in scope, outermost first
  std::vector<const AllocateNode*> host_allocs_;          // in scope, outermost first
  std::unordered_set<const BufferNode*> device_buffers_;  // used by a region or call_packed
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
