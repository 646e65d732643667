// SPDX-License-Identifier: Apache-2.0
// The CPU workspace pool: aligned, reusable, thread-safe, and strict about what it frees.
#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;

const DLDevice kCpu0{kDLCPU, 0};

void* Ws(size_t n) {
  void* p = nullptr;
  backplane::Check(bp_device_alloc_workspace(kCpu0, n, backplane::UInt8(), &p));
  return p;
}

void FreeWs(void* p) { backplane::Check(bp_device_free_workspace(kCpu0, p)); }

int64_t ReservedBytes() {
  bp_value_t v;
  backplane::Check(bp_device_get_property(kCpu0, "workspace_reserved_bytes", &v));
  return backplane::Any(v).AsInt();
}

TEST(CpuWorkspace, TheTableProvidesWorkspaceEntries) {
  const bp_device_api_t* api = backplane::DeviceAPI::Get(backplane::Device(kCpu0)).table();
  EXPECT_NE(api->alloc_workspace, nullptr);
  EXPECT_NE(api->free_workspace, nullptr);
}

TEST(CpuWorkspace, SizesAreAlignedWritableAndDistinct) {
  std::vector<std::pair<void*, size_t>> live;
  std::set<void*> seen;
  for (size_t n : {size_t{0}, size_t{1}, size_t{64}, size_t{65}, size_t{1000}, size_t{4096},
                   size_t{100000}, size_t{300000}, size_t{3} << 20, size_t{20} << 20}) {
    void* p = Ws(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    EXPECT_TRUE(seen.insert(p).second) << p;
    std::memset(p, static_cast<int>(n & 0xff), n);
    live.emplace_back(p, n);
  }
  // Nothing overlapped: each block still holds its own pattern.
  for (auto [p, n] : live) {
    for (size_t i = 0; i < n; i += 997) {
      ASSERT_EQ(static_cast<uint8_t*>(p)[i], static_cast<uint8_t>(n & 0xff)) << n;
    }
    FreeWs(p);
  }
}

TEST(CpuWorkspace, AFreedBlockIsReused) {
  void* a = Ws(1000);
  FreeWs(a);
  void* b = Ws(1000);
  EXPECT_EQ(a, b) << "the thread cache should hand back the block just freed";
  FreeWs(b);
}

TEST(CpuWorkspace, DoubleFreeAndForeignPointersAreRefused) {
  void* a = Ws(256);
  std::memset(a, 0, 256);
  // An interior pointer: its "header" is zeroes inside a live block.
  auto s = Capture(bp_device_free_workspace(kCpu0, static_cast<char*>(a) + 128));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("not a workspace"), std::string::npos) << s;
  s = Capture(bp_device_free_workspace(kCpu0, static_cast<char*>(a) + 3));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  FreeWs(a);
  s = Capture(bp_device_free_workspace(kCpu0, a));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("freed already"), std::string::npos) << s;
  // The pool is still consistent: the block comes back once, not twice.
  void* x = Ws(256);
  void* y = Ws(256);
  EXPECT_NE(x, y);
  FreeWs(x);
  FreeWs(y);
  EXPECT_TRUE(Capture(bp_device_free_workspace(kCpu0, nullptr)).ok());
}

TEST(CpuWorkspace, HugeRequestIsOutOfMemory) {
  void* p = nullptr;
  auto s = Capture(bp_device_alloc_workspace(kCpu0, size_t{1} << 50, backplane::UInt8(), &p));
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY) << s;
  EXPECT_EQ(p, nullptr);
  s = Capture(bp_device_alloc_workspace(kCpu0, SIZE_MAX, backplane::UInt8(), &p));
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY) << s;
}

TEST(CpuWorkspace, BlocksMayBeFreedOnAnotherThread) {
  constexpr int kBlocks = 2000;
  std::vector<void*> blocks(kBlocks);
  std::thread producer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      blocks[i] = Ws(64 + (i % 7) * 100);
      std::memset(blocks[i], i & 0xff, 64);
    }
  });
  producer.join();
  std::thread consumer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      ASSERT_EQ(static_cast<uint8_t*>(blocks[i])[63], static_cast<uint8_t>(i & 0xff));
      FreeWs(blocks[i]);
    }
  });
  consumer.join();
}

// Threads come and go; the blocks they cached go back to the shared pool at thread exit and
// are reused by the next threads, so the memory the pool holds stops growing.
TEST(CpuWorkspace, ThreadExitReturnsBlocksForReuse) {
  constexpr int kThreads = 4;
  constexpr int kBlocks = 200;
  auto round = [] {
    // All threads hold their blocks at the same time, so every round has the same peak.
    std::atomic<int> holding{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, &holding] {
        std::vector<void*> live;
        for (int i = 0; i < kBlocks; ++i) live.push_back(Ws(512 + 512 * ((i + t) % 4)));
        holding.fetch_add(1);
        while (holding.load() < kThreads) std::this_thread::yield();
        for (void* p : live) FreeWs(p);
      });
    }
    for (auto& th : threads) th.join();
  };
  round();
  const int64_t after_first = ReservedBytes();
  EXPECT_GE(after_first, int64_t{kThreads} * kBlocks * 512);
  for (int i = 0; i < 10; ++i) round();
  // Batched refills can leave a few blocks idle in one thread while another allocates, so
  // allow some slack; without reuse the pool would hold eleven times the first round.
  EXPECT_LE(ReservedBytes(), after_first * 3 / 2)
      << "blocks cached by exited threads were not reused";
}

TEST(CpuWorkspace, ConcurrentUseKeepsBlocksPrivate) {
  constexpr int kThreads = 8;
  constexpr int kIters = 5000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      std::vector<std::pair<uint8_t*, size_t>> live;
      uint32_t x = 12345u + static_cast<uint32_t>(t);
      for (int i = 0; i < kIters; ++i) {
        x = x * 1664525u + 1013904223u;
        const size_t n = 1 + (x >> 8) % 3000;
        auto* p = static_cast<uint8_t*>(Ws(n));
        std::memset(p, t + 1, n);
        live.emplace_back(p, n);
        if (live.size() > 16 || (x & 1)) {
          auto [q, m] = live.front();
          live.erase(live.begin());
          for (size_t k = 0; k < m; k += 61) {
            if (q[k] != t + 1) failures.fetch_add(1);
          }
          FreeWs(q);
        }
      }
      for (auto [q, m] : live) FreeWs(q);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << "a workspace block was handed to two threads at once";
}

}  // namespace
