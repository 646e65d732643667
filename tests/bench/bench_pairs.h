// SPDX-License-Identifier: Apache-2.0
// The benchmark pairs: each Backplane path is measured next to a baseline in the
// same run and reported as a ratio, with its goal. bench_main.cc prints the summary.
#ifndef BACKPLANE_TESTS_BENCH_BENCH_PAIRS_H_
#define BACKPLANE_TESTS_BENCH_BENCH_PAIRS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace backplane {
namespace bench {

// How a pair is compared.
enum class Measure {
  kTimePerCall,  // nanoseconds per iteration; the goal is an upper bound in ns
  kBandwidth,    // bytes per second; the goal is a lower bound on Backplane / baseline
  kElapsedTime,  // milliseconds per iteration; the goal is an upper bound in ms
  kFlops,        // floating-point ops per second (`bytes` holds the flops of one iteration,
                 // the same for both); the goal is a lower bound on Backplane / baseline
  kTimeRatio,    // time per iteration; the goal is an upper bound on Backplane / baseline
};

struct Pair {
  const char* label;      // what is measured, for the summary
  const char* benchmark;  // the Backplane benchmark's name
  const char* baseline;   // the baseline benchmark's name
  const char* baseline_label;
  Measure measure;
  double goal;   // ns, fraction of baseline, or ms (see Measure)
  size_t bytes;  // bytes moved per iteration (kBandwidth), flops per iteration (kFlops)
  size_t baseline_bytes = 0;  // kBandwidth: the baseline's bytes per iteration if they differ
};

// Bytes per host→device copy.
constexpr size_t kCopyBytes = size_t{64} << 20;
// Bytes of each vector of the vector_add benchmark.
constexpr size_t kVectorBytes = size_t{64} << 20;
// The side of the square matmul benchmark.
constexpr size_t kMatmulSide = 1024;
// The sides of the small and medium naive matmuls, parallel against serial.
constexpr int64_t kMatmulSmallSide = 64;
constexpr int64_t kMatmulMediumSide = 256;
// The side of the square matmul benchmark on OpenCL (PoCL on a few cores is slow).
constexpr size_t kOpenCLMatmulSide = 256;
// Elements of each vector of the Vulkan vector_add benchmark: 65535 workgroups of 256, the
// most that lavapipe's maxComputeWorkGroupCount (65535) allows (64 MiB less 1 KiB a vector).
constexpr size_t kVulkanVectorElements = size_t{65535} * 256;
// Workspace request size.
constexpr size_t kWorkspaceBytes = 4096;

// Benchmarks that need something this machine may lack (a peer's library): the reason each
// was not registered, which the summary shows instead of "filtered out".
inline std::map<std::string, std::string>& Unavailable() {
  static std::map<std::string, std::string> reasons;
  return reasons;
}
// Calls `register_it` when `missing` is empty; otherwise records it as why `name` did not run.
template <typename Register>
bool RegisterIfAvailable(const char* name, const std::string& missing, Register register_it) {
  if (!missing.empty()) {
    Unavailable()[name] = missing;
    return false;
  }
  register_it();
  return true;
}

// The pairs, in the order of the summary.
inline constexpr Pair kPairs[] = {
    {"registry function, 3 ints, C ABI (bp_function_call)", "BM_FunctionCall_CAbi",
     "BM_FunctionCall_Direct", "direct C++ call", Measure::kTimePerCall, 20.0, 0},
    {"registry function, 3 ints, C++ backplane::Function", "BM_FunctionCall_Cpp",
     "BM_FunctionCall_Direct", "direct C++ call", Measure::kTimePerCall, 20.0, 0},
    {"cpu workspace alloc+free, 4 KiB", "BM_Workspace_AllocFree", "BM_Malloc_Free", "malloc+free",
     Measure::kTimePerCall, 30.0, 0},
    {"copy host -> cpu:0, 64 MiB", "BM_Copy_HostToCpu_64MiB", "BM_Memcpy_64MiB", "memcpy",
     Measure::kBandwidth, 0.90, kCopyBytes},
    {"discover + load every plugin (fresh process)", "BM_Plugins_DiscoverLoadAll",
     "BM_Plugins_DlopenOnly", "dlopen of the same files", Measure::kElapsedTime, 20.0, 0},
    // Generated code. Bandwidth counts every byte read and written: vector_add reads
    // two 64 MiB vectors and writes one; memcpy reads 64 MiB and writes 64 MiB.
    {"vector_add c, 1 core, 3 x 64 MiB", "BM_VectorAdd_C_1Core", "BM_Memcpy_64MiB", "memcpy",
     Measure::kBandwidth, 0.80, 3 * kVectorBytes, 2 * kCopyBytes},
    {"matmul_tiled c 1024^2 f32, 1 core", "BM_MatmulTiled_C_1Core", "BM_Sgemm_OpenBLAS_1Thread",
     "OpenBLAS sgemm, 1 thread", Measure::kFlops, 0.50, 2 * kMatmulSide* kMatmulSide* kMatmulSide},
    {"matmul_tiled c 1024^2 f32, all cores", "BM_MatmulTiled_C_AllCores",
     "BM_Sgemm_OpenBLAS_AllThreads", "OpenBLAS sgemm, all threads", Measure::kFlops, 0.50,
     2 * kMatmulSide* kMatmulSide* kMatmulSide},
    // A module function call of a compiled CPU kernel (16 floats), call + sync. The
    // goal, 20 ns, is twice Apache TVM 0.27's call of the same module function.
    {"cpu kernel call, vector_add 16 floats", "BM_CpuKernelCall_Module", "BM_CpuKernelCall_Direct",
     "direct call of the compiled function", Measure::kTimePerCall, 20.0, 0},
    // The same call and the packed call against Apache tvm-ffi in this process (when
    // its library is found; tvm_ffi.h): the kernel through a tvm-ffi function whose body runs
    // the same compiled check and kernel (bp_packed_vector_add). The goal: at most tvm-ffi's.
    {"cpu kernel call (no sync) vs tvm-ffi, vector_add 16 floats", "BM_CpuKernelCall_ModuleNoSync",
     "BM_CpuKernelCall_TvmFfi", "TVMFFIFunctionCall of the same compiled check + kernel",
     Measure::kTimeRatio, 1.0, 0},
    {"packed call, 3 ints, C ABI vs tvm-ffi", "BM_FunctionCall_CAbi", "BM_FunctionCall_TvmFfi",
     "TVMFFIFunctionCall", Measure::kTimeRatio, 1.0, 0},
    {"packed call, 3 ints, C++ vs tvm-ffi's C ABI", "BM_FunctionCall_Cpp", "BM_FunctionCall_TvmFfi",
     "TVMFFIFunctionCall", Measure::kTimeRatio, 1.0, 0},
    // The README's parallel kernel on all cores against 1 core: a small trip
    // count must not pay the OpenMP pool's wake-up (goal: at most twice the serial call).
    {"README kernel 16 floats, all cores vs 1 core", "BM_SmallParallel_C_AllCores/16/real_time",
     "BM_SmallParallel_C_1Core/16/real_time", "the same kernel, 1 core", Measure::kTimeRatio, 2.0,
     0},
    {"README kernel 4096 floats, all cores vs 1 core", "BM_SmallParallel_C_AllCores/4096/real_time",
     "BM_SmallParallel_C_1Core/4096/real_time", "the same kernel, 1 core", Measure::kTimeRatio, 2.0,
     0},
    {"README kernel 65536 floats, all cores vs 1 core",
     "BM_SmallParallel_C_AllCores/65536/real_time", "BM_SmallParallel_C_1Core/65536/real_time",
     "the same kernel, 1 core", Measure::kTimeRatio, 2.0, 0},
    // The same kernel on every core (OpenMP) against one core, under the
    // OpenMP settings in effect. The goal: a parallel kernel is never slower than serial.
    {"matmul c 64^2, all cores vs 1 core", "BM_MatmulSmall_C_AllCores", "BM_MatmulSmall_C_1Core",
     "the same kernel, 1 core", Measure::kTimeRatio, 1.0, 0},
    {"matmul c 256^2, all cores vs 1 core", "BM_MatmulMedium_C_AllCores", "BM_MatmulMedium_C_1Core",
     "the same kernel, 1 core", Measure::kTimeRatio, 1.0, 0},
    {"target.build.c vector_add, cached", "BM_BuildC_Cached", "BM_BuildC_Cold",
     "cold build (the compiler runs)", Measure::kElapsedTime, 5.0, 0},
    // The OpenCL plugin against raw OpenCL on opencl:0 (tests/bench/opencl_bench.cc).
    {"opencl empty kernel launch + finish", "BM_OpenCL_EmptyKernel", "BM_OpenCL_EmptyKernel_Raw",
     "clEnqueueNDRangeKernel + clFinish", Measure::kTimeRatio, 1.10, 0},
    {"copy host -> opencl:0, 64 MiB", "BM_OpenCL_CopyH2D_64MiB", "BM_OpenCL_CopyH2D_64MiB_Raw",
     "clEnqueueWriteBuffer", Measure::kBandwidth, 0.95, kCopyBytes},
    {"copy opencl:0 -> host, 64 MiB", "BM_OpenCL_CopyD2H_64MiB", "BM_OpenCL_CopyD2H_64MiB_Raw",
     "clEnqueueReadBuffer", Measure::kBandwidth, 0.95, kCopyBytes},
    {"vector_add_gpu opencl, 3 x 64 MiB", "BM_OpenCL_VectorAdd", "BM_OpenCL_VectorAdd_Raw",
     "hand-written OpenCL C", Measure::kBandwidth, 0.90, 3 * kVectorBytes},
    {"matmul_tiled_gpu opencl 256^2 f32", "BM_OpenCL_MatmulTiled", "BM_OpenCL_MatmulTiled_Raw",
     "hand-written OpenCL C", Measure::kFlops, 0.90,
     2 * kOpenCLMatmulSide* kOpenCLMatmulSide* kOpenCLMatmulSide},
    {"opencl workspace alloc+free, 4 KiB", "BM_OpenCL_Workspace_AllocFree",
     "BM_OpenCL_CreateReleaseBuffer_Raw", "clCreateBuffer + clReleaseMemObject",
     Measure::kTimeRatio, 1.0, 0},
    // The Vulkan plugin against raw Vulkan on vulkan:0 (tests/bench/vulkan_bench.cc).
    {"vulkan empty dispatch + wait", "BM_Vulkan_EmptyKernel", "BM_Vulkan_EmptyKernel_Raw",
     "vkCmdDispatch + vkQueueSubmit + vkWaitForFences", Measure::kTimeRatio, 1.10, 0},
    {"copy host -> vulkan:0, 64 MiB", "BM_Vulkan_CopyH2D_64MiB", "BM_Vulkan_CopyH2D_64MiB_Raw",
     "memcpy to staging + vkCmdCopyBuffer", Measure::kBandwidth, 0.95, kCopyBytes},
    {"copy vulkan:0 -> host, 64 MiB", "BM_Vulkan_CopyD2H_64MiB", "BM_Vulkan_CopyD2H_64MiB_Raw",
     "vkCmdCopyBuffer + memcpy from staging", Measure::kBandwidth, 0.95, kCopyBytes},
    {"vector_add_gpu vulkan, 3 x 64 MiB", "BM_Vulkan_VectorAdd", "BM_Vulkan_VectorAdd_Raw",
     "hand-written GLSL", Measure::kBandwidth, 0.90, 3 * kVulkanVectorElements * sizeof(float)},
    // A kernel's first call (module, pipeline through the cache, dispatch)
    // against the same Vulkan objects made by hand from the same SPIR-V (vulkan_bench.cc).
    {"vulkan first call, vector_add_gpu", "BM_Vulkan_FirstCall/vector_add_gpu",
     "BM_Vulkan_FirstCall_Raw/vector_add_gpu", "the same objects made by hand", Measure::kTimeRatio,
     1.10, 0},
    {"vulkan first call, softmax_gpu", "BM_Vulkan_FirstCall/softmax_gpu",
     "BM_Vulkan_FirstCall_Raw/softmax_gpu", "the same objects made by hand", Measure::kTimeRatio,
     1.10, 0},
};

// Remote devices (bench_remote, remote_bench.cc) against raw gRPC on the same loopback
// link: a `backplane serve` child with cpu:0 attached as a remote device, and a minimal gRPC
// service of the benchmark's own (remote_bench.proto) in another child.
constexpr size_t kRemoteCopyBytes = size_t{256} << 20;
inline constexpr Pair kRemotePairs[] = {
    {"copy host -> remote cpu:0, 256 MiB", "BM_Remote_CopyH2D_256MiB", "BM_Raw_Push_256MiB",
     "gRPC client stream, 1 MiB chunks", Measure::kBandwidth, 0.90, kRemoteCopyBytes},
    {"copy remote cpu:0 -> host, 256 MiB", "BM_Remote_CopyD2H_256MiB", "BM_Raw_Pull_256MiB",
     "gRPC server stream, 1 MiB chunks", Measure::kBandwidth, 0.90, kRemoteCopyBytes},
    // The remote call is posted (no reply); the sync is one round trip. The baseline does one
    // unary round trip and the same kernel's call + sync on the local cpu:0.
    {"remote empty kernel call + sync", "BM_Remote_EmptyKernel", "BM_Raw_PingPlusLocalKernel",
     "gRPC unary round trip + local call + sync", Measure::kTimeRatio, 1.20, 0},
};

}  // namespace bench
}  // namespace backplane

#endif  // BACKPLANE_TESTS_BENCH_BENCH_PAIRS_H_
