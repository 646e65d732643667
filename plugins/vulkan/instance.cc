// SPDX-License-Identifier: Apache-2.0
// The Vulkan instance (with the validation layer on request) and device selection: what each
// physical device offers, and opening one (VkDevice, queue, command pool) on first use.
#include "instance.h"

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
#include "spirv_cache.h"

namespace backplane {
namespace vulkan {

namespace {

std::string VkResultName(VkResult r) {
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    default:
      return "VkResult " + std::to_string(static_cast<int>(r));
  }
}

}  // namespace

void CheckVk(VkResult r, const std::string& what) {
  if (r == VK_SUCCESS) return;
  const bp_error_kind_t kind =
      (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
          ? BP_ERR_OUT_OF_MEMORY
          : BP_ERR_DEVICE;
  throw Error(kind, "vulkan: " + what + " failed with " + VkResultName(r) +
                        (kind == BP_ERR_OUT_OF_MEMORY ? "; free device memory or ask for less"
                                                      : "; check the Vulkan driver (vulkaninfo)"));
}

// Validation errors the debug-utils messenger saw (BACKPLANE_VULKAN_VALIDATION=1), or -1
// when validation is off.
std::atomic<int64_t> g_validation_errors{-1};

VKAPI_ATTR VkBool32 VKAPI_CALL OnValidationMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    g_validation_errors.fetch_add(1);
    std::fprintf(stderr, "backplane vulkan: validation error: %s\n",
                 data != nullptr && data->pMessage != nullptr ? data->pMessage : "");
  }
  return VK_FALSE;
}

// True when the loader offers the instance layer `name`.
bool HasLayer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers) {
    if (std::strcmp(l.layerName, name) == 0) return true;
  }
  return false;
}

uint32_t UsableVersion(const Device& d) {
  return std::min<uint32_t>(d.props.apiVersion, VK_API_VERSION_1_2);
}

// The structures of the atomics a kernel may use beyond int32 (KernelLayout::atomics), for a
// VkPhysicalDeviceFeatures2 chain (what the device has) and a VkDeviceCreateInfo chain (what to
// enable).
struct AtomicFeatures {
  VkPhysicalDeviceShaderAtomicInt64Features int64{};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT add{};
  AtomicFeatures() {
    int64.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES;
    add.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT;
  }
  // The kAtomic* bits the structures report, in both storage buffers and shared memory.
  uint32_t Bits(bool shader_int64) const {
    uint32_t bits = 0;
    if (int64.shaderBufferInt64Atomics && int64.shaderSharedInt64Atomics && shader_int64)
      bits |= kAtomicInt64;
    if (add.shaderBufferFloat32AtomicAdd && add.shaderSharedFloat32AtomicAdd)
      bits |= kAtomicFloatAdd;
    return bits;
  }
};

// Fills the 8/16-bit feature flags and the timeline-semaphore support of `d`, chaining only the
// structures its API version or extensions define (anything else in the chain is invalid usage).
void QueryStorageFeatures(Device& d) {
  const bool v11 = UsableVersion(d) >= VK_API_VERSION_1_1;
  const bool v12 = UsableVersion(d) >= VK_API_VERSION_1_2;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDevice8BitStorageFeatures s8{};
  s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
  timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  AtomicFeatures atomics;
  void** next = &f2.pNext;
  auto chain = [&next](auto& s) {
    *next = &s;
    next = &s.pNext;
  };
  if (v11 || d.extensions.count(VK_KHR_16BIT_STORAGE_EXTENSION_NAME)) chain(s16);
  if (v12 || d.extensions.count(VK_KHR_8BIT_STORAGE_EXTENSION_NAME)) chain(s8);
  if (v12 || d.extensions.count(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) chain(f16);
  if (v12) chain(timeline);  // streams use the core (1.2) entry points
  const bool has_int64_atomics =
      v12 || d.extensions.count(VK_KHR_SHADER_ATOMIC_INT64_EXTENSION_NAME) != 0;
  const bool has_float_atomics = d.extensions.count(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME) != 0;
  if (has_int64_atomics) chain(atomics.int64);
  if (has_float_atomics) chain(atomics.add);
  vkGetPhysicalDeviceFeatures2(d.physical, &f2);
  d.atomics = atomics.Bits(d.features.shaderInt64 == VK_TRUE);
  d.buffer16 = s16.storageBuffer16BitAccess == VK_TRUE;
  d.buffer8 = s8.storageBuffer8BitAccess == VK_TRUE;
  d.float16 = f16.shaderFloat16 == VK_TRUE;
  d.int8 = f16.shaderInt8 == VK_TRUE;
  d.has_timeline = timeline.timelineSemaphore == VK_TRUE;
}

// Device type names as TVM's vulkan target writes them.
// Reads what vkGetPhysicalDeviceProperties2 offers beyond the core properties, chaining only
// the structs the device's version or extensions define (chaining others is invalid usage).
void QueryIdentity(Device& d) {
  const bool v11 = UsableVersion(d) >= VK_API_VERSION_1_1;
  const bool v12 = UsableVersion(d) >= VK_API_VERSION_1_2;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  void** next = &p2.pNext;
  auto chain = [&next](auto& s) {
    *next = &s;
    next = &s.pNext;
  };
  VkPhysicalDeviceIDProperties id{};
  id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties m3{};
  m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  if (v11) {
    chain(id);
    chain(m3);
  }
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  const bool has_driver = v12 || d.extensions.count(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  if (has_driver) chain(driver);
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci{};
  pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
  d.has_pci = d.extensions.count(VK_EXT_PCI_BUS_INFO_EXTENSION_NAME) != 0;
  if (d.has_pci) chain(pci);
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sizes{};
  sizes.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT;
  const bool has_sizes = d.extensions.count(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) != 0;
  if (has_sizes) chain(sizes);
  VkPhysicalDeviceFloatControlsProperties floats{};
  floats.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
  const bool has_floats =
      v12 || (v11 && d.extensions.count(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME) != 0);
  if (has_floats) chain(floats);
  if (p2.pNext == nullptr) return;  // a Vulkan 1.0 device without those extensions
  vkGetPhysicalDeviceProperties2(d.physical, &p2);
  if (has_floats) {
    FloatControls& f = d.float_controls;
    f.denorm32 = floats.shaderDenormPreserveFloat32 == VK_TRUE;
    f.denorm64 = floats.shaderDenormPreserveFloat64 == VK_TRUE;
    f.specials16 = floats.shaderSignedZeroInfNanPreserveFloat16 == VK_TRUE;
    f.specials32 = floats.shaderSignedZeroInfNanPreserveFloat32 == VK_TRUE;
    f.specials64 = floats.shaderSignedZeroInfNanPreserveFloat64 == VK_TRUE;
    d.float_controls_extension = !v12 && f.Any();
  }
  if (v11) {
    d.has_uuid = true;
    std::memcpy(d.uuid, id.deviceUUID, VK_UUID_SIZE);
    d.max_allocation = m3.maxMemoryAllocationSize;
  }
  if (has_driver) {
    d.driver_name = driver.driverName;
    d.driver_info = driver.driverInfo;
    d.has_conformance = true;
    d.conformance = driver.conformanceVersion;
  }
  if (d.has_pci) {
    d.pci_domain = pci.pciDomain;
    d.pci_bus = pci.pciBus;
    d.pci_device = pci.pciDevice;
    d.pci_function = pci.pciFunction;
  }
  if (has_sizes) {
    d.min_subgroup = sizes.minSubgroupSize;
    d.max_subgroup = sizes.maxSubgroupSize;
  }
}

// The names of the bits set in `bits`, joined by '|' as vulkaninfo lists them (without the

Context::Context() {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "backplane";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  // BACKPLANE_VULKAN_VALIDATION=1: the Khronos validation layer with a debug-utils
  // messenger that counts every validation error (vulkan.validation_errors).
  const char* validation = std::getenv("BACKPLANE_VULKAN_VALIDATION");
  const char* layer = "VK_LAYER_KHRONOS_validation";
  const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkDebugUtilsMessengerCreateInfoEXT mci{};
  mci.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = &OnValidationMessage;
  const bool validate = validation != nullptr && std::strcmp(validation, "1") == 0;
  if (validate && HasLayer(layer)) {
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = &layer;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = &ext;
    ci.pNext = &mci;  // also covers vkCreateInstance and vkDestroyInstance
  } else if (validate) {
    std::fprintf(stderr,
                 "backplane vulkan: BACKPLANE_VULKAN_VALIDATION=1 but the loader has no %s; "
                 "install vulkan-validationlayers\n",
                 layer);
  }
  const VkResult created = vkCreateInstance(&ci, nullptr, &instance_);
  if (created != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;  // no driver: no devices, and the status says why
    status_ =
        "no devices: vkCreateInstance failed with " + VkResultName(created) +
        (created == VK_ERROR_INCOMPATIBLE_DRIVER ? " (the Vulkan loader found no usable driver)"
                                                 : std::string()) +
        "; " + kNoDriverHelp;
    return;
  }
  if (ci.enabledLayerCount == 1) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create != nullptr && create(instance_, &mci, nullptr, &messenger_) == VK_SUCCESS) {
      g_validation_errors.store(0);
    }
  }
  uint32_t n = 0;
  VkResult listed = vkEnumeratePhysicalDevices(instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> phys(n);
  if (listed == VK_SUCCESS || listed == VK_INCOMPLETE) {
    listed = vkEnumeratePhysicalDevices(instance_, &n, phys.data());
  }
  phys.resize(listed == VK_SUCCESS || listed == VK_INCOMPLETE ? n : 0);
  std::string skipped;  // devices without a compute queue
  for (VkPhysicalDevice p : phys) {
    uint32_t qn = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, nullptr);
    std::vector<VkQueueFamilyProperties> qs(qn);
    vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, qs.data());
    int64_t family = -1;
    for (uint32_t i = 0; i < qn; ++i) {
      if (qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        family = i;
        break;
      }
    }
    if (family < 0) {
      VkPhysicalDeviceProperties props{};
      vkGetPhysicalDeviceProperties(p, &props);
      skipped += std::string(skipped.empty() ? "" : ", ") + "'" + props.deviceName + "'";
      continue;
    }
    auto d = std::make_unique<Device>();
    d->dl = DLDevice{kDLVulkan, static_cast<int32_t>(devices_.size())};
    d->streams = &streams_;
    d->handles = &handles_;
    d->physical = p;
    d->instance = instance_;
    d->queue_family = static_cast<uint32_t>(family);
    d->timestamp_bits = qs[static_cast<size_t>(family)].timestampValidBits;
    d->queue_families = qs;
    VkPhysicalDeviceSubgroupProperties sub{};
    sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sub;
    vkGetPhysicalDeviceProperties2(p, &p2);
    d->props = p2.properties;
    vkGetPhysicalDeviceFeatures(p, &d->features);
    d->subgroup_size = sub.subgroupSize;
    if (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) {
      d->subgroup_operations = sub.supportedOperations;
    }
    vkGetPhysicalDeviceMemoryProperties(p, &d->mem);
    uint32_t en = 0;
    vkEnumerateDeviceExtensionProperties(p, nullptr, &en, nullptr);
    std::vector<VkExtensionProperties> exts(en);
    vkEnumerateDeviceExtensionProperties(p, nullptr, &en, exts.data());
    for (const auto& e : exts) d->extensions.insert(e.extensionName);
    d->has_budget = d->extensions.count(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) != 0;
    QueryStorageFeatures(*d);
    QueryIdentity(*d);
    const VkPhysicalDeviceLimits& lim = d->props.limits;
    // With Vulkan 1.1 (vkCmdDispatchBase), a grid larger than maxComputeWorkGroupCount runs
    // as several dispatches, each with its base workgroup (gl_WorkGroupID counts from it):
    // the launch limit is then what gl_WorkGroupID (a uint) can count.
    const bool split = d->props.apiVersion >= VK_API_VERSION_1_1;
    for (int axis = 0; axis < 3; ++axis) {
      d->launch_limits.grid[axis] =
          split ? int64_t{UINT32_MAX} : lim.maxComputeWorkGroupCount[axis];
      d->launch_limits.grid_per_launch[axis] = lim.maxComputeWorkGroupCount[axis];
      d->launch_limits.block[axis] = lim.maxComputeWorkGroupSize[axis];
    }
    d->launch_limits.threads_per_block = lim.maxComputeWorkGroupInvocations;
    d->launch_limits.shared_per_block = lim.maxComputeSharedMemorySize;
    devices_.push_back(std::move(d));
  }
  if (devices_.empty()) {
    status_ = listed != VK_SUCCESS && listed != VK_INCOMPLETE
                  ? "no devices: vkEnumeratePhysicalDevices failed with " + VkResultName(listed)
              : phys.empty() ? "no devices: the Vulkan loader lists no physical device"
                             : "no devices: none of " + skipped + " has a compute queue";
    status_ += std::string("; ") + kNoDriverHelp;
  } else {
    status_ = "ok: " + std::to_string(devices_.size()) + " device(s)" +
              (skipped.empty() ? std::string() : " (" + skipped + ": no compute queue)");
  }
}

Context::~Context() {
  for (auto& d : devices_) {
    if (d->device == VK_NULL_HANDLE) continue;
    vkDeviceWaitIdle(d->device);
    for (auto& e : handles_.RemoveAll(d->dl.device_id)) {
      if (e.info->wrapped) {
        delete e.info;  // the VkBuffer and its memory are the application's
      } else {
        Destroy(*d, e.info);
      }
    }
    DestroyEvents(*d);
    for (auto& e : d->workspaces.TakeAll()) Destroy(*d, e.buffer);
    if (d->staging.buffer != VK_NULL_HANDLE) DestroyContents(*d, d->staging);
    // Each is destroyed before any is deleted: destroying one visits the others.
    const std::vector<Stream*> streams = Streams(*d);
    for (Stream* s : streams) DestroyStream(*d, *s);
    for (Stream* s : streams) delete s;
    DestroyStream(*d, d->null_stream);
    if (d->pipeline_cache != VK_NULL_HANDLE) {
      vkDestroyPipelineCache(d->device, d->pipeline_cache, nullptr);
    }
    vkDestroyCommandPool(d->device, d->pool, nullptr);
    vkDestroyDevice(d->device, nullptr);
  }
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy != nullptr) destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

void Context::OpenDevice(Device& d) {
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo q{};
  q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  q.queueFamilyIndex = d.queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  // The kernels' 64-bit types, where the device has them (the code generator records
  // which a kernel needs, and a launch on a device without them is refused).
  VkPhysicalDeviceFeatures features{};
  features.shaderInt64 = d.features.shaderInt64;
  features.shaderFloat64 = d.features.shaderFloat64;
  // Timeline semaphores order the streams (stream.cc); without them work is synchronous.
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
  timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  timeline.timelineSemaphore = VK_TRUE;
  VkDeviceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  // Atomics beyond int32 (KernelLayout::atomics), where the device has them: their features
  // and, for the float ones, their extensions.
  void* head = nullptr;
  auto prepend = [&head](auto& s) {
    s.pNext = head;
    head = &s;
  };
  if (d.has_timeline) prepend(timeline);
  AtomicFeatures atomics;
  std::vector<const char*> extensions;
  if (d.atomics & kAtomicInt64) {
    atomics.int64.shaderBufferInt64Atomics = VK_TRUE;
    atomics.int64.shaderSharedInt64Atomics = VK_TRUE;
    prepend(atomics.int64);
    if (UsableVersion(d) < VK_API_VERSION_1_2)
      extensions.push_back(VK_KHR_SHADER_ATOMIC_INT64_EXTENSION_NAME);
  }
  if (d.atomics & kAtomicFloatAdd) {
    atomics.add.shaderBufferFloat32AtomicAdd = VK_TRUE;
    atomics.add.shaderSharedFloat32AtomicAdd = VK_TRUE;
    prepend(atomics.add);
    extensions.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
  }
  if (d.float_controls_extension) extensions.push_back(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
  // float16 kernels (KernelLayout::uses_float16), where the device has what they need.
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  if (d.float16 && d.buffer16) {
    f16.shaderFloat16 = VK_TRUE;
    s16.storageBuffer16BitAccess = VK_TRUE;
    prepend(f16);
    prepend(s16);
    if (UsableVersion(d) < VK_API_VERSION_1_2)
      extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    if (UsableVersion(d) < VK_API_VERSION_1_1)
      extensions.push_back(VK_KHR_16BIT_STORAGE_EXTENSION_NAME);
  }
  ci.pNext = head;
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.empty() ? nullptr : extensions.data();
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  ci.pEnabledFeatures = &features;
  VkDevice device = VK_NULL_HANDLE;
  CheckVk(vkCreateDevice(d.physical, &ci, nullptr, &device), "vkCreateDevice");
  vkGetDeviceQueue(device, d.queue_family, 0, &d.queue);
  VkCommandPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = d.queue_family;
  VkResult r = vkCreateCommandPool(device, &pci, nullptr, &d.pool);
  if (r != VK_SUCCESS) {
    vkDestroyDevice(device, nullptr);
    CheckVk(r, "vkCreateCommandPool");
  }
  d.device = device;
  try {
    InitStream(d, d.null_stream);
  } catch (...) {
    vkDestroyCommandPool(device, d.pool, nullptr);
    vkDestroyDevice(device, nullptr);
    d.device = VK_NULL_HANDLE;
    throw;
  }
}

int64_t VulkanDeviceAPI::ValidationErrors() {
  Ctx();
  return g_validation_errors.load();
}

}  // namespace vulkan
}  // namespace backplane
