// SPDX-License-Identifier: Apache-2.0
// CPU workspace alloc+free through the core (bp_device_alloc_workspace) against malloc+free.
#include <backplane/c_api.h>
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "bench_pairs.h"

namespace {

using backplane::bench::kWorkspaceBytes;

void BM_Malloc_Free(benchmark::State& state) {
  for (auto _ : state) {
    void* p = std::malloc(kWorkspaceBytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_Malloc_Free)->Unit(benchmark::kNanosecond);

void BM_Workspace_AllocFree(benchmark::State& state) {
  const DLDevice cpu{kDLCPU, 0};
  const DLDataType u8{kDLUInt, 8, 1};
  void* warm = nullptr;
  // The first call loads the cpu plugin; keep that out of the timing.
  if (bp_device_alloc_workspace(cpu, kWorkspaceBytes, u8, &warm) != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    state.SkipWithError(message != nullptr ? message : "cpu workspace unavailable");
    return;
  }
  bp_device_free_workspace(cpu, warm);
  for (auto _ : state) {
    void* p = nullptr;
    bp_status_t st = bp_device_alloc_workspace(cpu, kWorkspaceBytes, u8, &p);
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(p);
    bp_device_free_workspace(cpu, p);
  }
}
BENCHMARK(BM_Workspace_AllocFree)->Unit(benchmark::kNanosecond);

}  // namespace
