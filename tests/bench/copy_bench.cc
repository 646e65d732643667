// SPDX-License-Identifier: Apache-2.0
// 64 MiB host -> cpu:0 copies through bp_device_copy_data_from_to against memcpy between the
// same two buffers.
#include <backplane/c_api.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench_pairs.h"

namespace {

using backplane::bench::kCopyBytes;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// The source, in host memory, filled (so its pages exist) once for the process.
uint8_t* HostSource() {
  static std::unique_ptr<void, FreeDeleter> buffer = [] {
    void* p = std::aligned_alloc(64, kCopyBytes);
    if (p != nullptr) std::memset(p, 0x5A, kCopyBytes);
    return std::unique_ptr<void, FreeDeleter>(p);
  }();
  return static_cast<uint8_t*>(buffer.get());
}

DLTensor BytesTensor(void* data, DLDevice dev, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

void SkipWithLastError(benchmark::State& state, const char* fallback) {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  state.SkipWithError(message != nullptr ? message : fallback);
}

void BM_Memcpy_64MiB(benchmark::State& state) {
  uint8_t* src = HostSource();
  std::unique_ptr<void, FreeDeleter> dst(std::aligned_alloc(64, kCopyBytes));
  if (src == nullptr || dst == nullptr) {
    state.SkipWithError("cannot allocate 2 x 64 MiB of host memory");
    return;
  }
  std::memset(dst.get(), 0, kCopyBytes);
  for (auto _ : state) {
    std::memcpy(dst.get(), src, kCopyBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kCopyBytes));
}
BENCHMARK(BM_Memcpy_64MiB)->Unit(benchmark::kMillisecond);

void BM_Copy_HostToCpu_64MiB(benchmark::State& state) {
  const DLDevice cpu{kDLCPU, 0};
  uint8_t* src = HostSource();
  if (src == nullptr) {
    state.SkipWithError("cannot allocate 64 MiB of host memory");
    return;
  }
  void* dst = nullptr;
  if (bp_device_alloc_data_space(cpu, kCopyBytes, 64, DLDataType{kDLUInt, 8, 1}, &dst) != BP_OK) {
    SkipWithLastError(state, "cannot allocate 64 MiB on cpu:0");
    return;
  }
  int64_t shape[1] = {static_cast<int64_t>(kCopyBytes)};
  DLTensor from = BytesTensor(src, DLDevice{kDLCPU, 0}, shape);
  DLTensor to = BytesTensor(dst, cpu, shape);
  // One untimed copy touches every destination page, as memset does for the baseline.
  if (bp_device_copy_data_from_to(&from, &to, nullptr) != BP_OK ||
      bp_device_stream_sync(cpu, nullptr) != BP_OK) {
    SkipWithLastError(state, "copy to cpu:0 failed");
    bp_device_free_data_space(cpu, dst);
    return;
  }
  for (auto _ : state) {
    bp_status_t st = bp_device_copy_data_from_to(&from, &to, nullptr);
    st |= bp_device_stream_sync(cpu, nullptr);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kCopyBytes));
  if (std::memcmp(dst, src, kCopyBytes) != 0) state.SkipWithError("cpu:0 copy is wrong");
  bp_device_free_data_space(cpu, dst);
}
BENCHMARK(BM_Copy_HostToCpu_64MiB)->Unit(benchmark::kMillisecond);

}  // namespace
