// SPDX-License-Identifier: Apache-2.0
// Internal: what the interpreter's compiled code runs on. A function compiles to closures
// (Fn) over a Frame: registers for every variable, constant and intermediate value (each
// node of the tree has its own), and a slot per buffer (data pointer, extents and strides).
// Each simulated GPU thread that runs concurrently has its own copy of the frame.
#ifndef BACKPLANE_IR_SRC_INTERP_RUNTIME_HPP_
#define BACKPLANE_IR_SRC_INTERP_RUNTIME_HPP_

#include <backplane/ir/interp.hpp>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "scalar.hpp"

namespace backplane {
namespace ir {
namespace detail {

// One lane of a value: integers (and bool) normalized in i (scalar.hpp), floats in f (a
// float32 or float16 value is held exactly in the double).
union Val {
  int64_t i;
  double f;
};

struct Frame;
using Fn = std::function<void(Frame&)>;
inline void Eval(const Fn& fn, Frame& f) {
  if (fn) fn(f);
}

// Thrown by a barrier to the threads of a block that must stop because another one failed.
struct BarrierAborted {};

// The threads of one simulated block meet here. A barrier is identified by the statement;
// threads that reach different barriers in one phase (or one finishes while others wait) is
// barrier divergence, which CUDA leaves undefined: it aborts the block instead of hanging.
class BlockBarrier {
 public:
  explicit BlockBarrier(int64_t n) : n_(n) {}
  // `on_release` runs in the last thread to arrive, before the others go on.
  void Wait(int id, const std::function<void()>& on_release = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) throw BarrierAborted{};
    if (count_ == 0) {
      id_ = id;
    } else if (id != id_) {
      diverged_ = true;
      aborted_ = true;
      cv_.notify_all();
      throw BarrierAborted{};
    }
    if (++count_ == n_) {
      if (on_release) on_release();
      count_ = 0;
      ++phase_;
      cv_.notify_all();
      return;
    }
    const uint64_t phase = phase_;
    cv_.wait(lock, [&] { return phase_ != phase || aborted_; });
    if (phase_ == phase) throw BarrierAborted{};
  }
  void Abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }
  bool diverged() const {
    std::lock_guard<std::mutex> lock(mu_);
    return diverged_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  const int64_t n_;
  int64_t count_ = 0;
  int id_ = 0;
  uint64_t phase_ = 0;
  bool aborted_ = false;
  bool diverged_ = false;
};

// The state that the threads of one block share: its `shared` allocations (the n-th
// execution of an alloc statement by each thread names the same memory) and its barrier.
struct BlockCtx {
  std::mutex mu;
  std::map<std::pair<int, uint32_t>, std::pair<std::unique_ptr<uint64_t[]>, size_t>> shared;
  BlockBarrier* barrier = nullptr;

  // Throws Error(kValue) if two threads size the same allocation differently.
  char* Shared(int id, uint32_t gen, size_t bytes, const std::string& what);
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
    shared.clear();
  }
};

// What one Run call shares with all its frames.
struct RunCtx {
  const PrimFunc* func = nullptr;
  const std::vector<ArgView>* args = nullptr;
  const PackedCall* call = nullptr;
  const WorkspaceAlloc* workspace = nullptr;  // null: workspaces are host memory
  size_t stack_bytes = 0;  // what a thread running this function needs (limits.hpp)
  bool has_launch = false;
  int64_t launch[6] = {-1, -1, -1, -1, -1, -1};  // by ThreadTag - 1; -1: not given
};

struct Frame {
  std::vector<Val> regs;
  std::vector<int64_t> dims;  // per buffer slot: its extents, then its strides
  std::vector<char*> data;    // per buffer slot
  std::vector<void*> user;    // per buffer slot: a device workspace's Workspace::user
  std::vector<uint32_t> shared_gen;
  std::vector<int64_t> occ_ext;  // per thread-bound loop: its extent, set at region entry
  int64_t tidx[6] = {0, 0, 0, 0, 0, 0};
  BlockCtx* block = nullptr;
  const RunCtx* run = nullptr;
};

enum class Elem : uint8_t { kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kF16, kF32, kF64, kBool };

// A buffer slot: a param buffer or an allocation.
struct BufSlot {
  std::string name;
  DType dtype;
  Elem elem = Elem::kF32;
  int ndim = 0;
  int dims_off = 0;
  int param = -1;          // the index of the param, -1 for an allocation
  bool workspace = false;  // a global allocation of host code passed to call_packed
};

// A compiled function.
struct CompiledFunc {
  const PrimFunc* func = nullptr;
  std::string error;  // why the interpreter cannot run it ("" if it can)
  std::vector<Val> init_regs;
  std::vector<BufSlot> bufs;
  size_t ndims = 0;
  size_t nshared = 0;
  size_t nocc = 0;
  std::vector<int> param_reg;  // per param: its register, or its buffer slot
  Fn body;
  std::vector<ThreadTag> launch_params;  // from attrs, for a kernel
};

// Compiles `func` (which passed Verify). Sets `error` instead of throwing for IR that the
// interpreter cannot run.
std::shared_ptr<CompiledFunc> Compile(const PrimFunc& func);

// Runs the thread-bound region `root` over the given grid (blocks x threads, extents by
// ThreadTag - 1), serially or, when it has barriers, with one std::thread per thread.
void RunGrid(Frame& f, const Fn& root, const int64_t ext[6], bool has_barrier,
             const std::string& func_name);

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_INTERP_RUNTIME_HPP_
