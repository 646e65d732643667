// SPDX-License-Identifier: Apache-2.0
// Every attribute of every device here against what the system's own tools say:
// cpu:0 against lscpu, /proc and /sys; every opencl:N against clinfo --raw; every
// vulkan:N against vulkaninfo (its JSON profile and its text), and the properties users look up
// there (timer resolution, address bits, SVM; memory heaps and types, queue families,
// dispatch limits, timestamp period, conformance version). Each test also checks that it
// compared every attribute kind (a kind added later without a comparison fails here) and that
// every property a device lists answers. Values that drift while the machine runs (available
// memory; PoCL's global memory, which it derives from free memory) are compared within a
// tolerance. A backend is skipped, with the reason, only when its plugin, its tool or its
// device is absent.
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef BACKPLANE_PLUGIN_DIR
#error "BACKPLANE_PLUGIN_DIR must name the folder of the built plugins"
#endif

namespace {

namespace bp = backplane;
using Json = nlohmann::json;

// ---- Running the tools ------------------------------------------------------------------

bool HasTool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// What `command` (run by /bin/sh) prints on stdout; stderr is dropped.
std::string Shell(const std::string& command) {
  FILE* f = popen((command + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return "";
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0) out.append(buffer, n);
  pclose(f);
  return out;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> SortedWords(const std::string& text) {
  std::set<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.insert(w);
  return std::vector<std::string>(words.begin(), words.end());
}

// The value of "key: value" in a file such as /proc/meminfo (first match), or "".
std::string Keyed(const std::string& text, const std::string& key) {
  for (const std::string& line : Lines(text)) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && Trim(line.substr(0, colon)) == key) {
      return Trim(line.substr(colon + 1));
    }
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- Reading attributes -------------------------------------------------------------------

// One device's attributes, and the kinds a test has compared so far.
class Attributes {
 public:
  explicit Attributes(bp::Device dev) : api_(bp::DeviceAPI::Get(dev)) {}

  bp::Any Get(bp_device_attr_kind_t kind) {
    checked_.insert(kind);
    return api_.GetAttr(kind);
  }
  bool IsNone(bp_device_attr_kind_t kind) { return Get(kind).is_none(); }
  int64_t Int(bp_device_attr_kind_t kind) {
    bp::Any v = Get(kind);
    EXPECT_EQ(v.type(), BP_VALUE_INT) << Name(kind) << " is not an int";
    return v.type() == BP_VALUE_INT ? v.AsInt() : -1;
  }
  std::string Str(bp_device_attr_kind_t kind) {
    bp::Any v = Get(kind);
    EXPECT_FALSE(v.is_none()) << Name(kind) << " is none";
    return v.is_none() ? "" : v.AsString();
  }
  std::vector<std::string> StrList(bp_device_attr_kind_t kind) {
    std::vector<std::string> out;
    for (const Json& j : List(kind)) out.push_back(j.get<std::string>());
    return out;
  }
  std::vector<int64_t> IntList(bp_device_attr_kind_t kind) {
    std::vector<int64_t> out;
    for (const Json& j : List(kind)) out.push_back(j.get<int64_t>());
    return out;
  }
  // The kinds never read: every one must be compared with the tool or shown not to apply.
  std::vector<std::string> Unchecked() const {
    std::vector<std::string> out;
    for (int32_t k = 0; k < BP_ATTR_COUNT; ++k) {
      if (checked_.count(static_cast<bp_device_attr_kind_t>(k)) == 0) out.push_back(Name(k));
    }
    return out;
  }
  // Every property the device lists answers something.
  void ExpectListedPropertiesAnswer() {
    const std::vector<std::string> keys = api_.ListProperties();
    EXPECT_FALSE(keys.empty()) << api_.device().ToString() << " lists no properties";
    for (const std::string& key : keys) {
      EXPECT_FALSE(api_.GetProperty(key).is_none())
          << api_.device().ToString() << " lists property " << key << " but it answers none";
    }
  }
  bp::DeviceAPI& api() { return api_; }
  static std::string Name(int32_t kind) { return bp_device_attr_name(kind); }

 private:
  Json List(bp_device_attr_kind_t kind) {
    bp::Any v = Get(kind);
    Json out = Json::array();
    if (v.type() != BP_VALUE_OBJECT) {
      ADD_FAILURE() << Name(kind) << " is not an array object (" << v.TypeName() << ")";
      return out;
    }
    size_t n = 0;
    bp::Check(bp_array_size(v.raw().u.v_obj, &n));
    for (size_t i = 0; i < n; ++i) {
      bp_value_t e;
      bp::Check(bp_array_get(v.raw().u.v_obj, i, &e));
      if (e.type == BP_VALUE_INT) {
        out.push_back(e.u.v_int64);
      } else {
        out.push_back(bp::GetString(e.u.v_obj));
      }
    }
    return out;
  }

  bp::DeviceAPI api_;
  std::set<bp_device_attr_kind_t> checked_;
};

// A property's value as JSON: numbers, strings and lists (arrays of ints or strings); null
// for none.
Json Property(bp::DeviceAPI& api, const std::string& key) {
  const bp::Any v = api.GetProperty(key);
  switch (v.type()) {
    case BP_VALUE_NONE:
      return nullptr;
    case BP_VALUE_INT:
      return v.AsInt();
    case BP_VALUE_FLOAT:
      return v.raw().u.v_float64;
    default:
      break;
  }
  int32_t type = 0;
  bp::Check(bp_object_type(v.raw().u.v_obj, &type));
  if (type == BP_OBJECT_STRING) return bp::GetString(v.raw().u.v_obj);
  Json out = Json::array();
  size_t n = 0;
  bp::Check(bp_array_size(v.raw().u.v_obj, &n));
  for (size_t i = 0; i < n; ++i) {
    bp_value_t e;
    bp::Check(bp_array_get(v.raw().u.v_obj, i, &e));
    if (e.type == BP_VALUE_INT) {
      out.push_back(e.u.v_int64);
    } else {
      out.push_back(bp::GetString(e.u.v_obj));
    }
  }
  return out;
}

// "A|B|C" (a flags property) as a set; "none" is the empty set.
std::set<std::string> FlagSet(const std::string& text) {
  std::set<std::string> out;
  if (text == "none") return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t bar = text.find('|', start);
    out.insert(text.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

// `name` without `prefix` and a trailing "_BIT" (vulkaninfo's "MEMORY_HEAP_DEVICE_LOCAL_BIT"
// is the flag "DEVICE_LOCAL").
std::string BitName(std::string name, const std::string& prefix) {
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "_BIT") == 0)
    name.resize(name.size() - 4);
  return name;
}

// Loads the plugin `name` from the build; false (with the reason in *why) when it was not built.
bool LoadPlugin(const std::string& name, std::string* why) {
  const std::string path = std::string(BACKPLANE_PLUGIN_DIR) + "/libbackplane_" + name + ".so";
  if (!std::filesystem::exists(path)) {
    *why = "the " + name + " plugin was not built here (" + path + ")";
    return false;
  }
  if (bp_plugin_load(path.c_str()) != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    ADD_FAILURE() << "loading " << path << ": " << (message != nullptr ? message : "");
    return false;
  }
  return true;
}

int32_t CountDevices(const std::string& type) {
  int32_t n = 0;
  while (bp::DeviceAPI::Get(bp::Device(type, n)).Exists()) ++n;
  return n;
}

// |a - b| <= fraction of the larger.
void ExpectNear(int64_t a, int64_t b, double fraction, const std::string& what) {
  const double tolerance = fraction * static_cast<double>(std::max(a, b));
  EXPECT_LE(std::abs(static_cast<double>(a - b)), tolerance)
      << what << ": " << a << " and " << b << " differ by more than " << fraction * 100 << "%";
}

// ---- cpu:0 against lscpu, /proc and /sys ------------------------------------------------------

// lscpu -B -C=NAME,ONE-SIZE: the size of one instance of each cache, in bytes ("L3" -> ...).
std::map<std::string, int64_t> LscpuCaches() {
  std::map<std::string, int64_t> out;
  for (const std::string& line : Lines(Shell("lscpu -B -C=NAME,ONE-SIZE"))) {
    std::istringstream in(line);
    std::string name, size;
    if (!(in >> name >> size) || size.find_first_not_of("0123456789") != std::string::npos) {
      continue;  // the heading
    }
    out[name] = std::stoll(size);
  }
  return out;
}

// The size of cpu0's data or unified cache of `level` in /sys, in bytes, or -1.
int64_t SysfsCache(int level) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    if (!std::filesystem::exists(dir)) break;
    if (Trim(ReadFile(dir + "/level")) != std::to_string(level)) continue;
    const std::string type = Trim(ReadFile(dir + "/type"));
    if (type != "Data" && type != "Unified") continue;
    std::string size = Trim(ReadFile(dir + "/size"));  // "1024K"
    int64_t scale = 1;
    if (!size.empty() && size.back() == 'K') scale = 1024;
    if (!size.empty() && size.back() == 'M') scale = 1024 * 1024;
    if (scale != 1) size.pop_back();
    return std::stoll(size) * scale;
  }
  return -1;
}

TEST(AttributeTruth, CpuMatchesLscpuProcAndSysfs) {
  if (!HasTool("lscpu")) GTEST_SKIP() << "lscpu is not installed (Debian: util-linux)";
  std::string why;
  if (!LoadPlugin("cpu", &why)) GTEST_SKIP() << why;
  Attributes a(bp::Device("cpu", 0));
  const std::string lscpu = Shell("LC_ALL=C lscpu");

  EXPECT_EQ(a.Int(BP_ATTR_EXIST), 1);
  EXPECT_EQ(a.Str(BP_ATTR_DEVICE_NAME), Keyed(lscpu, "Model name"));
  EXPECT_EQ(a.Str(BP_ATTR_DEVICE_KIND), "cpu");
  EXPECT_EQ(a.Str(BP_ATTR_VENDOR), Keyed(lscpu, "Vendor ID"));
  // Online logical CPUs: lscpu's parseable list of the online ones.
  int64_t online = 0;
  for (const std::string& line : Lines(Shell("lscpu -p=CPU --online"))) {
    online += !line.empty() && line[0] != '#';
  }
  EXPECT_EQ(a.Int(BP_ATTR_MULTI_PROCESSOR_COUNT), online);

  // Caches: one instance's size, as lscpu and cpu0's sysfs entries say (never glibc's guess).
  const std::map<std::string, int64_t> caches = LscpuCaches();
  if (caches.count("L2") != 0) {
    EXPECT_EQ(a.Int(BP_ATTR_L2_CACHE_SIZE_BYTES), caches.at("L2"));
    EXPECT_EQ(a.Int(BP_ATTR_L2_CACHE_SIZE_BYTES), SysfsCache(2));
  } else {
    EXPECT_TRUE(a.IsNone(BP_ATTR_L2_CACHE_SIZE_BYTES)) << "lscpu reports no L2";
  }
  if (caches.count("L3") != 0) {
    EXPECT_EQ(a.api().GetProperty("l3_cache_size_bytes").AsInt(), caches.at("L3"));
    EXPECT_EQ(a.api().GetProperty("l3_cache_size_bytes").AsInt(), SysfsCache(3));
  }
  if (caches.count("L1d") != 0) {
    EXPECT_EQ(a.api().GetProperty("l1d_cache_size_bytes").AsInt(), caches.at("L1d"));
  }

  // The clock: cpufreq's maximum where the kernel has one (lscpu's "CPU max MHz"), else the
  // current "cpu MHz", which moves: within 10%.
  const std::string max_mhz = Keyed(lscpu, "CPU max MHz");
  const std::string cpuinfo = ReadFile("/proc/cpuinfo");
  if (!max_mhz.empty()) {
    ExpectNear(a.Int(BP_ATTR_MAX_CLOCK_RATE), std::llround(std::stod(max_mhz) * 1000), 0.001,
               "max_clock_rate against lscpu's CPU max MHz");
  } else if (!Keyed(cpuinfo, "cpu MHz").empty()) {
    ExpectNear(a.Int(BP_ATTR_MAX_CLOCK_RATE),
               std::llround(std::stod(Keyed(cpuinfo, "cpu MHz")) * 1000), 0.10,
               "max_clock_rate against /proc/cpuinfo's cpu MHz");
  } else {
    EXPECT_TRUE(a.IsNone(BP_ATTR_MAX_CLOCK_RATE));
  }

  // Memory: /proc/meminfo (kB). Available memory moves: within 10% of the total.
  const std::string meminfo = ReadFile("/proc/meminfo");
  const int64_t total = std::stoll(Keyed(meminfo, "MemTotal")) * 1024;
  const int64_t swap = std::stoll(Keyed(meminfo, "SwapTotal")) * 1024;
  EXPECT_EQ(a.Int(BP_ATTR_TOTAL_GLOBAL_MEMORY), total);
  const int64_t available = std::stoll(Keyed(ReadFile("/proc/meminfo"), "MemAvailable")) * 1024;
  EXPECT_LE(std::abs(a.Int(BP_ATTR_AVAILABLE_GLOBAL_MEMORY) - available), total / 10)
      << "available_global_memory drifted more than 10% of the total from MemAvailable";
  EXPECT_EQ(a.Int(BP_ATTR_MAX_ALLOCATION_SIZE), total + swap)
      << "the cpu plugin refuses more than RAM plus swap in one allocation";

  // ISA flags: lscpu's Flags, sorted; float16 arithmetic where the ISA has it.
  const std::vector<std::string> flags = SortedWords(Keyed(lscpu, "Flags"));
  EXPECT_EQ(a.StrList(BP_ATTR_ISA_FLAGS), flags);
  const bool fp16 = std::count(flags.begin(), flags.end(), "avx512_fp16") +
                        std::count(flags.begin(), flags.end(), "fphp") +
                        std::count(flags.begin(), flags.end(), "asimdhp") >
                    0;
  EXPECT_EQ(a.Int(BP_ATTR_SUPPORTS_FP16), fp16 ? 1 : 0);
  EXPECT_EQ(a.Int(BP_ATTR_SUPPORTS_FP64), 1);

  // What does not apply to a CPU (GPU notions, a device API or driver, PCI, a UUID, API
  // extensions) is none, never 0 or an invented value.
  for (bp_device_attr_kind_t kind :
       {BP_ATTR_MAX_THREADS_PER_BLOCK, BP_ATTR_WARP_SIZE, BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK,
        BP_ATTR_COMPUTE_VERSION, BP_ATTR_MAX_THREAD_DIMENSIONS, BP_ATTR_MAX_REGISTERS_PER_BLOCK,
        BP_ATTR_GCN_ARCH, BP_ATTR_API_VERSION, BP_ATTR_DRIVER_VERSION,
        BP_ATTR_IMAGE_PITCH_ALIGNMENT, BP_ATTR_VENDOR_ID, BP_ATTR_UUID, BP_ATTR_PCI_BUS_ID,
        BP_ATTR_SUBGROUP_SIZES, BP_ATTR_EXTENSIONS, BP_ATTR_DRIVER_INFO}) {
    EXPECT_TRUE(a.IsNone(kind)) << Attributes::Name(kind) << " does not apply to a CPU";
  }
  a.ExpectListedPropertiesAnswer();
  EXPECT_EQ(a.Unchecked(), std::vector<std::string>{}) << "attributes not compared";
}

// ---- opencl:N against clinfo --raw ------------------------------------------------------------

// clinfo --raw, by device: "[POCL/0]  KEY  VALUE" lines grouped by their "[PLATFORM/INDEX]"
// prefix, in the order clinfo lists them (the ICD loader's, which opencl:N follows too).
std::vector<std::map<std::string, std::string>> ClinfoDevices() {
  std::vector<std::string> order;
  std::map<std::string, std::map<std::string, std::string>> by_prefix;
  for (const std::string& line : Lines(Shell("clinfo --raw"))) {
    if (line.size() < 3 || line[0] != '[') continue;
    const size_t close = line.find(']');
    if (close == std::string::npos) continue;
    const std::string prefix = line.substr(0, close + 1);
    if (prefix.find("/*]") != std::string::npos) continue;  // platform-wide lines
    std::istringstream rest(line.substr(close + 1));
    std::string key;
    rest >> key;
    std::string value;
    std::getline(rest, value);
    if (by_prefix.count(prefix) == 0) order.push_back(prefix);
    auto& fields = by_prefix[prefix];
    if (fields.count(key) == 0) fields[key] = Trim(value);
  }
  std::vector<std::map<std::string, std::string>> out;
  for (const std::string& prefix : order) out.push_back(by_prefix[prefix]);
  return out;
}

TEST(AttributeTruth, OpenCLMatchesClinfo) {
  if (!HasTool("clinfo")) GTEST_SKIP() << "clinfo is not installed (Debian: clinfo)";
  std::string why;
  if (!LoadPlugin("opencl", &why)) GTEST_SKIP() << why;
  const int32_t count = CountDevices("opencl");
  if (count == 0) GTEST_SKIP() << "no OpenCL device (Debian: pocl-opencl-icd gives one)";
  const auto clinfo = ClinfoDevices();
  ASSERT_EQ(static_cast<int32_t>(clinfo.size()), count) << "clinfo and the plugin disagree";
  for (int32_t id = 0; id < count; ++id) {
    SCOPED_TRACE("opencl:" + std::to_string(id));
    const auto& c = clinfo[id];
    auto field = [&c](const std::string& key) {
      auto it = c.find(key);
      return it == c.end() ? std::string() : it->second;
    };
    auto number = [&field](const std::string& key) {
      const std::string v = field(key);
      EXPECT_FALSE(v.empty()) << "clinfo prints no " << key;
      return v.empty() ? int64_t{-1} : static_cast<int64_t>(std::stoull(v, nullptr, 0));
    };
    Attributes a(bp::Device("opencl", id));
    const std::vector<std::string> extensions = SortedWords(field("CL_DEVICE_EXTENSIONS"));
    auto has = [&extensions](const std::string& e) {
      return std::find(extensions.begin(), extensions.end(), e) != extensions.end();
    };

    EXPECT_EQ(a.Int(BP_ATTR_EXIST), 1);
    EXPECT_EQ(a.Str(BP_ATTR_DEVICE_NAME), field("CL_DEVICE_NAME"));
    EXPECT_EQ(a.Int(BP_ATTR_MAX_THREADS_PER_BLOCK), number("CL_DEVICE_MAX_WORK_GROUP_SIZE"));
    // warp_size: the vendor's warp or wavefront, else a kernel's preferred multiple.
    if (!field("CL_DEVICE_WARP_SIZE_NV").empty()) {
      EXPECT_EQ(a.Int(BP_ATTR_WARP_SIZE), number("CL_DEVICE_WARP_SIZE_NV"));
    } else if (!field("CL_DEVICE_WAVEFRONT_WIDTH_AMD").empty()) {
      EXPECT_EQ(a.Int(BP_ATTR_WARP_SIZE), number("CL_DEVICE_WAVEFRONT_WIDTH_AMD"));
    } else {
      EXPECT_EQ(a.Int(BP_ATTR_WARP_SIZE), number("CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE"));
    }
    EXPECT_EQ(a.Int(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK), number("CL_DEVICE_LOCAL_MEM_SIZE"));
    const std::string version = field("CL_DEVICE_VERSION");  // "OpenCL 3.0 PoCL ..."
    EXPECT_EQ(a.Str(BP_ATTR_API_VERSION), version);
    std::istringstream version_words(version);
    std::string opencl_word, version_number;
    version_words >> opencl_word >> version_number;
    EXPECT_EQ(a.Str(BP_ATTR_COMPUTE_VERSION), version_number);
    EXPECT_EQ(a.Int(BP_ATTR_MAX_CLOCK_RATE), number("CL_DEVICE_MAX_CLOCK_FREQUENCY") * 1000);
    EXPECT_EQ(a.Int(BP_ATTR_MULTI_PROCESSOR_COUNT), number("CL_DEVICE_MAX_COMPUTE_UNITS"));
    std::string dims = "[";
    for (const std::string& w : Lines(field("CL_DEVICE_MAX_WORK_ITEM_SIZES"))) {
      std::istringstream in(w);
      for (std::string n; in >> n;) dims += (dims.size() > 1 ? ", " : "") + n;
    }
    EXPECT_EQ(a.Str(BP_ATTR_MAX_THREAD_DIMENSIONS), dims + "]");
    EXPECT_EQ(a.Str(BP_ATTR_DRIVER_VERSION), field("CL_DRIVER_VERSION"));
    EXPECT_EQ(a.Str(BP_ATTR_DRIVER_INFO), field("CL_DRIVER_VERSION"));
    // PoCL derives the global memory size from the memory free when it starts, so another
    // process (clinfo) may see another value: within 5%.
    ExpectNear(a.Int(BP_ATTR_TOTAL_GLOBAL_MEMORY), number("CL_DEVICE_GLOBAL_MEM_SIZE"), 0.05,
               "total_global_memory against CL_DEVICE_GLOBAL_MEM_SIZE");
    ExpectNear(a.Int(BP_ATTR_MAX_ALLOCATION_SIZE), number("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), 0.05,
               "max_allocation_size against CL_DEVICE_MAX_MEM_ALLOC_SIZE");
    const std::string type = field("CL_DEVICE_TYPE");
    const std::string kind =
        type.find("GPU") != std::string::npos   ? "gpu"
        : type.find("CPU") != std::string::npos ? "cpu"
        : type.find("ACCELERATOR") != std::string::npos || type.find("CUSTOM") != std::string::npos
            ? "accelerator"
            : "other";
    EXPECT_EQ(a.Str(BP_ATTR_DEVICE_KIND), kind) << type;
    EXPECT_EQ(a.Str(BP_ATTR_VENDOR), field("CL_DEVICE_VENDOR"));
    EXPECT_EQ(a.Int(BP_ATTR_VENDOR_ID), number("CL_DEVICE_VENDOR_ID"));
    EXPECT_EQ(a.StrList(BP_ATTR_EXTENSIONS), extensions);
    const std::string fp64 = field("CL_DEVICE_DOUBLE_FP_CONFIG");
    EXPECT_EQ(a.Int(BP_ATTR_SUPPORTS_FP64), (!fp64.empty() && fp64 != "0") || has("cl_khr_fp64"))
        << "CL_DEVICE_DOUBLE_FP_CONFIG " << fp64;
    EXPECT_EQ(a.Int(BP_ATTR_SUPPORTS_FP16), has("cl_khr_fp16") ? 1 : 0);
    // Optional identity, from the KHR extensions that define it.
    if (has("cl_khr_device_uuid")) {
      EXPECT_FALSE(a.Str(BP_ATTR_UUID).empty());
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_UUID)) << "no cl_khr_device_uuid";
    }
    if (has("cl_khr_pci_bus_info")) {
      EXPECT_FALSE(a.Str(BP_ATTR_PCI_BUS_ID).empty());
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_PCI_BUS_ID)) << "no cl_khr_pci_bus_info";
    }
    if (has("cl_intel_required_subgroup_size")) {
      std::vector<int64_t> sizes;
      std::istringstream in(field("CL_DEVICE_SUB_GROUP_SIZES_INTEL"));
      for (int64_t n = 0; in >> n;) sizes.push_back(n);
      EXPECT_EQ(a.IntList(BP_ATTR_SUBGROUP_SIZES), sizes);
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_SUBGROUP_SIZES)) << "core OpenCL lists no subgroup sizes";
    }
    // The L2 has no OpenCL query: CL_DEVICE_GLOBAL_MEM_CACHE_SIZE is whichever level caches
    // global memory (the L3 on PoCL), so it is a property and the attribute is none.
    EXPECT_TRUE(a.IsNone(BP_ATTR_L2_CACHE_SIZE_BYTES));
    EXPECT_EQ(a.api().GetProperty("global_mem_cache_size_bytes").AsInt(),
              number("CL_DEVICE_GLOBAL_MEM_CACHE_SIZE"));
    // What clinfo shows beyond the attributes (docs/device-attributes.md, "Properties").
    EXPECT_EQ(Property(a.api(), "profiling_timer_resolution_ns").get<int64_t>(),
              number("CL_DEVICE_PROFILING_TIMER_RESOLUTION"));
    EXPECT_EQ(Property(a.api(), "address_bits").get<int64_t>(), number("CL_DEVICE_ADDRESS_BITS"));
    const std::string svm = field("CL_DEVICE_SVM_CAPABILITIES");
    if (std::stod(version_number) >= 2.0) {
      // "CL_DEVICE_SVM_COARSE_GRAIN_BUFFER | CL_DEVICE_SVM_ATOMICS" (or no name: none).
      std::set<std::string> want;
      for (const std::string& w : SortedWords(svm)) {
        if (w.rfind("CL_DEVICE_SVM_", 0) == 0) want.insert(w.substr(14));
      }
      const Json got = Property(a.api(), "svm_capabilities");
      ASSERT_TRUE(got.is_array()) << got;
      std::set<std::string> names;
      for (const Json& n : got) names.insert(n.get<std::string>());
      EXPECT_EQ(names, want) << svm;
    } else {
      EXPECT_TRUE(Property(a.api(), "svm_capabilities").is_null()) << "no SVM before 2.0";
    }
    for (bp_device_attr_kind_t none :
         {BP_ATTR_MAX_REGISTERS_PER_BLOCK, BP_ATTR_GCN_ARCH, BP_ATTR_AVAILABLE_GLOBAL_MEMORY,
          BP_ATTR_IMAGE_PITCH_ALIGNMENT, BP_ATTR_ISA_FLAGS}) {
      EXPECT_TRUE(a.IsNone(none)) << Attributes::Name(none) << " has no OpenCL query";
    }
    a.ExpectListedPropertiesAnswer();
    EXPECT_EQ(a.Unchecked(), std::vector<std::string>{}) << "attributes not compared";
  }
}

// ---- vulkan:N against vulkaninfo ------------------------------------------------------------

// vulkaninfo with a private XDG_RUNTIME_DIR (it prints noise without one), run in `dir`.
std::string VulkanInfo(const std::string& args, const std::string& dir) {
  return Shell("cd '" + dir + "' && XDG_RUNTIME_DIR='" + dir + "' vulkaninfo " + args);
}

// The profile vulkaninfo --json=N writes for GPU N (capabilities.device), or null.
Json VulkanProfile(int32_t gpu, const std::string& dir) {
  VulkanInfo("--json=" + std::to_string(gpu), dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    Json doc = Json::parse(ReadFile(entry.path().string()), nullptr, false);
    std::filesystem::remove(entry.path());
    if (doc.is_object()) return doc["capabilities"]["device"];
  }
  return nullptr;
}

// The sum of GPU N's device-local heaps in vulkaninfo's text ("memoryHeaps[0]: size = ...").
int64_t DeviceLocalHeaps(const std::string& text, int32_t gpu) {
  bool in_gpu = false;
  int64_t size = 0;
  int64_t total = 0;
  for (const std::string& raw : Lines(text)) {
    const std::string line = Trim(raw);
    if (raw.rfind("GPU", 0) == 0 && raw.back() == ':')
      in_gpu = raw == "GPU" + std::to_string(gpu) + ":";
    if (!in_gpu) continue;
    if (line.rfind("size", 0) == 0 && line.find('=') != std::string::npos) {
      size = std::stoll(Trim(line.substr(line.find('=') + 1)));
    } else if (line == "MEMORY_HEAP_DEVICE_LOCAL_BIT") {
      total += size;
    }
  }
  return total;
}

// GPU N's memory heaps and types as vulkaninfo's text lists them.
struct VulkanMemory {
  std::vector<int64_t> heap_sizes, type_heaps;
  std::vector<std::set<std::string>> heap_flags, type_flags;
};
VulkanMemory VulkanMemoryOf(const std::string& text, int32_t gpu) {
  VulkanMemory m;
  bool in_gpu = false;
  bool in_types = false;
  for (const std::string& raw : Lines(text)) {
    const std::string line = Trim(raw);
    if (raw.rfind("GPU", 0) == 0 && raw.back() == ':')
      in_gpu = raw == "GPU" + std::to_string(gpu) + ":";
    if (!in_gpu) continue;
    auto value = [&line] { return Trim(line.substr(line.find('=') + 1)); };
    if (line.rfind("memoryHeaps[", 0) == 0) {
      in_types = false;
      m.heap_sizes.push_back(-1);
      m.heap_flags.emplace_back();
    } else if (line.rfind("memoryTypes[", 0) == 0) {
      in_types = true;
      m.type_heaps.push_back(-1);
      m.type_flags.emplace_back();
    } else if (!in_types && !m.heap_sizes.empty() && line.rfind("size", 0) == 0 &&
               line.find('=') != std::string::npos) {
      m.heap_sizes.back() = std::stoll(value());
    } else if (!in_types && !m.heap_flags.empty() && line.rfind("MEMORY_HEAP_", 0) == 0) {
      m.heap_flags.back().insert(BitName(line, "MEMORY_HEAP_"));
    } else if (in_types && line.rfind("heapIndex", 0) == 0) {
      m.type_heaps.back() = std::stoll(value());
    } else if (in_types && line.rfind("MEMORY_PROPERTY_", 0) == 0) {
      m.type_flags.back().insert(BitName(line, "MEMORY_PROPERTY_"));
    }
  }
  return m;
}

TEST(AttributeTruth, VulkanMatchesVulkaninfo) {
  if (!HasTool("vulkaninfo")) GTEST_SKIP() << "vulkaninfo is not installed (Debian: vulkan-tools)";
  std::string why;
  if (!LoadPlugin("vulkan", &why)) GTEST_SKIP() << why;
  const int32_t count = CountDevices("vulkan");
  if (count == 0) GTEST_SKIP() << "no Vulkan device (Debian: mesa-vulkan-drivers gives lavapipe)";
  char dir_template[] = "/tmp/bp_vulkaninfo_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string text = VulkanInfo("", dir);
  for (int32_t id = 0; id < count; ++id) {
    SCOPED_TRACE("vulkan:" + std::to_string(id));
    const Json device = VulkanProfile(id, dir);
    ASSERT_TRUE(device.is_object()) << "vulkaninfo --json=" << id << " wrote no profile";
    const Json& props = device["properties"];
    const Json& core = props["VkPhysicalDeviceProperties"];
    const Json& limits = core["limits"];
    const Json& features = device["features"];
    Attributes a(bp::Device("vulkan", id));
    auto has = [&device](const std::string& e) { return device["extensions"].contains(e); };

    EXPECT_EQ(a.Int(BP_ATTR_EXIST), 1);
    EXPECT_EQ(a.Str(BP_ATTR_DEVICE_NAME), core["deviceName"].get<std::string>());
    EXPECT_EQ(a.Int(BP_ATTR_MAX_THREADS_PER_BLOCK), limits["maxComputeWorkGroupInvocations"]);
    EXPECT_EQ(a.Int(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK), limits["maxComputeSharedMemorySize"]);
    const Json& size = limits["maxComputeWorkGroupSize"];
    EXPECT_EQ(a.Str(BP_ATTR_MAX_THREAD_DIMENSIONS),
              "[" + size[0].dump() + ", " + size[1].dump() + ", " + size[2].dump() + "]");
    const uint32_t api = core["apiVersion"].get<uint32_t>();
    EXPECT_EQ(a.Str(BP_ATTR_API_VERSION), std::to_string(api >> 22) + "." +
                                              std::to_string((api >> 12) & 0x3ff) + "." +
                                              std::to_string(api & 0xfff));
    EXPECT_EQ(a.Str(BP_ATTR_COMPUTE_VERSION),
              std::to_string(api >> 22) + "." + std::to_string((api >> 12) & 0x3ff));
    // The summary decodes driverVersion as its vendor encodes it ("0.0.1" for Mesa).
    const std::string summary = VulkanInfo("--summary", dir);
    std::vector<std::string> versions;
    for (const std::string& line : Lines(summary)) {
      if (Trim(line).rfind("driverVersion", 0) == 0) {
        versions.push_back(Trim(line.substr(line.find('=') + 1)));
      }
    }
    ASSERT_GT(versions.size(), static_cast<size_t>(id));
    EXPECT_EQ(a.Str(BP_ATTR_DRIVER_VERSION), versions[id]);
    if (props.contains("VkPhysicalDeviceDriverProperties")) {
      EXPECT_EQ(a.Str(BP_ATTR_DRIVER_INFO),
                props["VkPhysicalDeviceDriverProperties"]["driverInfo"].get<std::string>());
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_DRIVER_INFO));
    }
    const std::string type = core["deviceType"].get<std::string>();
    EXPECT_EQ(a.Str(BP_ATTR_DEVICE_KIND), type == "VK_PHYSICAL_DEVICE_TYPE_CPU"     ? "cpu"
                                          : type == "VK_PHYSICAL_DEVICE_TYPE_OTHER" ? "other"
                                                                                    : "gpu");
    EXPECT_EQ(a.Int(BP_ATTR_VENDOR_ID), core["vendorID"].get<int64_t>());
    // The vendor's name for the ids Khronos and PCI assign; lavapipe is Mesa's (0x10005).
    const std::map<int64_t, std::string> vendors = {
        {0x10005, "Mesa"}, {0x10DE, "NVIDIA"}, {0x1002, "AMD"}, {0x8086, "Intel"}};
    auto vendor = vendors.find(core["vendorID"].get<int64_t>());
    if (vendor != vendors.end()) {
      EXPECT_EQ(a.Str(BP_ATTR_VENDOR), vendor->second);
    } else {
      a.Get(BP_ATTR_VENDOR);  // another vendor: a name or none, nothing to compare it with
    }
    if (props.contains("VkPhysicalDeviceIDProperties")) {
      std::string uuid;
      const Json& bytes = props["VkPhysicalDeviceIDProperties"]["deviceUUID"];
      for (size_t i = 0; i < bytes.size(); ++i) {
        char hex[3];
        std::snprintf(hex, sizeof(hex), "%02x", bytes[i].get<unsigned>());
        uuid += (i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "") + std::string(hex);
      }
      EXPECT_EQ(a.Str(BP_ATTR_UUID), uuid);
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_UUID));
    }
    if (props.contains("VkPhysicalDevicePCIBusInfoPropertiesEXT")) {
      const Json& pci = props["VkPhysicalDevicePCIBusInfoPropertiesEXT"];
      char bus[32];
      std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%x", pci["pciDomain"].get<unsigned>(),
                    pci["pciBus"].get<unsigned>(), pci["pciDevice"].get<unsigned>(),
                    pci["pciFunction"].get<unsigned>());
      EXPECT_EQ(a.Str(BP_ATTR_PCI_BUS_ID), bus);
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_PCI_BUS_ID)) << "no VK_EXT_pci_bus_info";
    }
    EXPECT_EQ(a.Int(BP_ATTR_MAX_ALLOCATION_SIZE),
              props["VkPhysicalDeviceMaintenance3Properties"]["maxMemoryAllocationSize"]);
    EXPECT_EQ(a.Int(BP_ATTR_SUPPORTS_FP64),
              features["VkPhysicalDeviceFeatures"]["shaderFloat64"].get<bool>() ? 1 : 0);
    bool fp16 = false, buffer16 = false;
    for (const auto& [name, feature] : features.items()) {
      fp16 = fp16 || feature.value("shaderFloat16", false);
      buffer16 = buffer16 || feature.value("storageBuffer16BitAccess", false);
    }
    // The device's feature is the property the Target reads; the attribute says whether
    // kernels compute in float16, which needs 16-bit storage buffers too.
    EXPECT_EQ(Property(a.api(), "supports_float16"), fp16 ? 1 : 0);
    EXPECT_EQ(a.Int(BP_ATTR_SUPPORTS_FP16), fp16 && buffer16 ? 1 : 0);
    const Json& core_features = features["VkPhysicalDeviceFeatures"];
    EXPECT_EQ(Property(a.api(), "supports_int16"),
              core_features["shaderInt16"].get<bool>() ? 1 : 0);
    EXPECT_EQ(Property(a.api(), "supports_int64"),
              core_features["shaderInt64"].get<bool>() ? 1 : 0);

    // What vulkaninfo shows beyond the attributes (docs/device-attributes.md, "Properties").
    EXPECT_EQ(Property(a.api(), "max_compute_work_group_count"),
              limits["maxComputeWorkGroupCount"]);
    EXPECT_DOUBLE_EQ(Property(a.api(), "timestamp_period_ns").get<double>(),
                     limits["timestampPeriod"].get<double>());
    if (props.contains("VkPhysicalDeviceDriverProperties")) {
      const Json& c = props["VkPhysicalDeviceDriverProperties"]["conformanceVersion"];
      EXPECT_EQ(Property(a.api(), "conformance_version"),
                c["major"].dump() + "." + c["minor"].dump() + "." + c["subminor"].dump() + "." +
                    c["patch"].dump());
    } else {
      EXPECT_TRUE(Property(a.api(), "conformance_version").is_null());
    }
    const Json families = device["queueFamiliesProperties"];
    const Json family_flags = Property(a.api(), "queue_family_flags");
    const Json family_counts = Property(a.api(), "queue_family_queue_counts");
    const Json family_bits = Property(a.api(), "queue_family_timestamp_valid_bits");
    ASSERT_TRUE(families.is_array());
    ASSERT_EQ(family_flags.size(), families.size());
    ASSERT_EQ(family_counts.size(), families.size());
    ASSERT_EQ(family_bits.size(), families.size());
    for (size_t f = 0; f < families.size(); ++f) {
      const Json& q = families[f]["VkQueueFamilyProperties"];
      std::set<std::string> want;
      for (const Json& name : q["queueFlags"])
        want.insert(BitName(name.get<std::string>(), "VK_QUEUE_"));
      EXPECT_EQ(FlagSet(family_flags[f].get<std::string>()), want) << "queue family " << f;
      EXPECT_EQ(family_counts[f], q["queueCount"]) << "queue family " << f;
      EXPECT_EQ(family_bits[f], q["timestampValidBits"]) << "queue family " << f;
    }
    const VulkanMemory memory = VulkanMemoryOf(text, id);
    ASSERT_FALSE(memory.heap_sizes.empty()) << "no memory heaps in vulkaninfo's text";
    EXPECT_EQ(Property(a.api(), "memory_heap_sizes"), Json(memory.heap_sizes));
    EXPECT_EQ(Property(a.api(), "memory_type_heaps"), Json(memory.type_heaps));
    const Json heap_flags = Property(a.api(), "memory_heap_flags");
    const Json type_flags = Property(a.api(), "memory_type_flags");
    ASSERT_EQ(heap_flags.size(), memory.heap_flags.size());
    ASSERT_EQ(type_flags.size(), memory.type_flags.size());
    for (size_t h = 0; h < heap_flags.size(); ++h) {
      EXPECT_EQ(FlagSet(heap_flags[h].get<std::string>()), memory.heap_flags[h])
          << "memory heap " << h;
    }
    for (size_t t = 0; t < type_flags.size(); ++t) {
      EXPECT_EQ(FlagSet(type_flags[t].get<std::string>()), memory.type_flags[t])
          << "memory type " << t;
    }
    const int64_t subgroup = props["VkPhysicalDeviceSubgroupProperties"]["subgroupSize"];
    EXPECT_EQ(a.Int(BP_ATTR_WARP_SIZE), subgroup);
    std::vector<int64_t> sizes;
    if (props.contains("VkPhysicalDeviceSubgroupSizeControlProperties")) {
      const Json& control = props["VkPhysicalDeviceSubgroupSizeControlProperties"];
      for (int64_t s = control["minSubgroupSize"]; s <= control["maxSubgroupSize"]; s *= 2) {
        sizes.push_back(s);
      }
    } else {
      sizes.push_back(subgroup);
    }
    EXPECT_EQ(a.IntList(BP_ATTR_SUBGROUP_SIZES), sizes);
    std::vector<std::string> extensions;
    for (const auto& [name, revision] : device["extensions"].items()) extensions.push_back(name);
    std::sort(extensions.begin(), extensions.end());
    EXPECT_EQ(a.StrList(BP_ATTR_EXTENSIONS), extensions);
    EXPECT_EQ(a.Int(BP_ATTR_TOTAL_GLOBAL_MEMORY), DeviceLocalHeaps(text, id));
    if (has("VK_EXT_memory_budget")) {
      const int64_t available = a.Int(BP_ATTR_AVAILABLE_GLOBAL_MEMORY);
      EXPECT_GT(available, 0);
      EXPECT_LE(available, DeviceLocalHeaps(text, id));
    } else {
      EXPECT_TRUE(a.IsNone(BP_ATTR_AVAILABLE_GLOBAL_MEMORY)) << "no VK_EXT_memory_budget";
    }
    for (bp_device_attr_kind_t none :
         {BP_ATTR_MAX_CLOCK_RATE, BP_ATTR_MULTI_PROCESSOR_COUNT, BP_ATTR_MAX_REGISTERS_PER_BLOCK,
          BP_ATTR_GCN_ARCH, BP_ATTR_L2_CACHE_SIZE_BYTES, BP_ATTR_IMAGE_PITCH_ALIGNMENT,
          BP_ATTR_ISA_FLAGS}) {
      EXPECT_TRUE(a.IsNone(none)) << Attributes::Name(none) << " has no Vulkan query";
    }
    a.ExpectListedPropertiesAnswer();
    EXPECT_EQ(a.Unchecked(), std::vector<std::string>{}) << "attributes not compared";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
