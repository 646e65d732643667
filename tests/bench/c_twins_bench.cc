// SPDX-License-Identifier: Apache-2.0
// Each CPU kernel of the catalog built by the c target against the same loops
// written in C (c_twins.c) and compiled by the system compiler at -O3 -march=native, in the same
// run, on the catalog's demo sizes, all cores. The kernels are built with `c -march=native`
// (no contraction, as the twins' -ffp-contract=off): the ratio twin time / Backplane time is
// the code generator's cost or gain on the very same loops (docs/performance.md, "Generated C
// against the same loops in C").
#include <benchmark/benchmark.h>

#include <algorithm>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include "c_twins.h"
}

namespace {

namespace kernels = backplane::kernels;
using backplane::Device;
using backplane::Module;

// The arguments of a kernel as the twin takes them: scalars by name, buffers as float32 tensors
// on cpu:0, allocated as the kernel's are (the same allocator, alignment and pages: a
// memory-bound pair such as sum compared differently placed buffers when the twin's were
// std::vectors).
struct HostArgs {
  std::map<std::string, double> scalar;
  std::map<std::string, backplane::Tensor> buffer;
  float* operator[](const std::string& name) {
    const DLTensor* t = buffer.at(name).dl();
    return reinterpret_cast<float*>(static_cast<char*>(t->data) + t->byte_offset);
  }
  int32_t I(const std::string& name) const { return static_cast<int32_t>(scalar.at(name)); }
};

HostArgs HostCopy(const std::vector<kernels::Arg>& args) {
  HostArgs h;
  for (const kernels::Arg& a : args) {
    if (!a.is_buffer) {
      h.scalar[a.name] = a.scalar;
      continue;
    }
    const std::vector<float> v(a.data.begin(), a.data.end());
    backplane::Tensor t = backplane::Tensor::Empty(
        {static_cast<int64_t>(v.size())}, DLDataType{kDLFloat, 32, 1}, Device(DLDevice{kDLCPU, 0}));
    t.CopyFrom(v);
    h.buffer.emplace(a.name, std::move(t));
  }
  return h;
}

using Twin = std::function<void(HostArgs&)>;
const std::map<std::string, Twin>& Twins() {
  static const std::map<std::string, Twin> twins = {
      {"vector_add", [](HostArgs& a) { twin_vector_add(a.I("n"), a["a"], a["b"], a["c"]); }},
      {"saxpy",
       [](HostArgs& a) {
         twin_saxpy(a.I("n"), static_cast<float>(a.scalar.at("alpha")), a["x"], a["y"]);
       }},
      {"sum", [](HostArgs& a) { twin_sum(a.I("n"), a["x"], a["out"]); }},
      {"softmax", [](HostArgs& a) { twin_softmax(a.I("rows"), a.I("cols"), a["x"], a["y"]); }},
      {"matmul",
       [](HostArgs& a) { twin_matmul(a.I("m"), a.I("n"), a.I("k"), a["a"], a["b"], a["c"]); }},
      {"matmul_tiled",
       [](HostArgs& a) {
         twin_matmul_tiled(a.I("m"), a.I("n"), a.I("k"), a["a"], a["b"], a["c"]);
       }},
      {"transpose", [](HostArgs& a) { twin_transpose(a.I("m"), a.I("n"), a["a"], a["b"]); }},
      {"conv2d",
       [](HostArgs& a) {
         twin_conv2d(a.I("batch"), a.I("c_in"), a.I("c_out"), a.I("h"), a.I("w"), a.I("kh"),
                     a.I("kw"), a.I("pad"), a["x"], a["f"], a["y"]);
       }},
  };
  return twins;
}

const kernels::Case& CaseOf(const std::string& func) {
  const kernels::Case* c = kernels::Find(func);
  if (c == nullptr) throw std::runtime_error("no catalog kernel " + func);
  return *c;
}

// The kernel built by the c target, ready to call on its demo arguments.
struct BackplaneSide {
  Module module;
  std::vector<kernels::Arg> args;
  std::unique_ptr<backplane::runner::DeviceArgs> dargs;
  backplane::Function f;

  explicit BackplaneSide(const std::string& func) {
    const kernels::Case& c = CaseOf(func);
    module = backplane::Build(backplane::runner::KernelSource(c),
                              backplane::Target::Parse("c -march=native"));
    args = c.make_args(c.demo, 21);
    dargs = std::make_unique<backplane::runner::DeviceArgs>(args, Device(DLDevice{kDLCPU, 0}));
    f = module.GetFunction(func);
  }
  void Run() const {
    f.CallPacked(dargs->values().data(), static_cast<int32_t>(dargs->values().size()));
    backplane::Check(bp_device_stream_sync(DLDevice{kDLCPU, 0}, nullptr));
  }
};

// The twin on the same demo arguments, after checking once that it computes what the Backplane
// kernel computes (the same loops: the outputs agree within the catalog's tolerance).
struct TwinSide {
  HostArgs h;
  const Twin* twin = nullptr;

  explicit TwinSide(const std::string& func) {
    const kernels::Case& c = CaseOf(func);
    std::vector<kernels::Arg> args = c.make_args(c.demo, 21);
    std::vector<kernels::Arg> want = args;
    c.reference(want);
    h = HostCopy(args);
    twin = &Twins().at(func);
    (*twin)(h);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_output) continue;
      kernels::Arg got = args[i];
      const std::vector<float> v = h.buffer.at(args[i].name).ToVector<float>();
      got.data.assign(v.begin(), v.end());
      const double e = kernels::RelativeError(got, want[i]);
      if (!(e <= c.tolerance))
        throw std::runtime_error("the C twin of " + func + " is off the reference by " +
                                 std::to_string(e));
    }
  }
  void Run() {
    (*twin)(h);
    benchmark::ClobberMemory();
  }
};

void Backplane(benchmark::State& state, const std::string& func) {
  try {
    const BackplaneSide side(func);
    for (auto _ : state) side.Run();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void TwinC(benchmark::State& state, const std::string& func) {
  try {
    TwinSide side(func);
    for (auto _ : state) side.Run();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Seconds a batch of `calls` calls of `run` takes.
template <typename Run>
double TimeBatch(Run&& run, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The two sides in alternating batches: each iteration is one pair (a batch of Backplane
// calls and one of the twin's, of at least 20 ms each, the order swapped every pair), and the
// counter `ratio` is the median over the pairs of twin time / Backplane time. This machine's
// speed drifts within seconds; two runs far apart in time compare the drift, a pair a few
// milliseconds apart does not (docs/performance.md, "Generated C against the same loops in C").
void Pairs(benchmark::State& state, const std::string& func) {
  try {
    const BackplaneSide bp(func);
    TwinSide c(func);
    bp.Run();  // warm: pages touched, the OpenMP pool up
    c.Run();
    const double once = std::max(TimeBatch([&] { bp.Run(); }, 1), 1e-6);
    const int calls = std::max(1, static_cast<int>(0.02 / once));
    std::vector<double> ratios, bp_seconds, c_seconds;
    bool twin_first = false;
    for (auto _ : state) {
      double tb = 0, tc = 0;
      if (twin_first) {
        tc = TimeBatch([&] { c.Run(); }, calls);
        tb = TimeBatch([&] { bp.Run(); }, calls);
      } else {
        tb = TimeBatch([&] { bp.Run(); }, calls);
        tc = TimeBatch([&] { c.Run(); }, calls);
      }
      twin_first = !twin_first;
      ratios.push_back(tc / tb);
      bp_seconds.push_back(tb / calls);
      c_seconds.push_back(tc / calls);
    }
    if (!ratios.empty()) {
      state.counters["ratio"] = Median(ratios);
      state.counters["backplane_ms"] = Median(bp_seconds) * 1e3;
      state.counters["c_ms"] = Median(c_seconds) * 1e3;
      state.counters["calls_a_batch"] = calls;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void Register() {
  for (const auto& [func, twin] : Twins()) {
    (void)twin;
    benchmark::RegisterBenchmark(("BM_Twin_" + func + "_Backplane").c_str(), Backplane, func)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Twin_" + func + "_C_O3").c_str(), TwinC, func)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Twin_" + func + "_Pairs").c_str(), Pairs, func)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(15)
        ->UseRealTime();
  }
}
const int kRegistered = (Register(), 0);

}  // namespace
