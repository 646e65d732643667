// SPDX-License-Identifier: Apache-2.0
// The `vulkan` TargetKind: TVM's attributes for kind vulkan. FromDevice fills the limits
// the DeviceAPI reports (work-group invocations, subgroup size, shared memory); the rest
// keep TVM's defaults.
#include "target.h"

#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <string>

namespace backplane {
namespace vulkan {

void RegisterTargetKind() {
  namespace sdk = ::backplane::sdk;
  sdk::TargetKindBuilder("vulkan", "vulkan")
      .Keys({"vulkan", "gpu"})
      .Attr<bool>("supports_float16", false, "shaderFloat16")
      .Attr<bool>("supports_float32", true, "32-bit floats")
      .Attr<bool>("supports_float64", false, "shaderFloat64")
      .Attr<bool>("supports_int8", false, "shaderInt8")
      .Attr<bool>("supports_int16", false, "shaderInt16")
      .Attr<bool>("supports_int32", true, "32-bit integers")
      .Attr<bool>("supports_int64", false, "shaderInt64")
      .Attr<bool>("supports_8bit_buffer", false, "storageBuffer8BitAccess")
      .Attr<bool>("supports_16bit_buffer", false, "storageBuffer16BitAccess")
      .Attr<bool>("supports_storage_buffer_storage_class", false,
                  "VK_KHR_storage_buffer_storage_class")
      .Attr<bool>("supports_push_descriptor", false, "VK_KHR_push_descriptor")
      .Attr<bool>("supports_dedicated_allocation", false, "VK_KHR_dedicated_allocation")
      .Attr<bool>("supports_integer_dot_product", false, "VK_KHR_shader_integer_dot_product")
      .Attr<bool>("supports_cooperative_matrix", false, "VK_NV_cooperative_matrix")
      .Attr<int64_t>("supported_subgroup_operations", int64_t{0}, "VkSubgroupFeatureFlags bits")
      .Attr<int64_t>("max_num_threads", int64_t{256}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "maxComputeWorkGroupInvocations")
      .Attr<int64_t>("max_threads_per_block", int64_t{256}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "maxComputeWorkGroupInvocations")
      .Attr<int64_t>("thread_warp_size", int64_t{1}, BP_ATTR_WARP_SIZE, "subgroupSize")
      .Attr<int64_t>("max_block_size_x", int64_t{256}, "maxComputeWorkGroupSize[0]")
      .Attr<int64_t>("max_block_size_y", int64_t{256}, "maxComputeWorkGroupSize[1]")
      .Attr<int64_t>("max_block_size_z", int64_t{64}, "maxComputeWorkGroupSize[2]")
      .Attr<int64_t>("max_push_constants_size", int64_t{128}, "maxPushConstantsSize")
      .Attr<int64_t>("max_uniform_buffer_range", int64_t{16384}, "maxUniformBufferRange")
      .Attr<int64_t>("max_storage_buffer_range", int64_t{1} << 27, "maxStorageBufferRange")
      .Attr<int64_t>("max_per_stage_descriptor_storage_buffer", int64_t{4},
                     "maxPerStageDescriptorStorageBuffers")
      .Attr<int64_t>("max_shared_memory_per_block", int64_t{16384},
                     BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, "maxComputeSharedMemorySize")
      .Attr<std::string>("device_name", std::string(), BP_ATTR_DEVICE_NAME, "deviceName")
      .Attr<std::string>("device_type", std::string(), "VkPhysicalDeviceType")
      .Attr<int64_t>("driver_version", int64_t{0}, "driverVersion")
      .Attr<int64_t>("vulkan_api_version", int64_t{0}, "apiVersion")
      .Attr<int64_t>("max_spirv_version", int64_t{0}, "the newest SPIR-V the device takes")
      .Register();
}

}  // namespace vulkan
}  // namespace backplane
