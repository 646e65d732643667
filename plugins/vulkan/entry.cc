// SPDX-License-Identifier: Apache-2.0
// The Vulkan plugin's entry point: registers device_api.vulkan (device type vulkan =
// kDLVulkan) and the target kind `vulkan`.
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>

#include "device_api.h"
#include "target.h"

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{
    "vulkan", BACKPLANE_VULKAN_VERSION, "Backplane", BP_ABI_VERSION_MINOR})) {
  backplane::sdk::RegisterDeviceAPI("vulkan", backplane::vulkan::VulkanDeviceAPI::Global());
  backplane::vulkan::RegisterTargetKind();
  // vulkan.validation_errors(): see VulkanDeviceAPI::ValidationErrors.
  backplane::sdk::RegisterFunction("vulkan.validation_errors", [](backplane::PackedArgs) {
    return backplane::sdk::IntValue(
        backplane::vulkan::VulkanDeviceAPI::Global()->ValidationErrors());
  });
}
