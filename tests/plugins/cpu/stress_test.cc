// SPDX-License-Identifier: Apache-2.0
// 8 threads x 10,000 rounds of alloc / copy in / copy out / compare / free on the CPU device,
// with workspace traffic mixed in. Run under the asan preset it also proves no leaks.
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "plugins/test_util.h"

namespace {

const DLDevice kCpu0{kDLCPU, 0};

TEST(CpuStress, EightThreadsTenThousandRounds) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 10000;
  std::atomic<int> mismatches{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000u + static_cast<uint32_t>(t));
      std::vector<uint8_t> src(4096 + 64), dst(4096 + 64);
      for (int round = 0; round < kRounds; ++round) {
        const size_t n = 1 + rng() % 4096;
        const uint64_t off = rng() % 64;
        for (size_t i = 0; i < n; i += 4) {
          const uint32_t r = static_cast<uint32_t>(rng());
          std::memcpy(&src[i], &r, std::min<size_t>(4, n - i));
        }
        void* data = nullptr;
        void* ws = nullptr;
        if (bp_device_alloc_data_space(kCpu0, n + off, 64, backplane::UInt8(), &data) != BP_OK ||
            bp_device_alloc_workspace(kCpu0, n, backplane::UInt8(), &ws) != BP_OK) {
          errors.fetch_add(1);
          continue;
        }
        int64_t shape = static_cast<int64_t>(n);
        DLTensor host_in = bptest::ByteView(src.data(), kCpu0, &shape, 0);
        DLTensor dev = bptest::ByteView(data, kCpu0, &shape, off);
        DLTensor scratch = bptest::ByteView(ws, kCpu0, &shape, 0);
        DLTensor host_out = bptest::ByteView(dst.data(), kCpu0, &shape, 0);
        if (bp_device_copy_data_from_to(&host_in, &dev, nullptr) != BP_OK ||
            bp_device_copy_data_from_to(&dev, &scratch, nullptr) != BP_OK ||
            bp_device_copy_data_from_to(&scratch, &host_out, nullptr) != BP_OK ||
            bp_device_stream_sync(kCpu0, nullptr) != BP_OK) {
          errors.fetch_add(1);
        } else if (std::memcmp(src.data(), dst.data(), n) != 0) {
          mismatches.fetch_add(1);
        }
        if (bp_device_free_workspace(kCpu0, ws) != BP_OK ||
            bp_device_free_data_space(kCpu0, data) != BP_OK) {
          errors.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
