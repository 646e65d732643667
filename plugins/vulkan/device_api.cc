// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan over the Vulkan loader. One VkDevice per physical device, created on
// first use, with one compute queue. Copies and kernels are submitted on a stream
// (stream.cc) and return without waiting, except where the host must see the bytes
// (device -> host copies); StreamSync waits for a stream, SyncStreamFromTo orders two.
#include "device_api.h"

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

std::string VersionString(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
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

// The device's API version as far as this instance (API 1.2) may use it.
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
    d.denorm_preserve32 = floats.shaderDenormPreserveFloat32 == VK_TRUE;
    d.denorm_preserve64 = floats.shaderDenormPreserveFloat64 == VK_TRUE;
    d.float_controls_extension = !v12 && d.denorm_preserve32;
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

class Context {
 public:
  Context() {
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

  // Why there are no devices (or "ok: ..."): the DeviceAPI's property "status".
  const std::string& status() const { return status_; }

  ~Context() {
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
    if (d.device != VK_NULL_HANDLE) return;
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
    if (d.float_controls_extension)
      extensions.push_back(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
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

  // A memory type allowed by `bits` with `want` flags, or -1.
  static int64_t MemoryType(const Device& d, uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < d.mem.memoryTypeCount; ++i) {
      if ((bits & (1u << i)) && (d.mem.memoryTypes[i].propertyFlags & want) == want) return i;
    }
    return -1;
  }

  // Fills `b` with a buffer of `size` bytes; host_visible asks for mapped host memory,
  // otherwise device-local memory where the device has it. The caller holds d.mu.
  void Create(Device& d, Buffer& b, VkDeviceSize size, bool host_visible) {
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

  // A new device buffer of `size` bytes. When the device is out of memory, the freed
  // workspaces kept for reuse are released and it is tried once more. The caller holds d.mu.
  Buffer* NewBuffer(Device& d, VkDeviceSize size) {
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

VulkanDeviceAPI::VulkanDeviceAPI()
    : sdk::DeviceAPI(Entries{.events = true, .native_handles = true, .wrap_native = true}) {}

Device& VulkanDeviceAPI::Opened(DLDevice dev, std::unique_lock<std::mutex>& lock) {
  Device& d = Ctx().Dev(dev);
  lock = std::unique_lock<std::mutex>(d.mu);
  Ctx().Open(d);
  return d;
}

VulkanDeviceAPI* VulkanDeviceAPI::Global() {
  static VulkanDeviceAPI* api = new VulkanDeviceAPI();
  return api;
}

// ---- DeviceScope ---------------------------------------------------------------------------

VkDevice DeviceScope::device() const { return d_->device; }
const VkPhysicalDeviceProperties& DeviceScope::properties() const { return d_->props; }
bool DeviceScope::shader_int64() const { return d_->features.shaderInt64 == VK_TRUE; }
bool DeviceScope::shader_float64() const { return d_->features.shaderFloat64 == VK_TRUE; }
bool DeviceScope::float16() const { return d_->float16 && d_->buffer16; }
uint32_t DeviceScope::atomics() const { return d_->atomics; }
bool DeviceScope::denorm_preserve32() const { return d_->denorm_preserve32; }
bool DeviceScope::denorm_preserve64() const { return d_->denorm_preserve64; }

namespace {

std::atomic<int64_t> g_cache_loaded{0};
std::atomic<int64_t> g_cache_loaded_bytes{0};
std::atomic<int64_t> g_cache_ignored{0};
std::atomic<int64_t> g_cache_writes{0};
std::atomic<int64_t> g_pipelines{0};
std::atomic<int64_t> g_pipeline_ns{0};

// Whether `data` starts with the header of this device's pipeline cache data
// (VkPipelineCacheHeaderVersionOne: its size, version one, vendor, device, pipelineCacheUUID).
// The driver must ignore a foreign header, but it is checked here first: a file of another
// driver build is never handed over.
bool IsCacheOf(const std::string& data, const VkPipelineCacheHeaderVersionOne& want) {
  VkPipelineCacheHeaderVersionOne h{};
  if (data.size() < sizeof(h)) return false;
  std::memcpy(&h, data.data(), sizeof(h));
  return h.headerSize >= sizeof(h) && h.headerSize <= data.size() &&
         h.headerVersion == want.headerVersion && h.vendorID == want.vendorID &&
         h.deviceID == want.deviceID &&
         std::memcmp(h.pipelineCacheUUID, want.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

}  // namespace

PipelineCacheStats GetPipelineCacheStats() {
  PipelineCacheStats s;
  s.loaded = g_cache_loaded.load();
  s.loaded_bytes = g_cache_loaded_bytes.load();
  s.ignored = g_cache_ignored.load();
  s.writes = g_cache_writes.load();
  s.pipelines = g_pipelines.load();
  s.pipeline_ns = g_pipeline_ns.load();
  return s;
}

VkPipelineCache DeviceScope::PipelineCache() {
  if (d_->pipeline_cache != VK_NULL_HANDLE) return d_->pipeline_cache;
  // $XDG_CACHE_HOME/backplane/vulkan (else ~/.cache/...), private; "" keeps it in memory.
  const std::string dir = CacheDir();
  std::string initial;
  if (!dir.empty()) {
    // One file per device model and driver build: the UUID changes with the driver.
    char uuid[2 * VK_UUID_SIZE + 1] = {};
    for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) {
      std::snprintf(uuid + 2 * i, 3, "%02x", d_->props.pipelineCacheUUID[i]);
    }
    d_->pipeline_cache_path = dir + "/" + std::to_string(d_->props.vendorID) + "-" +
                              std::to_string(d_->props.deviceID) + "-" + uuid + ".bin";
    // A checksummed entry: a truncated or damaged file is never handed to the driver, nor one
    // whose header is not this device's.
    VkPipelineCacheHeaderVersionOne want{};
    want.headerVersion = VK_PIPELINE_CACHE_HEADER_VERSION_ONE;
    want.vendorID = d_->props.vendorID;
    want.deviceID = d_->props.deviceID;
    std::memcpy(want.pipelineCacheUUID, d_->props.pipelineCacheUUID, VK_UUID_SIZE);
    if (!sdk::ReadCacheEntry(d_->pipeline_cache_path, &initial) || !IsCacheOf(initial, want)) {
      if (access(d_->pipeline_cache_path.c_str(), F_OK) == 0) ++g_cache_ignored;
      initial.clear();
    }
  }
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  if (vkCreatePipelineCache(d_->device, &ci, nullptr, &d_->pipeline_cache) != VK_SUCCESS) {
    // The driver refused the data: start empty.
    if (!initial.empty()) ++g_cache_ignored;
    initial.clear();
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    CheckVk(vkCreatePipelineCache(d_->device, &ci, nullptr, &d_->pipeline_cache),
            "vkCreatePipelineCache");
  }
  if (!initial.empty()) {
    ++g_cache_loaded;
    g_cache_loaded_bytes += static_cast<int64_t>(initial.size());
  }
  d_->pipeline_cache_on_disk = std::move(initial);
  return d_->pipeline_cache;
}

void DeviceScope::SavePipelineCache() {
  if (d_->pipeline_cache == VK_NULL_HANDLE || d_->pipeline_cache_path.empty()) return;
  size_t size = 0;
  if (vkGetPipelineCacheData(d_->device, d_->pipeline_cache, &size, nullptr) != VK_SUCCESS) return;
  std::string data(size, '\0');
  if (vkGetPipelineCacheData(d_->device, d_->pipeline_cache, &size, data.data()) != VK_SUCCESS) {
    return;
  }
  data.resize(size);
  // Unchanged data is not written again: a process whose pipelines all came from the file
  // writes nothing (a write cost 0.25-0.4 ms per new pipeline here, docs/performance.md).
  if (data == d_->pipeline_cache_on_disk) return;
  if (sdk::WriteCacheEntry(d_->pipeline_cache_path, data)) {  // atomic; best effort
    ++g_cache_writes;
    d_->pipeline_cache_on_disk = std::move(data);
  }
}

VkPipeline DeviceScope::CreateComputePipeline(const VkComputePipelineCreateInfo& ci,
                                              const std::string& what) {
  VkPipelineCache cache = PipelineCache();
  VkPipeline pipeline = VK_NULL_HANDLE;
  const auto t0 = std::chrono::steady_clock::now();
  const VkResult r = vkCreateComputePipelines(d_->device, cache, 1, &ci, nullptr, &pipeline);
  g_pipeline_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  CheckVk(r, "vkCreateComputePipelines for " + what);
  ++g_pipelines;
  SavePipelineCache();
  return pipeline;
}

VkBuffer DeviceScope::Resolve(void* handle, uint64_t offset, uint64_t nbytes,
                              const std::function<std::string()>& what) {
  // Every launch resolves each buffer: `what` is built only for a message.
  try {
    return d_->handles->Resolve(dev_, handle, offset, nbytes, std::string()).info->buffer;
  } catch (const Error& e) {
    throw Error(e.kind(), "vulkan: " + what() + ": " + e.what());
  }
}

uint64_t DeviceScope::FreedCount() const { return d_->freed; }

Use DeviceScope::Submit(const std::function<void(VkCommandBuffer)>& record) {
  return vulkan::Submit(*d_, ActiveStream(*d_, "kernel launch"), record);
}

void DeviceScope::Wait(const Use& use) { vulkan::Wait(*d_, use); }

void DeviceScope::WaitIdle() { WaitAll(*d_); }

KernelStatus::~KernelStatus() {
  if (buffer.buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer.buffer, nullptr);
  if (buffer.memory != VK_NULL_HANDLE) vkFreeMemory(device, buffer.memory, nullptr);
}

std::shared_ptr<KernelStatus> DeviceScope::NewKernelStatus(
    std::function<void(const uint32_t*)> raise) {
  auto st = std::make_shared<KernelStatus>();
  st->device = d_->device;
  st->raise = std::move(raise);
  ctx_->Create(*d_, st->buffer, kStatusBufferWords * sizeof(uint32_t), /*host_visible=*/true);
  std::memset(st->buffer.mapped, 0, kStatusBufferWords * sizeof(uint32_t));
  return st;
}

void DeviceScope::Watch(const std::shared_ptr<KernelStatus>& status, const Use& use) {
  bool replaced = false;
  for (Use& u : status->pending) {
    if (u.stream == use.stream) {
      u.value = std::max(u.value, use.value);  // a stream's work completes in order
      replaced = true;
    }
  }
  if (!replaced) status->pending.push_back(use);
  if (!status->watched) {
    status->watched = true;
    d_->watched.push_back(status);
  }
}

void DeviceScope::CheckStatus() { vulkan::CheckStatus(*d_); }

void VulkanDeviceAPI::WithDevice(DLDevice dev, const std::function<void(DeviceScope&)>& fn) {
  Context& ctx = Ctx();
  Device& d = ctx.Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  ctx.Open(d);
  DeviceScope scope(&ctx, &d, dev);
  fn(scope);
}

int32_t VulkanDeviceAPI::DeviceCount() { return static_cast<int32_t>(Ctx().count()); }

launch::Allocation VulkanDeviceAPI::FindDataSpace(DLDevice dev, void* handle) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  const auto e = d.handles->Get(dev, handle, "");
  return {e.info, 0, e.size};
}

const launch::DeviceLimits& VulkanDeviceAPI::LaunchLimits(DLDevice dev) {
  return Ctx().Dev(dev).launch_limits;
}

int64_t VulkanDeviceAPI::ValidationErrors() {
  Ctx();
  return g_validation_errors.load();
}

Context& VulkanDeviceAPI::Ctx() {
  static std::once_flag once;
  std::call_once(once, [this] { ctx_ = std::make_unique<Context>(); });
  return *ctx_;
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
  // Whether kernels keep subnormal floats (their pipelines ask for DenormPreserve).
  if (key == "denorm_preserve_float32") return sdk::IntValue(d.denorm_preserve32 ? 1 : 0);
  if (key == "denorm_preserve_float64") return sdk::IntValue(d.denorm_preserve64 ? 1 : 0);
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

void VulkanDeviceAPI::SetDevice(DLDevice dev) { Ctx().Dev(dev); }

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

bp_stream_t VulkanDeviceAPI::CreateStream(DLDevice dev) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Ctx().Open(d);
  auto s = std::make_unique<Stream>();
  s->id = d.next_stream_id++;
  InitStream(d, *s);
  d.streams->Add(s.get(), dev);
  return s.release();
}

void VulkanDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  if (stream == nullptr) return;
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Stream& s = StreamOf(d, stream, "FreeStream");
  // Forgotten first: a thread whose active stream this was gets an error at its next launch,
  // even when a later CreateStream returns the same address.
  d.streams->Remove(stream);
  DestroyStream(d, s);  // waits for its work first
  delete &s;
}

void VulkanDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  StreamOf(d, stream, "SetStream");
  d.streams->SetActive(dev, stream);
}

void VulkanDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Stream& s = StreamOf(d, stream, "StreamSync");
  Wait(d, Use{s.id, s.submitted});
  CheckStatus(d);  // a kernel's error surfaces here at the latest
}

void VulkanDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Order(d, StreamOf(d, src, "SyncStreamFromTo: source"),
        StreamOf(d, dst, "SyncStreamFromTo: destination"));
}

}  // namespace vulkan
}  // namespace backplane
