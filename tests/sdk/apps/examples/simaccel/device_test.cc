// SPDX-License-Identifier: Apache-2.0
// The simulated accelerator through the core: a device type registered at run time, opaque
// memory, attributes, and the core's workspace fallback for a table without workspace.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "simaccel_util.h"

namespace {

using bptest::Capture;
using bptest::SimAccelTest;

TEST_F(SimAccelTest, DeviceTypeIsAFreshIdThatMapsBothWays) {
  EXPECT_GE(type_, BP_DEVICE_TYPE_FIRST_DYNAMIC);
  EXPECT_LT(type_, BP_DEVICE_TYPE_MAX);
  EXPECT_EQ(backplane::DeviceTypeName(type_), "simaccel");
  EXPECT_EQ(Device(1).ToString(), "simaccel:1");
  EXPECT_EQ(backplane::Device::Parse("simaccel:1").dl.device_type, type_);
}

TEST_F(SimAccelTest, Attributes) {
  auto api0 = backplane::DeviceAPI::Get(Device(0));
  EXPECT_TRUE(api0.Exists());
  EXPECT_TRUE(backplane::DeviceAPI::Get(Device(1)).Exists());
  EXPECT_FALSE(backplane::DeviceAPI::Get(Device(2)).Exists());
  EXPECT_EQ(api0.GetAttr(BP_ATTR_DEVICE_NAME).AsString(), "simaccel simulated accelerator 0");
  EXPECT_EQ(api0.GetAttr(BP_ATTR_WARP_SIZE).AsInt(), 32);
  EXPECT_EQ(api0.GetAttr(BP_ATTR_MAX_THREAD_DIMENSIONS).AsString(), "[1024, 1024, 64]");
  EXPECT_TRUE(api0.GetAttr(BP_ATTR_MAX_CLOCK_RATE).is_none());
  EXPECT_TRUE(api0.GetAttr(BP_ATTR_GCN_ARCH).is_none());
  for (int32_t kind = 1; kind < BP_ATTR_COUNT; ++kind) {
    bp_value_t v;
    ASSERT_EQ(bp_device_get_attr(Dev(2), kind, &v), BP_OK);
    EXPECT_EQ(v.type, BP_VALUE_NONE) << "simaccel:2 kind " << kind;
  }
  // Available memory follows allocations.
  const int64_t total = api0.GetAttr(BP_ATTR_TOTAL_GLOBAL_MEMORY).AsInt();
  const int64_t before = api0.GetAttr(BP_ATTR_AVAILABLE_GLOBAL_MEMORY).AsInt();
  EXPECT_EQ(total, int64_t{1} << 30);
  void* p = Alloc(0, 12345);
  EXPECT_EQ(api0.GetAttr(BP_ATTR_AVAILABLE_GLOBAL_MEMORY).AsInt(), before - 12345);
  Free(0, p);
  EXPECT_EQ(api0.GetAttr(BP_ATTR_AVAILABLE_GLOBAL_MEMORY).AsInt(), before);
}

TEST_F(SimAccelTest, DataSpaceIsAnOpaqueHandle) {
  void* a = Alloc(0, 256);
  void* b = Alloc(1, 0);
  // Tagged ids with a non-canonical top byte: never a host address.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) >> 56, 0xACu);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) >> 56, 0xACu);
  EXPECT_EQ(Live(0), 1);
  EXPECT_EQ(Live(1), 1);
  Free(0, a);
  Free(1, b);
  EXPECT_EQ(Live(0), 0);
  EXPECT_EQ(Live(1), 0);
}

TEST_F(SimAccelTest, BadHandlesAreInvalidArgumentsNotCrashes) {
  void* a = Alloc(0, 64);
  std::vector<uint8_t> host(64, 1);
  int64_t shape = 64;
  // A host pointer where a handle belongs.
  DLTensor from = bptest::ByteView(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor to = bptest::ByteView(host.data(), Dev(0), &shape, 0);
  auto s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("host pointer"), std::string::npos) << s;
  // A handle of device 0 used on device 1.
  to = bptest::ByteView(a, Dev(1), &shape, 0);
  s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("simaccel:1"), std::string::npos) << s;
  // Past the end of the allocation.
  to = bptest::ByteView(a, Dev(0), &shape, 1);
  s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("64 bytes"), std::string::npos) << s;
  // Freed twice, and never allocated.
  Free(0, a);
  s = Capture(bp_device_free_data_space(Dev(0), a));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  s = Capture(bp_device_free_data_space(Dev(0), reinterpret_cast<void*>(0xAC000000000000FFull)));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  to = bptest::ByteView(a, Dev(0), &shape, 0);
  s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_EQ(Live(0), 0);
}

TEST_F(SimAccelTest, DeviceOutOfRangeIsNotFound) {
  void* p = nullptr;
  auto s = Capture(bp_device_alloc_data_space(Dev(2), 16, 64, backplane::UInt8(), &p));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_NE(s.message.find("simaccel:2"), std::string::npos) << s;
  s = Capture(bp_device_set(Dev(5)));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_TRUE(Capture(bp_device_set(Dev(1))).ok());
}

TEST_F(SimAccelTest, OutOfDeviceMemoryIsAnErrorWithTheNumbers) {
  void* p = nullptr;
  auto s = Capture(bp_device_alloc_data_space(Dev(0), size_t{2} << 30, 64, backplane::UInt8(), &p));
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY) << s;
  EXPECT_NE(s.message.find("simaccel:0"), std::string::npos) << s;
  EXPECT_NE(s.message.find(std::to_string(size_t{2} << 30)), std::string::npos) << s;
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(Live(0), 0);
}

TEST_F(SimAccelTest, WorkspaceFallsBackToDataSpace) {
  const bp_device_api_t* api = backplane::DeviceAPI::Get(Device(0)).table();
  ASSERT_EQ(api->alloc_workspace, nullptr) << "simaccel must leave workspace to the core";
  ASSERT_EQ(api->free_workspace, nullptr);
  void* w = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(Dev(0), 300, backplane::UInt8(), &w)).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w) >> 56, 0xACu);
  EXPECT_EQ(Live(0), 1) << "the workspace should come from data space";
  // It is real device memory: a round trip through it works.
  const auto data = bptest::RandomBytes(300, 5);
  std::vector<uint8_t> back(300);
  ToDevice(data.data(), 0, w, 300);
  ToHost(0, w, back.data(), 300);
  Sync(0);
  EXPECT_EQ(back, data);
  ASSERT_TRUE(Capture(bp_device_free_workspace(Dev(0), w)).ok());
  EXPECT_EQ(Live(0), 0);
}

TEST_F(SimAccelTest, ByteOffsetsOnBothSidesAndWithinTheDevice) {
  const size_t n = 1001;
  const auto data = bptest::RandomBytes(n, 9);
  void* a = Alloc(0, n + 100);
  void* b = Alloc(0, n + 50);
  std::vector<uint8_t> zeros(n + 100, 0);
  ToDevice(zeros.data(), 0, a, n + 100);
  ToDevice(data.data(), 0, a, n, 37);
  // Device to device within simaccel:0, from offset 37 to offset 11.
  int64_t shape = static_cast<int64_t>(n);
  DLTensor from = bptest::ByteView(a, Dev(0), &shape, 37);
  DLTensor to = bptest::ByteView(b, Dev(0), &shape, 11);
  backplane::Check(bp_device_copy_data_from_to(&from, &to, nullptr));
  std::vector<uint8_t> out(n), whole(n + 100);
  ToHost(0, b, out.data(), n, 11);
  ToHost(0, a, whole.data(), n + 100);
  Sync(0);
  EXPECT_EQ(out, data);
  std::vector<uint8_t> expected(n + 100, 0);
  std::memcpy(expected.data() + 37, data.data(), n);
  EXPECT_EQ(whole, expected) << "bytes outside the copied range changed";
  Free(0, a);
  Free(0, b);
}

TEST_F(SimAccelTest, TensorRoundTripCpuToBothDevicesAndBack) {
  for (auto shape : std::vector<std::vector<int64_t>>{{1}, {7}, {3, 17}, {2, 3, 257}}) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    const std::vector<float> ref = bptest::RandomFloats(n, static_cast<uint32_t>(n));
    auto host = backplane::Tensor::Empty(shape, backplane::Float32(), backplane::Device());
    host.CopyFrom(ref);
    auto on0 = host.CopyTo(Device(0));
    auto on1 = on0.CopyTo(Device(1));
    auto back0 = on1.CopyTo(Device(0));
    EXPECT_EQ(on0.device(), Device(0));
    EXPECT_EQ(on1.device(), Device(1));
    EXPECT_EQ(on1.ToVector<float>(), ref);
    EXPECT_EQ(back0.CopyTo(backplane::Device()).ToVector<float>(), ref);
    EXPECT_EQ(on0.ToVector<float>(), ref);
  }
  EXPECT_EQ(Live(0), 0) << "tensors must free their data space";
  EXPECT_EQ(Live(1), 0);
}

TEST_F(SimAccelTest, TensorCopyFromReplacesContents) {
  auto t = backplane::Tensor::Empty({4, 100}, backplane::Float32(), Device(1));
  const auto first = bptest::RandomFloats(400, 1);
  const auto second = bptest::RandomFloats(400, 2);
  t.CopyFrom(first);
  EXPECT_EQ(t.ToVector<float>(), first);
  t.CopyFrom(second);
  EXPECT_EQ(t.ToVector<float>(), second);
  // Wrong host size is refused with the sizes.
  EXPECT_THROW(t.CopyFrom(std::vector<float>(3)), backplane::Error);
}

}  // namespace

namespace {

// For any vendor: a plugin with a pinned host type of its own (simaccel_host
// beside simaccel, as cuda_host is beside cuda) gets the copies between the two, on the
// caller's stream, instead of the core staging them through unpinned host memory and
// synchronizing.
TEST_F(SimAccelTest, CopiesWithItsOwnPinnedHostTypeGoThroughThePluginInStreamOrder) {
  const DLDevice pinned{static_cast<DLDeviceType>(backplane::DeviceTypeFromName("simaccel_host")),
                        0};
  auto copies = [] { return backplane::Function::Get("simaccel_testing.pinned_copies")().AsInt(); };
  const size_t n = 4099;
  const std::vector<uint8_t> data = bptest::RandomBytes(n, 18);
  int64_t shape = static_cast<int64_t>(n);
  void* p = nullptr;
  void* q = nullptr;
  backplane::Check(bp_device_alloc_data_space(pinned, n + 8, 64, backplane::UInt8(), &p));
  backplane::Check(bp_device_alloc_data_space(pinned, n, 64, backplane::UInt8(), &q));
  std::memset(q, 0, n);
  void* d = Alloc(0, n);
  // cpu -> pinned is the host type's own memcpy.
  DLTensor host =
      bptest::ByteView(const_cast<uint8_t*>(data.data()), bptest::CpuDevice(), &shape, 0);
  DLTensor p_view = bptest::ByteView(p, pinned, &shape, 8);
  backplane::Check(bp_device_copy_data_from_to(&host, &p_view, nullptr));
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(p) + 8, data.data(), n), 0);

  // pinned -> simaccel and back, on a created stream: the plugin does both.
  bp_stream_t s = nullptr;
  backplane::Check(bp_device_stream_create(Dev(0), &s));
  const int64_t before = copies();
  DLTensor d_view = bptest::ByteView(d, Dev(0), &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&p_view, &d_view, s));
  EXPECT_EQ(copies(), before + 1) << "the core staged a copy the plugin offers";
  // With the stream parked, the copy back is queued, not done: the core did not stage it
  // (staging synchronizes the stream, which would wait here for the release).
  Hold(0, s);
  DLTensor q_view = bptest::ByteView(q, pinned, &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&d_view, &q_view, s));
  EXPECT_EQ(copies(), before + 2);
  EXPECT_EQ(std::count(static_cast<uint8_t*>(q), static_cast<uint8_t*>(q) + n, 0),
            static_cast<std::ptrdiff_t>(n))
      << "the copy ran before the stream got to it";
  Release(0, s);
  Sync(0, s);
  EXPECT_EQ(std::memcmp(q, data.data(), n), 0);

  // Its memory is checked like any handle: past the end, and freed.
  DLTensor past = bptest::ByteView(q, pinned, &shape, 1);
  auto st = Capture(bp_device_copy_data_from_to(&past, &d_view, s));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("run past the end"), std::string::npos) << st;
  backplane::Check(bp_device_free_data_space(pinned, q));
  st = Capture(bp_device_copy_data_from_to(&d_view, &q_view, s));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("is not live simaccel_host memory"), std::string::npos) << st;
  st = Capture(bp_device_free_data_space(pinned, q));
  EXPECT_NE(st.message.find("is not a live simaccel_host data space"), std::string::npos) << st;
  EXPECT_EQ(copies(), before + 2) << "a refused copy was counted";

  backplane::Check(bp_device_stream_free(Dev(0), s));
  backplane::Check(bp_device_free_data_space(pinned, p));
  Free(0, d);
}

}  // namespace
