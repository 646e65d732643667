// SPDX-License-Identifier: Apache-2.0
// The benchmark pairs of issue 2: each Backplane path is measured next to a baseline in the
// same run and reported as a ratio, with its goal. bench_main.cc prints the summary.
#ifndef BACKPLANE_TESTS_BENCH_BENCH_PAIRS_H_
#define BACKPLANE_TESTS_BENCH_BENCH_PAIRS_H_

#include <cstddef>

namespace backplane::bench {

// How a pair is compared.
enum class Measure {
  kTimePerCall,  // nanoseconds per iteration; the goal is an upper bound in ns
  kBandwidth,    // bytes per second; the goal is a lower bound on Backplane / baseline
  kElapsedTime,  // milliseconds per iteration; the goal is an upper bound in ms
};

struct Pair {
  const char* label;      // what is measured, for the summary
  const char* benchmark;  // the Backplane benchmark's name
  const char* baseline;   // the baseline benchmark's name
  const char* baseline_label;
  Measure measure;
  double goal;   // ns, fraction of baseline, or ms (see Measure)
  size_t bytes;  // bytes moved per iteration (kBandwidth only)
};

// Bytes per host→device copy.
constexpr size_t kCopyBytes = size_t{64} << 20;
// Workspace request size.
constexpr size_t kWorkspaceBytes = 4096;

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
};

}  // namespace backplane::bench

#endif  // BACKPLANE_TESTS_BENCH_BENCH_PAIRS_H_
