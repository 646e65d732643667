// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan on the real loader and driver (lavapipe in CI): attributes against the
// driver's own properties (queried here independently), copies of random bytes with offsets
// both ways and on the device, streams, errors, Target::FromDevice for kind vulkan, events
// and native handles (an application's VkBuffer wrapped as a tensor, read and written through
// vkMapMemory). Skips when no Vulkan device exists.
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

#include "../test_util.h"

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

// ---- events and native handles (issue 19, items 2 and 3) ----------------------------------

// One kernel for the event and native-handle tests: out = 2x + y over [rows, 256].
constexpr const char* kScaleAddIr = R"(# backplane-ir 1
func scale_add(rows: int32, x: buffer<float32>[rows, 256], y: buffer<float32>[rows, 256], out: buffer<float32>[rows, 256]) {
  for bx in thread(blockIdx.x, 0, rows) {
    for tx in thread(threadIdx.x, 0, 256) {
      out[bx, tx] = 2.0 * x[bx, tx] + y[bx, tx]
    }
  }
}
)";

constexpr DLDataType kF32{kDLFloat, 32, 1};

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& f : v) f = value(rng);
  return v;
}

// How many of got[i] differ from 2 x[i] + y[i] (the kernel's result, exact in float).
size_t WrongScaleAdd(const std::vector<float>& got, const std::vector<float>& x,
                     const std::vector<float>& y) {
  if (got.size() != x.size()) return x.size();
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) wrong += got[i] == 2.0f * x[i] + y[i] ? 0 : 1;
  return wrong;
}

// The queued kernel on one stream, an event recorded after it, another stream that waits for
// the event (no host wait) and reads: the read sees the kernel's result. The time between two
// events around the work is positive and no more than the host saw pass.
TEST_F(VulkanTest, EventsOrderStreamsAndTimeAKernel) {
  const int32_t rows = 2048;
  const size_t count = static_cast<size_t>(rows) * 256;
  const std::vector<float> x = RandomFloats(count, 1911), y = RandomFloats(count, 1912);
  backplane::Module m = backplane::Build(kScaleAddIr, backplane::Target::FromDevice(Device(kDev)));
  const std::vector<int64_t> shape = {rows, 256};
  backplane::Tensor tx = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  backplane::Tensor ty = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  backplane::Tensor tout = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  tx.CopyFrom(x);
  ty.CopyFrom(y);
  tout.CopyFrom(std::vector<float>(count, std::nanf("")));
  backplane::Stream s{Device(kDev)}, t{Device(kDev)};
  backplane::Event start{Device(kDev)}, end{Device(kDev)};
  // Never recorded: passed, and Sync returns at once.
  EXPECT_TRUE(end.Done());
  end.Sync();
  s.WaitFor(t);  // s's work also follows the null stream's copies above
  const auto host_start = std::chrono::steady_clock::now();
  s.SetActive();
  start.Record(s);
  for (int i = 0; i < 10; ++i) m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), tout.dl());
  end.Record(s);
  backplane::Check(bp_device_stream_set(kDev, nullptr));
  end.MakeWait(t);
  std::vector<float> got(count, 0.0f);
  int64_t bytes = static_cast<int64_t>(count * sizeof(float));
  Copy(tout.dl()->data, kDev, 0, got.data(), bptest::CpuDevice(), 0, &bytes, t.handle());
  EXPECT_EQ(WrongScaleAdd(got, x, y), 0u)
      << "the copy on the waiting stream ran before the kernels finished";
  EXPECT_TRUE(end.Done()) << "the waiting stream's copy is done, so is the point it waited for";
  end.Sync();
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start)
          .count();
  const double ms = end.ElapsedMsSince(start);
  EXPECT_GT(ms, 0.0) << "ten kernels over 2 MiB take time";
  EXPECT_LE(ms, host_ms + 1.0) << "the device's time fits in the host's around it";
  EXPECT_LE(start.ElapsedMsSince(start), 0.0 + 1e-9);
  EXPECT_NEAR(start.ElapsedMsSince(end), -ms, 1e-6) << "backwards is negative";
  // A never-recorded event cannot be timed (the core says so).
  backplane::Event never{Device(kDev)};
  const bptest::Status st = bptest::CaptureError([&] { never.ElapsedMsSince(start); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
}

// Recording again moves the mark: a stream waiting after the second record sees the second
// write, and the time from a fixed start grows. Records queued back to back (each timestamp
// still pending when the next comes) and an event freed with its timestamp queued leave the
// driver whole (the validation layer watches the query pools).
TEST_F(VulkanTest, RecordingAnEventAgainMovesItsMark) {
  const size_t n = size_t{4} << 20;
  const std::vector<uint8_t> first = bptest::RandomBytes(n, 1913),
                             second = bptest::RandomBytes(n, 1914);
  void* a = Alloc(n);
  void* b = Alloc(n);
  int64_t shape = static_cast<int64_t>(n);
  backplane::Stream s{Device(kDev)}, t{Device(kDev)};
  backplane::Event start{Device(kDev)}, mark{Device(kDev)};
  start.Record(s);
  Copy(const_cast<uint8_t*>(first.data()), bptest::CpuDevice(), 0, a, kDev, 0, &shape, s.handle());
  mark.Record(s);
  mark.Sync();
  EXPECT_TRUE(mark.Done());
  const double before = mark.ElapsedMsSince(start);
  Copy(const_cast<uint8_t*>(second.data()), bptest::CpuDevice(), 0, a, kDev, 0, &shape, s.handle());
  for (int i = 0; i < 4; ++i) Copy(a, kDev, 0, b, kDev, 0, &shape, s.handle());
  mark.Record(s);
  mark.MakeWait(t);
  std::vector<uint8_t> back(n, 0);
  Copy(b, kDev, 0, back.data(), bptest::CpuDevice(), 0, &shape, t.handle());
  EXPECT_TRUE(back == second) << "the wait used the first mark, not the second";
  const double after = mark.ElapsedMsSince(start);
  EXPECT_GT(after, before) << "the second mark is after five more copies";
  // Back to back, each record before the previous one's timestamp is written; then freed
  // while its last timestamp is still queued.
  {
    backplane::Event busy{Device(kDev)};
    for (int i = 0; i < 8; ++i) {
      Copy(a, kDev, 0, b, kDev, 0, &shape, s.handle());
      busy.Record(s);
    }
    busy.MakeWait(t);
  }
  // An event whose stream is freed is passed; waiting for it is nothing.
  backplane::Event orphan{Device(kDev)};
  {
    backplane::Stream gone{Device(kDev)};
    Copy(a, kDev, 0, b, kDev, 0, &shape, gone.handle());
    orphan.Record(gone);
  }
  EXPECT_TRUE(orphan.Done());
  orphan.MakeWait(t);
  t.Sync();
  s.Sync();
  Free(a);
  Free(b);
}

// An application's buffer: a VkBuffer with the plugin's usage flags, bound at `offset` into
// host-visible, host-coherent memory of its own, mapped. Created on the plugin's VkDevice
// through the loader; destroyed by the destructor (the application's, never the plugin's).
struct AppBuffer {
  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkMemoryRequirements req{};
  void* mapped = nullptr;  // the buffer's first byte

  AppBuffer(VkPhysicalDevice physical, VkDevice dev, VkDeviceSize size) : device(dev) {
    VkBufferCreateInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (vkCreateBuffer(device, &bi, nullptr, &buffer) != VK_SUCCESS) return;
    vkGetBufferMemoryRequirements(device, buffer, &req);
    VkPhysicalDeviceMemoryProperties mem{};
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int64_t type = -1;
    for (uint32_t i = 0; i < mem.memoryTypeCount && type < 0; ++i) {
      if ((req.memoryTypeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) {
        type = i;
      }
    }
    if (type < 0) return;
    // Bound past the memory's start, so BP_NATIVE_MEMORY_OFFSET has something to say.
    offset = (256 + req.alignment - 1) / req.alignment * req.alignment;
    VkMemoryAllocateInfo mi{};
    mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mi.allocationSize = offset + req.size;
    mi.memoryTypeIndex = static_cast<uint32_t>(type);
    if (vkAllocateMemory(device, &mi, nullptr, &memory) != VK_SUCCESS) return;
    if (vkBindBufferMemory(device, buffer, memory, offset) != VK_SUCCESS) return;
    void* base = nullptr;
    if (vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &base) != VK_SUCCESS) return;
    mapped = static_cast<char*>(base) + offset;
  }
  ~AppBuffer() {
    if (mapped != nullptr) vkUnmapMemory(device, memory);
    if (buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer, nullptr);
    if (memory != VK_NULL_HANDLE) vkFreeMemory(device, memory, nullptr);
  }
  AppBuffer(const AppBuffer&) = delete;
  AppBuffer& operator=(const AppBuffer&) = delete;
  bool ok() const { return mapped != nullptr; }
  bp_native_buffer_t Native(uint64_t size) const {
    return bp_native_buffer_t{sizeof(bp_native_buffer_t), reinterpret_cast<uint64_t>(buffer),
                              reinterpret_cast<uint64_t>(memory), offset, size};
  }
};

template <typename Handle>
Handle As(uint64_t v) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(v));
}

// Every kind names the plugin's own objects, each checked through the loader against the
// others: the VkInstance lists the VkPhysicalDevice, whose properties are the device's; the
// VkDevice's queue of QUEUE_FAMILY is the QUEUE of every stream; a tensor's VkBuffer is bound
// to its VkDeviceMemory, which (host-visible on lavapipe) holds the bytes Backplane wrote.
TEST_F(VulkanTest, NativeHandlesAreThePluginsOwnObjects) {
  const Device dev(kDev);
  const auto instance = As<VkInstance>(backplane::NativeHandle(dev, BP_NATIVE_PLATFORM));
  const auto physical = As<VkPhysicalDevice>(backplane::NativeHandle(dev, BP_NATIVE_DEVICE));
  const auto device = As<VkDevice>(backplane::NativeHandle(dev, BP_NATIVE_CONTEXT));
  ASSERT_NE(instance, nullptr);
  ASSERT_NE(physical, nullptr);
  ASSERT_NE(device, nullptr);
  uint32_t n = 0;
  ASSERT_EQ(vkEnumeratePhysicalDevices(instance, &n, nullptr), VK_SUCCESS);
  std::vector<VkPhysicalDevice> phys(n);
  ASSERT_EQ(vkEnumeratePhysicalDevices(instance, &n, phys.data()), VK_SUCCESS);
  EXPECT_NE(std::find(phys.begin(), phys.end(), physical), phys.end());
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical, &props);
  EXPECT_EQ(props.deviceName, DeviceAPI::Get(dev).GetAttr(BP_ATTR_DEVICE_NAME).AsString());

  backplane::Stream s{dev};
  const uint64_t family = backplane::NativeHandle(dev, BP_NATIVE_QUEUE_FAMILY, s.handle());
  EXPECT_EQ(backplane::NativeHandle(dev, BP_NATIVE_QUEUE_FAMILY), family);
  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &qn, nullptr);
  ASSERT_LT(family, qn);
  VkQueue queue = VK_NULL_HANDLE;
  vkGetDeviceQueue(device, static_cast<uint32_t>(family), 0, &queue);
  EXPECT_EQ(backplane::NativeHandle(dev, BP_NATIVE_QUEUE, s.handle()),
            reinterpret_cast<uint64_t>(queue));
  EXPECT_EQ(backplane::NativeHandle(dev, BP_NATIVE_QUEUE), reinterpret_cast<uint64_t>(queue));

  const size_t count = 1000;
  const std::vector<float> x = RandomFloats(count, 1915);
  backplane::Tensor t = backplane::Tensor::Empty({static_cast<int64_t>(count)}, kF32, dev);
  t.CopyFrom(x);
  const auto buffer = As<VkBuffer>(t.NativeHandle(BP_NATIVE_BUFFER));
  const auto memory = As<VkDeviceMemory>(t.NativeHandle(BP_NATIVE_MEMORY));
  ASSERT_NE(buffer, VK_NULL_HANDLE);
  ASSERT_NE(memory, VK_NULL_HANDLE);
  EXPECT_EQ(t.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);
  const uint64_t memory_offset = t.NativeHandle(BP_NATIVE_MEMORY_OFFSET);
  EXPECT_EQ(memory_offset, 0u) << "each data space has memory of its own";
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device, buffer, &req);
  EXPECT_GE(req.size, count * sizeof(float)) << "the VkBuffer holds the tensor";
  // The memory can be mapped when every type the buffer may use is host-visible and coherent.
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(physical, &mem);
  bool host_visible = true;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((req.memoryTypeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) != want) {
      host_visible = false;
    }
  }
  if (host_visible) {
    backplane::Check(bp_device_stream_sync(kDev, nullptr));  // the copy in is done
    void* p = nullptr;
    ASSERT_EQ(vkMapMemory(device, memory, memory_offset, count * sizeof(float), 0, &p), VK_SUCCESS);
    EXPECT_EQ(std::memcmp(p, x.data(), count * sizeof(float)), 0)
        << "the mapped memory holds what Backplane wrote";
    vkUnmapMemory(device, memory);
  } else {
    std::printf("skipped mapping a Backplane buffer: %s's memory for it is not host-visible\n",
                props.deviceName);
  }

  // Made-up and freed objects are errors, never a dereference; every kind has a handle, and
  // one past the enum (only the DeviceAPI table sees it: the core refuses it first) has none.
  std::vector<uint8_t> host(16);
  auto st =
      bptest::CaptureError([&] { backplane::NativeHandle(dev, BP_NATIVE_BUFFER, host.data()); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  bp_stream_t freed = nullptr;
  backplane::Check(bp_device_stream_create(kDev, &freed));
  backplane::Check(bp_device_stream_free(kDev, freed));
  st = bptest::CaptureError([&] { backplane::NativeHandle(dev, BP_NATIVE_QUEUE, freed); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  const bp_device_api_t* api = nullptr;
  backplane::Check(bp_device_api_get(kDLVulkan, &api));
  uint64_t out = 0;
  st = Capture(api->native_handle(api->self, kDev, BP_NATIVE_PLATFORM + 1, nullptr, &out));
  EXPECT_EQ(st.kind, BP_ERR_UNSUPPORTED) << st;
  EXPECT_NE(st.message.find("BP_NATIVE_QUEUE_FAMILY"), std::string::npos) << st;
}

// An application's VkBuffer and VkDeviceMemory wrapped as tensors: Backplane's copies write and
// read them (the test reads and writes the other side through its own mapping) and a kernel
// reads them, without a copy; the release runs once, when the tensor goes; bad wraps are
// refused without a release; FreeDataSpace refuses a wrapped handle.
TEST_F(VulkanTest, AWrappedVkBufferIsATensor) {
  const Device dev(kDev);
  const auto physical = As<VkPhysicalDevice>(backplane::NativeHandle(dev, BP_NATIVE_DEVICE));
  const auto device = As<VkDevice>(backplane::NativeHandle(dev, BP_NATIVE_CONTEXT));
  const int32_t rows = 1000;
  const size_t count = static_cast<size_t>(rows) * 256, bytes = count * sizeof(float);
  const std::vector<int64_t> shape = {rows, 256};
  AppBuffer bx(physical, device, bytes), by(physical, device, bytes + 4096);
  if (!bx.ok() || !by.ok()) GTEST_SKIP() << "the device has no host-visible, coherent memory";
  const std::vector<float> x = RandomFloats(count, 1916), y = RandomFloats(count, 1917);
  int released = 0;
  {
    backplane::Tensor tx =
        backplane::Tensor::FromNative(dev, bx.Native(bytes), shape, kF32, [&] { ++released; });
    backplane::Tensor ty = backplane::Tensor::FromNative(dev, by.Native(bytes + 4096), shape, kF32,
                                                         [&] { ++released; });
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER), reinterpret_cast<uint64_t>(bx.buffer));
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_MEMORY), reinterpret_cast<uint64_t>(bx.memory));
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_MEMORY_OFFSET), bx.offset);
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);
    // Backplane writes, the application reads its mapping.
    tx.CopyFrom(x);
    backplane::Check(bp_device_stream_sync(kDev, nullptr));
    EXPECT_EQ(std::memcmp(bx.mapped, x.data(), bytes), 0) << "the copy went into the VkBuffer";
    // The application writes its mapping, Backplane reads.
    std::memcpy(by.mapped, y.data(), bytes);
    EXPECT_EQ(ty.ToVector<float>(), y);
    // A kernel reads both wrapped buffers.
    backplane::Tensor out = backplane::Tensor::Empty(shape, kF32, dev);
    backplane::Module m = backplane::Build(kScaleAddIr, backplane::Target::FromDevice(dev));
    m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), out.dl());
    EXPECT_EQ(WrongScaleAdd(out.ToVector<float>(), x, y), 0u);
    // And writes one: x = 2 z + y (z the result above) lands in bx's mapping.
    const std::vector<float> z = out.ToVector<float>();
    m.GetFunction("scale_add")(rows, out.dl(), ty.dl(), tx.dl());
    backplane::Check(bp_device_stream_sync(kDev, nullptr));
    std::vector<float> mapped_x(count);
    std::memcpy(mapped_x.data(), bx.mapped, bytes);
    EXPECT_EQ(WrongScaleAdd(mapped_x, z, y), 0u);
    // The wrapped handle is not Backplane's to free; the tensor still works after.
    const auto st = Capture(bp_device_free_data_space(kDev, tx.dl()->data));
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
    EXPECT_NE(st.message.find("native buffer"), std::string::npos) << st;
    EXPECT_EQ(tx.ToVector<float>(), mapped_x);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 2) << "each wrapped tensor's release runs once, when it goes";

  // Bad wraps: refused, and the release of a refused wrap never runs.
  auto wrap = [&](bp_native_buffer_t nb, int64_t elements) {
    return bptest::CaptureError([&] {
      backplane::Tensor::FromNative(dev, nb, {elements}, backplane::UInt8(),
                                    [&] { released += 100; });
    });
  };
  bp_native_buffer_t null_buffer = bx.Native(bytes);
  null_buffer.buffer = 0;
  auto st = wrap(null_buffer, 16);
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  bp_native_buffer_t null_memory = bx.Native(bytes);
  null_memory.memory = 0;
  st = wrap(null_memory, 16);
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  const uint64_t too_large = bx.req.size + 4096;
  st = wrap(bx.Native(too_large), static_cast<int64_t>(too_large));
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("vkGetBufferMemoryRequirements"), std::string::npos) << st;
  bp_native_buffer_t misaligned = bx.Native(bytes);
  misaligned.memory_offset += 1;
  st = wrap(misaligned, 16);
  if (bx.req.alignment > 1) {
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  }
  EXPECT_EQ(released, 2);
  // The buffers stayed the application's: AppBuffer's destructor destroys them (the validation
  // layer would report a buffer destroyed twice or while in use).
}

}  // namespace
