// SPDX-License-Identifier: Apache-2.0
// The `vulkan` TargetKind: TVM's attributes for kind vulkan. FromDevice fills the limits
// the DeviceAPI reports as attributes (work-group invocations, subgroup size, shared memory,
// name); the canonicalizer, given the device, fills every other device-derived attribute
// (work-group sizes, buffer ranges, push-constant bytes, the supports_* flags, versions)
// from device_api.vulkan's properties of the same names. Without a device the values stay.
#include "target.h"

#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "device_api.h"

namespace backplane {
namespace vulkan {

namespace {

namespace sdk = ::backplane::sdk;
using Json = nlohmann::json;

// The attributes the canonicalizer reads from VulkanDeviceAPI::GetProperty (same key) when
// the Target is built from a device; `flag` ones are bools (the property answers 0 or 1).
struct DeviceProperty {
  const char* name;
  bool flag;
};
constexpr DeviceProperty kDeviceProperties[] = {
    {"supports_float16", true},
    {"supports_float32", true},
    {"supports_float64", true},
    {"supports_int8", true},
    {"supports_int16", true},
    {"supports_int32", true},
    {"supports_int64", true},
    {"supports_8bit_buffer", true},
    {"supports_16bit_buffer", true},
    {"supports_storage_buffer_storage_class", true},
    {"supports_push_descriptor", true},
    {"supports_dedicated_allocation", true},
    {"supports_integer_dot_product", true},
    {"supports_cooperative_matrix", true},
    {"supported_subgroup_operations", false},
    {"max_block_size_x", false},
    {"max_block_size_y", false},
    {"max_block_size_z", false},
    {"max_push_constants_size", false},
    {"max_uniform_buffer_range", false},
    {"max_storage_buffer_range", false},
    {"max_per_stage_descriptor_storage_buffer", false},
    {"device_type", false},
    {"driver_version", false},
    {"vulkan_api_version", false},
    {"max_spirv_version", false},
};

std::string Canonicalize(const std::string& attrs_json, const DLDevice* device) {
  Json attrs = Json::parse(attrs_json, nullptr, /*allow_exceptions=*/false);
  if (!attrs.is_object()) {
    throw Error(BP_ERR_INTERNAL,
                "target kind 'vulkan': the canonicalizer got attributes that are not a JSON "
                "object (a bug in libbackplane; please report it)");
  }
  if (device != nullptr) {
    VulkanDeviceAPI* api = VulkanDeviceAPI::Global();
    for (const DeviceProperty& p : kDeviceProperties) {
      const Any v = api->GetProperty(*device, p.name);
      if (v.type() == BP_VALUE_INT) {
        attrs[p.name] = p.flag ? Json(v.AsInt() != 0) : Json(v.AsInt());
      } else if (v.type() == BP_VALUE_OBJECT) {
        attrs[p.name] = v.AsString();  // device_type, a string object
      }
    }
  }
  // The code generator sizes work groups and push-constant blocks by these: a value below 1
  // would refuse every kernel with a confusing message.
  for (const char* name : {"max_num_threads", "max_threads_per_block", "max_block_size_x",
                           "max_block_size_y", "max_block_size_z", "max_push_constants_size"}) {
    if (attrs.contains(name) && attrs[name].is_number_integer() && attrs[name].get<int64_t>() < 1) {
      sdk::ThrowTargetAttrError(name, "is " + attrs[name].dump() + "; expected at least 1");
    }
  }
  return attrs.dump();
}

}  // namespace

void RegisterTargetKind() {
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
      .Attr<int64_t>("max_spirv_version", int64_t{0},
                     "the newest SPIR-V the device takes, as SPIR-V's version word (0x10500 "
                     "is 1.5)")
      .Attr<bool>("fast-math-contract", false,
                  "allow fusing, e.g. a*b+c into an FMA (otherwise every float add, subtract, "
                  "multiply and divide of the SPIR-V is decorated NoContraction: two roundings, "
                  "as docs/ir.md says)")
      .Attr<bool>("bounds-check", false,
                  "check every index against its extent: the first access out of bounds is an "
                  "error naming the kernel, buffer, index and extent (docs/vulkan.md)")
      .Canonicalizer(Canonicalize)
      .Register();
}

}  // namespace vulkan
}  // namespace backplane
