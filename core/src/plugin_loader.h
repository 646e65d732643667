// SPDX-License-Identifier: Apache-2.0
// Plugin discovery and loading: search folders in the documented order, manifests read
// without loading, libraries loaded (Boost.DLL) on first use of a name they declare.
#ifndef BACKPLANE_CORE_PLUGIN_LOADER_H_
#define BACKPLANE_CORE_PLUGIN_LOADER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "registry.h"

// BP_API_END for the entry points that register or remove a name (functions, target kinds and
// tags, device types): a refusal during a plugin's load also fails that load.
#define BP_REGISTRATION_END                                                       \
  }                                                                               \
  catch (...) {                                                                   \
    const bp_status_t refused_ = ::backplane::core::StatusFromCurrentException(); \
    ::backplane::core::NoteRefusedRegistration(refused_);                         \
    return refused_;                                                              \
  }                                                                               \
  return BP_OK;

namespace backplane {
namespace core {

// What a plugin registered while it loads, for rollback on failure, and what it may register.
// It is the calling thread's current init from before dlopen (a static constructor of the
// library, or of a library it links, runs inside dlopen) until bp_plugin_init returns.
struct PluginInit {
  std::string plugin_name;
  std::vector<std::pair<std::string, std::optional<Registry::Entry>>> registered;
  // Undo steps for other registries (target kinds, tags), run newest first on failure.
  std::vector<std::function<void()>> undo;
  // Its manifest's "provides" and "device_types", or null for a library loaded by path
  // without a manifest (which declares nothing and may register what no manifest declares).
  const std::vector<std::string>* declared = nullptr;
  const std::vector<std::string>* declared_device_types = nullptr;
  std::string manifest;
  // Every name it registered, as a manifest writes it (functions, target.kind.<k>,
  // target.tag.<t>): what bp_plugins_list shows as its "registered" names.
  std::vector<std::string> names;
  // Checks run after a rollback: each answers whether something the plugin registered is still
  // in use (a target kind a Target holds), in which case its library stays mapped.
  std::vector<std::function<bool()>> in_use;
  // Where the plugin's code runs now: "a static constructor" (inside dlopen) or
  // "bp_plugin_init", for messages.
  const char* stage = "";
  // The first registration of the load that was refused, and its kind: the load fails with it,
  // rolled back, even when the plugin ignored the status and went on (BP-PLUGIN-2).
  bp_status_t refused_kind = BP_OK;
  std::string refused;
};

// Called by a registration entry point that failed (BP_REGISTRATION_END): while a plugin
// loads on this thread, records the refusal in its init, so that the load fails.
void NoteRefusedRegistration(bp_status_t kind) noexcept;

// Throws `message` as a refusal of a registration or removal: NoteRefusedRegistration, for an
// entry point whose other failures (a name not found) do not fail a load.
[[noreturn]] void RefuseRegistration(bp_status_t kind, const std::string& message);

// During a plugin's bp_plugin_init, refuses (throws) a registration of `name` (as a manifest
// writes it: "device_api.x", "target.kind.k") that the plugin may not make: a name its
// manifest does not declare (BP-PLUGIN-2), or, for a plugin without a manifest, a name another
// plugin's manifest declares. `what` names it in the message ("function 'x'"). Outside an
// init it does nothing: the host registers what it likes. (The process's loader's
// PluginLoader::CheckMayRegister, for the C entry points.)
void CheckPluginMayRegister(const std::string& name, const std::string& what);

// During a plugin's init, refuses a device type its manifest does not declare when the name
// is new (declared ones were registered at discovery).
void CheckPluginMayRegisterDeviceType(const std::string& name);

// "plugin 'x'" while a plugin loads on this thread (its static constructors or its init), else
// "the host".
std::string CurrentOwner();

// The init running on this thread, or null (PluginLoader::CurrentInit of the process's loader).
PluginInit* CurrentPluginInit();

struct PluginRecord;

class PluginLoader {
 public:
  // A loader that registers into `registry` (and rolls back from it when an init fails).
  explicit PluginLoader(Registry& registry);
  PluginLoader(const PluginLoader&) = delete;
  PluginLoader& operator=(const PluginLoader&) = delete;

  // The load of a plugin in progress on the calling thread (inside dlopen or bp_plugin_init), or
  // null. Kept here, per thread: a registration call through the C ABI carries no context, and
  // the host may register on another thread while a plugin loads.
  PluginInit* CurrentInit() const;
  void CheckMayRegister(const std::string& name, const std::string& what);
  void CheckMayRegisterDeviceType(const std::string& name) const;
  std::string CurrentOwner() const;

  // Adds a folder searched first (in the order added); it must be absolute.
  void AddPath(const std::string& folder);
  // Discovers once; later calls do nothing (and take no lock). Every entry point whose answer
  // depends on plugins calls it (or a function that does) before it answers.
  void EnsureDiscovered();
  // Scans every search folder and reads the manifests found; loads nothing.
  void Discover();
  // Loads every discovered plugin; failures are recorded, not thrown.
  void LoadAll();
  // Loads one library now; throws that plugin's failure.
  void LoadLibrary(const std::string& path);
  // Loads the discovered plugins that declare `name`. Returns a " (plugins looked at: ...)"
  // note for error messages.
  std::string LoadProviderOf(const std::string& name);
  // The plugin other than `plugin` whose manifest declares `name`, when `plugin` itself does
  // not declare it; empty otherwise. Manifests are the record of who owns a name.
  std::string OtherDeclarer(const std::string& name, const std::string& plugin);
  // Loads every discovered plugin that declares a name starting with `prefix`.
  void LoadAllDeclaring(const std::string& prefix);
  // Names that discovered, unloaded plugins declare.
  std::vector<std::string> DeclaredNames();
  // The search path and every plugin, as JSON text (see bp_plugins_list).
  std::string ToJson();

  ~PluginLoader();

 private:
  struct Folder {
    std::string path;
    std::string origin;
    std::string status;
  };

  void DiscoverLocked();
  void ScanFolder(const std::string& folder, const std::string& origin);
  void AddManifest(const std::string& manifest_path, const std::string& folder_refusal);
  void Load(PluginRecord& rec);
  // The record of a library: one that is not skipped if there is one, else (unless
  // `live_only`) a skipped one.
  PluginRecord* FindByLibrary(const std::string& canonical_library, bool live_only = false);
  // The record of the library at `canon` (canonical, a regular file): the one discovery made,
  // else one added now with the manifest beside it that names it, else without a manifest.
  PluginRecord* AddLibrary(const std::string& canon);
  // One entry of BACKPLANE_PLUGIN_FILES: a manifest or a library.
  void AddFile(const std::string& entry);
  std::string LookedAt(const std::vector<PluginRecord*>& recs) const;
  bool Disabled(const std::string& name) const { return disabled_.count(name) > 0; }

  // Whether a name a manifest declares is registered: a function, or a target kind or tag.
  bool NameRegistered(const std::string& name) const;
  // The names `p` registered that it still owns.
  std::vector<std::string> OwnedNames(const PluginRecord& p) const;
  // Makes `init` the calling thread's current init; returns the one it replaces.
  PluginInit* SetCurrentInit(PluginInit* init);

  Registry& registry_;
  mutable std::mutex inits_mu_;
  std::map<std::thread::id, PluginInit*> inits_;  // the init each thread runs, if any
  std::recursive_mutex mu_;
  bool discovered_ = false;  // a discovery ran or runs (under mu_)
  // A discovery finished and no folder was added since: EnsureDiscovered's lock-free check,
  // called by every entry point whose answer depends on plugins.
  std::atomic<bool> ready_{false};
  std::vector<std::string> extra_paths_;
  std::set<std::string> disabled_;  // BACKPLANE_DISABLE_PLUGINS, read at each discovery
  std::vector<Folder> folders_;
  std::vector<std::unique_ptr<PluginRecord>> plugins_;
};

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_PLUGIN_LOADER_H_
