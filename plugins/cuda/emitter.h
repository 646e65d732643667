// SPDX-License-Identifier: Apache-2.0
// The CUDA C dialect of the C-family emitter: each kernel PrimFunc (SplitHostDevice's output,
// with a `launch_params` attr) becomes one extern "C" __global__ function taking its params
// in order (buffers as __restrict__ pointers, const when the kernel only reads them, scalars
// by value; then, for each grid axis it binds, x before y before z, the int64 index of the
// launch's first block on that axis, `bp_block_offset_x/y/z`; a kernel with run-time checks
// takes the fault record `bp_fault_t* bp_fault` last). The block offsets let the launch run a
// grid larger than one cuLaunchKernel takes (65,535 blocks on y and z) as several launches:
// the kernel's block index is its offset plus blockIdx, in int64. Thread axes are
// blockIdx/threadIdx, barriers __syncthreads(), and shared allocations are carved from the kernel's
// dynamic shared memory, whose size the launch passes (so a kernel may use more than the 48 KiB a
// static array may).
#ifndef BACKPLANE_PLUGINS_CUDA_EMITTER_H_
#define BACKPLANE_PLUGINS_CUDA_EMITTER_H_

#include <backplane/codegen/c_family.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace backplane {
namespace cuda {

// What a launch needs to know about one kernel: the function table saved with a module.
struct KernelInfo {
  std::string name;                        // the PrimFunc's name (the module's function)
  std::string symbol;                      // the __global__ function's name in the PTX
  std::vector<std::string> arg_types;      // per param: "handle" or a scalar dtype ("int32")
  std::vector<bool> written;               // per param: a buffer the kernel stores to
  std::vector<ir::ThreadTag> launch_axes;  // the PrimFunc's, in the order the extents arrive
  int64_t dynamic_shared_bytes = 0;        // bytes of shared memory the launch passes
  // The kernel has run-time checks: it takes the fault record (bp_fault_t*) after its params.
  bool faults = false;
};

// The grid axes (0, 1, 2 for x, y, z) whose block offset kernel `k` takes after its params,
// in that order: the blockIdx axes of its launch_axes, sorted.
std::vector<int> BlockOffsetAxes(const KernelInfo& k);

// The kernel attr that asks ptxas to fit this many blocks on each multiprocessor at once
// (__launch_bounds__'s second argument); the function's attrs go with its kernels
// (SplitHostDevice).
inline constexpr char kMinBlocksAttr[] = "cuda.min_blocks_per_sm";

class CUDAEmitter : public codegen::CFamilyEmitter {
 public:
  // The function table of the last Emit, one entry per PrimFunc in module order.
  const std::vector<KernelInfo>& kernels() const { return kernels_; }

 protected:
  std::string Prelude() override;
  void EmitFunction(const ir::PrimFunc& func) override;
  std::string TypeName(ir::DType t) override;
  std::string ThreadIndex(ir::ThreadTag tag) override;
  std::string BarrierStatement() override { return "__syncthreads();"; }
  std::string StorageQualifier(ir::StorageScope scope) override;
  // A float16 element of a local array is a bp_half_t, a float: 4 bytes.
  int64_t ArrayElementBytes(ir::DType t) override {
    return IsHalf(t) ? 4 : CFamilyEmitter::ArrayElementBytes(t);
  }
  void EmitLoopPragma(const ir::ForNode& loop, const std::string& trips) override;
  void EmitSharedAllocation(const ir::AllocateNode& alloc, const std::string& type,
                            const std::string& name, int64_t count) override;
  // Vector types are structs of lanes with the elementwise operators (vector_structs_).
  std::string VectorLiteral(ir::DType t, const std::vector<std::string>& lanes) override;
  std::string ContiguousVectorLoad(const ir::Buffer& buffer, ir::DType t,
                                   const std::string& flat) override;
  std::string ContiguousVectorStore(const ir::Buffer& buffer, ir::DType t, const std::string& flat,
                                    const std::string& value) override;
  // "known, at": the base-aligned and offset-aligned flags of the access being emitted.
  std::string AlignmentFlags(const ir::Buffer& buffer, ir::DType t) const;
  const char* DialectName() const override { return "cuda"; }
  std::string AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                              const std::string& value, bool shared) override;
  // CUDA's fminf/fmin (min.f32/min.f64: a NaN gives the other operand), and equal operands'
  // bits ORed (min) or ANDed (max), which orders -0 below +0.
  std::string FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                          ir::DType t) override;
  // float16 (docs/cuda.md, "float16"): a value is a float rounded to half after every
  // operation (bp_half_t, CastText: bp_round_half), as the interpreter computes it (a literal
  // is the base's: the float value of its half, rounded once); float16
  // buffers and shared arrays hold halves (uint16_t), converted where an element is read or
  // written (half_buffers_), and a float16 scalar param arrives as its 16 bits.
  std::string CastText(const std::string& type, const std::string& operand) override;
  std::string ElementRead(const ir::Buffer& buffer, const std::string& element) override;
  std::string ElementWrite(const ir::Buffer& buffer, const std::string& element,
                           const std::string& value) override;
  bool HasFaultRecord() const override { return true; }
  std::string FaultClaim(const std::string& record, const std::string& site) override {
    return "atomicCAS(&" + record + "->site, 0, " + site + ") == 0";
  }
  std::string HelperQualifier() override { return "static __device__ __forceinline__"; }
  // NVRTC has no GNU statement expressions.
  std::string StatementExpression(const std::string& statements,
                                  const std::string& value) override {
    return "([&]() { " + statements + " return " + value + "; }())";
  }

 private:
  // The blocks an SM of attr kMinBlocksAttr's `value` for a block of `threads` (-1: not fixed),
  // or Fail with what is wrong.
  int MinBlocksPerSM(const std::string& value, int64_t threads) const;
  std::vector<KernelInfo> kernels_;
  // The vector types used (struct bp_<dtype>, e.g. bp_float32x4), and those with a contiguous
  // access (bp_vload_/bp_vstore_ helpers), for the prelude.
  std::map<std::string, ir::DType> vector_structs_, vector_access_;
  std::string VectorDefinitions();
  static std::string HalfHelpers();
  static bool IsHalf(ir::DType t);  // float16, any lanes
  // Where each shared array of the kernel being emitted starts in bp_shared (launch.hpp's
  // layout): a number, or for one sized at launch the name of the offset computed at the top.
  std::map<const ir::AllocateNode*, std::string> shared_at_;
  // The buffers whose start is known to be aligned to 16 bytes: the shared arrays (bp_shared is
  // __align__(16) and each array starts at a multiple of launch::kSharedAlign), for which a
  // vector access tests only the element's offset.
  std::set<const ir::BufferNode*> aligned_bases_;
  bool uses_f64_atomic_add_ = false;  // bp_atomic_add_f64 in the prelude
  bool uses_half_ = false;            // the float16 helpers in the prelude
  // The float16 buffers and shared arrays: halves in memory, read and written through
  // bp_h2f / bp_f2h.
  std::set<const ir::BufferNode*> half_buffers_;
};

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_EMITTER_H_
