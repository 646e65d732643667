// SPDX-License-Identifier: Apache-2.0
// Plugin discovery.
//
// Order of the search path (docs/discovery.md): folders the host passes, then
// BACKPLANE_PLUGIN_PATH (read with secure_getenv, so ignored in setuid/setgid programs),
// then the install's lib/backplane/plugins (found relative to libbackplane itself, so a
// moved install still works), then the build tree's plugin folder when libbackplane runs
// from the build tree. Never the current directory: relative entries are ignored.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/file_trust.hpp>
#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "device_type.h"
#include "elf_check.h"
#include "manifest.h"
#include "plugin_loader.h"
#include "plugin_loader_internal.h"
#include "runtime.h"
#include "target.h"

namespace fs = boost::filesystem;

namespace backplane {
namespace core {

using namespace loader_detail;

namespace {

// The folder that holds libbackplane itself.
std::string CoreLibraryDir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&bp_host_api), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string lib = Canonical(info.dli_fname);
  return lib.empty() ? "" : fs::path(lib).parent_path().string();
}

}  // namespace

void PluginLoader::AddPath(const std::string& folder) {
  if (folder.empty() || folder[0] != '/') {
    Fail(BP_ERR_INVALID_ARGUMENT, "plugin folder '" + folder +
                                      "' is not an absolute path; plugins are never searched "
                                      "relative to the current directory, so pass an absolute "
                                      "path");
  }
  std::lock_guard lock(mu_);
  if (std::find(extra_paths_.begin(), extra_paths_.end(), folder) == extra_paths_.end()) {
    extra_paths_.push_back(folder);
  }
  discovered_ = false;  // the next use discovers again, adding what the new folder holds
  ready_.store(false, std::memory_order_release);
}

void PluginLoader::EnsureDiscovered() {
  if (ready_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);  // waits for a discovery another thread is running
  if (!discovered_) DiscoverLocked();
}

void PluginLoader::Discover() {
  std::lock_guard lock(mu_);
  DiscoverLocked();
}

void PluginLoader::DiscoverLocked() {
  discovered_ = true;
  folders_.clear();
  // Read at every discovery (secure_getenv: ignored in setuid and setgid programs), and
  // applied to plugins discovered earlier that are not loaded yet as well.
  disabled_ = Words(secure_getenv("BACKPLANE_DISABLE_PLUGINS"));
  Trace("discovering plugins" +
        (disabled_.empty() ? std::string()
                           : " (BACKPLANE_DISABLE_PLUGINS: " + JoinWords(disabled_) + ")"));
  for (auto& p : plugins_) {
    if (p->state == BP_PLUGIN_DISCOVERED && Disabled(p->name)) {
      Trace("plugin '" + p->name + "' disabled by BACKPLANE_DISABLE_PLUGINS");
      p->state = BP_PLUGIN_SKIPPED;
      p->error_kind = BP_ERR_PLUGIN;
      p->reason = kDisabledReason;
    }
  }
  // BACKPLANE_PLUGIN_FILES replaces the whole search: these plugins and no folder, as the
  // Vulkan loader's VK_DRIVER_FILES does for drivers. For checking one plugin alone.
  if (const char* files = secure_getenv("BACKPLANE_PLUGIN_FILES"); files != nullptr && *files) {
    Trace("BACKPLANE_PLUGIN_FILES is set: no folder is searched");
    const std::string value = files;
    size_t start = 0;
    while (start <= value.size()) {
      size_t end = value.find(':', start);
      if (end == std::string::npos) end = value.size();
      if (end > start) AddFile(value.substr(start, end - start));
      start = end + 1;
    }
    ready_.store(true, std::memory_order_release);
    return;
  }
  for (const auto& p : extra_paths_) ScanFolder(p, "host");
  if (const char* env = secure_getenv("BACKPLANE_PLUGIN_PATH")) {
    std::string value = env;
    size_t start = 0;
    while (start <= value.size()) {
      size_t end = value.find(':', start);
      if (end == std::string::npos) end = value.size();
      std::string entry = value.substr(start, end - start);
      if (!entry.empty()) {
        if (entry[0] == '/') {
          ScanFolder(entry, "BACKPLANE_PLUGIN_PATH");
        } else {
          folders_.push_back({entry, "BACKPLANE_PLUGIN_PATH",
                              "ignored: a relative entry; only absolute folders are searched"});
        }
      }
      start = end + 1;
    }
  }
  const std::string lib_dir = CoreLibraryDir();
  if (!lib_dir.empty()) ScanFolder(lib_dir + "/backplane/plugins", "install");
#ifdef BACKPLANE_BUILD_PLUGIN_DIR
  // The build tree mirrors the install layout, so its plugin folder is usually the one just
  // searched; it is listed separately only when it differs (and only then compiled in:
  // core/CMakeLists.txt).
  if (!lib_dir.empty() && lib_dir == Canonical(BACKPLANE_BUILD_LIB_DIR) &&
      Canonical(BACKPLANE_BUILD_PLUGIN_DIR) != Canonical(lib_dir + "/backplane/plugins")) {
    ScanFolder(BACKPLANE_BUILD_PLUGIN_DIR, "build tree");
  }
#endif
  ready_.store(true, std::memory_order_release);
}

void PluginLoader::ScanFolder(const std::string& folder, const std::string& origin) {
  Trace("searching folder " + folder + " (" + origin + ")");
  const std::string canon = Canonical(folder);
  if (canon.empty() || !fs::is_directory(canon)) {
    folders_.push_back({folder, origin, "missing"});
    return;
  }
  for (const auto& f : folders_) {
    if (Canonical(f.path) == canon && f.status.rfind("ok", 0) == 0) {
      folders_.push_back({folder, origin, "already searched as " + f.path});
      return;
    }
  }
  const std::string refusal = Untrusted(canon, "plugin folder", file_trust::Kind::kFolder);
  if (!refusal.empty()) Trace("folder " + folder + " refused: " + refusal);
  folders_.push_back({folder, origin, refusal.empty() ? "ok" : "refused: " + refusal});
  std::vector<std::string> manifests;
  boost::system::error_code ec;
  for (fs::directory_iterator it(canon, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string suffix = kManifestSuffix;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      manifests.push_back(it->path().string());
    }
  }
  std::sort(manifests.begin(), manifests.end());
  for (const auto& m : manifests) AddManifest(m, refusal);
}

void PluginLoader::AddManifest(const std::string& manifest_path,
                               const std::string& folder_refusal) {
  for (const auto& p : plugins_) {
    if (p->manifest == manifest_path) return;  // seen in an earlier discovery
  }
  auto rec = std::make_unique<PluginRecord>();
  rec->manifest = manifest_path;
  std::string fname = fs::path(manifest_path).filename().string();
  rec->name = fname.substr(0, fname.size() - std::string(kManifestSuffix).size());
  auto skip = [&](const std::string& reason) {
    Trace("plugin '" + rec->name + "' skipped: " + reason);
    rec->state = BP_PLUGIN_SKIPPED;
    rec->error_kind = BP_ERR_PLUGIN;
    rec->reason = reason;
    plugins_.push_back(std::move(rec));
  };
  if (!folder_refusal.empty()) return skip(folder_refusal);
  if (std::string r = Untrusted(manifest_path, "manifest"); !r.empty()) return skip(r);
  Trace("reading manifest " + manifest_path);
  Manifest m;
  try {
    m = ReadManifest(manifest_path);
  } catch (const CoreError& e) {
    return skip(e.what());
  }
  rec->name = m.name;
  rec->abi_version = m.abi_version;
  rec->version = m.version;
  rec->vendor = m.vendor;
  rec->provides = m.provides;
  rec->device_types = m.device_types;
  if (Disabled(rec->name)) return skip(kDisabledReason);
  const std::string lib_path = fs::path(manifest_path).parent_path().string() + "/" + m.library;
  rec->library = Canonical(lib_path);
  if (rec->library.empty()) {
    rec->library = lib_path;
    return skip("the library " + lib_path + " named by manifest " + manifest_path +
                " does not exist; reinstall the plugin or remove its manifest");
  }
  if (std::string r = Untrusted(rec->library, "library"); !r.empty()) return skip(r);
  // The same manifest found twice (through two folders or a symlink): one plugin.
  const std::string canonical_manifest = Canonical(manifest_path);
  for (const auto& p : plugins_) {
    if (p->state != BP_PLUGIN_SKIPPED && Canonical(p->manifest) == canonical_manifest) return;
  }
  // Two plugins that claim the same thing: the first on the search path wins, and the later
  // one is shadowed whole (never loaded, its device types not registered). Only a plugin that
  // was not skipped claims anything, so a broken manifest shadows nobody.
  for (const auto& p : plugins_) {
    if (p->state == BP_PLUGIN_SKIPPED) continue;
    std::string clash;
    if (p->library == rec->library) {
      clash = "names the same library";
    } else if (p->name == rec->name) {
      clash = "has the same name";
    } else {
      for (const auto& n : rec->provides) {
        if (std::find(p->provides.begin(), p->provides.end(), n) != p->provides.end()) {
          clash = "also declares '" + n + "'";
          break;
        }
      }
    }
    if (clash.empty()) continue;
    rec->shadowed_by = p->library;
    return skip("shadowed by " + p->library + ": plugin '" + p->name + "' (manifest " +
                p->manifest + "), found earlier on the search path, " + clash +
                ", and the first plugin on the path wins; this one is not loaded. Remove or "
                "rename one of them, or put this one's folder first");
  }
  // All or nothing: a manifest skipped here leaves no device type behind to use up the ids
  // that later plugins need.
  try {
    RegisterDeviceTypes(rec->device_types);
  } catch (const CoreError& e) {
    return skip(std::string("manifest ") + manifest_path + ": " + e.what());
  }
  Trace("plugin '" + rec->name + "' discovered: library " + rec->library);
  plugins_.push_back(std::move(rec));
}

}  // namespace core
}  // namespace backplane
