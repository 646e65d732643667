// SPDX-License-Identifier: Apache-2.0
// TargetKinds for plugin authors: declare a kind, its attribute schema and its
// canonicalizer in a few lines, and register tags.
//
//   BACKPLANE_PLUGIN_ENTRY("foo", "1.0.0") {
//     namespace sdk = backplane::sdk;
//     sdk::TargetKindBuilder("foo", "foo")
//         .Keys({"foo", "gpu"})
//         .Attr<int64_t>("max_num_threads", 1024, BP_ATTR_MAX_THREADS_PER_BLOCK,
//                        "threads per block")
//         .Attr<std::string>("arch", sdk::kNoDefault, "the ISA, e.g. foo2")
//         .Attr<bool>("fast-math", false, "allow reassociation")
//         .Canonicalizer([](const std::string& attrs_json, const DLDevice* device) {
//           return attrs_json;  // check or derive values here; throw to refuse
//         })
//         .Register();
//     sdk::RegisterTag("foo/board1", R"({"kind": "foo", "arch": "foo2"})");
//   }
//
// The plugin's manifest declares each kind and tag it registers, so the core can load the
// plugin on the first use of either:
//   backplane_add_plugin(foo ... PROVIDES target.kind.foo target.tag.foo/board1)
//
// Attribute values cross the ABI as JSON text, and so does the canonicalizer's input and
// output. This header needs no JSON library: defaults are written by the small helpers
// below (JsonQuote, JsonArray). A canonicalizer that edits attributes parses the text with
// whatever JSON library the plugin prefers (the cpu plugin uses nlohmann-json privately).
//
// Every call here throws backplane::Error on failure; inside BACKPLANE_PLUGIN_ENTRY the
// error becomes the plugin's init status, and the core rolls back what the plugin
// registered.
#ifndef BACKPLANE_SDK_TARGET_HPP_
#define BACKPLANE_SDK_TARGET_HPP_

#include <backplane/sdk/plugin.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {
namespace sdk {

// ---- JSON text helpers --------------------------------------------------------------------

// `text` as a JSON string literal, quotes included. Control characters are escaped as
// \u00XX; other bytes pass through (the text is UTF-8).
inline std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

// A JSON number that parses back to exactly `x`. Throws for infinities and NaN, which JSON
// cannot write.
inline std::string JsonNumber(double x) {
  if (!std::isfinite(x)) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "a target attribute's float value must be finite (JSON has no infinity or "
                "NaN); pass a finite number");
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

// A JSON array of strings or integers: JsonArray({"cpu", "x86"}) is ["cpu","x86"].
inline std::string JsonArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + JsonQuote(items[i]);
  return out + "]";
}
inline std::string JsonArray(const std::vector<int64_t>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + std::to_string(items[i]);
  return out + "]";
}

// The value of a map attribute (BP_TARGET_ATTR_MAP): a JSON object as text, e.g.
// TargetMap{R"({"l1": 32768})"}. The core checks that it is an object.
struct TargetMap {
  std::string json = "{}";
};

// Says that an attribute has no default: Attr<std::string>("arch", kNoDefault, "doc"). A
// Target then lacks the attribute unless the text, the device or the canonicalizer sets it.
struct NoDefault {};
inline constexpr NoDefault kNoDefault{};

// What a C++ type means as a target attribute: its bp_target_attr_type_t and its JSON text.
// bool, int64_t (and other integers), double, std::string, std::vector<int64_t>,
// std::vector<std::string> and TargetMap.
template <typename T, typename = void>
struct TargetAttrTraits {
  static_assert(sizeof(T) == 0,
                "a target attribute is bool, int64_t, double, std::string, "
                "std::vector<int64_t>, std::vector<std::string> or backplane::sdk::TargetMap");
};
template <>
struct TargetAttrTraits<bool> {
  static constexpr int32_t kType = BP_TARGET_ATTR_BOOL;
  static std::string Json(bool v) { return v ? "true" : "false"; }
};
template <typename T>
struct TargetAttrTraits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr int32_t kType = BP_TARGET_ATTR_INT;
  static std::string Json(T v) { return std::to_string(v); }
};
template <typename T>
struct TargetAttrTraits<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static constexpr int32_t kType = BP_TARGET_ATTR_FLOAT;
  static std::string Json(T v) { return JsonNumber(static_cast<double>(v)); }
};
template <>
struct TargetAttrTraits<std::string> {
  static constexpr int32_t kType = BP_TARGET_ATTR_STRING;
  static std::string Json(const std::string& v) { return JsonQuote(v); }
};
template <>
struct TargetAttrTraits<std::vector<int64_t>> {
  static constexpr int32_t kType = BP_TARGET_ATTR_INT_ARRAY;
  static std::string Json(const std::vector<int64_t>& v) { return JsonArray(v); }
};
template <>
struct TargetAttrTraits<std::vector<std::string>> {
  static constexpr int32_t kType = BP_TARGET_ATTR_STRING_ARRAY;
  static std::string Json(const std::vector<std::string>& v) { return JsonArray(v); }
};
template <>
struct TargetAttrTraits<TargetMap> {
  static constexpr int32_t kType = BP_TARGET_ATTR_MAP;
  static std::string Json(const TargetMap& v) { return v.json; }
};

// ---- Kinds and tags -----------------------------------------------------------------------

// A canonicalizer: receives the parsed attributes as a JSON object (defaults filled, types
// checked; the common attributes "keys", "tag", "host", "from_device" are the core's and may
// or may not be present) and the device when the Target is built from one (else null), and
// returns the final attributes as a JSON object. It refuses bad values by throwing
// backplane::Error(BP_ERR_INVALID_ARGUMENT, ...) naming the attribute (see
// ThrowTargetAttrError). Only here may a kind query the device.
using TargetCanonicalizer =
    std::function<std::string(const std::string& attrs_json, const DLDevice* device)>;

// Throws the error a canonicalizer raises for a bad value: "attribute 'opt-level' <problem>",
// where `problem` says what was found, what is expected and what to do. The core puts
// "target kind '<kind>': " in front when it reports the error.
[[noreturn]] inline void ThrowTargetAttrError(const std::string& attr, const std::string& problem) {
  throw Error(BP_ERR_INVALID_ARGUMENT, "attribute '" + attr + "' " + problem);
}

namespace detail {

// True when the host table has the Target entries (host ABI 1.1 or newer).
inline bool HostHasTargets() {
  const bp_host_api_t* api = ::backplane::detail::Api();
  return api != nullptr &&
         api->struct_size >=
             offsetof(bp_host_api_t, target_get_attr) + sizeof(bp_host_api_t::target_get_attr) &&
         api->target_kind_register != nullptr && api->target_tag_register != nullptr;
}

inline void RequireHostTargets(const std::string& what) {
  if (HostHasTargets()) return;
  throw Error(BP_ERR_UNSUPPORTED,
              what +
                  ": the host's Backplane ABI has no TargetKinds (they came in ABI 1.1); "
                  "upgrade libbackplane, or skip registering target kinds on this host");
}

// Canonicalizers live until the process ends: the core keeps a pointer to each (plugins are
// never unloaded). The storage is reachable from a static, so leak checkers see no leak,
// and it is never destroyed, so a call during exit still finds it.
inline TargetCanonicalizer* KeepCanonicalizer(TargetCanonicalizer fn) {
  static std::mutex* mu = new std::mutex;
  static std::deque<TargetCanonicalizer>* kept = new std::deque<TargetCanonicalizer>;
  std::lock_guard<std::mutex> lock(*mu);
  kept->push_back(std::move(fn));
  return &kept->back();
}

// The C trampoline for a TargetCanonicalizer: checks the pointers, runs the callable, and
// turns any exception into a status and the error slot.
inline bp_status_t CanonicalizeEntry(void* self, const char* attrs_json, const DLDevice* device,
                                     bp_object_t** out_attrs_json) noexcept {
  return CatchAtEdge([&] {
    if (self == nullptr || attrs_json == nullptr || out_attrs_json == nullptr) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "target canonicalizer called with a null self, attrs_json or out_attrs_json "
                  "(a bug in the caller: the core always passes all three)");
    }
    std::string result = (*static_cast<TargetCanonicalizer*>(self))(attrs_json, device);
    *out_attrs_json = MakeString(result).release();
  });
}

}  // namespace detail

// Declares a TargetKind and registers it with Register(). The builder copies what it is
// given; the core copies everything again at registration, so the builder may be a
// temporary.
class TargetKindBuilder {
 public:
  // A kind `name` ([a-z0-9_]+) whose code runs on devices of type `device_type` (by name,
  // e.g. "cpu"). Several kinds may share a device type.
  TargetKindBuilder(std::string name, std::string device_type)
      : name_(std::move(name)), device_type_(std::move(device_type)) {}

  // The default keys, appended to a Target's "keys" when missing (e.g. {"cuda", "gpu"}).
  TargetKindBuilder& Keys(std::vector<std::string> keys) {
    keys_ = std::move(keys);
    return *this;
  }

  // An attribute of type T with a default and a one-line doc.
  template <typename T>
  TargetKindBuilder& Attr(const std::string& name, const T& default_value,
                          const std::string& doc = "") {
    return Add(name, TargetAttrTraits<T>::kType, -1, TargetAttrTraits<T>::Json(default_value), true,
               doc);
  }
  // An attribute with a default that FromDevice reads from `device_attr` when the device
  // answers (int attributes from int values, string from string).
  template <typename T>
  TargetKindBuilder& Attr(const std::string& name, const T& default_value,
                          bp_device_attr_kind_t device_attr, const std::string& doc = "") {
    return Add(name, TargetAttrTraits<T>::kType, device_attr,
               TargetAttrTraits<T>::Json(default_value), true, doc);
  }
  // An attribute without a default.
  template <typename T>
  TargetKindBuilder& Attr(const std::string& name, NoDefault = kNoDefault,
                          const std::string& doc = "") {
    return Add(name, TargetAttrTraits<T>::kType, -1, "", false, doc);
  }
  // An attribute without a default that FromDevice reads from `device_attr`.
  template <typename T>
  TargetKindBuilder& Attr(const std::string& name, NoDefault, bp_device_attr_kind_t device_attr,
                          const std::string& doc = "") {
    return Add(name, TargetAttrTraits<T>::kType, device_attr, "", false, doc);
  }

  // The kind's code generator gets the whole IR, neither verified nor split
  // (BP_TARGET_KIND_WHOLE_IR, ABI 1.6): for a kind that builds for another Target.
  TargetKindBuilder& WholeIR() {
    flags_ |= BP_TARGET_KIND_WHOLE_IR;
    return *this;
  }

  // The kind's canonicalizer (see TargetCanonicalizer).
  TargetKindBuilder& Canonicalizer(TargetCanonicalizer fn) {
    canonicalizer_ = std::move(fn);
    return *this;
  }

  // Registers the kind. Throws backplane::Error: BP_ERR_ALREADY_EXISTS when the kind is
  // taken (the message names both owners), BP_ERR_INVALID_ARGUMENT for a bad name, type or
  // default, BP_ERR_UNSUPPORTED on a host older than ABI 1.1.
  void Register() const {
    detail::RequireHostTargets("registering target kind '" + name_ + "'");
    std::vector<const char*> keys;
    keys.reserve(keys_.size());
    for (const std::string& k : keys_) keys.push_back(k.c_str());
    std::vector<bp_target_attr_def_t> attrs;
    attrs.reserve(attrs_.size());
    for (const AttrSpec& a : attrs_) {
      attrs.push_back(bp_target_attr_def_t{
          .struct_size = sizeof(bp_target_attr_def_t),
          .name = a.name.c_str(),
          .type = a.type,
          .device_attr = a.device_attr,
          .default_json = a.has_default ? a.default_json.c_str() : nullptr,
          .doc = a.doc.empty() ? nullptr : a.doc.c_str(),
      });
    }
    TargetCanonicalizer* self = nullptr;
    if (canonicalizer_) self = detail::KeepCanonicalizer(canonicalizer_);
    const bp_target_kind_def_t def{
        .struct_size = sizeof(bp_target_kind_def_t),
        .name = name_.c_str(),
        .device_type = device_type_.c_str(),
        .default_keys = keys.empty() ? nullptr : keys.data(),
        .num_default_keys = keys.size(),
        .attrs = attrs.empty() ? nullptr : attrs.data(),
        .num_attrs = attrs.size(),
        .canonicalize = self != nullptr ? &detail::CanonicalizeEntry : nullptr,
        .canonicalize_self = self,
        .flags = flags_,
    };
    Check(::backplane::detail::Api()->target_kind_register(&def));
  }

 private:
  struct AttrSpec {
    std::string name;
    int32_t type;
    int32_t device_attr;
    std::string default_json;
    bool has_default;
    std::string doc;
  };
  TargetKindBuilder& Add(const std::string& name, int32_t type, int32_t device_attr,
                         std::string default_json, bool has_default, const std::string& doc) {
    attrs_.push_back(AttrSpec{name, type, device_attr, std::move(default_json), has_default, doc});
    return *this;
  }

  std::string name_;
  std::string device_type_;
  std::vector<std::string> keys_;
  std::vector<AttrSpec> attrs_;
  TargetCanonicalizer canonicalizer_;
  uint32_t flags_ = 0;
};

// Registers a tag: `tag` (e.g. "nvidia/h100") names the Target `target_text`, in any form
// the parser accepts. The core parses and checks it now, so the kind must be registered.
inline void RegisterTag(const std::string& tag, const std::string& target_text) {
  detail::RequireHostTargets("registering target tag '" + tag + "'");
  TargetKinds::RegisterTag(tag, target_text);
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_TARGET_HPP_
