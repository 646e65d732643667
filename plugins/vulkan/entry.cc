// SPDX-License-Identifier: Apache-2.0
// The Vulkan plugin's entry point: registers device_api.vulkan (device type vulkan =
// kDLVulkan), the target kind `vulkan`, its code generator target.build.vulkan and module
// loader runtime.module.load_from_bytes.vulkan.
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>

#include "codegen.h"
#include "device_api.h"
#include "target.h"

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{
    "vulkan", BACKPLANE_VULKAN_VERSION, "Backplane", BP_ABI_VERSION_MINOR})) {
  backplane::sdk::RegisterDeviceAPI("vulkan", backplane::vulkan::VulkanDeviceAPI::Global());
  backplane::vulkan::RegisterTargetKind();
  backplane::vulkan::RegisterCodegen();
  // vulkan.validation_errors(): see VulkanDeviceAPI::ValidationErrors.
  backplane::sdk::RegisterFunction("vulkan.validation_errors", [](backplane::PackedArgs) {
    return backplane::sdk::IntValue(
        backplane::vulkan::VulkanDeviceAPI::Global()->ValidationErrors());
  });
}
