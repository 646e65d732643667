// SPDX-License-Identifier: Apache-2.0
// The packed call of BM_FunctionCall_CAbi and BM_FunctionCall_Cpp (function_call_bench.cc), N
// times, for counting instructions where perf has no hardware counters: run it under valgrind's
// callgrind with N and 2N calls, and the difference over N is one call, loop included
// (docs/performance.md, "Packed call").
//
//   bench_function_call_count c|cpp N
#include <backplane/c_api.h>

#include <backplane/backplane.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "add3.h"

namespace {

using benchwork::Add3;
using benchwork::Add3Packed;

// benchmark::DoNotOptimize's effect: the value is used and memory is clobbered.
template <typename T>
void Keep(T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "c") != 0 && std::strcmp(argv[1], "cpp") != 0)) {
    std::fprintf(stderr, "usage: %s c|cpp N\n", argv[0]);
    return 2;
  }
  const bool cpp = std::strcmp(argv[1], "cpp") == 0;
  const long n = std::atol(argv[2]);
  const bp_host_api_t* api = bp_host_api();
  bp_object_t* func = nullptr;
  if (api->function_create_with_flags(&Add3Packed, nullptr, nullptr, BP_FUNCTION_CONTAINED,
                                      &func) != BP_OK) {
    return 1;
  }
  int64_t sum = 0;
  if (!cpp) {
    bp_value_t args[3];
    for (int i = 0; i < 3; ++i) {
      args[i].type = BP_VALUE_INT;
      args[i].reserved0 = 0;
      args[i].u.v_int64 = i + 1;
    }
    for (long i = 0; i < n; ++i) {
      Keep(args);
      bp_value_t result;
      bp_status_t st = api->function_call(func, args, 3, &result);
      Keep(st);
      Keep(result);
      sum += result.u.v_int64;
    }
    api->object_release(func);
  } else {
    backplane::Function f(backplane::ObjectRef::Adopt(func));
    int64_t a = 1, b = 2, c = 3;
    for (long i = 0; i < n; ++i) {
      Keep(a);
      backplane::Any r = f(a, b, c);
      Keep(r.raw());
      sum += r.raw().u.v_int64;
    }
  }
  std::printf("%lld\n", static_cast<long long>(sum));
  return sum == 6 * static_cast<int64_t>(n) ? 0 : 1;
}
