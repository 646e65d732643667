// SPDX-License-Identifier: Apache-2.0
// `backplane info`: discovers every plugin, loads each one first in a child process of its
// own (probe.h: a plugin that crashes, ends the process or hangs while loading is named and
// kept out), then loads them all and reports the search path, the plugins (loaded, or skipped
// and why), the device types, every device with every attribute and property and the
// registered global functions, as tables or (--json) as one JSON document. `-l` lists the
// devices one a line and `-d TYPE:INDEX` shows one device, as clinfo's -l and -d do; `--prop
// NAME` shows one attribute or property on every device, as clinfo's --prop does.
//
// JSON output starts with "schema_version" (kSchemaVersion), raised when a field changes
// meaning or is removed; lists are JSON arrays, never JSON text inside a string.
//
// About 850 lines in one file: the tables and the JSON document describe the same fields side
// by side, so that a field added to one is seen missing from the other; the probing of plugins
// is probe.cc, the table layout table.cc.
//
// The report is collected once into a JSON value and both outputs are rendered from it, so
// the tables and the JSON always say the same thing.
#include <backplane/c_api.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <backplane/backplane.hpp>
#include <backplane/ir/edit_distance.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "output.h"
#include "probe.h"
#include "table.h"

namespace backplane {
namespace cli {

// --plugin-path must name an existing folder; the message says what was expected. A
// relative folder the user typed is made absolute here: the core searches only absolute
// folders, so that nothing is ever found relative to the current directory by accident.
static std::string CheckPluginFolder(std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return "folder '" + path +
           "' does not exist; pass a folder that holds plugin libraries and their "
           ".bpplugin.json manifests";
  }
  if (!S_ISDIR(st.st_mode)) {
    return "'" + path + "' is not a folder; pass the folder that holds the plugin, not a file";
  }
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (!ec) path = absolute.lexically_normal().string();
  return {};
}

void AddPluginPathOption(CLI::App* app, std::vector<std::string>* paths) {
  app->add_option("--plugin-path", *paths,
                  "Search DIR for plugins before BACKPLANE_PLUGIN_PATH and the install's "
                  "folder (repeat for several folders)")
      ->type_name("DIR")
      ->allow_extra_args(false)
      ->transform(CLI::Validator(CheckPluginFolder, "", "existing folder"));
}

namespace {

using Json = nlohmann::ordered_json;

// Devices of one type are enumerated from id 0 while BP_ATTR_EXIST says 1, up to this many.
constexpr int32_t kMaxDevicesPerType = 64;

// The version of the JSON documents `info` prints (every mode). 1: the first with a version,
// list attributes as arrays and a "properties" object per device.
constexpr int kSchemaVersion = 1;

// How "none" (not supported / not applicable) reads in the tables.
constexpr const char* kNone = "\xE2\x80\x94";  // U+2014 em dash

struct InfoOptions {
  bool json = false;
  bool list = false;   // -l: the devices, one a line
  std::string device;  // -d TYPE:INDEX: one device
  std::string prop;    // --prop NAME: one attribute or property on every device
  std::vector<std::string> plugin_paths;
  std::vector<std::string> layers;  // --layer
  bool no_probe = false;            // load in this process only (for a debugger)
  double probe_timeout = 10;        // seconds a plugin may take to load in its probe
  std::string probe_one;            // hidden: the child's side of a probe
};

// Reads the calling thread's error message after a failed call.
std::string LastErrorMessage() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr && *message != '\0' ? message : "no message recorded";
}

Json RawValueToJson(const bp_value_t& value);

// An array object's elements as a JSON array.
Json ArrayToJson(const bp_object_t* array) {
  size_t n = 0;
  Check(bp_array_size(array, &n));
  Json out = Json::array();
  for (size_t i = 0; i < n; ++i) {
    bp_value_t element;
    Check(bp_array_get(array, i, &element));  // borrowed from the array
    out.push_back(RawValueToJson(element));
  }
  return out;
}

// A value as JSON: null for none, numbers and strings as they are, arrays as arrays. Objects
// are borrowed.
Json RawValueToJson(const bp_value_t& value) {
  switch (value.type) {
    case BP_VALUE_NONE:
      return nullptr;
    case BP_VALUE_INT:
      return value.u.v_int64;
    case BP_VALUE_FLOAT:
      return value.u.v_float64;
    case BP_VALUE_STR:
      return std::string(value.u.v_str);
    case BP_VALUE_OBJECT: {
      int32_t type = 0;
      Check(bp_object_type(value.u.v_obj, &type));
      if (type == BP_OBJECT_STRING) return GetString(value.u.v_obj);
      if (type == BP_OBJECT_ARRAY) return ArrayToJson(value.u.v_obj);
      return "<object of type " + std::to_string(type) + ">";
    }
    default:
      return "<value of type " + std::to_string(value.type) + ">";
  }
}

Json ValueToJson(const Any& value) { return RawValueToJson(value.raw()); }

// An attribute as JSON. max_thread_dimensions crosses the ABI as text ("[1024, 1024, 64]",
// as TVM's DeviceAttrKind has it); the report makes it the list it is.
Json AttributeToJson(const std::string& name, const Any& value) {
  Json json = ValueToJson(value);
  if (name == "max_thread_dimensions" && json.is_string()) {
    Json parsed = Json::parse(json.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_array()) return parsed;
  }
  return json;
}

// One device: every attribute, every property it lists, and the errors met on the way
// (recorded, never thrown: one misbehaving plugin must not hide the rest).
Json CollectDevice(const DeviceAPI& api, const std::string& type_name, int32_t id) {
  Json attributes = Json::object();
  Json errors = Json::object();
  for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind) {
    const char* attr_name = bp_device_attr_name(kind);
    try {
      attributes[attr_name] =
          AttributeToJson(attr_name, api.GetAttr(static_cast<bp_device_attr_kind_t>(kind)));
    } catch (const std::exception& e) {
      attributes[attr_name] = nullptr;
      errors[attr_name] = e.what();
    }
  }
  Json properties = Json::object();
  try {
    for (const std::string& key : api.ListProperties()) {
      try {
        properties[key] = ValueToJson(api.GetProperty(key));
      } catch (const std::exception& e) {
        properties[key] = nullptr;
        errors["property " + key] = e.what();
      }
    }
  } catch (const std::exception& e) {
    errors["list_properties"] = e.what();
  }
  return Json{{"device", type_name + ":" + std::to_string(id)},
              {"type", type_name},
              {"id", id},
              {"attributes", std::move(attributes)},
              {"properties", std::move(properties)},
              {"errors", std::move(errors)}};
}

// The plugin that owns `name`: the one whose "registered" names hold it (what its init
// registered and still owns, so a name the host replaced is nobody's), else a plugin not
// loaded yet whose manifest declares it; null when the host registered it.
Json ProviderOf(const Json& plugins, const std::string& name) {
  auto holds = [&](const Json& plugin, const char* key) {
    const Json* names = plugin.contains(key) ? &plugin[key] : nullptr;
    if (names == nullptr || !names->is_array()) return false;
    for (const Json& n : *names) {
      if (n.is_string() && n.get<std::string>() == name) return true;
    }
    return false;
  };
  for (const Json& plugin : plugins) {
    if (holds(plugin, "registered")) return plugin.value("name", "");
  }
  for (const Json& plugin : plugins) {
    if (plugin.value("state", "") == "discovered" && holds(plugin, "provides")) {
      return plugin.value("name", "") + " (not loaded yet)";
    }
  }
  return nullptr;
}

// Every device of `type` with every attribute. Errors are recorded in the report, never
// thrown: one misbehaving plugin must not hide the rest.
void CollectDevices(int32_t type, const std::string& type_name, Json& type_entry, Json& devices) {
  int32_t count = 0;
  for (int32_t id = 0; id < kMaxDevicesPerType; ++id) {
    const std::string device_name = type_name + ":" + std::to_string(id);
    std::optional<DeviceAPI> api;
    try {
      api = DeviceAPI::Get(Device(DLDevice{static_cast<DLDeviceType>(type), id}));
      if (!api->Exists()) break;
    } catch (const std::exception& e) {
      type_entry["error"] = (id == 0 ? std::string("its DeviceAPI is unavailable: ")
                                     : "asking whether " + device_name + " exists failed: ") +
                            e.what();
      break;
    }
    devices.push_back(CollectDevice(*api, type_name, id));
    ++count;
  }
  type_entry["device_count"] = count;
  // A DeviceAPI may say why it has no devices (the optional property "status", e.g. a driver
  // that is not installed); the report shows it beside the count.
  if (count == 0 && type_entry["error"].is_null()) {
    try {
      Any status = DeviceAPI::Get(Device(DLDevice{static_cast<DLDeviceType>(type), 0}))
                       .GetProperty("status");
      if (status.type() == BP_VALUE_STR || status.type() == BP_VALUE_OBJECT) {
        type_entry["status"] = status.ToString();
      }
    } catch (const std::exception&) {
      // The property is optional; its absence is no error.
    }
  }
}

// Gathers the whole report. Plugins must have been discovered and loaded.
Json CollectReport() {
  Json report;
  report["schema_version"] = kSchemaVersion;
  uint32_t major = 0;
  uint32_t minor = 0;
  Check(bp_abi_version(&major, &minor));
  report["backplane"] = {
      {"version", BACKPLANE_VERSION},
      {"abi_version", std::to_string(major) + "." + std::to_string(minor)},
  };

  bp_object_t* list_obj = nullptr;
  Check(bp_plugins_list(&list_obj));
  ObjectRef list_ref = ObjectRef::Adopt(list_obj);
  std::string list_text = GetString(list_ref.get());
  Json listing = Json::parse(list_text, nullptr, /*allow_exceptions=*/false);
  if (listing.is_discarded() || !listing.is_object()) {
    throw Error(BP_ERR_INTERNAL,
                "bp_plugins_list returned text that is not a JSON object (a bug in libbackplane; "
                "please report it): " +
                    list_text.substr(0, 200));
  }
  // Built as locals and moved in at the end: adding a key to an ordered_json may move the
  // values already in it, so references into `report` would dangle.
  Json plugins = listing.value("plugins", Json::array());

  std::vector<std::string> functions = Registry::List();
  std::set<std::string> function_set(functions.begin(), functions.end());

  std::vector<int32_t> types(BP_DEVICE_TYPE_MAX);
  size_t type_count = 0;
  Check(bp_device_type_list(types.data(), types.size(), &type_count));
  types.resize(std::min(type_count, types.size()));
  std::sort(types.begin(), types.end());

  Json device_types = Json::array();
  Json devices = Json::array();
  for (int32_t type : types) {
    std::string name = DeviceTypeName(type);
    std::string api_name = "device_api." + name;
    bool has_api = function_set.count(api_name) != 0;
    Json entry{{"id", type},
               {"name", name},
               {"device_api", has_api},
               {"plugin", ProviderOf(plugins, api_name)},
               {"device_count", nullptr},
               {"error", nullptr}};
    if (has_api) CollectDevices(type, name, entry, devices);
    device_types.push_back(std::move(entry));
  }

  Json function_entries = Json::array();
  for (const std::string& name : functions) {
    Json entry{{"name", name}, {"plugin", ProviderOf(plugins, name)}};
    // A code generator: the IR text versions it reads (docs/abi.md, "Code generators are
    // covered too"), from its plugin's entry of bp_plugins_list.
    for (const Json& p : plugins) {
      const Json reads = p.value("reads_ir", Json::object());
      if (reads.is_object() && reads.contains(name)) entry["reads_ir"] = reads[name];
    }
    function_entries.push_back(std::move(entry));
  }
  // The layers (docs/layer-guide.md), outermost first; loading them may fail, which is shown.
  Json layers = Json::array();
  try {
    for (const std::string& l : ActiveLayers()) layers.push_back(l);
  } catch (const Error& e) {
    report["layers_error"] = e.what();
  }
  report["search_path"] = listing.value("search_path", Json::array());
  report["plugins"] = std::move(plugins);
  report["layers"] = std::move(layers);
  report["device_types"] = std::move(device_types);
  report["devices"] = std::move(devices);
  report["functions"] = std::move(function_entries);
  // Remote servers (docs/remote.md), when the remote plugin is here: which server holds which
  // device, and why a server that was asked for is missing.
  if (function_set.count("remote.servers") != 0) {
    try {
      const Json servers = Json::parse(Function::Get("remote.servers")().AsString());
      if (!servers.value("servers", Json::array()).empty())
        report["remote_servers"] = servers["servers"];
    } catch (const std::exception& e) {
      report["remote_servers_error"] = e.what();
    }
  }
  return report;
}

// ---- Rendering as text --------------------------------------------------------------------

std::string Text(const Json& value) {
  if (value.is_null()) return kNone;
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    // "[1024, 1024, 64]" for numbers; words joined by spaces (so a long list wraps) for the
    // rest, "(none)" for an empty list.
    if (value.empty()) return "(none)";
    bool numbers = true;
    for (const Json& item : value) numbers = numbers && item.is_number();
    std::string out = numbers ? "[" : "";
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += numbers ? ", " : " ";
      out += Text(value[i]);
    }
    return numbers ? out + "]" : out;
  }
  return value.dump();
}

std::string Field(const Json& object, const char* key) {
  return object.contains(key) ? Text(object[key]) : kNone;
}

// "34359738368 (32.0 GiB)"; plain below 1 KiB.
std::string WithBinaryUnit(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  std::string text = std::to_string(bytes);
  if (bytes < 1024) return text;
  double scaled = static_cast<double>(bytes);
  int unit = -1;
  while (scaled >= 1024.0 && unit < 3) {
    scaled /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), " (%.1f %s)", scaled, kUnits[unit]);
  return text + buffer;
}

std::string AttributeText(const std::string& name, const Json& value) {
  if (!value.is_number_integer()) return Text(value);
  int64_t n = value.get<int64_t>();
  if (name == "max_shared_memory_per_block" || name == "l2_cache_size_bytes" ||
      name == "total_global_memory" || name == "available_global_memory" ||
      name == "max_allocation_size") {
    return WithBinaryUnit(n);
  }
  if (name == "vendor_id") {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "0x%llx", static_cast<unsigned long long>(n));
    return buffer;
  }
  if (name == "max_clock_rate") {
    char buffer[48];
    std::snprintf(buffer, sizeof(buffer), "%lld kHz (%.2f GHz)", static_cast<long long>(n),
                  static_cast<double>(n) / 1e6);
    return buffer;
  }
  return std::to_string(n);
}

void Heading(std::ostream& out, const std::string& text) { out << '\n' << text << '\n'; }

// One device's attributes and properties as two tables under its name.
void PrintDevice(const Json& d, std::ostream& out, size_t width) {
  out << "\n  " << Text(d["device"]) << '\n';
  Table attr_table({"ATTRIBUTE", "VALUE"});
  for (const auto& [name, value] : d["attributes"].items()) {
    attr_table.AddRow({name, AttributeText(name, value)});
    if (d["errors"].contains(name)) attr_table.AddNote("error: " + Text(d["errors"][name]));
  }
  attr_table.Print(out, 4, width);
  const Json& properties = d["properties"];
  if (properties.empty()) return;
  out << '\n';
  Table property_table({"PROPERTY", "VALUE"});
  for (const auto& [key, value] : properties.items()) {
    property_table.AddRow({key, Text(value)});
    if (d["errors"].contains("property " + key)) {
      property_table.AddNote("error: " + Text(d["errors"]["property " + key]));
    }
  }
  property_table.Print(out, 4, width);
}

void PrintReport(const Json& report, std::ostream& out) {
  const size_t width = OutputWidth();
  out << "Backplane " << Text(report["backplane"]["version"]) << " (ABI "
      << Text(report["backplane"]["abi_version"]) << ")\n";

  // Each folder is {"path", "origin", "status"}; a bare string is a path alone.
  const Json& path = report["search_path"];
  Heading(out, "Plugin search path (searched in this order)");
  if (path.empty()) {
    out << "  (no folders)\n";
  } else {
    Table path_table({"#", "FOLDER", "FROM", "STATUS"});
    for (size_t i = 0; i < path.size(); ++i) {
      const Json& folder = path[i];
      if (folder.is_object()) {
        path_table.AddRow({std::to_string(i + 1), Field(folder, "path"), Field(folder, "origin"),
                           Field(folder, "status")});
      } else {
        path_table.AddRow({std::to_string(i + 1), Text(folder), kNone, kNone});
      }
    }
    path_table.Print(out, 2, width);
  }

  const Json& plugins = report["plugins"];
  size_t loaded = 0;
  size_t skipped = 0;
  size_t shadowed = 0;
  // A shadowed plugin is a skipped one that another plugin, earlier on the search path, won
  // over (docs/discovery.md, "When two plugins claim a name").
  auto is_shadowed = [](const Json& p) {
    return p.contains("shadowed_by") && p["shadowed_by"].is_string();
  };
  for (const Json& p : plugins) {
    std::string state = p.value("state", "");
    loaded += state == "loaded";
    shadowed += is_shadowed(p);
    skipped += state == "skipped" && !is_shadowed(p);
  }
  Heading(out, "Plugins: " + std::to_string(plugins.size()) + " found, " + std::to_string(loaded) +
                   " loaded, " + std::to_string(skipped) + " skipped" +
                   (shadowed > 0 ? ", " + std::to_string(shadowed) + " shadowed" : ""));
  if (plugins.empty()) {
    out << "  No plugins found. Pass --plugin-path DIR or set BACKPLANE_PLUGIN_PATH to a folder\n"
           "  holding plugin libraries and their .bpplugin.json manifests.\n";
  } else {
    Table table({"NAME", "STATE", "ABI", "VERSION", "LIBRARY"});
    for (const Json& p : plugins) {
      std::string library = Field(p, "library");
      if (library == kNone) library = "manifest " + Field(p, "manifest");
      table.AddRow({Field(p, "name"), is_shadowed(p) ? "shadowed" : Field(p, "state"),
                    Field(p, "abi_version"), Field(p, "version"), library});
      if (is_shadowed(p)) {
        table.AddNote(Field(p, "reason"));
      } else if (p.value("state", "") == "skipped") {
        std::string reason = Field(p, "reason");
        table.AddNote("reason: " +
                      (reason == kNone || reason.empty() ? "(none recorded)" : reason));
      }
    }
    table.Print(out, 2, width);
  }

  const Json& layers = report["layers"];
  Heading(out, "Layers: " + std::to_string(layers.size()) +
                   " active, outermost first (BACKPLANE_LAYERS, then --layer)");
  if (layers.empty() && !report.contains("layers_error")) {
    out << "  None. Enable one with --layer NAME[:OPTIONS] or BACKPLANE_LAYERS=NAME.\n";
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    out << "  " << i + 1 << ". " << Text(layers[i]) << "\n";
  }
  if (report.contains("layers_error")) {
    out << "  error: " << Text(report["layers_error"]) << "\n";
  }

  const Json& types = report["device_types"];
  size_t with_api = 0;
  for (const Json& t : types) with_api += t.value("device_api", false);
  Heading(out, "Device types: " + std::to_string(types.size()) + " known, " +
                   std::to_string(with_api) + " with a DeviceAPI");
  Table type_table({"ID", "NAME", "DEVICEAPI FROM", "DEVICES"});
  for (const Json& t : types) {
    std::string from = kNone;
    if (t.value("device_api", false)) {
      from = t["plugin"].is_null() ? std::string("(the host)") : Text(t["plugin"]);
    }
    type_table.AddRow({Text(t["id"]), Text(t["name"]), from, Field(t, "device_count")});
    if (!t["error"].is_null()) type_table.AddNote("error: " + Text(t["error"]));
    if (t.contains("status")) type_table.AddNote("status: " + Text(t["status"]));
  }
  type_table.Print(out, 2, width);

  const Json& devices = report["devices"];
  Heading(out, "Devices: " + std::to_string(devices.size()) + " (" + kNone +
                   " = not supported or not applicable)");
  if (devices.empty()) out << "  No devices: no loaded plugin reports one.\n";
  for (const Json& d : devices) PrintDevice(d, out, width);

  if (report.contains("remote_servers")) {
    const Json& servers = report["remote_servers"];
    Heading(out, "Remote servers: " + std::to_string(servers.size()) +
                     " attached (BACKPLANE_REMOTE or remote.attach; docs/remote.md)");
    Table server_table({"ADDRESS", "STATE", "DEVICES"});
    for (const Json& sv : servers) {
      std::string list;
      for (const Json& d : sv.value("devices", Json::array())) {
        list += (list.empty() ? "" : ", ") + Text(d["device"]) + " = " + Text(d["remote"]);
      }
      server_table.AddRow({Text(sv["address"]), Text(sv["state"]), list.empty() ? kNone : list});
      if (sv.contains("error") && !sv["error"].is_null())
        server_table.AddNote("error: " + Text(sv["error"]));
    }
    server_table.Print(out, 2, width);
  }
  if (report.contains("remote_servers_error")) {
    out << "  remote servers: " << Text(report["remote_servers_error"]) << "\n";
  }

  const Json& functions = report["functions"];
  Heading(out, "Global functions: " + std::to_string(functions.size()) + " registered");
  Table fn_table({"NAME", "PLUGIN"});
  for (const Json& f : functions) {
    fn_table.AddRow({Text(f["name"]), f["plugin"].is_null() ? "(the host)" : Text(f["plugin"])});
    if (f.contains("reads_ir") && f["reads_ir"].is_array() && f["reads_ir"].size() == 2) {
      fn_table.AddNote("code generator: reads IR text versions " + Text(f["reads_ir"][0]) + " to " +
                       Text(f["reads_ir"][1]));
    }
  }
  if (functions.empty()) {
    out << "  (none)\n";
  } else {
    fn_table.Print(out, 2, width);
  }
}

// The discovered plugins that are not loaded yet, by library: those a probe loads.
std::map<std::string, std::string> PluginsToProbe() {
  bp_object_t* list_obj = nullptr;
  Check(bp_plugins_list(&list_obj));
  ObjectRef list_ref = ObjectRef::Adopt(list_obj);
  const Json listing = Json::parse(GetString(list_ref.get()), nullptr, false);
  std::map<std::string, std::string> out;
  if (!listing.is_object()) return out;
  for (const Json& p : listing.value("plugins", Json::array())) {
    if (p.value("state", "") == "discovered" && p["library"].is_string()) {
      out[p["library"].get<std::string>()] = p.value("name", "");
    }
  }
  return out;
}

// Loads every discovered plugin in a child process first. Those whose child crashed, ended
// or hung are kept out of this process through BACKPLANE_DISABLE_PLUGINS (discovery reads it
// again); returns how each of them failed, by plugin name.
std::map<std::string, std::string> ProbeAndDisable(const InfoOptions& options) {
  const std::map<std::string, std::string> plugins = PluginsToProbe();
  std::vector<std::string> libraries;
  for (const auto& [library, name] : plugins) libraries.push_back(library);
  std::map<std::string, std::string> failures;
  for (const ProbeResult& r :
       ProbePlugins(libraries, options.plugin_paths, options.probe_timeout)) {
    if (r.survived) continue;
    const std::string& name = plugins.at(r.library);
    failures[name] = r.failure +
                     "; it was loaded in a child process only, so this one went on. The "
                     "last line of BACKPLANE_DEBUG=loader names the step, and "
                     "BACKPLANE_DISABLE_PLUGINS=" +
                     name + " keeps it out of other hosts";
  }
  if (failures.empty()) return failures;
  const char* current = std::getenv("BACKPLANE_DISABLE_PLUGINS");
  std::string disabled = current != nullptr ? current : "";
  for (const auto& [name, failure] : failures) disabled += (disabled.empty() ? "" : ",") + name;
  setenv("BACKPLANE_DISABLE_PLUGINS", disabled.c_str(), 1);
  Check(bp_plugins_discover());
  return failures;
}

// Writes `doc` (JSON) or the text `print` renders to stdout; kExitFailure when stdout fails.
template <typename Print>
int Emit(const InfoOptions& options, const Json& doc, Print print) {
  if (options.json) {
    std::cout << doc.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
  } else {
    print(std::cout);
  }
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "backplane info: could not write the report to standard output\n";
    return kExitFailure;
  }
  return kExitOk;
}

// `info -l`: every device, one a line (backplane::ListDevices, bp_device_list).
int ListDeviceLines(const InfoOptions& options) {
  Json devices = Json::array();
  for (const DeviceEntry& e : ListDevices()) {
    Json kind = nullptr;
    try {
      kind = ValueToJson(DeviceAPI::Get(e.device).GetAttr(BP_ATTR_DEVICE_KIND));
    } catch (const std::exception&) {
      // A kind the plugin cannot say is shown as none; the device is still listed.
    }
    devices.push_back(Json{{"device", e.device.ToString()},
                           {"type", e.type_name},
                           {"index", e.index},
                           {"kind", kind},
                           {"name", e.name.empty() ? Json(nullptr) : Json(e.name)}});
  }
  Json doc{{"schema_version", kSchemaVersion}, {"devices", devices}};
  return Emit(options, doc, [&](std::ostream& out) {
    if (devices.empty()) {
      out << "No devices: no loaded plugin reports one (`backplane info` shows the plugins "
             "and why any was skipped).\n";
      return;
    }
    Table table({"DEVICE", "KIND", "NAME"});
    for (const Json& d : devices)
      table.AddRow({Text(d["device"]), Text(d["kind"]), Text(d["name"])});
    table.Print(out, 0, OutputWidth());
  });
}

// The known device type names, for messages.
std::string KnownTypeNames() {
  std::vector<int32_t> types(BP_DEVICE_TYPE_MAX);
  size_t count = 0;
  if (bp_device_type_list(types.data(), types.size(), &count) != BP_OK) return "(unknown)";
  types.resize(std::min(count, types.size()));
  std::sort(types.begin(), types.end());
  std::string names;
  for (int32_t type : types) names += (names.empty() ? "" : ", ") + DeviceTypeName(type);
  return names;
}

// `info -d TYPE:INDEX`: one device's attributes and properties. A device that cannot exist
// (an unknown type, an index past the end, a malformed name) is a usage error naming what
// does exist.
int ShowOneDevice(const InfoOptions& options) {
  const std::string& text = options.device;
  const size_t colon = text.find(':');
  const std::string type_name = text.substr(0, colon);
  const std::string digits = colon == std::string::npos ? "0" : text.substr(colon + 1);
  if (type_name.empty() || digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    std::cerr << "backplane info: -d '" << text
              << "' is not a device; expected TYPE:INDEX with a decimal INDEX, such as cpu:0 "
                 "or opencl:1. Run 'backplane info -l' to list the devices.\n";
    return kExitUsage;
  }
  int32_t type = 0;
  if (bp_device_type_from_name(type_name.c_str(), &type) != BP_OK) {
    std::cerr << "backplane info: -d " << text << ": device type '" << type_name
              << "' is not known here (known types: " << KnownTypeNames()
              << "). Run 'backplane info -l' to list the devices, or 'backplane info' to see "
                 "which plugins were found and why any was skipped.\n";
    return kExitUsage;
  }
  const int32_t id = std::stoi(digits);
  const Device device(DLDevice{static_cast<DLDeviceType>(type), id});
  std::optional<DeviceAPI> api;
  try {
    api = DeviceAPI::Get(device);
  } catch (const Error& e) {
    // No plugin provides the type: the device does not exist here (a usage error, as an index
    // past the end is). A plugin that fails to provide it is a failure.
    std::cerr << "backplane info: -d " << text << ": the DeviceAPI of '" << type_name
              << "' is unavailable: " << e.what() << '\n';
    return e.kind() == BP_ERR_NOT_FOUND ? kExitUsage : kExitFailure;
  }
  if (!api->Exists()) {
    std::vector<std::string> same_type;
    for (const DeviceEntry& e : ListDevices()) {
      if (e.type_name == type_name) same_type.push_back(e.device.ToString());
    }
    std::string existing;
    for (const std::string& d : same_type) existing += (existing.empty() ? "" : ", ") + d;
    std::cerr << "backplane info: -d " << text << ": device " << type_name << ":" << id
              << " does not exist; " << type_name << " has " << same_type.size()
              << " device(s) here" << (same_type.empty() ? "" : " (" + existing + ")")
              << ". Run 'backplane info -l' to list every device.\n";
    return kExitUsage;
  }
  Json entry = CollectDevice(*api, type_name, id);
  Json doc{{"schema_version", kSchemaVersion}, {"device", entry}};
  return Emit(options, doc, [&](std::ostream& out) {
    out << Text(entry["device"]) << ": " << Text(entry["attributes"]["device_name"]) << '\n'
        << "(" << kNone << " = not supported or not applicable)\n";
    PrintDevice(entry, out, OutputWidth());
  });
}

// The names in `known` close to `name`: those that hold it or that it holds, and those a few
// edits away, nearest first, at most eight.
std::vector<std::string> CloseNames(const std::string& name, const std::set<std::string>& known) {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  for (const std::string& k : known) {
    const size_t distance = ir::EditDistance(name, k);
    const bool part = name.size() >= 3 &&
                      (k.find(name) != std::string::npos || name.find(k) != std::string::npos);
    if (distance <= limit || part) scored.emplace_back(part ? 0 : distance, k);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 8; ++i) out.push_back(scored[i].second);
  return out;
}

// `info --prop NAME`: one attribute (a bp_device_attr_name) or property on every device (or on
// the one -d names), one line a device; a device without it shows none. A name that is neither
// an attribute nor a property of any device here is a usage error listing the close names.
int ShowOneProperty(const InfoOptions& options) {
  const std::string& name = options.prop;
  bool is_attr = false;
  bp_device_attr_kind_t kind = BP_ATTR_EXIST;
  std::set<std::string> known;
  for (int32_t k = 0; k < BP_ATTR_COUNT; ++k) {
    const std::string attr_name = bp_device_attr_name(k);
    known.insert(attr_name);
    if (attr_name == name) {
      is_attr = true;
      kind = static_cast<bp_device_attr_kind_t>(k);
    }
  }
  std::vector<DeviceEntry> entries = ListDevices();
  if (!options.device.empty()) {
    std::vector<DeviceEntry> chosen;
    for (const DeviceEntry& e : entries) {
      if (e.device.ToString() == options.device) chosen.push_back(e);
    }
    if (chosen.empty()) {
      std::cerr << "backplane info: -d " << options.device
                << ": no such device here. Run 'backplane info -l' to list the devices.\n";
      return kExitUsage;
    }
    entries = chosen;
  }
  Json devices = Json::array();
  bool found = is_attr;
  for (const DeviceEntry& e : entries) {
    Json value = nullptr;
    Json error = nullptr;
    try {
      const DeviceAPI api = DeviceAPI::Get(e.device);
      if (is_attr) {
        value = AttributeToJson(name, api.GetAttr(kind));
      } else {
        const std::vector<std::string> keys = api.ListProperties();
        known.insert(keys.begin(), keys.end());
        if (std::find(keys.begin(), keys.end(), name) != keys.end()) {
          found = true;
          value = ValueToJson(api.GetProperty(name));
        }
      }
    } catch (const std::exception& ex) {
      error = ex.what();
    }
    Json entry{{"device", e.device.ToString()}, {"value", std::move(value)}};
    if (!error.is_null()) entry["error"] = std::move(error);
    devices.push_back(std::move(entry));
  }
  if (!found) {
    const std::vector<std::string> close = CloseNames(name, known);
    std::string list;
    for (const std::string& c : close) list += (list.empty() ? "" : ", ") + c;
    std::cerr << "backplane info: --prop " << name << ": no device here has an attribute or "
              << "property of that name"
              << (close.empty() ? std::string(".") : "; close names: " + list + ".")
              << " Run 'backplane info -d TYPE:INDEX' to see every name a device answers.\n";
    return kExitUsage;
  }
  Json doc{{"schema_version", kSchemaVersion},
           {"name", name},
           {"kind", is_attr ? "attribute" : "property"},
           {"devices", devices}};
  return Emit(options, doc, [&](std::ostream& out) {
    Table table({"DEVICE", name});
    for (const Json& d : devices) {
      table.AddRow(
          {Text(d["device"]), is_attr ? AttributeText(name, d["value"]) : Text(d["value"])});
      if (d.contains("error")) table.AddNote("error: " + Text(d["error"]));
    }
    table.Print(out, 0, OutputWidth());
  });
}

int RunInfo(const InfoOptions& options) {
  if (!options.probe_one.empty()) ProbeOne(options.probe_one, options.plugin_paths);
  for (const std::string& folder : options.plugin_paths) {
    if (bp_plugin_path_add(folder.c_str()) != BP_OK) {
      std::cerr << "backplane info: cannot add plugin folder '" << folder
                << "': " << LastErrorMessage() << '\n';
      return kExitUsage;
    }
  }
  // Discovery and loading record each plugin's failure in the listing; a non-OK status
  // here means the core itself could not do the work.
  Check(bp_plugins_discover());
  std::map<std::string, std::string> failures;
  if (!options.no_probe) failures = ProbeAndDisable(options);
  Check(bp_plugins_load_all());
  if (const std::string bad = EnableCliLayers(options.layers, ""); !bad.empty()) {
    std::cerr << "backplane info: " << bad << '\n';
    return kExitUsage;
  }
  // An attached remote server that cannot be reached is named on stderr, and the command, which
  // was asked for every device, fails: what it printed lacks that server's devices.
  auto unless_unreachable = [](int rc) {
    const OrderedJson unreachable = UnreachableRemoteServers();
    ReportUnreachableRemoteServers("backplane info", unreachable);
    return rc == kExitOk && !unreachable.empty() ? kExitFailure : rc;
  };
  if (options.list) return unless_unreachable(ListDeviceLines(options));
  if (!options.prop.empty()) return unless_unreachable(ShowOneProperty(options));
  if (!options.device.empty()) return ShowOneDevice(options);
  Json report = CollectReport();
  for (Json& p : report["plugins"]) {
    auto it = failures.find(p.value("name", ""));
    if (it != failures.end() && p.value("state", "") == "skipped") p["reason"] = it->second;
  }
  return unless_unreachable(
      Emit(options, report, [&](std::ostream& out) { PrintReport(report, out); }));
}

}  // namespace

Command AddInfoCommand(CLI::App& parent) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* app = parent.add_subcommand(
      "info",
      "Show the plugins found (loaded, or skipped and why), the device types, every device "
      "with its attributes, and the global functions");
  app->add_flag("--json", options->json,
                "Print the same report as one JSON document (with \"schema_version\")");
  CLI::Option* list = app->add_flag("-l,--list", options->list,
                                    "List the devices, one a line: TYPE:INDEX, kind and name");
  app->add_option("-d,--device", options->device,
                  "Show one device's attributes and properties, e.g. -d opencl:0")
      ->type_name("TYPE:INDEX")
      ->excludes(list);
  app->add_option("--prop", options->prop,
                  "Show one attribute or property on every device (or on the one -d names), "
                  "one line a device, e.g. --prop supports_fp16")
      ->type_name("NAME")
      ->excludes(list);
  AddPluginPathOption(app, &options->plugin_paths);
  AddLayerOptions(app, &options->layers, nullptr);
  app->add_flag("--no-probe", options->no_probe,
                "Load the plugins in this process only, without loading each in a child "
                "process first (for a debugger; a plugin that crashes then ends the command)");
  app->add_option("--probe-timeout", options->probe_timeout,
                  "Seconds a plugin may take to load in its child process before it is "
                  "reported as hung (default 10)")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber);
  app->add_option("--probe-one", options->probe_one)->group("");  // a probe's child
  return Command{app, [options] { return RunInfo(*options); }};
}

}  // namespace cli
}  // namespace backplane
