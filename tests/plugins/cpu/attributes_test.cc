// SPDX-License-Identifier: Apache-2.0
// The CPU DeviceAPI's attributes and properties: each answers a value that agrees with the
// OS, or none where it does not apply, as BP-PLUGIN-5 asks.
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>

#include "plugins/test_util.h"

namespace {

using backplane::Any;
using backplane::Device;
using backplane::DeviceAPI;
using bptest::Capture;

Any Attr(DLDevice dev, int32_t kind) {
  bp_value_t v;
  backplane::Check(bp_device_get_attr(dev, kind, &v));
  return Any(v);
}

Any Property(DLDevice dev, const char* key) {
  bp_value_t v;
  backplane::Check(bp_device_get_property(dev, key, &v));
  return Any(v);
}

// The first "key : value" of /proc/cpuinfo, read independently of the plugin.
std::optional<std::string> CpuInfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  return std::nullopt;
}

const DLDevice kCpu0{kDLCPU, 0};

TEST(CpuAttributes, ExistsOnlyForDeviceZero) {
  EXPECT_EQ(Attr(kCpu0, BP_ATTR_EXIST).AsInt(), 1);
  EXPECT_TRUE(DeviceAPI::Get(Device(kCpu0)).Exists());
  for (int32_t id : {1, 2, 63}) {
    const DLDevice dev{kDLCPU, id};
    EXPECT_EQ(Attr(dev, BP_ATTR_EXIST).AsInt(), 0) << "cpu:" << id;
    for (int32_t kind = 1; kind < BP_ATTR_COUNT; ++kind) {
      EXPECT_TRUE(Attr(dev, kind).is_none()) << "cpu:" << id << " kind " << kind;
    }
  }
}

TEST(CpuAttributes, DeviceNameIsTheCpuModel) {
  const Any name = Attr(kCpu0, BP_ATTR_DEVICE_NAME);
  ASSERT_EQ(name.type(), BP_VALUE_OBJECT);
  const std::string text = name.AsString();
  EXPECT_FALSE(text.empty());
  if (auto model = CpuInfo("model name")) {
    EXPECT_EQ(text, *model);
  }
}

TEST(CpuAttributes, MemoryIsSane) {
  const int64_t total = Attr(kCpu0, BP_ATTR_TOTAL_GLOBAL_MEMORY).AsInt();
  const int64_t available = Attr(kCpu0, BP_ATTR_AVAILABLE_GLOBAL_MEMORY).AsInt();
  const int64_t phys = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  EXPECT_GT(total, int64_t{64} << 20);
  // sysinfo and sysconf agree to a page or so.
  EXPECT_NEAR(static_cast<double>(total), static_cast<double>(phys), phys * 0.01);
  EXPECT_GT(available, 0);
  EXPECT_LE(available, total);
}

TEST(CpuAttributes, MultiProcessorCountIsOnlineCores) {
  EXPECT_EQ(Attr(kCpu0, BP_ATTR_MULTI_PROCESSOR_COUNT).AsInt(), sysconf(_SC_NPROCESSORS_ONLN));
}

TEST(CpuAttributes, L2CacheMatchesTheOs) {
  const Any l2 = Attr(kCpu0, BP_ATTR_L2_CACHE_SIZE_BYTES);
  const long expected = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (expected > 0) {
    EXPECT_EQ(l2.AsInt(), expected);
  } else if (!l2.is_none()) {
    EXPECT_GT(l2.AsInt(), 0);
  }
}

TEST(CpuAttributes, MaxClockRateIsKilohertzOrNone) {
  const Any clock = Attr(kCpu0, BP_ATTR_MAX_CLOCK_RATE);
  std::ifstream cpufreq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  int64_t khz = 0;
  if (cpufreq >> khz && khz > 0) {
    EXPECT_EQ(clock.AsInt(), khz);
  } else if (auto mhz = CpuInfo("cpu MHz")) {
    EXPECT_NEAR(static_cast<double>(clock.AsInt()), std::stod(*mhz) * 1000.0, 1.0);
  } else {
    EXPECT_TRUE(clock.is_none());
  }
}

TEST(CpuAttributes, GpuNotionsAreNone) {
  for (int32_t kind :
       {BP_ATTR_MAX_THREADS_PER_BLOCK, BP_ATTR_WARP_SIZE, BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK,
        BP_ATTR_COMPUTE_VERSION, BP_ATTR_MAX_THREAD_DIMENSIONS, BP_ATTR_MAX_REGISTERS_PER_BLOCK,
        BP_ATTR_GCN_ARCH, BP_ATTR_API_VERSION, BP_ATTR_DRIVER_VERSION,
        BP_ATTR_IMAGE_PITCH_ALIGNMENT}) {
    EXPECT_TRUE(Attr(kCpu0, kind).is_none()) << "kind " << kind;
  }
}

TEST(CpuAttributes, KindsFromANewerMinorAreNone) {
  // The core passes kinds it does not know to the plugin; the SDK answers none.
  EXPECT_TRUE(Attr(kCpu0, BP_ATTR_COUNT).is_none());
  EXPECT_TRUE(Attr(kCpu0, 1000).is_none());
}

TEST(CpuAttributes, TableEntryChecksItsOutput) {
  const bp_device_api_t* api = DeviceAPI::Get(Device(kCpu0)).table();
  ASSERT_NE(api->get_attr, nullptr);
  const auto s = Capture(api->get_attr(api->self, kCpu0, BP_ATTR_EXIST, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("out_value"), std::string::npos) << s;
  bp_value_t v;
  ASSERT_EQ(api->get_attr(api->self, kCpu0, BP_ATTR_EXIST, &v), BP_OK);
  EXPECT_EQ(v.type, BP_VALUE_INT);
  EXPECT_EQ(v.u.v_int64, 1);
}

TEST(CpuProperties, AnswerKnownKeysAndNoneForOthers) {
  struct utsname uts {};
  ASSERT_EQ(uname(&uts), 0);
  EXPECT_EQ(Property(kCpu0, "arch").AsString(), uts.machine);
  EXPECT_EQ(Property(kCpu0, "kernel_release").AsString(), uts.release);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(Property(kCpu0, "num_threads").AsInt(), CPU_COUNT(&set));
  EXPECT_EQ(Property(kCpu0, "page_size").AsInt(), sysconf(_SC_PAGESIZE));
  EXPECT_EQ(Property(kCpu0, "online_cores").AsInt(), sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_TRUE(Property(kCpu0, "no_such_property").is_none());
  EXPECT_TRUE(Property(kCpu0, "").is_none());
  EXPECT_TRUE(Property(DLDevice{kDLCPU, 1}, "arch").is_none());
}

}  // namespace
