// SPDX-License-Identifier: Apache-2.0
// The simulated accelerator's streams: copies are queued and run later on worker threads, so
// these tests prove that the host side of a copy is read before the call returns, that
// stream_sync waits, and that sync_stream_from_to orders two streams. Ordering is made
// visible with simaccel_testing.stream_hold, which parks a stream's worker, not with timing.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "simaccel_util.h"

namespace {

using bptest::Capture;
using bptest::SimAccelTest;

TEST_F(SimAccelTest, HostToDeviceSnapshotsTheHostBuffer) {
  const auto data = bptest::RandomBytes(4096, 1);
  std::vector<uint8_t> host = data;
  void* d = Alloc(0, host.size());
  Hold(0, nullptr);
  ToDevice(host.data(), 0, d, host.size());
  // The copy has not run (the stream is parked); reusing the buffer now must be safe.
  std::fill(host.begin(), host.end(), 0xEE);
  Release(0, nullptr);
  std::vector<uint8_t> back(host.size());
  ToHost(0, d, back.data(), back.size());
  Sync(0);
  EXPECT_EQ(back, data);
  Free(0, d);
}

TEST_F(SimAccelTest, DeviceToHostIsCompleteOnlyAfterStreamSync) {
  const auto data = bptest::RandomBytes(1000, 2);
  void* d = Alloc(1, data.size());
  ToDevice(data.data(), 1, d, data.size());
  Sync(1);
  std::vector<uint8_t> out(data.size(), 0);
  Hold(1, nullptr);
  ToHost(1, d, out.data(), out.size());
  // Parked: the copy is queued, not done. A backend that copied synchronously fails here.
  EXPECT_EQ(out, std::vector<uint8_t>(data.size(), 0));
  Release(1, nullptr);
  Sync(1);
  EXPECT_EQ(out, data);
  Free(1, d);
}

TEST_F(SimAccelTest, StreamSyncWaitsForDelayedWork) {
  backplane::Function::Get("simaccel_testing.set_delay_us")(20000);
  backplane::Stream s(Device(0));
  ASSERT_NE(s.handle(), nullptr);
  const auto data = bptest::RandomBytes(512, 3);
  void* d = Alloc(0, data.size());
  std::vector<uint8_t> out(data.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  ToDevice(data.data(), 0, d, data.size(), 0, s.handle());
  ToHost(0, d, out.data(), out.size(), 0, s.handle());
  s.Sync();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out, data);
  EXPECT_GE(waited, std::chrono::milliseconds(40)) << "two delayed items ran in less time";
  Free(0, d);
}

// Without sync_stream_from_to, a second stream runs ahead of the first: the control case
// that shows the ordering test below can fail.
TEST_F(SimAccelTest, StreamsAreIndependentWithoutSync) {
  backplane::Stream s1(Device(0)), s2(Device(0));
  const auto old_data = bptest::RandomBytes(256, 4);
  const auto new_data = bptest::RandomBytes(256, 5);
  void* x = Alloc(0, 256);
  ToDevice(old_data.data(), 0, x, 256);
  Sync(0);
  Hold(0, s1.handle());
  ToDevice(new_data.data(), 0, x, 256, 0, s1.handle());
  std::vector<uint8_t> out(256);
  ToHost(0, x, out.data(), 256, 0, s2.handle());
  s2.Sync();  // s2 does not wait for the parked s1
  EXPECT_EQ(out, old_data);
  Release(0, s1.handle());
  s1.Sync();
  Free(0, x);
}

TEST_F(SimAccelTest, SyncStreamFromToOrdersTheDestinationAfterTheSource) {
  backplane::Stream s1(Device(0)), s2(Device(0));
  const auto old_data = bptest::RandomBytes(256, 6);
  const auto new_data = bptest::RandomBytes(256, 7);
  void* x = Alloc(0, 256);
  ToDevice(old_data.data(), 0, x, 256);
  Sync(0);
  Hold(0, s1.handle());
  ToDevice(new_data.data(), 0, x, 256, 0, s1.handle());
  s2.WaitFor(s1);  // bp_device_sync_stream_from_to(dev, s1, s2)
  std::vector<uint8_t> out(256, 0);
  ToHost(0, x, out.data(), 256, 0, s2.handle());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(out, std::vector<uint8_t>(256, 0)) << "s2 ran past the barrier while s1 was parked";
  Release(0, s1.handle());
  s2.Sync();
  EXPECT_EQ(out, new_data);
  Free(0, x);
}

TEST_F(SimAccelTest, CrossDeviceCopyWaitsForTheSourceDevice) {
  const auto data = bptest::RandomBytes(777, 8);
  void* x = Alloc(0, data.size());
  void* y = Alloc(1, data.size());
  Hold(0, nullptr);
  ToDevice(data.data(), 0, x, data.size());  // parked on simaccel:0's null stream
  int64_t shape = static_cast<int64_t>(data.size());
  DLTensor from = bptest::ByteView(x, Dev(0), &shape, 0);
  DLTensor to = bptest::ByteView(y, Dev(1), &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&from, &to, nullptr));  // on simaccel:1
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    Release(0, nullptr);
  });
  std::vector<uint8_t> out(data.size());
  ToHost(1, y, out.data(), out.size());
  Sync(1);
  releaser.join();
  EXPECT_EQ(out, data);
  Free(0, x);
  Free(1, y);
}

TEST_F(SimAccelTest, StreamHandlesAreValidated) {
  bp_stream_t s = nullptr;
  ASSERT_TRUE(Capture(bp_device_stream_create(Dev(0), &s)).ok());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s) >> 56, 0x5Eu);
  // Used on the other device.
  auto st = Capture(bp_device_stream_sync(Dev(1), s));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("belongs to simaccel:0"), std::string::npos) << st;
  EXPECT_TRUE(Capture(bp_device_stream_set(Dev(0), s)).ok());
  EXPECT_TRUE(Capture(bp_device_stream_free(Dev(0), s)).ok());
  // Freed.
  st = Capture(bp_device_stream_sync(Dev(0), s));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("not a live simaccel stream"), std::string::npos) << st;
  st = Capture(bp_device_stream_free(Dev(0), s));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  // The null stream belongs to the device; the plugin refuses to free it.
  const bp_device_api_t* api = backplane::DeviceAPI::Get(Device(0)).table();
  st = Capture(api->free_stream(api->self, Dev(0), nullptr));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
}

TEST_F(SimAccelTest, FreeingAStreamRunsItsQueuedWork) {
  const auto data = bptest::RandomBytes(300, 9);
  void* d = Alloc(0, data.size());
  std::vector<uint8_t> out(data.size(), 0);
  {
    backplane::Stream s(Device(0));
    ToDevice(data.data(), 0, d, data.size(), 0, s.handle());
    ToHost(0, d, out.data(), out.size(), 0, s.handle());
  }  // freed without a sync
  EXPECT_EQ(out, data);
  Free(0, d);
}

TEST_F(SimAccelTest, DataSpaceFreedWhileACopyIsQueuedIsSafe) {
  const auto data = bptest::RandomBytes(4096, 10);
  void* d = Alloc(0, data.size());
  Hold(0, nullptr);
  ToDevice(data.data(), 0, d, data.size());
  Free(0, d);  // the queued copy keeps the bytes alive until it ran
  EXPECT_EQ(Live(0), 0);
  Release(0, nullptr);
  Sync(0);
}

TEST_F(SimAccelTest, StressFourThreadsWithOwnStreams) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int32_t id = t % 2;
      try {
        backplane::Stream s(Device(id));
        for (int r = 0; r < kRounds; ++r) {
          const size_t n = 1 + static_cast<size_t>((r * 7919 + t * 104729) % 5000);
          const auto data = bptest::RandomBytes(n, static_cast<uint32_t>(t * kRounds + r));
          void* a = Alloc(id, n);
          void* b = Alloc(1 - id, n + 8);
          ToDevice(data.data(), id, a, n, 0, s.handle());
          s.Sync();  // the cross-device copy below reads `a` on the other device's stream
          int64_t shape = static_cast<int64_t>(n);
          DLTensor from = bptest::ByteView(a, Dev(id), &shape, 0);
          DLTensor to = bptest::ByteView(b, Dev(1 - id), &shape, 8);
          backplane::Check(bp_device_copy_data_from_to(&from, &to, nullptr));
          std::vector<uint8_t> out(n);
          ToHost(1 - id, b, out.data(), n, 8);
          Sync(1 - id);
          if (out != data) failures.fetch_add(1);
          Free(id, a);
          Free(1 - id, b);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Live(0), 0);
  EXPECT_EQ(Live(1), 0);
}

}  // namespace
