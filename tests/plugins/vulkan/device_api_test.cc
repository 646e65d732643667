// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan on the real loader and driver (lavapipe in CI): attributes against the
// driver's own properties (queried here independently), copies of random bytes with offsets
// both ways and on the device, streams, errors, Target::FromDevice for kind vulkan (events and
// native handles: interop_test.cc). Skips when no Vulkan device exists.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "plugins/test_util.h"
#include "vulkan_fixture.h"

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using bptest::Capture;
using bptest::kDev;
using bptest::VulkanTest;

// The first physical device with a compute queue, as the plugin orders them.
struct RawDevice {
  bool found = false;
  VkPhysicalDeviceProperties props{};
  uint32_t subgroup = 0;
  uint32_t subgroup_ops = 0;  // when the compute stage has subgroup operations
  VkPhysicalDeviceFeatures features{};
  // From VkPhysicalDeviceVulkan11Features / Vulkan12Features (a device of API 1.2 or newer);
  // the plugin reads the per-feature structures instead.
  bool buffer16 = false, buffer8 = false, float16 = false, int8 = false;
  std::set<std::string> extensions;
};

RawDevice QueryRaw() {
  RawDevice raw;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.apiVersion = VK_API_VERSION_1_2;
  ci.pApplicationInfo = &app;
  VkInstance inst = VK_NULL_HANDLE;
  if (vkCreateInstance(&ci, nullptr, &inst) != VK_SUCCESS) return raw;
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  std::vector<VkPhysicalDevice> phys(n);
  vkEnumeratePhysicalDevices(inst, &n, phys.data());
  for (VkPhysicalDevice p : phys) {
    uint32_t qn = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, nullptr);
    std::vector<VkQueueFamilyProperties> qs(qn);
    vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, qs.data());
    bool compute = false;
    for (const auto& q : qs) compute |= (q.queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
    if (!compute) continue;
    VkPhysicalDeviceSubgroupProperties sub{};
    sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sub;
    vkGetPhysicalDeviceProperties2(p, &p2);
    raw.found = true;
    raw.props = p2.properties;
    raw.subgroup = sub.subgroupSize;
    if (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT)
      raw.subgroup_ops = sub.supportedOperations;
    vkGetPhysicalDeviceFeatures(p, &raw.features);
    if (raw.props.apiVersion >= VK_API_VERSION_1_2) {
      VkPhysicalDeviceVulkan11Features v11{};
      v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
      VkPhysicalDeviceVulkan12Features v12{};
      v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
      v11.pNext = &v12;
      VkPhysicalDeviceFeatures2 f2{};
      f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
      f2.pNext = &v11;
      vkGetPhysicalDeviceFeatures2(p, &f2);
      raw.buffer16 = v11.storageBuffer16BitAccess == VK_TRUE;
      raw.buffer8 = v12.storageBuffer8BitAccess == VK_TRUE;
      raw.float16 = v12.shaderFloat16 == VK_TRUE;
      raw.int8 = v12.shaderInt8 == VK_TRUE;
    }
    uint32_t en = 0;
    vkEnumerateDeviceExtensionProperties(p, nullptr, &en, nullptr);
    std::vector<VkExtensionProperties> exts(en);
    vkEnumerateDeviceExtensionProperties(p, nullptr, &en, exts.data());
    for (const auto& e : exts) raw.extensions.insert(e.extensionName);
    break;
  }
  vkDestroyInstance(inst, nullptr);
  return raw;
}

// The first value of each "key = value" line vulkaninfo prints for GPU0, or an empty map when
// vulkaninfo is not installed. vulkaninfo wants XDG_RUNTIME_DIR (it prints noise without
// it), so it runs with a private one when the environment has none.
std::map<std::string, std::string> VulkanInfo() {
  std::map<std::string, std::string> out;
  if (std::system("command -v vulkaninfo >/dev/null 2>&1") != 0) return out;
  std::string cmd = "vulkaninfo 2>/dev/null";
  if (std::getenv("XDG_RUNTIME_DIR") == nullptr) {
    cmd = "d=$(mktemp -d) && XDG_RUNTIME_DIR=$d vulkaninfo 2>/dev/null; rm -rf \"$d\"";
  }
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char line[1024];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    std::string l(line);
    const size_t eq = l.find(" = ");
    if (eq == std::string::npos) continue;
    std::string key = l.substr(0, eq);
    key.erase(0, key.find_first_not_of(" \t"));
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = l.substr(eq + 3);
    value.erase(value.find_last_not_of(" \t\n") + 1);
    out.emplace(key, value);  // the first occurrence wins
  }
  pclose(f);
  return out;
}

TEST_F(VulkanTest, AttributesMatchTheDriversProperties) {
  const RawDevice raw = QueryRaw();
  ASSERT_TRUE(raw.found);
  auto api = DeviceAPI::Get(Device(kDev));
  EXPECT_EQ(api.GetAttr(BP_ATTR_DEVICE_NAME).AsString(), raw.props.deviceName);
  EXPECT_EQ(api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt(),
            raw.props.limits.maxComputeWorkGroupInvocations);
  EXPECT_EQ(api.GetAttr(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK).AsInt(),
            raw.props.limits.maxComputeSharedMemorySize);
  EXPECT_EQ(api.GetAttr(BP_ATTR_WARP_SIZE).AsInt(), raw.subgroup);
  EXPECT_EQ(api.GetAttr(BP_ATTR_MAX_THREAD_DIMENSIONS).AsString(),
            "[" + std::to_string(raw.props.limits.maxComputeWorkGroupSize[0]) + ", " +
                std::to_string(raw.props.limits.maxComputeWorkGroupSize[1]) + ", " +
                std::to_string(raw.props.limits.maxComputeWorkGroupSize[2]) + "]");
  EXPECT_GT(api.GetAttr(BP_ATTR_TOTAL_GLOBAL_MEMORY).AsInt(), 0);
  EXPECT_TRUE(api.GetAttr(BP_ATTR_MAX_CLOCK_RATE).is_none());
  EXPECT_FALSE(DeviceAPI::Get(Device(DLDevice{kDLVulkan, 99})).Exists());
}

TEST_F(VulkanTest, AttributesMatchVulkaninfo) {
  const auto info = VulkanInfo();
  if (info.empty()) GTEST_SKIP() << "vulkaninfo is not installed (Debian: vulkan-tools)";
  auto api = DeviceAPI::Get(Device(kDev));
  EXPECT_EQ(api.GetAttr(BP_ATTR_DEVICE_NAME).AsString(), info.at("deviceName"));
  EXPECT_EQ(std::to_string(api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt()),
            info.at("maxComputeWorkGroupInvocations"));
  EXPECT_EQ(std::to_string(api.GetAttr(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK).AsInt()),
            info.at("maxComputeSharedMemorySize"));
  EXPECT_EQ(std::to_string(api.GetAttr(BP_ATTR_WARP_SIZE).AsInt()), info.at("subgroupSize"));
  // "1.3.230 (4206822)": the version, then the raw number.
  const std::string api_version = info.at("apiVersion");
  EXPECT_EQ(api.GetAttr(BP_ATTR_API_VERSION).AsString(),
            api_version.substr(0, api_version.find(' ')));
  // "0.0.1 (1)": the version as its vendor encodes it, then the raw number; the attribute is
  // the decoded version (the raw word is the property driver_version).
  const std::string driver = info.at("driverVersion");
  const size_t open = driver.find('(');
  ASSERT_NE(open, std::string::npos) << driver;
  EXPECT_EQ(api.GetAttr(BP_ATTR_DRIVER_VERSION).AsString(), driver.substr(0, open - 1));
  EXPECT_EQ(std::to_string(api.GetProperty("driver_version").AsInt()),
            driver.substr(open + 1, driver.find(')') - open - 1));
}

TEST_F(VulkanTest, RandomBytesRoundTripWithOffsetsAndOnTheDevice) {
  const size_t n = (size_t{1} << 20) + 37;
  const std::vector<uint8_t> src = bptest::RandomBytes(n, 7);
  void* a = Alloc(n + 128);
  void* b = Alloc(n + 256);
  int64_t shape = static_cast<int64_t>(n);
  Copy(const_cast<uint8_t*>(src.data()), bptest::CpuDevice(), 0, a, kDev, 64, &shape);
  Copy(a, kDev, 64, b, kDev, 200, &shape);
  std::vector<uint8_t> back(n + 16, 0);
  Copy(b, kDev, 200, back.data(), bptest::CpuDevice(), 16, &shape);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), back.begin() + 16));
  EXPECT_EQ(back[0], 0);
  Free(a);
  Free(b);
}

TEST_F(VulkanTest, StreamsOrderTheirWork) {
  bp_stream_t s1 = nullptr, s2 = nullptr;
  backplane::Check(bp_device_stream_create(kDev, &s1));
  backplane::Check(bp_device_stream_create(kDev, &s2));
  const std::vector<uint8_t> src = bptest::RandomBytes(4096, 3);
  void* a = Alloc(4096);
  int64_t shape = 4096;
  Copy(const_cast<uint8_t*>(src.data()), bptest::CpuDevice(), 0, a, kDev, 0, &shape, s1);
  backplane::Check(bp_device_sync_stream_from_to(kDev, s1, s2));
  std::vector<uint8_t> back(4096);
  Copy(a, kDev, 0, back.data(), bptest::CpuDevice(), 0, &shape, s2);
  backplane::Check(bp_device_stream_sync(kDev, s2));
  EXPECT_EQ(back, src);
  Free(a);
  backplane::Check(bp_device_stream_free(kDev, s1));
  backplane::Check(bp_device_stream_free(kDev, s2));
}

TEST_F(VulkanTest, WorkspacesComeFromAPoolOrderedOnTheActiveStream) {
  const size_t n = 5000;  // a 5 KiB size class: 5120 bytes
  void* w = nullptr;
  backplane::Check(bp_device_alloc_workspace(kDev, n, backplane::UInt8(), &w));
  // A workspace is memory like data space: random bytes round-trip through it, and a copy
  // past its n bytes is refused although its size class is larger.
  const std::vector<uint8_t> src = bptest::RandomBytes(n, 11);
  std::vector<uint8_t> back(n, 0);
  int64_t shape = static_cast<int64_t>(n);
  Copy(const_cast<uint8_t*>(src.data()), bptest::CpuDevice(), 0, w, kDev, 0, &shape);
  Copy(w, kDev, 0, back.data(), bptest::CpuDevice(), 0, &shape);
  EXPECT_EQ(back, src);
  int64_t past = 64;
  DLTensor from = bptest::ByteView(back.data(), bptest::CpuDevice(), &past, 0);
  DLTensor to = bptest::ByteView(w, kDev, &past, n - 32);
  EXPECT_NE(bp_device_copy_data_from_to(&from, &to, nullptr), 0);
  // Freed with the wrong call: refused, and still usable.
  EXPECT_EQ(bp_device_free_data_space(kDev, w), BP_ERR_INVALID_ARGUMENT);
  // Freed, then asked for again on the same stream: the same buffer, at once.
  backplane::Check(bp_device_free_workspace(kDev, w));
  void* again = nullptr;
  backplane::Check(bp_device_alloc_workspace(kDev, n - 100, backplane::UInt8(), &again));
  EXPECT_EQ(again, w);
  // Freed on a stream with work queued, then asked for on another stream once that work is
  // done (StreamSync): the same buffer.
  bp_stream_t s1 = nullptr, s2 = nullptr;
  backplane::Check(bp_device_stream_create(kDev, &s1));
  backplane::Check(bp_device_stream_create(kDev, &s2));
  int64_t shorter = static_cast<int64_t>(n - 100);
  Copy(const_cast<uint8_t*>(src.data()), bptest::CpuDevice(), 0, again, kDev, 0, &shorter, s1);
  backplane::Check(bp_device_stream_set(kDev, s1));
  backplane::Check(bp_device_free_workspace(kDev, again));
  backplane::Check(bp_device_stream_sync(kDev, s1));
  backplane::Check(bp_device_stream_set(kDev, s2));
  void* third = nullptr;
  backplane::Check(bp_device_alloc_workspace(kDev, n, backplane::UInt8(), &third));
  EXPECT_EQ(third, w);
  backplane::Check(bp_device_stream_set(kDev, nullptr));
  backplane::Check(bp_device_free_workspace(kDev, third));
  // Data space freed as a workspace: refused.
  void* a = Alloc(64);
  EXPECT_EQ(bp_device_free_workspace(kDev, a), BP_ERR_INVALID_ARGUMENT);
  Free(a);
  backplane::Check(bp_device_stream_free(kDev, s1));
  backplane::Check(bp_device_stream_free(kDev, s2));
}

TEST_F(VulkanTest, ErrorsComeBackAsErrors) {
  void* a = Alloc(64);
  std::vector<uint8_t> host(128);
  int64_t shape = 128;
  DLTensor from = bptest::ByteView(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor to = bptest::ByteView(a, kDev, &shape, 0);
  auto s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("run past the end"), std::string::npos) << s;
  // A host pointer where a handle belongs.
  to.data = host.data();
  shape = 16;
  s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  s = Capture(bp_device_free_data_space(kDev, host.data()));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  // More memory than any heap holds.
  void* p = nullptr;
  s = Capture(bp_device_alloc_data_space(kDev, size_t{1} << 50, 64, backplane::UInt8(), &p));
  EXPECT_NE(s.kind, BP_OK) << "allocating 1 PiB succeeded";
  Free(a);
}

TEST_F(VulkanTest, TargetFromDeviceFillsTheLimits) {
  const backplane::Target t = backplane::Target::FromDevice(Device(kDev), "");
  EXPECT_EQ(t.Kind(), "vulkan");
  auto api = DeviceAPI::Get(Device(kDev));
  EXPECT_EQ(t.GetAttr<int64_t>("max_num_threads"),
            api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt());
  EXPECT_EQ(t.GetAttr<int64_t>("thread_warp_size"), api.GetAttr(BP_ATTR_WARP_SIZE).AsInt());
  EXPECT_EQ(t.GetAttr<int64_t>("max_shared_memory_per_block"),
            api.GetAttr(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK).AsInt());
}

// The canonicalizer fills the rest from the device's properties: each checked against the
// driver queried independently (through the Vulkan 1.1/1.2 feature structures).
TEST_F(VulkanTest, TargetFromDeviceFillsEveryDeviceAttribute) {
  const RawDevice raw = QueryRaw();
  ASSERT_TRUE(raw.found);
  const VkPhysicalDeviceLimits& lim = raw.props.limits;
  const backplane::Target t = backplane::Target::FromDevice(Device(kDev), "vulkan");
  auto i = [&t](const char* name) { return t.GetAttr<int64_t>(name).value_or(-1); };
  auto b = [&t](const char* name) { return t.GetAttr<bool>(name); };
  EXPECT_EQ(i("max_block_size_x"), lim.maxComputeWorkGroupSize[0]);
  EXPECT_EQ(i("max_block_size_y"), lim.maxComputeWorkGroupSize[1]);
  EXPECT_EQ(i("max_block_size_z"), lim.maxComputeWorkGroupSize[2]);
  EXPECT_EQ(i("max_push_constants_size"), lim.maxPushConstantsSize);
  EXPECT_EQ(i("max_storage_buffer_range"), lim.maxStorageBufferRange);
  EXPECT_EQ(i("max_uniform_buffer_range"), lim.maxUniformBufferRange);
  EXPECT_EQ(i("max_per_stage_descriptor_storage_buffer"), lim.maxPerStageDescriptorStorageBuffers);
  EXPECT_EQ(i("driver_version"), raw.props.driverVersion);
  EXPECT_EQ(i("vulkan_api_version"), raw.props.apiVersion);
  EXPECT_EQ(i("supported_subgroup_operations"), raw.subgroup_ops);
  EXPECT_EQ(b("supports_float64"), raw.features.shaderFloat64 == VK_TRUE);
  EXPECT_EQ(b("supports_int64"), raw.features.shaderInt64 == VK_TRUE);
  EXPECT_EQ(b("supports_int16"), raw.features.shaderInt16 == VK_TRUE);
  EXPECT_EQ(b("supports_float32"), true);
  EXPECT_EQ(b("supports_int32"), true);
  EXPECT_EQ(b("supports_push_descriptor"), raw.extensions.count("VK_KHR_push_descriptor") == 1);
  EXPECT_EQ(b("supports_cooperative_matrix"),
            raw.extensions.count("VK_NV_cooperative_matrix") == 1);
  EXPECT_EQ(b("supports_integer_dot_product"),
            raw.extensions.count("VK_KHR_shader_integer_dot_product") == 1);
  if (raw.props.apiVersion >= VK_API_VERSION_1_2) {
    EXPECT_EQ(b("supports_float16"), raw.float16);
    EXPECT_EQ(b("supports_int8"), raw.int8);
    EXPECT_EQ(b("supports_8bit_buffer"), raw.buffer8);
    EXPECT_EQ(b("supports_16bit_buffer"), raw.buffer16);
    EXPECT_EQ(i("max_spirv_version"), 0x10500);  // the plugin's instance is API 1.2
    EXPECT_EQ(b("supports_storage_buffer_storage_class"), true);
    EXPECT_EQ(b("supports_dedicated_allocation"), true);
  }
  const std::map<VkPhysicalDeviceType, std::string> types = {
      {VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, "integrated"},
      {VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "discrete"},
      {VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU, "virtual"},
      {VK_PHYSICAL_DEVICE_TYPE_CPU, "cpu"},
      {VK_PHYSICAL_DEVICE_TYPE_OTHER, "other"}};
  EXPECT_EQ(t.GetAttr<std::string>("device_type"), types.at(raw.props.deviceType));
  // The values differ from TVM's defaults somewhere (lavapipe: 1024-wide work groups, 64-bit
  // types), so they did come from the device; and the Target round-trips without a device.
  EXPECT_NE(t.ToJson(), backplane::Target::Parse("vulkan").ToJson());
  EXPECT_EQ(backplane::Target::Parse(t.ToJson()).ToJson(), t.ToJson());
}

// A value below 1 for a size the code generator relies on is refused with the attribute's
// name.
TEST_F(VulkanTest, TargetRefusesNonPositiveLimits) {
  try {
    backplane::Target::Parse("vulkan -max_push_constants_size=0");
    FAIL() << "a zero max_push_constants_size was accepted";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("max_push_constants_size"), std::string::npos) << e.what();
  }
}

}  // namespace
