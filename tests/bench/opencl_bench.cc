// SPDX-License-Identifier: Apache-2.0
// The OpenCL plugin against raw OpenCL on the same device (opencl:0, PoCL in CI), in the same
// run: an empty kernel launch + finish, 64 MiB host <-> device copies, vector_add_gpu,
// matmul_tiled_gpu and a 4 KiB workspace alloc + free. The raw side has a context of its own on the
// same cl_device_id and runs hand-written OpenCL C with the same algorithm and work-group
// geometry as the generated kernels. Pairs and goals are in bench_pairs.h; a machine without an
// OpenCL device skips them.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <backplane/c_api.h>
#include <benchmark/benchmark.h>

#include <backplane/backplane.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/runner.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_pairs.h"

namespace {

using backplane::Device;
using backplane::Function;
using backplane::Module;
using backplane::Tensor;
using backplane::bench::kCopyBytes;
using backplane::bench::kOpenCLMatmulSide;
using backplane::bench::kVectorBytes;
using backplane::bench::kWorkspaceBytes;

const DLDataType kF32{kDLFloat, 32, 1};

// The hand-written kernels of the raw side. They round a * b + c twice, as the IR does and
// the generated code (FP_CONTRACT OFF) keeps: a contracted fma would do half the work.
constexpr const char* kRawSource = R"CL(
#pragma OPENCL FP_CONTRACT OFF
__kernel void empty(int n, __global float* x) { if (n < 0) x[0] = 0.0f; }
__kernel void vector_add(int n, __global const float* restrict a,
                         __global const float* restrict b, __global float* restrict c) {
  int i = get_global_id(0);
  if (i < n) c[i] = a[i] + b[i];
}
__kernel void matmul_tiled(int m, int n, int k, int threads, __global const float* restrict a,
                           __global const float* restrict b, __global float* restrict c) {
  const int tx = get_local_id(0);
  const int i0 = get_group_id(0) * 4, j0 = get_group_id(1) * threads * 8 + tx;
  float acc[4][8];
  float bv[8];
  for (int r = 0; r < 4; ++r)
    for (int q = 0; q < 8; ++q) acc[r][q] = 0.0f;
  if (i0 + 4 <= m && j0 + threads * 7 < n) {
    for (int p = 0; p < k; ++p) {
      for (int q = 0; q < 8; ++q) bv[q] = b[p * n + j0 + q * threads];
      for (int r = 0; r < 4; ++r) {
        const float ar = a[(i0 + r) * k + p];
        for (int q = 0; q < 8; ++q) acc[r][q] = acc[r][q] + ar * bv[q];
      }
    }
    for (int r = 0; r < 4; ++r)
      for (int q = 0; q < 8; ++q) c[(i0 + r) * n + j0 + q * threads] = acc[r][q];
  } else {
    for (int p = 0; p < k; ++p) {
      for (int q = 0; q < 8; ++q)
        if (j0 + q * threads < n) bv[q] = b[p * n + j0 + q * threads];
      for (int r = 0; r < 4; ++r) {
        if (i0 + r >= m) continue;
        const float ar = a[(i0 + r) * k + p];
        for (int q = 0; q < 8; ++q) acc[r][q] = acc[r][q] + ar * bv[q];
      }
    }
    for (int r = 0; r < 4; ++r)
      for (int q = 0; q < 8; ++q)
        if (i0 + r < m && j0 + q * threads < n) c[(i0 + r) * n + j0 + q * threads] = acc[r][q];
  }
}
)CL";

// The empty kernel on Backplane's side: a GPU kernel of one thread that stores nothing.
constexpr const char* kEmptyIR = R"IR(# backplane-ir 1
func empty_gpu(n: int32, x: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, 1) {
    for tx in thread(threadIdx.x, 0, 1) {
      if (n < 0) {
        x[0] = 0.0
      }
    }
  }
}
)IR";

void Ok(cl_int err, const char* what) {
  if (err != CL_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: " + std::to_string(err));
}

// Raw OpenCL on the first device of the first platform (opencl:0).
struct Raw {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;

  Raw() {
    cl_platform_id platform = nullptr;
    Ok(clGetPlatformIDs(1, &platform, nullptr), "clGetPlatformIDs");
    Ok(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr), "clGetDeviceIDs");
    cl_int err = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    Ok(err, "clCreateContext");
    queue = clCreateCommandQueueWithProperties(context, device, nullptr, &err);
    Ok(err, "clCreateCommandQueueWithProperties");
    const char* source = kRawSource;
    program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
    Ok(err, "clCreateProgramWithSource");
    Ok(clBuildProgram(program, 1, &device, "", nullptr, nullptr), "clBuildProgram");
  }
  ~Raw() {
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
  }
  cl_mem Buffer(size_t bytes, const void* init = nullptr) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    Ok(err, "clCreateBuffer");
    if (init != nullptr) {
      Ok(clEnqueueWriteBuffer(queue, m, CL_TRUE, 0, bytes, init, 0, nullptr, nullptr), "write");
    }
    return m;
  }
  cl_kernel Kernel(const char* name) {
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(program, name, &err);
    Ok(err, "clCreateKernel");
    return k;
  }
};

Device Cl() { return Device("opencl", 0); }

std::vector<float> RandomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor DeviceTensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::Empty(shape, kF32, Cl());
  const std::vector<float> host = RandomFloats(t.NumElements(), seed);
  t.CopyFromBytes(host.data(), host.size() * sizeof(float));
  return t;
}

Module BuildCatalog(const std::string& func) {
  const backplane::kernels::Case* c = backplane::kernels::Find(func);
  if (c == nullptr) throw std::runtime_error("no kernel " + func);
  return backplane::Build(backplane::runner::KernelSource(*c), backplane::Target::FromDevice(Cl()));
}

void Sync() { backplane::Check(bp_device_stream_sync(Cl().dl, nullptr)); }

// matmul_tiled_gpu's threads a work-group: the device's SIMD width, as the tools pass it.
int64_t Threads() {
  const backplane::Any warp = backplane::DeviceAPI::Get(Cl()).GetAttr(BP_ATTR_WARP_SIZE);
  return !warp.is_none() && warp.AsInt() > 0 ? warp.AsInt() : backplane::kernels::kDefaultBlock;
}

// Runs `body` unless there is no OpenCL device; errors skip the benchmark with the message.
template <typename Body>
void Guarded(benchmark::State& state, Body body) {
  try {
    if (!backplane::DeviceAPI::Get(Cl()).Exists()) {
      state.SkipWithError("no OpenCL device (install pocl-opencl-icd)");
      return;
    }
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_OpenCL_EmptyKernel(benchmark::State& state) {
  Guarded(state, [&] {
    Module m = backplane::Build(kEmptyIR, backplane::Target::FromDevice(Cl()));
    Function f = m.GetFunction("empty_gpu");
    Tensor x = DeviceTensor({1}, 1);
    f(1, x.dl());  // builds the program
    Sync();
    for (auto _ : state) {
      f(1, x.dl());
      Sync();
    }
  });
}
BENCHMARK(BM_OpenCL_EmptyKernel)->UseRealTime();

void BM_OpenCL_EmptyKernel_Raw(benchmark::State& state) {
  Guarded(state, [&] {
    Raw raw;
    cl_mem x = raw.Buffer(sizeof(float));
    cl_kernel k = raw.Kernel("empty");
    const cl_int n = 1;
    Ok(clSetKernelArg(k, 0, sizeof(n), &n), "arg");
    Ok(clSetKernelArg(k, 1, sizeof(x), &x), "arg");
    const size_t one = 1;
    // Warm: PoCL compiles the work-group function on the first launch.
    Ok(clEnqueueNDRangeKernel(raw.queue, k, 1, nullptr, &one, &one, 0, nullptr, nullptr), "warm");
    clFinish(raw.queue);
    for (auto _ : state) {
      clEnqueueNDRangeKernel(raw.queue, k, 1, nullptr, &one, &one, 0, nullptr, nullptr);
      clFinish(raw.queue);
    }
    clReleaseKernel(k);
    clReleaseMemObject(x);
  });
}
BENCHMARK(BM_OpenCL_EmptyKernel_Raw)->UseRealTime();

DLTensor Bytes(void* data, DLDevice dev, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  return t;
}

void Copy(benchmark::State& state, bool to_device) {
  Guarded(state, [&] {
    std::vector<uint8_t> host(kCopyBytes, 0x5A);
    Tensor dev = Tensor::Empty({static_cast<int64_t>(kCopyBytes)}, DLDataType{kDLUInt, 8, 1}, Cl());
    int64_t shape[1] = {static_cast<int64_t>(kCopyBytes)};
    DLTensor h = Bytes(host.data(), DLDevice{kDLCPU, 0}, shape);
    // As the raw side: the device buffer is written once before the timed loop, so neither
    // side pays first-touch page faults in the loop, nor reads never-written (zero) pages.
    backplane::Check(bp_device_copy_data_from_to(&h, dev.dl(), nullptr));
    Sync();
    for (auto _ : state) {
      backplane::Check(to_device ? bp_device_copy_data_from_to(&h, dev.dl(), nullptr)
                                 : bp_device_copy_data_from_to(dev.dl(), &h, nullptr));
      Sync();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
  });
}
void RawCopy(benchmark::State& state, bool to_device) {
  Guarded(state, [&] {
    Raw raw;
    std::vector<uint8_t> host(kCopyBytes, 0x5A);
    cl_mem m = raw.Buffer(kCopyBytes, host.data());
    for (auto _ : state) {
      if (to_device) {
        clEnqueueWriteBuffer(raw.queue, m, CL_TRUE, 0, kCopyBytes, host.data(), 0, nullptr,
                             nullptr);
      } else {
        clEnqueueReadBuffer(raw.queue, m, CL_TRUE, 0, kCopyBytes, host.data(), 0, nullptr, nullptr);
      }
      clFinish(raw.queue);
    }
    clReleaseMemObject(m);
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
  });
}
void BM_OpenCL_CopyH2D_64MiB(benchmark::State& state) { Copy(state, true); }
void BM_OpenCL_CopyD2H_64MiB(benchmark::State& state) { Copy(state, false); }
void BM_OpenCL_CopyH2D_64MiB_Raw(benchmark::State& state) { RawCopy(state, true); }
void BM_OpenCL_CopyD2H_64MiB_Raw(benchmark::State& state) { RawCopy(state, false); }
BENCHMARK(BM_OpenCL_CopyH2D_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenCL_CopyH2D_64MiB_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenCL_CopyD2H_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenCL_CopyD2H_64MiB_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_OpenCL_VectorAdd(benchmark::State& state) {
  Guarded(state, [&] {
    const int64_t n = static_cast<int64_t>(kVectorBytes / sizeof(float));
    Module m = BuildCatalog("vector_add_gpu");
    Function f = m.GetFunction("vector_add_gpu");
    Tensor a = DeviceTensor({n}, 1), b = DeviceTensor({n}, 2), c = DeviceTensor({n}, 3);
    f(n, a.dl(), b.dl(), c.dl());
    Sync();
    for (auto _ : state) {
      f(n, a.dl(), b.dl(), c.dl());
      Sync();
    }
    state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(kVectorBytes));
  });
}
BENCHMARK(BM_OpenCL_VectorAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_OpenCL_VectorAdd_Raw(benchmark::State& state) {
  Guarded(state, [&] {
    Raw raw;
    const cl_int n = static_cast<cl_int>(kVectorBytes / sizeof(float));
    const std::vector<float> ha = RandomFloats(static_cast<size_t>(n), 1),
                             hb = RandomFloats(static_cast<size_t>(n), 2);
    cl_mem a = raw.Buffer(kVectorBytes, ha.data()), b = raw.Buffer(kVectorBytes, hb.data()),
           c = raw.Buffer(kVectorBytes);
    cl_kernel k = raw.Kernel("vector_add");
    Ok(clSetKernelArg(k, 0, sizeof(n), &n), "arg");
    Ok(clSetKernelArg(k, 1, sizeof(a), &a), "arg");
    Ok(clSetKernelArg(k, 2, sizeof(b), &b), "arg");
    Ok(clSetKernelArg(k, 3, sizeof(c), &c), "arg");
    const size_t local = 256, global = (static_cast<size_t>(n) + 255) / 256 * 256;
    Ok(clEnqueueNDRangeKernel(raw.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr),
       "warm");
    clFinish(raw.queue);
    for (auto _ : state) {
      clEnqueueNDRangeKernel(raw.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
      clFinish(raw.queue);
    }
    clReleaseKernel(k);
    for (cl_mem x : {a, b, c}) clReleaseMemObject(x);
    state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(kVectorBytes));
  });
}
BENCHMARK(BM_OpenCL_VectorAdd_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();

void Flops(benchmark::State& state) {
  const double s = static_cast<double>(kOpenCLMatmulSide);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * s * s * s * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_OpenCL_MatmulTiled(benchmark::State& state) {
  Guarded(state, [&] {
    const int64_t s = static_cast<int64_t>(kOpenCLMatmulSide);
    Module m = BuildCatalog("matmul_tiled_gpu");
    Function f = m.GetFunction("matmul_tiled_gpu");
    const int64_t threads = Threads();
    Tensor a = DeviceTensor({s, s}, 1), b = DeviceTensor({s, s}, 2), c = DeviceTensor({s, s}, 3);
    f(s, s, s, threads, a.dl(), b.dl(), c.dl());
    Sync();
    for (auto _ : state) {
      f(s, s, s, threads, a.dl(), b.dl(), c.dl());
      Sync();
    }
    Flops(state);
  });
}
BENCHMARK(BM_OpenCL_MatmulTiled)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_OpenCL_MatmulTiled_Raw(benchmark::State& state) {
  Guarded(state, [&] {
    Raw raw;
    const cl_int s = static_cast<cl_int>(kOpenCLMatmulSide);
    const size_t bytes = static_cast<size_t>(s) * s * sizeof(float);
    const std::vector<float> ha = RandomFloats(bytes / 4, 1), hb = RandomFloats(bytes / 4, 2);
    cl_mem a = raw.Buffer(bytes, ha.data()), b = raw.Buffer(bytes, hb.data()),
           c = raw.Buffer(bytes);
    cl_kernel k = raw.Kernel("matmul_tiled");
    const cl_int threads = static_cast<cl_int>(Threads());
    for (cl_uint i = 0; i < 3; ++i) Ok(clSetKernelArg(k, i, sizeof(s), &s), "arg");
    Ok(clSetKernelArg(k, 3, sizeof(threads), &threads), "arg");
    Ok(clSetKernelArg(k, 4, sizeof(a), &a), "arg");
    Ok(clSetKernelArg(k, 5, sizeof(b), &b), "arg");
    Ok(clSetKernelArg(k, 6, sizeof(c), &c), "arg");
    // The generated kernel's grid: blockIdx.x over groups of 4 rows, blockIdx.y over blocks of
    // 8 * threads columns, `threads` work-items a group.
    const size_t rows = (static_cast<size_t>(s) + 3) / 4;
    const size_t cols = (static_cast<size_t>(s) + 8 * threads - 1) / (8 * threads);
    const size_t global[2] = {rows * threads, cols}, local[2] = {static_cast<size_t>(threads), 1};
    Ok(clEnqueueNDRangeKernel(raw.queue, k, 2, nullptr, global, local, 0, nullptr, nullptr),
       "warm");
    clFinish(raw.queue);
    for (auto _ : state) {
      clEnqueueNDRangeKernel(raw.queue, k, 2, nullptr, global, local, 0, nullptr, nullptr);
      clFinish(raw.queue);
    }
    clReleaseKernel(k);
    for (cl_mem x : {a, b, c}) clReleaseMemObject(x);
    Flops(state);
  });
}
BENCHMARK(BM_OpenCL_MatmulTiled_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();

// A 4 KiB workspace alloc + free through the core: the plugin's pool hands the same buffer
// back each time.
void BM_OpenCL_Workspace_AllocFree(benchmark::State& state) {
  Guarded(state, [&] {
    const DLDevice dev = Cl().dl;
    void* p = nullptr;
    backplane::Check(bp_device_alloc_workspace(dev, kWorkspaceBytes, backplane::UInt8(), &p));
    backplane::Check(bp_device_free_workspace(dev, p));
    for (auto _ : state) {
      bp_device_alloc_workspace(dev, kWorkspaceBytes, backplane::UInt8(), &p);
      bp_device_free_workspace(dev, p);
    }
  });
}
BENCHMARK(BM_OpenCL_Workspace_AllocFree)->Unit(benchmark::kNanosecond);

void BM_OpenCL_CreateReleaseBuffer_Raw(benchmark::State& state) {
  Guarded(state, [&] {
    Raw raw;
    for (auto _ : state) {
      cl_int err = CL_SUCCESS;
      cl_mem m = clCreateBuffer(raw.context, CL_MEM_READ_WRITE, kWorkspaceBytes, nullptr, &err);
      benchmark::DoNotOptimize(m);
      clReleaseMemObject(m);
    }
  });
}
BENCHMARK(BM_OpenCL_CreateReleaseBuffer_Raw)->Unit(benchmark::kNanosecond);

}  // namespace
