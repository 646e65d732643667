// SPDX-License-Identifier: Apache-2.0
// CUDA benchmark pairs, each Backplane path next to the raw driver API (or cuBLAS)
// in the same run, on cuda:0:
//   launch:   vector_add_gpu_kernel on 1 element through the module vs raw cuLaunchKernel of
//             the same PTX (goal <= 1.1x): BM_Launch_* each in a loop of its own (queued
//             without a wait: bound by the GPU's rate once the queue fills), and BM_LaunchPair,
//             the two alternating in one loop, each block of launches timed up to its last
//             submit: the host's cost of a launch, the ratio with its spread, and, with
//             BACKPLANE_CUDA_LAUNCH_PHASES=1, the plugin's phases
//   copies:   256 MiB pinned host <-> device through copy_data_from_to vs raw
//             cuMemcpyHtoDAsync/DtoHAsync (goal >= 95%)
//   vector_add: bytes/s of the catalog's vector_add_gpu variant for cuda:0 (runner::
//             ChooseVariant: vector_add4_gpu, float32x4 accesses) vs a device-to-device
//             copy (goal >= 95%), and of the base vector_add_gpu next to it
//   sum:      bytes/s of the catalog's sum_gpu variant for cuda:0 (sum4_gpu, float32x4 loads;
//             grid-wide: a block a part of x, 8 blocks a multiprocessor as
//             runner::DimsForDevice gives them, then one block over the parts) on 64 Mi floats
//             vs the device-to-device copy (goal >= 0.9 of its bandwidth: the copy reads and
//             writes, so the sum's reads alone are compared), and of the base sum_gpu next to it
//   matmul:   the catalog's matmul_tiled_gpu variant for cuda:0 (matmul_reg_gpu, 8 x 8
//             register tiles over double-buffered shared tiles) vs cuBLAS sgemm at 4096
//             (goal >= 0.6), and the named variants matmul_reg16_gpu (steps of 16 along k,
//             two blocks an SM by "cuda.min_blocks_per_sm") and matmul_smem_gpu and the base
//             matmul_tiled_gpu next to it; each benchmark's label names the function it ran
// Every benchmark skips with the reason where there is no CUDA device (or no cuBLAS).
// Run: build/release/bin/bench_cuda (tests/plugins/cuda/gpu_checks.sh does).
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driver.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Tensor;
namespace cu = backplane::cuda;

constexpr size_t kCopyBytes = size_t{256} << 20;
constexpr int64_t kVectorElems = int64_t{64} << 20;  // 256 MiB per vector
constexpr int64_t kMatmulSide = 4096;

DLDevice Gpu() { return DLDevice{kDLCUDA, 0}; }
DLDataType F32() { return DLDataType{kDLFloat, 32, 1}; }

// The plugin loaded and cuda:0 present, else the reason.
std::string NoDevice() {
  static const std::string reason = [] {
    bp_plugins_discover();
    bp_plugins_load_all();
    backplane::DeviceAPI api = backplane::DeviceAPI::Get(Device(Gpu()));
    if (api.Exists()) return std::string();
    return "no CUDA device: " + api.GetProperty("status").ToString();
  }();
  return reason;
}

Module BuildKernel(const std::string& func) {
  const backplane::kernels::Case* c = backplane::kernels::Find(func);
  return backplane::Build(backplane::runner::KernelSource(*c),
                          backplane::Target::FromDevice(Device(Gpu())));
}

void Sync() { backplane::Check(bp_device_stream_sync(Gpu(), nullptr)); }

void BM_Launch_Backplane(benchmark::State& state) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  Module m = BuildKernel("vector_add_gpu");
  backplane::Function k = m.Imports()[0].GetFunction("vector_add_gpu_kernel");
  Tensor a = Tensor::Empty({1}, F32(), Device(Gpu()));
  k(1, a.dl(), a.dl(), Tensor::Empty({1}, F32(), Device(Gpu())).dl(), 1, 256);
  Tensor c = Tensor::Empty({1}, F32(), Device(Gpu()));
  for (auto _ : state) k(1, a.dl(), a.dl(), c.dl(), 1, 256);
  Sync();
}

void BM_Launch_RawDriver(benchmark::State& state) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  Module m = BuildKernel("vector_add_gpu");
  const std::string ptx = m.Imports()[0].InspectSource("ptx");
  const cu::Driver& d = cu::Driver::Get();
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  Tensor a = Tensor::Empty({1}, F32(), Device(Gpu()));
  Tensor c = Tensor::Empty({1}, F32(), Device(Gpu()));
  cu::Check(d.cuModuleLoadDataEx(&mod, ptx.c_str(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
  cu::Check(d.cuModuleGetFunction(&fn, mod, "vector_add_gpu_kernel"), "cuModuleGetFunction");
  int32_t n = 1;
  CUdeviceptr pa = reinterpret_cast<CUdeviceptr>(a.dl()->data);
  CUdeviceptr pc = reinterpret_cast<CUdeviceptr>(c.dl()->data);
  int64_t block_offset_x = 0;  // the kernel's last param (docs/cuda.md, "Large grids")
  void* params[] = {&n, &pa, &pa, &pc, &block_offset_x};
  for (auto _ : state) d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  Sync();
  d.cuModuleUnload(mod);
}

// The launch pair: the Backplane launch and the raw cuLaunchKernel of the
// same function (the same PTX loaded in the same context, the same arguments, block offset and
// null stream) alternate in one loop. Each round times a block of kPairBlock launches of each,
// in ABBA order across rounds, from the first launch to the return of the last; a stream sync
// between blocks (not timed) keeps the queue short, so neither side waits for the GPU and
// both measure the host's cost of a launch. The counters: each side's median ns a launch, the
// ratio's median and spread over rounds (p10, p90, min, max); with BACKPLANE_CUDA_LAUNCH_PHASES
// set, the plugin's phases in ns a Backplane launch (phase_*), the plugin's whole Launch
// (plugin_ns) and the rest of the call (outside_plugin_ns: the C ABI, the function registry,
// the packed arguments), also printed as a table. The timer's clock reads inflate the
// Backplane side: read the ratio from a run without it.
constexpr int kPairBlock = 64;

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void BM_LaunchPair(benchmark::State& state) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  Module m = BuildKernel("vector_add_gpu");
  backplane::Function k = m.Imports()[0].GetFunction("vector_add_gpu_kernel");
  const std::string ptx = m.Imports()[0].InspectSource("ptx");
  Tensor a = Tensor::Empty({1}, F32(), Device(Gpu()));
  Tensor c = Tensor::Empty({1}, F32(), Device(Gpu()));
  k(1, a.dl(), a.dl(), c.dl(), 1, 256);  // loads the module, makes the context current
  Sync();
  const cu::Driver& d = cu::Driver::Get();
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  cu::Check(d.cuModuleLoadDataEx(&mod, ptx.c_str(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
  cu::Check(d.cuModuleGetFunction(&fn, mod, "vector_add_gpu_kernel"), "cuModuleGetFunction");
  int32_t n = 1;
  CUdeviceptr pa = reinterpret_cast<CUdeviceptr>(a.dl()->data);
  CUdeviceptr pc = reinterpret_cast<CUdeviceptr>(c.dl()->data);
  int64_t block_offset_x = 0;
  void* params[] = {&n, &pa, &pa, &pc, &block_offset_x};
  // An older plugin has no phase timer: the pair runs without the breakdown.
  backplane::Function phases;
  try {
    phases = backplane::Function::Get("cuda.launch_phases");
    phases("reset");
  } catch (const backplane::Error&) {
    phases = backplane::Function();
  }
  using Clock = std::chrono::steady_clock;
  // ns a launch of `kPairBlock` launches of `launch`, after a wait for the queue to drain.
  auto block = [&](auto&& launch) {
    Sync();
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kPairBlock; ++i) launch();
    const Clock::time_point t1 = Clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / kPairBlock;
  };
  auto ours = [&] { k(1, a.dl(), a.dl(), c.dl(), 1, 256); };
  auto raw = [&] {
    cu::Check(d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
              "cuLaunchKernel");
  };
  // With the timer on, each Backplane block's phases (ns a launch), taken and zeroed after the
  // block, outside its timing; medians over the rounds, as for the pair, so a round that the
  // machine interrupted moves them no more than it moves the pair.
  bool timed = false;
  if (static_cast<bool>(phases)) {
    timed = nlohmann::json::parse(phases("reset").AsString()).at("enabled").get<bool>();
  }
  std::vector<std::string> phase_names;
  std::vector<std::vector<double>> phase_ns;  // per phase, per round
  std::vector<double> plugin_ns, outside_ns;  // per round
  double clock_ns = 0;
  auto take_phases = [&](double ours_per_launch) {
    const nlohmann::json j = nlohmann::json::parse(phases("reset").AsString());
    const double launches = std::max(j.at("launches").get<double>(), 1.0);
    clock_ns = j.at("clock_ns").get<double>();
    const nlohmann::json& list = j.at("phases");
    if (phase_names.empty()) {
      for (const nlohmann::json& p : list) phase_names.push_back(p.at("name").get<std::string>());
      phase_ns.resize(phase_names.size());
    }
    for (size_t i = 0; i < list.size() && i < phase_ns.size(); ++i) {
      phase_ns[i].push_back(list[i].at("ns").get<double>() /
                            std::max(list[i].at("count").get<double>(), 1.0));
    }
    plugin_ns.push_back(j.at("total_ns").get<double>() / launches);
    outside_ns.push_back(ours_per_launch - plugin_ns.back());
  };
  std::vector<double> ours_ns, raw_ns, ratio;
  int64_t round = 0;
  for (auto _ : state) {
    double o = 0, r = 0;
    if (round++ % 2 == 0) {
      o = block(ours);
      if (timed) take_phases(o);
      r = block(raw);
    } else {
      r = block(raw);
      o = block(ours);
      if (timed) take_phases(o);
    }
    ours_ns.push_back(o);
    raw_ns.push_back(r);
    ratio.push_back(o / r);
  }
  Sync();
  d.cuModuleUnload(mod);
  state.counters["backplane_ns"] = Percentile(ours_ns, 0.5);
  state.counters["raw_ns"] = Percentile(raw_ns, 0.5);
  state.counters["ratio"] = Percentile(ratio, 0.5);
  state.counters["ratio_p10"] = Percentile(ratio, 0.1);
  state.counters["ratio_p90"] = Percentile(ratio, 0.9);
  state.counters["ratio_min"] = Percentile(ratio, 0.0);
  state.counters["ratio_max"] = Percentile(ratio, 1.0);
  std::printf(
      "launch pair%s: %zu rounds of %d launches each side; Backplane %.1f ns, raw cuLaunchKernel "
      "%.1f ns a launch (medians); ratio %.3f (p10 %.3f, p90 %.3f, min %.3f, max %.3f)\n",
      timed ? " (with the phase timer, which adds its clock reads)" : "", ratio.size(), kPairBlock,
      Percentile(ours_ns, 0.5), Percentile(raw_ns, 0.5), Percentile(ratio, 0.5),
      Percentile(ratio, 0.1), Percentile(ratio, 0.9), Percentile(ratio, 0.0),
      Percentile(ratio, 1.0));
  if (timed && !plugin_ns.empty()) {
    std::printf(
        "launch phases of the Backplane side (BACKPLANE_CUDA_LAUNCH_PHASES), ns a launch, median "
        "over the rounds; each phase includes one clock read of %.1f ns:\n",
        clock_ns);
    for (size_t i = 0; i < phase_names.size(); ++i) {
      const double ns = Percentile(phase_ns[i], 0.5);
      state.counters["phase_" + phase_names[i] + "_ns"] = ns;
      std::printf("  %-18s %8.1f\n", phase_names[i].c_str(), ns);
    }
    state.counters["plugin_ns"] = Percentile(plugin_ns, 0.5);
    state.counters["outside_plugin_ns"] = Percentile(outside_ns, 0.5);
    state.counters["clock_ns"] = clock_ns;
    std::printf("  %-18s %8.1f\n  %-18s %8.1f  (the call from the C ABI to the plugin and back)\n",
                "plugin (Launch)", Percentile(plugin_ns, 0.5), "outside the plugin",
                Percentile(outside_ns, 0.5));
  }
  std::fflush(stdout);
}

void CopyPinned(benchmark::State& state, bool raw, bool to_device) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  const int64_t n = static_cast<int64_t>(kCopyBytes);
  Tensor host = Tensor::Empty({n}, backplane::UInt8(), Device(DLDevice{kDLCUDAHost, 0}));
  Tensor dev = Tensor::Empty({n}, backplane::UInt8(), Device(Gpu()));
  // A cpu-labelled view of the pinned memory: the driver sees pinned pages and uses DMA.
  DLTensor h = *host.dl();
  h.device = DLDevice{kDLCPU, 0};
  const cu::Driver& d = cu::Driver::Get();
  for (auto _ : state) {
    if (raw) {
      const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(dev.dl()->data);
      if (to_device) {
        d.cuMemcpyHtoDAsync(p, h.data, kCopyBytes, nullptr);
      } else {
        d.cuMemcpyDtoHAsync(h.data, p, kCopyBytes, nullptr);
      }
      d.cuStreamSynchronize(nullptr);
    } else {
      backplane::Check(to_device ? bp_device_copy_data_from_to(&h, dev.dl(), nullptr)
                                 : bp_device_copy_data_from_to(dev.dl(), &h, nullptr));
      Sync();
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
}
void BM_CopyH2D_Backplane(benchmark::State& s) { CopyPinned(s, false, true); }
void BM_CopyH2D_RawDriver(benchmark::State& s) { CopyPinned(s, true, true); }
void BM_CopyD2H_Backplane(benchmark::State& s) { CopyPinned(s, false, false); }
void BM_CopyD2H_RawDriver(benchmark::State& s) { CopyPinned(s, true, false); }

// The catalog kernel `func`'s variant for cuda:0 (runner::ChooseVariant, as `backplane run`
// and `demo` pick it; kernels::Case::variants), or `func` itself with `base`.
const backplane::kernels::Case& Variant(const std::string& func, bool base) {
  const backplane::kernels::Case* c = backplane::kernels::Find(func);
  return base ? *c : *backplane::runner::ChooseVariant(*c, Device(Gpu()));
}

// A variant by its name (kernels::FindVariant), e.g. "smem" of matmul_tiled_gpu.
const backplane::kernels::Case& Named(const std::string& func, const std::string& name) {
  return *backplane::kernels::FindVariant(*backplane::kernels::Find(func), name);
}

// c = a + b on 64 Mi elements with the catalog's vector_add_gpu (base) or the variant chosen
// for the GPU (vector_add4_gpu: four elements a thread through float32x4 accesses); the
// label names the function.
void VectorAdd(benchmark::State& state, bool base) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  const backplane::kernels::Case& c = Variant("vector_add_gpu", base);
  state.SetLabel(c.func);
  Module m = BuildKernel(c.func);
  backplane::Function f = m.GetFunction(c.func);
  Tensor a = Tensor::Empty({kVectorElems}, F32(), Device(Gpu()));
  Tensor b = Tensor::Empty({kVectorElems}, F32(), Device(Gpu()));
  Tensor out = Tensor::Empty({kVectorElems}, F32(), Device(Gpu()));
  f(kVectorElems, a.dl(), b.dl(), out.dl());
  Sync();
  for (auto _ : state) {
    f(kVectorElems, a.dl(), b.dl(), out.dl());
    Sync();
  }
  state.SetBytesProcessed(state.iterations() * kVectorElems * 4 * 3);
}
void BM_VectorAdd_Backplane(benchmark::State& s) { VectorAdd(s, false); }
void BM_VectorAddBase_Backplane(benchmark::State& s) { VectorAdd(s, true); }

void BM_DeviceCopy_RawDriver(benchmark::State& state) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  Tensor a = Tensor::Empty({kVectorElems}, F32(), Device(Gpu()));
  Tensor c = Tensor::Empty({kVectorElems}, F32(), Device(Gpu()));
  const cu::Driver& d = cu::Driver::Get();
  for (auto _ : state) {
    d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(c.dl()->data),
                        reinterpret_cast<CUdeviceptr>(a.dl()->data), kVectorElems * 4, nullptr);
    d.cuStreamSynchronize(nullptr);
  }
  state.SetBytesProcessed(state.iterations() * kVectorElems * 4 * 2);  // read + write
}

// out = sum(x) over 64 Mi floats with the catalog's sum_gpu (base) or the variant chosen for the
// GPU (sum4_gpu: float32x4 loads, two in flight a thread), the block count from
// runner::DimsForDevice (8 a multiprocessor); the bytes are those read, 4 an element; the label
// names the function.
void Sum(benchmark::State& state, bool base) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  const backplane::kernels::Case& c = Variant("sum_gpu", base);
  state.SetLabel(c.func);
  Module m = BuildKernel(c.func);
  backplane::Function f = m.GetFunction(c.func);
  const int64_t blocks = backplane::runner::DimsForDevice(c, Device(Gpu()), {}).at(c.grid_param);
  state.counters["blocks"] = static_cast<double>(blocks);
  Tensor x = Tensor::Empty({kVectorElems}, F32(), Device(Gpu()));
  Tensor out = Tensor::Empty({1}, F32(), Device(Gpu()));
  f(kVectorElems, blocks, x.dl(), out.dl());
  Sync();
  for (auto _ : state) {
    f(kVectorElems, blocks, x.dl(), out.dl());
    Sync();
  }
  state.SetBytesProcessed(state.iterations() * kVectorElems * 4);
}
void BM_Sum_Backplane(benchmark::State& s) { Sum(s, false); }
void BM_SumBase_Backplane(benchmark::State& s) { Sum(s, true); }

// c = a b at 4096 with the catalog's matmul_tiled_gpu (base; its block as the tools give it,
// runner::DimsForDevice: 4 warps on a GPU), the variant chosen for the GPU (matmul_reg_gpu:
// 128 x 128 tiles double-buffered in shared memory, 8 x 8 a thread in registers, fma) or a
// named variant: matmul_reg16_gpu (the same with steps of 16 along k) or matmul_smem_gpu
// (64 x 64 tiles, 4 x 4 a thread); the label names it.
void Matmul(benchmark::State& state, const backplane::kernels::Case& c) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  state.SetLabel(c.func);
  Module m = BuildKernel(c.func);
  backplane::Function f = m.GetFunction(c.func);
  const int64_t s = kMatmulSide;
  Tensor a = Tensor::Empty({s, s}, F32(), Device(Gpu()));
  Tensor b = Tensor::Empty({s, s}, F32(), Device(Gpu()));
  Tensor out = Tensor::Empty({s, s}, F32(), Device(Gpu()));
  int64_t threads = 0;
  if (!c.block_param.empty()) {
    threads = backplane::runner::DimsForDevice(c, Device(Gpu()), {}).at(c.block_param);
    state.counters["threads"] = static_cast<double>(threads);
  }
  auto call = [&] {
    if (c.block_param.empty()) {
      f(s, s, s, a.dl(), b.dl(), out.dl());
    } else {
      f(s, s, s, threads, a.dl(), b.dl(), out.dl());
    }
  };
  call();
  Sync();
  for (auto _ : state) {
    call();
    Sync();
  }
  state.counters["flops"] =
      benchmark::Counter(2.0 * s * s * s * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_Matmul_Backplane(benchmark::State& s) { Matmul(s, Variant("matmul_tiled_gpu", false)); }
void BM_MatmulReg16_Backplane(benchmark::State& s) {
  Matmul(s, Named("matmul_tiled_gpu", "reg16"));
}
void BM_MatmulSmem_Backplane(benchmark::State& s) { Matmul(s, Named("matmul_tiled_gpu", "smem")); }
void BM_MatmulBase_Backplane(benchmark::State& s) { Matmul(s, Variant("matmul_tiled_gpu", true)); }

void BM_Matmul_cuBLAS(benchmark::State& state) {
  if (!NoDevice().empty()) return state.SkipWithError(NoDevice().c_str());
  // $BACKPLANE_CUBLAS_LIBRARY: the GPU machine's cuBLAS when its toolkit is of another major
  // than the one this was built with (tests/plugins/cuda/gpu_checks.sh sets it).
  const char* env = std::getenv("BACKPLANE_CUBLAS_LIBRARY");
  const std::string name = env != nullptr && env[0] != '\0'
                               ? std::string(env)
                               : "libcublas.so." BACKPLANE_CUDA_TOOLKIT_VERSION_MAJOR;
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    const std::string why = "no cuBLAS: " + name + " could not be opened (" +
                            (err != nullptr ? err : "not found") +
                            "); install the CUDA Toolkit or set BACKPLANE_CUBLAS_LIBRARY";
    return state.SkipWithError(why.c_str());
  }
  auto create = reinterpret_cast<decltype(&cublasCreate_v2)>(dlsym(lib, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<decltype(&cublasDestroy_v2)>(dlsym(lib, "cublasDestroy_v2"));
  auto sgemm = reinterpret_cast<decltype(&cublasSgemm_v2)>(dlsym(lib, "cublasSgemm_v2"));
  if (create == nullptr || destroy == nullptr || sgemm == nullptr) {
    return state.SkipWithError("libcublas lacks cublasSgemm_v2");
  }
  backplane::Check(bp_device_set(Gpu()));  // the primary context, which cuBLAS uses
  cublasHandle_t h = nullptr;
  if (create(&h) != CUBLAS_STATUS_SUCCESS) return state.SkipWithError("cublasCreate failed");
  const int s = static_cast<int>(kMatmulSide);
  Tensor a = Tensor::Empty({s, s}, F32(), Device(Gpu()));
  Tensor b = Tensor::Empty({s, s}, F32(), Device(Gpu()));
  Tensor c = Tensor::Empty({s, s}, F32(), Device(Gpu()));
  const float one = 1.0f, zero = 0.0f;
  for (auto _ : state) {
    sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s, s, s, &one, static_cast<float*>(b.dl()->data), s,
          static_cast<float*>(a.dl()->data), s, &zero, static_cast<float*>(c.dl()->data), s);
    Sync();
  }
  destroy(h);
  state.counters["flops"] =
      benchmark::Counter(2.0 * s * s * double(s) * state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Launch_Backplane);
BENCHMARK(BM_Launch_RawDriver);
BENCHMARK(BM_LaunchPair)->Iterations(1000);
BENCHMARK(BM_CopyH2D_Backplane)->UseRealTime();
BENCHMARK(BM_CopyH2D_RawDriver)->UseRealTime();
BENCHMARK(BM_CopyD2H_Backplane)->UseRealTime();
BENCHMARK(BM_CopyD2H_RawDriver)->UseRealTime();
BENCHMARK(BM_VectorAdd_Backplane)->UseRealTime();
BENCHMARK(BM_VectorAddBase_Backplane)->UseRealTime();
BENCHMARK(BM_DeviceCopy_RawDriver)->UseRealTime();
BENCHMARK(BM_Sum_Backplane)->UseRealTime();
BENCHMARK(BM_SumBase_Backplane)->UseRealTime();
BENCHMARK(BM_Matmul_Backplane)->UseRealTime();
BENCHMARK(BM_MatmulReg16_Backplane)->UseRealTime();
BENCHMARK(BM_MatmulSmem_Backplane)->UseRealTime();
BENCHMARK(BM_MatmulBase_Backplane)->UseRealTime();
BENCHMARK(BM_Matmul_cuBLAS)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
