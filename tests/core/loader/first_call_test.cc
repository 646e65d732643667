// SPDX-License-Identifier: Apache-2.0
// Every entry point whose answer depends on plugins discovers them on its first use: each
// test is a host whose FIRST call into the core is one such entry point, with the test
// plugins on BACKPLANE_PLUGIN_PATH (simaccel_testing declares the device type simaccel, its target
// kind, code generator and module loader; hello declares testing.hello). ctest runs each
// test in a process of its own, which is what makes the call the first.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;

class FirstCall : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(setenv("BACKPLANE_PLUGIN_PATH", bptest::TestPluginDir().c_str(), 1), 0);
  }
};

// The id discovery gives simaccel: the first dynamic id, since no manifest searched before
// simaccel_testing's (broken_*, hello) declares a device type. Asked of the core only after the
// test's call.
int32_t SimaccelId() {
  int32_t id = -1;
  EXPECT_EQ(bp_device_type_from_name("simaccel", &id), BP_OK);
  return id;
}

TEST_F(FirstCall, DeviceTypeFromName) {
  int32_t id = -1;
  const auto s = Capture(bp_device_type_from_name("simaccel", &id));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GE(id, BP_DEVICE_TYPE_FIRST_DYNAMIC);
}

TEST_F(FirstCall, DeviceParseInTheCppApi) {
  const backplane::Device dev = backplane::Device::Parse("simaccel:0");
  EXPECT_GE(static_cast<int32_t>(dev.dl.device_type), BP_DEVICE_TYPE_FIRST_DYNAMIC);
  EXPECT_EQ(dev.dl.device_id, 0);
}

TEST_F(FirstCall, DeviceTypeName) {
  const char* name = nullptr;
  const auto s = Capture(bp_device_type_name(BP_DEVICE_TYPE_FIRST_DYNAMIC, &name));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_STREQ(name, "simaccel");
  EXPECT_EQ(SimaccelId(), BP_DEVICE_TYPE_FIRST_DYNAMIC);
}

TEST_F(FirstCall, DeviceTypeList) {
  std::vector<int32_t> ids(BP_DEVICE_TYPE_MAX);
  size_t count = 0;
  ASSERT_TRUE(Capture(bp_device_type_list(ids.data(), ids.size(), &count)).ok());
  ids.resize(count);
  EXPECT_NE(std::find(ids.begin(), ids.end(), SimaccelId()), ids.end())
      << "simaccel's type is not listed among " << count << " types";
}

TEST_F(FirstCall, DeviceApiGet) {
  const bp_device_api_t* table = nullptr;
  const auto s = Capture(bp_device_api_get(BP_DEVICE_TYPE_FIRST_DYNAMIC, &table));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_NE(table, nullptr);
  EXPECT_EQ(SimaccelId(), BP_DEVICE_TYPE_FIRST_DYNAMIC);
}

TEST_F(FirstCall, TensorEmpty) {
  const int64_t shape[1] = {8};
  bp_object_t* t = nullptr;
  const DLDevice dev{static_cast<DLDeviceType>(BP_DEVICE_TYPE_FIRST_DYNAMIC), 0};
  const auto s = Capture(bp_tensor_empty(1, shape, backplane::Float32(), dev, &t));
  ASSERT_TRUE(s.ok()) << s;
  bp_object_release(t);
}

TEST_F(FirstCall, RegistryGet) {
  bp_object_t* f = nullptr;
  ASSERT_TRUE(Capture(bp_registry_get("testing.hello", &f)).ok());
  bp_object_release(f);
}

TEST_F(FirstCall, RegistryList) {
  const auto names = backplane::Registry::List();
  EXPECT_NE(std::find(names.begin(), names.end(), "testing.hello"), names.end());
}

TEST_F(FirstCall, TargetParse) {
  bp_object_t* t = nullptr;
  const auto s = Capture(bp_target_parse("simaccel", &t));
  ASSERT_TRUE(s.ok()) << s;
  bp_object_release(t);
}

TEST_F(FirstCall, TargetFromDevice) {
  bp_object_t* t = nullptr;
  const DLDevice dev{static_cast<DLDeviceType>(BP_DEVICE_TYPE_FIRST_DYNAMIC), 0};
  const auto s = Capture(bp_target_from_device(dev, nullptr, &t));
  ASSERT_TRUE(s.ok()) << s;
  bp_object_release(t);
}

TEST_F(FirstCall, TargetKindsDescribe) {
  bp_object_t* out = nullptr;
  ASSERT_TRUE(Capture(bp_target_kinds_describe(&out)).ok());
  const std::string text = backplane::GetString(out);
  bp_object_release(out);
  EXPECT_NE(text.find("\"simaccel\""), std::string::npos) << text.substr(0, 400);
}

TEST_F(FirstCall, PluginsList) { EXPECT_EQ(bptest::PluginRecords("simaccel_testing").size(), 1u); }

}  // namespace
