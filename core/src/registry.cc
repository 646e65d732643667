// SPDX-License-Identifier: Apache-2.0
// The global function registry and its C entry points.
#include "registry.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "plugin_loader.h"
#include "runtime.h"

namespace backplane {
namespace core {

std::optional<Registry::Entry> Registry::Set(const std::string& name, bp_object_t* func,
                                             bool allow_override, const std::string& owner,
                                             bool override_own_only) {
  std::unique_lock lock(mu_);
  auto it = map_.find(name);
  std::optional<Entry> previous;
  if (it != map_.end()) {
    if (allow_override && override_own_only && it->second.owner != owner) {
      Fail(BP_ERR_ALREADY_EXISTS, "function '" + name + "' is registered by " + it->second.owner +
                                      "; " + owner +
                                      " may override only a name it registered itself, so "
                                      "allow_override does not apply (choose another name)");
    }
    if (!allow_override) {
      Fail(BP_ERR_ALREADY_EXISTS, "function '" + name + "' is already registered by " +
                                      it->second.owner + "; " + owner +
                                      " cannot register it again (pass allow_override to "
                                      "replace it on purpose, or choose another name)");
    }
    previous = std::move(it->second);
    it->second = Entry{Ref::Share(func), owner};
  } else {
    map_.emplace(name, Entry{Ref::Share(func), owner});
  }
  return previous;
}

Ref Registry::Find(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = map_.find(name);
  return it == map_.end() ? Ref() : it->second.func;
}

std::optional<Registry::Entry> Registry::Take(const std::string& name) {
  std::optional<Entry> taken;
  {
    std::unique_lock lock(mu_);
    auto it = map_.find(name);
    if (it == map_.end()) return std::nullopt;
    taken = std::move(it->second);
    map_.erase(it);
  }
  return taken;
}

std::optional<Registry::Entry> Registry::Restore(const std::string& name,
                                                 std::optional<Entry> previous) {
  // Returned, so that the caller releases it outside the lock: its deleter may call back in.
  std::optional<Entry> dropped;
  std::unique_lock lock(mu_);
  auto it = map_.find(name);
  if (it != map_.end()) {
    dropped = std::move(it->second);
    map_.erase(it);
  }
  if (previous) map_.emplace(name, std::move(*previous));
  return dropped;
}

std::vector<std::string> Registry::Names() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> names;
  names.reserve(map_.size());
  for (const auto& [name, entry] : map_) names.push_back(name);
  return names;
}

std::string Registry::OwnerOf(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = map_.find(name);
  return it == map_.end() ? std::string() : it->second.owner;
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

namespace {
void CheckName(const char* name, const char* fn) {
  if (name == nullptr || name[0] == '\0') {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(fn) + ": the function name is null or empty");
  }
}
}  // namespace

extern "C" {

BP_EXPORT bp_status_t bp_registry_set(const char* name, bp_object_t* func, int32_t allow_override) {
  BP_API_BEGIN
  CheckName(name, "bp_registry_set");
  As<FunctionObject>(func, BP_OBJECT_FUNCTION, std::string("bp_registry_set('") + name + "')");
  PluginInit* init = CurrentPluginInit();
  // A plugin registers only the names its manifest declares: otherwise a plugin could
  // capture, say, device_api.cpu by loading first, and no manifest would say who owns a name.
  CheckPluginMayRegister(name, std::string("function '") + name + "'");
  const std::string owner = CurrentOwner();
  // allow_override lets a plugin replace only an entry it registered itself, never one of
  // another plugin or of the host.
  auto previous = Runtime::Get().registry.Set(name, func, allow_override != 0, owner,
                                              /*override_own_only=*/init != nullptr);
  if (init != nullptr) {
    init->registered.push_back({name, std::move(previous)});
    init->names.push_back(name);
  }
  BP_REGISTRATION_END
}

BP_EXPORT bp_status_t bp_registry_get(const char* name, bp_object_t** out_func) {
  BP_API_BEGIN
  CheckName(name, "bp_registry_get");
  BP_REQUIRE_ARG(out_func != nullptr, "out_func is null");
  std::string looked_at;
  Ref f = Runtime::Get().FindOrLoad(name, &looked_at);
  if (!f) {
    Fail(BP_ERR_NOT_FOUND, std::string("function '") + name + "' is not registered" + looked_at +
                               "; run `backplane info` to list the registered functions");
  }
  *out_func = f.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_registry_remove(const char* name) {
  BP_API_BEGIN
  CheckName(name, "bp_registry_remove");
  if (CurrentPluginInit() != nullptr) {
    // Removing and registering again would be an override by another name.
    const std::string owner = Runtime::Get().registry.OwnerOf(name);
    if (!owner.empty() && owner != CurrentOwner()) {
      RefuseRegistration(BP_ERR_ALREADY_EXISTS,
                         std::string("function '") + name + "' is registered by " + owner + "; " +
                             CurrentOwner() + " may remove only the names it registered itself");
    }
  }
  if (!Runtime::Get().registry.Take(name)) {
    Fail(BP_ERR_NOT_FOUND,
         std::string("bp_registry_remove: function '") + name + "' is not registered");
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_registry_list(bp_object_t** out_names) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_names != nullptr, "out_names is null");
  std::set<std::string> names;
  for (auto& n : Runtime::Get().registry.Names()) names.insert(std::move(n));
  for (auto& n : Runtime::Get().loader.DeclaredNames()) names.insert(std::move(n));
  *out_names = NewStringArray(std::vector<std::string>(names.begin(), names.end()));
  BP_API_END
}

}  // extern "C"
