// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan's memory: buffers (data spaces and pooled workspaces) and copies between
// host and device, submitted on a stream.
#include <unistd.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <backplane/sdk/disk_cache.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "context.h"
#include "device_api.h"
#include "emitter.h"
#include "instance.h"
#include "spirv_cache.h"

namespace backplane {
namespace vulkan {

void Context::Create(Device& d, Buffer& b, VkDeviceSize size, bool host_visible) {
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = std::max<VkDeviceSize>(size, 4);
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  CheckVk(vkCreateBuffer(d.device, &bi, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(d.device, b.buffer, &req);
  int64_t type = -1;
  if (host_visible) {
    type = MemoryType(d, req.memoryTypeBits,
                      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  } else {
    type = MemoryType(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0) type = MemoryType(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  }
  if (type < 0) {
    vkDestroyBuffer(d.device, b.buffer, nullptr);
    b.buffer = VK_NULL_HANDLE;
    throw Error(BP_ERR_DEVICE, "vulkan: no memory type fits a buffer on " +
                                   std::string(d.props.deviceName) +
                                   "; the driver is unusable for Backplane");
  }
  VkMemoryAllocateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = static_cast<uint32_t>(type);
  VkResult r = vkAllocateMemory(d.device, &mi, nullptr, &b.memory);
  if (r == VK_SUCCESS) r = vkBindBufferMemory(d.device, b.buffer, b.memory, 0);
  if (r == VK_SUCCESS && host_visible) {
    r = vkMapMemory(d.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  }
  if (r != VK_SUCCESS) {
    DestroyContents(d, b);
    CheckVk(r, "allocating " + std::to_string(size) + " bytes on " + d.props.deviceName);
  }
  b.size = b.capacity = size;
}

Buffer* Context::NewBuffer(Device& d, VkDeviceSize size) {
  auto b = std::make_unique<Buffer>();
  try {
    Create(d, *b, size, /*host_visible=*/false);
  } catch (const Error& e) {
    if (e.kind() != BP_ERR_OUT_OF_MEMORY || d.workspaces.CachedBytes() == 0) throw;
    WaitAll(d);
    for (auto& kept : d.workspaces.TakeAll()) Destroy(d, kept.buffer);
    Create(d, *b, size, /*host_visible=*/false);
  }
  return b.release();
}

namespace {

// Records `b`, a new or pooled buffer of `d`, as a live handle; if that fails (out of host
// memory), the buffer is destroyed rather than lost. The caller holds d.mu.
void AddOrDestroy(Device& d, DLDevice dev, Buffer* b, size_t nbytes, bool workspace) {
  try {
    d.handles->Add(dev, b, nbytes, workspace, b);
  } catch (...) {
    Context::Destroy(d, b);
    throw;
  }
}

}  // namespace

void* VulkanDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Ctx().Open(d);
  // Offsets are applied on the device; a buffer's memory is aligned to at least
  // minStorageBufferOffsetAlignment, which every dtype needs.
  (void)alignment;
  Buffer* b = Ctx().NewBuffer(d, nbytes);
  AddOrDestroy(d, dev, b, nbytes, /*workspace=*/false);
  return b;
}

void VulkanDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Buffer* b = d.handles->Remove(dev, ptr, /*workspace=*/false).info;
  WaitAll(d);  // queued work may still use it
  ++d.freed;
  Context::Destroy(d, b);
}

void* VulkanDeviceAPI::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Ctx().Open(d);
  const uint64_t stream = ActiveStream(d, "AllocWorkspace").id;
  size_t class_bytes = d.workspaces.ClassBytes(nbytes);
  if (d.max_allocation != 0 && class_bytes > d.max_allocation) class_bytes = 0;
  Buffer* b = nullptr;
  if (class_bytes == 0 ||
      !d.workspaces.Take(
          class_bytes, [&d, stream](const Use& u) { return u.stream == stream || Done(d, u); },
          &b)) {
    b = Ctx().NewBuffer(d, class_bytes != 0 ? class_bytes : nbytes);
  }
  AddOrDestroy(d, dev, b, nbytes, /*workspace=*/true);
  return b;
}

void VulkanDeviceAPI::FreeWorkspace(DLDevice dev, void* ptr) {
  if (ptr == nullptr) return;
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  // Work queued on the active stream before the free may still use it: the stream's last
  // submission says when another stream may take it.
  const Stream& s = ActiveStream(d, "FreeWorkspace");
  Buffer* b = d.handles->Remove(dev, ptr, /*workspace=*/true).info;
  ++d.freed;
  if (d.workspaces.ClassBytes(b->capacity) == b->capacity &&
      d.workspaces.Keep(b->capacity, b, Use{s.id, s.submitted})) {
    return;
  }
  WaitAll(d);
  Context::Destroy(d, b);
}

void VulkanDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
  const auto [n, from_dev, to_dev] = sdk::CheckCopy(from, to, device_type());
  Context& ctx = Ctx();
  // The buffer of one side, holding the copied range; the caller holds d.mu.
  auto buffer = [n = n](Device& d, const DLTensor* t, const char* side) {
    return d.handles->Resolve(t->device, t->data, t->byte_offset, n, side).info;
  };
  if (from_dev && to_dev) {
    BACKPLANE_REQUIRE(from->device.device_id == to->device.device_id, BP_ERR_INVALID_ARGUMENT,
                      "vulkan CopyDataFromTo: between two devices (" +
                          sdk::DeviceString(from->device) + ", " + sdk::DeviceString(to->device) +
                          "); copy through the host");
    Device& d = ctx.Dev(from->device);
    std::lock_guard<std::mutex> lock(d.mu);
    Buffer* src = buffer(d, from, "the source");
    Buffer* dst = buffer(d, to, "the destination");
    Stream& s = StreamOf(d, stream, "CopyDataFromTo");
    if (n == 0) return;
    Context::CopyBuffer(d, s, src->buffer, from->byte_offset, dst->buffer, to->byte_offset, n);
  } else if (to_dev && from->device.device_type == kDLCPU) {
    Device& d = ctx.Dev(to->device);
    std::lock_guard<std::mutex> lock(d.mu);
    Buffer* dst = buffer(d, to, "the destination");
    Stream& s = StreamOf(d, stream, "CopyDataFromTo");
    if (n == 0) return;
    // The host bytes are read before the call returns; the write to the device is queued.
    Wait(d, d.staging_use);  // the staging buffer's previous copy is done
    Buffer& st = ctx.Staging(d, n);
    std::memcpy(st.mapped, static_cast<const char*>(from->data) + from->byte_offset, n);
    d.staging_use = Context::CopyBuffer(d, s, st.buffer, 0, dst->buffer, to->byte_offset, n);
  } else if (from_dev && to->device.device_type == kDLCPU) {
    Device& d = ctx.Dev(from->device);
    std::lock_guard<std::mutex> lock(d.mu);
    Buffer* src = buffer(d, from, "the source");
    Stream& s = StreamOf(d, stream, "CopyDataFromTo");
    if (n == 0) return;
    // After the stream's earlier work; the host bytes are written before the call returns.
    Wait(d, d.staging_use);
    Buffer& st = ctx.Staging(d, n);
    d.staging_use = Context::CopyBuffer(d, s, src->buffer, from->byte_offset, st.buffer, 0, n,
                                        /*to_host=*/true);
    Wait(d, d.staging_use);
    std::memcpy(static_cast<char*>(to->data) + to->byte_offset, st.mapped, n);
    CheckStatus(d);  // results a kernel left incomplete are not read silently
  } else {
    throw Error(BP_ERR_INVALID_ARGUMENT, "vulkan CopyDataFromTo: from " +
                                             sdk::DeviceString(from->device) + " to " +
                                             sdk::DeviceString(to->device) +
                                             "; one side must be vulkan, the other vulkan or cpu");
  }
}

}  // namespace vulkan
}  // namespace backplane
