// SPDX-License-Identifier: Apache-2.0
// Native handles of the vulkan plugin (ABI 1.6): the Vulkan objects behind Backplane's data
// handles, streams and devices, and an application's VkBuffer with its VkDeviceMemory wrapped
// as data space (docs/vulkan.md, "Native handles").
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "context.h"
#include "device_api.h"

namespace backplane {
namespace vulkan {

namespace {

// A Vulkan handle as the ABI's uint64_t: dispatchable handles are pointers, non-dispatchable
// ones pointers on 64-bit hosts and uint64_t elsewhere.
template <typename Handle>
uint64_t Raw(Handle h) {
  if constexpr (std::is_pointer_v<Handle>) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
  } else {
    return static_cast<uint64_t>(h);
  }
}

template <typename Handle>
Handle FromRaw(uint64_t v) {
  if constexpr (std::is_pointer_v<Handle>) {
    return reinterpret_cast<Handle>(static_cast<uintptr_t>(v));
  } else {
    return static_cast<Handle>(v);
  }
}

[[noreturn]] void BadWrap(DLDevice dev, const std::string& why) {
  throw Error(BP_ERR_INVALID_ARGUMENT,
              "bp_tensor_from_native on " + sdk::DeviceString(dev) + ": " + why);
}

}  // namespace

uint64_t VulkanDeviceAPI::NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  switch (kind) {
    case BP_NATIVE_BUFFER:
    case BP_NATIVE_BUFFER_OFFSET:
    case BP_NATIVE_MEMORY:
    case BP_NATIVE_MEMORY_OFFSET: {
      // A made-up, freed or foreign handle is an error here, never a dereference.
      const Buffer* b = d.handles->Get(dev, object, "bp_native_handle: the tensor's data").info;
      switch (kind) {
        case BP_NATIVE_BUFFER:
          return Raw(b->buffer);
        case BP_NATIVE_MEMORY:
          return Raw(b->memory);
        case BP_NATIVE_MEMORY_OFFSET:
          return b->memory_offset;
        default:
          return 0;  // every data handle is a whole VkBuffer: no suballocation
      }
    }
    case BP_NATIVE_QUEUE:
    case BP_NATIVE_QUEUE_FAMILY:
      // Every stream of a device submits to its one queue; the stream is checked all the same.
      StreamOf(d, object, "bp_native_handle");
      return kind == BP_NATIVE_QUEUE ? Raw(d.queue) : d.queue_family;
    case BP_NATIVE_CONTEXT:
      return Raw(d.device);
    case BP_NATIVE_DEVICE:
      return Raw(d.physical);
    case BP_NATIVE_PLATFORM:
      return Raw(d.instance);
  }
  UnsupportedNative(dev, kind,
                    "BP_NATIVE_BUFFER (the VkBuffer), BP_NATIVE_BUFFER_OFFSET (0), "
                    "BP_NATIVE_MEMORY (the VkDeviceMemory), BP_NATIVE_MEMORY_OFFSET, "
                    "BP_NATIVE_QUEUE (the VkQueue), BP_NATIVE_QUEUE_FAMILY, BP_NATIVE_CONTEXT "
                    "(the VkDevice), BP_NATIVE_DEVICE (the VkPhysicalDevice) and "
                    "BP_NATIVE_PLATFORM (the VkInstance)");
}

void* VulkanDeviceAPI::WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  if (buffer.buffer == 0) {
    BadWrap(dev,
            "buffer->buffer is 0; pass a VkBuffer created on the VkDevice that "
            "bp_native_handle(BP_NATIVE_CONTEXT) gives");
  }
  if (buffer.memory == 0) {
    BadWrap(dev, "buffer->memory is 0; pass the VkDeviceMemory the VkBuffer is bound to");
  }
  // What Vulkan lets the plugin check; the rest (the buffer is of this VkDevice, bound to that
  // memory at that offset, with the plugin's usage flags) is the application's word.
  const auto vk_buffer = FromRaw<VkBuffer>(buffer.buffer);
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(d.device, vk_buffer, &req);
  if (buffer.size > req.size) {
    BadWrap(dev, "buffer->size " + std::to_string(buffer.size) + " is more than the " +
                     std::to_string(req.size) +
                     " bytes the VkBuffer holds (vkGetBufferMemoryRequirements); pass at most "
                     "its size");
  }
  if (req.alignment != 0 && buffer.memory_offset % req.alignment != 0) {
    BadWrap(dev, "buffer->memory_offset " + std::to_string(buffer.memory_offset) +
                     " is not a multiple of the VkBuffer's alignment " +
                     std::to_string(req.alignment) +
                     "; pass the offset given to vkBindBufferMemory");
  }
  auto b = std::make_unique<Buffer>();
  b->buffer = vk_buffer;
  b->memory = FromRaw<VkDeviceMemory>(buffer.memory);
  b->memory_offset = buffer.memory_offset;
  b->size = b->capacity = buffer.size;
  b->wrapped = true;
  d.handles->AddWrapped(dev, b.get(), static_cast<size_t>(buffer.size), b.get());
  return b.release();
}

void VulkanDeviceAPI::UnwrapNative(DLDevice dev, void* data) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  std::unique_ptr<Buffer> b(d.handles->RemoveWrapped(dev, data).info);
  // A kernel's descriptor set may name the VkBuffer: the application may destroy it now and
  // the driver hand its handle to a new buffer, so the sets are rewritten (as after a free).
  ++d.freed;
  // Work queued on any stream may still use the buffer: once this returns it is wholly the
  // application's again (as FreeDataSpace waits before it destroys).
  WaitAll(d);
}

}  // namespace vulkan
}  // namespace backplane
