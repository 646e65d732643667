// SPDX-License-Identifier: Apache-2.0
// The C dialect of the C-family emitter (backplane/codegen/c_family.hpp): the code generator
// of the `c` kind.
//
//   backplane::codegen::CEmitter emitter(options);
//   std::string source = emitter.Emit(module);   // module passed ir::Verify
#ifndef BACKPLANE_PLUGINS_CPU_C_EMITTER_H_
#define BACKPLANE_PLUGINS_CPU_C_EMITTER_H_

#include <backplane/codegen/c_family.hpp>
#include <cstdint>
#include <string>

namespace backplane {
namespace codegen {

// Options of the C dialect, from the `c` Target.
struct CEmitOptions {
  int num_threads = 0;  // > 0: parallel loops use this many threads (OpenMP num_threads)
};

// The C dialect: C99 plus GNU extensions (vector types, statement expressions), as gcc and
// clang compile it. Every PrimFunc `f` becomes one exported entry point
//
//   int32_t bp_func_f(const bp_arg_t* args, bp_ctx_t* ctx);
//
// where args[i] is the i-th parameter (scalars in .i or .f, buffers as a pointer to their
// first element in .p) and ctx carries the callback for call_packed and the fault record
// (FaultRecord, zeroed by the caller). It returns 0, BP_FAULT (5) when a run-time check
// recorded a fault (fault_sites() says which), or the nonzero status of a failed call_packed.
// A function without call_packed whose params ir::ArgCheck checks with compares (extents and
// strides that are numbers or scalar params, rank <= 8) also gets a packed entry
//
//   int32_t bp_packed_f(const bp_value_t* args, int32_t num_args, bp_ctx_t* ctx);
//
// that takes the call's packed arguments as they are, checks them in generated code (count,
// types, scalar ranges, device, dtype, rank, shape, strides, data, and that a written buffer
// overlaps no other) and calls bp_func_f. It returns BP_REFUSED (-1) without running anything
// when any check fails or the call is one it leaves to the runtime (a tensor object): the
// runtime's own check then gives the message, so both paths accept exactly the same calls.
// Parallel loops are OpenMP `parallel for`, vectorized loops `omp simd` (compile with -fopenmp),
// buffers are restrict pointers.
class CEmitter : public CFamilyEmitter {
 public:
  explicit CEmitter(CEmitOptions options = {}) : options_(options) {}

  // The prefix of the entry point symbols.
  static constexpr const char* kEntryPrefix = "bp_func_";
  // The prefix of the static function that holds a PrimFunc's body (both entries call it).
  static constexpr const char* kKernelPrefix = "bp_kernel_";
  // The prefix of the packed entries, and what one returns when it leaves a call to the
  // runtime's check.
  static constexpr const char* kPackedPrefix = "bp_packed_";
  static constexpr int32_t kRefused = -1;
  // The least estimated work (statements executed) for which a parallel loop whose work is
  // known when it is compiled starts an OpenMP region: below it the loop runs on the caller's
  // thread, which is faster than waking the pool (docs/performance.md, "Small parallel
  // kernels").
  static constexpr int64_t kParallelMinWork = 65536;
  // call_packed argument codes in bp_ctx_t::call_packed.
  static constexpr int kArgInt = 0;
  static constexpr int kArgFloat = 1;
  static constexpr int kArgParamBuffer = 2;  // .i is the index of a buffer parameter

 protected:
  std::string Prelude() override;
  void EmitFunction(const ir::PrimFunc& func) override;
  void EmitLoopPragma(const ir::ForNode& loop, const std::string& trips) override;
  std::string ParallelRegionCondition(const ir::ForNode& loop, const std::string& trips) override;
  std::string CallPacked(const ir::CallPackedNode& call) override;
  // float32 exp is the IR's own bp_expf (backplane/ir/expf.hpp), the interpreter's bit for bit
  // and vectorizable; the other functions are the C library's.
  std::string IntrinsicName(const std::string& name, ir::DType t) override;
  void EmitHeapAllocation(const ir::AllocateNode& alloc, const std::string& type,
                          const std::string& name, const std::string& size) override;
  std::string AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                              const std::string& value, bool shared) override;
  const char* DialectName() const override { return "c"; }
  bool RestrictStackArrays() const override { return true; }
  bool HasFaultRecord() const override { return true; }
  // The c target compiles with -fwrapv: signed arithmetic wraps as the IR's does.
  bool SignedArithmeticWraps() const override { return true; }
  // 512 KiB: a kernel runs on the caller's thread or an OpenMP thread, whose stacks are a few
  // MiB (8 with glibc's defaults); an array past the budget goes to the heap, so no IR makes
  // the stack overflow (a `local` array of 400 MB crashed the host process).
  int64_t StackBudget() const override { return 512 * 1024; }

 private:
  // The types the packed entries read (bp_value_t, DLTensor), spelled out in C.
  static std::string PackedEntryTypes();
  // Emits `func`'s packed entry; false (and nothing emitted) when it cannot have one.
  bool EmitPackedEntry(const ir::PrimFunc& func);

  CEmitOptions options_;
  bool calls_packed_ = false;  // the function being emitted has a call_packed
};

}  // namespace codegen
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_C_EMITTER_H_
