// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan: every physical device with a compute queue, in the loader's order
// (vkEnumeratePhysicalDevices), is vulkan:0, vulkan:1, ... Data space is a VkBuffer with its
// memory behind an opaque handle; copies with the host go through a pooled staging buffer.
#ifndef BACKPLANE_PLUGINS_VULKAN_DEVICE_API_H_
#define BACKPLANE_PLUGINS_VULKAN_DEVICE_API_H_

#include <backplane/sdk/device_api.hpp>
#include <memory>
#include <string>

namespace backplane {
namespace vulkan {

class Context;

class VulkanDeviceAPI final : public sdk::DeviceAPI {
 public:
  static VulkanDeviceAPI* Global();
  // Validation errors seen so far with BACKPLANE_VULKAN_VALIDATION=1, or -1 when validation
  // is off (the variable unset, or no VK_LAYER_KHRONOS_validation).
  int64_t ValidationErrors();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  Any GetProperty(DLDevice dev, const std::string& key) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_stream_t CreateStream(DLDevice dev) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;

 private:
  VulkanDeviceAPI();
  Context& Ctx();
  std::unique_ptr<Context> ctx_;
};

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_DEVICE_API_H_
