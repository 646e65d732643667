// SPDX-License-Identifier: Apache-2.0
// What plugin discovery (plugin_discovery.cc) and loading (plugin_loader.cc) share: a
// plugin's record and the helpers both use.
#ifndef BACKPLANE_CORE_SRC_PLUGIN_LOADER_INTERNAL_H_
#define BACKPLANE_CORE_SRC_PLUGIN_LOADER_INTERNAL_H_

#include <backplane/c_api.h>

#include <backplane/file_trust.hpp>
#include <boost/dll/shared_library.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace backplane {
namespace core {

struct PluginRecord {
  std::string name;
  std::string library;  // canonical path
  std::string manifest;
  bp_plugin_state_t state = BP_PLUGIN_DISCOVERED;
  bool loading = false;
  bp_status_t error_kind = BP_OK;
  std::string reason;  // why skipped; warnings for a loaded one
  std::string abi_version;
  std::string version;
  std::string vendor;
  std::vector<std::string> provides;
  std::vector<std::string> device_types;
  std::vector<std::string> registered;  // every name its init registered
  std::string shadowed_by;              // the library of the plugin that shadows it
  std::optional<boost::dll::shared_library> lib;
};

namespace loader_detail {

// Why `path` may not hold a plugin, or "": the one rule set of backplane/file_trust.hpp
// (owner, write permission of the real path and of every folder above it), which the disk
// caches of the code generators apply too.
std::string Untrusted(const std::string& path, const char* what,
                      file_trust::Kind kind = file_trust::Kind::kFile);

// The words of a list variable ("a,b c"): separated by commas or white space.
std::set<std::string> Words(const char* value);
std::string JoinWords(const std::set<std::string>& words);

// BACKPLANE_DEBUG=loader (or all): every step of discovery and loading goes to stderr
// BEFORE it is taken, so that when a plugin kills the process (a crash in a static
// constructor, an abort or exit() in its init) the last line names it and the step. Read
// once, with secure_getenv: a setuid or setgid program never traces.
bool TraceOn();
// One line to fd 2 with write(2): nothing is buffered when the process dies next.
void Trace(const std::string& step);

// The canonical path of `path`, or "" when it does not exist.
std::string Canonical(const std::string& path);

constexpr const char* kDisabledReason =
    "disabled by BACKPLANE_DISABLE_PLUGINS: it is not loaded; remove its name from the "
    "variable to use it";

}  // namespace loader_detail
}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_SRC_PLUGIN_LOADER_INTERNAL_H_
