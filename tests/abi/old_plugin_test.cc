// SPDX-License-Identifier: Apache-2.0
// Old plugins on today's host: old_plugin.c built against the frozen header of every ABI minor
// (cmake/abi/1.0 ... 1.5) loads through the real loader, registers a DeviceAPI whose table has
// that minor's struct_size, and works; where its table is shorter than today's the host
// degrades as docs/abi.md says (list_properties absent: no keys listed), and the attribute kinds
// newer than its header answer none. The conformance kit runs on each too (CMakeLists.txt).
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

struct OldVersion {
  int minor;
  std::string name() const { return "oldabi1_" + std::to_string(minor); }
  std::string library() const {
    return std::string(BACKPLANE_ABI_PLUGIN_DIR) + "/libbackplane_" + name() + ".so";
  }
  // 1.0 to 1.4 tables end after sync_stream_from_to (15 pointer-sized fields); 1.5 appended
  // list_properties.
  size_t table_size() const { return (minor >= 5 ? 16 : 15) * sizeof(void*); }
};

std::string LastError() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "";
}

std::string Text(bp_object_t* str) {
  const char* data = nullptr;
  EXPECT_EQ(bp_string_get(str, &data, nullptr), BP_OK);
  return data != nullptr ? data : "";
}

class OldPluginTest : public ::testing::TestWithParam<OldVersion> {
 protected:
  void SetUp() override {
    ASSERT_EQ(bp_plugin_load(GetParam().library().c_str()), BP_OK)
        << GetParam().library() << ": " << LastError();
    ASSERT_EQ(bp_device_type_from_name(GetParam().name().c_str(), &type_), BP_OK) << LastError();
    dev_ = DLDevice{static_cast<DLDeviceType>(type_), 0};
  }

  int32_t type_ = -1;
  DLDevice dev_{};
};

TEST_P(OldPluginTest, LoadsAndSaysWhichVersionItSpeaks) {
  bp_object_t* json = nullptr;
  ASSERT_EQ(bp_plugins_list(&json), BP_OK);
  const nlohmann::json list = nlohmann::json::parse(Text(json));
  bp_object_release(json);
  bool found = false;
  for (const auto& p : list.at("plugins")) {
    if (p.at("name") != GetParam().name()) continue;
    found = true;
    EXPECT_EQ(p.at("state"), "loaded") << p.dump();
    // What the plugin answered in bp_plugin_info_t, and its manifest said.
    EXPECT_EQ(p.at("abi_version"), "1." + std::to_string(GetParam().minor)) << p.dump();
  }
  EXPECT_TRUE(found) << list.dump();
}

TEST_P(OldPluginTest, TheTableOfItsVersionIsReadAsTodaysWithTheNewEntriesNull) {
  const bp_device_api_t* api = nullptr;
  ASSERT_EQ(bp_device_api_get(type_, &api), BP_OK) << LastError();
  // The core's copy has today's size; what the plugin's table lacks reads as null.
  EXPECT_EQ(api->struct_size, sizeof(bp_device_api_t));
  EXPECT_NE(api->get_attr, nullptr);
  EXPECT_NE(api->copy_data_from_to, nullptr);
  EXPECT_EQ(api->alloc_workspace, nullptr);
  EXPECT_EQ(api->create_stream, nullptr);
  if (GetParam().minor >= 5) {
    EXPECT_NE(api->list_properties, nullptr);
  } else {
    EXPECT_EQ(api->list_properties, nullptr)
        << "a 1." << GetParam().minor << " table ends at " << GetParam().table_size() << " bytes";
  }
}

TEST_P(OldPluginTest, PropertiesAreListedOnlyWhereTheTableHasListProperties) {
  bp_object_t* keys = nullptr;
  ASSERT_EQ(bp_device_list_properties(dev_, &keys), BP_OK) << LastError();
  size_t n = 99;
  ASSERT_EQ(bp_array_size(keys, &n), BP_OK);
  bp_object_release(keys);
  EXPECT_EQ(n, GetParam().minor >= 5 ? 1u : 0u);
  // get_property was there from 1.0: every version answers it.
  bp_value_t v;
  ASSERT_EQ(bp_device_get_property(dev_, "abi_header", &v), BP_OK) << LastError();
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  EXPECT_EQ(Text(v.u.v_obj), "1." + std::to_string(GetParam().minor));
  bp_object_release(v.u.v_obj);
}

TEST_P(OldPluginTest, AttributesNewerThanItsHeaderAnswerNone) {
  bp_value_t v;
  ASSERT_EQ(bp_device_get_attr(dev_, BP_ATTR_DEVICE_NAME, &v), BP_OK) << LastError();
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  EXPECT_NE(Text(v.u.v_obj).find("ABI 1." + std::to_string(GetParam().minor)), std::string::npos);
  bp_object_release(v.u.v_obj);
  for (int32_t kind : {int32_t{BP_ATTR_DEVICE_KIND}, int32_t{BP_ATTR_VENDOR},
                       int32_t{BP_ATTR_SUBGROUP_SIZES}, int32_t{BP_ATTR_ISA_FLAGS}}) {
    ASSERT_EQ(bp_device_get_attr(dev_, kind, &v), BP_OK) << LastError();
    EXPECT_EQ(v.type, BP_VALUE_NONE) << bp_device_attr_name(kind);
  }
}

TEST_P(OldPluginTest, DataMovesThroughItAndTheMissingEntriesFallBack) {
  const int64_t shape[1] = {1000};
  const DLDataType f32{kDLFloat, 32, 1};
  const DLDevice cpu{kDLCPU, 0};
  bp_object_t* host_in = nullptr;
  bp_object_t* host_out = nullptr;
  bp_object_t* on_device = nullptr;
  ASSERT_EQ(bp_tensor_empty(1, shape, f32, cpu, &host_in), BP_OK) << LastError();
  ASSERT_EQ(bp_tensor_empty(1, shape, f32, cpu, &host_out), BP_OK) << LastError();
  ASSERT_EQ(bp_tensor_empty(1, shape, f32, dev_, &on_device), BP_OK) << LastError();
  DLTensor* in = nullptr;
  DLTensor* out = nullptr;
  DLTensor* dt = nullptr;
  ASSERT_EQ(bp_tensor_get(host_in, &in), BP_OK);
  ASSERT_EQ(bp_tensor_get(host_out, &out), BP_OK);
  ASSERT_EQ(bp_tensor_get(on_device, &dt), BP_OK);
  for (int i = 0; i < 1000; ++i) static_cast<float*>(in->data)[i] = 0.5f * i;
  // create_stream is absent: the null stream is the device's one queue.
  bp_stream_t stream = reinterpret_cast<bp_stream_t>(0x1);
  ASSERT_EQ(bp_device_stream_create(dev_, &stream), BP_OK) << LastError();
  EXPECT_EQ(stream, nullptr);
  ASSERT_EQ(bp_device_copy_data_from_to(in, dt, nullptr), BP_OK) << LastError();
  ASSERT_EQ(bp_device_copy_data_from_to(dt, out, nullptr), BP_OK) << LastError();
  ASSERT_EQ(bp_device_stream_sync(dev_, nullptr), BP_OK) << LastError();
  EXPECT_EQ(std::memcmp(in->data, out->data, 1000 * sizeof(float)), 0);
  // alloc_workspace is absent: the workspace comes from data space.
  void* ws = nullptr;
  ASSERT_EQ(bp_device_alloc_workspace(dev_, 256, f32, &ws), BP_OK) << LastError();
  EXPECT_EQ(bp_device_free_workspace(dev_, ws), BP_OK) << LastError();
  bp_object_release(on_device);
  bp_object_release(host_out);
  bp_object_release(host_in);
}

TEST_P(OldPluginTest, ItsDeviceIsListed) {
  std::vector<DLDevice> devices(256);
  size_t count = 0;
  ASSERT_EQ(bp_device_list(devices.data(), devices.size(), &count), BP_OK) << LastError();
  bool found = false;
  for (size_t i = 0; i < count && i < devices.size(); ++i) {
    found = found || (devices[i].device_type == dev_.device_type && devices[i].device_id == 0);
  }
  EXPECT_TRUE(found) << GetParam().name() << ":0 is not among " << count << " devices";
}

INSTANTIATE_TEST_SUITE_P(FrozenHeaders, OldPluginTest,
                         ::testing::Values(OldVersion{0}, OldVersion{1}, OldVersion{2},
                                           OldVersion{3}, OldVersion{4}, OldVersion{5}),
                         [](const ::testing::TestParamInfo<OldVersion>& p) {
                           return "Abi1_" + std::to_string(p.param.minor);
                         });

}  // namespace
