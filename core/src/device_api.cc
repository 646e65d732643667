// SPDX-License-Identifier: Apache-2.0
// DeviceAPI lookup and the bp_device_* entry points, with the contract's defaults (docs/abi.md,
// "The DeviceAPI table"): workspace falls back to data space, a device without streams uses
// the null stream, and copies between two different devices are staged through the host.
#include "device_api.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device_type.h"
#include "layers.h"
#include "object.h"
#include "plugin_loader.h"
#include "registry.h"
#include "runtime.h"

namespace backplane {
namespace core {
namespace {

// The size of a 1.0 table: the smallest a plugin may hand us.
constexpr size_t kMinTableSize =
    offsetof(bp_device_api_t, sync_stream_from_to) + sizeof(bp_device_api_t::sync_stream_from_to);

// The published tables, by device type. Constant-initialised (no guard on the hot path);
// each entry is written once, under the manager's lock, and never changes after.
std::atomic<const bp_device_api_t*> g_tables[BP_DEVICE_TYPE_MAX] = {};
// The owner (the plugin, or "host") that registered each published table; written before the
// table is published and never changed after, so a reader that saw the table sees it.
const std::string* g_owners[BP_DEVICE_TYPE_MAX] = {};

// Set while this thread has the layers wrap a table, under the manager's lock: a layer that
// asks for a table from there is refused instead of waiting for itself.
thread_local bool t_wrapping = false;

class DeviceAPIManager {
 public:
  const bp_device_api_t& Load(int32_t type) {
    const char* name = DeviceTypeName(type);
    if (name == nullptr) {
      // Discovery registers the device types that manifests declare: do it, then retry.
      Runtime::Get().loader.EnsureDiscovered();
      name = DeviceTypeName(type);
    }
    if (name == nullptr) {
      Fail(BP_ERR_NOT_FOUND, "device type id " + std::to_string(type) +
                                 " is not known; known: " + KnownDeviceTypes());
    }
    const std::string fname = std::string("device_api.") + name;
    std::string looked_at;
    Ref func = Runtime::Get().FindOrLoad(fname, &looked_at);
    if (!func) {
      Fail(BP_ERR_NOT_FOUND, std::string("no DeviceAPI for device type '") + name + "' (id " +
                                 std::to_string(type) + "): no plugin registered '" + fname + "'" +
                                 looked_at +
                                 ". Put the plugin's folder on BACKPLANE_PLUGIN_PATH or pass "
                                 "it to the host; `backplane info` shows what was found");
    }
    const std::string owner = Runtime::Get().registry.OwnerOf(fname);
    bp_value_t v = CallFunction(func.get(), nullptr, 0, fname);
    if (v.type != BP_VALUE_PTR || v.u.v_ptr == nullptr) {
      if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
      Fail(BP_ERR_PLUGIN, fname + " (" + owner +
                              ") must return a pointer to a bp_device_api_t, but returned "
                              "something else");
    }
    const auto* table = static_cast<const bp_device_api_t*>(v.u.v_ptr);
    const std::string who = fname + " (" + owner + ")";
    if (table->struct_size < kMinTableSize) {
      Fail(BP_ERR_VERSION_MISMATCH,
           who + ": its bp_device_api_t has struct_size " + std::to_string(table->struct_size) +
               " but ABI 1.0 needs at least " + std::to_string(kMinTableSize) +
               "; rebuild the plugin against the Backplane SDK");
    }
    auto copy = std::make_unique<bp_device_api_t>();
    std::memset(copy.get(), 0, sizeof(bp_device_api_t));
    std::memcpy(copy.get(), table, std::min(table->struct_size, sizeof(bp_device_api_t)));
    copy->struct_size = sizeof(bp_device_api_t);
    const char* missing = nullptr;
    if (copy->get_attr == nullptr) missing = "get_attr";
    if (copy->alloc_data_space == nullptr) missing = "alloc_data_space";
    if (copy->free_data_space == nullptr) missing = "free_data_space";
    if (copy->copy_data_from_to == nullptr) missing = "copy_data_from_to";
    if (copy->stream_sync == nullptr) missing = "stream_sync";
    if (copy->create_stream != nullptr && copy->free_stream == nullptr) missing = "free_stream";
    if (copy->wrap_native != nullptr && copy->unwrap_native == nullptr) missing = "unwrap_native";
    if (missing != nullptr) {
      Fail(BP_ERR_PLUGIN, who + ": the required entry '" + missing +
                              "' of its bp_device_api_t is null; the SDK's DeviceAPI base class "
                              "fills every entry");
    }
    // The layers' tables over the plugin's (the plugin's own when no layer is enabled), made
    // under the lock once the chain is built: threads that race to the first use of a type
    // would otherwise each have every layer wrap it, and the tables of all but one would be
    // lost with the `copy` below them still referenced (a leak, and a dangling `next` in any
    // layer that kept its table). A layer's wrap_device_api must not use a device.
    LayerChain();
    if (t_wrapping) {
      Fail(BP_ERR_PLUGIN, std::string("a layer used a device while it wrapped a DeviceAPI table "
                                      "(that of '") +
                              name +
                              "' was asked for); a layer's wrap_device_api must not use "
                              "a device");
    }
    std::lock_guard lock(mu_);
    const bp_device_api_t* existing = g_tables[type].load(std::memory_order_acquire);
    if (existing != nullptr) return *existing;
    t_wrapping = true;
    const bp_device_api_t* top = nullptr;
    try {
      top = WrapDeviceTable(type, name, copy.get());
    } catch (...) {
      t_wrapping = false;
      throw;
    }
    t_wrapping = false;
    g_owners[type] = new std::string(owner);  // lives as long as the process
    copy.release();                           // lives as long as the process, below `top`
    const bp_device_api_t* published = top;
    g_tables[type].store(published, std::memory_order_release);
    return *published;
  }

 private:
  std::mutex mu_;
};

DeviceAPIManager& Manager() {
  static DeviceAPIManager* m = new DeviceAPIManager();
  return *m;
}

const bp_device_api_t& TableFor(int32_t type) {
  if (type >= 0 && type < BP_DEVICE_TYPE_MAX) {
    const bp_device_api_t* t = g_tables[type].load(std::memory_order_acquire);
    if (t != nullptr) return *t;
  }
  return Manager().Load(type);
}

std::string DevName(DLDevice dev) {
  const char* n = DeviceTypeName(dev.device_type);
  return (n != nullptr ? std::string(n) : "type" + std::to_string(dev.device_type)) + ":" +
         std::to_string(dev.device_id);
}

// Calls a table entry, turning its failure into a CoreError that names the device.
template <typename Fn, typename... Args>
void Call(DLDevice dev, const char* entry, Fn fn, Args... args) {
  const uint64_t seq = ErrorSequence();
  bp_status_t st;
  try {
    st = fn(args...);
  } catch (...) {
    StatusFromCurrentException();
    Fail(BP_ERR_PLUGIN,
         DevName(dev) + " " + entry + ": threw a C++ exception (" + LastErrorMessage() + ")");
  }
  if (st != BP_OK) CheckPluginStatus(st, seq, DevName(dev) + " " + entry);
}

const bp_device_api_t& ApiFor(DLDevice dev) {
  if (dev.device_id < 0) {
    Fail(BP_ERR_INVALID_ARGUMENT, "device " + DevName(dev) + ": the device id is negative");
  }
  return TableFor(dev.device_type);
}

bool IsCompact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  // A tensor of no elements has no layout to get wrong (NumPy gives an empty array strides of 0).
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return true;
  }
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

void CheckTensor(const DLTensor* t, const char* which) {
  if (t == nullptr) Fail(BP_ERR_INVALID_ARGUMENT, std::string("copy: the ") + which + " is null");
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == nullptr)) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string("copy: the ") + which + " has a bad shape");
  }
  if (!IsCompact(*t)) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         std::string("copy: the ") + which + " is strided; only compact tensors can be copied");
  }
}

// Whether the DeviceAPIs of two device types come from one plugin (which then copies between
// them itself, on the given stream, instead of the core staging through host memory). Tables
// the host registered are not taken as one backend's: the core stages between them.
bool SamePlugin(int32_t a, int32_t b) {
  TableFor(a);
  TableFor(b);
  const std::string* owner_a = g_owners[a];
  const std::string* owner_b = g_owners[b];
  return owner_a != nullptr && owner_b != nullptr && *owner_a == *owner_b &&
         owner_a->rfind("plugin ", 0) == 0;
}

void CopyOnOneAPI(const DLTensor* from, const DLTensor* to, bp_stream_t stream, DLDevice dev) {
  const bp_device_api_t& api = ApiFor(dev);
  Call(dev, "copy_data_from_to", api.copy_data_from_to, api.self, from, to, stream);
}

void StreamSync(DLDevice dev, bp_stream_t stream) {
  const bp_device_api_t& api = ApiFor(dev);
  Call(dev, "stream_sync", api.stream_sync, api.self, dev, stream);
}

// "" when `obj`, an attribute's object, is a string or an array of ints, floats and strings;
// otherwise what it is instead.
std::string AttrObjectProblem(const bp_object_t* obj) {
  int32_t type = 0;
  if (bp_object_type(obj, &type) != BP_OK) return "an object that is not one";
  if (type == BP_OBJECT_STRING) return "";
  if (type != BP_OBJECT_ARRAY) return "an object of type " + std::to_string(type);
  size_t n = 0;
  bp_array_size(obj, &n);
  for (size_t i = 0; i < n; ++i) {
    bp_value_t e;
    if (bp_array_get(obj, i, &e) != BP_OK) return "an array that cannot be read";
    int32_t et = 0;
    if (e.type == BP_VALUE_INT || e.type == BP_VALUE_FLOAT) continue;
    if (e.type == BP_VALUE_OBJECT && bp_object_type(e.u.v_obj, &et) == BP_OK &&
        et == BP_OBJECT_STRING) {
      continue;
    }
    return "an array whose element " + std::to_string(i) + " is neither a number nor a string";
  }
  return "";
}

// "" when `keys` is an array of string objects; otherwise what it is instead.
std::string KeyListProblem(const bp_object_t* keys) {
  int32_t type = 0;
  if (bp_object_type(keys, &type) != BP_OK) return "an object that is not one";
  if (type != BP_OBJECT_ARRAY) return "an object of type " + std::to_string(type);
  size_t n = 0;
  bp_array_size(keys, &n);
  for (size_t i = 0; i < n; ++i) {
    bp_value_t e;
    int32_t et = 0;
    if (bp_array_get(keys, i, &e) != BP_OK || e.type != BP_VALUE_OBJECT ||
        bp_object_type(e.u.v_obj, &et) != BP_OK || et != BP_OBJECT_STRING) {
      return "an array whose element " + std::to_string(i) + " is not a string";
    }
  }
  return "";
}

// Devices of one type are ids 0, 1, ... while BP_ATTR_EXIST says 1, up to this many.
constexpr int32_t kMaxDevicesPerType = 64;

// bp_device_list: every device of every type whose DeviceAPI loads and answers.
std::vector<DLDevice> ListDevices() {
  std::vector<DLDevice> out;
  for (int32_t type : ListDeviceTypes()) {
    for (int32_t id = 0; id < kMaxDevicesPerType; ++id) {
      const DLDevice dev{static_cast<DLDeviceType>(type), id};
      bp_value_t v;
      v.type = BP_VALUE_NONE;
      v.u.v_int64 = 0;
      // A type without a DeviceAPI, or one that fails, has no devices here; the plugin
      // listing says why its plugin failed.
      if (bp_device_get_attr(dev, BP_ATTR_EXIST, &v) != BP_OK) break;
      if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
      if (v.type != BP_VALUE_INT || v.u.v_int64 == 0) break;
      out.push_back(dev);
    }
  }
  bp_error_clear();
  return out;
}

}  // namespace

const bp_device_api_t& GetDeviceAPI(int32_t device_type) { return TableFor(device_type); }

void* WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) {
  const bp_device_api_t& api = ApiFor(dev);
  if (api.wrap_native == nullptr || api.unwrap_native == nullptr) {
    Fail(BP_ERR_UNSUPPORTED, "bp_tensor_from_native: " + DevName(dev) +
                                 "'s backend wraps no native buffers (its DeviceAPI has no "
                                 "wrap_native); copy the data in, or pass host memory through "
                                 "bp_tensor_from_dlpack");
  }
  void* data = nullptr;
  Call(dev, "wrap_native", api.wrap_native, api.self, dev, &buffer, &data);
  if (data == nullptr && buffer.size != 0) {
    Fail(BP_ERR_PLUGIN, DevName(dev) + " wrap_native: returned a null data handle");
  }
  return data;
}

void UnwrapNative(DLDevice dev, void* data) noexcept {
  try {
    const bp_device_api_t& api = ApiFor(dev);
    Call(dev, "unwrap_native", api.unwrap_native, api.self, dev, data);
  } catch (...) {
    StatusFromCurrentException();
    std::fprintf(stderr, "backplane: releasing a wrapped native buffer failed: %s\n",
                 LastErrorMessage().c_str());
  }
}

size_t TensorBytes(const DLTensor& t, const char* what) {
  if (t.dtype.bits == 0 || t.dtype.lanes == 0) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(what) + ": dtype has 0 bits or 0 lanes");
  }
  __uint128_t n = (static_cast<__uint128_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) {
      Fail(BP_ERR_INVALID_ARGUMENT, std::string(what) + ": dimension " + std::to_string(i) +
                                        " is negative (" + std::to_string(t.shape[i]) + ")");
    }
    n *= static_cast<uint64_t>(t.shape[i]);
    if (n > (static_cast<__uint128_t>(1) << 62)) {
      Fail(BP_ERR_INVALID_ARGUMENT, std::string(what) + ": the tensor's size overflows");
    }
  }
  return static_cast<size_t>(n);
}

// An event: the plugin's handle where its DeviceAPI has events; otherwise the core's own,
// which records by synchronizing the stream and reading the host's clock.
struct EventObject final : bp_object {
  explicit EventObject(DLDevice d) : bp_object(BP_OBJECT_EVENT), dev(d) {}
  ~EventObject() override {
    if (handle == nullptr) return;
    const bp_device_api_t& api = TableFor(dev.device_type);
    if (api.event_free(api.self, dev, handle) != BP_OK) {
      const char* msg = nullptr;
      bp_error_last(nullptr, &msg);
      std::fprintf(stderr, "backplane: freeing an event of %s failed: %s\n", DevName(dev).c_str(),
                   msg != nullptr ? msg : "");
    }
  }
  const DLDevice dev;
  void* handle = nullptr;  // the plugin's event, or null for the core's
  // Whether it was ever recorded; for the core's event, the host time then.
  std::atomic<bool> recorded{false};
  std::atomic<int64_t> at_ns{0};
};

// Whether `api` has the (all-or-none) event entries.
bool HasEvents(const bp_device_api_t& api) {
  return api.event_create != nullptr && api.event_free != nullptr && api.event_record != nullptr &&
         api.stream_wait_event != nullptr && api.event_query != nullptr &&
         api.event_sync != nullptr && api.event_elapsed_ms != nullptr;
}

EventObject& EventOf(const bp_object_t* obj, const char* fn) {
  return const_cast<EventObject&>(As<EventObject>(obj, BP_OBJECT_EVENT, fn));
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT const char* bp_device_attr_name(int32_t kind) {
  // TVM's DeviceAttrKind names in snake_case, indexed by bp_device_attr_kind_t.
  static const char* const kNames[BP_ATTR_COUNT] = {"exist",
                                                    "max_threads_per_block",
                                                    "warp_size",
                                                    "max_shared_memory_per_block",
                                                    "compute_version",
                                                    "device_name",
                                                    "max_clock_rate",
                                                    "multi_processor_count",
                                                    "max_thread_dimensions",
                                                    "max_registers_per_block",
                                                    "gcn_arch",
                                                    "api_version",
                                                    "driver_version",
                                                    "l2_cache_size_bytes",
                                                    "total_global_memory",
                                                    "available_global_memory",
                                                    "image_pitch_alignment",
                                                    "device_kind",
                                                    "vendor",
                                                    "vendor_id",
                                                    "uuid",
                                                    "pci_bus_id",
                                                    "max_allocation_size",
                                                    "supports_fp64",
                                                    "supports_fp16",
                                                    "subgroup_sizes",
                                                    "extensions",
                                                    "driver_info",
                                                    "isa_flags"};
  return kind >= 0 && kind < BP_ATTR_COUNT ? kNames[kind] : nullptr;
}

BP_EXPORT bp_status_t bp_device_api_get(int32_t device_type, const bp_device_api_t** out_api) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_api != nullptr, "out_api is null");
  *out_api = &GetDeviceAPI(device_type);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_get_attr(DLDevice dev, int32_t kind, bp_value_t* out_value) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_value != nullptr, "out_value is null");
  BP_REQUIRE_ARG(kind >= 0, "the attribute kind is negative");
  const bp_device_api_t& api = ApiFor(dev);
  bp_value_t v;
  v.type = BP_VALUE_NONE;
  v.reserved0 = 0;
  v.u.v_int64 = 0;
  Call(dev, "get_attr", api.get_attr, api.self, dev, kind, &v);
  if (v.type < BP_VALUE_NONE || v.type > BP_VALUE_OBJECT || v.type == BP_VALUE_TENSOR ||
      v.type == BP_VALUE_STR || v.type == BP_VALUE_PTR || v.type == BP_VALUE_DEVICE ||
      v.type == BP_VALUE_DTYPE) {
    Fail(BP_ERR_PLUGIN, DevName(dev) + " get_attr(" + std::to_string(kind) +
                            "): returned a value of type " + std::to_string(v.type) +
                            "; attributes are none, int, float, a string object or an array "
                            "object of ints or strings");
  }
  if (v.type == BP_VALUE_OBJECT) {
    const std::string problem = AttrObjectProblem(v.u.v_obj);
    if (!problem.empty()) {
      bp_object_release(v.u.v_obj);
      Fail(BP_ERR_PLUGIN, DevName(dev) + " get_attr(" + std::to_string(kind) + "): returned " +
                              problem +
                              "; attributes are none, int, float, a string object or an array "
                              "object of ints or strings");
    }
  }
  *out_value = v;
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_get_property(DLDevice dev, const char* key, bp_value_t* out_value) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_value != nullptr, "out_value is null");
  BP_REQUIRE_ARG(key != nullptr, "key is null");
  const bp_device_api_t& api = ApiFor(dev);
  out_value->type = BP_VALUE_NONE;
  out_value->u.v_int64 = 0;
  if (api.get_property == nullptr) return BP_OK;
  Call(dev, "get_property", api.get_property, api.self, dev, key, out_value);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_list_properties(DLDevice dev, bp_object_t** out_keys) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_keys != nullptr, "out_keys is null");
  const bp_device_api_t& api = ApiFor(dev);
  bp_object_t* keys = nullptr;
  if (api.list_properties == nullptr) {
    // A plugin built before 1.5 (its table ends before the entry) lists no keys.
    if (bp_array_create(nullptr, 0, &keys) != BP_OK) Fail(BP_ERR_INTERNAL, LastErrorMessage());
    *out_keys = keys;
    return BP_OK;
  }
  Call(dev, "list_properties", api.list_properties, api.self, dev, &keys);
  if (keys == nullptr) {
    Fail(BP_ERR_PLUGIN, DevName(dev) +
                            " list_properties: returned no array; it must return an array "
                            "of string objects (empty when the device has no properties)");
  }
  const std::string problem = KeyListProblem(keys);
  if (!problem.empty()) {
    bp_object_release(keys);
    Fail(BP_ERR_PLUGIN, DevName(dev) + " list_properties: returned " + problem +
                            "; it must return an array of string objects");
  }
  *out_keys = keys;
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_list(DLDevice* out_devices, size_t capacity, size_t* out_count) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_count != nullptr, "out_count is null");
  BP_REQUIRE_ARG(out_devices != nullptr || capacity == 0,
                 "out_devices is null but capacity is " + std::to_string(capacity));
  Runtime::Get().loader.EnsureDiscovered();
  const std::vector<DLDevice> devices = ListDevices();
  for (size_t i = 0; i < devices.size() && i < capacity; ++i) out_devices[i] = devices[i];
  *out_count = devices.size();
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_set(DLDevice dev) {
  BP_API_BEGIN
  const bp_device_api_t& api = ApiFor(dev);
  if (api.set_device != nullptr) Call(dev, "set_device", api.set_device, api.self, dev);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_alloc_data_space(DLDevice dev, size_t nbytes, size_t alignment,
                                                 DLDataType type_hint, void** out_data) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_data != nullptr, "out_data is null");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT, "alloc_data_space on " + DevName(dev) + ": alignment " +
                                      std::to_string(alignment) + " is not a power of two");
  }
  const bp_device_api_t& api = ApiFor(dev);
  Call(dev, "alloc_data_space", api.alloc_data_space, api.self, dev, nbytes, alignment, type_hint,
       out_data);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_free_data_space(DLDevice dev, void* data) {
  BP_API_BEGIN
  const bp_device_api_t& api = ApiFor(dev);
  Call(dev, "free_data_space", api.free_data_space, api.self, dev, data);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_alloc_workspace(DLDevice dev, size_t nbytes, DLDataType type_hint,
                                                void** out_data) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_data != nullptr, "out_data is null");
  const bp_device_api_t& api = ApiFor(dev);
  if (api.alloc_workspace != nullptr) {
    Call(dev, "alloc_workspace", api.alloc_workspace, api.self, dev, nbytes, type_hint, out_data);
  } else {
    Call(dev, "alloc_data_space", api.alloc_data_space, api.self, dev, nbytes, size_t{64},
         type_hint, out_data);
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_free_workspace(DLDevice dev, void* data) {
  BP_API_BEGIN
  const bp_device_api_t& api = ApiFor(dev);
  // Both halves of a pair fall back together, so a block goes back where it came from.
  if (api.alloc_workspace != nullptr && api.free_workspace != nullptr) {
    Call(dev, "free_workspace", api.free_workspace, api.self, dev, data);
  } else {
    Call(dev, "free_data_space", api.free_data_space, api.self, dev, data);
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_copy_data_from_to(const DLTensor* from, const DLTensor* to,
                                                  bp_stream_t stream) {
  BP_API_BEGIN
  CheckTensor(from, "source");
  CheckTensor(to, "destination");
  const size_t from_bytes = TensorBytes(*from, "copy source");
  const size_t to_bytes = TensorBytes(*to, "copy destination");
  if (from_bytes != to_bytes) {
    Fail(BP_ERR_INVALID_ARGUMENT, "copy from " + DevName(from->device) + " to " +
                                      DevName(to->device) + ": the source holds " +
                                      std::to_string(from_bytes) + " bytes but the destination " +
                                      std::to_string(to_bytes) + "; sizes must match");
  }
  if (from_bytes == 0) return BP_OK;  // nothing moves; an empty host vector has null data
  if (from->data == nullptr || to->data == nullptr) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         std::string("copy of ") + std::to_string(from_bytes) + " bytes: the " +
             (from->data == nullptr ? "source" : "destination") + " has null data");
  }
  const bool from_cpu = from->device.device_type == kDLCPU;
  const bool to_cpu = to->device.device_type == kDLCPU;
  if (from_cpu || to_cpu || from->device.device_type == to->device.device_type ||
      SamePlugin(from->device.device_type, to->device.device_type)) {
    // One DeviceAPI serves the copy: the non-CPU side's, the shared type's, or (for two types
    // of one plugin, such as cuda and cuda_host) the destination's, which the plugin routes.
    CopyOnOneAPI(from, to, stream, to_cpu ? from->device : to->device);
    return BP_OK;
  }
  // Two device types of different plugins: stage through host memory.
  std::unique_ptr<void, decltype(&std::free)> staging(
      std::aligned_alloc(64, (from_bytes + 63) / 64 * 64 + 64), &std::free);
  if (!staging) Fail(BP_ERR_OUT_OF_MEMORY, "copy: no host memory for a staging buffer");
  DLTensor host = *from;
  host.data = staging.get();
  host.device = DLDevice{kDLCPU, 0};
  host.strides = nullptr;
  host.byte_offset = 0;
  CopyOnOneAPI(from, &host, nullptr, from->device);
  StreamSync(from->device, nullptr);
  CopyOnOneAPI(&host, to, stream, to->device);
  StreamSync(to->device, stream);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_stream_create(DLDevice dev, bp_stream_t* out_stream) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_stream != nullptr, "out_stream is null");
  const bp_device_api_t& api = ApiFor(dev);
  *out_stream = nullptr;
  if (api.create_stream != nullptr) {
    Call(dev, "create_stream", api.create_stream, api.self, dev, out_stream);
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_stream_free(DLDevice dev, bp_stream_t stream) {
  BP_API_BEGIN
  const bp_device_api_t& api = ApiFor(dev);
  if (stream != nullptr && api.free_stream != nullptr) {
    Call(dev, "free_stream", api.free_stream, api.self, dev, stream);
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_stream_set(DLDevice dev, bp_stream_t stream) {
  BP_API_BEGIN
  const bp_device_api_t& api = ApiFor(dev);
  if (api.set_stream != nullptr) {
    Call(dev, "set_stream", api.set_stream, api.self, dev, stream);
  } else if (stream != nullptr) {
    Fail(BP_ERR_UNSUPPORTED, DevName(dev) +
                                 ": its DeviceAPI has no set_stream, so only the "
                                 "null stream can be active");
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_stream_sync(DLDevice dev, bp_stream_t stream) {
  BP_API_BEGIN
  StreamSync(dev, stream);
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_sync_stream_from_to(DLDevice dev, bp_stream_t src,
                                                    bp_stream_t dst) {
  BP_API_BEGIN
  const bp_device_api_t& api = ApiFor(dev);
  if (api.sync_stream_from_to != nullptr) {
    Call(dev, "sync_stream_from_to", api.sync_stream_from_to, api.self, dev, src, dst);
  } else {
    StreamSync(dev, src);  // the ordering BP-PLUGIN-8 asks for, achieved by waiting on the host
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_native_handle(DLDevice dev, bp_native_kind_t kind, const void* object,
                                       uint64_t* out_handle) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_handle != nullptr, "out_handle is null");
  *out_handle = 0;
  const bp_device_api_t& api = ApiFor(dev);
  if (api.native_handle == nullptr) {
    Fail(BP_ERR_UNSUPPORTED, "bp_native_handle: " + DevName(dev) +
                                 "'s backend has no native handles (its DeviceAPI has no "
                                 "native_handle entry)");
  }
  if (kind < BP_NATIVE_BUFFER || kind > BP_NATIVE_PLATFORM) {
    Fail(BP_ERR_INVALID_ARGUMENT, "bp_native_handle: kind " + std::to_string(kind) +
                                      " is not a bp_native_kind_t (BP_NATIVE_BUFFER = 1 to "
                                      "BP_NATIVE_PLATFORM = 9)");
  }
  Call(dev, "native_handle", api.native_handle, api.self, dev, static_cast<int32_t>(kind),
       const_cast<void*>(object), out_handle);
  BP_API_END
}

BP_EXPORT bp_status_t bp_event_create(DLDevice dev, bp_object_t** out_event) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_event != nullptr, "out_event is null");
  const bp_device_api_t& api = ApiFor(dev);
  auto* e = new EventObject(dev);
  Ref owner = Ref::Adopt(e);
  if (HasEvents(api)) Call(dev, "event_create", api.event_create, api.self, dev, &e->handle);
  *out_event = owner.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_event_record(bp_object_t* event, bp_stream_t stream) {
  BP_API_BEGIN
  EventObject& e = EventOf(event, "bp_event_record");
  const bp_device_api_t& api = ApiFor(e.dev);
  if (e.handle != nullptr) {
    Call(e.dev, "event_record", api.event_record, api.self, e.dev, e.handle, stream);
  } else {
    StreamSync(e.dev, stream);
    e.at_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
  }
  e.recorded.store(true);
  BP_API_END
}

BP_EXPORT bp_status_t bp_event_wait(const bp_object_t* event, bp_stream_t stream) {
  BP_API_BEGIN
  EventObject& e = EventOf(event, "bp_event_wait");
  const bp_device_api_t& api = ApiFor(e.dev);
  if (e.handle != nullptr) {
    Call(e.dev, "stream_wait_event", api.stream_wait_event, api.self, e.dev, stream, e.handle);
  }
  // The core's event was passed when it was recorded: nothing to wait for.
  BP_API_END
}

BP_EXPORT bp_status_t bp_event_query(const bp_object_t* event, int32_t* out_done) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_done != nullptr, "out_done is null");
  EventObject& e = EventOf(event, "bp_event_query");
  *out_done = 1;
  if (e.handle != nullptr) {
    const bp_device_api_t& api = ApiFor(e.dev);
    int32_t done = 0;
    Call(e.dev, "event_query", api.event_query, api.self, e.dev, e.handle, &done);
    *out_done = done != 0 ? 1 : 0;
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_event_sync(const bp_object_t* event) {
  BP_API_BEGIN
  EventObject& e = EventOf(event, "bp_event_sync");
  if (e.handle != nullptr) {
    const bp_device_api_t& api = ApiFor(e.dev);
    Call(e.dev, "event_sync", api.event_sync, api.self, e.dev, e.handle);
  }
  BP_API_END
}

BP_EXPORT bp_status_t bp_event_elapsed_ms(const bp_object_t* start, const bp_object_t* end,
                                          double* out_ms) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_ms != nullptr, "out_ms is null");
  EventObject& a = EventOf(start, "bp_event_elapsed_ms");
  EventObject& b = EventOf(end, "bp_event_elapsed_ms");
  if (a.dev.device_type != b.dev.device_type || a.dev.device_id != b.dev.device_id) {
    Fail(BP_ERR_INVALID_ARGUMENT, "bp_event_elapsed_ms: the events are of " + DevName(a.dev) +
                                      " and " + DevName(b.dev) + "; time two events of one device");
  }
  if (!a.recorded.load() || !b.recorded.load()) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_event_elapsed_ms: the " + std::string(a.recorded.load() ? "end" : "start") +
             " event of " + DevName(a.dev) + " was never recorded; record both first");
  }
  if (a.handle != nullptr) {
    // The plugin times passed points only: wait for both.
    const bp_device_api_t& api = ApiFor(a.dev);
    Call(a.dev, "event_sync", api.event_sync, api.self, a.dev, a.handle);
    Call(b.dev, "event_sync", api.event_sync, api.self, b.dev, b.handle);
    Call(a.dev, "event_elapsed_ms", api.event_elapsed_ms, api.self, a.dev, a.handle, b.handle,
         out_ms);
  } else {
    *out_ms = static_cast<double>(b.at_ns.load() - a.at_ns.load()) / 1e6;
  }
  BP_API_END
}

}  // extern "C"
