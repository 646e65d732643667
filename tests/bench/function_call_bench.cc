// SPDX-License-Identifier: Apache-2.0
// A registry function with 3 integer arguments, called through the C ABI and through the
// C++ host API, against a direct (not inlined) C++ call of the same body.
#include <backplane/c_api.h>
#include <benchmark/benchmark.h>

#include <backplane/backplane.hpp>
#include <cstdint>

#include "add3.h"

namespace {

using benchwork::Add3;
using benchwork::Add3Packed;

constexpr const char* kFunctionName = "bench.add3";

// Registers bench.add3 once and returns it from the registry (owned by the caller).
bp_object_t* GetAdd3(benchmark::State& state) {
  const bp_host_api_t* api = bp_host_api();
  static bool registered = [api] {
    bp_object_t* func = nullptr;
    // Add3Packed never throws and sets a message on its one failure: a contained body, as the
    // SDK's are (BP_FUNCTION_CONTAINED, ABI 1.7).
    if (api->function_create_with_flags(&Add3Packed, nullptr, nullptr, BP_FUNCTION_CONTAINED,
                                        &func) != BP_OK) {
      return false;
    }
    bp_status_t st = api->registry_set(kFunctionName, func, /*allow_override=*/1);
    api->object_release(func);
    return st == BP_OK;
  }();
  bp_object_t* func = nullptr;
  if (!registered || api->registry_get(kFunctionName, &func) != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    state.SkipWithError(message != nullptr ? message : "cannot register bench.add3");
    return nullptr;
  }
  return func;
}

void BM_FunctionCall_Direct(benchmark::State& state) {
  int64_t a = 1, b = 2, c = 3;
  for (auto _ : state) {
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    benchmark::DoNotOptimize(c);
    int64_t r = Add3(a, b, c);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_FunctionCall_Direct)->Unit(benchmark::kNanosecond);

void BM_FunctionCall_CAbi(benchmark::State& state) {
  bp_object_t* func = GetAdd3(state);
  if (func == nullptr) return;
  const bp_host_api_t* api = bp_host_api();
  bp_value_t args[3];
  for (int i = 0; i < 3; ++i) {
    args[i].type = BP_VALUE_INT;
    args[i].reserved0 = 0;
    args[i].u.v_int64 = i + 1;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(args);
    bp_value_t result;
    bp_status_t st = api->function_call(func, args, 3, &result);
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(result);
  }
  // One checked call outside the loop: the loop must have measured a working call.
  bp_value_t result;
  if (api->function_call(func, args, 3, &result) != BP_OK || result.type != BP_VALUE_INT ||
      result.u.v_int64 != 6) {
    state.SkipWithError("bench.add3 through bp_function_call did not return 6");
  }
  api->object_release(func);
}
BENCHMARK(BM_FunctionCall_CAbi)->Unit(benchmark::kNanosecond);

void BM_FunctionCall_Cpp(benchmark::State& state) {
  bp_object_t* func = GetAdd3(state);
  if (func == nullptr) return;
  backplane::Function f(backplane::ObjectRef::Adopt(func));
  int64_t a = 1, b = 2, c = 3;
  try {
    for (auto _ : state) {
      benchmark::DoNotOptimize(a);
      backplane::Any r = f(a, b, c);
      benchmark::DoNotOptimize(r.raw());
    }
    if (f(a, b, c).AsInt() != 6) state.SkipWithError("bench.add3 did not return 6");
  } catch (const backplane::Error& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_FunctionCall_Cpp)->Unit(benchmark::kNanosecond);

}  // namespace
