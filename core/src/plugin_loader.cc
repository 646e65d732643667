// SPDX-License-Identifier: Apache-2.0
// Plugin loading (plugin_discovery.cc finds the plugins), the checks of what an init may
// register, and the C API over both.
//
// Order of the search path (docs/discovery.md): folders the host passes, then
// BACKPLANE_PLUGIN_PATH (read with secure_getenv, so ignored in setuid/setgid programs),
// then the install's lib/backplane/plugins (found relative to libbackplane itself, so a
// moved install still works), then the build tree's plugin folder when libbackplane runs
// from the build tree. Never the current directory: relative entries are ignored.
#include "plugin_loader.h"

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
#include "plugin_loader_internal.h"
#include "runtime.h"
#include "target.h"

namespace fs = boost::filesystem;

namespace backplane {
namespace core {

using namespace loader_detail;

namespace loader_detail {

// Why `path` may not hold a plugin, or "": the one rule set of backplane/file_trust.hpp
// (owner, write permission of the real path and of every folder above it), which the disk
// caches of the code generators apply too.
std::string Untrusted(const std::string& path, const char* what, file_trust::Kind kind) {
  file_trust::Options options;
  options.kind = kind;
  return file_trust::Refusal(path, what, options);
}

// The words of a list variable ("a,b c"): separated by commas or white space.
std::set<std::string> Words(const char* value) {
  std::set<std::string> out;
  if (value == nullptr) return out;
  std::string word;
  for (const char* c = value;; ++c) {
    if (*c == '\0' || *c == ',' || *c == ' ' || *c == '\t' || *c == '\n') {
      if (!word.empty()) out.insert(word);
      word.clear();
      if (*c == '\0') break;
    } else {
      word += *c;
    }
  }
  return out;
}

std::string JoinWords(const std::set<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ",") + w;
  return out;
}

// BACKPLANE_DEBUG=loader (or all): every step of discovery and loading goes to stderr
// BEFORE it is taken, so that when a plugin kills the process (a crash in a static
// constructor, an abort or exit() in its init) the last line names it and the step. Read
// once, with secure_getenv: a setuid or setgid program never traces.
bool TraceOn() {
  static const bool on = [] {
    const std::set<std::string> words = Words(secure_getenv("BACKPLANE_DEBUG"));
    return words.count("loader") > 0 || words.count("all") > 0;
  }();
  return on;
}

// One line to fd 2 with write(2): nothing is buffered when the process dies next.
void Trace(const std::string& step) {
  if (!TraceOn()) return;
  const std::string line = "backplane[loader]: " + step + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string Canonical(const std::string& path) {
  boost::system::error_code ec;
  fs::path p = fs::canonical(path, ec);
  return ec ? std::string() : p.string();
}

}  // namespace loader_detail

namespace {

// The dlerror part of Boost.DLL's message, which is what a person needs.
std::string DlMessage(const std::exception& e) {
  std::string what = e.what();
  const std::string marker = "dlerror system message: ";
  auto pos = what.find(marker);
  if (pos == std::string::npos) return what;
  std::string msg = what.substr(pos + marker.size());
  auto end = msg.rfind(')');  // Boost.DLL closes its parenthesis around the dlerror text
  return end == std::string::npos ? msg : msg.substr(0, end);
}

std::string StateName(bp_plugin_state_t s) {
  switch (s) {
    case BP_PLUGIN_DISCOVERED:
      return "discovered";
    case BP_PLUGIN_LOADED:
      return "loaded";
    default:
      return "skipped";
  }
}

std::string NameFromLibrary(const std::string& path) {
  std::string stem = fs::path(path).filename().string();
  if (stem.rfind("libbackplane_", 0) == 0)
    stem = stem.substr(13);
  else if (stem.rfind("lib", 0) == 0)
    stem = stem.substr(3);
  auto dot = stem.find('.');
  return dot == std::string::npos ? stem : stem.substr(0, dot);
}

}  // namespace

PluginInit* PluginLoader::CurrentInit() const {
  std::lock_guard lock(inits_mu_);
  auto it = inits_.find(std::this_thread::get_id());
  return it == inits_.end() ? nullptr : it->second;
}

PluginInit* PluginLoader::SetCurrentInit(PluginInit* init) {
  std::lock_guard lock(inits_mu_);
  PluginInit*& slot = inits_[std::this_thread::get_id()];
  PluginInit* outer = slot;
  slot = init;
  if (init == nullptr) inits_.erase(std::this_thread::get_id());
  return outer;
}

bool PluginLoader::NameRegistered(const std::string& name) const {
  return static_cast<bool>(registry_.Find(name)) || TargetNameRegistered(name);
}

void PluginLoader::CheckMayRegister(const std::string& name, const std::string& what) {
  PluginInit* init = CurrentInit();
  if (init == nullptr) return;
  const bool declared =
      init->declared != nullptr &&
      std::find(init->declared->begin(), init->declared->end(), name) != init->declared->end();
  if (declared) return;
  // Named first when another plugin's manifest claims it: that is who the name belongs to.
  const std::string declarer = OtherDeclarer(name, init->plugin_name);
  if (!declarer.empty()) {
    Fail(BP_ERR_ALREADY_EXISTS, what + " is declared by plugin '" + declarer +
                                    "' in its manifest; plugin '" + init->plugin_name +
                                    "' does not declare it, so it cannot register it (a plugin "
                                    "registers the names its manifest \"provides\", BP-PLUGIN-2; "
                                    "choose another name)");
  }
  if (init->declared == nullptr) return;  // loaded by path without a manifest
  Fail(BP_ERR_PLUGIN, "plugin '" + init->plugin_name + "' registers " + what + " (\"" + name +
                          "\"), which its manifest " + init->manifest +
                          " does not declare in \"provides\": a plugin registers only the names "
                          "its manifest declares (BP-PLUGIN-2), so that discovery knows who owns "
                          "every name; add it to PROVIDES in backplane_add_plugin");
}

void PluginLoader::CheckMayRegisterDeviceType(const std::string& name) const {
  PluginInit* init = CurrentInit();
  if (init == nullptr || init->declared_device_types == nullptr) return;
  const auto& types = *init->declared_device_types;
  if (std::find(types.begin(), types.end(), name) != types.end()) return;
  if (FindDeviceType(name) >= 0) return;  // a DLPack type, or one another plugin declares
  Fail(BP_ERR_PLUGIN, "plugin '" + init->plugin_name + "' registers the new device type '" + name +
                          "', which its manifest " + init->manifest +
                          " does not declare in \"device_types\" (BP-PLUGIN-2); add it to "
                          "DEVICE_TYPES in backplane_add_plugin");
}

void NoteRefusedRegistration(bp_status_t kind) noexcept {
  try {
    PluginInit* init = CurrentPluginInit();
    if (init == nullptr || !init->refused.empty()) return;
    init->refused_kind = kind;
    init->refused = LastErrorMessage();
    if (init->refused.empty()) init->refused = bp_error_kind_name(kind);
    Trace("plugin '" + init->plugin_name + "': a registration in " + init->stage +
          " was refused: " + init->refused);
  } catch (...) {
    // Out of memory while noting it: the call itself still fails with its status.
  }
}

void RefuseRegistration(bp_status_t kind, const std::string& message) {
  PluginInit* init = CurrentPluginInit();
  if (init != nullptr && init->refused.empty()) {
    init->refused_kind = kind;
    init->refused = message;
  }
  Fail(kind, message);
}

std::string PluginLoader::CurrentOwner() const {
  PluginInit* init = CurrentInit();
  return init != nullptr ? "plugin '" + init->plugin_name + "'" : std::string("the host");
}

PluginInit* CurrentPluginInit() { return Runtime::Get().loader.CurrentInit(); }
void CheckPluginMayRegister(const std::string& name, const std::string& what) {
  Runtime::Get().loader.CheckMayRegister(name, what);
}
void CheckPluginMayRegisterDeviceType(const std::string& name) {
  Runtime::Get().loader.CheckMayRegisterDeviceType(name);
}
std::string CurrentOwner() { return Runtime::Get().loader.CurrentOwner(); }

Runtime& Runtime::Get() {
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Ref Runtime::FindOrLoad(const std::string& name, std::string* looked_at) {
  Ref f = registry.Find(name);
  if (f) return f;
  *looked_at = loader.LoadProviderOf(name);
  return registry.Find(name);
}

PluginLoader::PluginLoader(Registry& registry) : registry_(registry) {}
PluginLoader::~PluginLoader() = default;

PluginRecord* PluginLoader::FindByLibrary(const std::string& canonical_library, bool live_only) {
  PluginRecord* skipped = nullptr;
  for (auto& p : plugins_) {
    if (p->library != canonical_library) continue;
    if (p->state != BP_PLUGIN_SKIPPED) return p.get();
    if (skipped == nullptr) skipped = p.get();
  }
  return live_only ? nullptr : skipped;
}

void PluginLoader::Load(PluginRecord& rec) {
  if (rec.state != BP_PLUGIN_DISCOVERED || rec.loading) return;
  rec.loading = true;
  PluginInit init;
  init.plugin_name = rec.name;
  if (!rec.manifest.empty()) {
    init.declared = &rec.provides;
    init.declared_device_types = &rec.device_types;
    init.manifest = rec.manifest;
  }
  // The library while it is mapped: unloaded (dlclose) when the load fails, unless something
  // the plugin registered is still in use (its code would run after the unmapping).
  boost::dll::shared_library lib;
  auto fail = [&](bp_status_t kind, std::string reason) {
    Trace("plugin '" + rec.name + "' skipped: " + reason);
    // Undo every registration the plugin made, newest first.
    for (auto it = init.undo.rbegin(); it != init.undo.rend(); ++it) (*it)();
    bool in_use = false;
    for (auto it = init.registered.rbegin(); it != init.registered.rend(); ++it) {
      std::optional<Registry::Entry> dropped = registry_.Restore(it->first, std::move(it->second));
      // Another reference than the registry's: a caller took the function meanwhile.
      if (dropped && dropped->func && dropped->func.get()->RefCount() > 1) in_use = true;
    }  // the functions released here run the plugin's deleters, while it is still mapped
    for (const auto& check : init.in_use) in_use = in_use || check();
    if (lib.is_loaded() || rec.lib) {
      if (in_use) {
        reason += " (its library stays mapped: a name it registered is still in use)";
        if (!rec.lib) rec.lib = std::move(lib);
      } else {
        Trace("plugin '" + rec.name + "': unloading " + rec.library);
        rec.lib.reset();
        lib.unload();
      }
    }
    rec.state = BP_PLUGIN_SKIPPED;
    rec.error_kind = kind;
    rec.reason = std::move(reason);
    rec.loading = false;
  };
  if (Disabled(rec.name)) return fail(BP_ERR_PLUGIN, kDisabledReason);
  Trace("loading plugin '" + rec.name + "': checking library " + rec.library);
  // Checked again at load time: discovery may have been long ago.
  if (std::string r = Untrusted(rec.library, "library"); !r.empty()) return fail(BP_ERR_PLUGIN, r);
  // dlopen maps a truncated file's segments all the same, and the host dies of SIGBUS on
  // the first page past the end: look at the headers first.
  if (std::string r = ElfLoadProblem(rec.library); !r.empty()) return fail(BP_ERR_PLUGIN, r);
  Trace("loading plugin '" + rec.name + "': dlopen " + rec.library +
        " (runs its static constructors)");
  // The load is this thread's current init from here: a static constructor that reaches the
  // core (by dlsym, or by linking libbackplane) registers as this plugin, within its manifest,
  // and is rolled back with it; it is never credited to the host.
  init.stage = "a static constructor (run by dlopen)";
  PluginInit* outer = SetCurrentInit(&init);
  try {
    lib.load(rec.library, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    SetCurrentInit(outer);
    return fail(BP_ERR_PLUGIN, "the library cannot be loaded: " + DlMessage(e));
  }
  SetCurrentInit(outer);
  if (!init.refused.empty()) {
    return fail(init.refused_kind,
                "a static constructor of the library (run by dlopen, before bp_plugin_init) made "
                "a registration that was refused: " +
                    init.refused +
                    "; a plugin registers in bp_plugin_init, through the host table it receives");
  }
  if (!lib.has(BP_PLUGIN_ENTRY_SYMBOL)) {
    return fail(BP_ERR_PLUGIN, std::string("the library does not export the entry point '") +
                                   BP_PLUGIN_ENTRY_SYMBOL +
                                   "'; define it with the SDK's BACKPLANE_PLUGIN_ENTRY, or "
                                   "export it as extern \"C\" with default visibility");
  }
  auto entry =
      lib.get<bp_status_t(const bp_host_api_t*, bp_plugin_info_t*)>(BP_PLUGIN_ENTRY_SYMBOL);
  rec.lib = std::move(lib);  // from here on its code may be referenced: keep it mapped

  bp_plugin_info_t info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  init.stage = "bp_plugin_init";
  outer = SetCurrentInit(&init);
  const uint64_t seq = ErrorSequence();
  bp_status_t st = BP_OK;
  std::string thrown;
  Trace("loading plugin '" + rec.name + "': calling " + BP_PLUGIN_ENTRY_SYMBOL + " of " +
        rec.library);
  try {
    st = entry(bp_host_api(), &info);
  } catch (const std::exception& e) {
    thrown = e.what();
  } catch (...) {
    thrown = "an exception that is not a std::exception";
  }
  SetCurrentInit(outer);
  const std::string message = (st != BP_OK && ErrorSequence() != seq) ? LastErrorMessage() : "";

  const std::string host_version = VersionText(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  const std::string plugin_version = VersionText(info.abi_major, info.abi_minor);
  if (info.abi_major != 0) rec.abi_version = plugin_version;  // what it said, not its manifest
  if (!thrown.empty()) {
    return fail(BP_ERR_PLUGIN, "bp_plugin_init threw a C++ exception across the C boundary (" +
                                   thrown +
                                   "); the entry point must catch and return a "
                                   "status (the SDK's BACKPLANE_PLUGIN_ENTRY does)");
  }
  if (info.abi_major != 0 && info.abi_major != BP_ABI_VERSION_MAJOR) {
    return fail(BP_ERR_VERSION_MISMATCH,
                "the plugin speaks Backplane ABI " + plugin_version + " but this host speaks " +
                    host_version +
                    "; another major version is incompatible: use a build of "
                    "the plugin made with the Backplane " +
                    std::to_string(BP_ABI_VERSION_MAJOR) + ".x SDK");
  }
  if (info.abi_major == BP_ABI_VERSION_MAJOR && info.abi_minor > BP_ABI_VERSION_MINOR) {
    return fail(BP_ERR_VERSION_MISMATCH,
                "the plugin needs Backplane ABI " + plugin_version + " but this host provides " +
                    host_version + "; upgrade Backplane to a release with ABI " + plugin_version +
                    " or later, or use a plugin built for " + host_version);
  }
  if (st != BP_OK) {
    std::string why = message.empty() ? std::string("no message was given") : message;
    return fail(st, std::string("bp_plugin_init failed (") + bp_error_kind_name(st) + "): " + why);
  }
  if (!init.refused.empty()) {
    // It went on past the refusal: the init is rolled back all the same (BP-PLUGIN-2).
    return fail(init.refused_kind,
                "bp_plugin_init returned BP_OK but a registration it made was refused: " +
                    init.refused + "; the whole init is rolled back");
  }
  if (info.abi_major == 0) {
    return fail(BP_ERR_VERSION_MISMATCH,
                "bp_plugin_init succeeded but did not say which ABI version it speaks "
                "(abi_major is 0); fill out_info with BP_ABI_VERSION_MAJOR and _MINOR");
  }
  if (info.name != nullptr && !rec.manifest.empty() && rec.name != info.name) {
    return fail(BP_ERR_PLUGIN, std::string("the library calls itself '") + info.name +
                                   "' but its manifest says '" + rec.name +
                                   "'; regenerate the manifest with backplane_add_plugin");
  }
  if (info.name != nullptr && rec.manifest.empty()) rec.name = info.name;
  rec.abi_version = plugin_version;
  if (info.version != nullptr) rec.version = info.version;
  if (info.vendor != nullptr) rec.vendor = info.vendor;
  std::string warnings;
  for (const auto& name : rec.provides) {
    if (!NameRegistered(name)) {
      warnings += (warnings.empty() ? "" : "; ") + std::string("its manifest declares '") + name +
                  "' but it did not register it";
    }
  }
  if (rec.manifest.empty()) {
    for (const auto& [name, previous] : init.registered) rec.provides.push_back(name);
  }
  rec.registered = std::move(init.names);
  rec.reason = warnings;
  rec.state = BP_PLUGIN_LOADED;
  rec.loading = false;
  Trace("plugin '" + rec.name + "' loaded" + (warnings.empty() ? "" : " (" + warnings + ")"));
}

void PluginLoader::LoadAll() {
  std::lock_guard lock(mu_);
  if (!discovered_) DiscoverLocked();
  Trace("loading every discovered plugin (bp_plugins_load_all)");
  for (size_t i = 0; i < plugins_.size(); ++i) Load(*plugins_[i]);
}

PluginRecord* PluginLoader::AddLibrary(const std::string& canon) {
  PluginRecord* rec = FindByLibrary(canon);
  if (rec != nullptr) return rec;
  // Not discovered: use a manifest beside it if there is one that names it.
  const std::string folder = fs::path(canon).parent_path().string();
  const std::string refusal = Untrusted(folder, "plugin folder", file_trust::Kind::kFolder);
  boost::system::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().string();
    if (f.size() > std::string(kManifestSuffix).size() &&
        f.compare(f.size() - std::string(kManifestSuffix).size(), std::string::npos,
                  kManifestSuffix) == 0) {
      try {
        if (Canonical(folder + "/" + ReadManifest(f).library) == canon) AddManifest(f, refusal);
      } catch (const CoreError&) {
        // An unrelated broken manifest: not this library's business.
      }
    }
  }
  rec = FindByLibrary(canon);
  if (rec == nullptr) {
    auto r = std::make_unique<PluginRecord>();
    r->name = NameFromLibrary(canon);
    r->library = canon;
    if (!refusal.empty()) {
      r->state = BP_PLUGIN_SKIPPED;
      r->error_kind = BP_ERR_PLUGIN;
      r->reason = refusal;
    }
    plugins_.push_back(std::move(r));
    rec = plugins_.back().get();
  }
  return rec;
}

void PluginLoader::AddFile(const std::string& entry) {
  const std::string origin = "BACKPLANE_PLUGIN_FILES";
  if (entry.empty() || entry[0] != '/') {
    folders_.push_back({entry, origin, "ignored: a relative entry; only absolute paths are used"});
    return;
  }
  Trace("using file " + entry + " (" + origin + ")");
  const std::string canon = Canonical(entry);
  if (canon.empty() || !fs::is_regular_file(canon)) {
    folders_.push_back({entry, origin, "missing"});
    return;
  }
  const std::string suffix = kManifestSuffix;
  if (entry.size() > suffix.size() &&
      entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string folder = fs::path(canon).parent_path().string();
    const std::string refusal = Untrusted(folder, "plugin folder", file_trust::Kind::kFolder);
    folders_.push_back({entry, origin, refusal.empty() ? "ok" : "refused: " + refusal});
    AddManifest(entry, refusal);
  } else {
    PluginRecord* rec = AddLibrary(canon);
    folders_.push_back(
        {entry, origin, rec->state == BP_PLUGIN_SKIPPED ? "refused: " + rec->reason : "ok"});
  }
}

void PluginLoader::LoadLibrary(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    // realpath() would resolve it against the current directory, which the documented
    // search never uses: a host run from a folder someone else controls would load their code.
    Fail(BP_ERR_INVALID_ARGUMENT, "plugin library '" + path +
                                      "' is not an absolute path; a plugin is never loaded "
                                      "relative to the current directory, so pass an absolute "
                                      "path");
  }
  std::lock_guard lock(mu_);
  if (!discovered_) DiscoverLocked();
  Trace("bp_plugin_load " + path);
  const std::string canon = Canonical(path);
  if (canon.empty() || !fs::is_regular_file(canon)) {
    Fail(BP_ERR_NOT_FOUND, "plugin library " + path + " does not exist or is not a file");
  }
  PluginRecord* rec = AddLibrary(canon);
  Load(*rec);
  if (rec->state == BP_PLUGIN_SKIPPED) {
    Fail(rec->error_kind,
         "plugin '" + rec->name + "' (" + rec->library + ") was not loaded: " + rec->reason);
  }
}

std::string PluginLoader::LookedAt(const std::vector<PluginRecord*>& recs) const {
  std::string out;
  for (const auto* p : recs) {
    if (!out.empty()) out += ", ";
    out += p->name + " [" + StateName(p->state);
    if (p->state == BP_PLUGIN_SKIPPED) out += ": " + p->reason;
    out += "]";
  }
  return out.empty() ? " (no plugin was found on the search path)"
                     : " (plugins looked at: " + out + ")";
}

std::string PluginLoader::LoadProviderOf(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!discovered_) DiscoverLocked();
  std::vector<PluginRecord*> all;
  for (size_t i = 0; i < plugins_.size(); ++i) {
    PluginRecord& p = *plugins_[i];
    all.push_back(&p);
    if (std::find(p.provides.begin(), p.provides.end(), name) != p.provides.end()) {
      if (p.state == BP_PLUGIN_DISCOVERED) {
        Trace("first use of '" + name + "', which plugin '" + p.name + "' declares");
      }
      Load(p);
      if (NameRegistered(name)) return "";
    }
  }
  return LookedAt(all);
}

std::string PluginLoader::OtherDeclarer(const std::string& name, const std::string& plugin) {
  std::lock_guard lock(mu_);
  auto declares = [&](const PluginRecord& p) {
    return std::find(p.provides.begin(), p.provides.end(), name) != p.provides.end();
  };
  std::string other;
  for (const auto& p : plugins_) {
    if (p->name == plugin) {
      if (declares(*p)) return "";
    } else if (other.empty() && p->state != BP_PLUGIN_SKIPPED && declares(*p)) {
      other = p->name;
    }
  }
  return other;
}

void PluginLoader::LoadAllDeclaring(const std::string& prefix) {
  std::lock_guard lock(mu_);
  if (!discovered_) DiscoverLocked();
  for (size_t i = 0; i < plugins_.size(); ++i) {
    PluginRecord& p = *plugins_[i];
    for (const auto& name : p.provides) {
      if (name.rfind(prefix, 0) == 0) {
        Load(p);
        break;
      }
    }
  }
}

std::vector<std::string> PluginLoader::DeclaredNames() {
  std::lock_guard lock(mu_);
  if (!discovered_) DiscoverLocked();
  std::vector<std::string> names;
  for (const auto& p : plugins_) {
    if (p->state == BP_PLUGIN_DISCOVERED) {
      names.insert(names.end(), p->provides.begin(), p->provides.end());
    }
  }
  return names;
}

// The names `p` registered that it still owns: a function the host replaced or removed since
// is someone else's (kinds and tags are never replaced).
std::vector<std::string> PluginLoader::OwnedNames(const PluginRecord& p) const {
  std::vector<std::string> out;
  const std::string owner = "plugin '" + p.name + "'";
  for (const auto& n : p.registered) {
    const bool target_name = n.rfind("target.kind.", 0) == 0 || n.rfind("target.tag.", 0) == 0;
    if (target_name ? TargetNameRegistered(n) : registry_.OwnerOf(n) == owner) {
      out.push_back(n);
    }
  }
  return out;
}

std::string PluginLoader::ToJson() {
  std::lock_guard lock(mu_);
  if (!discovered_) DiscoverLocked();
  nlohmann::json out;
  out["search_path"] = nlohmann::json::array();
  for (const auto& f : folders_) {
    out["search_path"].push_back({{"path", f.path}, {"origin", f.origin}, {"status", f.status}});
  }
  out["plugins"] = nlohmann::json::array();
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  // For each code generator a plugin owns (target.build.<kind>), the IR text versions it reads,
  // [oldest, newest]: what its function declares with BP_FUNCTION_READS_IR, else [1, 1].
  auto reads_ir = [&](const PluginRecord& p) {
    nlohmann::json reads = nlohmann::json::object();
    for (const std::string& n : OwnedNames(p)) {
      if (n.rfind("target.build.", 0) != 0) continue;
      Ref f = registry_.Find(n);
      if (!f || f.get()->type() != BP_OBJECT_FUNCTION) continue;
      const auto* fo = static_cast<const FunctionObject*>(f.get());
      reads[n] = fo->reads_ir_oldest == 0
                     ? nlohmann::json::array({1, 1})
                     : nlohmann::json::array({fo->reads_ir_oldest, fo->reads_ir_newest});
    }
    return reads;
  };
  for (const auto& p : plugins_) {
    out["plugins"].push_back({{"name", p->name},
                              {"library", or_null(p->library)},
                              {"manifest", or_null(p->manifest)},
                              {"state", StateName(p->state)},
                              {"reason", or_null(p->reason)},
                              {"abi_version", or_null(p->abi_version)},
                              {"version", or_null(p->version)},
                              {"vendor", or_null(p->vendor)},
                              {"provides", p->provides},
                              {"registered", OwnedNames(*p)},
                              {"reads_ir", reads_ir(*p)},
                              {"shadowed_by", or_null(p->shadowed_by)},
                              {"device_types", p->device_types}});
  }
  return out.dump(2);
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_plugin_path_add(const char* folder) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(folder != nullptr, "folder is null");
  Runtime::Get().loader.AddPath(folder);
  BP_API_END
}

BP_EXPORT bp_status_t bp_plugins_discover(void) {
  BP_API_BEGIN
  Runtime::Get().loader.Discover();
  BP_API_END
}

BP_EXPORT bp_status_t bp_plugins_load_all(void) {
  BP_API_BEGIN
  Runtime::Get().loader.LoadAll();
  BP_API_END
}

BP_EXPORT bp_status_t bp_plugin_load(const char* library_path) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(library_path != nullptr, "library_path is null");
  Runtime::Get().loader.LoadLibrary(library_path);
  BP_API_END
}

BP_EXPORT bp_status_t bp_plugins_list(bp_object_t** out_json) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_json != nullptr, "out_json is null");
  *out_json = NewString(Runtime::Get().loader.ToJson());
  BP_API_END
}

}  // extern "C"
