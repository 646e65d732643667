// SPDX-License-Identifier: Apache-2.0
// A registry function with 3 integer arguments, called through the C ABI and through the
// C++ host API, against a direct (not inlined) C++ call of the same body.
#include <backplane/c_api.h>
#include <benchmark/benchmark.h>

#include <backplane/backplane.hpp>
#include <cstdint>

#include "add3.h"
#include "bench_pairs.h"
#include "tvm_ffi.h"

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

// The peer: the same body registered with Apache tvm-ffi and called through its C ABI
// (TVMFFIFunctionCall), its arguments built once outside the loop as in BM_FunctionCall_CAbi.
int Add3TvmFfi(void*, const benchwork::tvmffi::Any* args, int32_t num_args,
               benchwork::tvmffi::Any* result) {
  using benchwork::tvmffi::kInt;
  if (num_args != 3 || args[0].type_index != kInt || args[1].type_index != kInt ||
      args[2].type_index != kInt) {
    return -1;
  }
  result->type_index = kInt;
  result->zero_padding = 0;
  result->v_int64 = Add3(args[0].v_int64, args[1].v_int64, args[2].v_int64);
  return 0;
}

void BM_FunctionCall_TvmFfi(benchmark::State& state) {
  namespace tvmffi = benchwork::tvmffi;
  const tvmffi::Library& lib = tvmffi::Load();
  if (!lib.error.empty()) {
    state.SkipWithError(lib.error.c_str());
    return;
  }
  void* func = nullptr;
  if (lib.function_create(nullptr, &Add3TvmFfi, nullptr, &func) != 0) {
    state.SkipWithError("TVMFFIFunctionCreate failed");
    return;
  }
  tvmffi::Any args[3];
  for (int i = 0; i < 3; ++i) {
    args[i].type_index = tvmffi::kInt;
    args[i].zero_padding = 0;
    args[i].v_int64 = i + 1;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(args);
    tvmffi::Any result;
    result.type_index = tvmffi::kNone;  // what tvm-ffi asks of its caller
    result.zero_padding = 0;
    result.v_int64 = 0;
    int st = lib.function_call(func, args, 3, &result);
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(result);
  }
  tvmffi::Any result{tvmffi::kNone, 0, {0}};
  if (lib.function_call(func, args, 3, &result) != 0 || result.v_int64 != 6) {
    state.SkipWithError("add3 through TVMFFIFunctionCall did not return 6");
  }
  lib.object_dec_ref(func);
}
// Registered only where tvm-ffi is found: elsewhere the pair shows why it did not run.
const bool kTvmFfiRegistered = backplane::bench::RegisterIfAvailable(
    "BM_FunctionCall_TvmFfi", benchwork::tvmffi::Load().error, [] {
      benchmark::RegisterBenchmark("BM_FunctionCall_TvmFfi", BM_FunctionCall_TvmFfi)
          ->Unit(benchmark::kNanosecond);
    });

}  // namespace
