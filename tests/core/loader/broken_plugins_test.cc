// SPDX-License-Identifier: Apache-2.0
// Each broken test plugin, loaded by path: the right error kind, a reason that names the
// cause, nothing of it left registered, and a host (and cpu plugin) that keeps working.
#include <string>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;
using bptest::Status;

Status LoadBroken(const std::string& name) {
  return Capture(bp_plugin_load(bptest::TestPluginLibrary(name).c_str()));
}

// The host's ABI version as messages write it ("1.1"), from the headers this test is built
// with, so the test follows the version instead of pinning one.
std::string HostAbi() {
  return std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR);
}

bool Registered(const std::string& name) {
  return static_cast<bool>(backplane::Registry::TryGet(name));
}

// The host and the cpu plugin still work: register and call a function, allocate and copy.
void ExpectHostWorks() {
  backplane::Registry::Set("testing.after_failure",
                           backplane::Function::FromCallable([](backplane::PackedArgs args) {
                             bp_value_t v{};
                             v.type = BP_VALUE_INT;
                             v.u.v_int64 = args.Int(0) * 2;
                             return backplane::Any(v);
                           }),
                           /*allow_override=*/true);
  EXPECT_EQ(backplane::Registry::Get("testing.after_failure")(21).AsInt(), 42);
  const auto ref = bptest::RandomFloats(100, 3);
  auto t = backplane::Tensor::Empty({100}, backplane::Float32(), backplane::Device("cpu", 0));
  t.CopyFrom(ref);
  EXPECT_EQ(t.ToVector<float>(), ref);
}

// The plugin's record in bp_plugins_list is "skipped" with a reason.
void ExpectSkippedInList(const std::string& plugin, const std::string& reason_part) {
  const auto records = bptest::PluginRecords(plugin);
  ASSERT_EQ(records.size(), 1u) << bptest::PluginList().dump(2);
  EXPECT_EQ(records[0]["state"], "skipped");
  ASSERT_TRUE(records[0]["reason"].is_string());
  EXPECT_NE(records[0]["reason"].get<std::string>().find(reason_part), std::string::npos)
      << records[0].dump(2);
}

TEST(BrokenPlugins, NoEntryPoint) {
  const Status s = LoadBroken("broken_no_entry");
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_NE(s.message.find("bp_plugin_init"), std::string::npos) << s;
  EXPECT_NE(s.message.find("broken_no_entry"), std::string::npos) << s;
  ExpectSkippedInList("broken_no_entry", "bp_plugin_init");
  ExpectHostWorks();
}

TEST(BrokenPlugins, AnotherAbiMajorIsRefusedNamingBothVersions) {
  const Status s = LoadBroken("broken_abi_major2");
  EXPECT_EQ(s.kind, BP_ERR_VERSION_MISMATCH) << s;
  EXPECT_NE(s.message.find("2.0"), std::string::npos) << s;
  EXPECT_NE(s.message.find(HostAbi()), std::string::npos) << s;
  ExpectSkippedInList("broken_abi_major2", "2.0");
  ExpectHostWorks();
}

TEST(BrokenPlugins, ANewerMinorIsRefusedNamingBothVersions) {
  const Status s = LoadBroken("broken_abi_minor99");
  EXPECT_EQ(s.kind, BP_ERR_VERSION_MISMATCH) << s;
  EXPECT_NE(s.message.find("1.99"), std::string::npos) << s;
  EXPECT_NE(s.message.find(HostAbi()), std::string::npos) << s;
  ExpectSkippedInList("broken_abi_minor99", "1.99");
  ExpectHostWorks();
}

TEST(BrokenPlugins, InitErrorKeepsItsKindAndMessageAndIsRolledBack) {
  const Status s = LoadBroken("broken_init_error");
  EXPECT_EQ(s.kind, BP_ERR_DEVICE) << s;
  EXPECT_NE(s.message.find("the test device is unplugged"), std::string::npos) << s;
  EXPECT_FALSE(Registered("testing.init_error_probe"))
      << "a name registered by a plugin whose init failed must be rolled back";
  ExpectSkippedInList("broken_init_error", "unplugged");
  ExpectHostWorks();
}

TEST(BrokenPlugins, AnExceptionThrownOutOfInitIsCaught) {
  const Status s = LoadBroken("broken_init_throws");
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_NE(s.message.find("exception from init"), std::string::npos) << s;
  ExpectSkippedInList("broken_init_throws", "exception");
  ExpectHostWorks();
}

TEST(BrokenPlugins, ATakenNameIsRefusedNamingTheOwnerAndRolledBack) {
  // The cpu plugin owns device_api.cpu.
  const bp_device_api_t* cpu_table = backplane::DeviceAPI::Get(backplane::Device()).table();
  const Status s = LoadBroken("broken_dup_name");
  EXPECT_EQ(s.kind, BP_ERR_ALREADY_EXISTS) << s;
  EXPECT_NE(s.message.find("device_api.cpu"), std::string::npos) << s;
  EXPECT_NE(s.message.find("'cpu'"), std::string::npos) << "the owner is not named: " << s;
  EXPECT_FALSE(Registered("testing.dup_probe"))
      << "the name registered before the failure must be rolled back";
  bp_object_t* f = nullptr;
  const Status get = Capture(bp_registry_get("testing.dup_probe", &f));
  EXPECT_EQ(get.kind, BP_ERR_NOT_FOUND) << get;
  // device_api.cpu still gives the cpu plugin's table (the core keeps a copy of it, so
  // compare what the table holds).
  const auto* table =
      static_cast<const bp_device_api_t*>(backplane::Registry::Get("device_api.cpu")().AsPtr());
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->self, cpu_table->self);
  EXPECT_EQ(table->alloc_data_space, cpu_table->alloc_data_space);
  ExpectSkippedInList("broken_dup_name", "device_api.cpu");
  ExpectHostWorks();
}

TEST(BrokenPlugins, AnUndefinedSymbolFailsAtLoadNamingTheSymbol) {
  const Status s = LoadBroken("broken_undefined_symbol");
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_NE(s.message.find("bp_testing_symbol_that_does_not_exist"), std::string::npos) << s;
  ExpectSkippedInList("broken_undefined_symbol", "bp_testing_symbol_that_does_not_exist");
  ExpectHostWorks();
}

TEST(BrokenPlugins, AMissingLibraryIsNotFound) {
  const Status s = Capture(bp_plugin_load((bptest::TestPluginDir() + "/libnothing.so").c_str()));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_NE(s.message.find("libnothing.so"), std::string::npos) << s;
  ExpectHostWorks();
}

TEST(BrokenPlugins, LoadingAllOfThemRecordsEachReasonAndGoesOn) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  // Make cpu the owner of device_api.cpu before the duplicate tries to take it.
  backplane::DeviceAPI::Get(backplane::Device());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok()) << "failures are recorded, not returned";
  for (const char* broken :
       {"broken_no_entry", "broken_abi_major2", "broken_abi_minor99", "broken_init_error",
        "broken_init_throws", "broken_dup_name", "broken_undefined_symbol"}) {
    SCOPED_TRACE(broken);
    const auto records = bptest::PluginRecords(broken);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0]["state"], "skipped");
    EXPECT_TRUE(records[0]["reason"].is_string() &&
                !records[0]["reason"].get<std::string>().empty());
  }
  for (const char* healthy : {"hello", "simaccel_testing", "cpu"}) {
    SCOPED_TRACE(healthy);
    const auto records = bptest::PluginRecords(healthy);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0]["state"], "loaded") << records[0].dump(2);
  }
  EXPECT_EQ(backplane::Registry::Get("testing.hello")("loader").AsString(), "hello, loader");
  ExpectHostWorks();
}

}  // namespace
