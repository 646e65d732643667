// SPDX-License-Identifier: Apache-2.0
// A third party's kind and tag (tests/plugins/testing/targetkind/): found through the
// plugin's manifest and loaded on first use, with an attribute of every type, a
// canonicalizer that derives values, and FromDevice on the simulated accelerator.
#include <gtest/gtest.h>

#include <backplane/backplane.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "target_test_util.h"

namespace {

using backplane::Target;
using bptest::Contains;
using bptest::ExpectParseError;
using bptest::ExpectRoundTrip;
using Json = nlohmann::json;

class ThirdPartyKind : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(bptest::Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
    ASSERT_TRUE(bptest::Capture(bp_plugins_discover()).ok());
  }
  static std::string State(const std::string& plugin) {
    const auto records = bptest::PluginRecords(plugin);
    return records.size() == 1 ? records[0]["state"].get<std::string>() : "absent";
  }
};

TEST_F(ThirdPartyKind, TheKindLoadsItsPluginOnFirstUse) {
  EXPECT_EQ(State("targetkind"), "discovered");
  const Target t = Target::Parse("testaccel");
  EXPECT_EQ(State("targetkind"), "loaded");
  EXPECT_EQ(t.Kind(), "testaccel");
  // Every attribute type, the defaults, the default keys and the derived attributes.
  const Json expected = {{"kind", "testaccel"},
                         {"keys", {"testaccel", "accel"}},
                         {"enabled", true},
                         {"max_num_threads", 128},
                         {"clock_ghz", 1.5},
                         {"arch", "ta1"},
                         {"tile_sizes", {8, 8}},
                         {"features", Json::array()},
                         {"options", {{"vector_width", 4}}},
                         {"tile_elems", 64},
                         {"isa", "ta1"}};
  EXPECT_EQ(Json::parse(t.ToJson()), expected);
  EXPECT_EQ(t.ToJson(), expected.dump()) << "canonical JSON is the sorted, compact dump";
}

TEST_F(ThirdPartyKind, EveryAttributeTypeParsesFromText) {
  const Target t = Target::Parse(
      R"(testaccel -enabled=false -max_num_threads=64 -clock_ghz=0.75 -arch="ta3")"
      R"( -tile_sizes=2,3,4 -features=dma,bf16 -options='{"vector_width": 8, "cache": "l2"}')");
  EXPECT_EQ(t.GetAttr<bool>("enabled"), false);
  EXPECT_EQ(t.GetAttr<int64_t>("max_num_threads"), 64);
  EXPECT_EQ(t.GetAttr<double>("clock_ghz"), 0.75);
  EXPECT_EQ(t.GetAttr<std::string>("arch"), "ta3");
  EXPECT_EQ(t.GetAttr<std::vector<int64_t>>("tile_sizes"), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.GetAttr<std::vector<std::string>>("features"),
            (std::vector<std::string>{"dma", "bf16"}));
  // A map comes back as its JSON text.
  EXPECT_EQ(Json::parse(t.GetAttr<std::string>("options").value_or("null")),
            (Json{{"vector_width", 8}, {"cache", "l2"}}));
  EXPECT_EQ(t.GetAttr<int64_t>("tile_elems"), 24);
  EXPECT_EQ(t.GetAttr<std::string>("isa"), "ta3+dma+bf16");
  ExpectRoundTrip(t.ToJson());
  // The same Target from JSON, where a float may be written as an integer.
  const Target json = Target::Parse(R"({"kind": "testaccel", "enabled": false,
      "max_num_threads": 64, "clock_ghz": 0.75, "arch": "ta3", "tile_sizes": [2, 3, 4],
      "features": ["dma", "bf16"], "options": {"cache": "l2", "vector_width": 8}})");
  EXPECT_TRUE(t == json) << t.ToJson() << "\n" << json.ToJson();
  EXPECT_EQ(Target::Parse("testaccel -clock_ghz=2").ToJson(),
            Target::Parse(R"({"kind": "testaccel", "clock_ghz": 2})").ToJson());
}

TEST_F(ThirdPartyKind, TheTagLoadsItsPluginOnFirstUse) {
  EXPECT_EQ(State("targetkind"), "discovered");
  const Target t = Target::Parse("testvendor/board1");
  EXPECT_EQ(State("targetkind"), "loaded");
  EXPECT_EQ(t.Kind(), "testaccel");
  EXPECT_EQ(t.GetAttr<std::string>("tag"), "testvendor/board1");
  EXPECT_EQ(t.GetAttr<std::string>("isa"), "ta2+dma+fp16");
  EXPECT_EQ(t.GetAttr<int64_t>("tile_elems"), 64);
  EXPECT_EQ(t.GetAttr<double>("clock_ghz"), 2.0);
  ExpectRoundTrip("testvendor/board1");
  ExpectRoundTrip("testvendor/board1 -features=dma");
  EXPECT_EQ(Target::Parse("testvendor/board1 -features=dma").GetAttr<std::string>("isa"),
            "ta2+dma");
}

TEST_F(ThirdPartyKind, TheCanonicalizerNamesTheAttributeItRefuses) {
  ExpectParseError("testaccel -tile_sizes=8,0", BP_ERR_INVALID_ARGUMENT,
                   {"testaccel", "tile_sizes", "0"});
  ExpectParseError(R"({"kind": "testaccel", "tile_sizes": [8, 5000]})", BP_ERR_INVALID_ARGUMENT,
                   {"tile_sizes", "5000"});
  ExpectParseError(R"({"kind": "testaccel", "options": [1]})", BP_ERR_INVALID_ARGUMENT,
                   {"options", "map"});
  ExpectParseError(R"({"kind": "testaccel", "clock_ghz": "fast"})", BP_ERR_INVALID_ARGUMENT,
                   {"clock_ghz", "number"});
  ExpectParseError("testaccel -tile_sizes=8,x", BP_ERR_INVALID_ARGUMENT, {"tile_sizes", "'x'"});
}

TEST_F(ThirdPartyKind, FromDeviceReadsTheSimAccelelerator) {
  const backplane::Device dev = backplane::Device::Parse("simaccel:0");
  const backplane::DeviceAPI api = backplane::DeviceAPI::Get(dev);
  // simaccel registers its own kind too; this test is about the third party's.
  const Target t = Target::FromDevice(dev, "testaccel");
  EXPECT_EQ(t.Kind(), "testaccel");
  EXPECT_EQ(t.GetAttr<int64_t>("max_num_threads"),
            api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt());
  EXPECT_EQ(t.GetAttr<std::string>("compute_version"),
            api.GetAttr(BP_ATTR_COMPUTE_VERSION).AsString());
  // Only the canonicalizer sees the device, and it read the name from it.
  EXPECT_EQ(t.GetAttr<std::string>("device_name"), api.GetAttr(BP_ATTR_DEVICE_NAME).AsString());
  EXPECT_EQ(t.GetAttr<int64_t>("from_device"), 0);
  ExpectRoundTrip(t.ToJson());
  // Parsed text never sees a device.
  EXPECT_FALSE(Target::Parse("testaccel").GetAttr<std::string>("device_name").has_value());
}

TEST_F(ThirdPartyKind, AKindOnAnotherDeviceTypeIsRefusedByFromDevice) {
  bp_object_t* out = nullptr;
  const bptest::Status s =
      bptest::Capture(bp_target_from_device(DLDevice{kDLCPU, 0}, "testaccel", &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Contains(s.message, "testaccel")) << s;
  EXPECT_TRUE(Contains(s.message, "simaccel")) << s;
  EXPECT_TRUE(Contains(s.message, "cpu:0")) << s;
}

TEST_F(ThirdPartyKind, TheDescriptionListsTheKindAndTheTag) {
  const Json doc = Json::parse(backplane::TargetKinds::Describe());
  const Json* kind = nullptr;
  for (const Json& k : doc["kinds"]) {
    if (k["name"] == "testaccel") kind = &k;
  }
  ASSERT_NE(kind, nullptr) << doc.dump(2);
  EXPECT_EQ((*kind)["device_type"], "simaccel");
  std::vector<std::string> types;
  for (const Json& a : (*kind)["attrs"]) types.push_back(a["type"]);
  for (const char* type : {"bool", "int", "float", "string", "int array", "string array", "map"}) {
    EXPECT_NE(std::find(types.begin(), types.end(), type), types.end()) << type;
  }
  ASSERT_TRUE(doc["tags"].contains("testvendor/board1")) << doc["tags"].dump(2);
  EXPECT_EQ(doc["tags"]["testvendor/board1"]["isa"], "ta2+dma+fp16");
}

}  // namespace
