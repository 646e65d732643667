// SPDX-License-Identifier: Apache-2.0
// The test context: loading the plugin, reading what it provides, choosing the device.
#include <algorithm>
#include <atomic>
#include <backplane/backplane.hpp>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "conformance.h"

namespace backplane {
namespace conformance {

namespace {

// Devices of one type are counted from id 0 while they exist, up to this many.
constexpr int kMaxDevices = 64;

std::string Canonical(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return path;
  std::string out = real;
  std::free(real);
  return out;
}

std::string StringOr(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string AttrString(DLDevice dev, int32_t kind) {
  bp_value_t v;
  if (bp_device_get_attr(dev, kind, &v) != BP_OK) {
    bp_error_clear();
    return "";
  }
  std::string out;
  if (v.type == BP_VALUE_OBJECT) {
    int32_t type = 0;
    const char* data = nullptr;
    if (bp_object_type(v.u.v_obj, &type) == BP_OK && type == BP_OBJECT_STRING &&
        bp_string_get(v.u.v_obj, &data, nullptr) == BP_OK && data != nullptr) {
      out = data;
    }
    bp_object_release(v.u.v_obj);
  }
  bp_error_clear();
  return out;
}

}  // namespace

nlohmann::json PluginInfo::ToJson() const {
  nlohmann::json types = nlohmann::json::array();
  for (const DeviceTypeInfo& t : device_types) {
    types.push_back({{"name", t.name},
                     {"id", t.id},
                     {"count", t.count},
                     {"device_names", t.device_names},
                     {"cpu_code", t.cpu_code},
                     {"foreign_kinds", t.foreign_kinds},
                     {"refuses_native", t.refuses_native},
                     {"streams", t.streams},
                     {"refused", t.refused}});
  }
  nlohmann::json ks = nlohmann::json::array();
  for (const KindInfo& k : kinds) {
    ks.push_back({{"name", k.name}, {"device_type", k.device_type}, {"codegen", k.codegen}});
  }
  return {{"name", name},
          {"library", library},
          {"manifest", manifest},
          {"version", version},
          {"abi_version", abi_version},
          {"vendor", vendor},
          {"warnings", warnings},
          {"provides", provides},
          {"declared_device_types", declared_device_types},
          {"device_types", types},
          {"kinds", ks}};
}

PluginInfo PluginInfo::FromJson(const nlohmann::json& j) {
  PluginInfo p;
  p.name = StringOr(j, "name");
  p.library = StringOr(j, "library");
  p.manifest = StringOr(j, "manifest");
  p.version = StringOr(j, "version");
  p.abi_version = StringOr(j, "abi_version");
  p.vendor = StringOr(j, "vendor");
  p.warnings = StringOr(j, "warnings");
  for (const auto& n : Member(j, "declared_device_types")) {
    if (n.is_string()) p.declared_device_types.push_back(n.get<std::string>());
  }
  if (j.contains("provides") && j["provides"].is_array()) {
    for (const auto& n : j["provides"]) {
      if (n.is_string()) p.provides.push_back(n.get<std::string>());
    }
  }
  if (j.contains("device_types") && j["device_types"].is_array()) {
    for (const auto& t : j["device_types"]) {
      DeviceTypeInfo d;
      d.name = StringOr(t, "name");
      d.id = t.value("id", -1);
      d.count = t.value("count", 0);
      d.streams = t.value("streams", false);
      d.refused = StringOr(t, "refused");
      if (t.contains("device_names")) {
        for (const auto& n : t["device_names"]) d.device_names.push_back(n.get<std::string>());
      }
      if (t.contains("cpu_code")) {
        for (const auto& c : t["cpu_code"]) d.cpu_code.push_back(c.get<bool>());
      }
      for (const auto& r : Member(t, "refuses_native")) d.refuses_native.push_back(r == true);
      for (const auto& per_id : Member(t, "foreign_kinds")) {
        d.foreign_kinds.emplace_back();
        for (const auto& k : per_id) {
          if (k.is_string()) d.foreign_kinds.back().push_back(k.get<std::string>());
        }
      }
      p.device_types.push_back(d);
    }
  }
  if (j.contains("kinds") && j["kinds"].is_array()) {
    for (const auto& k : j["kinds"]) {
      p.kinds.push_back(
          KindInfo{StringOr(k, "name"), StringOr(k, "device_type"), k.value("codegen", false)});
    }
  }
  return p;
}

std::vector<std::string> PluginInfo::CodegenKinds(const std::string& type_name) const {
  std::vector<std::string> out;
  for (const KindInfo& k : kinds) {
    if (k.codegen && k.device_type == type_name) out.push_back(k.name);
  }
  return out;
}

bool PluginInfo::Provides(const std::string& n) const {
  for (const std::string& p : provides) {
    if (p == n) return true;
  }
  return false;
}

void Context::Load() {
  for (const std::string& p : plugin_paths)
    CheckCall(bp_plugin_path_add(p.c_str()), "bp_plugin_path_add");
  const bp_status_t st = bp_plugin_load(library.c_str());
  if (st != BP_OK) Fail("the plugin did not load: " + TakeError(st));

  bp_object_t* list = nullptr;
  CheckCall(bp_plugins_list(&list), "bp_plugins_list");
  const char* text = nullptr;
  bp_string_get(list, &text, nullptr);
  nlohmann::json all = nlohmann::json::parse(text != nullptr ? text : "{}", nullptr, false);
  bp_object_release(list);
  const std::string canon = Canonical(library);
  nlohmann::json record;
  for (const auto& p : Member(all, "plugins")) {
    if (p.value("library", nlohmann::json()).is_string() &&
        Canonical(p["library"].get<std::string>()) == canon) {
      record = p;
    }
  }
  if (record.is_null()) Fail("bp_plugins_list does not list the loaded library " + canon);
  // The kit checks one plugin: another one loaded here would answer for names the tests use
  // and have its faults blamed on this one (BACKPLANE_PLUGIN_FILES, which the parent sets,
  // keeps them out; a setuid kit ignores it).
  std::set<std::string> with;  // the --with plugins, which the parent puts in the variable
  if (const char* files = std::getenv("BACKPLANE_PLUGIN_FILES")) {
    std::string rest = files;
    for (size_t end; !rest.empty(); rest = end == std::string::npos ? "" : rest.substr(end + 1)) {
      end = rest.find(':');
      with.insert(Canonical(rest.substr(0, end)));
    }
  }
  std::string others;
  for (const auto& p : Member(all, "plugins")) {
    if (p.value("state", "") != "loaded" || !p.value("library", nlohmann::json()).is_string()) {
      continue;
    }
    const std::string lib = Canonical(p["library"].get<std::string>());
    const std::string who = "'" + p.value("name", "") + "' (" + lib + ")";
    if (lib == canon) continue;
    if (with.count(lib) > 0) {
      Detail("also loaded, with --with: " + who);
      continue;
    }
    others += (others.empty() ? "" : ", ") + who;
  }
  if (!others.empty()) {
    Fail("besides the plugin under test, the process loaded " + others +
         ": its results cannot be told apart from the plugin's; check the plugin alone "
         "(BACKPLANE_PLUGIN_FILES=" +
         canon + ")");
  }
  info = PluginInfo{};
  info.name = StringOr(record, "name");
  info.library = canon;
  info.manifest = StringOr(record, "manifest");
  info.version = StringOr(record, "version");
  info.abi_version = StringOr(record, "abi_version");
  info.vendor = StringOr(record, "vendor");
  info.warnings = StringOr(record, "reason");
  for (const auto& n : Member(record, "provides")) {
    info.provides.push_back(n.get<std::string>());
  }
  for (const auto& n : Member(record, "device_types")) {
    info.declared_device_types.push_back(n.get<std::string>());
  }

  const std::string api_prefix = "device_api.";
  for (const std::string& name : info.provides) {
    if (name.rfind(api_prefix, 0) != 0) continue;
    DeviceTypeInfo t;
    t.name = name.substr(api_prefix.size());
    if (bp_device_type_from_name(t.name.c_str(), &t.id) != BP_OK) bp_error_clear();
    info.device_types.push_back(t);
  }

  // Target kinds: those the plugin registered (their owner), each with a code generator when
  // the plugin provides target.build.<kind>.
  bp_object_t* described = nullptr;
  nlohmann::json kinds;
  if (bp_target_kinds_describe(&described) == BP_OK) {
    const char* k = nullptr;
    bp_string_get(described, &k, nullptr);
    kinds = nlohmann::json::parse(k != nullptr ? k : "{}", nullptr, false);
    bp_object_release(described);
  }
  bp_error_clear();
  const std::string owner = "plugin '" + info.name + "'";
  for (const auto& k : Member(kinds, "kinds")) {
    const std::string kname = StringOr(k, "name");
    if (StringOr(k, "owner") == owner) {
      info.kinds.push_back(
          KindInfo{kname, StringOr(k, "device_type"), info.Provides("target.build." + kname)});
    }
  }
  // A code generator for a kind another plugin registers.
  const std::string build_prefix = "target.build.";
  for (const std::string& name : info.provides) {
    if (name.rfind(build_prefix, 0) != 0) continue;
    const std::string kname = name.substr(build_prefix.size());
    bool known = false;
    for (const KindInfo& k : info.kinds) known = known || k.name == kname;
    if (known) continue;
    for (const auto& k : Member(kinds, "kinds")) {
      if (StringOr(k, "name") == kname) {
        info.kinds.push_back(KindInfo{kname, StringOr(k, "device_type"), true});
      }
    }
  }
}

int CountDevices(int32_t type) {
  int count = 0;
  for (int32_t id = 0; id < kMaxDevices; ++id) {
    bp_value_t v;
    if (bp_device_get_attr(DLDevice{static_cast<DLDeviceType>(type), id}, BP_ATTR_EXIST, &v) !=
        BP_OK) {
      bp_error_clear();
      break;
    }
    const bool exists = v.type == BP_VALUE_INT && v.u.v_int64 != 0;
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
    if (!exists) break;
    ++count;
  }
  return count;
}

bool RunsCpuCode(DLDevice dev) {
  if (dev.device_type == kDLCPU) return true;
  try {
    for (const std::string& k : Target::FromDevice(Device(dev)).Keys()) {
      if (k == "cpu") return true;
    }
  } catch (const Error&) {
    bp_error_clear();  // no Target: the device's type decides
  }
  return false;
}

namespace {

// The "kind" of every object nested in `j` (not `j`'s own), depth first, once each.
void NestedKinds(const nlohmann::json& j, bool top, std::vector<std::string>* out) {
  if (j.is_object()) {
    auto it = j.find("kind");
    if (!top && it != j.end() && it->is_string() &&
        std::find(out->begin(), out->end(), it->get<std::string>()) == out->end()) {
      out->push_back(it->get<std::string>());
    }
    for (const auto& [key, value] : j.items()) NestedKinds(value, false, out);
  } else if (j.is_array()) {
    for (const auto& value : j) NestedKinds(value, false, out);
  }
}

}  // namespace

std::vector<std::string> ForeignKinds(DLDevice dev) {
  std::vector<std::string> named;
  try {
    NestedKinds(nlohmann::json::parse(Target::FromDevice(Device(dev)).ToJson()), true, &named);
  } catch (const std::exception&) {
    bp_error_clear();  // no Target: nothing it names
    return {};
  }
  std::set<std::string> kinds;  // the kinds registered in this process
  bp_object_t* described = nullptr;
  if (bp_target_kinds_describe(&described) == BP_OK) {
    const char* text = nullptr;
    bp_string_get(described, &text, nullptr);
    const nlohmann::json all = nlohmann::json::parse(text != nullptr ? text : "{}", nullptr, false);
    bp_object_release(described);
    for (const auto& k : Member(all, "kinds")) kinds.insert(StringOr(k, "name"));
  }
  bp_error_clear();
  std::vector<std::string> out;
  for (const std::string& k : named) {
    bp_object_t* build = nullptr;
    const bool codegen = bp_registry_get(("target.build." + k).c_str(), &build) == BP_OK;
    if (build != nullptr) bp_object_release(build);
    bp_error_clear();
    if (kinds.count(k) == 0 || !codegen) out.push_back(k);
  }
  return out;
}

namespace {

// Whether `dev` says it loads no native code: its property server_native_modules (a remote
// device's: its server's --allow-native-modules) is the int 0.
bool RefusesNative(DLDevice dev) {
  bp_value_t v;
  if (bp_device_get_property(dev, "server_native_modules", &v) != BP_OK) {
    bp_error_clear();
    return false;
  }
  const bool refuses = v.type == BP_VALUE_INT && v.u.v_int64 == 0;
  if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
  return refuses;
}

}  // namespace

void Context::Survey() {
  for (DeviceTypeInfo& t : info.device_types) {
    if (t.id < 0) continue;
    const bp_device_api_t* table = nullptr;
    if (const bp_status_t st = bp_device_api_get(t.id, &table); st != BP_OK) {
      // Not "no device": the device tests must say the table was refused, and why.
      t.refused = TakeError(st);
      continue;
    }
    t.count = CountDevices(t.id);
    for (int32_t id = 0; id < t.count; ++id) {
      t.device_names.push_back(
          AttrString(DLDevice{static_cast<DLDeviceType>(t.id), id}, BP_ATTR_DEVICE_NAME));
      t.cpu_code.push_back(RunsCpuCode(DLDevice{static_cast<DLDeviceType>(t.id), id}));
      t.foreign_kinds.push_back(ForeignKinds(DLDevice{static_cast<DLDeviceType>(t.id), id}));
      t.refuses_native.push_back(RefusesNative(DLDevice{static_cast<DLDeviceType>(t.id), id}));
    }
    if (table->create_stream != nullptr && t.count > 0) {
      DLDevice d{static_cast<DLDeviceType>(t.id), 0};
      bp_stream_t s = nullptr;
      if (bp_device_stream_create(d, &s) == BP_OK) {
        t.streams = s != nullptr;
        if (s != nullptr) bp_device_stream_free(d, s);
      }
      bp_error_clear();
    }
  }
}

const DeviceTypeInfo* Context::DeviceType() const {
  for (const DeviceTypeInfo& t : info.device_types) {
    if (t.id == static_cast<int32_t>(dev.device_type)) return &t;
  }
  return nullptr;
}

void Context::SetUpDevice() {
  const DeviceTypeInfo* chosen = nullptr;
  int32_t id = 0;
  if (!device_text.empty()) {
    const auto colon = device_text.find(':');
    const std::string type = device_text.substr(0, colon);
    id = colon == std::string::npos ? 0 : std::atoi(device_text.c_str() + colon + 1);
    for (const DeviceTypeInfo& t : info.device_types) {
      if (t.name == type) chosen = &t;
    }
    if (chosen == nullptr) {
      Fail("the plugin provides no DeviceAPI for device type '" + type + "' (--device " +
           device_text + ")");
    }
  } else {
    for (const DeviceTypeInfo& t : info.device_types) {
      if (chosen == nullptr && t.id >= 0 && CountDevices(t.id) > 0) chosen = &t;
    }
    if (chosen == nullptr) Skip("the plugin has no device present here");
  }
  if (chosen->id < 0) Fail("device type '" + chosen->name + "' has no id");
  CheckCall(bp_device_api_get(chosen->id, &api), "bp_device_api_get(" + chosen->name + ")");
  device_count = CountDevices(chosen->id);
  if (id >= device_count) {
    Skip("device " + chosen->name + ":" + std::to_string(id) + " is not present (the plugin has " +
         std::to_string(device_count) + " " + chosen->name + " device(s))");
  }
  dev = DLDevice{static_cast<DLDeviceType>(chosen->id), id};
}

const std::vector<TestCase>& AllTests() {
  static const std::vector<TestCase>* tests = [] {
    auto* v = new std::vector<TestCase>();
    AddPluginTests(v);
    AddAttrTests(v);
    AddMemoryTests(v);
    AddCopyTests(v);
    AddStreamTests(v);
    AddConcurrencyTests(v);
    AddCodegenTests(v);
    AddConstructTests(v);
    AddStreamReuseTests(v);
    AddEventNativeTests(v);
    return v;
  }();
  return *tests;
}

const TestCase* FindTest(const std::string& name) {
  for (const TestCase& t : AllTests()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const nlohmann::json& Member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it != j.end() ? *it : kNull;
}

namespace {
std::atomic<void (*)(const std::string&)> g_failure_observer{nullptr};
}  // namespace

void SetFailureObserver(void (*observer)(const std::string& message)) {
  g_failure_observer.store(observer);
}

void Fail(const std::string& message) {
  if (auto* observer = g_failure_observer.load()) observer(message);
  throw TestFailure(message);
}
void Skip(const std::string& reason) { throw TestSkip(reason); }

void SkipIfRefused(const Error& e, const std::string& where, bool optional) {
  if (e.kind() != BP_ERR_UNSUPPORTED) return;
  const std::string message = e.what();
  if (optional || message.find("which needs IR text version") != std::string::npos)
    Skip(where + ": " + message);
}

std::string TakeError(bp_status_t status) {
  const char* message = nullptr;
  bp_status_t kind = status;
  bp_error_last(&kind, &message);
  std::string out = std::string(bp_error_kind_name(status)) + ": " +
                    (message != nullptr && *message != '\0' ? message : "(no message)");
  bp_error_clear();
  return out;
}

void CheckCall(bp_status_t status, const std::string& call) {
  if (status != BP_OK) Fail(call + " failed (" + TakeError(status) + ")");
}

std::string Hex(uint64_t value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return buf;
}

std::string DeviceString(DLDevice dev) {
  const char* name = nullptr;
  std::string type;
  if (bp_device_type_name(dev.device_type, &name) == BP_OK && name != nullptr) {
    type = name;
  } else {
    bp_error_clear();
    type = "type " + std::to_string(static_cast<int>(dev.device_type));
  }
  return type + ":" + std::to_string(dev.device_id);
}

std::string ValueTypeText(const bp_value_t& v) {
  switch (v.type) {
    case BP_VALUE_NONE:
      return "none";
    case BP_VALUE_INT:
      return "int";
    case BP_VALUE_FLOAT:
      return "float";
    case BP_VALUE_PTR:
      return "pointer (BP_VALUE_PTR)";
    case BP_VALUE_DEVICE:
      return "device (BP_VALUE_DEVICE)";
    case BP_VALUE_DTYPE:
      return "dtype (BP_VALUE_DTYPE)";
    case BP_VALUE_TENSOR:
      return "borrowed tensor (BP_VALUE_TENSOR)";
    case BP_VALUE_STR:
      return "borrowed C string (BP_VALUE_STR)";
    case BP_VALUE_OBJECT: {
      int32_t t = 0;
      if (v.u.v_obj == nullptr) return "null object";
      if (bp_object_type(v.u.v_obj, &t) != BP_OK) {
        bp_error_clear();
        return "object of unknown type";
      }
      static const char* const kNames[] = {"?",      "string", "bytes",  "function",
                                           "tensor", "array",  "target", "module"};
      return std::string(t >= 1 && t <= 7 ? kNames[t] : "unknown") + " object";
    }
    default:
      return "type " + std::to_string(v.type) + " (no BP_VALUE_* has that number)";
  }
}

}  // namespace conformance
}  // namespace backplane
