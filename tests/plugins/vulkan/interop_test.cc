// SPDX-License-Identifier: Apache-2.0
// The vulkan plugin's events (ordering streams, timing a kernel, recording again) and native
// handles (the plugin's own Vulkan objects out; an application's VkBuffer wrapped as a tensor,
// read and written through vkMapMemory and by a kernel), on the real loader (lavapipe in CI).
// Skips when no Vulkan device exists.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "plugins/test_util.h"
#include "vulkan_fixture.h"

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using bptest::Capture;
using bptest::kDev;
using bptest::VulkanTest;

// ---- events and native handles ----------------------------------

constexpr DLDataType kF32{kDLFloat, 32, 1};

// How many of got[i] differ from 2 x[i] + y[i] (the kernel's result, exact in float).
size_t WrongScaleAdd(const std::vector<float>& got, const std::vector<float>& x,
                     const std::vector<float>& y) {
  if (got.size() != x.size()) return x.size();
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) wrong += got[i] == 2.0f * x[i] + y[i] ? 0 : 1;
  return wrong;
}

// The queued kernel on one stream, an event recorded after it, another stream that waits for
// the event (no host wait) and reads: the read sees the kernel's result. The time between two
// events around the work is positive and no more than the host saw pass.
TEST_F(VulkanTest, EventsOrderStreamsAndTimeAKernel) {
  const int32_t rows = 2048;
  const size_t count = static_cast<size_t>(rows) * 256;
  const std::vector<float> x = bptest::RandomFloats(count, 1911),
                           y = bptest::RandomFloats(count, 1912);
  backplane::Module m =
      backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::FromDevice(Device(kDev)));
  const std::vector<int64_t> shape = {rows, 256};
  backplane::Tensor tx = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  backplane::Tensor ty = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  backplane::Tensor tout = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  tx.CopyFrom(x);
  ty.CopyFrom(y);
  tout.CopyFrom(std::vector<float>(count, std::nanf("")));
  backplane::Stream s{Device(kDev)}, t{Device(kDev)};
  backplane::Event start{Device(kDev)}, end{Device(kDev)};
  // Never recorded: passed, and Sync returns at once.
  EXPECT_TRUE(end.Done());
  end.Sync();
  s.WaitFor(t);  // s's work also follows the null stream's copies above
  const auto host_start = std::chrono::steady_clock::now();
  s.SetActive();
  start.Record(s);
  for (int i = 0; i < 10; ++i) m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), tout.dl());
  end.Record(s);
  backplane::Check(bp_device_stream_set(kDev, nullptr));
  end.MakeWait(t);
  std::vector<float> got(count, 0.0f);
  int64_t bytes = static_cast<int64_t>(count * sizeof(float));
  Copy(tout.dl()->data, kDev, 0, got.data(), bptest::CpuDevice(), 0, &bytes, t.handle());
  EXPECT_EQ(WrongScaleAdd(got, x, y), 0u)
      << "the copy on the waiting stream ran before the kernels finished";
  EXPECT_TRUE(end.Done()) << "the waiting stream's copy is done, so is the point it waited for";
  end.Sync();
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start)
          .count();
  const double ms = end.ElapsedMsSince(start);
  EXPECT_GT(ms, 0.0) << "ten kernels over 2 MiB take time";
  EXPECT_LE(ms, host_ms + 1.0) << "the device's time fits in the host's around it";
  EXPECT_LE(start.ElapsedMsSince(start), 0.0 + 1e-9);
  EXPECT_NEAR(start.ElapsedMsSince(end), -ms, 1e-6) << "backwards is negative";
  // A never-recorded event cannot be timed (the core says so).
  backplane::Event never{Device(kDev)};
  const bptest::Status st = bptest::CaptureError([&] { never.ElapsedMsSince(start); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
}

// Recording again moves the mark: a stream waiting after the second record sees the second
// write, and the time from a fixed start grows. Records queued back to back (each timestamp
// still pending when the next comes) and an event freed with its timestamp queued leave the
// driver whole (the validation layer watches the query pools).
TEST_F(VulkanTest, RecordingAnEventAgainMovesItsMark) {
  const size_t n = size_t{4} << 20;
  const std::vector<uint8_t> first = bptest::RandomBytes(n, 1913),
                             second = bptest::RandomBytes(n, 1914);
  void* a = Alloc(n);
  void* b = Alloc(n);
  int64_t shape = static_cast<int64_t>(n);
  backplane::Stream s{Device(kDev)}, t{Device(kDev)};
  backplane::Event start{Device(kDev)}, mark{Device(kDev)};
  start.Record(s);
  Copy(const_cast<uint8_t*>(first.data()), bptest::CpuDevice(), 0, a, kDev, 0, &shape, s.handle());
  mark.Record(s);
  mark.Sync();
  EXPECT_TRUE(mark.Done());
  const double before = mark.ElapsedMsSince(start);
  Copy(const_cast<uint8_t*>(second.data()), bptest::CpuDevice(), 0, a, kDev, 0, &shape, s.handle());
  for (int i = 0; i < 4; ++i) Copy(a, kDev, 0, b, kDev, 0, &shape, s.handle());
  mark.Record(s);
  mark.MakeWait(t);
  std::vector<uint8_t> back(n, 0);
  Copy(b, kDev, 0, back.data(), bptest::CpuDevice(), 0, &shape, t.handle());
  EXPECT_TRUE(back == second) << "the wait used the first mark, not the second";
  const double after = mark.ElapsedMsSince(start);
  EXPECT_GT(after, before) << "the second mark is after five more copies";
  // Back to back, each record before the previous one's timestamp is written; then freed
  // while its last timestamp is still queued.
  {
    backplane::Event busy{Device(kDev)};
    for (int i = 0; i < 8; ++i) {
      Copy(a, kDev, 0, b, kDev, 0, &shape, s.handle());
      busy.Record(s);
    }
    busy.MakeWait(t);
  }
  // An event whose stream is freed is passed; waiting for it is nothing.
  backplane::Event orphan{Device(kDev)};
  {
    backplane::Stream gone{Device(kDev)};
    Copy(a, kDev, 0, b, kDev, 0, &shape, gone.handle());
    orphan.Record(gone);
  }
  EXPECT_TRUE(orphan.Done());
  orphan.MakeWait(t);
  t.Sync();
  s.Sync();
  Free(a);
  Free(b);
}

// An application's buffer: a VkBuffer with the plugin's usage flags, bound at `offset` into
// host-visible, host-coherent memory of its own, mapped. Created on the plugin's VkDevice
// through the loader; destroyed by the destructor (the application's, never the plugin's).
struct AppBuffer {
  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkMemoryRequirements req{};
  void* mapped = nullptr;  // the buffer's first byte

  AppBuffer(VkPhysicalDevice physical, VkDevice dev, VkDeviceSize size) : device(dev) {
    VkBufferCreateInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (vkCreateBuffer(device, &bi, nullptr, &buffer) != VK_SUCCESS) return;
    vkGetBufferMemoryRequirements(device, buffer, &req);
    VkPhysicalDeviceMemoryProperties mem{};
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int64_t type = -1;
    for (uint32_t i = 0; i < mem.memoryTypeCount && type < 0; ++i) {
      if ((req.memoryTypeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) {
        type = i;
      }
    }
    if (type < 0) return;
    // Bound past the memory's start, so BP_NATIVE_MEMORY_OFFSET has something to say.
    offset = (256 + req.alignment - 1) / req.alignment * req.alignment;
    VkMemoryAllocateInfo mi{};
    mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mi.allocationSize = offset + req.size;
    mi.memoryTypeIndex = static_cast<uint32_t>(type);
    if (vkAllocateMemory(device, &mi, nullptr, &memory) != VK_SUCCESS) return;
    if (vkBindBufferMemory(device, buffer, memory, offset) != VK_SUCCESS) return;
    void* base = nullptr;
    if (vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &base) != VK_SUCCESS) return;
    mapped = static_cast<char*>(base) + offset;
  }
  ~AppBuffer() {
    if (mapped != nullptr) vkUnmapMemory(device, memory);
    if (buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer, nullptr);
    if (memory != VK_NULL_HANDLE) vkFreeMemory(device, memory, nullptr);
  }
  AppBuffer(const AppBuffer&) = delete;
  AppBuffer& operator=(const AppBuffer&) = delete;
  bool ok() const { return mapped != nullptr; }
  bp_native_buffer_t Native(uint64_t size) const {
    return bp_native_buffer_t{sizeof(bp_native_buffer_t), reinterpret_cast<uint64_t>(buffer),
                              reinterpret_cast<uint64_t>(memory), offset, size};
  }
};

template <typename Handle>
Handle As(uint64_t v) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(v));
}

// Every kind names the plugin's own objects, each checked through the loader against the
// others: the VkInstance lists the VkPhysicalDevice, whose properties are the device's; the
// VkDevice's queue of QUEUE_FAMILY is the QUEUE of every stream; a tensor's VkBuffer is bound
// to its VkDeviceMemory, which (host-visible on lavapipe) holds the bytes Backplane wrote.
TEST_F(VulkanTest, NativeHandlesAreThePluginsOwnObjects) {
  const Device dev(kDev);
  const auto instance = As<VkInstance>(backplane::NativeHandle(dev, BP_NATIVE_PLATFORM));
  const auto physical = As<VkPhysicalDevice>(backplane::NativeHandle(dev, BP_NATIVE_DEVICE));
  const auto device = As<VkDevice>(backplane::NativeHandle(dev, BP_NATIVE_CONTEXT));
  ASSERT_NE(instance, nullptr);
  ASSERT_NE(physical, nullptr);
  ASSERT_NE(device, nullptr);
  uint32_t n = 0;
  ASSERT_EQ(vkEnumeratePhysicalDevices(instance, &n, nullptr), VK_SUCCESS);
  std::vector<VkPhysicalDevice> phys(n);
  ASSERT_EQ(vkEnumeratePhysicalDevices(instance, &n, phys.data()), VK_SUCCESS);
  EXPECT_NE(std::find(phys.begin(), phys.end(), physical), phys.end());
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical, &props);
  EXPECT_EQ(props.deviceName, DeviceAPI::Get(dev).GetAttr(BP_ATTR_DEVICE_NAME).AsString());

  backplane::Stream s{dev};
  const uint64_t family = backplane::NativeHandle(dev, BP_NATIVE_QUEUE_FAMILY, s.handle());
  EXPECT_EQ(backplane::NativeHandle(dev, BP_NATIVE_QUEUE_FAMILY), family);
  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &qn, nullptr);
  ASSERT_LT(family, qn);
  VkQueue queue = VK_NULL_HANDLE;
  vkGetDeviceQueue(device, static_cast<uint32_t>(family), 0, &queue);
  EXPECT_EQ(backplane::NativeHandle(dev, BP_NATIVE_QUEUE, s.handle()),
            reinterpret_cast<uint64_t>(queue));
  EXPECT_EQ(backplane::NativeHandle(dev, BP_NATIVE_QUEUE), reinterpret_cast<uint64_t>(queue));

  const size_t count = 1000;
  const std::vector<float> x = bptest::RandomFloats(count, 1915);
  backplane::Tensor t = backplane::Tensor::Empty({static_cast<int64_t>(count)}, kF32, dev);
  t.CopyFrom(x);
  const auto buffer = As<VkBuffer>(t.NativeHandle(BP_NATIVE_BUFFER));
  const auto memory = As<VkDeviceMemory>(t.NativeHandle(BP_NATIVE_MEMORY));
  ASSERT_NE(buffer, VK_NULL_HANDLE);
  ASSERT_NE(memory, VK_NULL_HANDLE);
  EXPECT_EQ(t.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);
  const uint64_t memory_offset = t.NativeHandle(BP_NATIVE_MEMORY_OFFSET);
  EXPECT_EQ(memory_offset, 0u) << "each data space has memory of its own";
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device, buffer, &req);
  EXPECT_GE(req.size, count * sizeof(float)) << "the VkBuffer holds the tensor";
  // The memory can be mapped when every type the buffer may use is host-visible and coherent.
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(physical, &mem);
  bool host_visible = true;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((req.memoryTypeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) != want) {
      host_visible = false;
    }
  }
  if (host_visible) {
    backplane::Check(bp_device_stream_sync(kDev, nullptr));  // the copy in is done
    void* p = nullptr;
    ASSERT_EQ(vkMapMemory(device, memory, memory_offset, count * sizeof(float), 0, &p), VK_SUCCESS);
    EXPECT_EQ(std::memcmp(p, x.data(), count * sizeof(float)), 0)
        << "the mapped memory holds what Backplane wrote";
    vkUnmapMemory(device, memory);
  } else {
    std::printf("skipped mapping a Backplane buffer: %s's memory for it is not host-visible\n",
                props.deviceName);
  }

  // Made-up and freed objects are errors, never a dereference; every kind has a handle, and
  // one past the enum (only the DeviceAPI table sees it: the core refuses it first) has none.
  std::vector<uint8_t> host(16);
  auto st =
      bptest::CaptureError([&] { backplane::NativeHandle(dev, BP_NATIVE_BUFFER, host.data()); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  bp_stream_t freed = nullptr;
  backplane::Check(bp_device_stream_create(kDev, &freed));
  backplane::Check(bp_device_stream_free(kDev, freed));
  st = bptest::CaptureError([&] { backplane::NativeHandle(dev, BP_NATIVE_QUEUE, freed); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  const bp_device_api_t* api = nullptr;
  backplane::Check(bp_device_api_get(kDLVulkan, &api));
  uint64_t out = 0;
  st = Capture(api->native_handle(api->self, kDev, BP_NATIVE_PLATFORM + 1, nullptr, &out));
  EXPECT_EQ(st.kind, BP_ERR_UNSUPPORTED) << st;
  EXPECT_NE(st.message.find("BP_NATIVE_QUEUE_FAMILY"), std::string::npos) << st;
}

// An application's VkBuffer and VkDeviceMemory wrapped as tensors: Backplane's copies write and
// read them (the test reads and writes the other side through its own mapping) and a kernel
// reads them, without a copy; the release runs once, when the tensor goes; bad wraps are
// refused without a release; FreeDataSpace refuses a wrapped handle.
TEST_F(VulkanTest, AWrappedVkBufferIsATensor) {
  const Device dev(kDev);
  const auto physical = As<VkPhysicalDevice>(backplane::NativeHandle(dev, BP_NATIVE_DEVICE));
  const auto device = As<VkDevice>(backplane::NativeHandle(dev, BP_NATIVE_CONTEXT));
  const int32_t rows = 1000;
  const size_t count = static_cast<size_t>(rows) * 256, bytes = count * sizeof(float);
  const std::vector<int64_t> shape = {rows, 256};
  AppBuffer bx(physical, device, bytes), by(physical, device, bytes + 4096);
  if (!bx.ok() || !by.ok()) GTEST_SKIP() << "the device has no host-visible, coherent memory";
  const std::vector<float> x = bptest::RandomFloats(count, 1916),
                           y = bptest::RandomFloats(count, 1917);
  int released = 0;
  {
    backplane::Tensor tx =
        backplane::Tensor::FromNative(dev, bx.Native(bytes), shape, kF32, [&] { ++released; });
    backplane::Tensor ty = backplane::Tensor::FromNative(dev, by.Native(bytes + 4096), shape, kF32,
                                                         [&] { ++released; });
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER), reinterpret_cast<uint64_t>(bx.buffer));
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_MEMORY), reinterpret_cast<uint64_t>(bx.memory));
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_MEMORY_OFFSET), bx.offset);
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);
    // Backplane writes, the application reads its mapping.
    tx.CopyFrom(x);
    backplane::Check(bp_device_stream_sync(kDev, nullptr));
    EXPECT_EQ(std::memcmp(bx.mapped, x.data(), bytes), 0) << "the copy went into the VkBuffer";
    // The application writes its mapping, Backplane reads.
    std::memcpy(by.mapped, y.data(), bytes);
    EXPECT_EQ(ty.ToVector<float>(), y);
    // A kernel reads both wrapped buffers.
    backplane::Tensor out = backplane::Tensor::Empty(shape, kF32, dev);
    backplane::Module m =
        backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::FromDevice(dev));
    m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), out.dl());
    EXPECT_EQ(WrongScaleAdd(out.ToVector<float>(), x, y), 0u);
    // And writes one: x = 2 z + y (z the result above) lands in bx's mapping.
    const std::vector<float> z = out.ToVector<float>();
    m.GetFunction("scale_add")(rows, out.dl(), ty.dl(), tx.dl());
    backplane::Check(bp_device_stream_sync(kDev, nullptr));
    std::vector<float> mapped_x(count);
    std::memcpy(mapped_x.data(), bx.mapped, bytes);
    EXPECT_EQ(WrongScaleAdd(mapped_x, z, y), 0u);
    // The wrapped handle is not Backplane's to free; the tensor still works after.
    const auto st = Capture(bp_device_free_data_space(kDev, tx.dl()->data));
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
    EXPECT_NE(st.message.find("native buffer"), std::string::npos) << st;
    EXPECT_EQ(tx.ToVector<float>(), mapped_x);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 2) << "each wrapped tensor's release runs once, when it goes";

  // Bad wraps: refused, and the release of a refused wrap never runs.
  auto wrap = [&](bp_native_buffer_t nb, int64_t elements) {
    return bptest::CaptureError([&] {
      backplane::Tensor::FromNative(dev, nb, {elements}, backplane::UInt8(),
                                    [&] { released += 100; });
    });
  };
  bp_native_buffer_t null_buffer = bx.Native(bytes);
  null_buffer.buffer = 0;
  auto st = wrap(null_buffer, 16);
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  bp_native_buffer_t null_memory = bx.Native(bytes);
  null_memory.memory = 0;
  st = wrap(null_memory, 16);
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  const uint64_t too_large = bx.req.size + 4096;
  st = wrap(bx.Native(too_large), static_cast<int64_t>(too_large));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("vkGetBufferMemoryRequirements"), std::string::npos) << st;
  bp_native_buffer_t misaligned = bx.Native(bytes);
  misaligned.memory_offset += 1;
  st = wrap(misaligned, 16);
  if (bx.req.alignment > 1) {
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  }
  EXPECT_EQ(released, 2);
  // The buffers stayed the application's: AppBuffer's destructor destroys them (the validation
  // layer would report a buffer destroyed twice or while in use).
}

}  // namespace
