// SPDX-License-Identifier: Apache-2.0
// Who owns a name: the plugin whose manifest declares it. A plugin registers only the names
// its manifest declares (functions, target kinds and tags, new device types), overrides or
// removes only names it registered itself, and bp_plugins_list (so `backplane info`) shows
// the names each plugin really owns. When two plugins claim the same plugin name, library or
// declared name, the first on the search path wins and the other is shadowed by it.
#include <algorithm>
#include <filesystem>
#include <string>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;
using bptest::Status;

Status LoadTestPlugin(const std::string& path) { return Capture(bp_plugin_load(path.c_str())); }

bool Registered(const std::string& name) {
  return static_cast<bool>(backplane::Registry::TryGet(name));
}

nlohmann::json Record(const std::string& name) {
  const auto records = bptest::PluginRecords(name);
  EXPECT_EQ(records.size(), 1u) << bptest::PluginList().dump(2);
  return records.empty() ? nlohmann::json() : records[0];
}

// A string result, as the host's own functions here return.
backplane::Any HostString() {
  bp_value_t v{};
  v.type = BP_VALUE_OBJECT;
  v.u.v_obj = backplane::MakeString("host").release();
  return backplane::Any(v);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Ownership, AFunctionTheManifestDoesNotDeclareIsRefusedAndRolledBack) {
  const Status s = LoadTestPlugin(bptest::TestPluginLibrary("broken_undeclared_function"));
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_TRUE(Contains(s.message, "testing.never_declared")) << s;
  EXPECT_TRUE(Contains(s.message, "does not declare")) << s;
  EXPECT_TRUE(Contains(s.message, "BP-PLUGIN-2")) << s;
  EXPECT_FALSE(Registered("testing.never_declared")) << "the undeclared name was registered";
  EXPECT_FALSE(Registered("testing.undeclared_probe")) << "the declared one was not rolled back";
  EXPECT_EQ(Record("broken_undeclared_function")["state"], "skipped");
}

TEST(Ownership, ATargetKindTheManifestDoesNotDeclareIsRefused) {
  const Status s = LoadTestPlugin(bptest::TestPluginLibrary("broken_undeclared_kind"));
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_TRUE(Contains(s.message, "target.kind.undeclaredkind")) << s;
  const Status parse = bptest::CaptureError([] { backplane::Target::Parse("undeclaredkind"); });
  EXPECT_EQ(parse.kind, BP_ERR_NOT_FOUND) << "the undeclared kind stayed registered: " << parse;
}

TEST(Ownership, ANewDeviceTypeTheManifestDoesNotDeclareIsRefused) {
  const Status s = LoadTestPlugin(bptest::TestPluginLibrary("broken_undeclared_type"));
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_TRUE(Contains(s.message, "undeclared_type")) << s;
  EXPECT_TRUE(Contains(s.message, "device_types")) << s;
  int32_t id = 0;
  EXPECT_EQ(Capture(bp_device_type_from_name("undeclared_type", &id)).kind, BP_ERR_NOT_FOUND);
}

TEST(Ownership, AllowOverrideCannotTakeANameAnotherPluginRegistered) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world");
  // Declares testing.hello too, and registers it with allow_override.
  const Status s =
      LoadTestPlugin(bptest::TestPluginDir() + "/override/libbackplane_override_names.so");
  EXPECT_NE(s.kind, BP_OK) << "another plugin took over testing.hello";
  EXPECT_TRUE(Contains(s.message, "'hello'")) << "the owner is not named: " << s;
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world")
      << "testing.hello runs another plugin's code";
  EXPECT_FALSE(Registered("testing.override_probe"));
  EXPECT_EQ(Record("hello")["registered"], nlohmann::json::array({"testing.hello"}));
}

TEST(Ownership, AllowOverrideCannotTakeANameTheHostRegistered) {
  backplane::Registry::Set(
      "testing.override_probe",
      backplane::Function::FromCallable([](backplane::PackedArgs) { return HostString(); }));
  const Status s =
      LoadTestPlugin(bptest::TestPluginDir() + "/override/libbackplane_override_names.so");
  EXPECT_EQ(s.kind, BP_ERR_ALREADY_EXISTS) << s;
  EXPECT_TRUE(Contains(s.message, "registered by the host")) << s;
  EXPECT_TRUE(Contains(s.message, "may override only a name it registered itself")) << s;
  EXPECT_EQ(backplane::Registry::Get("testing.override_probe")().AsString(), "host");
}

TEST(Ownership, APluginCannotRemoveAnotherPluginsName) {
  const bp_device_api_t* cpu = backplane::DeviceAPI::Get(backplane::Device()).table();
  ASSERT_NE(cpu, nullptr);
  const Status s = LoadTestPlugin(bptest::TestPluginLibrary("broken_remove_other"));
  EXPECT_EQ(s.kind, BP_ERR_ALREADY_EXISTS) << s;
  EXPECT_TRUE(Contains(s.message, "plugin 'cpu'")) << s;
  EXPECT_TRUE(Registered("device_api.cpu")) << "a plugin removed the cpu plugin's DeviceAPI";
}

TEST(Ownership, TheListShowsTheNamesEachPluginReallyOwns) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world");
  backplane::Target::Parse("c");  // loads the cpu plugin
  EXPECT_EQ(Record("hello")["registered"], nlohmann::json::array({"testing.hello"}));
  const auto cpu = Record("cpu")["registered"];
  for (const char* name : {"device_api.cpu", "target.kind.c", "target.build.c"}) {
    EXPECT_NE(std::find(cpu.begin(), cpu.end(), name), cpu.end()) << name << " in " << cpu;
  }
  // The host replaces testing.hello: it is no longer hello's.
  backplane::Registry::Set(
      "testing.hello",
      backplane::Function::FromCallable([](backplane::PackedArgs) { return HostString(); }),
      /*allow_override=*/true);
  EXPECT_EQ(Record("hello")["registered"], nlohmann::json::array());
  // Discovered plugins not loaded yet own nothing.
  EXPECT_EQ(Record("simaccel_testing")["registered"], nlohmann::json::array());
}

std::string CanonicalPath(const std::string& path) {
  return std::filesystem::canonical(path).string();
}

TEST(Shadowing, APluginOfTheSameNameLaterOnThePathIsShadowedByTheFirst) {
  bptest::ScratchDir first;
  bptest::CopyTestPlugin("hello", first.path());
  ASSERT_TRUE(Capture(bp_plugin_path_add(first.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const std::string winner = CanonicalPath(first.path() + "/libbackplane_hello.so");
  const auto records = bptest::PluginRecords("hello");
  ASSERT_EQ(records.size(), 2u) << bptest::PluginList().dump(2);
  EXPECT_EQ(records[0]["library"], winner);
  EXPECT_EQ(records[0]["state"], "loaded");
  EXPECT_TRUE(records[0]["shadowed_by"].is_null());
  EXPECT_EQ(records[1]["state"], "skipped");
  EXPECT_EQ(records[1]["shadowed_by"], winner) << records[1].dump(2);
  const std::string reason = records[1]["reason"];
  EXPECT_TRUE(Contains(reason, "shadowed by " + winner)) << reason;
  EXPECT_TRUE(Contains(reason, "has the same name")) << reason;
  // Asked for by path, the loser is refused with the same reason.
  const Status s = LoadTestPlugin(bptest::TestPluginLibrary("hello"));
  EXPECT_NE(s.kind, BP_OK);
  EXPECT_TRUE(Contains(s.message, "shadowed by " + winner)) << s;
}

TEST(Shadowing, APluginDeclaringANameAnEarlierOneDeclaresIsShadowedWhole) {
  // override_names declares testing.hello, as hello does, and its folder comes first.
  const std::string stray = bptest::TestPluginDir() + "/override";
  ASSERT_TRUE(Capture(bp_plugin_path_add(stray.c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const std::string winner = CanonicalPath(stray + "/libbackplane_override_names.so");
  const auto hello = Record("hello");
  EXPECT_EQ(hello["state"], "skipped");
  EXPECT_EQ(hello["shadowed_by"], winner) << hello.dump(2);
  EXPECT_TRUE(Contains(hello["reason"], "also declares 'testing.hello'")) << hello.dump(2);
  EXPECT_EQ(Record("override_names")["state"], "loaded");
  // The policy is path order: the first plugin on the path owns the name.
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello from override_names");
  EXPECT_EQ(Record("override_names")["registered"],
            nlohmann::json::array({"testing.override_probe", "testing.hello"}));
}

}  // namespace
