// SPDX-License-Identifier: Apache-2.0
// Targets inside the core: TargetKind schemas, tags and Target objects. A Target is held as
// its canonical JSON object (sorted keys, defaults filled), which is also its identity.
#ifndef BACKPLANE_CORE_TARGET_H_
#define BACKPLANE_CORE_TARGET_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "object.h"

namespace backplane {
namespace core {

using Json = nlohmann::json;

struct AttrDef {
  std::string name;
  int32_t type = 0;
  int32_t device_attr = -1;
  std::optional<Json> default_value;
  std::string doc;
};

struct KindDef {
  std::string name;
  std::string device_type;
  int32_t device_type_id = 0;
  std::string owner;
  std::vector<std::string> default_keys;
  std::vector<AttrDef> attrs;
  bp_target_canonicalizer_t canonicalize = nullptr;
  void* canonicalize_self = nullptr;
  uint32_t flags = 0;  // BP_TARGET_KIND_* (ABI 1.6)

  const AttrDef* Find(const std::string& attr) const;
  std::vector<std::string> AttrNames() const;
};

using KindPtr = std::shared_ptr<const KindDef>;

struct TargetObject final : bp_object {
  TargetObject(Json canonical, KindPtr kind_def)
      : bp_object(BP_OBJECT_TARGET),
        json(std::move(canonical)),
        kind(std::move(kind_def)),
        text(json.dump()) {}
  const Json json;  // canonical: an object with sorted keys
  const KindPtr kind;
  const std::string text;  // json.dump(), the identity used for equality
};

// The attribute names every Target has besides its kind's.
inline const char* const kCommonAttrs[] = {"keys", "tag", "host", "from_device"};
bool IsCommonAttr(const std::string& name);

// "int", "string array", ...
const char* AttrTypeName(int32_t type);

// The kind, loading the plugin that declares it on first use; null if none does.
KindPtr FindKind(const std::string& name);
// Every kind, in registration order.
std::vector<KindPtr> AllKinds();
// The tag's attributes as given (a JSON object with "tag" set), loading its plugin on first
// use.
std::optional<Json> FindTag(const std::string& tag);
std::vector<std::string> KindNames();
// Whether a manifest name ("target.kind.<kind>" or "target.tag.<tag>") is registered now;
// never loads a plugin.
bool TargetNameRegistered(const std::string& manifest_name);
std::vector<std::string> TagNames();

// " Did you mean 'a' or 'b'?" / " Valid names: ..." for messages.
std::string NearestNames(const std::string& wanted, const std::vector<std::string>& names);

// Parses any accepted form into a canonical Target (see bp_target_parse).
Ref ParseTarget(const std::string& text);
// The first half of ParseTarget: any accepted form as a JSON object, not yet checked
// against the schema (no defaults, no canonicalizer). Tags keep their attributes this way, so
// an override redoes the defaults and the canonicalizer.
Json ParseToObject(const std::string& text);
// Builds a canonical Target from a JSON object (any keys; checked against the schema).
Ref TargetFromJson(const Json& object, const DLDevice* device, int depth);
// Parses JSON text as a Target's JSON: a duplicate key at any level, and a string (a key or a
// value) that holds a NUL byte, are Error(BP_ERR_INVALID_ARGUMENT) naming the key, `what` in
// front. Malformed JSON gives a discarded value, for the caller's own message.
Json ParseJson(const std::string& text, const std::string& what);
// Checks a value against an attribute type; returns it normalised (ints as int64, floats as
// double) or throws naming `what`.
Json CheckAttrValue(const Json& value, int32_t type, const std::string& what);

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_TARGET_H_
