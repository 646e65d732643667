// SPDX-License-Identifier: Apache-2.0
// The plugin's Vulkan context: its one instance and the physical devices with a compute queue,
// each opened (VkDevice, queue, command pool) on first use (instance.cc), and their buffers
// (memory.cc).
#ifndef BACKPLANE_PLUGINS_VULKAN_INSTANCE_H_
#define BACKPLANE_PLUGINS_VULKAN_INSTANCE_H_

#include <vulkan/vulkan.h>

#include <algorithm>
#include <backplane/sdk/handle_table.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/stream_registry.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "context.h"

namespace backplane {
namespace vulkan {

// The device's API version as far as this instance (API 1.2) may use it.
uint32_t UsableVersion(const Device& d);

class Context {
 public:
  Context();

  // Why there are no devices (or "ok: ..."): the DeviceAPI's property "status".
  const std::string& status() const { return status_; }

  ~Context();

  size_t count() const { return devices_.size(); }
  bool Exists(DLDevice dev) const {
    return dev.device_id >= 0 && static_cast<size_t>(dev.device_id) < devices_.size();
  }

  // The device `dev`, or an error naming the devices that exist.
  Device& Dev(DLDevice dev) {
    if (!Exists(dev)) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  sdk::DeviceString(dev) + " does not exist: this process sees " +
                      std::to_string(devices_.size()) +
                      " Vulkan device(s) with a compute queue; pass an id below that (see "
                      "`backplane info` or vulkaninfo)");
    }
    return *devices_[dev.device_id];
  }

  // The device with its VkDevice created; the caller holds d.mu.
  void Open(Device& d) {
    if (d.device == VK_NULL_HANDLE) OpenDevice(d);
  }
  // Creates d's VkDevice, queue and command pool (Open).
  void OpenDevice(Device& d);

  // A memory type allowed by `bits` with `want` flags, or -1.
  static int64_t MemoryType(const Device& d, uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < d.mem.memoryTypeCount; ++i) {
      if ((bits & (1u << i)) && (d.mem.memoryTypes[i].propertyFlags & want) == want) return i;
    }
    return -1;
  }

  // Fills `b` with a buffer of `size` bytes; host_visible asks for mapped host memory,
  // otherwise device-local memory where the device has it. The caller holds d.mu.
  void Create(Device& d, Buffer& b, VkDeviceSize size, bool host_visible);

  // A new device buffer of `size` bytes. When the device is out of memory, the freed
  // workspaces kept for reuse are released and it is tried once more. The caller holds d.mu.
  Buffer* NewBuffer(Device& d, VkDeviceSize size);

  static void DestroyContents(Device& d, Buffer& b) {
    if (b.buffer != VK_NULL_HANDLE) vkDestroyBuffer(d.device, b.buffer, nullptr);
    if (b.memory != VK_NULL_HANDLE) vkFreeMemory(d.device, b.memory, nullptr);
    b = Buffer{};
  }
  static void Destroy(Device& d, Buffer* b) {
    DestroyContents(d, *b);
    delete b;
  }

  // The staging buffer with at least `size` bytes; the caller holds d.mu.
  Buffer& Staging(Device& d, VkDeviceSize size) {
    if (d.staging.buffer == VK_NULL_HANDLE || d.staging.size < size) {
      if (d.staging.buffer != VK_NULL_HANDLE) DestroyContents(d, d.staging);
      Create(d, d.staging, std::max<VkDeviceSize>(size, 1 << 20), /*host_visible=*/true);
    }
    return d.staging;
  }

  // Submits one buffer copy on `s`; with `to_host`, a barrier then makes the written bytes
  // visible to the host. The caller holds d.mu.
  static Use CopyBuffer(Device& d, Stream& s, VkBuffer src, VkDeviceSize src_off, VkBuffer dst,
                        VkDeviceSize dst_off, VkDeviceSize size, bool to_host = false) {
    return Submit(d, s, [&](VkCommandBuffer cmd) {
      VkBufferCopy region{src_off, dst_off, size};
      vkCmdCopyBuffer(cmd, src, dst, 1, &region);
      if (to_host) {
        VkMemoryBarrier barrier{};
        barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
        barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &barrier, 0, nullptr, 0, nullptr);
      }
    });
  }

  static constexpr const char* kNoDriverHelp =
      "install a Vulkan driver (Mesa: mesa-vulkan-drivers; NVIDIA: the driver's Vulkan ICD), "
      "point VK_DRIVER_FILES at its ICD manifest (icd.d/*.json), and run with "
      "VK_LOADER_DEBUG=error,warn,driver to see what the loader tried";
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::string status_;
  sdk::StreamRegistry streams_{"vulkan"};        // every device's streams (Device::streams)
  sdk::HandleTable<Buffer*> handles_{"vulkan"};  // every device's buffers (Device::handles)
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_INSTANCE_H_
