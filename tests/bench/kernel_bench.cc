// SPDX-License-Identifier: Apache-2.0
// Generated code against its baselines, in the same run: the c target's vector_add against
// memcpy, its tiled matmul against OpenBLAS sgemm (one thread and all threads), and the
// latency of target.build.c with the compiler running (cold) and from the disk cache.
//
// The kernels are built with -march=native, since OpenBLAS (and glibc's memcpy) dispatch to
// this CPU's best instructions at run time; the matmul also with -fast-math-contract (a*b+c
// as one fused multiply-add), since OpenBLAS's kernels use FMA. The default `c` Target
// (baseline instructions, no contraction) is unchanged.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_pairs.h"
#include "tvm_ffi.h"

namespace {

namespace kernels = backplane::kernels;
using backplane::Device;
using backplane::Function;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;
using backplane::bench::kMatmulMediumSide;
using backplane::bench::kMatmulSide;
using backplane::bench::kMatmulSmallSide;
using backplane::bench::kVectorBytes;

const DLDataType kF32{kDLFloat, 32, 1};

// Cold builds add a library to the compile cache every time: the benchmarks use a private
// cache folder, removed at exit, instead of the user's.
struct PrivateCompileCache {
  PrivateCompileCache() {
    std::string dir = (std::filesystem::temp_directory_path() / "backplane-bench-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) return;
    path = dir;
    setenv("XDG_CACHE_HOME", path.c_str(), 1);
  }
  ~PrivateCompileCache() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string path;
};
const PrivateCompileCache kCache;

Device Cpu() { return Device(DLDevice{kDLCPU, 0}); }

// A float32 tensor of `n` random values in [0.5, 1] on cpu:0.
Tensor RandomTensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::Empty(shape, kF32, Cpu());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 1.0f);
  std::vector<float> v(t.NumElements());
  for (float& x : v) x = dist(rng);
  t.CopyFrom(v);
  return t;
}

Module BuildKernel(const std::string& func, const std::string& target) {
  const kernels::Case* c = kernels::Find(func);
  if (c == nullptr) throw backplane::Error(BP_ERR_NOT_FOUND, "no kernel " + func);
  return backplane::Build(backplane::runner::KernelSource(*c), Target::Parse(target));
}

int AllCores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

template <typename Body>
void Guarded(benchmark::State& state, Body body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Calling a compiled CPU kernel. A 16-element vector_add (one core: no thread pool)
// through the module's
// Function, call + sync, against a direct call of the same compiled function: its entry point
// (bp_func_vector_add, the c target's calling convention: one 8-byte slot per parameter, then
// a context whose first two members are the call_packed callback and the fault record) taken
// with dlsym from the library the build left in the (private) compile cache.
constexpr int64_t kSmallN = 16;

// A symbol of a kernel library the builds left in the benchmark's compile cache.
void* CompiledSymbol(const char* name) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(kCache.path)) {
    if (e.path().extension() != ".so") continue;
    void* lib = dlopen(e.path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    if (void* symbol = dlsym(lib, name)) return symbol;
  }
  throw std::runtime_error(std::string("no ") + name + " in the compile cache");
}

void BM_CpuKernelCall_Module(benchmark::State& state) {
  Guarded(state, [&] {
    Module m = BuildKernel("vector_add", "c -num-cores=1");
    Function f = m.GetFunction("vector_add");
    Tensor a = RandomTensor({kSmallN}, 1), b = RandomTensor({kSmallN}, 2),
           c = RandomTensor({kSmallN}, 3);
    const DLDevice cpu{kDLCPU, 0};
    for (auto _ : state) {
      f(kSmallN, a.dl(), b.dl(), c.dl());
      backplane::Check(bp_device_stream_sync(cpu, nullptr));
    }
  });
}
BENCHMARK(BM_CpuKernelCall_Module);

// The same call without the stream sync: what a C++ caller of TVM's compiled CPU function does
// (the tvm-ffi pair below).
void BM_CpuKernelCall_ModuleNoSync(benchmark::State& state) {
  Guarded(state, [&] {
    Module m = BuildKernel("vector_add", "c -num-cores=1");
    Function f = m.GetFunction("vector_add");
    Tensor a = RandomTensor({kSmallN}, 1), b = RandomTensor({kSmallN}, 2),
           c = RandomTensor({kSmallN}, 3);
    for (auto _ : state) {
      f(kSmallN, a.dl(), b.dl(), c.dl());
      benchmark::ClobberMemory();
    }
  });
}
BENCHMARK(BM_CpuKernelCall_ModuleNoSync);

void BM_CpuKernelCall_Direct(benchmark::State& state) {
  Guarded(state, [&] {
    Module m = BuildKernel("vector_add", "c -num-cores=1");  // its library: in the cache
    void* entry = CompiledSymbol("bp_func_vector_add");
    union Slot {
      int64_t i;
      void* p;
    };
    struct Context {
      void* call_packed;
      void* fault;
    };
    alignas(8) unsigned char fault[32] = {};
    Context ctx{nullptr, fault};
    auto call = reinterpret_cast<int32_t (*)(const Slot*, Context*)>(entry);
    Tensor a = RandomTensor({kSmallN}, 1), b = RandomTensor({kSmallN}, 2),
           c = RandomTensor({kSmallN}, 3);
    Slot args[4];
    args[0].i = kSmallN;
    args[1].p = a.dl()->data;
    args[2].p = b.dl()->data;
    args[3].p = c.dl()->data;
    for (auto _ : state) {
      benchmark::DoNotOptimize(call(args, &ctx));
      benchmark::ClobberMemory();
    }
  });
}
BENCHMARK(BM_CpuKernelCall_Direct);

// The peer: TVM's compiled function called through tvm-ffi from C++ takes its
// packed arguments and checks them in generated code. Here the tvm-ffi function's body hands
// its four arguments to the same kernel's packed entry (bp_packed_vector_add: the same
// generated check and body), so the pair measures the two layers around the same compiled
// code. Neither side syncs the stream (BM_CpuKernelCall_ModuleNoSync).
struct TvmKernel {
  int32_t (*packed)(const bp_value_t* args, int32_t num_args, void* ctx) = nullptr;
};
int CallVectorAddTvmFfi(void* self, const benchwork::tvmffi::Any* args, int32_t num_args,
                        benchwork::tvmffi::Any* result) {
  using benchwork::tvmffi::kDLTensorPtr;
  using benchwork::tvmffi::kInt;
  if (num_args != 4) return -1;
  bp_value_t values[4];
  for (int32_t i = 0; i < 4; ++i) {
    values[i].reserved0 = 0;
    if (args[i].type_index == kInt) {
      values[i].type = BP_VALUE_INT;
      values[i].u.v_int64 = args[i].v_int64;
    } else if (args[i].type_index == kDLTensorPtr) {
      values[i].type = BP_VALUE_TENSOR;
      values[i].u.v_tensor = static_cast<DLTensor*>(args[i].v_ptr);
    } else {
      return -1;
    }
  }
  alignas(8) unsigned char fault[32] = {};
  struct {
    void* call_packed;
    void* fault;
  } ctx{nullptr, fault};
  result->type_index = benchwork::tvmffi::kNone;
  return static_cast<TvmKernel*>(self)->packed(values, 4, &ctx) == 0 ? 0 : -1;
}

void BM_CpuKernelCall_TvmFfi(benchmark::State& state) {
  namespace tvmffi = benchwork::tvmffi;
  Guarded(state, [&] {
    const tvmffi::Library& lib = tvmffi::Load();
    if (!lib.error.empty()) throw std::runtime_error(lib.error);
    Module m = BuildKernel("vector_add", "c -num-cores=1");  // its library: in the cache
    TvmKernel kernel;
    kernel.packed =
        reinterpret_cast<decltype(kernel.packed)>(CompiledSymbol("bp_packed_vector_add"));
    void* func = nullptr;
    if (lib.function_create(&kernel, &CallVectorAddTvmFfi, nullptr, &func) != 0) {
      throw std::runtime_error("TVMFFIFunctionCreate failed");
    }
    Tensor a = RandomTensor({kSmallN}, 1), b = RandomTensor({kSmallN}, 2),
           c = RandomTensor({kSmallN}, 3);
    DLTensor* dl[3] = {a.dl(), b.dl(), c.dl()};
    int failures = 0;
    for (auto _ : state) {
      // Built every call, as a C++ caller's arguments are (tvm::ffi::Function's operator()).
      tvmffi::Any args[4];
      args[0].type_index = tvmffi::kInt;
      args[0].zero_padding = 0;
      args[0].v_int64 = kSmallN;
      for (int i = 0; i < 3; ++i) {
        args[i + 1].type_index = tvmffi::kDLTensorPtr;
        args[i + 1].zero_padding = 0;
        args[i + 1].v_ptr = dl[i];
      }
      tvmffi::Any result{tvmffi::kNone, 0, {0}};
      failures += lib.function_call(func, args, 4, &result) != 0;
      benchmark::ClobberMemory();
    }
    lib.object_dec_ref(func);
    if (failures != 0) throw std::runtime_error("the packed entry refused the benchmark's call");
  });
}
const bool kTvmFfiKernelRegistered = backplane::bench::RegisterIfAvailable(
    "BM_CpuKernelCall_TvmFfi", benchwork::tvmffi::Load().error,
    [] { benchmark::RegisterBenchmark("BM_CpuKernelCall_TvmFfi", BM_CpuKernelCall_TvmFfi); });

// The README's kernel, a parallel loop of a few floats, built for every core
// and for one. A small trip count runs without waking the OpenMP pool (CEmitter's
// kParallelMinWork), so the parallel build must cost about what the serial one does.
const char* kReadmeKernel = R"(# backplane-ir 1
func saxpy2(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], out: buffer<float32>[n]) {
  for i in parallel(0, n) { out[i] = 2.0 * x[i] + y[i] }
}
)";
void SmallParallel(benchmark::State& state, bool all_cores) {
  Guarded(state, [&] {
    const int64_t n = state.range(0);
    Module m = backplane::Build(kReadmeKernel, Target::Parse(all_cores ? "c" : "c -num-cores=1"));
    Function f = m.GetFunction("saxpy2");
    Tensor x = RandomTensor({n}, 4), y = RandomTensor({n}, 5), out = RandomTensor({n}, 6);
    const DLDevice cpu{kDLCPU, 0};
    for (auto _ : state) {
      f(n, x.dl(), y.dl(), out.dl());
      backplane::Check(bp_device_stream_sync(cpu, nullptr));
    }
    state.SetLabel(all_cores ? "all cores" : "1 core");
  });
}
void BM_SmallParallel_C_AllCores(benchmark::State& state) { SmallParallel(state, true); }
void BM_SmallParallel_C_1Core(benchmark::State& state) { SmallParallel(state, false); }
// 16 and 4096 floats run without a region; 65536, kParallelMinWork trips of one statement,
// is the least that starts one.
BENCHMARK(BM_SmallParallel_C_AllCores)->Arg(16)->Arg(4096)->Arg(65536)->UseRealTime();
BENCHMARK(BM_SmallParallel_C_1Core)->Arg(16)->Arg(4096)->Arg(65536)->UseRealTime();

void BM_VectorAdd_C_1Core(benchmark::State& state) {
  Guarded(state, [&] {
    const int64_t n = static_cast<int64_t>(kVectorBytes / sizeof(float));
    Module m = BuildKernel("vector_add", "c -march=native -num-cores=1");
    Function f = m.GetFunction("vector_add");
    Tensor a = RandomTensor({n}, 1), b = RandomTensor({n}, 2), c = RandomTensor({n}, 3);
    for (auto _ : state) {
      f(n, a.dl(), b.dl(), c.dl());
      benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(kVectorBytes));
  });
}
// CPU time, as its memcpy baseline is measured: with one core the generated code runs on the
// calling thread, and on a shared machine time spent off the CPU would count against one side
// of the pair only.
BENCHMARK(BM_VectorAdd_C_1Core)->Unit(benchmark::kMillisecond);

// The same with -bounds-check: the cost of checking every index (docs/performance.md).
void BM_VectorAdd_C_1Core_BoundsCheck(benchmark::State& state) {
  Guarded(state, [&] {
    const int64_t n = static_cast<int64_t>(kVectorBytes / sizeof(float));
    Module m = BuildKernel("vector_add", "c -march=native -num-cores=1 -bounds-check");
    Function f = m.GetFunction("vector_add");
    Tensor a = RandomTensor({n}, 1), b = RandomTensor({n}, 2), c = RandomTensor({n}, 3);
    for (auto _ : state) {
      f(n, a.dl(), b.dl(), c.dl());
      benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(kVectorBytes));
  });
}
BENCHMARK(BM_VectorAdd_C_1Core_BoundsCheck)->Unit(benchmark::kMillisecond);

// Integer division by a variable, which the c target always checks (a zero divisor is an
// error, INT_MIN / -1 wraps), against the same loop compiled into this program unchecked.
constexpr int64_t kDivideElements = 16 << 20;
const char* kDivide = R"(# backplane-ir 1
func divide(n: int32, a: buffer<int32>[n], b: buffer<int32>[n], q: buffer<int32>[n]) {
  for i in serial(0, n) {
    q[i] = a[i] / b[i]
  }
}
)";
std::vector<int32_t> DivideInput(uint64_t seed, bool divisor) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(kDivideElements);
  for (int32_t& x : v) {
    x = static_cast<int32_t>(rng() % 2000001) - 1000000;
    if (divisor && x == 0) x = 7;
  }
  return v;
}
void BM_IntDivide_C_Checked(benchmark::State& state) {
  Guarded(state, [&] {
    Module m = backplane::Build(kDivide, Target::Parse("c -march=native -num-cores=1"));
    Function f = m.GetFunction("divide");
    const DLDataType i32{kDLInt, 32, 1};
    Tensor a = Tensor::Empty({kDivideElements}, i32, Cpu());
    Tensor b = Tensor::Empty({kDivideElements}, i32, Cpu());
    Tensor q = Tensor::Empty({kDivideElements}, i32, Cpu());
    a.CopyFrom(DivideInput(1, false));
    b.CopyFrom(DivideInput(2, true));
    for (auto _ : state) {
      f(kDivideElements, a.dl(), b.dl(), q.dl());
      benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * kDivideElements);
  });
}
BENCHMARK(BM_IntDivide_C_Checked)->Unit(benchmark::kMillisecond);
void BM_IntDivide_Host_Unchecked(benchmark::State& state) {
  const std::vector<int32_t> a = DivideInput(1, false), b = DivideInput(2, true);
  std::vector<int32_t> q(kDivideElements);
  for (auto _ : state) {
    const int32_t* pa = a.data();
    const int32_t* pb = b.data();
    int32_t* pq = q.data();
    for (int64_t i = 0; i < kDivideElements; ++i) pq[i] = pa[i] / pb[i];
    benchmark::DoNotOptimize(pq);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kDivideElements);
}
BENCHMARK(BM_IntDivide_Host_Unchecked)->Unit(benchmark::kMillisecond);

void MatmulTiled(benchmark::State& state, int cores, bool bounds_check = false) {
  Guarded(state, [&] {
    const int64_t s = static_cast<int64_t>(kMatmulSide);
    Module m = BuildKernel(
        "matmul_tiled", "c -march=native -fast-math-contract -num-cores=" + std::to_string(cores) +
                            (bounds_check ? " -bounds-check" : ""));
    Function f = m.GetFunction("matmul_tiled");
    Tensor a = RandomTensor({s, s}, 1), b = RandomTensor({s, s}, 2), c = RandomTensor({s, s}, 3);
    for (auto _ : state) {
      f(s, s, s, a.dl(), b.dl(), c.dl());
      benchmark::ClobberMemory();
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * s * s * s * static_cast<double>(state.iterations()),
                           benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  });
}
void BM_MatmulTiled_C_1Core(benchmark::State& state) { MatmulTiled(state, 1); }
void BM_MatmulTiled_C_AllCores(benchmark::State& state) { MatmulTiled(state, AllCores()); }
void BM_MatmulTiled_C_1Core_BoundsCheck(benchmark::State& state) { MatmulTiled(state, 1, true); }
BENCHMARK(BM_MatmulTiled_C_1Core)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulTiled_C_1Core_BoundsCheck)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulTiled_C_AllCores)->Unit(benchmark::kMillisecond)->UseRealTime();

void Sgemm(benchmark::State& state, int threads) {
  const int s = static_cast<int>(kMatmulSide);
  openblas_set_num_threads(threads);
  std::vector<float> a(static_cast<size_t>(s) * s), b(a.size()), c(a.size());
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> dist(0.5f, 1.0f);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, a.data(), s, b.data(), s,
                0.0f, c.data(), s);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * s * s * s * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  // The kernel OpenBLAS picked: in a VM whose CPUID it misreads it runs its SSE3 one
  // ("Prescott") on an AVX-512 machine, 4-7x below its best; OPENBLAS_CORETYPE=SkylakeX (or
  // Haswell) sets it (docs/performance.md).
  state.SetLabel(std::string("OpenBLAS core ") + openblas_get_corename());
}
void BM_Sgemm_OpenBLAS_1Thread(benchmark::State& state) { Sgemm(state, 1); }
void BM_Sgemm_OpenBLAS_AllThreads(benchmark::State& state) { Sgemm(state, AllCores()); }
BENCHMARK(BM_Sgemm_OpenBLAS_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sgemm_OpenBLAS_AllThreads)->Unit(benchmark::kMillisecond)->UseRealTime();

// The ratio itself, on a shared machine whose speed drifts from second to second: each
// iteration runs OpenBLAS's sgemm and then matmul_tiled on the same inputs (1024^3, `threads`
// threads for both) and times each; the counter is the median over iterations of sgemm's time
// over matmul_tiled's, so both sides of each pair ran at the same moment (1: as fast as
// OpenBLAS). Item 10's goal is 0.9. The label names OpenBLAS's kernel.
void MatmulTiledOverSgemm(benchmark::State& state, int threads) {
  Guarded(state, [&] {
    const int s = static_cast<int>(kMatmulSide);
    Module m = BuildKernel("matmul_tiled", "c -march=native -fast-math-contract -num-cores=" +
                                               std::to_string(threads));
    Function f = m.GetFunction("matmul_tiled");
    Tensor a = RandomTensor({s, s}, 1), b = RandomTensor({s, s}, 2), c = RandomTensor({s, s}, 3);
    std::vector<float> ha(a.NumElements()), hb(ha.size()), hc(ha.size());
    a.CopyToBytes(ha.data(), ha.size() * sizeof(float));
    b.CopyToBytes(hb.data(), hb.size() * sizeof(float));
    openblas_set_num_threads(threads);
    std::vector<double> ratios;
    using Clock = std::chrono::steady_clock;
    for (auto _ : state) {
      const auto t0 = Clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, ha.data(), s, hb.data(),
                  s, 0.0f, hc.data(), s);
      const auto t1 = Clock::now();
      f(s, s, s, a.dl(), b.dl(), c.dl());
      const auto t2 = Clock::now();
      benchmark::ClobberMemory();
      ratios.push_back(std::chrono::duration<double>(t1 - t0).count() /
                       std::chrono::duration<double>(t2 - t1).count());
    }
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    state.counters["sgemm/ours"] = ratios[ratios.size() / 2];
    state.SetLabel(std::string("OpenBLAS core ") + openblas_get_corename());
  });
}
void BM_MatmulTiled_Over_Sgemm_1Core(benchmark::State& state) { MatmulTiledOverSgemm(state, 1); }
void BM_MatmulTiled_Over_Sgemm_AllCores(benchmark::State& state) {
  MatmulTiledOverSgemm(state, AllCores());
}
BENCHMARK(BM_MatmulTiled_Over_Sgemm_1Core)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulTiled_Over_Sgemm_AllCores)->Unit(benchmark::kMillisecond)->UseRealTime();

// A parallel kernel against the same kernel serial, in the same run, under
// the OpenMP settings in effect (Backplane's, docs/performance.md "OpenMP: waiting and
// binding", unless the environment sets them; the label says which). The catalog's naive
// matmul (rows in parallel) for the default Target `c` (every core, one OpenMP region a call)
// and for `c -num-cores=1` (a plain loop), at a small and a medium size. Wall time: the
// parallel side's work is on other threads too.
void MatmulNaive(benchmark::State& state, int64_t side, bool parallel) {
  Guarded(state, [&] {
    Module m = BuildKernel("matmul", parallel ? "c" : "c -num-cores=1");
    Function f = m.GetFunction("matmul");
    Tensor a = RandomTensor({side, side}, 1), b = RandomTensor({side, side}, 2),
           c = RandomTensor({side, side}, 3);
    for (auto _ : state) {
      f(side, side, side, a.dl(), b.dl(), c.dl());
      benchmark::ClobberMemory();
    }
    const backplane::DeviceAPI cpu = backplane::DeviceAPI::Get(Cpu());
    auto property = [&cpu](const char* key) { return cpu.GetProperty(key).AsString(); };
    state.SetLabel("OpenMP wait " + property("openmp_wait_policy") + " (" +
                   property("openmp_wait_policy_from") + "), bind " + property("openmp_proc_bind") +
                   " (" + property("openmp_proc_bind_from") + ")");
  });
}
void BM_MatmulSmall_C_1Core(benchmark::State& state) {
  MatmulNaive(state, kMatmulSmallSide, false);
}
void BM_MatmulSmall_C_AllCores(benchmark::State& state) {
  MatmulNaive(state, kMatmulSmallSide, true);
}
void BM_MatmulMedium_C_1Core(benchmark::State& state) {
  MatmulNaive(state, kMatmulMediumSide, false);
}
void BM_MatmulMedium_C_AllCores(benchmark::State& state) {
  MatmulNaive(state, kMatmulMediumSide, true);
}
BENCHMARK(BM_MatmulSmall_C_1Core)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MatmulSmall_C_AllCores)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MatmulMedium_C_1Core)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulMedium_C_AllCores)->Unit(benchmark::kMillisecond)->UseRealTime();

// vector_add's IR with a constant that changes every time, so the source is new to the
// cache and the compiler runs.
std::string UniqueVectorAdd() {
  static std::atomic<uint64_t> serial{0};
  const uint64_t k = serial.fetch_add(1) + static_cast<uint64_t>(std::random_device{}()) * 1000;
  return "# backplane-ir 1\n\nfunc vector_add(n: int32, a: buffer<float32>[n], b: "
         "buffer<float32>[n], c: buffer<float32>[n]) {\n  for i in parallel(0, n) {\n    "
         "c[i] = a[i] + b[i] + " +
         std::to_string(k % 1000000) + ".0\n  }\n}\n";
}

void BM_BuildC_Cold(benchmark::State& state) {
  Guarded(state, [&] {
    Target t = Target::Parse("c");
    for (auto _ : state) {
      state.PauseTiming();
      const std::string ir = UniqueVectorAdd();
      state.ResumeTiming();
      Module m = backplane::Build(ir, t);
      benchmark::DoNotOptimize(m.GetFunction("vector_add"));
    }
  });
}
BENCHMARK(BM_BuildC_Cold)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_BuildC_Cached(benchmark::State& state) {
  Guarded(state, [&] {
    Target t = Target::Parse("c");
    const std::string ir = UniqueVectorAdd();
    backplane::Build(ir, t);  // the first build compiles and fills the cache
    for (auto _ : state) {
      Module m = backplane::Build(ir, t);
      benchmark::DoNotOptimize(m.GetFunction("vector_add"));
    }
  });
}
BENCHMARK(BM_BuildC_Cached)->Unit(benchmark::kMillisecond);

}  // namespace
