// SPDX-License-Identifier: Apache-2.0
// backplane/sdk/handle_table.hpp, the live memory handles every in-tree DeviceAPI checks
// against: a handle is accepted only while it is live, on its own device, for a range inside
// its allocation, and a free takes it out once, only as the kind it was allocated as. Handles
// here are real heap addresses of random sizes, as a vendor API's device addresses would be.
#include <gtest/gtest.h>

#include <atomic>
#include <backplane/sdk/handle_table.hpp>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace sdk = backplane::sdk;

const DLDevice kDev0{kDLOpenCL, 0};
const DLDevice kDev1{kDLOpenCL, 1};

// The message of the Error `body` throws, or "" when it throws none.
template <typename Body>
std::string ErrorOf(Body body) {
  try {
    body();
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "";
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The SDK's calls (device names for messages) go to the core this test links.
class HandleTableTest : public ::testing::Test {
 protected:
  void SetUp() override { backplane::detail::g_host_api = bp_host_api(); }
};

TEST_F(HandleTableTest, ResolvesOnlyLiveHandlesOfTheirDeviceInsideTheirBytes) {
  sdk::HandleTable<int> table("opencl");
  auto a = std::make_unique<char[]>(100);
  auto b = std::make_unique<char[]>(1);
  table.Add(kDev0, a.get(), 100, /*workspace=*/false, 7);
  table.Add(kDev1, b.get(), 0, /*workspace=*/true, 9);
  EXPECT_EQ(table.size(), 2u);

  const auto e = table.Resolve(kDev0, a.get(), 40, 60, "copy source");
  EXPECT_EQ(e.info, 7);
  EXPECT_EQ(e.size, 100u);
  EXPECT_EQ(e.handle(), a.get());
  EXPECT_FALSE(e.workspace);
  EXPECT_EQ(table.Get(kDev1, b.get(), "").info, 9);
  EXPECT_EQ(table.Resolve(kDev1, b.get(), 0, 0, "").size, 0u);

  std::string m = ErrorOf([&] { table.Resolve(kDev0, a.get(), 41, 60, "copy source"); });
  EXPECT_TRUE(Has(m, "copy source: 60 bytes at byte_offset 41 run past the end of the 100-byte"))
      << m;
  // An offset and a size whose sum wraps are still past the end.
  m = ErrorOf([&] { table.Resolve(kDev0, a.get(), UINT64_MAX - 3, 8, "kernel argument"); });
  EXPECT_TRUE(Has(m, "run past the end")) << m;
  m = ErrorOf([&] { table.Resolve(kDev0, a.get(), 0, SIZE_MAX, "kernel argument"); });
  EXPECT_TRUE(Has(m, "run past the end")) << m;
  m = ErrorOf([&] { table.Get(kDev1, a.get(), "copy destination"); });
  EXPECT_TRUE(Has(m, "copy destination: data space")) << m;
  EXPECT_TRUE(Has(m, "belongs to opencl:0, not opencl:1")) << m;
  int not_allocated = 0;
  m = ErrorOf([&] { table.Get(kDev0, &not_allocated, ""); });
  EXPECT_TRUE(Has(m, "is not a live opencl data space, workspace or wrapped native buffer")) << m;
  // An address inside an allocation is not its handle.
  m = ErrorOf([&] { table.Get(kDev0, a.get() + 1, ""); });
  EXPECT_TRUE(Has(m, "is not a live opencl")) << m;
}

TEST_F(HandleTableTest, FreesOnceAndOnlyAsTheKindAllocated) {
  sdk::HandleTable<> table("cuda");
  auto data = std::make_unique<char[]>(16);
  auto work = std::make_unique<char[]>(16);
  table.Add(kDev0, data.get(), 16, /*workspace=*/false);
  table.Add(kDev0, work.get(), 16, /*workspace=*/true);

  std::string m = ErrorOf([&] { table.Remove(kDev0, data.get(), /*workspace=*/true); });
  EXPECT_TRUE(Has(m, "free_workspace")) << m;
  EXPECT_TRUE(Has(m, "free it with free_data_space")) << m;
  m = ErrorOf([&] { table.Remove(kDev0, work.get(), /*workspace=*/false); });
  EXPECT_TRUE(Has(m, "free it with free_workspace")) << m;
  m = ErrorOf([&] { table.Remove(kDev1, data.get(), /*workspace=*/false); });
  EXPECT_TRUE(Has(m, "belongs to cuda:0")) << m;
  // The refused frees changed nothing.
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Get(kDev0, work.get(), "").size, 16u);

  EXPECT_EQ(table.Remove(kDev0, data.get(), /*workspace=*/false).handle(), data.get());
  m = ErrorOf([&] { table.Remove(kDev0, data.get(), /*workspace=*/false); });
  EXPECT_TRUE(Has(m, "free_data_space: ")) << m;
  EXPECT_TRUE(Has(m, "is not a live cuda")) << m;
  EXPECT_TRUE(table.Remove(kDev0, work.get(), /*workspace=*/true).workspace);
  EXPECT_EQ(table.size(), 0u);
}

TEST_F(HandleTableTest, ContainingFindsTheAllocationThatHoldsAnAddress) {
  sdk::HandleTable<uintptr_t> table("cuda");
  // Random sizes, laid out as a device's address space might be: a gap after each.
  std::mt19937_64 rng(4242);
  std::vector<std::pair<uintptr_t, size_t>> blocks;
  uintptr_t next = 0x10000;
  for (int i = 0; i < 200; ++i) {
    const size_t size = rng() % 5000;
    blocks.emplace_back(next, size);
    table.Add(kDev0, reinterpret_cast<void*>(next), size, false, next - 16);
    next += size + 1 + rng() % 300;
  }
  sdk::HandleTable<uintptr_t>::Entry e;
  for (const auto& [base, size] : blocks) {
    const uintptr_t inside = base + (size == 0 ? 0 : rng() % size);
    ASSERT_TRUE(table.Containing(inside, &e)) << inside;
    EXPECT_EQ(e.key, base);
    EXPECT_EQ(e.size, size);
    EXPECT_EQ(e.info, base - 16);
    // One past the end still names it (an empty range there is in bounds).
    ASSERT_TRUE(table.Containing(base + std::max<size_t>(size, 1), &e));
    EXPECT_EQ(e.key, base);
  }
  EXPECT_FALSE(table.Containing(0x10000 - 1, &e));
  EXPECT_FALSE(table.Containing(next + 10, &e));
  // A freed block is no longer found.
  table.Remove(kDev0, reinterpret_cast<void*>(blocks[5].first), false);
  EXPECT_FALSE(table.Containing(blocks[5].first, &e) && e.key == blocks[5].first);
}

TEST_F(HandleTableTest, RemoveAllTakesOneDevicesHandles) {
  sdk::HandleTable<int> table("vulkan");
  std::vector<std::unique_ptr<char[]>> bufs;
  for (int i = 0; i < 10; ++i) {
    bufs.push_back(std::make_unique<char[]>(8));
    table.Add(i % 2 == 0 ? kDev0 : kDev1, bufs.back().get(), 8, i % 3 == 0, i);
  }
  const auto taken = table.RemoveAll(1);
  ASSERT_EQ(taken.size(), 5u);
  for (const auto& e : taken) EXPECT_EQ(e.info % 2, 1);
  EXPECT_EQ(table.size(), 5u);
  EXPECT_TRUE(Has(ErrorOf([&] { table.Get(kDev1, bufs[1].get(), ""); }), "is not a live vulkan"));
}

TEST_F(HandleTableTest, TwoThreadsFreeingOneHandleGetOneEntryAndOneError) {
  sdk::HandleTable<int> table("opencl");
  std::vector<std::unique_ptr<char[]>> bufs;
  for (int i = 0; i < 2000; ++i) {
    bufs.push_back(std::make_unique<char[]>(4));
    table.Add(kDev0, bufs.back().get(), 4, false, i);
  }
  std::atomic<int> freed{0}, refused{0};
  auto worker = [&] {
    for (auto& b : bufs) {
      try {
        table.Remove(kDev0, b.get(), false);
        ++freed;
      } catch (const backplane::Error&) {
        ++refused;
      }
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  EXPECT_EQ(freed.load(), 2000);
  EXPECT_EQ(refused.load(), 2000);
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
