// SPDX-License-Identifier: Apache-2.0
// SplitErrors: what SplitHostDevice guarantees of its result (split.cc), checked again on a
// host part and kernels read back from a saved module, which anyone may have written; and
// CallsOutside: the packed calls of such a host part that leave its module's imports.
#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <functional>
#include <map>
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

constexpr ThreadTag kTags[6] = {ThreadTag::kBlockIdxX,  ThreadTag::kBlockIdxY,
                                ThreadTag::kBlockIdxZ,  ThreadTag::kThreadIdxX,
                                ThreadTag::kThreadIdxY, ThreadTag::kThreadIdxZ};

// The grid a kernel's loops assume: the extent each bound axis has, and its launch_params in
// order. `ok` is false when the kernel is not one SplitHostDevice makes (its problems are in
// `problems`).
struct Grid {
  Expr extent[6];  // by ThreadTag - 1; empty if the axis is not bound
  std::vector<ThreadTag> launch;
  std::vector<std::string> problems;
  bool ok() const { return problems.empty(); }
};

void Bindings(const Stmt& s, Grid* g) {
  if (!s) return;
  if (s.kind() == StmtKind::kFor) {
    const auto* n = s.As<ForNode>();
    if (n->for_kind == ForKind::kThreadBinding && n->thread != ThreadTag::kNone) {
      Expr& slot = g->extent[static_cast<int>(n->thread) - 1];
      if (!slot) {
        slot = n->extent;
      } else if (!StructuralEqual(slot, n->extent)) {
        g->problems.push_back(std::string("binds ") + ToString(n->thread) + " with two extents (" +
                              detail::Quote(slot) + " and " + detail::Quote(n->extent) + ")");
      }
    }
  }
  detail::ForEachChildStmt(s, [g](const Stmt& c) { Bindings(c, g); });
}

Grid GridOf(const PrimFunc& k) {
  Grid g;
  Bindings(k.body, &g);
  if (!k.launch_axes) {
    g.problems.push_back("has no launch_params attr, so it is not a kernel bp_build makes");
    return g;
  }
  g.launch = *k.launch_axes;
  std::vector<ThreadTag> bound;
  for (int a = 0; a < 6; ++a) {
    if (g.extent[a]) bound.push_back(kTags[a]);
  }
  if (g.problems.empty() && g.launch != bound) {
    std::string names;
    for (ThreadTag t : bound) names += (names.empty() ? "" : ",") + std::string(ToString(t));
    g.problems.push_back("has launch_params \"" + ToString(g.launch) + "\" but binds \"" + names +
                         "\" (the axes it binds, in the order blockIdx.x ... threadIdx.z)");
  }
  return g;
}

// Whether kernel expression `k` with each kernel param Var replaced by its argument (`subst`)
// is host expression `h`. Anything but arithmetic over params, constants, casts and intrinsics
// (a load, a variable that is not a param) never matches: a launch extent is computed by the
// host from the kernel's scalar arguments alone.
bool EqualUnder(const Expr& k, const Expr& h,
                const std::unordered_map<const VarNode*, Expr>& subst) {
  if (!k || !h) return false;
  if (k.kind() == ExprKind::kVar) {
    auto it = subst.find(k.As<VarNode>());
    return it != subst.end() && StructuralEqual(it->second, h);
  }
  if (k.kind() != h.kind() || k.dtype() != h.dtype()) return false;
  switch (k.kind()) {
    case ExprKind::kIntImm:
      return k.As<IntImmNode>()->value == h.As<IntImmNode>()->value;
    case ExprKind::kFloatImm:
      return k.As<FloatImmNode>()->value == h.As<FloatImmNode>()->value;
    case ExprKind::kBinary: {
      const auto *a = k.As<BinaryNode>(), *b = h.As<BinaryNode>();
      return a->op == b->op && EqualUnder(a->a, b->a, subst) && EqualUnder(a->b, b->b, subst);
    }
    case ExprKind::kNot:
      return EqualUnder(k.As<NotNode>()->a, h.As<NotNode>()->a, subst);
    case ExprKind::kNeg:
      return EqualUnder(k.As<NegNode>()->a, h.As<NegNode>()->a, subst);
    case ExprKind::kSelect: {
      const auto *a = k.As<SelectNode>(), *b = h.As<SelectNode>();
      return EqualUnder(a->cond, b->cond, subst) && EqualUnder(a->a, b->a, subst) &&
             EqualUnder(a->b, b->b, subst);
    }
    case ExprKind::kCast:
      return EqualUnder(k.As<CastNode>()->value, h.As<CastNode>()->value, subst);
    case ExprKind::kCall: {
      const auto *a = k.As<CallNode>(), *b = h.As<CallNode>();
      if (a->name != b->name || a->args.size() != b->args.size()) return false;
      for (size_t i = 0; i < a->args.size(); ++i) {
        if (!EqualUnder(a->args[i], b->args[i], subst)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

constexpr size_t kMaxListedCalls = 100;

class HostChecker {
 public:
  HostChecker(const std::vector<const PrimFunc*>& kernels, std::vector<std::string>* out)
      : out_(out) {
    for (const PrimFunc* k : kernels) {
      if (k != nullptr) kernels_.emplace(k->name, k);  // the first of a name is the one called
    }
  }

  // CallsOutside: each name outside `callable` that a function calls goes to `outside` (once a
  // function, the first kMaxListedCalls; the rest are counted in `unlisted`).
  void ReportCallsOutside(const std::set<std::string>* callable, std::vector<std::string>* outside,
                          size_t* unlisted) {
    callable_ = callable;
    outside_ = outside;
    unlisted_ = unlisted;
  }

  void Func(const PrimFunc& f) {
    func_ = &f;
    called_outside_.clear();
    param_buffers_.clear();
    for (const Param& p : f.params) {
      if (p.is_buffer()) param_buffers_.insert(p.buffer().get());
    }
    // The allocations host code passes to call_packed are device workspaces (the core's host
    // part allocates them on the device): host code never touches them either.
    passed_.clear();
    ForEachStmt(f.body, [&](const Stmt& st) {
      detail::ForEachOwnExpr(st, [&](const Expr& e) {
        AnyExpr(e, [&](const Expr& x) {
          if (x.kind() == ExprKind::kBufferRef) passed_.insert(x.As<BufferRefNode>()->buffer.get());
          return false;
        });
      });
    });
    S(f.body);
  }

 private:
  void Report(const std::string& problem) {
    out_->push_back("in function '" + func_->name + "': " + problem +
                    (stmt_ ? " in `" + quoter_.Line(stmt_) + "`" : std::string()));
  }

  void S(const Stmt& s) {
    if (!s) return;
    const Stmt saved = stmt_;
    if (s.kind() != StmtKind::kSeq) stmt_ = s;
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        if (n->for_kind == ForKind::kThreadBinding) {
          Report(std::string("host code binds a loop to ") + ToString(n->thread) +
                 "; it runs on the CPU, and only the kernels it launches bind thread axes");
        }
        break;
      }
      case StmtKind::kStore:
        Access(s.As<StoreNode>()->buffer, "stores to");
        break;
      case StmtKind::kAtomic:
        Access(s.As<AtomicNode>()->buffer, "updates");
        break;
      case StmtKind::kAllocate: {  // in scope in its body only
        const auto* n = s.As<AllocateNode>();
        for (const Expr& e : n->buffer->shape) E(e);
        for (const Expr& e : n->buffer->strides) E(e);
        allocs_.push_back(n);
        S(n->body);
        allocs_.pop_back();
        stmt_ = saved;
        return;
      }
      default:
        break;
    }
    detail::ForEachChild(
        s, [&](const Expr& e) { E(e); }, [&](const Stmt& c) { S(c); });
    stmt_ = saved;
  }

  void Access(const Buffer& b, const char* verb) {
    if (passed_.count(b.get()) != 0 && param_buffers_.count(b.get()) == 0) {
      Report(std::string("host code ") + verb + " buffer '" + b.name() +
             "', a workspace it passes to call_packed, which lives in device memory; host code "
             "never touches device memory (only the kernels it launches do)");
    }
    if (param_buffers_.count(b.get()) != 0) {
      Report(std::string("host code ") + verb + " buffer '" + b.name() +
             "', a parameter, which lives in device memory; host code never touches device "
             "memory (only the kernels it launches do)");
    }
  }

  void E(const Expr& e) {
    if (!e) return;
    if (e.kind() == ExprKind::kLoad) Access(e.As<LoadNode>()->buffer, "loads from");
    detail::ForEachChild(e, [&](const Expr& c) { E(c); });
    if (e.kind() == ExprKind::kCallPacked) {
      Outside(*e.As<CallPackedNode>());
      Launch(*e.As<CallPackedNode>());
    }
  }

  const Grid& GridFor(const PrimFunc& k) {
    auto it = grids_.find(&k);
    if (it != grids_.end()) return it->second;
    Grid& g = grids_.emplace(&k, GridOf(k)).first->second;
    for (const std::string& p : g.problems) out_->push_back("in kernel '" + k.name + "': " + p);
    return g;
  }

  void Outside(const CallPackedNode& call) {
    if (callable_ == nullptr || callable_->count(call.name) != 0) return;
    if (!called_outside_.insert(call.name).second) return;  // reported for this function
    if (outside_->size() >= kMaxListedCalls) {
      ++*unlisted_;
      return;
    }
    outside_->push_back("in function '" + func_->name + "': call_packed(\"" + call.name +
                        "\") names no function of the imported modules" +
                        (stmt_ ? " in `" + quoter_.Line(stmt_) + "`" : std::string()));
  }

  void Launch(const CallPackedNode& call) {
    auto found = kernels_.find(call.name);
    if (found == kernels_.end()) return;  // a global function, not a kernel
    const PrimFunc& k = *found->second;
    const Grid& grid = GridFor(k);
    if (!grid.ok()) return;  // reported once, for the kernel
    const std::string what = "the launch of kernel '" + k.name + "'";
    const size_t num_params = k.params.size();
    if (call.args.size() != num_params + grid.launch.size()) {
      Report(what + " passes " + std::to_string(call.args.size()) +
             " arguments; the kernel takes " + std::to_string(num_params) + " params and " +
             std::to_string(grid.launch.size()) + " launch extents");
      return;
    }
    std::unordered_map<const VarNode*, Expr> subst;
    for (size_t j = 0; j < num_params; ++j) {
      const Param& p = k.params[j];
      const Expr& arg = call.args[j];
      const std::string at = what + ": argument " + std::to_string(j);
      if (!p.is_buffer()) {
        if (arg.kind() == ExprKind::kBufferRef || arg.dtype() != p.var().dtype()) {
          Report(at + " is " +
                 (arg.kind() == ExprKind::kBufferRef ? std::string("a buffer")
                                                     : ToString(arg.dtype())) +
                 " but the kernel's param '" + p.var().name() + "' is " +
                 ToString(p.var().dtype()));
        }
        subst.emplace(p.var().get(), arg);
        continue;
      }
      const auto* ref = arg.As<BufferRefNode>();
      const AllocateNode* alloc = nullptr;
      if (ref != nullptr) {
        for (const AllocateNode* a : allocs_)
          if (a->buffer.get() == ref->buffer.get()) alloc = a;
      }
      if (alloc != nullptr &&
          (alloc->scope != StorageScope::kGlobal || !alloc->buffer->strides.empty())) {
        Report(at + " is buffer '" + ref->buffer.name() + "', allocated `" +
               ToString(alloc->scope) + "`" +
               (alloc->buffer->strides.empty() ? "" : " with strides") +
               " by host code; a workspace for the kernel's buffer '" + p.buffer().name() +
               "' is a compact `global` allocation");
      } else if (ref == nullptr ||
                 (alloc == nullptr && param_buffers_.count(ref->buffer.get()) == 0)) {
        Report(at +
               " must be one of the host function's buffer params or a `global` allocation "
               "of host code (a workspace), for the kernel's buffer '" +
               p.buffer().name() + "'");
      } else if (ref->buffer.dtype() != p.buffer().dtype() ||
                 ref->buffer->shape.size() != p.buffer()->shape.size()) {
        Report(at + " is buffer '" + ref->buffer.name() + "' (" + ToString(ref->buffer.dtype()) +
               ", rank " + std::to_string(ref->buffer->shape.size()) + ") but the kernel's '" +
               p.buffer().name() + "' is " + ToString(p.buffer().dtype()) + ", rank " +
               std::to_string(p.buffer()->shape.size()));
      }
    }
    for (size_t l = 0; l < grid.launch.size(); ++l) {
      const ThreadTag tag = grid.launch[l];
      const Expr& extent = grid.extent[static_cast<int>(tag) - 1];
      const Expr& arg = call.args[num_params + l];
      const auto* cast = arg.As<CastNode>();
      if (cast == nullptr || arg.dtype() != Int64() || !EqualUnder(extent, cast->value, subst)) {
        Report(what + " passes `" + detail::Quote(arg) + "` as the extent of " + ToString(tag) +
               ", but the kernel binds " + ToString(tag) + " with extent `" +
               detail::Quote(extent) +
               "` of its params: a grid other than the one the kernel's loops assume reaches "
               "outside its buffers");
      }
    }
  }

  std::vector<std::string>* out_;
  const std::set<std::string>* callable_ = nullptr;  // CallsOutside only
  std::vector<std::string>* outside_ = nullptr;
  size_t* unlisted_ = nullptr;
  std::set<std::string> called_outside_;  // by the function being checked
  std::map<std::string, const PrimFunc*> kernels_;
  std::map<const PrimFunc*, Grid> grids_;
  const PrimFunc* func_ = nullptr;
  std::unordered_set<const BufferNode*> param_buffers_;
  std::unordered_set<const BufferNode*> passed_;  // passed to call_packed by the function
  std::vector<const AllocateNode*> allocs_;       // in scope, outermost first
  Stmt stmt_;
  detail::Quoter quoter_;  // the line of stmt_, printed once for all its problems
};

}  // namespace

std::vector<std::string> SplitErrors(const IRModule& host,
                                     const std::vector<const PrimFunc*>& kernels) {
  std::vector<std::string> out = VerifyErrors(host);
  if (!out.empty()) return out;
  int64_t depth = TreeDepth(host);
  for (const PrimFunc* k : kernels) {
    if (k != nullptr) depth = std::max(depth, TreeDepth(*k));
  }
  detail::Deep(depth, [&] {
    HostChecker checker(kernels, &out);
    for (const PrimFunc& f : host.functions()) checker.Func(f);
  });
  return out;
}

std::vector<std::string> CallsOutside(const IRModule& host, const std::set<std::string>& callable) {
  std::vector<std::string> out;
  std::vector<std::string> ignored;  // SplitErrors' problems: none in a host part that passed it
  size_t unlisted = 0;
  detail::Deep(TreeDepth(host), [&] {
    HostChecker checker({}, &ignored);
    checker.ReportCallsOutside(&callable, &out, &unlisted);
    for (const PrimFunc& f : host.functions()) checker.Func(f);
  });
  if (unlisted > 0) {
    out.push_back("... and " + std::to_string(unlisted) + " more (only the first " +
                  std::to_string(kMaxListedCalls) + " are listed)");
  }
  return out;
}

}  // namespace ir
}  // namespace backplane
