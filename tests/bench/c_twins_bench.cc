// SPDX-License-Identifier: Apache-2.0
// Issue 21, item 11: each CPU kernel of the catalog built by the c target against the same loops
// written in C (c_twins.c) and compiled by the system compiler at -O3 -march=native, in the same
// run, on the catalog's demo sizes, all cores. The kernels are built with `c -march=native`
// (no contraction, as the twins' -ffp-contract=off): the ratio twin time / Backplane time is
// the code generator's cost or gain on the very same loops (docs/performance.md, "Generated C
// against the same loops in C").
#include <benchmark/benchmark.h>

#include <backplane/runner/runner.hpp>
#include <cstring>
#include <functional>
#include <map>
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

void Backplane(benchmark::State& state, const std::string& func) {
  try {
    const kernels::Case& c = CaseOf(func);
    const Module m = backplane::Build(backplane::runner::KernelSource(c),
                                      backplane::Target::Parse("c -march=native"));
    std::vector<kernels::Arg> args = c.make_args(c.demo, 21);
    const backplane::runner::DeviceArgs dargs(args, Device(DLDevice{kDLCPU, 0}));
    const backplane::Function f = m.GetFunction(func);
    for (auto _ : state) {
      f.CallPacked(dargs.values().data(), static_cast<int32_t>(dargs.values().size()));
      backplane::Check(bp_device_stream_sync(DLDevice{kDLCPU, 0}, nullptr));
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The twin, after checking once that it computes what the Backplane kernel computes (the same
// loops: the outputs agree within the catalog's tolerance).
void TwinC(benchmark::State& state, const std::string& func) {
  try {
    const kernels::Case& c = CaseOf(func);
    std::vector<kernels::Arg> args = c.make_args(c.demo, 21);
    std::vector<kernels::Arg> want = args;
    c.reference(want);
    HostArgs h = HostCopy(args);
    const Twin& twin = Twins().at(func);
    twin(h);
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
    for (auto _ : state) {
      twin(h);
      benchmark::ClobberMemory();
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
  }
}
const int kRegistered = (Register(), 0);

}  // namespace
