// SPDX-License-Identifier: Apache-2.0
// Targets: every accepted form of the test kinds parses, prints canonical JSON and
// round-trips; tags; nesting with host; keys; typed getters in C and C++; concurrency.
// The errors are in target_errors_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <backplane/backplane.hpp>
#include <string>
#include <thread>
#include <vector>

#include "target_test_kinds.h"

namespace {

using tk::json;
namespace bp = backplane;

class TargetTest : public ::testing::Test {
 protected:
  void SetUp() override { tk::RegisterTestKinds(); }
};

// Every object in `j` lists its keys in sorted order (the text, not the parsed map).
void ExpectSortedKeys(const nlohmann::ordered_json& j, const std::string& where) {
  if (j.is_object()) {
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys.push_back(it.key());
      ExpectSortedKeys(it.value(), where + "." + it.key());
    }
    EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end())) << "keys not sorted at " << where;
  } else if (j.is_array()) {
    for (const auto& e : j) ExpectSortedKeys(e, where + "[]");
  }
}

// Parses `text`, checks the canonical JSON against `expected`, that it is canonical (sorted
// keys, one object) and that parsing it again gives the same canonical text.
void ExpectParses(const std::string& text, const json& expected) {
  SCOPED_TRACE("input: " + text);
  std::string out, message;
  ASSERT_EQ(tk::ParseToJson(text, &out, &message), BP_OK) << message;
  json got = json::parse(out);
  EXPECT_EQ(got, expected) << "canonical JSON: " << out;
  ExpectSortedKeys(nlohmann::ordered_json::parse(out), "$");
  std::string again;
  ASSERT_EQ(tk::ParseToJson(out, &again, &message), BP_OK)
      << "re-parse of " << out << ": " << message;
  EXPECT_EQ(again, out) << "canonical JSON does not round-trip";
}

json AllWith(std::initializer_list<std::pair<const std::string, json>> changes) {
  json j = tk::AllDefaults();
  for (const auto& [k, v] : changes) j[k] = v;
  return j;
}

TEST_F(TargetTest, BareKindNameGivesDefaults) {
  ExpectParses("tk_all", tk::AllDefaults());
  ExpectParses("{\"kind\": \"tk_all\"}", tk::AllDefaults());
  ExpectParses("tk_all", json::parse("{\"kind\": \"tk_all\", \"keys\": [\"tk_all\", "
                                     "\"tk_test\"], \"flag\": false, \"count\": 3, \"ratio\": "
                                     "1.5, \"label\": \"plain\", \"dims\": [1, 2], \"names\": "
                                     "[\"a\", \"b\"], \"extra\": {\"a\": [true, null], \"z\": "
                                     "1}, \"opt-level\": 2}"));
}

TEST_F(TargetTest, CanonicalTextIsOneCompactSortedObject) {
  std::string out, message;
  ASSERT_EQ(tk::ParseToJson("tk_all -count=9", &out, &message), BP_OK) << message;
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front(), '{');
  EXPECT_EQ(out.back(), '}');
  // "kind" sorts after "extra" etc.; every attribute is present once.
  nlohmann::ordered_json o = nlohmann::ordered_json::parse(out);
  EXPECT_EQ(o.size(), tk::AllDefaults().size());
  ExpectSortedKeys(o, "$");
  // Same Target from two forms gives byte-identical text.
  std::string other;
  ASSERT_EQ(tk::ParseToJson("{\"count\": 9, \"kind\": \"tk_all\"}", &other, &message), BP_OK)
      << message;
  EXPECT_EQ(other, out);
}

TEST_F(TargetTest, JsonFormEveryAttribute) {
  json in = {{"kind", "tk_all"},
             {"flag", true},
             {"count", -42},
             {"ratio", 0.25},
             {"label", "with \"quotes\", spaces and \\ \u00e9\u4e2d"},
             {"dims", json::array()},
             {"names", {"x", "", "y z"}},
             {"extra", {{"nested", {{"deep", {1, 2.5, "s", nullptr, false}}}}}},
             {"opt-level", 0},
             {"nd_flag", false},
             {"nd_count", 9007199254740993LL},
             {"nd_ratio", -1e-300},
             {"nd_label", ""},
             {"nd_dims", {-1, 0, 1}},
             {"nd_names", json::array()},
             {"nd_extra", json::object()}};
  json expected = in;
  expected["keys"] = {"tk_all", "tk_test"};
  ExpectParses(in.dump(), expected);
}

TEST_F(TargetTest, FloatAcceptsIntegers) {
  ExpectParses("{\"kind\": \"tk_all\", \"ratio\": 2}", AllWith({{"ratio", 2.0}}));
  ExpectParses("tk_all -ratio=2", AllWith({{"ratio", 2.0}}));
  bp::Target t = bp::Target::Parse("{\"kind\": \"tk_all\", \"ratio\": 2}");
  bp_value_t v;
  ASSERT_EQ(bp_target_get_attr(t.object().get(), "ratio", &v), BP_OK) << tk::LastMessage();
  EXPECT_EQ(v.type, BP_VALUE_FLOAT) << "a float attribute given as 2 is still a float";
  EXPECT_EQ(v.u.v_float64, 2.0);
}

TEST_F(TargetTest, StringFormAcceptsSubnormalFloats) {
  // JSON takes 5e-324 and prints it; the string form must take what the JSON form prints
  // (strtod reports ERANGE for a subnormal result, which is not an overflow).
  ExpectParses("{\"kind\": \"tk_all\", \"ratio\": 5e-324}", AllWith({{"ratio", 5e-324}}));
  ExpectParses("tk_all -ratio=5e-324", AllWith({{"ratio", 5e-324}}));
  ExpectParses("tk_all -ratio=2.2250738585072009e-308",
               AllWith({{"ratio", 2.2250738585072009e-308}}));
}

TEST_F(TargetTest, IntegersAtTheLimits) {
  ExpectParses("{\"kind\": \"tk_all\", \"count\": 9223372036854775807}",
               AllWith({{"count", INT64_MAX}}));
  ExpectParses("{\"kind\": \"tk_all\", \"count\": -9223372036854775808}",
               AllWith({{"count", INT64_MIN}}));
  ExpectParses("tk_all -count=-9223372036854775808", AllWith({{"count", INT64_MIN}}));
  ExpectParses("tk_all -count=9223372036854775807", AllWith({{"count", INT64_MAX}}));
}

TEST_F(TargetTest, StringFormEveryType) {
  ExpectParses(
      "tk_all -flag -count=-5 -ratio=2.25 -label='hello world' -dims=4,5,6 -names=x,y "
      "-opt-level=0 -nd_label=\"double quoted\" -nd_flag=false -nd_count=0 -nd_dims=7 "
      "-nd_names=solo",
      AllWith({{"flag", true},
               {"count", -5},
               {"ratio", 2.25},
               {"label", "hello world"},
               {"dims", {4, 5, 6}},
               {"names", {"x", "y"}},
               {"opt-level", 0},
               {"nd_label", "double quoted"},
               {"nd_flag", false},
               {"nd_count", 0},
               {"nd_dims", {7}},
               {"nd_names", {"solo"}}}));
}

TEST_F(TargetTest, StringFormBoolSpellings) {
  ExpectParses("tk_all -flag", AllWith({{"flag", true}}));
  ExpectParses("tk_all -flag=true", AllWith({{"flag", true}}));
  ExpectParses("tk_all -flag=1", AllWith({{"flag", true}}));
  ExpectParses("tk_all -flag=false", AllWith({{"flag", false}}));
  ExpectParses("tk_all -flag=0", AllWith({{"flag", false}}));
  json nd = tk::AllDefaults();
  nd["nd_flag"] = true;
  ExpectParses("tk_all -nd_flag", nd);
}

TEST_F(TargetTest, StringFormWhitespaceAndQuotes) {
  ExpectParses("tk_all   -count=4\t-label=x", AllWith({{"count", 4}, {"label", "x"}}));
  // A quoted value keeps spaces, the other quote and what would otherwise start a key; commas
  // still separate array elements (as TVM's -mattr="+a,+b").
  ExpectParses("tk_all -label='say \"hi\" -count=1'", AllWith({{"label", "say \"hi\" -count=1"}}));
  ExpectParses("tk_all -label=\"it's\"", AllWith({{"label", "it's"}}));
  ExpectParses("tk_all -label=a=b", AllWith({{"label", "a=b"}}));
  ExpectParses("tk_all -label=\xC3\xA9t\xC3\xA9", AllWith({{"label", "\xC3\xA9t\xC3\xA9"}}));
  ExpectParses("tk_all -names=\"x y,z\"", AllWith({{"names", {"x y", "z"}}}));
}

TEST_F(TargetTest, LaterValueOfTheSameKeyWinsOrIsRefused) {
  // Either answer is defensible; what is not is silently keeping the first value.
  std::string out, message;
  bp_status_t st = tk::ParseToJson("tk_all -count=1 -count=2", &out, &message);
  if (st == BP_OK) {
    EXPECT_EQ(json::parse(out).at("count"), 2) << out;
  } else {
    EXPECT_NE(message.find("count"), std::string::npos) << message;
  }
}

TEST_F(TargetTest, KeysDefaultsAppendedWhenMissing) {
  ExpectParses("{\"kind\": \"tk_all\", \"keys\": [\"mine\"]}",
               AllWith({{"keys", {"mine", "tk_all", "tk_test"}}}));
  ExpectParses("{\"kind\": \"tk_all\", \"keys\": [\"tk_test\", \"mine\"]}",
               AllWith({{"keys", {"tk_test", "mine", "tk_all"}}}));
  ExpectParses("{\"kind\": \"tk_all\", \"keys\": [\"tk_all\", \"tk_test\"]}", tk::AllDefaults());
  ExpectParses("tk_all -keys=mine,tk_all", AllWith({{"keys", {"mine", "tk_all", "tk_test"}}}));
  bp::Target t = bp::Target::Parse("tk_all -keys=mine");
  EXPECT_EQ(t.Keys(), (std::vector<std::string>{"mine", "tk_all", "tk_test"}));
}

TEST_F(TargetTest, KindWithoutAttributesOrKeys) {
  std::string out, message;
  ASSERT_EQ(tk::ParseToJson("tk_empty", &out, &message), BP_OK) << message;
  json j = json::parse(out);
  EXPECT_EQ(j.at("kind"), "tk_empty");
  ASSERT_TRUE(j.at("keys").is_array()) << out;
  EXPECT_EQ(j.size(), 2u) << "only kind and keys: " << out;
  ExpectParses(out, j);
  ExpectParses("{\"kind\": \"tk_empty\"}", j);
}

TEST_F(TargetTest, TagForms) {
  json seven = AllWith({{"count", 7}, {"label", "tagged"}, {"tag", "tk/seven"}});
  ExpectParses("tk/seven", seven);
  // A tag first, then overrides.
  json eight = seven;
  eight["count"] = 8;
  eight["flag"] = true;
  ExpectParses("tk/seven -count=8 -flag", eight);
  // A tag over a kind with a canonicalizer: derived values come out.
  ExpectParses("tk/json", json{{"kind", "tk_canon"},
                               {"keys", {"tk_canon"}},
                               {"width", 10},
                               {"height", 2},
                               {"area", 20},
                               {"mode", "fast"},
                               {"tag", "tk/json"}});
  ExpectParses("tk/json -height=3", json{{"kind", "tk_canon"},
                                         {"keys", {"tk_canon"}},
                                         {"width", 10},
                                         {"height", 3},
                                         {"area", 30},
                                         {"mode", "fast"},
                                         {"tag", "tk/json"}});
  bp::Target t = bp::Target::Parse("tk/seven");
  EXPECT_EQ(t.Kind(), "tk_all");
  EXPECT_EQ(t.GetAttr<std::string>("tag"), "tk/seven");
  EXPECT_EQ(t.GetAttr<int64_t>("count"), 7);
}

TEST_F(TargetTest, TagAttributeInJsonIsKept) {
  ExpectParses("{\"kind\": \"tk_all\", \"tag\": \"my/tag\"}", AllWith({{"tag", "my/tag"}}));
}

TEST_F(TargetTest, TagsAreListedInDescribe) {
  json d = json::parse(bp::TargetKinds::Describe());
  ASSERT_TRUE(d.contains("tags")) << d.dump();
  ASSERT_TRUE(d.contains("kinds")) << d.dump();
  EXPECT_TRUE(d["tags"].contains("tk/seven")) << d["tags"].dump();
  EXPECT_TRUE(d["tags"].contains("tk/json")) << d["tags"].dump();
  bool found = false;
  for (const auto& k : d["kinds"]) {
    if (k.value("name", "") != "tk_all") continue;
    found = true;
    const std::string text = k.dump();
    EXPECT_NE(text.find("cpu"), std::string::npos) << text;
    for (const char* attr :
         {"flag", "count", "ratio", "label", "dims", "names", "extra", "opt-level"}) {
      EXPECT_NE(text.find(std::string("\"") + attr + "\""), std::string::npos)
          << attr << " missing from " << text;
    }
  }
  EXPECT_TRUE(found) << "tk_all missing from describe: " << d.dump();
}

TEST_F(TargetTest, TagRegistrationErrors) {
  // Registering a tag twice is refused and names the tag.
  EXPECT_EQ(bp_target_tag_register("tk/seven", "tk_all"), BP_ERR_ALREADY_EXISTS);
  EXPECT_NE(tk::LastMessage().find("tk/seven"), std::string::npos) << tk::LastMessage();
  // A tag whose text does not parse is refused at registration, with the parse error.
  EXPECT_NE(bp_target_tag_register("tk/broken", "tk_all -count=abc"), BP_OK);
  EXPECT_NE(tk::LastMessage().find("abc"), std::string::npos) << tk::LastMessage();
  tk::Failure f = tk::ParseFailure("tk/broken");
  EXPECT_NE(f.status, BP_OK) << "a refused tag must not be registered";
}

TEST_F(TargetTest, CanonicalizerDerivesAndChecks) {
  const int before = tk::g_canon_calls;
  ExpectParses("tk_canon", json{{"kind", "tk_canon"},
                                {"keys", {"tk_canon"}},
                                {"width", 4},
                                {"height", 2},
                                {"area", 8},
                                {"mode", "fast"}});
  EXPECT_GT(tk::g_canon_calls, before) << "the canonicalizer did not run";
  ExpectParses("tk_canon -width=3 -height=5 -mode=slow", json{{"kind", "tk_canon"},
                                                              {"keys", {"tk_canon"}},
                                                              {"width", 3},
                                                              {"height", 5},
                                                              {"area", 15},
                                                              {"mode", "slow"}});
  ExpectParses("{\"kind\": \"tk_canon\", \"area\": 8}", json{{"kind", "tk_canon"},
                                                             {"keys", {"tk_canon"}},
                                                             {"width", 4},
                                                             {"height", 2},
                                                             {"area", 8},
                                                             {"mode", "fast"}});
  // The canonicalizer's own errors reach the caller.
  tk::Failure f = tk::ParseFailure("tk_canon -width=0");
  EXPECT_EQ(f.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(f.message.find("width must be positive"), std::string::npos) << f.message;
  f = tk::ParseFailure("tk_canon -mode=medium");
  EXPECT_EQ(f.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(f.message.find("medium"), std::string::npos) << f.message;
  f = tk::ParseFailure("{\"kind\": \"tk_canon\", \"area\": 9}");
  EXPECT_EQ(f.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(f.message.find("area"), std::string::npos) << f.message;
}

TEST_F(TargetTest, CanonicalizerOutputIsCheckedAgainstTheSchema) {
  ExpectParses(
      "tk_bad_canon",
      json{{"kind", "tk_bad_canon"}, {"keys", json::array()}, {"how", "fine"}, {"count", 1}});
  for (const char* how : {"not_object", "wrong_type", "unknown_attr", "garbage", "kind_number",
                          "bad_host", "none", "fails", "throws"}) {
    tk::Failure f = tk::ParseFailure(std::string("tk_bad_canon -how=") + how);
    EXPECT_NE(f.status, BP_OK) << how << ": a bad canonicalizer result was accepted";
    EXPECT_NE(f.status, BP_ERR_INTERNAL)
        << how << ": a plugin's fault is not a core bug: " << f.message;
    EXPECT_NE(f.message.find("tk_bad_canon"), std::string::npos)
        << how << ": the message should name the kind: " << f.message;
  }
  tk::Failure f = tk::ParseFailure("tk_bad_canon -how=wrong_type");
  EXPECT_NE(f.message.find("count"), std::string::npos) << f.message;
  f = tk::ParseFailure("tk_bad_canon -how=unknown_attr");
  EXPECT_NE(f.message.find("bogus_attr"), std::string::npos) << f.message;
  f = tk::ParseFailure("tk_bad_canon -how=fails");
  EXPECT_EQ(f.status, BP_ERR_INVALID_ARGUMENT) << f.message;
  EXPECT_NE(f.message.find("told to fail"), std::string::npos) << f.message;
}

TEST_F(TargetTest, HostNesting) {
  json host = {{"kind", "tk_canon"}, {"keys", {"tk_canon"}}, {"width", 4}, {"height", 2},
               {"area", 8},          {"mode", "fast"}};
  ExpectParses("{\"kind\": \"tk_all\", \"host\": {\"kind\": \"tk_canon\"}}",
               AllWith({{"host", host}}));
  // The host's own host, and its attributes.
  json inner = tk::AllDefaults();
  inner["count"] = 11;
  json outer_host = host;
  outer_host["host"] = inner;
  ExpectParses(
      "{\"kind\": \"tk_all\", \"host\": {\"kind\": \"tk_canon\", \"host\": {\"kind\": "
      "\"tk_all\", \"count\": 11}}}",
      AllWith({{"host", outer_host}}));

  bp::Target t = bp::Target::Parse("{\"kind\": \"tk_all\", \"host\": {\"kind\": \"tk_canon\"}}");
  std::optional<bp::Target> h = t.Host();
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->Kind(), "tk_canon");
  EXPECT_EQ(h->GetAttr<int64_t>("area"), 8);
  EXPECT_EQ(*h, bp::Target::Parse("tk_canon"));
  EXPECT_FALSE(bp::Target::Parse("tk_all").Host().has_value());
  // Errors inside the host name the host's attribute.
  tk::Failure f = tk::ParseFailure(
      "{\"kind\": \"tk_all\", \"host\": {\"kind\": \"tk_canon\", "
      "\"widht\": 3}}");
  EXPECT_EQ(f.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(f.message.find("widht"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("width"), std::string::npos) << f.message;
}

TEST_F(TargetTest, HostGivenAsTextInAnyForm) {
  json host = {{"kind", "tk_canon"}, {"keys", {"tk_canon"}}, {"width", 4}, {"height", 2},
               {"area", 8},          {"mode", "fast"}};
  ExpectParses("{\"kind\": \"tk_all\", \"host\": \"tk_canon\"}", AllWith({{"host", host}}));
  json seven = AllWith({{"count", 7}, {"label", "tagged"}, {"tag", "tk/seven"}});
  ExpectParses("{\"kind\": \"tk_empty\", \"host\": \"tk/seven\"}",
               json{{"kind", "tk_empty"}, {"keys", json::array()}, {"host", seven}});
}

TEST_F(TargetTest, FromDeviceAttributeRoundTrips) {
  ExpectParses("{\"kind\": \"tk_all\", \"from_device\": 0}", AllWith({{"from_device", 0}}));
  bp::Target t = bp::Target::Parse("{\"kind\": \"tk_all\", \"from_device\": 2}");
  EXPECT_EQ(t.GetAttr<int64_t>("from_device"), 2);
  // A parsed Target does not claim to come from a device.
  bp::Target plain = bp::Target::Parse("tk_all");
  std::optional<int64_t> fd = plain.GetAttr<int64_t>("from_device");
  EXPECT_TRUE(!fd.has_value() || *fd == -1) << *fd;
  EXPECT_FALSE(json::parse(plain.ToJson()).contains("from_device")) << plain.ToJson();
}

TEST_F(TargetTest, CTypedGetters) {
  bp::Target t = bp::Target::Parse(
      "{\"kind\": \"tk_all\", \"flag\": true, \"count\": -7, \"ratio\": 0.5, \"label\": \"L\", "
      "\"dims\": [3, -4], \"names\": [\"p\", \"q\"], \"extra\": {\"k\": [1]}, \"tag\": \"tg\", "
      "\"host\": \"tk_empty\"}");
  const bp_object_t* o = t.object().get();
  int32_t type = 0;
  ASSERT_EQ(bp_object_type(o, &type), BP_OK);
  EXPECT_EQ(type, BP_OBJECT_TARGET);
  const char* kind = nullptr;
  ASSERT_EQ(bp_target_kind(o, &kind), BP_OK);
  EXPECT_STREQ(kind, "tk_all");

  bp_value_t v;
  ASSERT_EQ(bp_target_get_attr(o, "flag", &v), BP_OK);
  EXPECT_EQ(v.type, BP_VALUE_INT);
  EXPECT_EQ(v.u.v_int64, 1);
  ASSERT_EQ(bp_target_get_attr(o, "count", &v), BP_OK);
  EXPECT_EQ(v.type, BP_VALUE_INT);
  EXPECT_EQ(v.u.v_int64, -7);
  ASSERT_EQ(bp_target_get_attr(o, "ratio", &v), BP_OK);
  EXPECT_EQ(v.type, BP_VALUE_FLOAT);
  EXPECT_EQ(v.u.v_float64, 0.5);
  ASSERT_EQ(bp_target_get_attr(o, "label", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  EXPECT_EQ(bp::GetString(v.u.v_obj), "L");
  bp_object_release(v.u.v_obj);
  ASSERT_EQ(bp_target_get_attr(o, "tag", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  EXPECT_EQ(bp::GetString(v.u.v_obj), "tg");
  bp_object_release(v.u.v_obj);

  ASSERT_EQ(bp_target_get_attr(o, "dims", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  ASSERT_EQ(bp_object_type(v.u.v_obj, &type), BP_OK);
  EXPECT_EQ(type, BP_OBJECT_ARRAY);
  size_t n = 0;
  ASSERT_EQ(bp_array_size(v.u.v_obj, &n), BP_OK);
  ASSERT_EQ(n, 2u);
  bp_value_t e;
  ASSERT_EQ(bp_array_get(v.u.v_obj, 1, &e), BP_OK);
  EXPECT_EQ(e.type, BP_VALUE_INT);
  EXPECT_EQ(e.u.v_int64, -4);
  bp_object_release(v.u.v_obj);

  ASSERT_EQ(bp_target_get_attr(o, "names", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  EXPECT_EQ(bp::GetStringArray(v.u.v_obj), (std::vector<std::string>{"p", "q"}));
  bp_object_release(v.u.v_obj);

  ASSERT_EQ(bp_target_get_attr(o, "extra", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  ASSERT_EQ(bp_object_type(v.u.v_obj, &type), BP_OK);
  EXPECT_EQ(type, BP_OBJECT_STRING);
  EXPECT_EQ(json::parse(bp::GetString(v.u.v_obj)), json::parse("{\"k\": [1]}"));
  bp_object_release(v.u.v_obj);

  ASSERT_EQ(bp_target_get_attr(o, "keys", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  EXPECT_EQ(bp::GetStringArray(v.u.v_obj), (std::vector<std::string>{"tk_all", "tk_test"}));
  bp_object_release(v.u.v_obj);

  ASSERT_EQ(bp_target_get_attr(o, "host", &v), BP_OK);
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  ASSERT_EQ(bp_object_type(v.u.v_obj, &type), BP_OK);
  EXPECT_EQ(type, BP_OBJECT_TARGET);
  ASSERT_EQ(bp_target_kind(v.u.v_obj, &kind), BP_OK);
  EXPECT_STREQ(kind, "tk_empty");
  bp_object_release(v.u.v_obj);

  // Declared but absent: none.
  for (const char* absent :
       {"nd_flag", "nd_count", "nd_ratio", "nd_label", "nd_dims", "nd_names", "nd_extra"}) {
    v.type = BP_VALUE_INT;
    ASSERT_EQ(bp_target_get_attr(o, absent, &v), BP_OK) << absent << ": " << tk::LastMessage();
    EXPECT_EQ(v.type, BP_VALUE_NONE) << absent;
  }
  v.type = BP_VALUE_INT;
  ASSERT_EQ(bp_target_get_attr(bp::Target::Parse("tk_all").object().get(), "host", &v), BP_OK);
  EXPECT_EQ(v.type, BP_VALUE_NONE);
}

TEST_F(TargetTest, CppGetAttr) {
  bp::Target t = bp::Target::Parse(
      "tk_all -flag -count=12 -ratio=0.75 -label=hi -dims=1,2,3 -names=u,v -nd_count=5");
  EXPECT_EQ(t.Kind(), "tk_all");
  EXPECT_EQ(t.GetAttr<bool>("flag"), true);
  EXPECT_EQ(t.GetAttr<int64_t>("count"), 12);
  EXPECT_EQ(t.GetAttr<int>("count"), 12);
  EXPECT_EQ(t.GetAttr<double>("ratio"), 0.75);
  EXPECT_EQ(t.GetAttr<std::string>("label"), "hi");
  EXPECT_EQ(t.GetAttr<std::vector<int64_t>>("dims"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(t.GetAttr<std::vector<std::string>>("names"), (std::vector<std::string>{"u", "v"}));
  EXPECT_EQ(json::parse(*t.GetAttr<std::string>("extra")), tk::AllDefaults()["extra"]);
  EXPECT_EQ(t.GetAttr<int64_t>("nd_count"), 5);
  EXPECT_EQ(t.GetAttr<int64_t>("opt-level"), 2);
  // Absent with and without a fallback.
  EXPECT_FALSE(t.GetAttr<int64_t>("nd_ratio").has_value());
  EXPECT_EQ(t.GetAttr<double>("nd_ratio", 9.5), 9.5);
  EXPECT_EQ(t.GetAttr<int64_t>("count", 99), 12);
  EXPECT_EQ(t.GetAttr<std::string>("nd_label", "fb"), "fb");
  // A T that does not fit the type throws a type error.
  try {
    t.GetAttr<std::string>("count");
    ADD_FAILURE() << "an int read as a string";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_TYPE) << e.what();
  }
  try {
    t.GetAttr<int64_t>("label");
    ADD_FAILURE() << "a string read as an int";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_TYPE) << e.what();
  }
  // An undeclared name throws, naming the nearest.
  try {
    t.GetAttr<int64_t>("cuont");
    ADD_FAILURE() << "an undeclared attribute was read";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("cuont"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("count"), std::string::npos) << e.what();
  }
}

TEST_F(TargetTest, GetAttrArgumentChecks) {
  bp::Target t = bp::Target::Parse("tk_all");
  bp_value_t v;
  EXPECT_EQ(bp_target_get_attr(nullptr, "count", &v), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_target_get_attr(t.object().get(), nullptr, &v), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_target_get_attr(t.object().get(), "count", nullptr), BP_ERR_INVALID_ARGUMENT);
  // Not a Target.
  bp::ObjectRef s = bp::MakeString("tk_all");
  EXPECT_NE(bp_target_get_attr(s.get(), "count", &v), BP_OK);
  const char* kind = nullptr;
  EXPECT_NE(bp_target_kind(s.get(), &kind), BP_OK);
  bp_object_t* js = nullptr;
  EXPECT_NE(bp_target_to_json(s.get(), &js), BP_OK);
  EXPECT_EQ(js, nullptr);
  EXPECT_EQ(bp_target_parse(nullptr, &js), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_target_parse("tk_all", nullptr), BP_ERR_INVALID_ARGUMENT);
}

TEST_F(TargetTest, EqualityIsByCanonicalJson) {
  EXPECT_EQ(bp::Target::Parse("tk_all"), bp::Target::Parse("{\"kind\": \"tk_all\", \"count\": 3}"));
  EXPECT_EQ(bp::Target::Parse("tk_all -flag"), bp::Target::Parse("tk_all -flag=1"));
  EXPECT_NE(bp::Target::Parse("tk_all"), bp::Target::Parse("tk_all -count=4"));
  EXPECT_NE(bp::Target::Parse("tk_all"), bp::Target::Parse("tk/seven"));
}

TEST_F(TargetTest, TargetsOutliveCopiesAndAreShared) {
  bp_object_t* raw = nullptr;
  ASSERT_EQ(bp_target_parse("tk/seven", &raw), BP_OK);
  ASSERT_EQ(bp_object_retain(raw), BP_OK);
  ASSERT_EQ(bp_object_release(raw), BP_OK);
  const char* kind = nullptr;
  ASSERT_EQ(bp_target_kind(raw, &kind), BP_OK);
  EXPECT_STREQ(kind, "tk_all");
  bp_value_t host;
  bp_object_t* with_host = nullptr;
  ASSERT_EQ(
      bp_target_parse("{\"kind\": \"tk_empty\", \"host\": {\"kind\": \"tk_all\"}}", &with_host),
      BP_OK);
  ASSERT_EQ(bp_target_get_attr(with_host, "host", &host), BP_OK);
  ASSERT_EQ(host.type, BP_VALUE_OBJECT);
  // The host reference outlives its parent.
  bp_object_release(with_host);
  ASSERT_EQ(bp_target_kind(host.u.v_obj, &kind), BP_OK);
  EXPECT_STREQ(kind, "tk_all");
  bp_object_release(host.u.v_obj);
  bp_object_release(raw);
}

TEST_F(TargetTest, ParseFromEightThreads) {
  const std::vector<std::string> inputs = {
      "tk_all",
      "tk/seven -count=8",
      "tk_canon -width=3",
      "{\"kind\": \"tk_all\", \"dims\": [9]}",
      "tk/json",
      "{\"kind\": \"tk_empty\", \"host\": {\"kind\": \"tk_canon\"}}",
      "tk_all -names=a,b,c -label='x y'"};
  std::vector<std::string> expected(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string message;
    ASSERT_EQ(tk::ParseToJson(inputs[i], &expected[i], &message), BP_OK) << message;
  }
  std::atomic<int> mismatches{0}, failures{0}, error_checks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 300; ++r) {
        const size_t i = static_cast<size_t>(t + r) % inputs.size();
        std::string out, message;
        if (tk::ParseToJson(inputs[i], &out, &message) != BP_OK) {
          ++failures;
        } else if (out != expected[i]) {
          ++mismatches;
        }
        // A failure on this thread leaves its own message, whatever the others do.
        if (r % 10 == 0) {
          tk::Failure f = tk::ParseFailure("tk_all -count=bad" + std::to_string(t));
          if (f.message.find("bad" + std::to_string(t)) != std::string::npos) ++error_checks;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(error_checks.load(), 8 * 30);
}

}  // namespace
