// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan's attributes and properties: what GetAttr, GetProperty and
// ListProperties report of a device, with the names vulkaninfo uses.
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

namespace {

std::string VersionString(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

}  // namespace

// VK_ prefix and _BIT suffix); "none" for no bit, and the hex value of bits not named here.
std::string FlagNames(uint32_t bits,
                      std::initializer_list<std::pair<uint32_t, const char*>> names) {
  std::string out;
  for (const auto& [bit, name] : names) {
    if ((bits & bit) == 0) continue;
    out += (out.empty() ? "" : "|") + std::string(name);
    bits &= ~bit;
  }
  if (bits != 0) {
    char rest[16];
    std::snprintf(rest, sizeof(rest), "0x%x", bits);
    out += (out.empty() ? "" : "|") + std::string(rest);
  }
  return out.empty() ? "none" : out;
}

// The driver version as its vendor encodes it: NVIDIA packs 10.8.8.6 bits, everyone else
// (Mesa, AMD, Intel on Linux) uses VK_MAKE_API_VERSION's 10.10.12 (as vulkaninfo decodes it).
std::string DriverVersionString(uint32_t vendor_id, uint32_t v) {
  if (vendor_id == 0x10DE) {
    return std::to_string(v >> 22) + "." + std::to_string((v >> 14) & 0xff) + "." +
           std::to_string((v >> 6) & 0xff) + "." + std::to_string(v & 0x3f);
  }
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

// The vendor a Vulkan vendor id stands for: PCI vendor ids, and Khronos' VkVendorId for
// vendors without one. Null for an id not listed here.
const char* VendorName(uint32_t id) {
  switch (id) {
    case 0x1002:
      return "AMD";
    case 0x1010:
      return "Imagination Technologies";
    case 0x10DE:
      return "NVIDIA";
    case 0x13B5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x8086:
      return "Intel";
    case VK_VENDOR_ID_VIV:
      return "Vivante";
    case VK_VENDOR_ID_VSI:
      return "VeriSilicon";
    case VK_VENDOR_ID_KAZAN:
      return "Kazan";
    case VK_VENDOR_ID_CODEPLAY:
      return "Codeplay";
    case VK_VENDOR_ID_MESA:
      return "Mesa";
    case VK_VENDOR_ID_POCL:
      return "PoCL";
    default:
      return nullptr;
  }
}

const char* DeviceTypeName(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

Any VulkanDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  Context& ctx = Ctx();
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(ctx.Exists(dev) ? 1 : 0);
  if (!ctx.Exists(dev)) return sdk::NoneValue();
  Device& d = ctx.Dev(dev);
  const VkPhysicalDeviceLimits& lim = d.props.limits;
  switch (kind) {
    case BP_ATTR_MAX_THREADS_PER_BLOCK:
      return sdk::IntValue(lim.maxComputeWorkGroupInvocations);
    case BP_ATTR_WARP_SIZE:
      return sdk::IntValue(d.subgroup_size);
    case BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
      return sdk::IntValue(lim.maxComputeSharedMemorySize);
    case BP_ATTR_COMPUTE_VERSION:
      return sdk::StringValue(std::to_string(VK_API_VERSION_MAJOR(d.props.apiVersion)) + "." +
                              std::to_string(VK_API_VERSION_MINOR(d.props.apiVersion)));
    case BP_ATTR_DEVICE_NAME:
      return sdk::StringValue(d.props.deviceName);
    case BP_ATTR_MAX_THREAD_DIMENSIONS:
      return sdk::StringValue("[" + std::to_string(lim.maxComputeWorkGroupSize[0]) + ", " +
                              std::to_string(lim.maxComputeWorkGroupSize[1]) + ", " +
                              std::to_string(lim.maxComputeWorkGroupSize[2]) + "]");
    case BP_ATTR_API_VERSION:
      return sdk::StringValue(VersionString(d.props.apiVersion));
    case BP_ATTR_DRIVER_VERSION:
      return sdk::StringValue(DriverVersionString(d.props.vendorID, d.props.driverVersion));
    case BP_ATTR_DRIVER_INFO:
      return d.driver_info.empty() ? sdk::NoneValue() : sdk::StringValue(d.driver_info);
    case BP_ATTR_DEVICE_KIND:
      switch (d.props.deviceType) {
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
          return sdk::StringValue("cpu");
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
          return sdk::StringValue("gpu");
        default:
          return sdk::StringValue("other");
      }
    case BP_ATTR_VENDOR: {
      const char* vendor = VendorName(d.props.vendorID);
      return vendor != nullptr ? sdk::StringValue(vendor) : sdk::NoneValue();
    }
    case BP_ATTR_VENDOR_ID:
      return sdk::IntValue(d.props.vendorID);
    case BP_ATTR_UUID: {
      if (!d.has_uuid) return sdk::NoneValue();
      return sdk::StringValue(sdk::UuidString(d.uuid));
    }
    case BP_ATTR_PCI_BUS_ID: {
      if (!d.has_pci) return sdk::NoneValue();
      return sdk::StringValue(
          sdk::PciBusIdString(d.pci_domain, d.pci_bus, d.pci_device, d.pci_function));
    }
    case BP_ATTR_MAX_ALLOCATION_SIZE:
      return d.max_allocation == 0 ? sdk::NoneValue()
                                   : sdk::IntValue(static_cast<int64_t>(d.max_allocation));
    case BP_ATTR_SUPPORTS_FP64:
      return sdk::IntValue(d.features.shaderFloat64 == VK_TRUE ? 1 : 0);
    case BP_ATTR_SUPPORTS_FP16:
      // "Kernels can compute in float16": float16 kernels need shaderFloat16 and 16-bit
      // storage buffers (a launch without both is refused); shaderFloat16 alone is the
      // property supports_float16 (what the Target reads).
      return sdk::IntValue(kCodegenComputesInFloat16 && d.float16 && d.buffer16 ? 1 : 0);
    case BP_ATTR_SUBGROUP_SIZES: {
      // Every power of two from the smallest to the largest size the device may pick; the
      // one it always uses without VK_EXT_subgroup_size_control.
      std::vector<int64_t> sizes;
      if (d.min_subgroup != 0 && d.max_subgroup >= d.min_subgroup) {
        for (uint32_t s = d.min_subgroup; s <= d.max_subgroup; s *= 2) sizes.push_back(s);
      } else if (d.subgroup_size != 0) {
        sizes.push_back(d.subgroup_size);
      }
      return sizes.empty() ? sdk::NoneValue() : sdk::IntArrayValue(sizes);
    }
    case BP_ATTR_EXTENSIONS:
      return sdk::StringArrayValue(
          std::vector<std::string>(d.extensions.begin(), d.extensions.end()));
    case BP_ATTR_TOTAL_GLOBAL_MEMORY: {
      int64_t total = 0;
      for (uint32_t i = 0; i < d.mem.memoryHeapCount; ++i) {
        if (d.mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
          total += static_cast<int64_t>(d.mem.memoryHeaps[i].size);
        }
      }
      return sdk::IntValue(total);
    }
    case BP_ATTR_AVAILABLE_GLOBAL_MEMORY: {
      if (!d.has_budget) return sdk::NoneValue();
      VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
      budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
      VkPhysicalDeviceMemoryProperties2 m2{};
      m2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
      m2.pNext = &budget;
      vkGetPhysicalDeviceMemoryProperties2(d.physical, &m2);
      int64_t avail = 0;
      for (uint32_t i = 0; i < m2.memoryProperties.memoryHeapCount; ++i) {
        if (m2.memoryProperties.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
          const VkDeviceSize b = budget.heapBudget[i], u = budget.heapUsage[i];
          avail += static_cast<int64_t>(b > u ? b - u : 0);
        }
      }
      return sdk::IntValue(avail);
    }
    default:
      // kMaxClockRate, multiprocessor count, registers, GCN arch, L2, pitch: Vulkan does
      // not report them.
      return sdk::NoneValue();
  }
}

Any VulkanDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  Context& ctx = Ctx();
  if (key == "status") return sdk::StringValue(ctx.status());
  if (!ctx.Exists(dev)) return sdk::NoneValue();
  const Device& d = ctx.Dev(dev);
  const VkPhysicalDeviceLimits& lim = d.props.limits;
  const uint32_t version = UsableVersion(d);
  auto has = [&d](const char* ext) { return sdk::IntValue(d.extensions.count(ext) ? 1 : 0); };
  auto flag = [](bool b) { return sdk::IntValue(b ? 1 : 0); };
  if (key == "max_push_constants_size") return sdk::IntValue(lim.maxPushConstantsSize);
  if (key == "max_storage_buffer_range") return sdk::IntValue(lim.maxStorageBufferRange);
  if (key == "max_uniform_buffer_range") return sdk::IntValue(lim.maxUniformBufferRange);
  if (key == "max_per_stage_descriptor_storage_buffers" ||
      key == "max_per_stage_descriptor_storage_buffer") {
    return sdk::IntValue(lim.maxPerStageDescriptorStorageBuffers);
  }
  if (key == "max_block_size_x") return sdk::IntValue(lim.maxComputeWorkGroupSize[0]);
  if (key == "max_block_size_y") return sdk::IntValue(lim.maxComputeWorkGroupSize[1]);
  if (key == "max_block_size_z") return sdk::IntValue(lim.maxComputeWorkGroupSize[2]);
  if (key == "vendor_id") return sdk::IntValue(d.props.vendorID);
  if (key == "device_id") return sdk::IntValue(d.props.deviceID);
  if (key == "device_type") return sdk::StringValue(DeviceTypeName(d.props.deviceType));
  if (key == "driver_version") return sdk::IntValue(d.props.driverVersion);
  if (key == "vulkan_api_version") return sdk::IntValue(d.props.apiVersion);
  if (key == "max_spirv_version") {
    // The SPIR-V version word (0x00MMmm00) that the usable Vulkan version accepts.
    if (version >= VK_API_VERSION_1_2) return sdk::IntValue(0x10500);
    if (version >= VK_API_VERSION_1_1) return sdk::IntValue(0x10300);
    return sdk::IntValue(0x10000);
  }
  if (key == "supported_subgroup_operations") return sdk::IntValue(d.subgroup_operations);
  if (key == "supports_float16") return flag(d.float16);
  if (key == "supports_float32" || key == "supports_int32") return flag(true);
  if (key == "supports_float64") return flag(d.features.shaderFloat64 == VK_TRUE);
  if (key == "supports_int8") return flag(d.int8);
  if (key == "supports_int16") return flag(d.features.shaderInt16 == VK_TRUE);
  if (key == "supports_int64") return flag(d.features.shaderInt64 == VK_TRUE);
  if (key == "supports_8bit_buffer") return flag(d.buffer8);
  if (key == "supports_16bit_buffer") return flag(d.buffer16);
  // Core since Vulkan 1.1 (dedicated allocation, the storage-buffer storage class) and 1.3
  // (integer dot products), else an extension.
  if (key == "supports_storage_buffer_storage_class") {
    return version >= VK_API_VERSION_1_1 ? flag(true)
                                         : has(VK_KHR_STORAGE_BUFFER_STORAGE_CLASS_EXTENSION_NAME);
  }
  if (key == "supports_dedicated_allocation") {
    return version >= VK_API_VERSION_1_1 ? flag(true)
                                         : has(VK_KHR_DEDICATED_ALLOCATION_EXTENSION_NAME);
  }
  if (key == "supports_integer_dot_product") {
    return has(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  if (key == "supports_push_descriptor") return has(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  // Whether kernels keep subnormal floats (their pipelines ask for DenormPreserve) and signed
  // zeros, infinities and NaNs (SignedZeroInfNanPreserve).
  const FloatControls& f = d.float_controls;
  if (key == "denorm_preserve_float32") return sdk::IntValue(f.denorm32 ? 1 : 0);
  if (key == "denorm_preserve_float64") return sdk::IntValue(f.denorm64 ? 1 : 0);
  if (key == "signed_zero_inf_nan_preserve_float16") return sdk::IntValue(f.specials16 ? 1 : 0);
  if (key == "signed_zero_inf_nan_preserve_float32") return sdk::IntValue(f.specials32 ? 1 : 0);
  if (key == "signed_zero_inf_nan_preserve_float64") return sdk::IntValue(f.specials64 ? 1 : 0);
  if (key == "supports_cooperative_matrix") return has(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (key == "driver_name") {
    return d.driver_name.empty() ? sdk::NoneValue() : sdk::StringValue(d.driver_name);
  }
  // What vulkaninfo shows beyond the target kind's flags: memory heaps and types, queue
  // families (each a list, one entry per heap, type or family, in the driver's order), the
  // dispatch limits, the timestamp period and the conformance version.
  if (key == "memory_heap_sizes" || key == "memory_heap_flags") {
    std::vector<int64_t> sizes;
    std::vector<std::string> flags;
    for (uint32_t i = 0; i < d.mem.memoryHeapCount; ++i) {
      const VkMemoryHeap& heap = d.mem.memoryHeaps[i];
      sizes.push_back(static_cast<int64_t>(heap.size));
      flags.push_back(
          FlagNames(heap.flags, {{VK_MEMORY_HEAP_DEVICE_LOCAL_BIT, "DEVICE_LOCAL"},
                                 {VK_MEMORY_HEAP_MULTI_INSTANCE_BIT, "MULTI_INSTANCE"}}));
    }
    return key == "memory_heap_sizes" ? sdk::IntArrayValue(sizes) : sdk::StringArrayValue(flags);
  }
  if (key == "memory_type_heaps" || key == "memory_type_flags") {
    std::vector<int64_t> heaps;
    std::vector<std::string> flags;
    for (uint32_t i = 0; i < d.mem.memoryTypeCount; ++i) {
      const VkMemoryType& type = d.mem.memoryTypes[i];
      heaps.push_back(type.heapIndex);
      flags.push_back(FlagNames(type.propertyFlags,
                                {{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "DEVICE_LOCAL"},
                                 {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "HOST_VISIBLE"},
                                 {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "HOST_COHERENT"},
                                 {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "HOST_CACHED"},
                                 {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "LAZILY_ALLOCATED"},
                                 {VK_MEMORY_PROPERTY_PROTECTED_BIT, "PROTECTED"}}));
    }
    return key == "memory_type_heaps" ? sdk::IntArrayValue(heaps) : sdk::StringArrayValue(flags);
  }
  if (key == "queue_family_flags" || key == "queue_family_queue_counts" ||
      key == "queue_family_timestamp_valid_bits") {
    std::vector<int64_t> counts, bits;
    std::vector<std::string> flags;
    for (const VkQueueFamilyProperties& q : d.queue_families) {
      counts.push_back(q.queueCount);
      bits.push_back(q.timestampValidBits);
      flags.push_back(FlagNames(q.queueFlags, {{VK_QUEUE_GRAPHICS_BIT, "GRAPHICS"},
                                               {VK_QUEUE_COMPUTE_BIT, "COMPUTE"},
                                               {VK_QUEUE_TRANSFER_BIT, "TRANSFER"},
                                               {VK_QUEUE_SPARSE_BINDING_BIT, "SPARSE_BINDING"},
                                               {VK_QUEUE_PROTECTED_BIT, "PROTECTED"}}));
    }
    if (key == "queue_family_flags") return sdk::StringArrayValue(flags);
    return sdk::IntArrayValue(key == "queue_family_queue_counts" ? counts : bits);
  }
  if (key == "queue_family") return sdk::IntValue(d.queue_family);
  if (key == "max_compute_work_group_count") {
    return sdk::IntArrayValue({lim.maxComputeWorkGroupCount[0], lim.maxComputeWorkGroupCount[1],
                               lim.maxComputeWorkGroupCount[2]});
  }
  if (key == "timestamp_period_ns") return sdk::FloatValue(lim.timestampPeriod);
  if (key == "conformance_version") {
    if (!d.has_conformance) return sdk::NoneValue();
    const VkConformanceVersion& c = d.conformance;
    return sdk::StringValue(std::to_string(c.major) + "." + std::to_string(c.minor) + "." +
                            std::to_string(c.subminor) + "." + std::to_string(c.patch));
  }
  return sdk::NoneValue();
}

std::vector<std::string> VulkanDeviceAPI::ListProperties(DLDevice dev) {
  Context& ctx = Ctx();
  std::vector<std::string> keys = {"status"};
  if (!ctx.Exists(dev)) return keys;
  for (const char* key : {"max_push_constants_size",
                          "max_storage_buffer_range",
                          "max_uniform_buffer_range",
                          "max_per_stage_descriptor_storage_buffers",
                          "max_block_size_x",
                          "max_block_size_y",
                          "max_block_size_z",
                          "vendor_id",
                          "device_id",
                          "device_type",
                          "driver_version",
                          "vulkan_api_version",
                          "max_spirv_version",
                          "supported_subgroup_operations",
                          "supports_float16",
                          "supports_float32",
                          "supports_int32",
                          "supports_float64",
                          "supports_int8",
                          "supports_int16",
                          "supports_int64",
                          "supports_8bit_buffer",
                          "supports_16bit_buffer",
                          "supports_storage_buffer_storage_class",
                          "supports_dedicated_allocation",
                          "supports_integer_dot_product",
                          "supports_push_descriptor",
                          "supports_cooperative_matrix",
                          "denorm_preserve_float32",
                          "denorm_preserve_float64",
                          "signed_zero_inf_nan_preserve_float16",
                          "signed_zero_inf_nan_preserve_float32",
                          "signed_zero_inf_nan_preserve_float64",
                          "driver_name",
                          "memory_heap_sizes",
                          "memory_heap_flags",
                          "memory_type_heaps",
                          "memory_type_flags",
                          "queue_family_flags",
                          "queue_family_queue_counts",
                          "queue_family_timestamp_valid_bits",
                          "queue_family",
                          "max_compute_work_group_count",
                          "timestamp_period_ns",
                          "conformance_version"}) {
    if (!GetProperty(dev, key).is_none()) keys.push_back(key);
  }
  return keys;
}

}  // namespace vulkan
}  // namespace backplane
