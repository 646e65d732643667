// SPDX-License-Identifier: Apache-2.0
// TargetKinds the Target tests register in-process, as a host application may: one kind with
// an attribute of every type (with and without defaults), one with a canonicalizer that
// derives and checks values, one whose attributes are read from a cpu device, one with no
// attributes, and a tag. Every test program registers them once, before its first test.
#ifndef BACKPLANE_TESTS_CORE_TARGET_TEST_KINDS_H_
#define BACKPLANE_TESTS_CORE_TARGET_TEST_KINDS_H_

#include <gtest/gtest.h>

#include <atomic>
#include <backplane/backplane.hpp>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace tk {

namespace bp = backplane;
using json = nlohmann::json;

// The status, kind and message of the last failing call on this thread.
struct Failure {
  bp_status_t status = BP_OK;
  std::string message;
};

inline std::string LastMessage() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "";
}

// Parses `text`; on success returns the canonical JSON in *out_json and BP_OK.
inline bp_status_t ParseToJson(const std::string& text, std::string* out_json,
                               std::string* out_message = nullptr) {
  bp_object_t* target = nullptr;
  bp_status_t st = bp_target_parse(text.c_str(), &target);
  if (st != BP_OK) {
    if (out_message != nullptr) *out_message = LastMessage();
    return st;
  }
  bp_object_t* js = nullptr;
  st = bp_target_to_json(target, &js);
  bp_object_release(target);
  if (st != BP_OK) {
    if (out_message != nullptr) *out_message = LastMessage();
    return st;
  }
  const char* data = nullptr;
  size_t size = 0;
  bp_string_get(js, &data, &size);
  *out_json = std::string(data, size);
  bp_object_release(js);
  return BP_OK;
}

// Parses `text`, expecting failure; returns the status and message.
inline Failure ParseFailure(const std::string& text) {
  Failure f;
  bp_object_t* target = nullptr;
  f.status = bp_target_parse(text.c_str(), &target);
  if (f.status == BP_OK) {
    bp_object_release(target);
    return f;
  }
  f.message = LastMessage();
  return f;
}

inline bp_target_attr_def_t Attr(const char* name, bp_target_attr_type_t type,
                                 const char* default_json = nullptr, int32_t device_attr = -1) {
  bp_target_attr_def_t a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.name = name;
  a.type = type;
  a.device_attr = device_attr;
  a.default_json = default_json;
  a.doc = "test attribute";
  return a;
}

inline bp_target_kind_def_t Kind(const char* name, const char* device_type, const char* const* keys,
                                 size_t num_keys, const bp_target_attr_def_t* attrs,
                                 size_t num_attrs) {
  bp_target_kind_def_t k;
  std::memset(&k, 0, sizeof(k));
  k.struct_size = sizeof(k);
  k.name = name;
  k.device_type = device_type;
  k.default_keys = keys;
  k.num_default_keys = num_keys;
  k.attrs = attrs;
  k.num_attrs = num_attrs;
  return k;
}

// Returns the canonicalizer's output to the core as a string object.
inline bp_status_t ReturnJson(const json& j, bp_object_t** out) {
  const std::string text = j.dump();
  return bp_string_create(text.data(), text.size(), out);
}

// tk_canon: area = width * height (a derived value: a given area must agree); width must
// be positive; mode must be "fast" or "slow". The canonicalizer counts its calls.
inline std::atomic<int> g_canon_calls{0};  // canonicalizers may run on several threads
inline bp_status_t CanonCanonicalize(void* self, const char* attrs_json, const DLDevice*,
                                     bp_object_t** out) {
  if (self != &g_canon_calls) return bp_error_set(BP_ERR_INTERNAL, "tk_canon: wrong self");
  ++*static_cast<std::atomic<int>*>(self);
  json a = json::parse(attrs_json);
  const int64_t width = a.at("width").get<int64_t>();
  const int64_t height = a.at("height").get<int64_t>();
  if (width <= 0) {
    return bp_error_set(BP_ERR_INVALID_ARGUMENT,
                        ("tk_canon: width must be positive, got " + std::to_string(width)).c_str());
  }
  const std::string mode = a.at("mode").get<std::string>();
  if (mode != "fast" && mode != "slow") {
    return bp_error_set(BP_ERR_INVALID_ARGUMENT,
                        ("tk_canon: mode must be fast or slow, got " + mode).c_str());
  }
  if (a.contains("area") && a["area"].get<int64_t>() != width * height) {
    return bp_error_set(BP_ERR_INVALID_ARGUMENT, "tk_canon: area disagrees with width * height");
  }
  a["area"] = width * height;
  return ReturnJson(a, out);
}

// tk_dev: records what the canonicalizer saw. When built from a device, "seen_device" is
// "<type>:<id>"; when parsed (device NULL) a given value is kept, so FromDevice output
// round-trips.
inline bp_status_t DevCanonicalize(void*, const char* attrs_json, const DLDevice* device,
                                   bp_object_t** out) {
  json a = json::parse(attrs_json);
  if (device != nullptr) {
    a["seen_device"] = std::to_string(static_cast<int>(device->device_type)) + ":" +
                       std::to_string(device->device_id);
  }
  return ReturnJson(a, out);
}

// tk_bad_canon: returns something that is not a JSON object, or an attribute of the wrong
// type, depending on "how"; the core must refuse either.
inline bp_status_t BadCanonicalize(void*, const char* attrs_json, const DLDevice*,
                                   bp_object_t** out) {
  json a = json::parse(attrs_json);
  const std::string how = a.at("how").get<std::string>();
  if (how == "not_object") return ReturnJson(json::array({1, 2}), out);
  if (how == "wrong_type") {
    a["count"] = "seven";
    return ReturnJson(a, out);
  }
  if (how == "unknown_attr") {
    a["bogus_attr"] = 1;
    return ReturnJson(a, out);
  }
  if (how == "kind_number") {
    a["kind"] = 5;
    return ReturnJson(a, out);
  }
  if (how == "bad_host") {
    a["host"] = 5;
    return ReturnJson(a, out);
  }
  if (how == "none") {
    *out = nullptr;
    return BP_OK;
  }
  if (how == "fails") return bp_error_set(BP_ERR_INVALID_ARGUMENT, "tk_bad_canon: told to fail");
  if (how == "throws") throw std::runtime_error("tk_bad_canon: a C++ exception");
  if (how == "garbage") {
    const char text[] = "{not json";
    return bp_string_create(text, sizeof(text) - 1, out);
  }
  return ReturnJson(a, out);
}

// The attributes of tk_all: one of every type with a default, and one without.
inline const std::vector<bp_target_attr_def_t>& AllAttrs() {
  static const std::vector<bp_target_attr_def_t> attrs = {
      Attr("flag", BP_TARGET_ATTR_BOOL, "false"),
      Attr("count", BP_TARGET_ATTR_INT, "3"),
      Attr("ratio", BP_TARGET_ATTR_FLOAT, "1.5"),
      Attr("label", BP_TARGET_ATTR_STRING, "\"plain\""),
      Attr("dims", BP_TARGET_ATTR_INT_ARRAY, "[1, 2]"),
      Attr("names", BP_TARGET_ATTR_STRING_ARRAY, "[\"a\", \"b\"]"),
      Attr("extra", BP_TARGET_ATTR_MAP, "{\"z\": 1, \"a\": [true, null]}"),
      Attr("opt-level", BP_TARGET_ATTR_INT, "2"),
      Attr("nd_flag", BP_TARGET_ATTR_BOOL),
      Attr("nd_count", BP_TARGET_ATTR_INT),
      Attr("nd_ratio", BP_TARGET_ATTR_FLOAT),
      Attr("nd_label", BP_TARGET_ATTR_STRING),
      Attr("nd_dims", BP_TARGET_ATTR_INT_ARRAY),
      Attr("nd_names", BP_TARGET_ATTR_STRING_ARRAY),
      Attr("nd_extra", BP_TARGET_ATTR_MAP),
  };
  return attrs;
}

// The canonical JSON of a bare tk_all: defaults filled, no-default attributes absent.
inline json AllDefaults() {
  return json{{"kind", "tk_all"},
              {"keys", {"tk_all", "tk_test"}},
              {"flag", false},
              {"count", 3},
              {"ratio", 1.5},
              {"label", "plain"},
              {"dims", {1, 2}},
              {"names", {"a", "b"}},
              {"extra", {{"z", 1}, {"a", {true, nullptr}}}},
              {"opt-level", 2}};
}

// Registers the test kinds and the tags once per process.
inline void RegisterTestKinds() {
  static std::once_flag once;
  std::call_once(once, [] {
    static const char* const kAllKeys[] = {"tk_all", "tk_test"};
    const auto& all = AllAttrs();
    bp_target_kind_def_t k = Kind("tk_all", "cpu", kAllKeys, 2, all.data(), all.size());
    ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << LastMessage();

    static const bp_target_attr_def_t kCanonAttrs[] = {
        Attr("width", BP_TARGET_ATTR_INT, "4"),
        Attr("height", BP_TARGET_ATTR_INT, "2"),
        Attr("area", BP_TARGET_ATTR_INT),
        Attr("mode", BP_TARGET_ATTR_STRING, "\"fast\""),
    };
    static const char* const kCanonKeys[] = {"tk_canon"};
    k = Kind("tk_canon", "cpu", kCanonKeys, 1, kCanonAttrs, 4);
    k.canonicalize = CanonCanonicalize;
    k.canonicalize_self = &g_canon_calls;
    ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << LastMessage();

    static const bp_target_attr_def_t kDevAttrs[] = {
        Attr("device_name", BP_TARGET_ATTR_STRING, nullptr, BP_ATTR_DEVICE_NAME),
        Attr("cores", BP_TARGET_ATTR_INT, nullptr, BP_ATTR_MULTI_PROCESSOR_COUNT),
        Attr("total_memory", BP_TARGET_ATTR_INT, nullptr, BP_ATTR_TOTAL_GLOBAL_MEMORY),
        // cpu answers none for these two: the default stays / the attribute stays absent.
        Attr("warp", BP_TARGET_ATTR_INT, "1", BP_ATTR_WARP_SIZE),
        Attr("arch", BP_TARGET_ATTR_STRING, nullptr, BP_ATTR_COMPUTE_VERSION),
        Attr("opt", BP_TARGET_ATTR_INT, "3"),
        Attr("seen_device", BP_TARGET_ATTR_STRING),
    };
    static const char* const kDevKeys[] = {"tk_dev", "cpu"};
    k = Kind("tk_dev", "cpu", kDevKeys, 2, kDevAttrs, 7);
    k.canonicalize = DevCanonicalize;
    ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << LastMessage();

    k = Kind("tk_empty", "cpu", nullptr, 0, nullptr, 0);
    ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << LastMessage();

    static const bp_target_attr_def_t kBadAttrs[] = {
        Attr("how", BP_TARGET_ATTR_STRING, "\"fine\""),
        Attr("count", BP_TARGET_ATTR_INT, "1"),
    };
    k = Kind("tk_bad_canon", "cpu", nullptr, 0, kBadAttrs, 2);
    k.canonicalize = BadCanonicalize;
    ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << LastMessage();

    ASSERT_EQ(bp_target_tag_register("tk/seven", "tk_all -count=7 -label=tagged"), BP_OK)
        << LastMessage();
    ASSERT_EQ(bp_target_tag_register("tk/json", "{\"kind\": \"tk_canon\", \"width\": 10}"), BP_OK)
        << LastMessage();
  });
}

// Registers the kinds before any test of the program runs.
class KindsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { RegisterTestKinds(); }
};

}  // namespace tk

#endif  // BACKPLANE_TESTS_CORE_TARGET_TEST_KINDS_H_
