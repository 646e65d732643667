// SPDX-License-Identifier: Apache-2.0
// The layer chain (layers.h). Built once, under its own lock, the first time a DeviceAPI
// table, a module function or a code generator is asked for; from then on read without a
// lock through an atomic pointer, so a process without layers pays one load per table lookup
// miss and nothing on the hot path (the published tables are the plugins' own).
#include "layers.h"

#include <atomic>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

#include "registry.h"
#include "runtime.h"

namespace backplane {
namespace core {
namespace {

// The smallest bp_layer_t a layer may hand us: 1.9's.
constexpr size_t kMinLayerSize = offsetof(bp_layer_t, wrap_build) + sizeof(void*);

struct ChainState {
  std::mutex mu;
  std::vector<EnabledLayer> enabled;  // before the chain is built: what was asked for
  bool fixed = false;
  std::vector<EnabledLayer> chain;  // once fixed
  std::string error;                // why the chain could not be built ("" if it was)
  bp_status_t error_kind = BP_OK;
  bool wraps_functions = false;
  bool wraps_builds = false;
  std::vector<const bp_layer_t*> told_of_modules;  // the layers with on_module, outermost first
};

ChainState& State() {
  static ChainState* s = new ChainState();  // lives as long as the process
  return *s;
}

std::atomic<bool> g_built{false};
// Set once the chain is built without error and a layer in it has on_module.
std::atomic<bool> g_tells_modules{false};

// A layer's on_module, or null when it has none (or was built before the field).
auto OnModuleOf(const bp_layer_t& l) -> decltype(l.on_module) {
  if (l.struct_size < offsetof(bp_layer_t, on_module) + sizeof(void*)) return nullptr;
  return l.on_module;
}

bool ValidName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

std::vector<EnabledLayer> ParseSpec(const std::string& spec, const std::string& origin) {
  std::vector<EnabledLayer> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    // Surrounding blanks are not part of a name ("validation, trace").
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) {
      item.erase(0, 1);
    }
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    if (!item.empty()) {
      EnabledLayer l;
      const size_t colon = item.find(':');
      l.name = item.substr(0, colon);
      l.options = colon == std::string::npos ? "" : item.substr(colon + 1);
      l.origin = origin;
      if (!ValidName(l.name)) {
        Fail(BP_ERR_INVALID_ARGUMENT,
             origin + ": '" + l.name + "' in \"" + spec +
                 "\" is not a layer name; write names (letters, digits, '_', '-', '.') separated "
                 "by commas, each optionally followed by ':' and its options, as in "
                 "\"validation,faults:seed=7\"");
      }
      out.push_back(std::move(l));
    }
    start = end + 1;
  }
  return out;
}

// Appends `layers` to `into`, all or none: a name already there is refused.
void AddUnique(std::vector<EnabledLayer>* into, std::vector<EnabledLayer> layers) {
  std::vector<EnabledLayer> all = *into;
  for (EnabledLayer& l : layers) {
    for (const EnabledLayer& e : all) {
      if (e.name == l.name) {
        Fail(BP_ERR_INVALID_ARGUMENT, l.origin + ": the layer '" + l.name +
                                          "' is enabled twice (also by " + e.origin +
                                          "); name each layer once");
      }
    }
    all.push_back(std::move(l));
  }
  *into = std::move(all);
}

// Loads layer.<name> and asks it for its table.
void Load(EnabledLayer* l) {
  const std::string fname = "layer." + l->name;
  std::string looked_at;
  Ref func = Runtime::Get().FindOrLoad(fname, &looked_at);
  if (!func) {
    Fail(BP_ERR_NOT_FOUND, "layer '" + l->name + "' (enabled by " + l->origin +
                               "): no plugin registered '" + fname + "'" + looked_at +
                               ". Put the layer's folder on BACKPLANE_PLUGIN_PATH, or remove it "
                               "from the list; `backplane info` shows what was found");
  }
  l->owner = Runtime::Get().registry.OwnerOf(fname);
  const std::string who = fname + " (" + l->owner + ")";
  bp_value_t arg;
  arg.type = BP_VALUE_STR;
  arg.reserved0 = 0;
  arg.u.v_str = l->options.c_str();
  bp_value_t v = CallFunction(func.get(), &arg, 1, who);
  if (v.type != BP_VALUE_PTR || v.u.v_ptr == nullptr) {
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
    Fail(BP_ERR_PLUGIN,
         who + " must return a pointer to a bp_layer_t, but returned something else");
  }
  const auto* layer = static_cast<const bp_layer_t*>(v.u.v_ptr);
  if (layer->struct_size < kMinLayerSize) {
    Fail(BP_ERR_VERSION_MISMATCH, who + ": its bp_layer_t has struct_size " +
                                      std::to_string(layer->struct_size) + " but ABI 1.9 needs " +
                                      std::to_string(kMinLayerSize) +
                                      "; rebuild the layer against the Backplane SDK");
  }
  if (layer->wrap_device_api == nullptr) {
    Fail(BP_ERR_PLUGIN, who + ": the required entry 'wrap_device_api' of its bp_layer_t is null");
  }
  l->layer = layer;
}

void Build(ChainState& s) {
  s.fixed = true;
  std::vector<EnabledLayer> chain;
  try {
    if (const char* env = secure_getenv("BACKPLANE_LAYERS"); env != nullptr && *env) {
      AddUnique(&chain, ParseSpec(env, "BACKPLANE_LAYERS"));
    }
    AddUnique(&chain, std::move(s.enabled));
    for (EnabledLayer& l : chain) Load(&l);
  } catch (const CoreError& e) {
    s.error = e.what();
    s.error_kind = e.kind();
    return;
  } catch (const std::exception& e) {  // out of memory: the chain is still not dropped
    s.error = std::string("the layer chain could not be built: ") + e.what();
    s.error_kind = BP_ERR_OUT_OF_MEMORY;
    return;
  }
  for (const EnabledLayer& l : chain) {
    s.wraps_functions = s.wraps_functions || l.layer->wrap_function != nullptr;
    s.wraps_builds = s.wraps_builds || l.layer->wrap_build != nullptr;
    if (OnModuleOf(*l.layer) != nullptr) s.told_of_modules.push_back(l.layer);
  }
  s.chain = std::move(chain);
  g_tells_modules.store(!s.told_of_modules.empty(), std::memory_order_release);
}

// Every entry of bp_device_api_t after `self`, in order: which are required, and each one's
// place, so a layer's table can be checked against the table below it.
struct Entry {
  const char* name;
  size_t offset;
  bool required;
};
#define BP_ENTRY(field, required) \
  { #field, offsetof(bp_device_api_t, field), required }
constexpr Entry kEntries[] = {
    BP_ENTRY(get_attr, true),
    BP_ENTRY(get_property, false),
    BP_ENTRY(set_device, false),
    BP_ENTRY(alloc_data_space, true),
    BP_ENTRY(free_data_space, true),
    BP_ENTRY(alloc_workspace, false),
    BP_ENTRY(free_workspace, false),
    BP_ENTRY(copy_data_from_to, true),
    BP_ENTRY(create_stream, false),
    BP_ENTRY(free_stream, false),
    BP_ENTRY(set_stream, false),
    BP_ENTRY(stream_sync, true),
    BP_ENTRY(sync_stream_from_to, false),
    BP_ENTRY(list_properties, false),
    BP_ENTRY(event_create, false),
    BP_ENTRY(event_free, false),
    BP_ENTRY(event_record, false),
    BP_ENTRY(stream_wait_event, false),
    BP_ENTRY(event_query, false),
    BP_ENTRY(event_sync, false),
    BP_ENTRY(event_elapsed_ms, false),
    BP_ENTRY(native_handle, false),
    BP_ENTRY(wrap_native, false),
    BP_ENTRY(unwrap_native, false),
};
#undef BP_ENTRY

bool Has(const bp_device_api_t* t, const Entry& e) {
  void* p = nullptr;
  std::memcpy(&p, reinterpret_cast<const char*>(t) + e.offset, sizeof(p));
  return p != nullptr;
}

void Check(bp_status_t st, uint64_t seq, const std::string& context) {
  if (st != BP_OK) CheckPluginStatus(st, seq, context);
}

// Set on the thread that builds the chain: a layer whose loading uses a device would
// otherwise wait for itself.
thread_local bool t_building = false;

}  // namespace

const std::vector<EnabledLayer>& LayerChain() {
  ChainState& s = State();
  if (!g_built.load(std::memory_order_acquire)) {
    if (t_building) {
      Fail(BP_ERR_PLUGIN,
           "a layer's plugin used a device, module function or code generator while the "
           "layer chain was being built (from its bp_plugin_init); a layer may do so only "
           "once it is called");
    }
    std::lock_guard lock(s.mu);
    if (!s.fixed) {
      t_building = true;
      Build(s);
      t_building = false;
      g_built.store(true, std::memory_order_release);
    }
  }
  if (!s.error.empty()) Fail(s.error_kind, s.error);
  return s.chain;
}

void EnableLayers(const std::string& spec, const std::string& origin) {
  ChainState& s = State();
  std::vector<EnabledLayer> layers = ParseSpec(spec, origin);
  std::lock_guard lock(s.mu);
  if (s.fixed) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_layers_enable(\"" + spec +
             "\"): the layer chain was fixed by the first use of a device, module function or "
             "code generator; enable layers before it (or set BACKPLANE_LAYERS)");
  }
  AddUnique(&s.enabled, std::move(layers));
}

const bp_device_api_t* WrapDeviceTable(int32_t type, const char* type_name,
                                       const bp_device_api_t* table) {
  const std::vector<EnabledLayer>& chain = LayerChain();
  const bp_device_api_t* below = table;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const std::string who = "layer '" + it->name + "' (" + it->owner + ") wrapping " + type_name;
    const bp_device_api_t* out = nullptr;
    const uint64_t seq = ErrorSequence();
    Check(it->layer->wrap_device_api(it->layer->self, type, type_name, below, &out), seq, who);
    if (out == nullptr) continue;
    if (out->struct_size < sizeof(bp_device_api_t)) {
      Fail(BP_ERR_VERSION_MISMATCH, who + ": its table has struct_size " +
                                        std::to_string(out->struct_size) + " but this core's is " +
                                        std::to_string(sizeof(bp_device_api_t)) +
                                        "; a layer's table is always the full size of the "
                                        "header it was built with: rebuild the layer");
    }
    for (const Entry& e : kEntries) {
      if (Has(out, e) != Has(below, e)) {
        Fail(BP_ERR_PLUGIN, who + ": its table's entry '" + e.name + "' is " +
                                (Has(out, e) ? "set" : "null") + " but the table below has it " +
                                (Has(below, e) ? "set" : "null") +
                                "; a layer's optional entries are null exactly where the next "
                                "table's are");
      }
    }
    auto copy = std::make_unique<bp_device_api_t>();
    std::memcpy(copy.get(), out, sizeof(bp_device_api_t));
    below = copy.release();  // lives as long as the process, as the plugin's own table
  }
  return below;
}

// `func` wrapped by the layers of the chain that have an entry for it, innermost first:
// `wrap(layer, func, &out)` calls that entry; `what` names the function in messages.
template <typename Wrap>
Ref WrapByLayers(const std::vector<EnabledLayer>& chain, Ref func, const std::string& what,
                 Wrap wrap) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    bp_object_t* out = nullptr;
    const uint64_t seq = ErrorSequence();
    const std::string who = "layer '" + it->name + "' wrapping " + what;
    Check(wrap(*it->layer, func.get(), &out), seq, who);
    if (out == nullptr) continue;
    Ref wrapped = Ref::Adopt(out);
    if (wrapped.get()->type() != BP_OBJECT_FUNCTION) {
      Fail(BP_ERR_PLUGIN, who + ": returned an object that is not a function");
    }
    func = std::move(wrapped);
  }
  return func;
}

Ref WrapModuleFunction(const char* module_kind, const std::string& name, Ref func) {
  const std::vector<EnabledLayer>& chain = LayerChain();
  if (!State().wraps_functions) return func;
  return WrapByLayers(chain, std::move(func), "function '" + name + "'",
                      [&](const bp_layer_t& l, bp_object_t* next, bp_object_t** out) {
                        return l.wrap_function == nullptr
                                   ? BP_OK
                                   : l.wrap_function(l.self, module_kind, name.c_str(), next, out);
                      });
}

bool TellLayersOfModule(const bp_object_t* module, const char* kind, bool alive) {
  if (!g_tells_modules.load(std::memory_order_acquire)) return false;
  // Each has on_module (Build kept only those), and the list is fixed once g_tells_modules is.
  for (const bp_layer_t* l : State().told_of_modules) l->on_module(l->self, module, kind, alive);
  return true;
}

Ref WrapCodegen(const std::string& target_kind, Ref codegen) {
  const std::vector<EnabledLayer>& chain = LayerChain();
  if (!State().wraps_builds) return codegen;
  return WrapByLayers(chain, std::move(codegen), "target.build." + target_kind,
                      [&](const bp_layer_t& l, bp_object_t* next, bp_object_t** out) {
                        return l.wrap_build == nullptr
                                   ? BP_OK
                                   : l.wrap_build(l.self, target_kind.c_str(), next, out);
                      });
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_layers_enable(const char* spec) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(spec != nullptr, "spec is null");
  EnableLayers(spec, "bp_layers_enable");
  BP_API_END
}

BP_EXPORT bp_status_t bp_layers_active(bp_object_t** out_names) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_names != nullptr, "out_names is null");
  std::vector<std::string> names;
  for (const EnabledLayer& l : LayerChain()) {
    names.push_back(l.options.empty() ? l.name : l.name + ":" + l.options);
  }
  *out_names = NewStringArray(names);
  BP_API_END
}

}  // extern "C"
