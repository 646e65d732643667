// SPDX-License-Identifier: Apache-2.0
// The TargetKind and tag registries. Kinds and tags that a discovered plugin declares in its
// manifest ("target.kind.<name>", "target.tag.<name>") load that plugin on first use.
#include <algorithm>
#include <backplane/ir/edit_distance.hpp>
#include <mutex>
#include <unordered_map>

#include "device_type.h"
#include "plugin_loader.h"
#include "runtime.h"
#include "target.h"

namespace backplane {
namespace core {
namespace {

constexpr size_t kAttrDefSizeV1_1 = offsetof(bp_target_attr_def_t, doc) + sizeof(const char*);
constexpr size_t kKindDefSizeV1_1 =
    offsetof(bp_target_kind_def_t, canonicalize_self) + sizeof(void*);

struct Tag {
  Json target;
  std::string owner;
};

class TargetRegistry {
 public:
  std::mutex mu;
  std::vector<KindPtr> kinds;  // registration order
  std::unordered_map<std::string, KindPtr> by_name;
  std::map<std::string, Tag> tags;
};

TargetRegistry& Reg() {
  static TargetRegistry* r = new TargetRegistry();  // never destroyed, like the registry
  return *r;
}

bool ValidName(const std::string& s, const char* extra) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          std::strchr(extra, c) != nullptr)) {
      return false;
    }
  }
  return true;
}

}  // namespace

const AttrDef* KindDef::Find(const std::string& attr) const {
  for (const auto& a : attrs) {
    if (a.name == attr) return &a;
  }
  return nullptr;
}

std::vector<std::string> KindDef::AttrNames() const {
  std::vector<std::string> names;
  for (const auto& a : attrs) names.push_back(a.name);
  for (const char* c : kCommonAttrs) names.push_back(c);
  return names;
}

bool IsCommonAttr(const std::string& name) {
  for (const char* c : kCommonAttrs) {
    if (name == c) return true;
  }
  return false;
}

const char* AttrTypeName(int32_t type) {
  switch (type) {
    case BP_TARGET_ATTR_BOOL:
      return "bool";
    case BP_TARGET_ATTR_INT:
      return "int";
    case BP_TARGET_ATTR_FLOAT:
      return "float";
    case BP_TARGET_ATTR_STRING:
      return "string";
    case BP_TARGET_ATTR_INT_ARRAY:
      return "int array";
    case BP_TARGET_ATTR_STRING_ARRAY:
      return "string array";
    case BP_TARGET_ATTR_MAP:
      return "map";
    default:
      return "unknown type";
  }
}

std::string NearestNames(const std::string& wanted, const std::vector<std::string>& names) {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, wanted.size() / 3);
  for (const auto& n : names) {
    size_t d = ir::EditDistance(wanted, n);
    bool prefix = !wanted.empty() && (n.rfind(wanted, 0) == 0 || wanted.rfind(n, 0) == 0);
    if (d <= limit || prefix) scored.emplace_back(prefix ? std::min<size_t>(d, 1) : d, n);
  }
  std::sort(scored.begin(), scored.end());
  if (!scored.empty()) {
    std::string out = " Did you mean ";
    for (size_t i = 0; i < scored.size() && i < 3; ++i) {
      if (i > 0) out += i + 1 == std::min<size_t>(scored.size(), 3) ? " or " : ", ";
      out += "'" + scored[i].second + "'";
    }
    return out + "?";
  }
  if (names.empty()) return " None is registered.";
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  std::string out = " Valid names: ";
  for (size_t i = 0; i < sorted.size() && i < 24; ++i) out += (i ? ", " : "") + sorted[i];
  if (sorted.size() > 24) out += ", ...";
  return out + ".";
}

KindPtr FindKind(const std::string& name) {
  {
    std::lock_guard lock(Reg().mu);
    auto it = Reg().by_name.find(name);
    if (it != Reg().by_name.end()) return it->second;
  }
  Runtime::Get().loader.LoadProviderOf("target.kind." + name);
  std::lock_guard lock(Reg().mu);
  auto it = Reg().by_name.find(name);
  return it == Reg().by_name.end() ? nullptr : it->second;
}

std::vector<KindPtr> AllKinds() {
  std::lock_guard lock(Reg().mu);
  return Reg().kinds;
}

std::vector<std::string> KindNames() {
  std::vector<std::string> names;
  for (const auto& k : AllKinds()) names.push_back(k->name);
  for (const auto& n : Runtime::Get().loader.DeclaredNames()) {
    if (n.rfind("target.kind.", 0) == 0) names.push_back(n.substr(12));
  }
  return names;
}

std::vector<std::string> TagNames() {
  std::vector<std::string> names;
  {
    std::lock_guard lock(Reg().mu);
    for (const auto& [tag, t] : Reg().tags) names.push_back(tag);
  }
  for (const auto& n : Runtime::Get().loader.DeclaredNames()) {
    if (n.rfind("target.tag.", 0) == 0) names.push_back(n.substr(11));
  }
  return names;
}

bool TargetNameRegistered(const std::string& manifest_name) {
  std::lock_guard lock(Reg().mu);
  if (manifest_name.rfind("target.kind.", 0) == 0) {
    return Reg().by_name.count(manifest_name.substr(12)) > 0;
  }
  if (manifest_name.rfind("target.tag.", 0) == 0) {
    return Reg().tags.count(manifest_name.substr(11)) > 0;
  }
  return false;
}

std::optional<Json> FindTag(const std::string& tag) {
  {
    std::lock_guard lock(Reg().mu);
    auto it = Reg().tags.find(tag);
    if (it != Reg().tags.end()) return it->second.target;
  }
  Runtime::Get().loader.LoadProviderOf("target.tag." + tag);
  std::lock_guard lock(Reg().mu);
  auto it = Reg().tags.find(tag);
  if (it == Reg().tags.end()) return std::nullopt;
  return it->second.target;
}

namespace {

// Plugins may register only the kinds and tags their manifests declare (as target.kind.<k>
// and target.tag.<t>), by the rule the function registry follows.
void CheckDeclared(const std::string& name, const char* what) {
  CheckPluginMayRegister(name, what);
}

KindDef CopyKind(const bp_target_kind_def_t* def) {
  if (def == nullptr) Fail(BP_ERR_INVALID_ARGUMENT, "bp_target_kind_register: def is null");
  if (def->struct_size < kKindDefSizeV1_1) {
    Fail(BP_ERR_VERSION_MISMATCH, "bp_target_kind_register: bp_target_kind_def_t has struct_size " +
                                      std::to_string(def->struct_size) + " but ABI 1.1 needs " +
                                      std::to_string(kKindDefSizeV1_1));
  }
  KindDef k;
  k.name = def->name != nullptr ? def->name : "";
  const std::string where = "target kind '" + k.name + "'";
  if (!ValidName(k.name, "")) {
    Fail(BP_ERR_INVALID_ARGUMENT, where +
                                      ": a kind name is 1 to 128 characters of a-z, 0-9 "
                                      "and _");
  }
  if (def->device_type == nullptr) Fail(BP_ERR_INVALID_ARGUMENT, where + ": device_type is null");
  k.device_type = def->device_type;
  k.device_type_id = RegisterDeviceType(k.device_type);
  if (def->num_default_keys > 0 && def->default_keys == nullptr) {
    Fail(BP_ERR_INVALID_ARGUMENT, where + ": default_keys is null but num_default_keys is not 0");
  }
  for (size_t i = 0; i < def->num_default_keys; ++i) {
    if (def->default_keys[i] == nullptr || def->default_keys[i][0] == '\0') {
      Fail(BP_ERR_INVALID_ARGUMENT, where + ": default key " + std::to_string(i) + " is empty");
    }
    k.default_keys.push_back(def->default_keys[i]);
  }
  if (def->num_attrs > 0 && def->attrs == nullptr) {
    Fail(BP_ERR_INVALID_ARGUMENT, where + ": attrs is null but num_attrs is not 0");
  }
  // Attribute defs may grow: step by the size the plugin was built with.
  const size_t stride = def->num_attrs > 0 ? def->attrs[0].struct_size : 0;
  if (def->num_attrs > 0 && stride < kAttrDefSizeV1_1) {
    Fail(BP_ERR_VERSION_MISMATCH, where + ": bp_target_attr_def_t has struct_size " +
                                      std::to_string(stride) + " but ABI 1.1 needs " +
                                      std::to_string(kAttrDefSizeV1_1));
  }
  for (size_t i = 0; i < def->num_attrs; ++i) {
    const auto* a = reinterpret_cast<const bp_target_attr_def_t*>(
        reinterpret_cast<const char*>(def->attrs) + i * stride);
    AttrDef ad;
    ad.name = a->name != nullptr ? a->name : "";
    const std::string what = where + " attribute '" + ad.name + "'";
    if (a->struct_size != stride) {
      Fail(BP_ERR_INVALID_ARGUMENT, what +
                                        ": every bp_target_attr_def_t of a kind must have the "
                                        "same struct_size");
    }
    if (!ValidName(ad.name, "-")) {
      Fail(BP_ERR_INVALID_ARGUMENT, what + ": a name is 1 to 128 characters of a-z, 0-9, _ and -");
    }
    if (IsCommonAttr(ad.name) || ad.name == "kind") {
      Fail(BP_ERR_INVALID_ARGUMENT, what +
                                        ": every Target has it already; a kind must not "
                                        "declare kind, keys, tag, host or from_device");
    }
    if (k.Find(ad.name) != nullptr) Fail(BP_ERR_INVALID_ARGUMENT, what + " is declared twice");
    if (a->type < BP_TARGET_ATTR_BOOL || a->type > BP_TARGET_ATTR_MAP) {
      Fail(BP_ERR_INVALID_ARGUMENT, what + ": unknown type " + std::to_string(a->type));
    }
    ad.type = a->type;
    if (a->device_attr < -1 || a->device_attr >= 64) {
      Fail(BP_ERR_INVALID_ARGUMENT, what + ": device_attr " + std::to_string(a->device_attr) +
                                        " is not a bp_device_attr_kind_t (or -1)");
    }
    ad.device_attr = a->device_attr;
    if (a->default_json != nullptr) {
      Json d = ParseJson(a->default_json, what + " default_json");
      if (d.is_discarded()) {
        Fail(BP_ERR_INVALID_ARGUMENT,
             what + ": default_json is not valid JSON: " + std::string(a->default_json));
      }
      ad.default_value = CheckAttrValue(d, ad.type, what + " default");
    }
    if (a->doc != nullptr) ad.doc = a->doc;
    k.attrs.push_back(std::move(ad));
  }
  k.canonicalize = def->canonicalize;
  k.canonicalize_self = def->canonicalize_self;
  if (def->struct_size >= offsetof(bp_target_kind_def_t, flags) + sizeof(uint32_t)) {
    k.flags = def->flags;
    if ((k.flags & ~BP_TARGET_KIND_WHOLE_IR) != 0) {
      Fail(BP_ERR_INVALID_ARGUMENT, where + ": flags has unknown bits " +
                                        std::to_string(k.flags & ~BP_TARGET_KIND_WHOLE_IR) +
                                        "; ABI 1.6 defines BP_TARGET_KIND_WHOLE_IR (1) only");
    }
  }
  k.owner = CurrentOwner();
  return k;
}

}  // namespace

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_target_kind_register(const bp_target_kind_def_t* def) {
  BP_API_BEGIN
  auto kind = std::make_shared<const KindDef>(CopyKind(def));
  CheckDeclared("target.kind." + kind->name, ("target kind '" + kind->name + "'").c_str());
  {
    std::lock_guard lock(Reg().mu);
    auto it = Reg().by_name.find(kind->name);
    if (it != Reg().by_name.end()) {
      Fail(BP_ERR_ALREADY_EXISTS, "target kind '" + kind->name + "' is already registered by " +
                                      it->second->owner + "; " + kind->owner +
                                      " cannot register it again (choose another kind name)");
    }
    Reg().kinds.push_back(kind);
    Reg().by_name.emplace(kind->name, kind);
  }
  if (PluginInit* init = CurrentPluginInit()) {
    init->names.push_back("target.kind." + kind->name);
    init->undo.push_back([name = kind->name] {
      std::lock_guard lock(Reg().mu);
      Reg().by_name.erase(name);
      auto& v = Reg().kinds;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const KindPtr& k) { return k->name == name; }),
              v.end());
    });
    // A Target made from the kind meanwhile still calls its canonicalizer, the plugin's code.
    init->in_use.push_back([kind = std::weak_ptr<const KindDef>(kind)] { return !kind.expired(); });
  }
  BP_REGISTRATION_END
}

BP_EXPORT bp_status_t bp_target_tag_register(const char* tag, const char* target_text) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(tag != nullptr && target_text != nullptr, "tag or target_text is null");
  const std::string name = tag;
  if (!ValidName(name, "-./") || name.find('/') == std::string::npos) {
    Fail(BP_ERR_INVALID_ARGUMENT, "tag '" + name +
                                      "' is invalid: expected vendor/name of a-z, "
                                      "0-9, _, -, . and /, e.g. 'nvidia/h100'");
  }
  CheckDeclared("target.tag." + name, ("target tag '" + name + "'").c_str());
  Json j = ParseToObject(target_text);
  j["tag"] = name;
  TargetFromJson(j, nullptr, 0);  // checked now, so a bad tag fails where it is registered
  const std::string owner = CurrentOwner();
  {
    std::lock_guard lock(Reg().mu);
    auto it = Reg().tags.find(name);
    if (it != Reg().tags.end()) {
      Fail(BP_ERR_ALREADY_EXISTS, "target tag '" + name + "' is already registered by " +
                                      it->second.owner + "; " + owner +
                                      " cannot register it again");
    }
    Reg().tags.emplace(name, Tag{std::move(j), owner});
  }
  if (PluginInit* init = CurrentPluginInit()) {
    init->names.push_back("target.tag." + name);
    init->undo.push_back([name] {
      std::lock_guard lock(Reg().mu);
      Reg().tags.erase(name);
    });
  }
  BP_REGISTRATION_END
}

BP_EXPORT bp_status_t bp_target_kinds_describe(bp_object_t** out_json) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_json != nullptr, "out_json is null");
  Runtime::Get().loader.LoadAllDeclaring("target.");
  Json out;
  out["kinds"] = Json::array();
  for (const auto& k : AllKinds()) {
    Json attrs = Json::array();
    for (const auto& a : k->attrs) {
      const char* dev_attr = a.device_attr >= 0 ? bp_device_attr_name(a.device_attr) : nullptr;
      attrs.push_back({{"name", a.name},
                       {"type", AttrTypeName(a.type)},
                       {"default", a.default_value ? *a.default_value : Json()},
                       {"doc", a.doc},
                       {"device_attr", dev_attr != nullptr ? Json(dev_attr) : Json()}});
    }
    out["kinds"].push_back({{"name", k->name},
                            {"device_type", k->device_type},
                            {"keys", k->default_keys},
                            {"owner", k->owner},
                            {"canonicalizer", k->canonicalize != nullptr},
                            {"attrs", attrs}});
  }
  out["tags"] = Json::object();
  std::vector<std::pair<std::string, Json>> tags;  // canonicalised outside the lock
  {
    std::lock_guard lock(Reg().mu);
    for (const auto& [tag, t] : Reg().tags) tags.emplace_back(tag, t.target);
  }
  for (const auto& [tag, raw] : tags) {
    Ref canonical = TargetFromJson(raw, nullptr, 0);
    out["tags"][tag] = static_cast<const TargetObject*>(canonical.get())->json;
  }
  *out_json = NewString(out.dump(2));
  BP_API_END
}

}  // extern "C"
