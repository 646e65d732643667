// SPDX-License-Identifier: Apache-2.0
// The SDK's target helpers in-process: the JSON text helpers, TargetKindBuilder (every
// attribute type and its default as the core reads it), the canonicalizer trampoline
// (exceptions and null arguments become statuses), and a host older than ABI 1.1.
//
// Built with BACKPLANE_PLUGIN=1, as a plugin is, with the SDK's host table pointed at the
// core this test links.
#include <gtest/gtest.h>

#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

namespace sdk = backplane::sdk;
using Json = nlohmann::json;

using bptest::Capture;
using bptest::Status;

class TargetSdkTest : public ::testing::Test {
 protected:
  void SetUp() override { backplane::detail::g_host_api = bp_host_api(); }
  void TearDown() override { backplane::detail::g_host_api = bp_host_api(); }
};

TEST_F(TargetSdkTest, JsonHelpersWriteValidJson) {
  const std::string nasty = std::string("a\"b\\c\nd\te\x01") + "f\xC3\xA9";
  EXPECT_EQ(Json::parse(sdk::JsonQuote(nasty)).get<std::string>(), nasty);
  EXPECT_EQ(sdk::JsonArray(std::vector<std::string>{"x", "y\""}), R"(["x","y\""])");
  EXPECT_EQ(sdk::JsonArray(std::vector<int64_t>{1, -2, std::numeric_limits<int64_t>::max()}),
            "[1,-2,9223372036854775807]");
  EXPECT_EQ(sdk::JsonArray(std::vector<std::string>{}), "[]");
  for (double x : {0.1, 1.5, -3.0, 1e300, 5e-324}) {
    EXPECT_EQ(Json::parse(sdk::JsonNumber(x)).get<double>(), x) << sdk::JsonNumber(x);
  }
  EXPECT_THROW(sdk::JsonNumber(std::numeric_limits<double>::infinity()), backplane::Error);
  EXPECT_THROW(sdk::JsonNumber(std::numeric_limits<double>::quiet_NaN()), backplane::Error);
}

TEST_F(TargetSdkTest, TheBuilderRegistersEveryTypeWithItsDefault) {
  sdk::TargetKindBuilder("sdkprobe", "cpu")
      .Keys({"sdkprobe"})
      .Attr<bool>("b", true, "bool")
      .Attr<int64_t>("i", -7, "int")
      .Attr<int32_t>("i32", 5)
      .Attr<double>("f", 0.25, "float")
      .Attr<std::string>("s", std::string("q\"uote"), "string")
      .Attr<std::vector<int64_t>>("ia", std::vector<int64_t>{1, 2}, "int array")
      .Attr<std::vector<std::string>>("sa", std::vector<std::string>{"a", "b,c"}, "string array")
      .Attr<sdk::TargetMap>("m", sdk::TargetMap{R"({"k": [1]})"}, "map")
      .Attr<std::string>("none", sdk::kNoDefault, "no default")
      .Attr<int64_t>("cores", sdk::kNoDefault, BP_ATTR_MULTI_PROCESSOR_COUNT, "from the device")
      .Register();
  const Json t = Json::parse(backplane::Target::Parse("sdkprobe").ToJson());
  EXPECT_EQ(t, (Json{{"kind", "sdkprobe"},
                     {"keys", {"sdkprobe"}},
                     {"b", true},
                     {"i", -7},
                     {"i32", 5},
                     {"f", 0.25},
                     {"s", "q\"uote"},
                     {"ia", {1, 2}},
                     {"sa", {"a", "b,c"}},
                     {"m", {{"k", {1}}}}}));
  const Json doc = Json::parse(backplane::TargetKinds::Describe());
  for (const Json& k : doc["kinds"]) {
    if (k["name"] != "sdkprobe") continue;
    EXPECT_EQ(k["owner"], "the host");
    for (const Json& a : k["attrs"]) {
      if (a["name"] == "cores") {
        EXPECT_EQ(a["device_attr"], "multi_processor_count");
      }
      if (a["name"] == "none") {
        EXPECT_TRUE(a["default"].is_null());
      }
    }
  }
}

TEST_F(TargetSdkTest, ACanonicalizerErrorBecomesAStatusWithItsMessage) {
  sdk::TargetKindBuilder("sdkthrows", "cpu")
      .Attr<int64_t>("n", 1, "must be odd")
      .Canonicalizer([](const std::string& attrs, const DLDevice*) -> std::string {
        const int64_t n = Json::parse(attrs)["n"].get<int64_t>();
        if (n == 2) sdk::ThrowTargetAttrError("n", "is 2; expected an odd number");
        if (n == 4) throw std::runtime_error("plain C++ exception");
        return attrs;
      })
      .Register();
  EXPECT_EQ(backplane::Target::Parse("sdkthrows -n=3").GetAttr<int64_t>("n"), 3);
  bp_object_t* out = nullptr;
  Status s = Capture(bp_target_parse("sdkthrows -n=2", &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s.message;
  EXPECT_NE(s.message.find("attribute 'n' is 2; expected an odd number"), std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("sdkthrows"), std::string::npos) << s.message;
  s = Capture(bp_target_parse("sdkthrows -n=4", &out));
  EXPECT_NE(s.kind, BP_OK);
  EXPECT_NE(s.message.find("plain C++ exception"), std::string::npos) << s.message;
  EXPECT_EQ(out, nullptr);
}

TEST_F(TargetSdkTest, TheTrampolineRefusesNullArguments) {
  bp_object_t* out = nullptr;
  sdk::TargetCanonicalizer identity = [](const std::string& a, const DLDevice*) { return a; };
  Status s = Capture(sdk::detail::CanonicalizeEntry(&identity, nullptr, nullptr, &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("null"), std::string::npos) << s.message;
  s = Capture(sdk::detail::CanonicalizeEntry(&identity, "{}", nullptr, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(sdk::detail::CanonicalizeEntry(&identity, R"({"a":1})", nullptr, &out), BP_OK);
  EXPECT_EQ(backplane::GetString(out), R"({"a":1})");
  bp_object_release(out);
}

TEST_F(TargetSdkTest, AHostWithoutTargetsIsRefusedWithAReason) {
  bp_host_api_t old = *bp_host_api();
  old.struct_size = offsetof(bp_host_api_t, target_kind_register);  // a 1.0 host table
  backplane::detail::g_host_api = &old;
  try {
    sdk::TargetKindBuilder("sdkold", "cpu").Register();
    FAIL() << "registering on a 1.0 host must throw";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("'sdkold'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ABI 1.1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sdk::RegisterTag("sdk/old", "c"), backplane::Error);
}

}  // namespace
