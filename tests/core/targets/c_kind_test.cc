// SPDX-License-Identifier: Apache-2.0
// The cpu plugin's target kind `c`: every accepted form, canonical JSON and round trips,
// the canonicalizer's checks, the cpu tag, FromDevice(cpu:0), and a second registration of
// the kind from the host and from another plugin.
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

// The architecture part of the triple the cpu plugin defaults to on this machine.
std::string HostArch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "";
#endif
}

// What "c" alone gives: every attribute with a default, and the default key.
Json DefaultC(const std::string& mtriple) {
  return Json{{"kind", "c"},
              {"keys", {"cpu"}},
              {"mtriple", mtriple},
              {"opt-level", 3},
              {"fast-math", false},
              {"fast-math-nnan", false},
              {"fast-math-ninf", false},
              {"fast-math-nsz", false},
              {"fast-math-arcp", false},
              {"fast-math-contract", false},
              {"fast-math-reassoc", false},
              {"bounds-check", false},
              {"cc", "cc"},
              {"cflags", Json::array()}};
}

TEST(CKind, BareNameHasTheDefaults) {
  const Target t = Target::Parse("c");
  EXPECT_EQ(t.Kind(), "c");
  EXPECT_EQ(t.Keys(), std::vector<std::string>{"cpu"});
  const std::string triple = t.GetAttr<std::string>("mtriple").value_or("");
  EXPECT_TRUE(Contains(triple, HostArch())) << triple;
#if defined(__linux__) && defined(__GLIBC__)
  EXPECT_TRUE(Contains(triple, "-linux-gnu")) << triple;
#endif
  EXPECT_EQ(Json::parse(t.ToJson()), DefaultC(triple));
  // Attributes without a default are absent, not empty.
  EXPECT_FALSE(t.GetAttr<std::string>("mcpu").has_value());
  EXPECT_FALSE(t.GetAttr<int64_t>("num-cores").has_value());
  EXPECT_FALSE(t.GetAttr<std::vector<std::string>>("mattr").has_value());
  EXPECT_EQ(t.GetAttr<int64_t>("opt-level"), 3);
  EXPECT_EQ(t.GetAttr<bool>("fast-math"), false);
  EXPECT_EQ(t.GetAttr<std::string>("cc"), "cc");
  EXPECT_EQ(t.GetAttr<std::vector<std::string>>("cflags"), std::vector<std::string>{});
  EXPECT_EQ(t.GetAttr<std::string>("mcpu", "generic"), "generic");
  EXPECT_FALSE(t.Host().has_value());
}

TEST(CKind, StringFormWithFlagsGivesTheSameTargetAsJson) {
  const Target from_text = Target::Parse("c -mcpu=skylake -num-cores=4 -fast-math");
  const Target from_json =
      Target::Parse(R"({"kind": "c", "mcpu": "skylake", "num-cores": 4, "fast-math": true})");
  EXPECT_EQ(from_text.ToJson(), from_json.ToJson());
  EXPECT_EQ(from_text.GetAttr<std::string>("mcpu"), "skylake");
  EXPECT_EQ(from_text.GetAttr<int64_t>("num-cores"), 4);
  // fast-math turns on each of the six flags.
  for (const char* flag : {"fast-math", "fast-math-nnan", "fast-math-ninf", "fast-math-nsz",
                           "fast-math-arcp", "fast-math-contract", "fast-math-reassoc"}) {
    EXPECT_EQ(from_text.GetAttr<bool>(flag), true) << flag;
  }
}

TEST(CKind, OneFastMathFlagLeavesTheOthersOff) {
  const Target t = Target::Parse("c -fast-math-nnan -fast-math-contract=true");
  EXPECT_EQ(t.GetAttr<bool>("fast-math"), false);
  EXPECT_EQ(t.GetAttr<bool>("fast-math-nnan"), true);
  EXPECT_EQ(t.GetAttr<bool>("fast-math-contract"), true);
  EXPECT_EQ(t.GetAttr<bool>("fast-math-reassoc"), false);
}

TEST(CKind, QuotesAndArrays) {
  const Target t =
      Target::Parse(R"(c -mattr=+avx2,+fma,-sse4a -cflags='-O2,-fno-strict-aliasing' -cc="gcc-12")"
                    R"( -mcpu='skylake-avx512' -march=x86-64-v3)");
  EXPECT_EQ(t.GetAttr<std::vector<std::string>>("mattr"),
            (std::vector<std::string>{"+avx2", "+fma", "-sse4a"}));
  EXPECT_EQ(t.GetAttr<std::vector<std::string>>("cflags"),
            (std::vector<std::string>{"-O2", "-fno-strict-aliasing"}));
  EXPECT_EQ(t.GetAttr<std::string>("cc"), "gcc-12");
  EXPECT_EQ(t.GetAttr<std::string>("mcpu"), "skylake-avx512");
  EXPECT_EQ(t.GetAttr<std::string>("march"), "x86-64-v3");
  const Target json = Target::Parse(R"({"kind": "c", "mattr": ["+avx2", "+fma", "-sse4a"],
      "cflags": ["-O2", "-fno-strict-aliasing"], "cc": "gcc-12", "mcpu": "skylake-avx512",
      "march": "x86-64-v3"})");
  EXPECT_EQ(t.ToJson(), json.ToJson());
}

TEST(CKind, KeysAreKeptAndTheDefaultKeyAppended) {
  const Target t = Target::Parse("c -keys=host,arm_cpu");
  EXPECT_EQ(t.Keys(), (std::vector<std::string>{"host", "arm_cpu", "cpu"}));
  EXPECT_EQ(Target::Parse("c -keys=cpu,host").Keys(), (std::vector<std::string>{"cpu", "host"}));
}

TEST(CKind, HostTargetNests) {
  const Target t = Target::Parse(R"({"kind": "c", "opt-level": 1, "host": "c -opt-level=2"})");
  ASSERT_TRUE(t.Host().has_value());
  EXPECT_EQ(t.Host()->Kind(), "c");
  EXPECT_EQ(t.Host()->GetAttr<int64_t>("opt-level"), 2);
  EXPECT_EQ(t.GetAttr<int64_t>("opt-level"), 1);
  ExpectRoundTrip(t.ToJson());
}

TEST(CKind, EveryFormRoundTripsThroughCanonicalJson) {
  for (const char* text :
       {"c", "  c  ", "c -mcpu=skylake -num-cores=4 -fast-math",
        R"(c -mattr=+avx2,+fma -cflags='-O2,-g' -cc="clang")", "c -opt-level=0", R"({"kind": "c"})",
        R"({"kind": "c", "mtriple": "aarch64-linux-gnu", "num-cores": 64})", "c -host=c",
        "raspberry-pi/4b-aarch64", "raspberry-pi/4b-aarch64 -opt-level=2",
        "c -tag=mine -keys=host"}) {
    ExpectRoundTrip(text);
  }
}

TEST(CKind, TagGivesTheRaspberryPi) {
  const Target t = Target::Parse("raspberry-pi/4b-aarch64");
  EXPECT_EQ(t.Kind(), "c");
  EXPECT_EQ(t.GetAttr<std::string>("tag"), "raspberry-pi/4b-aarch64");
  EXPECT_EQ(t.GetAttr<std::string>("mtriple"), "aarch64-linux-gnu");
  EXPECT_EQ(t.GetAttr<std::string>("mcpu"), "cortex-a72");
  EXPECT_EQ(t.GetAttr<std::vector<std::string>>("mattr"), std::vector<std::string>{"+neon"});
  EXPECT_EQ(t.GetAttr<int64_t>("num-cores"), 4);
  EXPECT_EQ(t.GetAttr<std::string>("cc"), "aarch64-linux-gnu-gcc");
  // Options after a tag change it.
  const Target o2 = Target::Parse("raspberry-pi/4b-aarch64 -opt-level=2");
  EXPECT_EQ(o2.GetAttr<int64_t>("opt-level"), 2);
  EXPECT_EQ(o2.GetAttr<std::string>("mcpu"), "cortex-a72");
}

TEST(CKind, TheDescriptionListsTheSchemaAndTheTag) {
  const Json doc = Json::parse(backplane::TargetKinds::Describe());
  const Json* c = nullptr;
  for (const Json& k : doc["kinds"]) {
    if (k["name"] == "c") c = &k;
  }
  ASSERT_NE(c, nullptr) << doc.dump(2);
  EXPECT_EQ((*c)["device_type"], "cpu");
  EXPECT_EQ((*c)["keys"], Json::array({"cpu"}));
  std::vector<std::string> names;
  for (const Json& a : (*c)["attrs"]) {
    names.push_back(a["name"]);
    EXPECT_TRUE(a["doc"].is_string() && !a["doc"].get<std::string>().empty())
        << "every attribute of c has a doc: " << a.dump();
    if (a["name"] == "num-cores") {
      EXPECT_EQ(a["device_attr"], "multi_processor_count");
    }
    if (a["name"] == "opt-level") {
      EXPECT_EQ(a["default"], 3);
    }
  }
  for (const char* expected :
       {"mcpu", "march", "mtriple", "mattr", "num-cores", "opt-level", "fast-math",
        "fast-math-nnan", "fast-math-ninf", "fast-math-nsz", "fast-math-arcp", "fast-math-contract",
        "fast-math-reassoc", "cc", "cflags"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  EXPECT_EQ(doc["tags"]["raspberry-pi/4b-aarch64"]["kind"], "c") << doc["tags"].dump(2);
}

// ---- errors: each names the culprit --------------------------------------------------------

TEST(CKindErrors, CanonicalizerChecksNameTheAttribute) {
  ExpectParseError("c -opt-level=7", BP_ERR_INVALID_ARGUMENT, {"opt-level", "7", "0, 1, 2 or 3"});
  ExpectParseError("c -opt-level=-1", BP_ERR_INVALID_ARGUMENT, {"opt-level", "-1"});
  ExpectParseError("c -num-cores=0", BP_ERR_INVALID_ARGUMENT, {"num-cores", "at least 1"});
  ExpectParseError(R"({"kind": "c", "num-cores": -4})", BP_ERR_INVALID_ARGUMENT,
                   {"num-cores", "-4"});
  ExpectParseError("c -cc=''", BP_ERR_INVALID_ARGUMENT, {"'cc'", "empty"});
  ExpectParseError(R"({"kind": "c", "mtriple": ""})", BP_ERR_INVALID_ARGUMENT,
                   {"'mtriple'", "empty"});
  ExpectParseError("c -cflags=-O2,,-g", BP_ERR_INVALID_ARGUMENT, {"cflags", "empty flag"});
}

TEST(CKindErrors, WrongTypesNameTheAttributeAndTheType) {
  ExpectParseError("c -opt-level=high", BP_ERR_INVALID_ARGUMENT, {"opt-level", "integer", "high"});
  ExpectParseError(R"({"kind": "c", "opt-level": "3"})", BP_ERR_INVALID_ARGUMENT,
                   {"opt-level", "integer"});
  ExpectParseError(R"({"kind": "c", "opt-level": 2.5})", BP_ERR_INVALID_ARGUMENT,
                   {"opt-level", "integer"});
  ExpectParseError(R"({"kind": "c", "fast-math": 1})", BP_ERR_INVALID_ARGUMENT,
                   {"fast-math", "bool"});
  ExpectParseError("c -fast-math=yes", BP_ERR_INVALID_ARGUMENT, {"fast-math", "bool", "yes"});
  ExpectParseError(R"({"kind": "c", "mattr": "+avx2"})", BP_ERR_INVALID_ARGUMENT,
                   {"mattr", "string array"});
  ExpectParseError(R"({"kind": "c", "cflags": ["-O2", 3]})", BP_ERR_INVALID_ARGUMENT,
                   {"cflags", "string array"});
  ExpectParseError("c -num-cores", BP_ERR_INVALID_ARGUMENT, {"num-cores", "-num-cores="});
}

TEST(CKindErrors, UnknownNamesSuggestTheNearest) {
  ExpectParseError("c -mcpuu=skylake", BP_ERR_INVALID_ARGUMENT, {"'mcpuu'", "'mcpu'"});
  ExpectParseError(R"({"kind": "c", "opt_level": 2})", BP_ERR_INVALID_ARGUMENT,
                   {"'opt_level'", "'opt-level'"});
  ExpectParseError("cc", BP_ERR_NOT_FOUND, {"'cc'", "'c'"});
  ExpectParseError(R"({"kind": "cpu"})", BP_ERR_NOT_FOUND, {"'cpu'"});
  ExpectParseError("raspberry-pi/4b", BP_ERR_NOT_FOUND, {"raspberry-pi/4b-aarch64"});
}

TEST(CKindErrors, MalformedTextIsNamed) {
  ExpectParseError("c -mcpu='skylake", BP_ERR_INVALID_ARGUMENT, {"unterminated"});
  ExpectParseError("c mcpu=skylake", BP_ERR_INVALID_ARGUMENT, {"mcpu=skylake", "-key=value"});
  ExpectParseError(R"({"kind": "c", )", BP_ERR_INVALID_ARGUMENT, {"not valid JSON"});
  ExpectParseError(R"({"mcpu": "x"})", BP_ERR_INVALID_ARGUMENT, {"\"kind\""});
  ExpectParseError("", BP_ERR_INVALID_ARGUMENT, {"empty"});
}

TEST(CKindErrors, GetAttrOfAnUndeclaredNameSuggestsTheNearest) {
  const Target t = Target::Parse("c");
  try {
    (void)t.GetAttr<int64_t>("num_cores");
    FAIL() << "GetAttr of an undeclared attribute must throw";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(e.what(), "num_cores")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "num-cores")) << e.what();
  }
}

// ---- FromDevice ------------------------------------------------------------------------------

TEST(CKindFromDevice, NumCoresIsTheDevicesMultiProcessorCount) {
  const backplane::Device cpu0 = backplane::Device::Parse("cpu:0");
  const int64_t cores =
      backplane::DeviceAPI::Get(cpu0).GetAttr(BP_ATTR_MULTI_PROCESSOR_COUNT).AsInt();
  ASSERT_GE(cores, 1);
  for (const std::string kind : {"", "c"}) {
    SCOPED_TRACE("kind '" + kind + "'");
    const Target t = Target::FromDevice(cpu0, kind);
    EXPECT_EQ(t.Kind(), "c");
    EXPECT_EQ(t.GetAttr<int64_t>("num-cores"), cores);
    EXPECT_EQ(t.GetAttr<int64_t>("from_device"), 0);
    EXPECT_EQ(t.GetAttr<int64_t>("opt-level"), 3) << "defaults are filled as for Parse";
    ExpectRoundTrip(t.ToJson());
  }
}

// A Target from cpu:0 names the CPU's instruction set level, so what is built for it uses the
// vector units (without, gcc targets plain x86-64: SSE2, no FMA); a Target parsed from that
// Target's JSON keeps it. The oracle is gcc's own level test (gcc 12 and newer).
TEST(CKindFromDevice, MarchIsTheHostsInstructionSetLevel) {
  const Target t = Target::FromDevice(backplane::Device::Parse("cpu:0"));
#if defined(__x86_64__)
  const auto march = t.GetAttr<std::string>("march");
  ASSERT_TRUE(march.has_value()) << t.ToJson();
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
  __builtin_cpu_init();
  const char* want = __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
                     : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                     : __builtin_cpu_supports("x86-64-v2") ? "x86-64-v2"
                                                           : "x86-64";
  EXPECT_EQ(*march, want);
#endif
  EXPECT_EQ(Target::Parse(t.ToJson()).GetAttr<std::string>("march"), march);
  EXPECT_FALSE(Target::Parse("c").GetAttr<std::string>("march").has_value())
      << "only a Target from the device gets one";
#else
  EXPECT_FALSE(t.GetAttr<std::string>("march").has_value()) << t.ToJson();
#endif
}

TEST(CKindFromDevice, AMissingDeviceOrAWrongKindIsNamed) {
  bp_object_t* out = nullptr;
  bptest::Status s = bptest::Capture(bp_target_from_device(DLDevice{kDLCPU, 7}, nullptr, &out));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_TRUE(Contains(s.message, "cpu:7")) << s;
  s = bptest::Capture(bp_target_from_device(DLDevice{kDLCPU, 0}, "cx", &out));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_TRUE(Contains(s.message, "'cx'")) << s;
  EXPECT_EQ(out, nullptr);
}

// ---- a kind registered twice -------------------------------------------------------------------

TEST(CKindTwice, TheHostRegisteringCAgainFailsNamingBothOwners) {
  ASSERT_EQ(Target::Parse("c").Kind(), "c");  // loads the cpu plugin, which owns c
  const bp_target_kind_def_t def{
      .struct_size = sizeof(bp_target_kind_def_t),
      .name = "c",
      .device_type = "cpu",
      .default_keys = nullptr,
      .num_default_keys = 0,
      .attrs = nullptr,
      .num_attrs = 0,
      .canonicalize = nullptr,
      .canonicalize_self = nullptr,
      .flags = 0,
  };
  const bptest::Status s = bptest::Capture(bp_target_kind_register(&def));
  EXPECT_EQ(s.kind, BP_ERR_ALREADY_EXISTS) << s;
  EXPECT_TRUE(Contains(s.message, "'c'")) << s;
  EXPECT_TRUE(Contains(s.message, "plugin 'cpu'")) << s;
  EXPECT_TRUE(Contains(s.message, "host")) << s;
  EXPECT_EQ(Target::Parse("c").GetAttr<std::string>("cc"), "cc") << "the cpu plugin's c stays";
}

TEST(CKindTwice, ASecondPluginRegisteringCIsSkippedNamingBothPlugins) {
  ASSERT_EQ(Target::Parse("c").Kind(), "c");
  const std::string library = bptest::TestPluginDir() + "/dup_kind_c/libbackplane_dup_kind_c.so";
  const bptest::Status s = bptest::Capture(bp_plugin_load(library.c_str()));
  EXPECT_NE(s.kind, BP_OK);
  // Its manifest declares target.kind.c as the cpu plugin's does: it is shadowed by the cpu
  // plugin, found first on the search path, and never initialised (docs/discovery.md).
  EXPECT_TRUE(Contains(s.message, "'target.kind.c'")) << s;
  EXPECT_TRUE(Contains(s.message, "'cpu'")) << s;
  EXPECT_TRUE(Contains(s.message, "'dup_kind_c'")) << s;
  const auto records = bptest::PluginRecords("dup_kind_c");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["state"], "skipped") << records[0].dump(2);
  // The cpu plugin's kind is untouched: it still has cc, which the duplicate lacks.
  EXPECT_EQ(Target::Parse("c").GetAttr<std::string>("cc"), "cc");
}

}  // namespace

namespace {

// Regression: the loader's "manifest declares X but did not register it" check once looked
// only in the function registry, so every target.kind.* and target.tag.* a plugin declared
// and registered was reported as missing, and `backplane info` warned about the cpu plugin.
TEST(CKindManifest, LoadedCpuPluginHasNoWarningForItsKindAndTag) {
  ASSERT_EQ(Target::Parse("c").Kind(), "c");
  const auto records = bptest::PluginRecords("cpu");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["state"], "loaded");
  const Json& reason = records[0]["reason"];
  EXPECT_TRUE(reason.is_null() || reason.get<std::string>().empty())
      << "spurious warning: " << reason.dump();
}

}  // namespace
