// SPDX-License-Identifier: Apache-2.0
// backplane-conformance: checks one plugin against the Backplane contract, clause by clause
// (docs/conformance.md). The parent resolves the plugin, runs plugin.load to learn what the
// plugin provides, then runs every test that applies in a process of its own, applies the
// expected-failure and unsupported lists, and reports to the console, JSON and JUnit.
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/sdk/child_process.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>

#include "cli_help.hpp"
#include "conformance.h"
#include "expectations.h"
#include "isolate.h"
#include "report.h"

#ifndef BACKPLANE_VERSION
#error "BACKPLANE_VERSION must be defined by the build (the project version)"
#endif

#if defined(__SANITIZE_ADDRESS__)
// The kit asks for absurd allocations on purpose (device.memory.huge): a refusal must come
// back as a status, as it does outside the sanitizer.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace {

using namespace backplane::conformance;  // NOLINT: the program's own namespace

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string plugin;
  std::vector<std::string> plugin_paths;
  std::string device;
  std::vector<std::string> tests;
  std::vector<std::string> excludes;
  std::string json;
  std::string junit;
  std::vector<std::string> xfail_files;
  std::vector<std::string> unsupported_files;
  bool verify_xfails = false;
  double timeout = 60;
  int jobs = 1;
  bool list = false;
  bool verbose = false;
  std::vector<std::string> with;  // plugins loaded beside the one under test (--with)
  // Hidden: run one test in this process (the parent's children, or a debugger).
  std::string run_one;
  int result_fd = -1;
};

using backplane::sdk::SelfPath;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Absolute(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return path;
  std::string out = real;
  std::free(real);
  return out;
}

// The text of a manifest the command line names: a regular file of at most 1 MiB, opened
// without blocking, as the core reads manifests (a FIFO must not hang the kit).
std::string ReadManifestFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw std::runtime_error("manifest " + path + " cannot be read");
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
    close(fd);
    throw std::runtime_error("manifest " + path + " is not a regular file of at most 1 MiB");
  }
  text.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(done);
  return text;
}

// The plugin library that `spec` names: a library path, a manifest path, or a plugin name
// found by discovery. Only a spec with a '/' is a path (./libfoo.so for one in the current
// directory): a bare name is never looked up in the current directory, as discovery never
// is. Throws std::runtime_error saying what was tried (the kit exits 2: not found).
std::string ResolvePlugin(const Options& o, const std::string& spec, std::string* name) {
  if (spec.find('/') != std::string::npos) {
    struct stat st {};
    if (stat(spec.c_str(), &st) != 0) throw std::runtime_error(spec + " does not exist");
    if (!S_ISREG(st.st_mode)) {
      throw std::runtime_error(
          spec +
          " is not a regular file; name the plugin's library, its manifest or, "
          "with no '/', its name");
    }
    if (!EndsWith(spec, ".bpplugin.json")) return Absolute(spec);
    nlohmann::json m = nlohmann::json::parse(ReadManifestFile(spec), nullptr, false);
    if (m.is_discarded() || !m.is_object() || !m.contains("library") || !m["library"].is_string()) {
      throw std::runtime_error("manifest " + spec + " is not JSON with a \"library\" string");
    }
    *name = m.value("name", "");
    const std::string dir = Absolute(spec).substr(0, Absolute(spec).rfind('/'));
    const std::string lib = dir + "/" + m["library"].get<std::string>();
    if (access(lib.c_str(), R_OK) != 0)
      throw std::runtime_error("manifest " + spec + " names " + lib + ", which does not exist");
    return Absolute(lib);
  }
  for (const std::string& p : o.plugin_paths)
    backplane::Check(bp_plugin_path_add(Absolute(p).c_str()));
  backplane::Check(bp_plugins_discover());
  bp_object_t* list = nullptr;
  backplane::Check(bp_plugins_list(&list));
  const nlohmann::json all = nlohmann::json::parse(backplane::GetString(list));
  bp_object_release(list);
  // The plugin a host would load by that name: the first on the search path that was not
  // skipped (a later one of that name is shadowed by it), else the first of that name, so
  // that its tests say why it does not load.
  std::string names;
  const nlohmann::json* chosen = nullptr;
  for (const auto& p : Member(all, "plugins")) {
    const std::string n = p.value("name", "");
    names += (names.empty() ? "" : ", ") + n;
    if (n != spec || !p["library"].is_string()) continue;
    if (chosen == nullptr || ((*chosen)["state"] == "skipped" && p["state"] != "skipped")) {
      chosen = &p;
    }
  }
  if (chosen != nullptr) {
    *name = spec;
    return (*chosen)["library"].get<std::string>();
  }
  throw std::runtime_error("no plugin named '" + spec +
                           "' was found (found: " + (names.empty() ? std::string("none") : names) +
                           "); pass the library's path (./" + spec +
                           " for a file in the current directory, which is never searched), or "
                           "its folder with --plugin-path");
}

// What the search path (--plugin-path, BACKPLANE_PLUGIN_PATH, the install's folder) says
// about `library`: the plugin a host would load instead of it, and those it shadows
// (docs/discovery.md, "When two plugins claim a name"). Discovery reads manifests only.
std::vector<std::string> ShadowNotes(const Options& o, const std::string& library,
                                     const std::string& name) {
  for (const std::string& p : o.plugin_paths) bp_plugin_path_add(Absolute(p).c_str());
  std::vector<std::string> notes;
  bp_object_t* list = nullptr;
  if (bp_plugins_discover() != BP_OK || bp_plugins_list(&list) != BP_OK) {
    bp_error_clear();
    return notes;
  }
  const nlohmann::json all = nlohmann::json::parse(backplane::GetString(list), nullptr, false);
  bp_object_release(list);
  bool on_path = false;
  std::string host_loads;  // the library a host loads for `name`, when it is another one
  for (const auto& p : Member(all, "plugins")) {
    if (!p["library"].is_string()) continue;
    const std::string lib = p["library"].get<std::string>();
    on_path = on_path || Absolute(lib) == library;
    if (!name.empty() && p.value("name", "") == name && p["state"] != "skipped" &&
        Absolute(lib) != library && host_loads.empty()) {
      host_loads = lib;
    }
  }
  if (!on_path && !host_loads.empty()) {
    notes.push_back("on this search path a host loads plugin '" + name + "' from " + host_loads +
                    ", not from " + library +
                    ", which is in no folder of the path; the kit checks " + library + " alone");
  }
  for (const auto& p : Member(all, "plugins")) {
    const nlohmann::json& by = Member(p, "shadowed_by");
    if (!by.is_string() || !p["library"].is_string()) continue;
    const std::string lib = p["library"].get<std::string>();
    if (Absolute(lib) == library) {
      notes.push_back("on this search path " + library + " is shadowed by " +
                      by.get<std::string>() +
                      ", so a host loads that one instead; the kit checks " + library + " alone (" +
                      p.value("reason", "") + ")");
    } else if (Absolute(by.get<std::string>()) == library) {
      notes.push_back("on this search path it shadows " + lib + " (plugin '" + p.value("name", "") +
                      "'), which hosts do not load");
    }
  }
  return notes;
}

// The libraries of the layers BACKPLANE_LAYERS names (docs/layer-guide.md): for each, the
// first plugin on the search path, not skipped, that provides layer.<name>. The tests load only
// the plugins BACKPLANE_PLUGIN_FILES lists, so without these the chain would fail every device
// test; a layer nothing provides throws std::runtime_error naming it.
std::vector<std::string> LayerLibraries(const Options& o) {
  const char* env = secure_getenv("BACKPLANE_LAYERS");
  if (env == nullptr || *env == '\0') return {};
  for (const std::string& p : o.plugin_paths) bp_plugin_path_add(Absolute(p).c_str());
  nlohmann::json all;
  bp_object_t* list = nullptr;
  if (bp_plugins_discover() == BP_OK && bp_plugins_list(&list) == BP_OK) {
    all = nlohmann::json::parse(backplane::GetString(list), nullptr, false);
    bp_object_release(list);
  }
  bp_error_clear();
  std::vector<std::string> out;
  const std::string spec = env;
  for (size_t start = 0, end = 0; end != std::string::npos; start = end + 1) {
    end = spec.find(',', start);
    std::string layer = spec.substr(start, end == std::string::npos ? end : end - start);
    layer = layer.substr(0, layer.find(':'));
    layer.erase(0, layer.find_first_not_of(" \t"));
    layer.erase(layer.find_last_not_of(" \t") + 1);
    if (layer.empty()) continue;
    std::string library;
    for (const auto& p : Member(all, "plugins")) {
      if (Member(p, "state") == "skipped" || !Member(p, "library").is_string()) continue;
      for (const auto& n : Member(p, "provides")) {
        if (n == "layer." + layer) library = Member(p, "library").get<std::string>();
      }
      if (!library.empty()) break;
    }
    if (library.empty()) {
      throw std::runtime_error("BACKPLANE_LAYERS names the layer '" + layer +
                               "', and no plugin found here provides layer." + layer +
                               "; add its folder with --plugin-path DIR, or its library with "
                               "--with PLUGIN");
    }
    out.push_back(library);
  }
  return out;
}

// BACKPLANE_PLUGIN_FILES for the tests: the plugin under test, then the --with plugins, then
// the layers BACKPLANE_LAYERS names. Throws std::runtime_error when one is not found.
std::string PluginFiles(const Options& o, const std::string& library) {
  std::string files = library;
  std::vector<std::string> have{Absolute(library)};
  for (const std::string& w : o.with) {
    std::string name;
    try {
      have.push_back(ResolvePlugin(o, w, &name));
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("--with: ") + e.what());
    }
    files += ":" + have.back();
  }
  for (const std::string& l : LayerLibraries(o)) {
    if (std::find(have.begin(), have.end(), Absolute(l)) != have.end()) continue;
    have.push_back(Absolute(l));
    files += ":" + l;
  }
  return files;
}

// The plugins that generate code for `kinds` (kinds a device's Target names inside itself: a
// remote device's Target carries the server's, {"kind": "c", ...}, and the code for it is
// generated in the test's process): for each kind, the first plugin on the search path that is
// not skipped and provides target.kind.<kind>, and the first that provides target.build.<kind>
// (one plugin, as a rule), as a host would load them. `in_tests` holds the libraries the tests
// load already (the plugin under test, the --with plugins), which are not added again. What no
// plugin provides goes to `missing` ("target.build.c"), a plugin that provides it but is
// skipped to `why` (with its reason), and the folders discovery looked in to `searched`.
// Discovery reads manifests only.
struct AddedPlugin {
  std::string kind, name, library;
  bool native = false;  // its modules for the kind are native code (runtime.module.native_code.*)
};
std::vector<AddedPlugin> FindCodegenPlugins(const Options& o, const std::vector<std::string>& kinds,
                                            const std::vector<std::string>& in_tests,
                                            std::vector<std::string>* missing,
                                            std::vector<std::string>* why, std::string* searched) {
  for (const std::string& p : o.plugin_paths) bp_plugin_path_add(Absolute(p).c_str());
  std::vector<AddedPlugin> added;
  bp_object_t* list = nullptr;
  nlohmann::json all;
  if (bp_plugins_discover() == BP_OK && bp_plugins_list(&list) == BP_OK) {
    all = nlohmann::json::parse(backplane::GetString(list), nullptr, false);
    bp_object_release(list);
  }
  bp_error_clear();
  for (const auto& dir : Member(all, "search_path")) {
    const nlohmann::json& path = Member(dir, "path");
    if (path.is_string()) *searched += (searched->empty() ? "" : ", ") + path.get<std::string>();
  }
  std::vector<std::string> have;
  for (const std::string& l : in_tests) have.push_back(Absolute(l));
  for (const std::string& kind : kinds) {
    for (const std::string& need : {"target.kind." + kind, "target.build." + kind}) {
      const nlohmann::json* found = nullptr;
      for (const auto& p : Member(all, "plugins")) {
        bool provides = false;
        for (const auto& n : Member(p, "provides")) provides = provides || n == need;
        if (!provides) continue;
        if (p["state"] != "skipped" && p["library"].is_string()) {
          found = &p;
          break;
        }
        const nlohmann::json& file = p["library"].is_string() ? p["library"] : p["manifest"];
        const std::string line =
            "plugin '" + p.value("name", "") + "'" +
            (file.is_string() ? " (" + file.get<std::string>() + ")" : std::string()) +
            " provides it but is skipped: " +
            (p["reason"].is_string() ? p["reason"].get<std::string>() : "no reason recorded");
        if (std::find(why->begin(), why->end(), line) == why->end()) why->push_back(line);
      }
      if (found == nullptr) {
        missing->push_back(need);
        continue;
      }
      const std::string lib = Absolute((*found)["library"].get<std::string>());
      bool native = false;
      for (const auto& n : Member(*found, "provides"))
        native = native || n == "runtime.module.native_code." + kind;
      if (std::find(have.begin(), have.end(), lib) != have.end()) continue;
      have.push_back(lib);
      added.push_back(AddedPlugin{kind, found->value("name", ""), lib, native});
    }
  }
  return added;
}

bool Selected(const Options& o, const std::string& name) {
  bool in = o.tests.empty();
  for (const std::string& g : o.tests) in = in || fnmatch(g.c_str(), name.c_str(), 0) == 0;
  for (const std::string& g : o.excludes) in = in && fnmatch(g.c_str(), name.c_str(), 0) != 0;
  return in;
}

int g_result_fd = -1;

// Writes `text` to the parent whole: one write() of at most PIPE_BUF bytes is atomic, so
// lines from several threads never interleave.
void WriteResultLine(const std::string& text) {
  if (g_result_fd < 0) return;
  std::string line = text.size() < 4000 ? text : text.substr(0, 3990);
  if (line.back() != '\n') line += '\n';
  ssize_t ignored = write(g_result_fd, line.data(), line.size());
  (void)ignored;
}

// The failure a test's process reports the moment it happens (see SetFailureObserver); the
// parent takes the last result line it got.
void ReportFailureEarly(const std::string& message) {
  TestResult r;
  r.status = "failed";
  r.failure = "assertion";
  r.message = message.size() < 3000 ? message : message.substr(0, 3000) + "...";
  WriteResultLine(ResultToJson(r).dump());
}

int ChildMain(const Options& o) {
  const TestCase* test = FindTest(o.run_one);
  if (test == nullptr) {
    std::fprintf(stderr, "backplane-conformance: no test named '%s' (see --list)\n",
                 o.run_one.c_str());
    return kExitUsage;
  }
  Context ctx;
  ctx.library = o.plugin;
  for (const std::string& p : o.plugin_paths) ctx.plugin_paths.push_back(Absolute(p));
  ctx.device_text = o.device;
  g_result_fd = o.result_fd;
  if (o.result_fd >= 0) SetFailureObserver(&ReportFailureEarly);
  const TestResult r = RunHere(*test, ctx);
  SetFailureObserver(nullptr);
  const std::string text = ResultToJson(r).dump() + "\n";
  std::fflush(nullptr);
  if (o.result_fd >= 0) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = write(o.result_fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    // The plugin stays loaded with its threads: leave without running static destructors.
    _exit(0);
  }
  std::printf("%s", ResultToJson(r).dump(2).c_str());
  std::fflush(nullptr);
  _exit(r.status == "failed" ? kExitFailed : kExitOk);
}

std::string Timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Why a test does not apply to this plugin and device, or "".
std::string NotApplicable(const TestCase& t, const PluginInfo& info, const DeviceTypeInfo* type,
                          int32_t device_id) {
  if ((t.needs & kNeedsDevice) != 0 && type == nullptr) {
    for (const DeviceTypeInfo& d : info.device_types) {
      if (!d.refused.empty()) {
        return "not run: the core refused the DeviceAPI table of device type '" + d.name + "' (" +
               d.refused +
               "), so no device of it can be used; see "
               "plugin.device_api_table";
      }
    }
    return "the plugin has no device present here";
  }
  if (type == nullptr) return "";
  if ((t.needs & kNeedsOpaqueMemory) != 0 && type->id == kDLCPU) {
    return "the device's data space is host memory, whose addresses cannot be validated";
  }
  const std::vector<std::string> kinds = info.CodegenKinds(type->name);
  if ((t.needs & kNeedsCodegen) != 0 && kinds.empty()) {
    return "the plugin has no code generator for a target kind of device type " + type->name;
  }
  const bool cpu_code = static_cast<size_t>(device_id) < type->cpu_code.size()
                            ? type->cpu_code[static_cast<size_t>(device_id)]
                            : type->id == kDLCPU;
  if (t.kernel_family >= 0 && (t.kernel_family == 1) != !cpu_code) {
    return std::string(t.kernel_family == 1 ? "a GPU kernel" : "a CPU kernel") +
           "; code generators for " + type->name + ":" + std::to_string(device_id) + " get " +
           (cpu_code ? "CPU" : "GPU") + " kernels";
  }
  if ((t.needs & kNeedsStreams) != 0 && !type->streams) {
    return "single-queue device: create_stream gives the null stream";
  }
  return "";
}

int Run(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  RunReport report;
  report.kit_version = BACKPLANE_VERSION;
  report.plugin_spec = o.plugin;
  report.timestamp = Timestamp();
  report.verify_xfails = o.verify_xfails;

  std::string manifest_name;
  std::string library;
  try {
    library = ResolvePlugin(o, o.plugin, &manifest_name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane-conformance: %s\n", e.what());
    return kExitUsage;
  }
  Expectations xfails, unsupported;
  try {
    for (const std::string& f : o.xfail_files) xfails.Read(f);
    for (const std::string& f : o.unsupported_files) unsupported.Read(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane-conformance: %s\n", e.what());
    return kExitUsage;
  }

  IsolationOptions iso;
  iso.self = SelfPath();
  iso.timeout_s = o.timeout;
  iso.jobs = o.jobs;
  // Each test discovers the plugin under test and nothing else: not BACKPLANE_PLUGIN_PATH,
  // not --plugin-path, not the install's folder, so that another plugin there can neither
  // shadow it nor stand in for it, and the verdict does not depend on the environment.
  std::string plugin_files;
  try {
    plugin_files = PluginFiles(o, library);
    iso.env = {{"BACKPLANE_PLUGIN_FILES", plugin_files}};
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane-conformance: %s\n", e.what());
    return kExitUsage;
  }
  // Layers that cannot be used (an option refused, a layer that fails to load) would turn
  // every device test into a skip: the kit refuses to run instead.
  if (const char* layers = secure_getenv("BACKPLANE_LAYERS"); layers != nullptr && *layers) {
    bp_object_t* names = nullptr;
    if (bp_layers_active(&names) != BP_OK) {
      const char* why = nullptr;
      bp_error_last(nullptr, &why);
      std::fprintf(stderr, "backplane-conformance: BACKPLANE_LAYERS=%s cannot be used: %s\n",
                   layers, why != nullptr ? why : "");
      return kExitUsage;
    }
    bp_object_release(names);
  }
  std::vector<std::string> base_args = iso.args;
  base_args.push_back(library);

  // plugin.load first: it tells which device types, devices and code generators there are.
  // Every --test glob must match a test: a typo would otherwise run plugin.load alone and
  // report CONFORMANT.
  for (const std::string& g : o.tests) {
    bool matched = false;
    for (const TestCase& t : AllTests())
      matched = matched || fnmatch(g.c_str(), t.name.c_str(), 0) == 0;
    if (!matched) {
      std::fprintf(stderr,
                   "backplane-conformance: --test '%s' matches no test; --list shows the test "
                   "names (globs such as 'device.copy.*')\n",
                   g.c_str());
      return kExitUsage;
    }
  }
  // With --json - the report is standard output, so the console lines go to stderr.
  FILE* console = o.json == "-" ? stderr : stdout;
  const TestCase* load = FindTest("plugin.load");
  std::vector<const TestCase*> all_selected;
  for (const TestCase& t : AllTests()) {
    if (&t == load || Selected(o, t.name)) all_selected.push_back(&t);
  }
  if (all_selected.size() == 1 && !o.excludes.empty() && !Selected(o, "plugin.load")) {
    std::fprintf(stderr,
                 "backplane-conformance: --test and --exclude leave no test to run; --list shows "
                 "the test names\n");
    return kExitUsage;
  }
  const size_t total = all_selected.size();
  report.tests = o.tests;
  report.excludes = o.excludes;
  report.all_tests = AllTests().size();
  size_t finished = 0;
  std::fprintf(console, "backplane-conformance %s: checking %s\n", BACKPLANE_VERSION,
               library.c_str());
  std::fflush(console);

  iso.args = base_args;
  const TestResult load_result = RunIsolated({load}, iso, nullptr).front();
  PluginInfo info;
  const bool loaded = load_result.extra.contains("info");
  if (loaded) info = PluginInfo::FromJson(load_result.extra["info"]);
  if (info.name.empty()) info.name = manifest_name;
  if (info.library.empty()) info.library = library;
  report.plugin = info;
  report.notes = ShadowNotes(o, library, info.name);
  for (const std::string& note : report.notes) std::fprintf(console, "note: %s\n", note.c_str());

  const DeviceTypeInfo* type = nullptr;
  int32_t device_id = 0;
  if (!o.device.empty()) {
    const auto colon = o.device.find(':');
    const std::string tname = o.device.substr(0, colon);
    device_id = colon == std::string::npos ? 0 : std::atoi(o.device.c_str() + colon + 1);
    for (const DeviceTypeInfo& t : info.device_types) {
      if (t.name == tname) type = &t;
    }
    if (loaded && type != nullptr && !type->refused.empty()) {
      std::fprintf(stderr,
                   "backplane-conformance: --device %s: the core refused the DeviceAPI table of "
                   "device type '%s': %s\n",
                   o.device.c_str(), type->name.c_str(), type->refused.c_str());
      return kExitUsage;
    }
    if (loaded && (type == nullptr || device_id >= type->count || device_id < 0)) {
      std::fprintf(stderr, "backplane-conformance: --device %s: the plugin has no such device\n",
                   o.device.c_str());
      return kExitUsage;
    }
  } else {
    for (const DeviceTypeInfo& t : info.device_types) {
      if (type == nullptr && t.count > 0) type = &t;
    }
  }
  std::vector<std::string> device_names;
  if (type != nullptr) {
    report.device = type->name + ":" + std::to_string(device_id);
    if (static_cast<size_t>(device_id) < type->device_names.size()) {
      report.device_name = type->device_names[static_cast<size_t>(device_id)];
      device_names.push_back(report.device_name);
    }
    device_names.push_back(report.device);
    base_args.insert(base_args.end() - 1, {"--device", report.device});
  }

  // A device whose Target names another kind inside it (a remote device: the server's Target)
  // has its code generated here by the plugin of that kind, which the tests then load too, as
  // if it were named with --with; the kit says so. When none is found, the tests that build
  // code would all fail on it: the kit stops, naming the --with to add.
  std::string no_codegen;  // why the code generation tests cannot run on the device, if so
  if (type != nullptr && static_cast<size_t>(device_id) < type->foreign_kinds.size() &&
      !type->foreign_kinds[static_cast<size_t>(device_id)].empty()) {
    const std::vector<std::string>& kinds = type->foreign_kinds[static_cast<size_t>(device_id)];
    std::vector<std::string> in_tests;  // the libraries the tests load already
    for (size_t start = 0, end = 0; end != std::string::npos; start = end + 1) {
      end = plugin_files.find(':', start);
      in_tests.push_back(plugin_files.substr(start, end == std::string::npos ? end : end - start));
    }
    std::vector<std::string> missing;
    std::vector<std::string> why;
    std::string searched;
    std::string named;
    for (const std::string& k : kinds) named += (named.empty() ? "'" : ", '") + k + "'";
    for (const AddedPlugin& a : FindCodegenPlugins(o, kinds, in_tests, &missing, &why, &searched)) {
      plugin_files += ":" + a.library;
      const std::string note = "the Target of " + report.device + " names target kind '" + a.kind +
                               "', whose code is generated here: the tests also load plugin '" +
                               a.name + "' (" + a.library + "), as --with " + a.library + " would";
      report.notes.push_back(note);
      std::fprintf(console, "note: %s\n", note.c_str());
      if (a.native && static_cast<size_t>(device_id) < type->refuses_native.size() &&
          type->refuses_native[static_cast<size_t>(device_id)]) {
        const std::string native =
            "code for target kind '" + a.kind + "' is native code (plugin '" + a.name +
            "' provides runtime.module.native_code." + a.kind + "), and the server of " +
            report.device +
            " loads none (its property server_native_modules is 0); serve the device with "
            "`backplane serve --allow-native-modules` to run the code generation tests";
        no_codegen = "not run: " + native;
        report.notes.push_back(native);
        std::fprintf(console, "note: %s\n", native.c_str());
      }
    }
    iso.env = {{"BACKPLANE_PLUGIN_FILES", plugin_files}};
    bool builds = false;
    for (const TestCase* t : all_selected) builds = builds || (t->needs & kNeedsCodegen) != 0;
    if (!missing.empty() && builds) {
      std::string lacking;
      for (const std::string& m : missing) lacking += (lacking.empty() ? "" : " and ") + m;
      std::string reasons;
      for (const std::string& w : why) reasons += "; " + w;
      std::fprintf(stderr,
                   "backplane-conformance: the Target of %s names target kind %s, whose code is "
                   "generated on this host, and no plugin found here provides %s (searched: %s%s); "
                   "add --with PLUGIN, PLUGIN being the library, manifest or name of the plugin "
                   "that provides it (the plugin of the remote device's kind), or --plugin-path "
                   "DIR with its folder, or leave the code generation tests out with -x "
                   "'codegen.*'\n",
                   report.device.c_str(), named.c_str(), lacking.c_str(),
                   searched.empty() ? "no folder" : searched.c_str(), reasons.c_str());
      return kExitUsage;
    }
    if (!missing.empty()) {
      const std::string note = "the Target of " + report.device + " names target kind " + named +
                               ", whose code is generated here, and no plugin found here "
                               "provides it; no code generation test is selected, so none needs it";
      report.notes.push_back(note);
      std::fprintf(console, "note: %s\n", note.c_str());
    }
  }

  auto apply = [&](const TestCase* t, TestResult r) {
    Outcome out;
    out.test = t;
    out.status = r.status;
    if (const Expectation* x = xfails.Match(info.name, device_names, t->name)) {
      const std::string why = "expected to fail: " +
                              (x->reason.empty() ? std::string("(no reason given)") : x->reason) +
                              " [" + x->where + "]";
      if (r.status == "failed") {
        out.status = "xfail";
        out.expectation = why;
      } else if (r.status == "passed") {
        out.status = "xpass";
        out.expectation = why;
      }
    }
    out.result = std::move(r);
    return out;
  };
  report.outcomes.push_back(apply(load, load_result));
  PrintOutcome(report.outcomes.back(), ++finished, total, o.verbose, console);

  std::vector<const TestCase*> to_run;
  std::vector<size_t> slots;
  for (const TestCase* t : all_selected) {
    if (t == load) continue;
    Outcome out;
    out.test = t;
    out.result.name = t->name;
    if (const Expectation* x = unsupported.Match(info.name, device_names, t->name)) {
      out.status = "unsupported";
      out.expectation = (x->reason.empty() ? std::string("(no reason given)") : x->reason) + " [" +
                        x->where + "]";
      out.result.message = "unsupported: " + out.expectation;
    } else if (!loaded) {
      out.status = "skipped";
      out.result.message = "not run: the plugin did not load (see plugin.load)";
    } else if ((t->needs & kNeedsCodegen) != 0 && !no_codegen.empty()) {
      out.status = "skipped";
      out.result.message = no_codegen;
    } else if (std::string why = NotApplicable(*t, info, type, device_id); !why.empty()) {
      out.status = "skipped";
      out.result.message = why;
    } else {
      to_run.push_back(t);
      slots.push_back(report.outcomes.size());
    }
    report.outcomes.push_back(out);
  }
  for (Outcome& out : report.outcomes) {
    if (out.status == "skipped" || out.status == "unsupported")
      PrintOutcome(out, ++finished, total, o.verbose, console);
  }
  iso.args = base_args;
  std::vector<TestResult> results = RunIsolated(to_run, iso, [&](const TestResult& r) {
    const TestCase* t = FindTest(r.name);
    PrintOutcome(apply(t, r), ++finished, total, o.verbose, console);
  });
  for (size_t i = 0; i < results.size(); ++i)
    report.outcomes[slots[i]] = apply(to_run[i], std::move(results[i]));

  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PrintSummary(report, console);
  auto write = [](const std::string& path, const std::string& text, const char* what) {
    if (path == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
      if (std::fflush(stdout) == 0) return true;
      std::fprintf(stderr, "backplane-conformance: cannot write the %s report to stdout\n", what);
      return false;
    }
    std::ofstream f(path);
    f << text;
    if (!f) {
      std::fprintf(stderr, "backplane-conformance: cannot write the %s report to %s\n", what,
                   path.c_str());
      return false;
    }
    return true;
  };
  bool written = true;
  if (!o.json.empty()) written = write(o.json, ToJson(report), "JSON") && written;
  if (!o.junit.empty()) written = write(o.junit, ToJUnit(report), "JUnit") && written;
  if (!written) return kExitUsage;
  return report.Ok() ? kExitOk : kExitFailed;
}

void ListTests() {
  for (const TestCase& t : AllTests()) {
    std::printf("%s\n    %s%s\n", t.name.c_str(), t.clause.c_str(),
                t.requirement.empty() ? "" : (" [" + t.requirement + "]").c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app(
      "Checks one Backplane plugin against the contract, clause by clause: the DeviceAPI table, "
      "Targets, code generators and the requirements BP-PLUGIN-1..13. Each test runs in "
      "a process of its own, so a plugin that crashes or hangs fails that test only. Exit code 0 "
      "when every test that applies passed (or is listed as an expected failure or unsupported), "
      "1 when one failed, 2 for a usage error.",
      "backplane-conformance");
  backplane::tools::UseWrappingHelp(app);
  app.footer(
      "Examples:\n"
      "  backplane-conformance cpu\n"
      "  backplane-conformance build/lib/backplane/plugins/libfoo.so --json foo.json\n"
      "  backplane-conformance foo -t 'device.copy.*' --json - | jq .summary\n"
      "Exit codes: 0 every test that ran passed (conformant when no --test or --exclude "
      "narrowed the run), 1 a test failed, 2 a usage error (a --test that matches no test, a "
      "bad file).\n"
      "Environment: BACKPLANE_PLUGIN_PATH (where a plugin named by name is looked for); each "
      "test sees the plugin under test only.\nDocumentation: " +
      backplane::tools::DocsPath("conformance.md"));
  app.set_version_flag("--version", std::string("backplane-conformance ") + BACKPLANE_VERSION);
  app.add_option("plugin", o.plugin,
                 "The plugin: its library (.so), its manifest (.bpplugin.json), or its name as "
                 "discovery finds it");
  app.add_option("--plugin-path", o.plugin_paths, "Search DIR for plugins first (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false);
  app.add_option("--with", o.with,
                 "Also load PLUGIN in every test: one the plugin under test builds on, such as "
                 "the plugin whose target kind its code generator serves (repeatable). Every "
                 "other plugin is kept out, but for those of the kinds a device's Target names "
                 "inside itself (a remote device's), which the kit adds and names")
      ->type_name("PLUGIN")
      ->allow_extra_args(false);
  app.add_option("--device", o.device,
                 "The device to check, TYPE:ID (default: device 0 of the plugin's first device "
                 "type that has one)")
      ->type_name("TYPE:ID");
  app.add_option("--test,-t", o.tests, "Run only the tests whose names match GLOB (repeatable)")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  app.add_option("--exclude,-x", o.excludes,
                 "Leave out the tests whose names match GLOB (repeatable)")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  app.add_option("--json", o.json,
                 "Write the JSON report (schema_version 1) to FILE; '-' writes it to stdout and "
                 "the console lines to stderr")
      ->type_name("FILE");
  app.add_option("--junit", o.junit, "Write the JUnit XML report to FILE ('-': stdout)")
      ->type_name("FILE");
  app.add_option("--xfail", o.xfail_files,
                 "Expected failures: entries PLUGIN DEVICE TEST [REASON] (repeatable)")
      ->type_name("FILE")
      ->allow_extra_args(false);
  app.add_option("--unsupported", o.unsupported_files,
                 "Unsupported features, not run: entries PLUGIN DEVICE TEST [REASON] (repeatable)")
      ->type_name("FILE")
      ->allow_extra_args(false);
  app.add_flag("--verify-xfails", o.verify_xfails, "Fail the run when an expected failure passes");
  app.add_option("--timeout", o.timeout,
                 "Seconds one test may take before it is killed (default 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--jobs,-j", o.jobs, "Tests to run at once (default 1)")->check(CLI::Range(1, 64));
  app.add_flag("--list", o.list, "List the tests with the clause each checks, and exit");
  app.add_flag("--verbose,-v", o.verbose, "Show every test's details, not only a failure's");
  app.add_option("--run-one", o.run_one,
                 "Run the one test NAME in this process, without isolation, and print its "
                 "result as JSON (for a debugger)")
      ->type_name("NAME");
  app.add_option("--result-fd", o.result_fd)->group("");  // how a child reports to the kit
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (o.list) {
    ListTests();
    return kExitOk;
  }
  if (o.plugin.empty()) {
    std::fprintf(stderr,
                 "backplane-conformance: name the plugin to check (a library, a manifest or "
                 "a plugin name); --help shows the options\n");
    return kExitUsage;
  }
  if (!o.run_one.empty()) {
    if (o.result_fd < 0) {  // by hand: the plugin may be named as for a run
      std::string name;
      std::string library;
      std::string files;
      try {
        library = ResolvePlugin(o, o.plugin, &name);
        files = PluginFiles(o, library);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "backplane-conformance: %s\n", e.what());
        return kExitUsage;
      }
      // The plugin alone, as in a run. A name was found by a discovery in this process,
      // which BACKPLANE_PLUGIN_FILES can no longer narrow: start again with the library.
      setenv("BACKPLANE_PLUGIN_FILES", files.c_str(), 1);
      if (library != o.plugin && o.plugin.find('/') == std::string::npos) {
        std::vector<std::string> args(argv, argv + argc);
        for (auto a = args.rbegin(); a != args.rend(); ++a) {  // the positional: the last
          if (*a == o.plugin) {
            *a = library;
            break;
          }
        }
        std::vector<char*> cargs;
        for (std::string& a : args) cargs.push_back(a.data());
        cargs.push_back(nullptr);
        execv(SelfPath().c_str(), cargs.data());
        std::fprintf(stderr, "backplane-conformance: cannot run itself again: %s\n",
                     std::strerror(errno));
        return kExitUsage;
      }
      o.plugin = library;
    }
    return ChildMain(o);
  }
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane-conformance: %s\n", e.what());
    return kExitUsage;
  }
}
