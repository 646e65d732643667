// SPDX-License-Identifier: Apache-2.0
// The reference interpreter of the IR: the semantics of host code and of a simulated
// accelerator. It computes what the C a code generator would emit computes (docs/ir.md,
// "Interpreter"): integer ops wrap at their width, float32 is computed in float, float16 is
// stored as IEEE half, loops bound to thread axes run as a GPU grid whose threads meet at
// barriers and share `shared` allocations.
//
//   Interpreter interp(Parse(text));
//   std::vector<float> a(n), b(n), c(n);
//   int64_t shape[] = {n};
//   interp.Run("vector_add", {IntArg(n), BufferArg(a.data(), Float32(), 1, shape), ...});
#ifndef BACKPLANE_IR_INTERP_HPP_
#define BACKPLANE_IR_INTERP_HPP_

#include <backplane/ir/ir.hpp>
#include <backplane/ir/signature.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace backplane {
namespace ir {

// call_packed(name, args...) from interpreted code. A buffer argument is passed as the ArgView
// the function got for that param buffer (so `user` survives); an allocated buffer as an
// ArgView of its memory with user == nullptr, valid during the call. Returns the callee's int
// result (0 if none); it may throw, and the exception leaves Run as it is.
using PackedCall =
    std::function<int64_t(const std::string& name, const std::vector<ArgView>& args)>;

// A device workspace (docs/ir.md, "Device workspaces"): the memory of a `global` allocation
// that host code (outside every thread-bound region) passes to call_packed, allocated by the
// caller of Run instead of in host memory. The interpreter never reads or writes `data`; it
// passes the buffer to call_packed as an ArgView of `data` with `user`, and calls `release`
// (if set) when the allocation's statement ends, also by an exception.
struct Workspace {
  void* data = nullptr;
  void* user = nullptr;
  std::function<void()> release;
};
// Allocates the workspace `name` of `dtype` with the given extents (compact row-major) and
// `bytes` bytes (checked: no extent is negative and the size does not overflow). Throws to
// refuse; the exception leaves Run as it is.
using WorkspaceAlloc = std::function<Workspace(const std::string& name, DType dtype, int ndim,
                                               const int64_t* shape, uint64_t bytes)>;

// Runs the functions of one module. Compiles every function once, at construction, into
// closures over a frame of registers; Run only executes. An Interpreter may be copied (the
// copies share the compiled code) and Run may be called from several threads at once.
class Interpreter {
 public:
  // Verifies the module (Verify, default options): throws Error(kVerify) with every problem.
  explicit Interpreter(IRModule module);
  const IRModule& module() const;

  // Runs `func` on `args` (one per param, as CheckArgs wants them). Buffers are read and
  // written in place through ArgView::data. A kernel made by SplitHostDevice (attr
  // "kernel" = "1" and launch_axes) also accepts, after its params, one kInt argument
  // per launch param: the launch extents that the host's call appends; they must equal the
  // extents the kernel's loops compute. Throws Error(kValue): no function `func` (naming it);
  // CheckArgs's message; an index out of the bounds of a buffer (naming the function, the
  // buffer and the index); an integer division by zero; call_packed without `call`; a
  // function the interpreter cannot run (named at construction, thrown here); threads of a
  // block that reach different barriers; a block of more than 1024 threads that uses
  // barriers. Exceptions from `call` pass through.
  void Run(const std::string& func, const std::vector<ArgView>& args,
           const PackedCall& call = nullptr) const;

  // Whether Run checks its arguments: kAlreadyChecked is for a caller that has just run
  // CheckArgs on the same views itself (to word the message its own way), so a launch does
  // not check every argument twice.
  enum class Args { kCheck, kAlreadyChecked };
  void Run(const std::string& func, const std::vector<ArgView>& args, const PackedCall& call,
           Args args_state) const;
  // With `workspace` given, each `global` allocation of host code that host code passes to
  // call_packed gets its memory from it (a split module's host part: the kernels' device
  // workspaces); without it, such an allocation is zero-filled host memory as any other.
  void Run(const std::string& func, const std::vector<ArgView>& args, const PackedCall& call,
           Args args_state, const WorkspaceAlloc& workspace) const;

 private:
  void RunDeep(const std::string& func, const std::vector<ArgView>& args, const PackedCall& call,
               Args args_state, const WorkspaceAlloc* workspace) const;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_INTERP_HPP_
