// SPDX-License-Identifier: Apache-2.0
// `backplane info -l`, `-d TYPE:INDEX`, `--prop NAME` and `--json` run as a user runs them:
// what goes to stdout and stderr, the exit codes
// (0 success, 1 failure, 2 usage), the JSON's schema_version and lists as arrays, tables that
// fit a narrow terminal, and a supports_fp16 that agrees with what a build for the device does.
#include <backplane/c_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_PLUGIN_DIR
#error "BACKPLANE_PLUGIN_DIR must name the folder of the built plugins"
#endif

namespace {

using Json = nlohmann::json;
namespace sp = backplane::subprocess;

// Runs the tool with `args` on the build tree's plugins only, at a terminal width of 80.
sp::Result RunCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_DISABLE_PLUGINS"};
  options.set_env = {{"COLUMNS", "80"}};
  options.timeout_s = 120;
  return sp::Run(argv, options);
}

Json RunJson(const std::vector<std::string>& args) {
  sp::Result r = RunCli(args);
  EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.err, "");
  Json doc = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(doc.is_object()) << "stdout is not a JSON object:\n" << r.out;
  return doc.is_object() ? doc : Json::object();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Terminal columns of a line: one per UTF-8 code point.
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (unsigned char c : line) n += (c & 0xC0) != 0x80;
  return n;
}

void ExpectFits80(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    EXPECT_LE(Columns(line), 80u) << "a line passes 80 columns:\n" << line;
    start = end + 1;
  }
}

bool PluginBuilt(const std::string& name) {
  return std::filesystem::exists(std::string(BACKPLANE_PLUGIN_DIR) + "/libbackplane_" + name +
                                 ".so");
}

TEST(InfoCli, ListPrintsOneLinePerDeviceThatFits80Columns) {
  sp::Result r = RunCli({"info", "-l"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(Contains(r.out, "DEVICE")) << r.out;
  bool cpu = false;
  size_t start = 0;
  while (start < r.out.size()) {
    const size_t end = r.out.find('\n', start);
    const std::string line = r.out.substr(start, end - start);
    cpu = cpu || line.rfind("cpu:0 ", 0) == 0;
    start = end == std::string::npos ? r.out.size() : end + 1;
  }
  EXPECT_TRUE(cpu) << "no line for cpu:0:\n" << r.out;
  ExpectFits80(r.out);
}

// The whole report at 80 columns: every line fits, except a line holding one word alone (a
// path longer than the line, which is never cut so that it can be copied whole). A library
// path too long for the plugin table's last column moves to a line of its own under its row.
TEST(InfoCli, TheFullReportFits80ColumnsWithLongPathsOnLinesOfTheirOwn) {
  sp::Result r = RunCli({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  const std::string cpu_library = std::string(BACKPLANE_PLUGIN_DIR) + "/libbackplane_cpu.so";
  bool library_alone = false;
  size_t start = 0;
  while (start < r.out.size()) {
    size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    const std::string line = r.out.substr(start, end - start);
    const size_t first = line.find_first_not_of(' ');
    const bool one_word = first != std::string::npos && line.find(' ', first) == std::string::npos;
    if (!one_word) {
      EXPECT_LE(Columns(line), 80u) << "a line passes 80 columns:\n" << line;
    }
    library_alone = library_alone || (one_word && line.substr(first) == cpu_library);
    start = end + 1;
  }
  if (cpu_library.size() > 40) {
    EXPECT_TRUE(library_alone) << "the cpu plugin's library is not on a line of its own:\n"
                               << r.out;
  }
}

TEST(InfoCli, ListJsonHasTheSameDevicesAsTheFullReport) {
  const Json list = RunJson({"info", "-l", "--json"});
  EXPECT_EQ(list["schema_version"], 1);
  ASSERT_TRUE(list["devices"].is_array());
  const Json full = RunJson({"info", "--json"});
  EXPECT_EQ(full["schema_version"], 1);
  ASSERT_EQ(list["devices"].size(), full["devices"].size());
  for (size_t i = 0; i < list["devices"].size(); ++i) {
    const Json& l = list["devices"][i];
    const Json& f = full["devices"][i];
    EXPECT_EQ(l["device"], f["device"]);
    EXPECT_EQ(l["type"], f["type"]);
    EXPECT_EQ(l["index"], f["id"]);
    EXPECT_EQ(l["name"], f["attributes"]["device_name"]);
    EXPECT_EQ(l["kind"], f["attributes"]["device_kind"]);
  }
  EXPECT_EQ(list["devices"][0]["device"], "cpu:0");
  EXPECT_EQ(list["devices"][0]["kind"], "cpu");
}

TEST(InfoCli, DeviceShowsOneDeviceWithAttributesAndProperties) {
  sp::Result r = RunCli({"info", "-d", "cpu:0"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* part : {"cpu:0", "device_kind", "isa_flags", "max_allocation_size", "PROPERTY",
                           "l3_cache_size_bytes"}) {
    EXPECT_TRUE(Contains(r.out, part)) << part << " missing:\n" << r.out;
  }
  EXPECT_FALSE(Contains(r.out, "opencl:0")) << "-d shows one device only";
  ExpectFits80(r.out);

  const Json doc = RunJson({"info", "-d", "cpu:0", "--json"});
  EXPECT_EQ(doc["schema_version"], 1);
  const Json& device = doc["device"];
  EXPECT_EQ(device["device"], "cpu:0");
  EXPECT_EQ(device["attributes"]["device_kind"], "cpu");
  EXPECT_TRUE(device["attributes"]["isa_flags"].is_array());
  EXPECT_TRUE(device["properties"].is_object());
  EXPECT_TRUE(device["properties"].contains("page_size"));
  EXPECT_EQ(device["attributes"].size(), static_cast<size_t>(BP_ATTR_COUNT));
}

TEST(InfoCli, OtherBackendsDevicesFit80Columns) {
  for (const char* type : {"opencl", "vulkan"}) {
    if (!PluginBuilt(type)) continue;
    const Json list = RunJson({"info", "-l", "--json"});
    for (const Json& d : list["devices"]) {
      if (d["type"] != type) continue;
      sp::Result r = RunCli({"info", "-d", d["device"].get<std::string>()});
      EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
      EXPECT_TRUE(Contains(r.out, "extensions")) << r.out;
      ExpectFits80(r.out);
    }
  }
}

TEST(InfoCli, JsonListsAreArraysNeverJsonInStrings) {
  const Json full = RunJson({"info", "--json"});
  EXPECT_EQ(full["schema_version"], 1);
  ASSERT_FALSE(full["devices"].empty());
  for (const Json& d : full["devices"]) {
    SCOPED_TRACE(d["device"].dump());
    const Json& attrs = d["attributes"];
    for (const char* list :
         {"max_thread_dimensions", "subgroup_sizes", "extensions", "isa_flags"}) {
      EXPECT_TRUE(attrs[list].is_null() || attrs[list].is_array()) << list << ": " << attrs[list];
    }
    if (attrs["max_thread_dimensions"].is_array()) {
      for (const Json& n : attrs["max_thread_dimensions"]) EXPECT_TRUE(n.is_number_integer());
    }
    EXPECT_TRUE(d["properties"].is_object());
    EXPECT_TRUE(d["errors"].empty()) << d["errors"].dump();
  }
}

TEST(InfoCli, UnknownDeviceTypeIsAUsageErrorNamingTheKnownOnes) {
  sp::Result r = RunCli({"info", "-d", "nosuch:0"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "device type 'nosuch' is not known")) << r.err;
  EXPECT_TRUE(Contains(r.err, "known types: cpu")) << r.err;
  EXPECT_TRUE(Contains(r.err, "backplane info -l")) << r.err;
}

TEST(InfoCli, DeviceIndexPastTheEndIsAUsageErrorNamingTheDevicesThatExist) {
  sp::Result r = RunCli({"info", "-d", "cpu:99"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "device cpu:99 does not exist; cpu has 1 device(s) here (cpu:0)"))
      << r.err;
  if (PluginBuilt("opencl")) {
    r = RunCli({"info", "-d", "opencl:99"});
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(Contains(r.err, "device opencl:99 does not exist; opencl has")) << r.err;
  }
}

TEST(InfoCli, DeviceOfATypeNoPluginProvidesIsAUsageError) {
  // metal is one of DLPack's names, so the type is known, but no plugin here provides it.
  sp::Result r = RunCli({"info", "-d", "metal:0"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "the DeviceAPI of 'metal' is unavailable")) << r.err;
  EXPECT_TRUE(Contains(r.err, "BACKPLANE_PLUGIN_PATH")) << r.err;
}

TEST(InfoCli, MalformedDeviceAndConflictingOptionsAreUsageErrors) {
  for (const char* bad : {"cpu:x", "cpu:", ":0", "cpu:-1"}) {
    sp::Result r = RunCli({"info", "-d", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.Describe();
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(Contains(r.err, "expected TYPE:INDEX")) << bad << ": " << r.err;
  }
  sp::Result r = RunCli({"info", "-l", "-d", "cpu:0"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "excludes")) << r.err;
}

// --prop NAME: one attribute on every device, one line a device (as clinfo --prop), and the same
// values as the full report; --json has them as a list of {"device", "value"}.
TEST(InfoCli, PropShowsOneAttributeOnEveryDeviceOneLineEach) {
  const Json full = RunJson({"info", "--json"});
  sp::Result r = RunCli({"info", "--prop", "device_kind"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_EQ(r.err, "");
  ExpectFits80(r.out);
  for (const Json& d : full["devices"]) {
    bool found = false;
    size_t start = 0;
    while (start < r.out.size()) {
      const size_t end = r.out.find('\n', start);
      const std::string l = r.out.substr(start, end - start);
      if (l.rfind(d["device"].get<std::string>() + " ", 0) == 0) {
        found = true;
        EXPECT_TRUE(Contains(l, d["attributes"]["device_kind"].get<std::string>())) << l;
      }
      start = end == std::string::npos ? r.out.size() : end + 1;
    }
    EXPECT_TRUE(found) << "no line for " << d["device"] << ":\n" << r.out;
  }

  const Json doc = RunJson({"info", "--prop", "supports_fp16", "--json"});
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["name"], "supports_fp16");
  EXPECT_EQ(doc["kind"], "attribute");
  ASSERT_EQ(doc["devices"].size(), full["devices"].size());
  for (size_t i = 0; i < doc["devices"].size(); ++i) {
    EXPECT_EQ(doc["devices"][i]["device"], full["devices"][i]["device"]);
    EXPECT_EQ(doc["devices"][i]["value"], full["devices"][i]["attributes"]["supports_fp16"]);
  }
}

// A property: its value on the devices that list it, none on the others; -d narrows it to one
// device. The values clinfo and vulkaninfo show are there (attribute_truth_test compares them).
TEST(InfoCli, PropShowsOnePropertyAndNoneOnDevicesWithoutIt) {
  const Json full = RunJson({"info", "--json"});
  std::vector<std::string> names = {"page_size"};
  if (PluginBuilt("opencl")) {
    for (const char* n : {"address_bits", "profiling_timer_resolution_ns", "svm_capabilities"})
      names.push_back(n);
  }
  if (PluginBuilt("vulkan")) {
    for (const char* n :
         {"memory_heap_sizes", "memory_heap_flags", "memory_type_heaps", "memory_type_flags",
          "queue_family_flags", "queue_family_queue_counts", "queue_family_timestamp_valid_bits",
          "max_compute_work_group_count", "timestamp_period_ns", "conformance_version",
          "supports_int16", "supports_int64"})
      names.push_back(n);
  }
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    // A property no device here lists (svm_capabilities before OpenCL 2.0, conformance_version
    // before Vulkan 1.2) is a usage error, as any unknown name is.
    bool listed = false;
    for (const Json& d : full["devices"]) listed = listed || d["properties"].contains(name);
    if (!listed) {
      EXPECT_EQ(RunCli({"info", "--prop", name}).exit_code, 2);
      continue;
    }
    const Json doc = RunJson({"info", "--prop", name, "--json"});
    EXPECT_EQ(doc["kind"], "property");
    ASSERT_EQ(doc["devices"].size(), full["devices"].size());
    bool some = false;
    for (size_t i = 0; i < doc["devices"].size(); ++i) {
      const Json& properties = full["devices"][i]["properties"];
      const Json want = properties.contains(name) ? properties[name] : Json(nullptr);
      EXPECT_EQ(doc["devices"][i]["value"], want) << full["devices"][i]["device"];
      const std::string type = full["devices"][i]["type"];
      if ((name == "page_size" && type == "cpu") ||
          (name.find("memory_") == 0 && type == "vulkan")) {
        EXPECT_FALSE(want.is_null()) << type << " lists no " << name;
      }
      if (name == "address_bits" && type == "opencl") {
        EXPECT_TRUE(want == 32 || want == 64) << want;
      }
      some = some || !want.is_null();
    }
    EXPECT_TRUE(some) << "no device here has " << name;
    if (name.find("memory_heap") == 0 || name.find("queue_family") == 0) {
      for (const Json& d : doc["devices"]) {
        if (!d["value"].is_null()) {
          EXPECT_TRUE(d["value"].is_array()) << d;
        }
      }
    }
  }
  const Json one = RunJson({"info", "--prop", "page_size", "-d", "cpu:0", "--json"});
  ASSERT_EQ(one["devices"].size(), 1u);
  EXPECT_EQ(one["devices"][0]["device"], "cpu:0");
  EXPECT_EQ(one["devices"][0]["value"], full["devices"][0]["properties"]["page_size"]);
}

TEST(InfoCli, UnknownPropIsAUsageErrorListingCloseNames) {
  sp::Result r = RunCli({"info", "--prop", "supports_fp61"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "--prop supports_fp61: no device here has an attribute or property"))
      << r.err;
  EXPECT_TRUE(Contains(r.err, "supports_fp16")) << r.err;
  EXPECT_TRUE(Contains(r.err, "supports_fp64")) << r.err;
  EXPECT_TRUE(Contains(r.err, "backplane info -d")) << r.err;
  r = RunCli({"info", "--prop", "page_sise"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "close names: page_size")) << r.err;
  r = RunCli({"info", "--prop", "device_name", "-l"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "excludes")) << r.err;
}

// supports_fp16 never claims what the code generator refuses: a float16
// kernel builds for the Target of every opencl device (with cl_khr_fp16 as OpenCL's half, which
// Target::FromDevice reads from the attribute; without it in float rounded to half, as
// opencl_codegen_test runs it) and of every vulkan device whose attribute is 1 (a launch on one
// without shaderFloat16 and 16-bit storage is refused).
TEST(InfoCli, Fp16AttributeAgreesWithWhatABuildForTheDeviceDoes) {
  char dir_template[] = "/tmp/bp_info_fp16_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string kernel = dir + "/half.bpir";
  std::ofstream(kernel) << "# backplane-ir 1\n"
                           "func double_half(n: int32, a: buffer<float16>[n], "
                           "b: buffer<float16>[n]) {\n"
                           "  for t in thread(threadIdx.x, 0, 64) {\n"
                           "    if (t < n) {\n"
                           "      b[t] = a[t] + a[t]\n"
                           "    }\n"
                           "  }\n"
                           "}\n";
  const Json doc = RunJson({"info", "--prop", "supports_fp16", "--json"});
  int checked = 0;
  for (const Json& d : doc["devices"]) {
    const std::string device = d["device"];
    const std::string type = device.substr(0, device.find(':'));
    if (type != "opencl" && type != "vulkan") continue;
    SCOPED_TRACE(device);
    ASSERT_TRUE(d["value"].is_number_integer()) << d;
    const bool fp16 = d["value"] == 1;
    const std::string target = type == "vulkan"
                                   ? "vulkan"
                                   : std::string(R"({"kind": "opencl", "supports_float16": )") +
                                         (fp16 ? "true" : "false") + "}";
    if (type == "vulkan" && !fp16) continue;
    sp::Result r = RunCli({"build", kernel, "-t", target, "-o", dir + "/half.bpmod"});
    EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
    EXPECT_TRUE(Contains(r.out, "double_half")) << r.out;
    ++checked;
  }
  std::filesystem::remove_all(dir);
  if (checked == 0) GTEST_SKIP() << "no opencl or vulkan device here";
}

}  // namespace
