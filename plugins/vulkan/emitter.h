// SPDX-License-Identifier: Apache-2.0
// The vulkan code generator's source language: each kernel SplitHostDevice made becomes one
// GLSL 450 compute shader (a dialect of the C-family emitter), with the layout the runtime
// binds it by (KernelLayout): buffers are storage buffers at set 0, binding i in parameter
// order; scalars are push constants; threadIdx.* extents are the workgroup's local size and
// blockIdx.* extents the dispatch's group counts.
#ifndef BACKPLANE_PLUGINS_VULKAN_EMITTER_H_
#define BACKPLANE_PLUGINS_VULKAN_EMITTER_H_

#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/ir.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane {
namespace vulkan {

// One scalar parameter in the push-constant block.
struct PushField {
  int32_t param = 0;    // index in the kernel's params
  uint32_t offset = 0;  // bytes from the block's start
  char kind = 'i';      // 'i' int32 (and bool), 'u' uint32, 'l' int64, 'L' uint64, 'f', 'd'
};

// The error buffer's record in uint32 words: code, site, three int64 details as word pairs;
// the buffer has one more word, always 0, that the shader adds to the values it checks so the
// shader compiler cannot fold a check away (docs/vulkan.md).
constexpr uint32_t kStatusWords = 8;
constexpr uint32_t kStatusBufferWords = kStatusWords + 1;

// Error codes the shader records in its error buffer (docs/vulkan.md, "Errors the shader
// reports"). Details are three int64 values whose meaning depends on the code.
enum StatusCode : uint32_t {
  kStatusOk = 0,
  // A loop left before its end (the driver's loop limiter): site = the index in
  // KernelLayout::sites; details = the loop variable where it stopped, the loop's end, the
  // invocation's global linear index.
  kStatusLoopCutShort = 1,
  // The C-family emitter's run-time checks: site = the fault site's index + 1 in
  // KernelLayout::faults (codegen::FaultRecord's numbering); details = the record's arg[]
  // (none for a division; index, extent, dimension for an access out of bounds).
  kStatusDivisionByZero = 2,
  kStatusOutOfBounds = 3,
};

// Whether the code generator emits float16 (GLSL's float16_t: shaderFloat16 and 16-bit storage).
// The attribute supports_fp16 is 1 only where this holds and the device has both features, so it
// never claims what the build or the launch refuses.
constexpr bool kCodegenComputesInFloat16 = true;

// Atomics a kernel uses beyond int32 add/min/max (core GLSL), each a device feature in both
// storage buffers and shared memory (KernelLayout::atomics; a launch on a device without one is
// refused, docs/vulkan.md).
constexpr uint32_t kAtomicInt64 = 1;     // shader{Buffer,Shared}Int64Atomics
constexpr uint32_t kAtomicFloatAdd = 2;  // VK_EXT_shader_atomic_float: float32 add
// float32 atomic min and max need no feature: compare-and-swap loops on the bits (emitter.cc).

// A place in a kernel that can record an error; its id is its index in KernelLayout::sites.
struct StatusSite {
  uint32_t code = kStatusOk;
  std::string what;  // one line: "loop 'j' (serial from 0, extent n)"
};

// The specialization constant ids of the workgroup's axes sized at launch (+ 0, 1, 2 for x, y,
// z), past those of the shared arrays sized at launch (0, 1, ...: their launch_index).
constexpr uint32_t kLocalSizeSpecId = 1000;

// How a kernel is bound and launched; saved with the module so loading needs no IR analysis.
struct KernelLayout {
  std::string name;
  std::vector<int32_t> bindings;  // binding i is buffer param bindings[i]
  std::vector<PushField> push;
  uint32_t push_size = 0;  // bytes of the push-constant block (0: none)
  // The workgroup's size per axis; 0 on an axis whose threadIdx extent is not a constant: the
  // shader takes it from specialization constant kLocalSizeSpecId + axis, set at launch.
  uint32_t local_size[3] = {1, 1, 1};
  std::vector<std::string> launch_params;  // "blockIdx.x", ... (the launch_params attr)
  bool uses_int64 = false;                 // needs shaderInt64
  bool uses_float64 = false;               // needs shaderFloat64
  bool uses_float16 = false;               // needs shaderFloat16, storageBuffer16BitAccess
  uint32_t atomics = 0;                    // kAtomic* bits: the atomics beyond int32 it uses
  // The checks the shader makes; when there are any (of either list), the error buffer is one
  // more storage buffer at binding bindings.size() (kStatusBufferWords uint32 words).
  std::vector<StatusSite> sites;           // loops (code 1)
  std::vector<codegen::FaultSite> faults;  // divisions, accesses (codes 2, 3)
  bool HasChecks() const { return !sites.empty() || !faults.empty(); }
};

// A kernel as GLSL and its layout.
struct GlslKernel {
  KernelLayout layout;
  std::string source;
};

// What the Target asks of the shader.
struct GlslOptions {
  int64_t max_threads = 256;         // max_num_threads
  int64_t max_push_constants = 128;  // max_push_constants_size
  // fast-math-contract: a*b+c may be fused (otherwise the SPIR-V forbids it; codegen.cc).
  bool fp_contract = false;
  // bounds-check: every load and store checks each index against its extent; the first out
  // of bounds is the interpreter's error (docs/vulkan.md).
  bool bounds_check = false;
};

// Emits `func` (a kernel: attrs kernel = "1" and launch_params) as a GLSL compute shader.
// Throws ir::Error(kValue) naming the function for what the target cannot express: a
// threadIdx extent that is not a constant, more than `max_threads` invocations a workgroup,
// 8-bit and 16-bit integer types, float16 atomics, vectors, a push-constant block over
// `max_push_constants` bytes.
GlslKernel EmitGlslKernel(const ir::PrimFunc& func, const GlslOptions& options);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_EMITTER_H_
