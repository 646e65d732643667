// SPDX-License-Identifier: Apache-2.0
// The plugin tests: the entry point and ABI negotiation (BP-PLUGIN-1), the names a plugin
// registers (BP-PLUGIN-2), its DeviceAPI table (BP-PLUGIN-4), its target kinds and schemas
// and its code generators.
#include <dlfcn.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/elf_file.hpp>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <mutex>
#include <regex>
#include <set>

#include "conformance.h"

namespace backplane {
namespace conformance {

namespace {

std::string Join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

nlohmann::json ParseOwnedJson(bp_object_t* obj) {
  const char* text = nullptr;
  bp_string_get(obj, &text, nullptr);
  nlohmann::json j = nlohmann::json::parse(text != nullptr ? text : "null", nullptr, false);
  bp_object_release(obj);
  return j;
}

nlohmann::json DescribeKinds() {
  bp_object_t* out = nullptr;
  CheckCall(bp_target_kinds_describe(&out), "bp_target_kinds_describe");
  return ParseOwnedJson(out);
}

std::set<std::string> RegistryNames() {
  bp_object_t* names = nullptr;
  CheckCall(bp_registry_list(&names), "bp_registry_list");
  std::set<std::string> out;
  for (const std::string& s : GetStringArray(names)) out.insert(s);
  bp_object_release(names);
  return out;
}

// ---- plugin.load -------------------------------------------------------------------------

void PluginLoad(Context& ctx) {
  ctx.Load();
  ctx.Survey();
  ctx.extra["info"] = ctx.info.ToJson();
  for (const DeviceTypeInfo& t : ctx.info.device_types) {
    std::string names;
    for (int i = 0; i < t.count; ++i) {
      names += (i == 0 ? ": " : ", ") + t.name + ":" + std::to_string(i) + " '" +
               t.device_names[static_cast<size_t>(i)] + "'";
    }
    if (!t.refused.empty()) {
      ctx.Detail("device type " + t.name + " (id " + std::to_string(t.id) +
                 "): the core refused its DeviceAPI table: " + t.refused);
      continue;
    }
    ctx.Detail("device type " + t.name + " (id " + std::to_string(t.id) + "), " +
               std::to_string(t.count) + " device(s)" + names +
               (t.streams ? "; creates streams" : "; single queue (null stream only)"));
  }
  for (const KindInfo& k : ctx.info.kinds) {
    ctx.Detail("target kind " + k.name + " on device type " + k.device_type +
               (k.codegen ? ", with code generator target.build." + k.name : ""));
  }
  const auto dot = ctx.info.abi_version.find('.');
  const long major = std::strtol(ctx.info.abi_version.c_str(), nullptr, 10);
  const long minor = dot == std::string::npos
                         ? -1
                         : std::strtol(ctx.info.abi_version.c_str() + dot + 1, nullptr, 10);
  if (major != BP_ABI_VERSION_MAJOR || minor < 0 || minor > BP_ABI_VERSION_MINOR) {
    Fail("the plugin answered ABI version '" + ctx.info.abi_version + "'; this host speaks " +
         std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR) +
         " and a plugin answers its major and the lowest host minor it needs (BP-PLUGIN-1)");
  }
  if (!ctx.info.warnings.empty()) Fail("the plugin loaded with warnings: " + ctx.info.warnings);
}

// ---- plugin.entry_point ------------------------------------------------------------------

void EntryPoint(Context& ctx) {
  const elf::Exports e = elf::ReadExports(ctx.library);
  if (!e.error.empty()) Skip(ctx.library + " is " + e.error + "; the export check reads ELF64");
  const bool has_entry = std::find(e.functions.begin(), e.functions.end(),
                                   BP_PLUGIN_ENTRY_SYMBOL) != e.functions.end();
  if (!has_entry) {
    Fail(std::string("the library does not export the function ") + BP_PLUGIN_ENTRY_SYMBOL +
         "; define it with BACKPLANE_PLUGIN_ENTRY or as extern \"C\" with default visibility "
         "(BP-PLUGIN-1)");
  }
  std::vector<std::string> ours, others;
  for (const std::string& n : e.names) {
    if (n == BP_PLUGIN_ENTRY_SYMBOL) continue;
    (n.rfind("bp_", 0) == 0 || n.rfind("BP_", 0) == 0 ? ours : others).push_back(n);
  }
  if (!others.empty()) {
    std::vector<std::string> some(others.begin(),
                                  others.begin() + std::min<size_t>(others.size(), 5));
    ctx.Detail("the library also exports " + std::to_string(others.size()) +
               " other symbol(s), e.g. " + Join(some) +
               "; hidden visibility (backplane_add_plugin sets it) keeps them private");
  }
  if (!ours.empty()) {
    Fail("the library exports " + Join(ours) + " besides " + BP_PLUGIN_ENTRY_SYMBOL +
         ": names of the Backplane C ABI belong to libbackplane, and a plugin exports exactly "
         "one entry point (BP-PLUGIN-1); build it with hidden visibility");
  }
}

// ---- plugin.abi.negotiation --------------------------------------------------------------

std::mutex g_stub_mu;
std::vector<std::string> g_stub_calls;

bp_status_t Refuse(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(g_stub_mu);
    g_stub_calls.push_back(what);
  }
  return bp_error_set(BP_ERR_VERSION_MISMATCH,
                      "conformance kit: registrations are refused during a negotiation check");
}
bp_status_t StubRegistrySet(const char* name, bp_object_t*, int32_t) {
  return Refuse(std::string("function '") + (name != nullptr ? name : "(null)") + "'");
}
bp_status_t StubDeviceTypeRegister(const char* name, int32_t*) {
  return Refuse(std::string("device type '") + (name != nullptr ? name : "(null)") + "'");
}
bp_status_t StubTargetKindRegister(const bp_target_kind_def_t* def) {
  return Refuse(std::string("target kind '") +
                (def != nullptr && def->name != nullptr ? def->name : "(null)") + "'");
}
bp_status_t StubTargetTagRegister(const char* tag, const char*) {
  return Refuse(std::string("target tag '") + (tag != nullptr ? tag : "(null)") + "'");
}

struct InitAnswer {
  bp_status_t status = BP_OK;
  std::string message;
  bp_plugin_info_t info{};
  std::vector<std::string> registered;
};

InitAnswer CallInit(bp_plugin_init_fn_t init, uint32_t major, uint32_t minor) {
  bp_host_api_t host = *bp_host_api();
  host.abi_major = major;
  host.abi_minor = minor;
  host.registry_set = &StubRegistrySet;
  host.device_type_register = &StubDeviceTypeRegister;
  host.target_kind_register = &StubTargetKindRegister;
  host.target_tag_register = &StubTargetTagRegister;
  {
    std::lock_guard<std::mutex> lock(g_stub_mu);
    g_stub_calls.clear();
  }
  InitAnswer a;
  a.info.struct_size = sizeof(a.info);
  bp_error_clear();
  a.status = init(&host, &a.info);
  if (a.status != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    a.message = message != nullptr ? message : "";
  }
  bp_error_clear();
  std::lock_guard<std::mutex> lock(g_stub_mu);
  a.registered = g_stub_calls;
  return a;
}

void AbiNegotiation(Context& ctx) {
  void* lib = dlopen(ctx.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) Fail(std::string("dlopen failed: ") + dlerror());
  auto init = reinterpret_cast<bp_plugin_init_fn_t>(dlsym(lib, BP_PLUGIN_ENTRY_SYMBOL));
  if (init == nullptr) Fail(std::string("no entry point ") + BP_PLUGIN_ENTRY_SYMBOL);

  const uint32_t other = BP_ABI_VERSION_MAJOR + 1;
  const std::string offered = std::to_string(other) + "." + std::to_string(BP_ABI_VERSION_MINOR);
  InitAnswer a = CallInit(init, other, BP_ABI_VERSION_MINOR);
  std::vector<std::string> problems;
  if (!a.registered.empty()) {
    problems.push_back("offered a host of ABI " + offered + ", it still registered " +
                       Join(a.registered) + "; it must refuse before registering anything");
  }
  if (a.status == BP_OK) {
    problems.push_back("bp_plugin_init accepted a host of ABI " + offered +
                       " (it returned BP_OK); refuse another major with BP_ERR_VERSION_MISMATCH");
  } else if (a.status != BP_ERR_VERSION_MISMATCH) {
    problems.push_back("offered a host of ABI " + offered + ", bp_plugin_init returned " +
                       bp_error_kind_name(a.status) + " instead of BP_ERR_VERSION_MISMATCH");
  }
  if (a.info.abi_major != BP_ABI_VERSION_MAJOR) {
    problems.push_back("its answer says ABI major " + std::to_string(a.info.abi_major) +
                       "; a plugin fills abi_major with the major it speaks even when it refuses");
  }
  if (a.status != BP_OK) {
    const std::regex host_version("(^|[^0-9])" + std::to_string(other) + "(\\.[0-9]+)?([^0-9.]|$)");
    const std::regex own_version("(^|[^0-9])" + std::to_string(BP_ABI_VERSION_MAJOR) +
                                 "(\\.[0-9]+)?([^0-9.]|$)");
    if (a.message.empty() || !std::regex_search(a.message, host_version) ||
        !std::regex_search(a.message, own_version)) {
      problems.push_back("its refusal's message \"" + a.message +
                         "\" does not name both versions (the host's " + offered + " and its own " +
                         std::to_string(BP_ABI_VERSION_MAJOR) + ".x)");
    }
  }
  ctx.Detail("offered ABI " + offered + ": " + bp_error_kind_name(a.status) + " \"" + a.message +
             "\"");

  // A host older than the plugin needs: the plugin says which minor it needs and refuses.
  InitAnswer b = CallInit(init, BP_ABI_VERSION_MAJOR, 0);
  if (b.info.abi_minor > 0) {
    if (b.status != BP_ERR_VERSION_MISMATCH || !b.registered.empty()) {
      problems.push_back("offered a host of ABI " + std::to_string(BP_ABI_VERSION_MAJOR) +
                         ".0 while it needs " + std::to_string(BP_ABI_VERSION_MAJOR) + "." +
                         std::to_string(b.info.abi_minor) + ", it returned " +
                         bp_error_kind_name(b.status) +
                         (b.registered.empty() ? "" : " and registered " + Join(b.registered)) +
                         " instead of refusing with BP_ERR_VERSION_MISMATCH");
    }
    ctx.Detail("offered ABI " + std::to_string(BP_ABI_VERSION_MAJOR) +
               ".0: " + bp_error_kind_name(b.status) + " \"" + b.message + "\"");
  } else {
    ctx.Detail("the plugin needs host minor 0, so it works with every " +
               std::to_string(BP_ABI_VERSION_MAJOR) + ".x host");
  }
  if (!problems.empty()) Fail(Join(problems, "; ") + " (BP-PLUGIN-1)");
}

// ---- plugin.names ------------------------------------------------------------------------

void Names(Context& ctx) {
  for (const std::string& p : ctx.plugin_paths) bp_plugin_path_add(p.c_str());
  CheckCall(bp_plugins_discover(), "bp_plugins_discover");
  // Names before the plugin loads: those registered, and those discovered manifests declare.
  // (Describing the target kinds loads every discovered plugin that declares one; a kind's
  // owner says whose it is, tags are told apart by what was there before.)
  const std::set<std::string> before = RegistryNames();
  std::set<std::string> tags_before;
  const nlohmann::json d0 = DescribeKinds();
  for (const auto& [tag, t] : Member(d0, "tags").items()) tags_before.insert(tag);

  ctx.Load();
  const PluginInfo& info = ctx.info;
  std::vector<std::string> problems;
  if (info.manifest.empty()) {
    problems.push_back(
        "there is no manifest beside the library, so discovery cannot list the "
        "plugin or load it on first use; backplane_add_plugin writes <name>" +
        std::string(".bpplugin.json"));
  }
  std::vector<std::string> undeclared;
  for (const std::string& n : RegistryNames()) {
    if (before.count(n) == 0 && !info.Provides(n)) undeclared.push_back("'" + n + "'");
  }
  const nlohmann::json d1 = DescribeKinds();
  for (const auto& k : Member(d1, "kinds")) {
    const std::string n = k.value("name", "");
    if (k.value("owner", "") == "plugin '" + info.name + "'" &&
        !info.Provides("target.kind." + n)) {
      undeclared.push_back("target kind '" + n + "' (declare target.kind." + n + ")");
    }
  }
  for (const auto& [tag, t] : Member(d1, "tags").items()) {
    if (tags_before.count(tag) == 0 && !info.Provides("target.tag." + tag)) {
      undeclared.push_back("target tag '" + tag + "' (declare target.tag." + tag + ")");
    }
  }
  if (!undeclared.empty() && !info.manifest.empty()) {
    problems.push_back("it registered " + Join(undeclared) + ", which its manifest " +
                       info.manifest + " does not declare in \"provides\"");
  }
  for (const DeviceTypeInfo& t : info.device_types) {
    if (!info.manifest.empty() &&
        std::find(info.declared_device_types.begin(), info.declared_device_types.end(), t.name) ==
            info.declared_device_types.end()) {
      problems.push_back("it provides device_api." + t.name + " but its manifest does not list '" +
                         t.name +
                         "' in \"device_types\", so the type has no id until the "
                         "plugin is loaded");
    }
  }
  ctx.Detail("provides: " + Join(info.provides));
  if (!problems.empty()) Fail(Join(problems, "; ") + " (BP-PLUGIN-2)");
}

// ---- plugin.device_api_table -------------------------------------------------------------

void DeviceApiTable(Context& ctx) {
  ctx.Load();
  if (ctx.info.device_types.empty()) Skip("the plugin registers no device_api.<type>");
  constexpr size_t kMinSize =
      offsetof(bp_device_api_t, sync_stream_from_to) + sizeof(bp_device_api_t::sync_stream_from_to);
  std::vector<std::string> problems;
  for (const DeviceTypeInfo& t : ctx.info.device_types) {
    const std::string fname = "device_api." + t.name;
    bp_object_t* f = nullptr;
    CheckCall(bp_registry_get(fname.c_str(), &f), "bp_registry_get(" + fname + ")");
    bp_value_t v1, v2;
    const bp_status_t s1 = bp_function_call(f, nullptr, 0, &v1);
    if (s1 != BP_OK) Fail(fname + "() failed (" + TakeError(s1) + ")");
    const bp_status_t s2 = bp_function_call(f, nullptr, 0, &v2);
    bp_object_release(f);
    if (s2 != BP_OK) Fail(fname + "() failed the second time (" + TakeError(s2) + ")");
    if (v1.type != BP_VALUE_PTR || v1.u.v_ptr == nullptr) {
      Fail(fname + "() returned a " + ValueTypeText(v1) +
           "; it returns BP_VALUE_PTR to its bp_device_api_t (BP-PLUGIN-4)");
    }
    if (v2.type != BP_VALUE_PTR || v2.u.v_ptr != v1.u.v_ptr) {
      problems.push_back(fname +
                         "() returned another table the second time; the table lives "
                         "until the process ends");
    }
    const auto* raw = static_cast<const bp_device_api_t*>(v1.u.v_ptr);
    if (raw->struct_size < kMinSize || raw->struct_size > 4096) {
      Fail(fname + ": the table's struct_size is " + std::to_string(raw->struct_size) +
           ", not the size of a bp_device_api_t (at least " + std::to_string(kMinSize) +
           " bytes); set it to sizeof(bp_device_api_t) (BP-PLUGIN-4)");
    }
    bp_device_api_t table{};
    std::memcpy(&table, raw, std::min(raw->struct_size, sizeof(table)));
    const std::pair<const char*, bool> required[] = {
        {"get_attr", table.get_attr != nullptr},
        {"alloc_data_space", table.alloc_data_space != nullptr},
        {"free_data_space", table.free_data_space != nullptr},
        {"copy_data_from_to", table.copy_data_from_to != nullptr},
        {"stream_sync", table.stream_sync != nullptr}};
    for (const auto& [entry, present] : required) {
      if (!present) problems.push_back(fname + ": the required entry " + entry + " is null");
    }
    if (table.create_stream != nullptr && table.free_stream == nullptr) {
      problems.push_back(fname + ": create_stream is set but free_stream is null");
    }
    if ((table.alloc_workspace == nullptr) != (table.free_workspace == nullptr)) {
      problems.push_back(fname +
                         ": only one of alloc_workspace and free_workspace is set; they "
                         "are a pair, and the core falls back to data space for both");
    }
    std::vector<std::string> defaults;
    if (table.alloc_workspace == nullptr) defaults.push_back("workspace falls back to data space");
    if (table.create_stream == nullptr) defaults.push_back("the null stream only");
    if (table.set_stream == nullptr) defaults.push_back("no set_stream");
    if (table.sync_stream_from_to == nullptr)
      defaults.push_back("sync_stream_from_to syncs the source");
    if (table.set_device == nullptr) defaults.push_back("no set_device");
    ctx.Detail(fname + ": struct_size " + std::to_string(raw->struct_size) +
               (defaults.empty() ? "; every optional entry set" : "; " + Join(defaults, "; ")));
  }
  if (!problems.empty()) Fail(Join(problems, "; ") + " (BP-PLUGIN-4)");
}

// ---- target.kind.* -----------------------------------------------------------------------

const nlohmann::json* FindKind(const nlohmann::json& d, const std::string& name) {
  for (const auto& k : Member(d, "kinds")) {
    if (k.value("name", "") == name) return &k;
  }
  return nullptr;
}

void KindSchema(Context& ctx) {
  ctx.Load();
  std::vector<std::string> kinds, tags;
  for (const std::string& n : ctx.info.provides) {
    if (n.rfind("target.kind.", 0) == 0) kinds.push_back(n.substr(12));
    if (n.rfind("target.tag.", 0) == 0) tags.push_back(n.substr(11));
  }
  for (const KindInfo& k : ctx.info.kinds) {
    if (std::find(kinds.begin(), kinds.end(), k.name) == kinds.end()) kinds.push_back(k.name);
  }
  if (kinds.empty() && tags.empty()) Skip("the plugin registers no target kind or tag");
  const nlohmann::json d = DescribeKinds();
  static const std::set<std::string> kTypes = {"bool",      "int",          "float", "string",
                                               "int array", "string array", "map"};
  for (const std::string& name : kinds) {
    const nlohmann::json* k = FindKind(d, name);
    if (k == nullptr)
      Fail("the plugin declares target.kind." + name + " but no kind '" + name + "' is registered");
    const std::string type = k->value("device_type", "");
    int32_t id = 0;
    if (bp_device_type_from_name(type.c_str(), &id) != BP_OK) {
      Fail("kind '" + name + "' runs on device type '" + type + "', which is not known (" +
           TakeError(BP_ERR_NOT_FOUND) + ")");
    }
    for (const auto& a : Member(*k, "attrs")) {
      const std::string an = a.value("name", "");
      const std::string at = a.value("type", "");
      if (an.empty() || kTypes.count(at) == 0) {
        Fail("kind '" + name + "': attribute '" + an + "' has type '" + at +
             "', not one of the schema's types");
      }
    }
    Target t;
    try {
      t = Target::Parse(name);
    } catch (const Error& e) {
      Fail("Target '" + name + "' (the kind with its defaults) does not parse: " + e.what() +
           "; every default must type-check against the schema");
    }
    const std::string json = t.ToJson();
    Target again;
    try {
      again = Target::Parse(json);
    } catch (const Error& e) {
      Fail("the canonical JSON of Target '" + name + "' does not parse back: " + e.what() +
           "; JSON: " + json);
    }
    if (again.ToJson() != json) {
      Fail("Target '" + name + "' does not round-trip: " + json + " parses back as " +
           again.ToJson() + " (the canonicalizer must be idempotent)");
    }
    ctx.Detail("kind " + name + " on " + type + ": " + json);
  }
  for (const std::string& tag : tags) {
    try {
      Target t = Target::Parse(tag);
      ctx.Detail("tag " + tag + ": " + t.ToJson());
    } catch (const Error& e) {
      Fail("the plugin declares target.tag." + tag + " but Target '" + tag +
           "' does not parse: " + e.what());
    }
  }
}

void KindFromDevice(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  const std::string type = DeviceTypeName(ctx.dev.device_type);
  std::vector<std::string> kinds;
  for (const KindInfo& k : ctx.info.kinds) {
    if (k.device_type == type) kinds.push_back(k.name);
  }
  if (kinds.empty()) Skip("the plugin registers no target kind for device type " + type);
  for (const std::string& kind : kinds) {
    Target t;
    try {
      t = Target::FromDevice(Device(ctx.dev), kind);
    } catch (const Error& e) {
      Fail("Target::FromDevice(" + DeviceString(ctx.dev) + ", \"" + kind +
           "\") failed: " + e.what());
    }
    if (t.Kind() != kind)
      Fail("FromDevice(\"" + kind + "\") gave a Target of kind '" + t.Kind() + "'");
    const int64_t from = t.GetAttr<int64_t>("from_device", -1);
    if (from != ctx.dev.device_id) {
      Fail("FromDevice(" + DeviceString(ctx.dev) + ") gave from_device = " + std::to_string(from));
    }
    const std::string json = t.ToJson();
    if (Target::Parse(json).ToJson() != json)
      Fail("the Target read from the device does not round-trip: " + json);
    ctx.Detail(kind + " from " + DeviceString(ctx.dev) + ": " + json);
  }
}

void CodegenRegistered(Context& ctx) {
  ctx.Load();
  std::vector<std::string> builds;
  for (const std::string& n : ctx.info.provides) {
    if (n.rfind("target.build.", 0) == 0) builds.push_back(n.substr(13));
  }
  if (builds.empty()) Skip("the plugin provides no code generator (target.build.<kind>)");
  const nlohmann::json d = DescribeKinds();
  for (const std::string& kind : builds) {
    bp_object_t* f = nullptr;
    const bp_status_t st = bp_registry_get(("target.build." + kind).c_str(), &f);
    if (st != BP_OK)
      Fail("the plugin declares target.build." + kind + " but it is not registered (" +
           TakeError(st) + ")");
    bp_object_release(f);
    if (FindKind(d, kind) == nullptr) {
      Fail("the plugin provides target.build." + kind + " but no target kind '" + kind +
           "' is registered, so no Target can select it");
    }
    ctx.Detail("target.build." + kind + " for kind " + kind + " on device type " +
               FindKind(d, kind)->value("device_type", ""));
  }
}

}  // namespace

void AddPluginTests(std::vector<TestCase>* out) {
  out->push_back(
      {"plugin.load",
       "a plugin loads through its one entry point, answering the ABI major it speaks "
       "and the lowest host minor it needs; it registers every name its manifest declares",
       "BP-PLUGIN-1", kNeedsNothing, PluginLoad});
  out->push_back(
      {"plugin.entry_point",
       "the library exports exactly one entry point, bp_plugin_init, and no other name of "
       "the Backplane ABI",
       "BP-PLUGIN-1", kNeedsNothing, EntryPoint});
  out->push_back(
      {"plugin.abi.negotiation",
       "offered another major (or an older minor than it needs), the entry point refuses "
       "with BP_ERR_VERSION_MISMATCH and a message naming both versions, registering nothing",
       "BP-PLUGIN-1", kNeedsNothing, AbiNegotiation});
  out->push_back({"plugin.names",
                  "the plugin registers only the names its manifest declares, and declares its "
                  "device types",
                  "BP-PLUGIN-2", kNeedsNothing, Names});
  out->push_back(
      {"plugin.device_api_table",
       "device_api.<type> returns BP_VALUE_PTR to a bp_device_api_t with struct_size set "
       "and every required entry; the same table every time",
       "BP-PLUGIN-4", kNeedsNothing, DeviceApiTable});
  out->push_back({"target.kind.schema",
                  "each target kind the plugin registers has a typed schema whose defaults parse; "
                  "its Targets print as JSON and parse back equal; its tags parse",
                  "", kNeedsNothing, KindSchema});
  out->push_back(
      {"target.kind.from_device",
       "a Target of the plugin's kind is read from its device (from_device) and round-trips", "",
       kNeedsDevice, KindFromDevice});
  out->push_back(
      {"codegen.registered",
       "each code generator target.build.<kind> the plugin declares is registered, for a "
       "registered target kind",
       "", kNeedsNothing, CodegenRegistered});
}

}  // namespace conformance
}  // namespace backplane
