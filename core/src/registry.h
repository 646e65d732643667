// SPDX-License-Identifier: Apache-2.0
// The global function registry: names to function objects, each with its owner (the
// plugin whose init registered it, or "host").
#ifndef BACKPLANE_CORE_REGISTRY_H_
#define BACKPLANE_CORE_REGISTRY_H_

#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "object.h"

namespace backplane {
namespace core {

class Registry {
 public:
  struct Entry {
    Ref func;
    std::string owner;
  };

  // Registers; throws ALREADY_EXISTS naming the owner unless allow_override (and, with
  // override_own_only, unless the entry is `owner`'s own). Returns the entry it replaced, if
  // any (for rollback).
  std::optional<Entry> Set(const std::string& name, bp_object_t* func, bool allow_override,
                           const std::string& owner, bool override_own_only = false);
  // The function, or a null Ref. Never loads a plugin.
  Ref Find(const std::string& name) const;
  // Removes and returns the entry (nullopt if absent).
  std::optional<Entry> Take(const std::string& name);
  // Puts back an entry taken or replaced during a failed plugin init. Returns the entry it
  // removed (the plugin's), for the caller to release: its deleter is the plugin's code.
  std::optional<Entry> Restore(const std::string& name, std::optional<Entry> previous);
  std::vector<std::string> Names() const;
  std::string OwnerOf(const std::string& name) const;

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Entry> map_;
};

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_REGISTRY_H_
