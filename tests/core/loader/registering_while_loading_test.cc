// SPDX-License-Identifier: Apache-2.0
// Registrations made while a plugin loads belong to that plugin. A static
// constructor runs inside dlopen, before bp_plugin_init: what it registers is the plugin's,
// checked against its manifest and rolled back with it, never credited to the host. A
// registration refused during the load fails the whole load even when the plugin ignores the
// status: its names are removed, its library is unloaded, and the reason is recorded.
// The plugins (tests/plugins/testing/loading/) reach the core by dlsym, as a careless plugin
// would, and are written in C so that dlclose really unmaps them.
#include <dlfcn.h>

#include <string>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;
using bptest::Status;

std::string LoadingLibrary(const std::string& name) {
  return bptest::TestPluginDir() + "/loading/libbackplane_" + name + ".so";
}

bool Registered(const std::string& name) {
  return static_cast<bool>(backplane::Registry::TryGet(name));
}

nlohmann::json Record(const std::string& name) {
  const auto records = bptest::PluginRecords(name);
  EXPECT_EQ(records.size(), 1u) << bptest::PluginList().dump(2);
  return records.empty() ? nlohmann::json() : records[0];
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A record's reason (null for a plugin that loaded without warnings) as text.
std::string Reason(const nlohmann::json& rec) {
  return rec.contains("reason") && rec["reason"].is_string() ? rec["reason"].get<std::string>()
                                                             : "";
}

// Whether the library is mapped in this process (RTLD_NOLOAD loads nothing).
bool Mapped(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(RegisteringWhileLoading, AStaticConstructorCannotTakeTheCpuPluginsName) {
  const std::string lib = LoadingLibrary("ctor_claims_cpu");
  const Status s = Capture(bp_plugin_load(lib.c_str()));
  EXPECT_EQ(s.kind, BP_ERR_ALREADY_EXISTS) << s;
  EXPECT_TRUE(Contains(s.message, "static constructor")) << s;
  EXPECT_TRUE(Contains(s.message, "declared by plugin 'cpu'")) << s;
  // Its own name, registered first by the constructor, went with it.
  EXPECT_FALSE(Registered("testing.ctor_claims_cpu_probe")) << "the load was not rolled back";
  EXPECT_FALSE(Mapped(lib)) << "the library stayed loaded after its load failed";
  const nlohmann::json rec = Record("ctor_claims_cpu");
  EXPECT_EQ(rec["state"], "skipped") << rec.dump(2);
  EXPECT_TRUE(Contains(Reason(rec), "static constructor")) << rec.dump(2);

  // The real cpu plugin loads and owns its DeviceAPI.
  bp_object_t* f = nullptr;
  const Status get = Capture(bp_registry_get("device_api.cpu", &f));
  ASSERT_TRUE(get.ok()) << get << "\n" << bptest::PluginList().dump(2);
  bp_object_release(f);
  const nlohmann::json cpu = Record("cpu");
  EXPECT_EQ(cpu["state"], "loaded") << cpu.dump(2);
  const auto& names = cpu["registered"];
  EXPECT_NE(std::find(names.begin(), names.end(), "device_api.cpu"), names.end()) << cpu.dump(2);
  DLDevice dev{kDLCPU, 0};
  void* data = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_data_space(dev, 64, 64, {kDLFloat, 32, 1}, &data)).ok());
  EXPECT_TRUE(Capture(bp_device_free_data_space(dev, data)).ok());
}

TEST(RegisteringWhileLoading, AStaticConstructorsRegistrationIsThePlugins) {
  const Status s = Capture(bp_plugin_load(LoadingLibrary("ctor_declared").c_str()));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Registered("testing.ctor_declared_probe"));
  const nlohmann::json rec = Record("ctor_declared");
  EXPECT_EQ(rec["state"], "loaded") << rec.dump(2);
  EXPECT_EQ(rec["registered"], nlohmann::json::array({"testing.ctor_declared_probe"}))
      << "the name was credited to the host: " << rec.dump(2);
}

TEST(RegisteringWhileLoading, ARefusedRegistrationRollsBackAnInitThatReturnedOk) {
  const std::string lib = LoadingLibrary("init_ignores_refusal");
  const Status s = Capture(bp_plugin_load(lib.c_str()));
  EXPECT_EQ(s.kind, BP_ERR_ALREADY_EXISTS) << s;
  EXPECT_TRUE(Contains(s.message, "returned BP_OK but a registration it made was refused")) << s;
  EXPECT_TRUE(Contains(s.message, "device_api.cpu")) << s;
  EXPECT_FALSE(Registered("testing.ignores_refusal_probe")) << "the init was not rolled back";
  EXPECT_FALSE(Mapped(lib)) << "the library stayed loaded after its init was refused";
  const nlohmann::json rec = Record("init_ignores_refusal");
  EXPECT_EQ(rec["state"], "skipped") << rec.dump(2);
  EXPECT_TRUE(Contains(Reason(rec), "was refused")) << rec.dump(2);
  EXPECT_EQ(rec["registered"], nlohmann::json::array()) << rec.dump(2);
}

// The host's own registrations are untouched by all this: outside a load they are the host's.
TEST(RegisteringWhileLoading, TheHostStillRegistersAsTheHost) {
  ASSERT_TRUE(Capture(bp_plugin_load(LoadingLibrary("ctor_declared").c_str())).ok());
  backplane::Registry::Set(
      "testing.host_after_load",
      backplane::Function::FromCallable([](backplane::PackedArgs) { return backplane::Any(); }));
  EXPECT_EQ(Record("ctor_declared")["registered"],
            nlohmann::json::array({"testing.ctor_declared_probe"}));
  EXPECT_TRUE(Registered("testing.host_after_load"));
}

}  // namespace
