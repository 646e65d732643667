// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan on the real loader and driver (lavapipe in CI): attributes against the
// driver's own properties (queried here independently), copies of random bytes with offsets
// both ways and on the device, streams, errors, and Target::FromDevice for kind vulkan.
// Skips when no Vulkan device exists.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../test_util.h"

// Under the asan preset: lavapipe (libvulkan_lvp.so, a third-party driver) keeps allocations
// from compiling pipelines where LeakSanitizer cannot see them; only its own frames are
// suppressed.
extern "C" const char* __lsan_default_suppressions() { return "leak:libvulkan_lvp.so\n"; }

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using bptest::Capture;

constexpr DLDevice kDev{kDLVulkan, 0};

// The plugin creates its instance with the Khronos validation layer and a debug-utils
// messenger; every validation error fails the test that caused it (TearDown).
const int kValidationOn = setenv("BACKPLANE_VULKAN_VALIDATION", "1", /*overwrite=*/0);

// The first physical device with a compute queue, as the plugin orders them.
struct RawDevice {
  bool found = false;
  VkPhysicalDeviceProperties props{};
  uint32_t subgroup = 0;
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

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DeviceAPI::Get(Device(kDev)).Exists()) {
      GTEST_SKIP() << "no Vulkan device with a compute queue (install mesa-vulkan-drivers for "
                      "lavapipe)";
    }
  }
  void TearDown() override {
    (void)kValidationOn;
    const int64_t errors = backplane::Function::Get("vulkan.validation_errors")().AsInt();
    if (errors < 0) {
      RecordProperty("validation", "off: VK_LAYER_KHRONOS_validation is not installed");
    } else {
      EXPECT_EQ(errors, 0) << "the Vulkan validation layer reported errors (see stderr)";
    }
  }
  void* Alloc(size_t n) {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_data_space(kDev, n, 64, backplane::UInt8(), &p));
    return p;
  }
  void Free(void* p) { backplane::Check(bp_device_free_data_space(kDev, p)); }
  void Copy(void* from_data, DLDevice from_dev, uint64_t from_off, void* to_data, DLDevice to_dev,
            uint64_t to_off, int64_t* shape, bp_stream_t s = nullptr) {
    DLTensor from = bptest::ByteView(from_data, from_dev, shape, from_off);
    DLTensor to = bptest::ByteView(to_data, to_dev, shape, to_off);
    backplane::Check(bp_device_copy_data_from_to(&from, &to, s));
  }
};

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
  const std::string driver = info.at("driverVersion");
  const size_t open = driver.find('(');
  ASSERT_NE(open, std::string::npos) << driver;
  EXPECT_EQ(api.GetAttr(BP_ATTR_DRIVER_VERSION).AsString(),
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

TEST_F(VulkanTest, ErrorsComeBackAsErrors) {
  void* a = Alloc(64);
  std::vector<uint8_t> host(128);
  int64_t shape = 128;
  DLTensor from = bptest::ByteView(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor to = bptest::ByteView(a, kDev, &shape, 0);
  auto s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("passes the end"), std::string::npos) << s;
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

}  // namespace
