// SPDX-License-Identifier: Apache-2.0
// bench_plugin_load: one fresh process per measurement of plugin discovery, because the core
// discovers once per process. Prints one JSON line and exits.
//
//   bench_plugin_load core
//     Times bp_plugins_discover + bp_plugins_load_all, then reports
//     {"elapsed_ns": N, "loaded": K, "skipped": S, "libraries": [paths of loaded plugins]}.
//   bench_plugin_load dlopen LIBRARY...
//     The baseline: times dlopen(RTLD_NOW | RTLD_LOCAL) + dlsym(bp_plugin_init) of the same
//     files and nothing else, then reports {"elapsed_ns": N, "loaded": K}.
//
// The clock starts in main(), so process start-up and the loading of libbackplane itself
// are outside both figures.
#include <backplane/c_api.h>
#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

int Usage() {
  std::cerr << "usage: bench_plugin_load core\n"
               "       bench_plugin_load dlopen LIBRARY...\n";
  return 2;
}

std::string LastError() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "no message";
}

// The path of a plugin's library as the listing gives it; a bare file name is resolved
// against the folder of its manifest.
std::string LibraryPath(const Json& plugin) {
  std::string library = plugin.value("library", "");
  if (library.empty() || library.front() == '/') return library;
  std::string manifest = plugin.value("manifest", "");
  size_t slash = manifest.rfind('/');
  return slash == std::string::npos ? library : manifest.substr(0, slash + 1) + library;
}

int RunCore() {
  Clock::time_point start = Clock::now();
  bp_status_t discover = bp_plugins_discover();
  bp_status_t load = bp_plugins_load_all();
  Clock::time_point end = Clock::now();
  if (discover != BP_OK || load != BP_OK) {
    std::cerr << "bench_plugin_load: discovery failed: " << LastError() << '\n';
    return 1;
  }
  bp_object_t* listing = nullptr;
  const char* text = nullptr;
  if (bp_plugins_list(&listing) != BP_OK || bp_string_get(listing, &text, nullptr) != BP_OK) {
    std::cerr << "bench_plugin_load: bp_plugins_list failed: " << LastError() << '\n';
    return 1;
  }
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  bp_object_release(listing);
  if (doc.is_discarded()) {
    std::cerr << "bench_plugin_load: bp_plugins_list did not return JSON\n";
    return 1;
  }
  Json libraries = Json::array();
  int loaded = 0;
  int skipped = 0;
  for (const Json& p : doc.value("plugins", Json::array())) {
    std::string state = p.value("state", "");
    if (state == "loaded") {
      ++loaded;
      libraries.push_back(LibraryPath(p));
    } else if (state == "skipped") {
      ++skipped;
    }
  }
  Json out{{"elapsed_ns", std::chrono::nanoseconds(end - start).count()},
           {"loaded", loaded},
           {"skipped", skipped},
           {"libraries", libraries}};
  std::cout << out.dump() << '\n';
  return 0;
}

int RunDlopen(int argc, char** argv) {
  std::vector<void*> handles;
  Clock::time_point start = Clock::now();
  for (int i = 2; i < argc; ++i) {
    void* handle = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr || dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL) == nullptr) {
      std::cerr << "bench_plugin_load: cannot dlopen '" << argv[i] << "': " << dlerror() << '\n';
      return 1;
    }
    handles.push_back(handle);
  }
  Clock::time_point end = Clock::now();
  Json out{{"elapsed_ns", std::chrono::nanoseconds(end - start).count()},
           {"loaded", handles.size()}};
  std::cout << out.dump() << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  if (std::strcmp(argv[1], "core") == 0 && argc == 2) return RunCore();
  if (std::strcmp(argv[1], "dlopen") == 0 && argc > 2) return RunDlopen(argc, argv);
  return Usage();
}
