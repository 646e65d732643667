// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the Target parser (bp_target_parse): any bytes in, no crash, hang or
// leak out. Every Target that parses must print canonical JSON that parses back to the same
// text, and its attributes must read back; a failure must be a proper error with a message.
// An internal error is a core bug and aborts, so the fuzzer reports the input -- set
// BACKPLANE_FUZZ_TOLERATE_INTERNAL=1 to keep going past a known one while triaging.
//
// Built with clang -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt); the same file with
// replay_main.cc replays the seed corpus under any compiler.
#include <backplane/c_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "target_parser_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

std::string LastMessage() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "";
}

std::string ToJson(const bp_object_t* target) {
  bp_object_t* js = nullptr;
  if (bp_target_to_json(target, &js) != BP_OK) Die("to_json failed", LastMessage());
  const char* data = nullptr;
  size_t size = 0;
  if (bp_string_get(js, &data, &size) != BP_OK) Die("to_json gave no string", LastMessage());
  std::string out(data, size);
  bp_object_release(js);
  return out;
}

bp_target_attr_def_t Attr(const char* name, bp_target_attr_type_t type, const char* def) {
  bp_target_attr_def_t a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.name = name;
  a.type = type;
  a.device_attr = -1;
  a.default_json = def;
  return a;
}

const bp_target_attr_def_t kAllAttrs[] = {
    Attr("b", BP_TARGET_ATTR_BOOL, "false"),
    Attr("n", BP_TARGET_ATTR_INT, "3"),
    Attr("f", BP_TARGET_ATTR_FLOAT, "0.5"),
    Attr("s", BP_TARGET_ATTR_STRING, "\"x\""),
    Attr("ia", BP_TARGET_ATTR_INT_ARRAY, "[1, 2]"),
    Attr("sa", BP_TARGET_ATTR_STRING_ARRAY, "[\"a\"]"),
    Attr("m", BP_TARGET_ATTR_MAP, "{}"),
    Attr("num-cores", BP_TARGET_ATTR_INT, nullptr),
    Attr("ns", BP_TARGET_ATTR_STRING, nullptr),
    Attr("nsa", BP_TARGET_ATTR_STRING_ARRAY, nullptr),
};
const char* const kAttrNames[] = {"b",  "n",   "f",    "s",   "ia",   "sa",          "m",
                                  "ns", "nsa", "keys", "tag", "host", "from_device", "num-cores"};
const bp_target_attr_def_t kCanonAttrs[] = {
    Attr("w", BP_TARGET_ATTR_INT, "4"),
    Attr("h", BP_TARGET_ATTR_INT, "2"),
    Attr("area", BP_TARGET_ATTR_INT, nullptr),
};

// fz_canon: area = w * h (wrapping, as the input may be anything); refuses w < 0.
bp_status_t Canonicalize(void*, const char* attrs_json, const DLDevice*, bp_object_t** out) {
  try {
    nlohmann::json a = nlohmann::json::parse(attrs_json);
    const int64_t w = a.at("w").get<int64_t>();
    const int64_t h = a.at("h").get<int64_t>();
    if (w < 0) return bp_error_set(BP_ERR_INVALID_ARGUMENT, "fz_canon: w must not be negative");
    a["area"] = static_cast<int64_t>(static_cast<uint64_t>(w) * static_cast<uint64_t>(h));
    const std::string text = a.dump();
    return bp_string_create(text.data(), text.size(), out);
  } catch (const std::exception& e) {
    // The core hands over checked attributes; anything else is its bug.
    Die("fz_canon got attributes it cannot read", std::string(e.what()) + "\n" + attrs_json);
  }
}

void Register() {
  static const char* const kKeys[] = {"fz", "cpu"};
  bp_target_kind_def_t k;
  std::memset(&k, 0, sizeof(k));
  k.struct_size = sizeof(k);
  k.name = "fz_all";
  k.device_type = "cpu";
  k.default_keys = kKeys;
  k.num_default_keys = 2;
  k.attrs = kAllAttrs;
  k.num_attrs = sizeof(kAllAttrs) / sizeof(kAllAttrs[0]);
  if (bp_target_kind_register(&k) != BP_OK) Die("registering fz_all", LastMessage());
  k.name = "fz_canon";
  k.num_default_keys = 1;
  k.attrs = kCanonAttrs;
  k.num_attrs = sizeof(kCanonAttrs) / sizeof(kCanonAttrs[0]);
  k.canonicalize = Canonicalize;
  if (bp_target_kind_register(&k) != BP_OK) Die("registering fz_canon", LastMessage());
  k.name = "fz_empty";
  k.num_default_keys = 0;
  k.attrs = nullptr;
  k.num_attrs = 0;
  k.canonicalize = nullptr;
  if (bp_target_kind_register(&k) != BP_OK) Die("registering fz_empty", LastMessage());
  if (bp_target_tag_register("fz/one", "fz_all -n=1 -s='tag one'") != BP_OK) {
    Die("registering fz/one", LastMessage());
  }
  if (bp_target_tag_register("fz/canon", "{\"kind\": \"fz_canon\", \"w\": 6}") != BP_OK) {
    Die("registering fz/canon", LastMessage());
  }
}

bool TolerateInternal() {
  const char* v = std::getenv("BACKPLANE_FUZZ_TOLERATE_INTERNAL");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Reads every attribute the kind may have; releases what comes back.
void ReadAttributes(const bp_object_t* target) {
  const char* kind = nullptr;
  if (bp_target_kind(target, &kind) != BP_OK || kind == nullptr) Die("no kind", LastMessage());
  if (std::strcmp(kind, "fz_all") != 0) return;
  for (const char* name : kAttrNames) {
    bp_value_t v;
    if (bp_target_get_attr(target, name, &v) != BP_OK) Die("get_attr failed", name);
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Register();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);  // stops at a NUL below
  bp_object_t* target = nullptr;
  bp_status_t st = bp_target_parse(text.c_str(), &target);
  if (st != BP_OK) {
    const std::string message = LastMessage();
    if (message.empty()) Die("a failure without a message", text);
    if (st == BP_ERR_INTERNAL && !TolerateInternal()) Die("internal error", message);
    if (target != nullptr) Die("a failure wrote its output", message);
    return 0;
  }
  const std::string first = ToJson(target);
  ReadAttributes(target);
  bp_object_release(target);

  bp_object_t* again = nullptr;
  if (bp_target_parse(first.c_str(), &again) != BP_OK) {
    Die("canonical JSON does not parse back", first + "\n" + LastMessage());
  }
  const std::string second = ToJson(again);
  bp_object_release(again);
  if (second != first) Die("canonical JSON changed on re-parse", first + "\n" + second);
  return 0;
}
