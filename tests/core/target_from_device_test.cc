// SPDX-License-Identifier: Apache-2.0
// Target::FromDevice against the cpu plugin's cpu:0 (discovered in the build tree's plugin
// folder): attributes with a device_attr are read from the device and match what
// bp_device_get_attr answers; the canonicalizer sees the device; the result round-trips.
#include <gtest/gtest.h>

#include <backplane/backplane.hpp>
#include <string>

#include "target_test_kinds.h"

namespace {

using tk::json;
namespace bp = backplane;

class TargetFromDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { tk::RegisterTestKinds(); }
};

const DLDevice kCpu0{kDLCPU, 0};

// The device's answer for `kind` as JSON (null for none).
json DeviceAnswer(DLDevice dev, int32_t kind) {
  bp_value_t v;
  EXPECT_EQ(bp_device_get_attr(dev, kind, &v), BP_OK) << tk::LastMessage();
  switch (v.type) {
    case BP_VALUE_INT:
      return v.u.v_int64;
    case BP_VALUE_FLOAT:
      return v.u.v_float64;
    case BP_VALUE_OBJECT: {
      json s = bp::GetString(v.u.v_obj);
      bp_object_release(v.u.v_obj);
      return s;
    }
    default:
      return nullptr;
  }
}

TEST_F(TargetFromDeviceTest, AttributesMatchTheDevice) {
  bp::Target t = bp::Target::FromDevice(bp::Device(kCpu0), "tk_dev");
  EXPECT_EQ(t.Kind(), "tk_dev");
  json j = json::parse(t.ToJson());
  SCOPED_TRACE(j.dump());

  const json name = DeviceAnswer(kCpu0, BP_ATTR_DEVICE_NAME);
  ASSERT_TRUE(name.is_string()) << "cpu:0 names itself";
  EXPECT_EQ(j.at("device_name"), name);
  EXPECT_EQ(t.GetAttr<std::string>("device_name"), name.get<std::string>());

  const json cores = DeviceAnswer(kCpu0, BP_ATTR_MULTI_PROCESSOR_COUNT);
  ASSERT_TRUE(cores.is_number_integer());
  EXPECT_GT(cores.get<int64_t>(), 0);
  EXPECT_EQ(j.at("cores"), cores);
  EXPECT_EQ(t.GetAttr<int64_t>("cores"), cores.get<int64_t>());

  const json mem = DeviceAnswer(kCpu0, BP_ATTR_TOTAL_GLOBAL_MEMORY);
  if (mem.is_null()) {
    EXPECT_FALSE(j.contains("total_memory"));
  } else {
    EXPECT_EQ(j.at("total_memory"), mem);
  }

  // cpu answers none for the warp size and compute version: the default stays, an attribute
  // without a default stays absent.
  ASSERT_TRUE(DeviceAnswer(kCpu0, BP_ATTR_WARP_SIZE).is_null());
  ASSERT_TRUE(DeviceAnswer(kCpu0, BP_ATTR_COMPUTE_VERSION).is_null());
  EXPECT_EQ(j.at("warp"), 1);
  EXPECT_FALSE(j.contains("arch"));
  EXPECT_FALSE(t.GetAttr<std::string>("arch").has_value());

  // Attributes without a device_attr keep their defaults; common attributes are set.
  EXPECT_EQ(j.at("opt"), 3);
  EXPECT_EQ(j.at("from_device"), 0);
  EXPECT_EQ(t.GetAttr<int64_t>("from_device"), 0);
  EXPECT_EQ(j.at("keys"), json({"tk_dev", "cpu"}));
  EXPECT_FALSE(j.contains("tag"));
  EXPECT_FALSE(j.contains("host"));
}

TEST_F(TargetFromDeviceTest, CanonicalizerSeesTheDevice) {
  bp::Target t = bp::Target::FromDevice(bp::Device(kCpu0), "tk_dev");
  EXPECT_EQ(t.GetAttr<std::string>("seen_device"), std::to_string(kDLCPU) + ":0");
  // Parsing never passes a device.
  bp::Target parsed = bp::Target::Parse("tk_dev");
  EXPECT_FALSE(parsed.GetAttr<std::string>("seen_device").has_value());
}

TEST_F(TargetFromDeviceTest, ResultRoundTripsThroughJson) {
  bp::Target t = bp::Target::FromDevice(bp::Device(kCpu0), "tk_dev");
  const std::string text = t.ToJson();
  bp::Target again = bp::Target::Parse(text);
  EXPECT_EQ(again.ToJson(), text);
  EXPECT_EQ(again, t);
}

TEST_F(TargetFromDeviceTest, KindChoice) {
  // Other kinds on cpu work too; a kind with no device attributes gives its defaults.
  bp::Target all = bp::Target::FromDevice(bp::Device(kCpu0), "tk_all");
  json expected = tk::AllDefaults();
  expected["from_device"] = 0;
  EXPECT_EQ(json::parse(all.ToJson()), expected);
  // No kind named: some kind that runs on cpu.
  bp_object_t* out = nullptr;
  ASSERT_EQ(bp_target_from_device(kCpu0, nullptr, &out), BP_OK) << tk::LastMessage();
  const char* kind = nullptr;
  ASSERT_EQ(bp_target_kind(out, &kind), BP_OK);
  json described = json::parse(bp::TargetKinds::Describe());
  bool on_cpu = false;
  for (const auto& k : described["kinds"]) {
    if (k["name"] == kind) on_cpu = k["device_type"] == "cpu";
  }
  EXPECT_TRUE(on_cpu) << kind << " does not run on cpu";
  bp_object_release(out);
}

TEST_F(TargetFromDeviceTest, Errors) {
  bp_object_t* out = nullptr;
  // An unknown kind, with the nearest names.
  EXPECT_NE(bp_target_from_device(kCpu0, "tk_dve", &out), BP_OK);
  EXPECT_NE(tk::LastMessage().find("tk_dev"), std::string::npos) << tk::LastMessage();
  // A kind that runs on another device type.
  static const char* const kKeys[] = {"tk_elsewhere"};
  bp_target_kind_def_t k = tk::Kind("tk_elsewhere", "tk_nodevice", kKeys, 1, nullptr, 0);
  ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << tk::LastMessage();
  bp_status_t st = bp_target_from_device(kCpu0, "tk_elsewhere", &out);
  EXPECT_EQ(st, BP_ERR_INVALID_ARGUMENT) << tk::LastMessage();
  EXPECT_NE(tk::LastMessage().find("tk_nodevice"), std::string::npos) << tk::LastMessage();
  EXPECT_NE(tk::LastMessage().find("cpu:0"), std::string::npos) << tk::LastMessage();
  // Such a kind still parses: compilation needs no device.
  std::string json_text, message;
  EXPECT_EQ(tk::ParseToJson("tk_elsewhere", &json_text, &message), BP_OK) << message;
  // A device that does not exist.
  st = bp_target_from_device(DLDevice{kDLCPU, 7}, "tk_dev", &out);
  EXPECT_NE(st, BP_OK);
  EXPECT_NE(tk::LastMessage().find("cpu:7"), std::string::npos) << tk::LastMessage();
  // A device type with no DeviceAPI.
  int32_t type = 0;
  ASSERT_EQ(bp_device_type_from_name("tk_nodevice", &type), BP_OK);
  st = bp_target_from_device(DLDevice{static_cast<DLDeviceType>(type), 0}, "tk_elsewhere", &out);
  EXPECT_EQ(st, BP_ERR_NOT_FOUND) << tk::LastMessage();
  EXPECT_NE(tk::LastMessage().find("tk_nodevice"), std::string::npos) << tk::LastMessage();
  EXPECT_EQ(bp_target_from_device(kCpu0, "tk_dev", nullptr), BP_ERR_INVALID_ARGUMENT);
}

}  // namespace
