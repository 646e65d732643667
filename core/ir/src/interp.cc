// SPDX-License-Identifier: Apache-2.0
// The interpreter: Run (arguments into a frame) and the simulated GPU grid (docs/ir.md,
// "Interpreter"). The compiler is in interp_compile.cc.
#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <exception>
#include <system_error>
#include <thread>

#include "deep.hpp"
#include "interp_runtime.hpp"

namespace backplane {
namespace ir {

namespace detail {

char* BlockCtx::Shared(int id, uint32_t gen, size_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = shared[{id, gen}];
  if (!slot.first) {
    slot.first.reset(new (std::nothrow) uint64_t[(bytes + 7) / 8]());
    if (!slot.first)
      throw Error(ErrorKind::kValue, "cannot allocate '" + what + "': out of memory");
    slot.second = bytes;
  } else if (slot.second != bytes) {
    throw Error(ErrorKind::kValue, "the threads of a block give the shared allocation '" + what +
                                       "' different sizes (" + std::to_string(slot.second) +
                                       " and " + std::to_string(bytes) + " bytes)");
  }
  return reinterpret_cast<char*>(slot.first.get());
}

namespace {

// A block with barriers runs one std::thread per simulated thread; more is refused.
constexpr int64_t kMaxThreadsWithBarriers = 1024;

int64_t Product(const int64_t* v, const std::string& func) {
  uint64_t p = 1;
  for (int k = 0; k < 3; ++k)
    if (__builtin_mul_overflow(p, static_cast<uint64_t>(v[k]), &p) || p > (uint64_t{1} << 62))
      throw Error(ErrorKind::kValue, func + ": the grid is too large to simulate");
  return static_cast<int64_t>(p);
}

// Sets the three indices of `idx` (x fastest) for the linear index `n` of a grid `ext`.
void Unflatten(int64_t n, const int64_t* ext, int64_t* idx) {
  idx[0] = n % ext[0];
  n /= ext[0];
  idx[1] = n % ext[1];
  idx[2] = n / ext[1];
}

// Restores the frame's block context when a serial grid ends, even by an exception.
struct BlockScope {
  Frame& f;
  BlockCtx* saved;
  BlockScope(Frame& frame, BlockCtx* block) : f(frame), saved(frame.block) { f.block = block; }
  ~BlockScope() { f.block = saved; }
};

}  // namespace

void RunGrid(Frame& f, const Fn& root, const int64_t ext[6], bool has_barrier,
             const std::string& func_name) {
  for (int a = 0; a < 6; ++a)
    if (ext[a] <= 0) return;
  const int64_t blocks = Product(ext, func_name);
  const int64_t threads = Product(ext + 3, func_name);
  std::fill(f.shared_gen.begin(), f.shared_gen.end(), 0);
  if (!has_barrier) {
    // Without barriers the threads of a block cannot observe their order: one after another.
    BlockCtx block;
    BlockScope scope(f, &block);
    for (int64_t b = 0; b < blocks; ++b) {
      Unflatten(b, ext, f.tidx);
      for (int64_t t = 0; t < threads; ++t) {
        Unflatten(t, ext + 3, f.tidx + 3);
        std::fill(f.shared_gen.begin(), f.shared_gen.end(), 0);
        root(f);
      }
      block.Clear();
    }
    return;
  }
  if (threads > kMaxThreadsWithBarriers)
    throw Error(ErrorKind::kValue, func_name + ": a block of " + std::to_string(threads) +
                                       " threads that uses barriers: the interpreter runs at " +
                                       "most " + std::to_string(kMaxThreadsWithBarriers));
  // One std::thread per simulated thread, for every block in turn; the barrier at the end of
  // a block frees its shared memory before any thread starts the next.
  BlockBarrier barrier(threads);
  BlockCtx block;
  block.barrier = &barrier;
  std::mutex error_mu;
  std::exception_ptr error;
  std::vector<Frame> frames(static_cast<size_t>(threads), f);
  auto work = [&](int64_t t) {
    Frame& mine = frames[static_cast<size_t>(t)];
    mine.block = &block;
    Unflatten(t, ext + 3, mine.tidx + 3);
    try {
      for (int64_t b = 0; b < blocks; ++b) {
        Unflatten(b, ext, mine.tidx);
        std::fill(mine.shared_gen.begin(), mine.shared_gen.end(), 0);
        root(mine);
        barrier.Wait(-1, [&block] { block.Clear(); });
      }
    } catch (const BarrierAborted&) {
      // another thread failed first
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
      barrier.Abort();
    }
  };
  // A deep tree needs more stack than a std::thread has (limits.hpp).
  const size_t stack = f.run->stack_bytes;
  const bool deep = stack > (size_t{4} << 20);
  std::vector<std::thread> pool;
  std::vector<StackThread> deep_pool;
  pool.reserve(static_cast<size_t>(threads));
  deep_pool.reserve(static_cast<size_t>(threads));
  auto join_all = [&] {
    for (auto& th : pool) th.join();
    for (auto& th : deep_pool) th.Join();
  };
  try {
    for (int64_t t = 0; t < threads; ++t) {
      if (deep) {
        deep_pool.emplace_back(stack, [&work, t] { work(t); });
      } else {
        pool.emplace_back(work, t);
      }
    }
  } catch (const std::exception& e) {
    barrier.Abort();
    join_all();
    throw Error(ErrorKind::kValue,
                func_name + ": cannot start the threads of a block: " + std::string(e.what()));
  }
  join_all();
  if (error) std::rethrow_exception(error);
  if (barrier.diverged())
    throw Error(ErrorKind::kValue,
                func_name + ": the threads of a block reached different barriers (a barrier " +
                    "in a branch or loop that not every thread takes, or a thread that ends " +
                    "while others wait): make every thread of a block reach each barrier");
}

}  // namespace detail

struct Interpreter::Impl {
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // The compiled closures nest as deep as the tree, and so does their destruction.
  ~Impl() {
    try {
      detail::Deep(depth, [&] { funcs.clear(); });
    } catch (...) {
      funcs.clear();  // no thread could be started: free them here
    }
  }
  IRModule module;
  int64_t depth = 0;  // TreeDepth(module): compiling and running recurse over the tree
  std::vector<std::shared_ptr<detail::CompiledFunc>> funcs;  // as module.functions()
};

Interpreter::Interpreter(IRModule module) {
  Verify(module);
  auto impl = std::make_shared<Impl>();
  impl->module = std::move(module);
  impl->depth = TreeDepth(impl->module);
  detail::Deep(impl->depth, [&] {
    for (const PrimFunc& f : impl->module.functions()) impl->funcs.push_back(detail::Compile(f));
  });
  impl_ = std::move(impl);
}

const IRModule& Interpreter::module() const { return impl_->module; }

void Interpreter::Run(const std::string& func, const std::vector<ArgView>& args,
                      const PackedCall& call) const {
  Run(func, args, call, Args::kCheck);
}

void Interpreter::Run(const std::string& func, const std::vector<ArgView>& args,
                      const PackedCall& call, Args args_state) const {
  detail::Deep(impl_->depth, [&] { RunDeep(func, args, call, args_state, nullptr); });
}

void Interpreter::Run(const std::string& func, const std::vector<ArgView>& args,
                      const PackedCall& call, Args args_state,
                      const WorkspaceAlloc& workspace) const {
  const WorkspaceAlloc* w = workspace ? &workspace : nullptr;
  detail::Deep(impl_->depth, [&] { RunDeep(func, args, call, args_state, w); });
}

void Interpreter::RunDeep(const std::string& func, const std::vector<ArgView>& args,
                          const PackedCall& call, Args args_state,
                          const WorkspaceAlloc* workspace) const {
  const detail::CompiledFunc* cf = nullptr;
  for (size_t k = 0; k < impl_->module.functions().size(); ++k)
    if (impl_->module.functions()[k].name == func) cf = impl_->funcs[k].get();
  if (cf == nullptr) {
    std::string names;
    for (const PrimFunc& f : impl_->module.functions())
      names += (names.empty() ? "" : ", ") + f.name;
    throw Error(ErrorKind::kValue, "Interpreter::Run: no function '" + func +
                                       "' in the module (it has: " + names + ")");
  }
  if (!cf->error.empty()) throw Error(ErrorKind::kValue, cf->error);
  const PrimFunc& pf = *cf->func;

  detail::RunCtx run;
  run.func = &pf;
  run.args = &args;
  run.call = &call;
  run.workspace = workspace;
  run.stack_bytes = StackBytesForDepth(impl_->depth);
  // A kernel's trailing launch extents.
  std::vector<ArgView> own;
  const std::vector<ArgView>* params = &args;
  const size_t nparams = pf.params.size();
  if (!cf->launch_params.empty() && args.size() == nparams + cf->launch_params.size()) {
    for (size_t k = 0; k < cf->launch_params.size(); ++k) {
      const ArgView& a = args[nparams + k];
      const char* tag = ToString(cf->launch_params[k]);
      if (a.kind != ArgView::Kind::kInt)
        throw Error(ErrorKind::kValue, pf.name + ": argument " + std::to_string(nparams + k) +
                                           ", the launch extent of " + tag +
                                           ", is not an integer; pass the extents the host's " +
                                           "call computes");
      run.launch[static_cast<int>(cf->launch_params[k]) - 1] = a.i;
    }
    run.has_launch = true;
    own.assign(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(nparams));
    params = &own;
    run.args = &own;
  }
  if (args_state == Args::kCheck) {
    const std::string msg = CheckArgs(pf, *params);
    if (!msg.empty()) throw Error(ErrorKind::kValue, msg);
  }

  detail::Frame f;
  f.regs = cf->init_regs;
  f.dims.assign(cf->ndims, 0);
  f.data.assign(cf->bufs.size(), nullptr);
  f.user.assign(cf->bufs.size(), nullptr);
  f.shared_gen.assign(cf->nshared, 0);
  f.occ_ext.assign(cf->nocc, 0);
  f.run = &run;
  for (size_t k = 0; k < nparams; ++k) {
    const ArgView& a = (*params)[k];
    const int index = cf->param_reg[k];
    if (pf.params[k].is_buffer()) {
      const detail::BufSlot& s = cf->bufs[static_cast<size_t>(index)];
      f.data[static_cast<size_t>(index)] = static_cast<char*>(a.data);
      int64_t* dims = f.dims.data() + s.dims_off;
      uint64_t stride = 1;  // CheckArgs checked the shape; wraps rather than overflows
      for (int d = s.ndim - 1; d >= 0; --d) {
        dims[d] = a.shape[d];
        dims[s.ndim + d] = a.strides != nullptr ? a.strides[d] : static_cast<int64_t>(stride);
        stride *= static_cast<uint64_t>(a.shape[d]);
      }
      continue;
    }
    const DType t = pf.params[k].var().dtype();
    detail::Val& v = f.regs[static_cast<size_t>(index)];
    if (t.is_float()) {
      v.f = a.kind == ArgView::Kind::kFloat ? detail::RoundFloat(a.f, t)
                                            : detail::IntToFloat(a.i, Int64(), t);
    } else {
      v.i = detail::WrapInt(static_cast<uint64_t>(a.i), t);
    }
  }
  cf->body(f);
}

}  // namespace ir
}  // namespace backplane
