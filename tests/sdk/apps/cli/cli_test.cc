// SPDX-License-Identifier: Apache-2.0
// Tests of the `backplane` command-line tool, run as a subprocess the way a user runs it.
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder of the test plugins"
#endif

namespace {

using Json = nlohmann::json;
namespace sp = backplane::subprocess;

constexpr const char* kNone = "\xE2\x80\x94";  // U+2014, how the tables show "none"

// Runs the tool with `args`, independent of the caller's BACKPLANE_PLUGIN_PATH.
sp::Result RunCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  return sp::Run(argv, options);
}

// Runs the tool and parses its stdout as JSON; fails the test if either goes wrong.
Json RunJson(const std::vector<std::string>& args) {
  sp::Result result = RunCli(args);
  EXPECT_EQ(result.exit_code, 0) << result.Describe() << "\nstderr:\n" << result.err;
  Json doc = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << "stdout is not JSON:\n" << result.out;
  return doc;
}

const Json* FindByField(const Json& array, const char* field, const std::string& value) {
  for (const Json& item : array) {
    if (item.is_object() && item.value(field, "") == value) return &item;
  }
  return nullptr;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The plugins in the report whose names start with "broken": the test plugins that fail on
// purpose, one per loader failure.
std::vector<const Json*> BrokenPlugins(const Json& report) {
  std::vector<const Json*> out;
  for (const Json& p : report["plugins"]) {
    if (p["name"].is_string() && StartsWith(p["name"].get<std::string>(), "broken")) {
      out.push_back(&p);
    }
  }
  return out;
}

// The checks that hold whatever else is on the plugin path: the cpu plugin is loaded and
// cpu:0 reports itself with a name.
void ExpectCpuWorks(const Json& report) {
  const Json* cpu = FindByField(report["plugins"], "name", "cpu");
  ASSERT_NE(cpu, nullptr) << "no plugin named cpu in:\n" << report["plugins"].dump(2);
  EXPECT_EQ((*cpu)["state"], "loaded") << cpu->dump(2);

  const Json* cpu_type = FindByField(report["device_types"], "name", "cpu");
  ASSERT_NE(cpu_type, nullptr);
  EXPECT_EQ((*cpu_type)["device_api"], true);
  EXPECT_EQ((*cpu_type)["plugin"], "cpu");
  EXPECT_GE((*cpu_type)["device_count"].get<int>(), 1);

  const Json* cpu0 = FindByField(report["devices"], "device", "cpu:0");
  ASSERT_NE(cpu0, nullptr) << "no cpu:0 in:\n" << report["devices"].dump(2);
  const Json& attrs = (*cpu0)["attributes"];
  EXPECT_EQ(attrs.size(), static_cast<size_t>(BP_ATTR_COUNT))
      << "every attribute kind is listed, none as null";
  EXPECT_EQ(attrs["exist"], 1);
  ASSERT_TRUE(attrs["device_name"].is_string()) << attrs.dump(2);
  EXPECT_FALSE(attrs["device_name"].get<std::string>().empty());
  // Warps do not apply to a CPU: the contract says none, which JSON shows as null.
  EXPECT_TRUE(attrs["warp_size"].is_null()) << attrs["warp_size"];
  EXPECT_TRUE((*cpu0)["errors"].empty()) << (*cpu0)["errors"].dump(2);

  bool has_device_api = false;
  for (const Json& f : report["functions"]) has_device_api |= f["name"] == "device_api.cpu";
  EXPECT_TRUE(has_device_api) << report["functions"].dump(2);
}

TEST(CliInfo, JsonListsCpuPluginAndDevice) {
  Json report = RunJson({"info", "--json"});
  ASSERT_TRUE(report.is_object());
  for (const char* key :
       {"backplane", "search_path", "plugins", "device_types", "devices", "functions"}) {
    EXPECT_TRUE(report.contains(key)) << "missing key " << key;
  }
  EXPECT_FALSE(report["search_path"].empty());
  EXPECT_EQ(report["backplane"]["abi_version"],
            std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR));
  ExpectCpuWorks(report);
}

TEST(CliInfo, BrokenPluginsAreSkippedWithReasonsAndCpuStillWorks) {
  Json report = RunJson({"info", "--json", "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR});
  ASSERT_TRUE(report.is_object());
  ASSERT_FALSE(report["search_path"].empty());
  const Json& first = report["search_path"][0];
  EXPECT_EQ(first.is_object() ? first["path"] : first, BACKPLANE_TEST_PLUGIN_DIR)
      << "folders passed with --plugin-path are searched first: " << first.dump();

  std::vector<const Json*> broken = BrokenPlugins(report);
  EXPECT_FALSE(broken.empty()) << "no plugin named broken* found in " BACKPLANE_TEST_PLUGIN_DIR;
  for (const Json* p : broken) {
    EXPECT_EQ((*p)["state"], "skipped") << p->dump(2);
    ASSERT_TRUE((*p)["reason"].is_string()) << p->dump(2);
    EXPECT_FALSE((*p)["reason"].get<std::string>().empty()) << p->dump(2);
  }
  for (const Json& p : report["plugins"]) {
    if (p["state"] == "skipped") {
      EXPECT_TRUE(p["reason"].is_string() && !p["reason"].get<std::string>().empty())
          << "a skipped plugin needs a reason: " << p.dump(2);
    }
  }
  ExpectCpuWorks(report);
}

// Two plugins that claim a name: the first on the search path wins, and info shows the other
// as shadowed by the winner's path (override_names declares testing.hello, as hello does).
TEST(CliInfo, AShadowedPluginIsShownWithTheWinnersPath) {
  const std::string stray = std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/override";
  const std::string winner = stray + "/libbackplane_override_names.so";
  Json report = RunJson(
      {"info", "--json", "--plugin-path", stray, "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR});
  const Json* hello = FindByField(report["plugins"], "name", "hello");
  ASSERT_NE(hello, nullptr) << report["plugins"].dump(2);
  EXPECT_EQ((*hello)["shadowed_by"], winner) << hello->dump(2);
  const Json* fn = FindByField(report["functions"], "name", "testing.hello");
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ((*fn)["plugin"], "override_names") << "info must credit the plugin whose code runs";

  // Wide, so that the note is not wrapped.
  sp::Options wide;
  wide.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  wide.set_env = {{"COLUMNS", "1000"}};
  sp::Result table = sp::Run({BACKPLANE_CLI_PATH, "info", "--plugin-path", stray, "--plugin-path",
                              BACKPLANE_TEST_PLUGIN_DIR},
                             wide);
  ASSERT_EQ(table.exit_code, 0) << table.Describe() << table.err;
  EXPECT_NE(table.out.find("shadowed by " + winner), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" shadowed"), std::string::npos) << table.out;
}

TEST(CliInfo, TablesShowHeadingsReasonsAndNone) {
  sp::Result result = RunCli({"info", "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR});
  ASSERT_EQ(result.exit_code, 0) << result.Describe() << "\nstderr:\n" << result.err;
  const std::string& out = result.out;
  for (const char* heading : {"Plugin search path", "Plugins:", "Device types:", "Devices:",
                              "Global functions:", "NAME", "STATE", "ABI", "ATTRIBUTE", "VALUE"}) {
    EXPECT_NE(out.find(heading), std::string::npos) << "no '" << heading << "' in:\n" << out;
  }
  EXPECT_NE(out.find(BACKPLANE_TEST_PLUGIN_DIR), std::string::npos) << out;
  EXPECT_NE(out.find("cpu:0"), std::string::npos) << out;
  EXPECT_NE(out.find("device_name"), std::string::npos) << out;
  EXPECT_NE(out.find("warp_size"), std::string::npos) << out;
  EXPECT_NE(out.find(kNone), std::string::npos) << "none attributes show as an em dash:\n" << out;
  EXPECT_NE(out.find("reason: "), std::string::npos) << out;

  // Each broken plugin is named in the table, with its reason under it.
  Json report = RunJson({"info", "--json", "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR});
  for (const Json* p : BrokenPlugins(report)) {
    EXPECT_NE(out.find((*p)["name"].get<std::string>()), std::string::npos) << out;
  }
}

TEST(CliInfo, RowsOfATableAreAligned) {
  sp::Result result = RunCli({"info"});
  ASSERT_EQ(result.exit_code, 0) << result.Describe() << "\nstderr:\n" << result.err;
  // In the attribute table of cpu:0 every value starts in the same column as "VALUE".
  const std::string& out = result.out;
  size_t table = out.find("ATTRIBUTE");
  ASSERT_NE(table, std::string::npos) << out;
  size_t line_start = out.rfind('\n', table) + 1;
  size_t value_column = out.find("VALUE", table) - line_start;
  size_t exist = out.find("exist ", table);
  ASSERT_NE(exist, std::string::npos) << out;
  size_t exist_line = out.rfind('\n', exist) + 1;
  size_t first_value = out.find_first_not_of(' ', exist + 5);
  EXPECT_EQ(first_value - exist_line, value_column) << out;
}

TEST(CliVersion, PrintsBackplaneAndAbiVersions) {
  sp::Result result = RunCli({"--version"});
  EXPECT_EQ(result.exit_code, 0) << result.Describe() << result.err;
  EXPECT_NE(result.out.find("Backplane "), std::string::npos) << result.out;
  const std::string abi =
      "ABI " + std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR);
  EXPECT_NE(result.out.find(abi), std::string::npos) << result.out;
}

TEST(CliUsage, MissingCommandIsAUsageError) {
  sp::Result result = RunCli({});
  EXPECT_EQ(result.exit_code, 2) << result.Describe();
  EXPECT_NE(result.err.find("no command given"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("info"), std::string::npos) << "names the commands: " << result.err;
  EXPECT_NE(result.err.find("--help"), std::string::npos) << result.err;
}

TEST(CliUsage, UnknownCommandIsAUsageError) {
  sp::Result result = RunCli({"frobnicate"});
  EXPECT_EQ(result.exit_code, 2) << result.Describe();
  EXPECT_NE(result.err.find("frobnicate"), std::string::npos) << result.err;
}

TEST(CliUsage, UnknownOptionIsNamed) {
  sp::Result result = RunCli({"info", "--bogus"});
  EXPECT_EQ(result.exit_code, 2) << result.Describe();
  EXPECT_NE(result.err.find("--bogus"), std::string::npos) << result.err;
}

TEST(CliUsage, MissingPluginFolderIsNamed) {
  const std::string folder = "/nonexistent/backplane-plugins";
  sp::Result result = RunCli({"info", "--plugin-path", folder});
  EXPECT_EQ(result.exit_code, 2) << result.Describe();
  EXPECT_NE(result.err.find(folder), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("does not exist"), std::string::npos) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

TEST(CliUsage, PluginPathNeedsAFolder) {
  sp::Result result = RunCli({"info", "--plugin-path"});
  EXPECT_EQ(result.exit_code, 2) << result.Describe();
  EXPECT_NE(result.err.find("--plugin-path"), std::string::npos) << result.err;
}

TEST(CliUsage, HelpListsInfo) {
  sp::Result result = RunCli({"--help"});
  EXPECT_EQ(result.exit_code, 0) << result.Describe();
  EXPECT_NE(result.out.find("info"), std::string::npos) << result.out;
}

}  // namespace
