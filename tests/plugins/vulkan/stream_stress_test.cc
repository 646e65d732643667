// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan's streams under threads, on the real loader and driver (lavapipe in CI)
// with the validation layer off, as applications run it. Skips when no Vulkan device exists.
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::DeviceAPI;

constexpr DLDevice kDev{kDLVulkan, 0};

const int kValidationOff = setenv("BACKPLANE_VULKAN_VALIDATION", "0", /*overwrite=*/1);

// Streams created, used and freed on several threads at once while the others' work is in
// flight. Freeing a stream's semaphore as soon as its timeline reached the last value crashed
// lavapipe's queue thread about once in 30 runs of this pattern (the conformance kit's
// device.concurrency.threads); 200 runs of it here crashed the old code in about 3 of 4
// test runs. The validation layer is off in this program: it serialises the driver enough
// to hide the race.
TEST(VulkanStreams, StreamsFreedWhileOthersWorkLeaveTheQueueWhole) {
  if (!DeviceAPI::Get(Device(kDev)).Exists()) {
    GTEST_SKIP() << "no Vulkan device with a compute queue (install mesa-vulkan-drivers for "
                    "lavapipe)";
  }
  (void)kValidationOff;
  constexpr int kThreads = 4, kRuns = 200, kRounds = 8;
  auto last_error = [] {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    return std::string(message != nullptr ? message : "(no message)");
  };
  for (int run = 0; run < kRuns; ++run) {
    std::vector<std::string> problems(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        bp_stream_t s = nullptr;
        if (bp_device_stream_create(kDev, &s) != 0) {
          problems[t] = last_error();
          return;
        }
        for (int i = 0; i < kRounds && problems[t].empty(); ++i) {
          const uint32_t seed = static_cast<uint32_t>((run * kThreads + t) * kRounds + i);
          const size_t n = 1 + (seed * 2654435761u) % 65536;
          const std::vector<uint8_t> src = bptest::RandomBytes(n, seed);
          std::vector<uint8_t> back(n, 0);
          int64_t shape = static_cast<int64_t>(n);
          void* a = nullptr;
          void* b = nullptr;
          if (bp_device_alloc_data_space(kDev, n, 64, backplane::UInt8(), &a) != 0 ||
              bp_device_alloc_data_space(kDev, n, 64, backplane::UInt8(), &b) != 0) {
            problems[t] = last_error();
            break;
          }
          DLTensor host_in =
              bptest::ByteView(const_cast<uint8_t*>(src.data()), bptest::CpuDevice(), &shape, 0);
          DLTensor dev_a = bptest::ByteView(a, kDev, &shape, 0);
          DLTensor dev_b = bptest::ByteView(b, kDev, &shape, 0);
          DLTensor host_out = bptest::ByteView(back.data(), bptest::CpuDevice(), &shape, 0);
          if (bp_device_copy_data_from_to(&host_in, &dev_a, s) != 0 ||
              bp_device_copy_data_from_to(&dev_a, &dev_b, s) != 0 ||
              bp_device_copy_data_from_to(&dev_b, &host_out, s) != 0 ||
              bp_device_stream_sync(kDev, s) != 0 || bp_device_free_data_space(kDev, a) != 0 ||
              bp_device_free_data_space(kDev, b) != 0) {
            problems[t] = last_error();
          } else if (back != src) {
            problems[t] = "round " + std::to_string(i) + " came back different";
          }
        }
        if (bp_device_stream_free(kDev, s) != 0 && problems[t].empty()) problems[t] = last_error();
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(problems[t], "") << "run " << run << ", thread " << t;
    }
  }
}

// One thread of EventsRecordedAndWaitedOnFromThreads: its rounds on a stream of its own, or
// what went wrong.
std::string EventRounds(int run, int t, int threads, const backplane::Event& mine,
                        const backplane::Event& next) {
  constexpr int kRounds = 8;
  return bptest::CaptureError([&] {
           backplane::Stream s{Device(kDev)};
           for (int i = 0; i < kRounds; ++i) {
             const uint32_t seed = static_cast<uint32_t>((run * threads + t) * kRounds + i);
             const size_t n = 1 + (seed * 2654435761u) % 65536;
             const std::vector<uint8_t> src = bptest::RandomBytes(n, seed);
             std::vector<uint8_t> back(n, 0);
             int64_t shape = static_cast<int64_t>(n);
             backplane::Tensor a =
                 backplane::Tensor::Empty({shape}, backplane::UInt8(), Device(kDev));
             DLTensor host_in =
                 bptest::ByteView(const_cast<uint8_t*>(src.data()), bptest::CpuDevice(), &shape, 0);
             DLTensor host_out = bptest::ByteView(back.data(), bptest::CpuDevice(), &shape, 0);
             backplane::Check(bp_device_copy_data_from_to(&host_in, a.dl(), s.handle()));
             mine.Record(s);  // queued, not waited for
             next.MakeWait(s);
             (void)next.Done();
             backplane::Check(bp_device_copy_data_from_to(a.dl(), &host_out, s.handle()));
             s.Sync();
             if (back != src) {
               throw backplane::Error(BP_ERR_DEVICE,
                                      "round " + std::to_string(i) + " came back different");
             }
             if (!mine.Done()) {
               throw backplane::Error(BP_ERR_DEVICE,
                                      "the event is not done after its stream's sync");
             }
           }
         })
      .message;
}

// Events shared between threads: each thread records its own event on its
// own stream after a copy, makes its stream wait for its neighbour's event (recorded again and
// again meanwhile, its stream freed at the end of a run), queries it, and reads its data back;
// then two events of freed streams are timed. Every call on an event takes the device's lock,
// as copies do.
TEST(VulkanStreams, EventsRecordedAndWaitedOnFromThreads) {
  if (!DeviceAPI::Get(Device(kDev)).Exists()) {
    GTEST_SKIP() << "no Vulkan device with a compute queue (install mesa-vulkan-drivers for "
                    "lavapipe)";
  }
  constexpr int kThreads = 4, kRuns = 20;
  for (int run = 0; run < kRuns; ++run) {
    std::vector<backplane::Event> events;
    for (int t = 0; t < kThreads; ++t) events.emplace_back(Device(kDev));
    std::vector<std::string> problems(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        problems[t] = EventRounds(run, t, kThreads, events[t], events[(t + 1) % kThreads]);
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(problems[t], "") << "run " << run << ", thread " << t;
    }
    for (const auto& e : events) EXPECT_TRUE(e.Done()) << "its stream is freed";
    EXPECT_TRUE(std::isfinite(events[1].ElapsedMsSince(events[0])));
  }
}

}  // namespace
