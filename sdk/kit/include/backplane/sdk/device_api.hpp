// SPDX-License-Identifier: Apache-2.0
// backplane::sdk::DeviceAPI: the DeviceAPI as a C++ class for plugin authors.
//
// A backend derives from DeviceAPI, overrides the virtual methods in ordinary C++ (errors
// are thrown as backplane::Error) and registers one instance with RegisterDeviceAPI. The
// base class owns the C table (bp_device_api_t) whose entries are trampolines: each checks
// its pointer arguments, calls the virtual method and turns any exception into a status and
// the error slot, so no exception ever crosses the C boundary.
//
// Lifetime: the core keeps the table and the instance until the process ends, so an
// instance is a function-local static (or otherwise outlives every use).
#ifndef BACKPLANE_SDK_DEVICE_API_HPP_
#define BACKPLANE_SDK_DEVICE_API_HPP_

#include <backplane/sdk/plugin.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane {
namespace sdk {

// The alignment of workspace allocations when a backend does not say otherwise.
constexpr size_t kDefaultWorkspaceAlignment = 64;

// Bytes held by a compact tensor: elements times the element size.
inline size_t TensorBytes(const DLTensor* t) {
  size_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= static_cast<size_t>(t->shape[i]);
  return n * ((static_cast<size_t>(t->dtype.bits) * t->dtype.lanes + 7) / 8);
}

// True when `t` is row-major compact: no strides, or strides that equal the compact ones
// (dimensions of extent 1 may have any stride).
inline bool IsCompact(const DLTensor* t) {
  if (t->strides == nullptr) return true;
  int64_t expected = 1;
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

// What CopyDataFromTo checks before it looks at memory: `from` and `to` hold the same number of
// bytes, both are compact, and at least one side is a device of `device_type` (the calling
// DeviceAPI's). Returns the byte count and which sides are that type's; throws
// Error(BP_ERR_INVALID_ARGUMENT) saying which check failed otherwise.
struct CopySides {
  size_t nbytes = 0;
  bool from_device = false;
  bool to_device = false;
};
inline CopySides CheckCopy(const DLTensor* from, const DLTensor* to, int32_t device_type) {
  const CopySides sides{TensorBytes(from), from->device.device_type == device_type,
                        to->device.device_type == device_type};
  auto what = [&] {  // built only for a message
    return "copying from " + DeviceString(from->device) + " to " + DeviceString(to->device) + ": ";
  };
  BACKPLANE_REQUIRE(sides.nbytes == TensorBytes(to), BP_ERR_INVALID_ARGUMENT,
                    what() + "the source has " + std::to_string(sides.nbytes) +
                        " bytes but the destination " + std::to_string(TensorBytes(to)) +
                        "; pass tensors of the same byte size");
  BACKPLANE_REQUIRE(IsCompact(from) && IsCompact(to), BP_ERR_INVALID_ARGUMENT,
                    what() +
                        "a tensor is strided, and device copies take compact tensors only; "
                        "make a compact copy first");
  BACKPLANE_REQUIRE(sides.from_device || sides.to_device, BP_ERR_INVALID_ARGUMENT,
                    what() +
                        "neither side is a device of this DeviceAPI; ask the DeviceAPI of "
                        "one of the two sides");
  return sides;
}

class DeviceAPI;
inline int32_t RegisterDeviceAPI(const std::string& type_name, DeviceAPI* api);

// The base class of a backend's DeviceAPI. Methods take the device they act on; a backend
// with one device per type checks dev.device_id itself.
class DeviceAPI {
 public:
  // Which optional table entries the backend provides. An entry left out is null in the
  // table and the core applies the entry's default (docs/abi.md, "The DeviceAPI table":
  // workspace falls back to data space, create_stream gives the null stream,
  // sync_stream_from_to syncs the source stream).
  struct Entries {
    bool property = true;
    bool workspace = true;
    bool streams = true;  // create_stream, free_stream, set_stream
    bool sync_stream_from_to = true;
    // The event entries (ABI 1.6): CreateEvent ... EventElapsedMs. Off by default: the core's
    // events (a stream sync and the host's clock) serve a backend without its own.
    bool events = false;
    // The native-handle entries (ABI 1.6): NativeHandle; WrapNative and UnwrapNative. Off by
    // default: a backend without them has no native handles and wraps nothing.
    bool native_handles = false;
    bool wrap_native = false;
  };

  DeviceAPI() : DeviceAPI(Entries{}) {}
  explicit DeviceAPI(const Entries& entries);
  virtual ~DeviceAPI() = default;
  DeviceAPI(const DeviceAPI&) = delete;
  DeviceAPI& operator=(const DeviceAPI&) = delete;

  // The attribute `kind` of `dev`, or a none Any (NoneValue()) when it cannot be queried or
  // does not apply. A device id past the end answers kExist = 0 and none for the rest.
  virtual Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) = 0;
  // String-keyed properties beyond the enum; none for keys the backend does not know.
  virtual Any GetProperty(DLDevice dev, const std::string& key);
  // The keys GetProperty answers for `dev` (ABI 1.5's list_properties); each must answer
  // something other than none. The default lists none. A device id past the end lists none.
  virtual std::vector<std::string> ListProperties(DLDevice dev);
  // Makes `dev` the calling thread's active device.
  virtual void SetDevice(DLDevice dev) = 0;
  // Data space: memory that can be copied to and from the host. The result may be an
  // opaque handle. A zero-size request gives a valid handle that FreeDataSpace accepts.
  // Throw BP_ERR_OUT_OF_MEMORY when the device cannot hold `nbytes`.
  virtual void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                               DLDataType type_hint) = 0;
  virtual void FreeDataSpace(DLDevice dev, void* ptr) = 0;
  // Workspace: scratch memory within an operator. By default it is data space (the fallback
  // the DeviceAPI contract gives a backend without workspace: docs/abi.md, "The DeviceAPI
  // table"), aligned to kDefaultWorkspaceAlignment.
  virtual void* AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint);
  virtual void FreeWorkspace(DLDevice dev, void* ptr);
  // Copies `from` to `to` (same byte size, compact), honouring byte_offset, queued on
  // `stream` of the non-CPU side. The host side must be read before returning.
  virtual void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) = 0;
  // A new stream; the default, for single-queue devices, is the null stream.
  virtual bp_stream_t CreateStream(DLDevice dev);
  // Frees a stream from CreateStream. The default accepts only the null stream.
  virtual void FreeStream(DLDevice dev, bp_stream_t stream);
  // Makes `stream` the active stream of `dev`; the default does nothing.
  virtual void SetStream(DLDevice dev, bp_stream_t stream);
  // Returns once all work submitted to `stream` before the call has completed.
  virtual void StreamSync(DLDevice dev, bp_stream_t stream) = 0;
  // `dst` may not proceed past its queued work until `src` has finished the work queued
  // now. The default waits for `src` on the calling thread.
  virtual void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst);

  // Events (ABI 1.6; only with Entries::events): a marker in a stream's work, as an opaque
  // handle of the backend's. RecordEvent marks the point after the work queued on `stream` so
  // far (recording again moves it); StreamWaitEvent makes `stream` wait for it without the
  // host waiting; EventDone answers whether it is passed (true for one never recorded);
  // SyncEvent returns once it is; EventElapsedMs is the milliseconds between two passed
  // points (throw BP_ERR_UNSUPPORTED where the device cannot time). The defaults throw
  // BP_ERR_UNSUPPORTED.
  virtual void* CreateEvent(DLDevice dev);
  virtual void FreeEvent(DLDevice dev, void* event);
  virtual void RecordEvent(DLDevice dev, void* event, bp_stream_t stream);
  virtual void StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event);
  virtual bool EventDone(DLDevice dev, void* event);
  virtual void SyncEvent(DLDevice dev, void* event);
  virtual double EventElapsedMs(DLDevice dev, void* start, void* end);

  // Native handles (ABI 1.6; bp_native_kind_t). NativeHandle (only with
  // Entries::native_handles) is the backend's handle of `kind` for `object` (a data handle for
  // the BUFFER and MEMORY kinds, a stream for the QUEUE kinds, null for the rest); throw
  // BP_ERR_UNSUPPORTED (UnsupportedNative) for a kind the backend has none of. WrapNative and
  // UnwrapNative (only with Entries::wrap_native): a data handle over an application's buffer,
  // checked to be of `dev` and at least buffer.size bytes, never freed by the backend
  // (FreeDataSpace refuses it: sdk::HandleTable::AddWrapped), and its end. The defaults throw
  // BP_ERR_UNSUPPORTED.
  virtual uint64_t NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object);
  virtual void* WrapNative(DLDevice dev, const bp_native_buffer_t& buffer);
  virtual void UnwrapNative(DLDevice dev, void* data);
  // BP_ERR_UNSUPPORTED: `backend` has no handle of `kind` (what it has is listed in `has`).
  [[noreturn]] static void UnsupportedNative(DLDevice dev, bp_native_kind_t kind, const char* has);

  // The C table for the core; `self` is this object. Valid while the object lives.
  const bp_device_api_t* table() const { return &table_; }
  // The device type id this DeviceAPI was registered for (RegisterDeviceAPI), or -1 before.
  // Device types named by a plugin get their id at run time, so a backend compares a
  // DLDevice's device_type with this, never with a constant.
  int32_t device_type() const { return device_type_; }

 private:
  friend int32_t RegisterDeviceAPI(const std::string& type_name, DeviceAPI* api);

  static bp_status_t GetAttrEntry(void* self, DLDevice dev, int32_t kind, bp_value_t* out);
  static bp_status_t GetPropertyEntry(void* self, DLDevice dev, const char* key, bp_value_t* out);
  static bp_status_t ListPropertiesEntry(void* self, DLDevice dev, bp_object_t** out);
  static bp_status_t SetDeviceEntry(void* self, DLDevice dev);
  static bp_status_t AllocDataSpaceEntry(void* self, DLDevice dev, size_t nbytes, size_t alignment,
                                         DLDataType type_hint, void** out);
  static bp_status_t FreeDataSpaceEntry(void* self, DLDevice dev, void* data);
  static bp_status_t AllocWorkspaceEntry(void* self, DLDevice dev, size_t nbytes,
                                         DLDataType type_hint, void** out);
  static bp_status_t FreeWorkspaceEntry(void* self, DLDevice dev, void* data);
  static bp_status_t CopyDataFromToEntry(void* self, const DLTensor* from, const DLTensor* to,
                                         bp_stream_t stream);
  static bp_status_t CreateStreamEntry(void* self, DLDevice dev, bp_stream_t* out);
  static bp_status_t FreeStreamEntry(void* self, DLDevice dev, bp_stream_t stream);
  static bp_status_t SetStreamEntry(void* self, DLDevice dev, bp_stream_t stream);
  static bp_status_t StreamSyncEntry(void* self, DLDevice dev, bp_stream_t stream);
  static bp_status_t SyncStreamFromToEntry(void* self, DLDevice dev, bp_stream_t src,
                                           bp_stream_t dst);

  static bp_status_t EventCreateEntry(void* self, DLDevice dev, void** out);
  static bp_status_t EventFreeEntry(void* self, DLDevice dev, void* event);
  static bp_status_t EventRecordEntry(void* self, DLDevice dev, void* event, bp_stream_t stream);
  static bp_status_t StreamWaitEventEntry(void* self, DLDevice dev, bp_stream_t stream,
                                          void* event);
  static bp_status_t EventQueryEntry(void* self, DLDevice dev, void* event, int32_t* out_done);
  static bp_status_t EventSyncEntry(void* self, DLDevice dev, void* event);
  static bp_status_t EventElapsedEntry(void* self, DLDevice dev, void* start, void* end,
                                       double* out_ms);
  static bp_status_t NativeHandleEntry(void* self, DLDevice dev, int32_t kind, void* object,
                                       uint64_t* out);
  static bp_status_t WrapNativeEntry(void* self, DLDevice dev, const bp_native_buffer_t* buffer,
                                     void** out);
  static bp_status_t UnwrapNativeEntry(void* self, DLDevice dev, void* data);
  [[noreturn]] static void NoEvents(DLDevice dev) {
    throw Error(BP_ERR_UNSUPPORTED, DeviceString(dev) +
                                        ": this DeviceAPI declares events but does not "
                                        "implement them; override CreateEvent and the rest");
  }

  static DeviceAPI* Self(void* self) { return static_cast<DeviceAPI*>(self); }
  [[noreturn]] static void NullArgument(const char* entry, const char* what) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                std::string("DeviceAPI ") + entry + ": " + what + " is null; pass a valid pointer");
  }

  bp_device_api_t table_;
  int32_t device_type_ = -1;
};

// Registers `api` as the DeviceAPI of device type `type_name` -- the global function
// "device_api.<type_name>" returning its table as BP_VALUE_PTR (BP-PLUGIN-4) -- and returns
// the device type's id, which api->device_type() answers from then on. A name DLPack does not
// define gets a fresh id (>= BP_DEVICE_TYPE_FIRST_DYNAMIC) unless discovery already registered
// it from the manifest's device_types; either way no enum or core edit is involved. `api` must
// outlive every use (see the lifetime note above). Throws BP_ERR_ALREADY_EXISTS when another
// plugin provides the type, BP_ERR_INVALID_ARGUMENT for a bad name.
inline int32_t RegisterDeviceAPI(const std::string& type_name, DeviceAPI* api) {
  const int32_t type = RegisterDeviceType(type_name);
  void* table = const_cast<bp_device_api_t*>(api->table());
  RegisterFunction("device_api." + type_name, [table](PackedArgs) { return PtrValue(table); });
  api->device_type_ = type;
  return type;
}

// ---- implementation ---------------------------------------------------------------------

inline DeviceAPI::DeviceAPI(const Entries& e)
    : table_{
          .struct_size = sizeof(bp_device_api_t),
          .self = this,
          .get_attr = &GetAttrEntry,
          .get_property = e.property ? &GetPropertyEntry : nullptr,
          .set_device = &SetDeviceEntry,
          .alloc_data_space = &AllocDataSpaceEntry,
          .free_data_space = &FreeDataSpaceEntry,
          .alloc_workspace = e.workspace ? &AllocWorkspaceEntry : nullptr,
          .free_workspace = e.workspace ? &FreeWorkspaceEntry : nullptr,
          .copy_data_from_to = &CopyDataFromToEntry,
          .create_stream = e.streams ? &CreateStreamEntry : nullptr,
          .free_stream = e.streams ? &FreeStreamEntry : nullptr,
          .set_stream = e.streams ? &SetStreamEntry : nullptr,
          .stream_sync = &StreamSyncEntry,
          .sync_stream_from_to = e.sync_stream_from_to ? &SyncStreamFromToEntry : nullptr,
          .list_properties = &ListPropertiesEntry,
          .event_create = e.events ? &EventCreateEntry : nullptr,
          .event_free = e.events ? &EventFreeEntry : nullptr,
          .event_record = e.events ? &EventRecordEntry : nullptr,
          .stream_wait_event = e.events ? &StreamWaitEventEntry : nullptr,
          .event_query = e.events ? &EventQueryEntry : nullptr,
          .event_sync = e.events ? &EventSyncEntry : nullptr,
          .event_elapsed_ms = e.events ? &EventElapsedEntry : nullptr,
          .native_handle = e.native_handles ? &NativeHandleEntry : nullptr,
          .wrap_native = e.wrap_native ? &WrapNativeEntry : nullptr,
          .unwrap_native = e.wrap_native ? &UnwrapNativeEntry : nullptr,
      } {}

inline Any DeviceAPI::GetProperty(DLDevice, const std::string&) { return NoneValue(); }

inline std::vector<std::string> DeviceAPI::ListProperties(DLDevice) { return {}; }

inline void* DeviceAPI::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) {
  return AllocDataSpace(dev, nbytes, kDefaultWorkspaceAlignment, type_hint);
}

inline void DeviceAPI::FreeWorkspace(DLDevice dev, void* ptr) { FreeDataSpace(dev, ptr); }

inline bp_stream_t DeviceAPI::CreateStream(DLDevice) { return nullptr; }

inline void DeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  BACKPLANE_REQUIRE(stream == nullptr, BP_ERR_INVALID_ARGUMENT,
                    DeviceString(dev) + " has a single queue and never created stream " +
                        PointerString(stream) +
                        "; only the null stream exists, and it needs no freeing");
}

inline void DeviceAPI::SetStream(DLDevice, bp_stream_t) {}

inline void DeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t) {
  StreamSync(dev, src);
}

inline bp_status_t DeviceAPI::GetAttrEntry(void* self, DLDevice dev, int32_t kind,
                                           bp_value_t* out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("get_attr", "out_value");
    // A kind from a newer minor than this plugin knows is "not supported".
    Any value = (kind >= 0 && kind < BP_ATTR_COUNT)
                    ? Self(self)->GetAttr(dev, static_cast<bp_device_attr_kind_t>(kind))
                    : NoneValue();
    *out = value.release();
  });
}

inline bp_status_t DeviceAPI::GetPropertyEntry(void* self, DLDevice dev, const char* key,
                                               bp_value_t* out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("get_property", "out_value");
    if (key == nullptr) NullArgument("get_property", "key");
    *out = Self(self)->GetProperty(dev, key).release();
  });
}

inline bp_status_t DeviceAPI::ListPropertiesEntry(void* self, DLDevice dev, bp_object_t** out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("list_properties", "out_keys");
    *out = StringArrayValue(Self(self)->ListProperties(dev)).release().u.v_obj;
  });
}

inline bp_status_t DeviceAPI::SetDeviceEntry(void* self, DLDevice dev) {
  return CatchAtEdge([&] { Self(self)->SetDevice(dev); });
}

inline bp_status_t DeviceAPI::AllocDataSpaceEntry(void* self, DLDevice dev, size_t nbytes,
                                                  size_t alignment, DLDataType type_hint,
                                                  void** out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("alloc_data_space", "out_data");
    BACKPLANE_REQUIRE(alignment != 0 && (alignment & (alignment - 1)) == 0, BP_ERR_INVALID_ARGUMENT,
                      "alloc_data_space on " + DeviceString(dev) + ": alignment " +
                          std::to_string(alignment) +
                          " is not a power of two; pass 1, 2, 4, "
                          "... (64 suits every dtype)");
    *out = Self(self)->AllocDataSpace(dev, nbytes, alignment, type_hint);
  });
}

inline bp_status_t DeviceAPI::FreeDataSpaceEntry(void* self, DLDevice dev, void* data) {
  return CatchAtEdge([&] { Self(self)->FreeDataSpace(dev, data); });
}

inline bp_status_t DeviceAPI::AllocWorkspaceEntry(void* self, DLDevice dev, size_t nbytes,
                                                  DLDataType type_hint, void** out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("alloc_workspace", "out_data");
    *out = Self(self)->AllocWorkspace(dev, nbytes, type_hint);
  });
}

inline bp_status_t DeviceAPI::FreeWorkspaceEntry(void* self, DLDevice dev, void* data) {
  return CatchAtEdge([&] { Self(self)->FreeWorkspace(dev, data); });
}

inline bp_status_t DeviceAPI::CopyDataFromToEntry(void* self, const DLTensor* from,
                                                  const DLTensor* to, bp_stream_t stream) {
  return CatchAtEdge([&] {
    if (from == nullptr) NullArgument("copy_data_from_to", "from");
    if (to == nullptr) NullArgument("copy_data_from_to", "to");
    Self(self)->CopyDataFromTo(from, to, stream);
  });
}

inline bp_status_t DeviceAPI::CreateStreamEntry(void* self, DLDevice dev, bp_stream_t* out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("create_stream", "out_stream");
    *out = Self(self)->CreateStream(dev);
  });
}

inline bp_status_t DeviceAPI::FreeStreamEntry(void* self, DLDevice dev, bp_stream_t stream) {
  return CatchAtEdge([&] { Self(self)->FreeStream(dev, stream); });
}

inline bp_status_t DeviceAPI::SetStreamEntry(void* self, DLDevice dev, bp_stream_t stream) {
  return CatchAtEdge([&] { Self(self)->SetStream(dev, stream); });
}

inline bp_status_t DeviceAPI::StreamSyncEntry(void* self, DLDevice dev, bp_stream_t stream) {
  return CatchAtEdge([&] { Self(self)->StreamSync(dev, stream); });
}

inline bp_status_t DeviceAPI::SyncStreamFromToEntry(void* self, DLDevice dev, bp_stream_t src,
                                                    bp_stream_t dst) {
  return CatchAtEdge([&] { Self(self)->SyncStreamFromTo(dev, src, dst); });
}

inline void* DeviceAPI::CreateEvent(DLDevice dev) { NoEvents(dev); }
inline void DeviceAPI::FreeEvent(DLDevice dev, void*) { NoEvents(dev); }
inline void DeviceAPI::RecordEvent(DLDevice dev, void*, bp_stream_t) { NoEvents(dev); }
inline void DeviceAPI::StreamWaitEvent(DLDevice dev, bp_stream_t, void*) { NoEvents(dev); }
inline bool DeviceAPI::EventDone(DLDevice dev, void*) { NoEvents(dev); }
inline void DeviceAPI::SyncEvent(DLDevice dev, void*) { NoEvents(dev); }
inline double DeviceAPI::EventElapsedMs(DLDevice dev, void*, void*) { NoEvents(dev); }

inline const char* NativeKindName(bp_native_kind_t kind) {
  switch (kind) {
    case BP_NATIVE_BUFFER:
      return "BP_NATIVE_BUFFER";
    case BP_NATIVE_BUFFER_OFFSET:
      return "BP_NATIVE_BUFFER_OFFSET";
    case BP_NATIVE_MEMORY:
      return "BP_NATIVE_MEMORY";
    case BP_NATIVE_MEMORY_OFFSET:
      return "BP_NATIVE_MEMORY_OFFSET";
    case BP_NATIVE_QUEUE:
      return "BP_NATIVE_QUEUE";
    case BP_NATIVE_QUEUE_FAMILY:
      return "BP_NATIVE_QUEUE_FAMILY";
    case BP_NATIVE_CONTEXT:
      return "BP_NATIVE_CONTEXT";
    case BP_NATIVE_DEVICE:
      return "BP_NATIVE_DEVICE";
    case BP_NATIVE_PLATFORM:
      return "BP_NATIVE_PLATFORM";
  }
  return "an unknown kind";
}

inline void DeviceAPI::UnsupportedNative(DLDevice dev, bp_native_kind_t kind, const char* has) {
  throw Error(BP_ERR_UNSUPPORTED,
              DeviceString(dev) + " has no " + NativeKindName(kind) + " handle; it has " + has);
}
inline uint64_t DeviceAPI::NativeHandle(DLDevice dev, bp_native_kind_t kind, void*) {
  UnsupportedNative(dev, kind, "none");
}
inline void* DeviceAPI::WrapNative(DLDevice dev, const bp_native_buffer_t&) {
  throw Error(BP_ERR_UNSUPPORTED, DeviceString(dev) + ": this DeviceAPI wraps no native buffers");
}
inline void DeviceAPI::UnwrapNative(DLDevice dev, void*) {
  throw Error(BP_ERR_UNSUPPORTED, DeviceString(dev) + ": this DeviceAPI wraps no native buffers");
}
inline bp_status_t DeviceAPI::NativeHandleEntry(void* self, DLDevice dev, int32_t kind,
                                                void* object, uint64_t* out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("native_handle", "out");
    *out = Self(self)->NativeHandle(dev, static_cast<bp_native_kind_t>(kind), object);
  });
}
inline bp_status_t DeviceAPI::WrapNativeEntry(void* self, DLDevice dev,
                                              const bp_native_buffer_t* buffer, void** out) {
  return CatchAtEdge([&] {
    if (buffer == nullptr) NullArgument("wrap_native", "buffer");
    if (out == nullptr) NullArgument("wrap_native", "out_data");
    *out = Self(self)->WrapNative(dev, *buffer);
  });
}
inline bp_status_t DeviceAPI::UnwrapNativeEntry(void* self, DLDevice dev, void* data) {
  return CatchAtEdge([&] { Self(self)->UnwrapNative(dev, data); });
}

inline bp_status_t DeviceAPI::EventCreateEntry(void* self, DLDevice dev, void** out) {
  return CatchAtEdge([&] {
    if (out == nullptr) NullArgument("event_create", "out_event");
    *out = Self(self)->CreateEvent(dev);
  });
}
inline bp_status_t DeviceAPI::EventFreeEntry(void* self, DLDevice dev, void* event) {
  return CatchAtEdge([&] { Self(self)->FreeEvent(dev, event); });
}
inline bp_status_t DeviceAPI::EventRecordEntry(void* self, DLDevice dev, void* event,
                                               bp_stream_t stream) {
  return CatchAtEdge([&] { Self(self)->RecordEvent(dev, event, stream); });
}
inline bp_status_t DeviceAPI::StreamWaitEventEntry(void* self, DLDevice dev, bp_stream_t stream,
                                                   void* event) {
  return CatchAtEdge([&] { Self(self)->StreamWaitEvent(dev, stream, event); });
}
inline bp_status_t DeviceAPI::EventQueryEntry(void* self, DLDevice dev, void* event,
                                              int32_t* out_done) {
  return CatchAtEdge([&] {
    if (out_done == nullptr) NullArgument("event_query", "out_done");
    *out_done = Self(self)->EventDone(dev, event) ? 1 : 0;
  });
}
inline bp_status_t DeviceAPI::EventSyncEntry(void* self, DLDevice dev, void* event) {
  return CatchAtEdge([&] { Self(self)->SyncEvent(dev, event); });
}
inline bp_status_t DeviceAPI::EventElapsedEntry(void* self, DLDevice dev, void* start, void* end,
                                                double* out_ms) {
  return CatchAtEdge([&] {
    if (out_ms == nullptr) NullArgument("event_elapsed_ms", "out_ms");
    *out_ms = Self(self)->EventElapsedMs(dev, start, end);
  });
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_DEVICE_API_HPP_
