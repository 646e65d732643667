// SPDX-License-Identifier: Apache-2.0
// Writing a layer (docs/layer-guide.md): C++ over the C ABI's bp_layer_t (c_api.h, "Layers").
//
//   class CountingLayer : public backplane::sdk::Layer {
//     backplane::sdk::DeviceLayer* WrapDeviceAPI(int32_t type, const std::string& name,
//                                                const bp_device_api_t* next) override {
//       return new CountingTable(type, name, next);  // a DeviceLayer that overrides a few entries
//     }
//   };
//   BACKPLANE_PLUGIN_ENTRY(counting, "1.0") {
//     backplane::sdk::RegisterLayer("counting", [](const std::string& options) {
//       return new CountingLayer();  // throws backplane::Error for options it refuses
//     });
//   }
//
// A DeviceLayer is the table of one device type: every entry passes on to the table below
// (next()) unless the subclass overrides its method, and an entry the table below lacks is
// null in this one too, so the core applies the same defaults as without the layer. Each
// method returns a status as the C entry does; an exception it throws becomes the status and
// the error slot (as CatchAtEdge does). Tables and layers live until the process exits.
#ifndef BACKPLANE_SDK_LAYER_HPP_
#define BACKPLANE_SDK_LAYER_HPP_

#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <string>
#include <utility>

namespace backplane {
namespace sdk {

class DeviceLayer {
 public:
  DeviceLayer(int32_t device_type, std::string type_name, const bp_device_api_t* next)
      : device_type_(device_type), type_name_(std::move(type_name)), next_(next) {
    table_ = bp_device_api_t{};
    table_.struct_size = sizeof(bp_device_api_t);
    table_.self = this;
    Pick(&table_.get_attr, next->get_attr, &Thunk<&DeviceLayer::GetAttr>::Call);
    Pick(&table_.get_property, next->get_property, &Thunk<&DeviceLayer::GetProperty>::Call);
    Pick(&table_.set_device, next->set_device, &Thunk<&DeviceLayer::SetDevice>::Call);
    Pick(&table_.alloc_data_space, next->alloc_data_space,
         &Thunk<&DeviceLayer::AllocDataSpace>::Call);
    Pick(&table_.free_data_space, next->free_data_space, &Thunk<&DeviceLayer::FreeDataSpace>::Call);
    Pick(&table_.alloc_workspace, next->alloc_workspace,
         &Thunk<&DeviceLayer::AllocWorkspace>::Call);
    Pick(&table_.free_workspace, next->free_workspace, &Thunk<&DeviceLayer::FreeWorkspace>::Call);
    Pick(&table_.copy_data_from_to, next->copy_data_from_to,
         &Thunk<&DeviceLayer::CopyDataFromTo>::Call);
    Pick(&table_.create_stream, next->create_stream, &Thunk<&DeviceLayer::CreateStream>::Call);
    Pick(&table_.free_stream, next->free_stream, &Thunk<&DeviceLayer::FreeStream>::Call);
    Pick(&table_.set_stream, next->set_stream, &Thunk<&DeviceLayer::SetStream>::Call);
    Pick(&table_.stream_sync, next->stream_sync, &Thunk<&DeviceLayer::StreamSync>::Call);
    Pick(&table_.sync_stream_from_to, next->sync_stream_from_to,
         &Thunk<&DeviceLayer::SyncStreamFromTo>::Call);
    Pick(&table_.list_properties, next->list_properties,
         &Thunk<&DeviceLayer::ListProperties>::Call);
    Pick(&table_.event_create, next->event_create, &Thunk<&DeviceLayer::EventCreate>::Call);
    Pick(&table_.event_free, next->event_free, &Thunk<&DeviceLayer::EventFree>::Call);
    Pick(&table_.event_record, next->event_record, &Thunk<&DeviceLayer::EventRecord>::Call);
    Pick(&table_.stream_wait_event, next->stream_wait_event,
         &Thunk<&DeviceLayer::StreamWaitEvent>::Call);
    Pick(&table_.event_query, next->event_query, &Thunk<&DeviceLayer::EventQuery>::Call);
    Pick(&table_.event_sync, next->event_sync, &Thunk<&DeviceLayer::EventSync>::Call);
    Pick(&table_.event_elapsed_ms, next->event_elapsed_ms,
         &Thunk<&DeviceLayer::EventElapsedMs>::Call);
    Pick(&table_.native_handle, next->native_handle, &Thunk<&DeviceLayer::NativeHandle>::Call);
    Pick(&table_.wrap_native, next->wrap_native, &Thunk<&DeviceLayer::WrapNative>::Call);
    Pick(&table_.unwrap_native, next->unwrap_native, &Thunk<&DeviceLayer::UnwrapNative>::Call);
  }
  DeviceLayer(const DeviceLayer&) = delete;
  DeviceLayer& operator=(const DeviceLayer&) = delete;
  virtual ~DeviceLayer() = default;

  // The table to hand the core.
  const bp_device_api_t* Table() const { return &table_; }
  // The table below: the next layer's or the plugin's.
  const bp_device_api_t& next() const { return *next_; }
  int32_t device_type() const { return device_type_; }
  const std::string& type_name() const { return type_name_; }

  // One method per entry of bp_device_api_t; the defaults pass the call on.
  virtual bp_status_t GetAttr(DLDevice dev, int32_t kind, bp_value_t* out) {
    return next_->get_attr(next_->self, dev, kind, out);
  }
  virtual bp_status_t GetProperty(DLDevice dev, const char* key, bp_value_t* out) {
    return next_->get_property(next_->self, dev, key, out);
  }
  virtual bp_status_t SetDevice(DLDevice dev) { return next_->set_device(next_->self, dev); }
  virtual bp_status_t AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                     DLDataType type_hint, void** out_data) {
    return next_->alloc_data_space(next_->self, dev, nbytes, alignment, type_hint, out_data);
  }
  virtual bp_status_t FreeDataSpace(DLDevice dev, void* data) {
    return next_->free_data_space(next_->self, dev, data);
  }
  virtual bp_status_t AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint,
                                     void** out_data) {
    return next_->alloc_workspace(next_->self, dev, nbytes, type_hint, out_data);
  }
  virtual bp_status_t FreeWorkspace(DLDevice dev, void* data) {
    return next_->free_workspace(next_->self, dev, data);
  }
  virtual bp_status_t CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
    return next_->copy_data_from_to(next_->self, from, to, stream);
  }
  virtual bp_status_t CreateStream(DLDevice dev, bp_stream_t* out_stream) {
    return next_->create_stream(next_->self, dev, out_stream);
  }
  virtual bp_status_t FreeStream(DLDevice dev, bp_stream_t stream) {
    return next_->free_stream(next_->self, dev, stream);
  }
  virtual bp_status_t SetStream(DLDevice dev, bp_stream_t stream) {
    return next_->set_stream(next_->self, dev, stream);
  }
  virtual bp_status_t StreamSync(DLDevice dev, bp_stream_t stream) {
    return next_->stream_sync(next_->self, dev, stream);
  }
  virtual bp_status_t SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
    return next_->sync_stream_from_to(next_->self, dev, src, dst);
  }
  virtual bp_status_t ListProperties(DLDevice dev, bp_object_t** out_keys) {
    return next_->list_properties(next_->self, dev, out_keys);
  }
  virtual bp_status_t EventCreate(DLDevice dev, void** out_event) {
    return next_->event_create(next_->self, dev, out_event);
  }
  virtual bp_status_t EventFree(DLDevice dev, void* event) {
    return next_->event_free(next_->self, dev, event);
  }
  virtual bp_status_t EventRecord(DLDevice dev, void* event, bp_stream_t stream) {
    return next_->event_record(next_->self, dev, event, stream);
  }
  virtual bp_status_t StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) {
    return next_->stream_wait_event(next_->self, dev, stream, event);
  }
  virtual bp_status_t EventQuery(DLDevice dev, void* event, int32_t* out_done) {
    return next_->event_query(next_->self, dev, event, out_done);
  }
  virtual bp_status_t EventSync(DLDevice dev, void* event) {
    return next_->event_sync(next_->self, dev, event);
  }
  virtual bp_status_t EventElapsedMs(DLDevice dev, void* start, void* end, double* out_ms) {
    return next_->event_elapsed_ms(next_->self, dev, start, end, out_ms);
  }
  virtual bp_status_t NativeHandle(DLDevice dev, int32_t kind, void* object, uint64_t* out) {
    return next_->native_handle(next_->self, dev, kind, object, out);
  }
  virtual bp_status_t WrapNative(DLDevice dev, const bp_native_buffer_t* buffer, void** out_data) {
    return next_->wrap_native(next_->self, dev, buffer, out_data);
  }
  virtual bp_status_t UnwrapNative(DLDevice dev, void* data) {
    return next_->unwrap_native(next_->self, dev, data);
  }

 protected:
  // Sets the error slot and returns `kind`: `return Refuse(BP_ERR_INVALID_ARGUMENT, "...");`.
  static bp_status_t Refuse(bp_status_t kind, const std::string& message) {
    return ::backplane::detail::Api()->error_set(kind, message.c_str());
  }

 private:
  // The C entry for method M: calls it on the layer that `self` is, turning an exception into
  // a status.
  template <auto M>
  struct Thunk;
  template <typename... A, bp_status_t (DeviceLayer::*M)(A...)>
  struct Thunk<M> {
    static bp_status_t Call(void* self, A... args) noexcept {
      try {
        return (static_cast<DeviceLayer*>(self)->*M)(args...);
      } catch (...) {
        return CatchAtEdge([] { throw; });
      }
    }
  };
  // The entry is this layer's thunk where the table below has one, null where it has none.
  template <typename F, typename Thunk>
  static void Pick(F* entry, F below, Thunk thunk) {
    *entry = below != nullptr ? F{thunk} : nullptr;
  }

  const int32_t device_type_;
  const std::string type_name_;
  const bp_device_api_t* const next_;
  bp_device_api_t table_;
};

// A layer: what it wraps. Made once per process, by the factory given to RegisterLayer, and
// kept until the process exits.
class Layer {
 public:
  virtual ~Layer() = default;
  // The table for device type `device_type` (a new DeviceLayer over `next`, kept until exit),
  // or null to leave the type unwrapped. Must not use a device (the chain is being built).
  virtual DeviceLayer* WrapDeviceAPI(int32_t device_type, const std::string& type_name,
                                     const bp_device_api_t* next) = 0;
  // With LayerWraps::functions: the function to hand out instead of `next`, a function named
  // `name` of a module of kind `module_kind` (call it with next.CallPacked(args.data(),
  // args.size())); an empty Function hands out `next` itself.
  virtual Function WrapFunction(const std::string& module_kind, const std::string& name,
                                const Function& next) {
    (void)module_kind;
    (void)name;
    (void)next;
    return Function();
  }
  // With LayerWraps::builds: the code generator to call instead of `next`, the registered
  // target.build.<target_kind>; an empty Function calls `next` itself.
  virtual Function WrapBuild(const std::string& target_kind, const Function& next) {
    (void)target_kind;
    (void)next;
    return Function();
  }
  // With LayerWraps::modules: `module` (of `kind`) was made (`alive`) or is about to die. It
  // only names the module: do not retain, release or use it. Must not throw.
  virtual void OnModule(const bp_object_t* module, const std::string& kind, bool alive) {
    (void)module;
    (void)kind;
    (void)alive;
  }
};

// What a layer wraps, or is told of, besides the DeviceAPI tables.
struct LayerWraps {
  bool functions = false;
  bool builds = false;
  bool modules = false;  // OnModule is called
};

namespace detail_layer {

inline bp_status_t WrapDeviceApi(void* self, int32_t type, const char* type_name,
                                 const bp_device_api_t* next,
                                 const bp_device_api_t** out) noexcept {
  return CatchAtEdge([&] {
    DeviceLayer* l = static_cast<Layer*>(self)->WrapDeviceAPI(type, type_name, next);
    *out = l != nullptr ? l->Table() : nullptr;
  });
}

inline bp_status_t WrapFunction(void* self, const char* module_kind, const char* name,
                                bp_object_t* next, bp_object_t** out) noexcept {
  return CatchAtEdge([&] {
    Function f = static_cast<Layer*>(self)->WrapFunction(module_kind, name,
                                                         Function(ObjectRef::Borrow(next)));
    *out = f ? ObjectRef(f.object()).release() : nullptr;
  });
}

inline bp_status_t WrapBuild(void* self, const char* target_kind, bp_object_t* next,
                             bp_object_t** out) noexcept {
  return CatchAtEdge([&] {
    Function f =
        static_cast<Layer*>(self)->WrapBuild(target_kind, Function(ObjectRef::Borrow(next)));
    *out = f ? ObjectRef(f.object()).release() : nullptr;
  });
}

inline void OnModule(void* self, const bp_object_t* module, const char* kind,
                     int32_t alive) noexcept {
  try {
    static_cast<Layer*>(self)->OnModule(module, kind, alive != 0);
  } catch (...) {  // a notification has no one to report to: the layer's own state is its care
  }
}

}  // namespace detail_layer

// Registers "layer.<name>": the core calls it once, with the layer's options ("" when none),
// and `make(options)` returns the Layer (a new one, kept until exit), throwing a
// backplane::Error that names an option it refuses. The plugin's manifest declares
// "layer.<name>" (backplane_add_plugin PROVIDES).
template <typename Make>
void RegisterLayer(const std::string& name, Make make, LayerWraps wraps = {}) {
  RegisterFunction("layer." + name, [make, wraps](PackedArgs args) -> Any {
    Layer* layer = make(args.size() > 0 ? args.String(0) : std::string());
    auto* c = new bp_layer_t{};  // lives as long as the process, as the layer
    c->struct_size = sizeof(bp_layer_t);
    c->self = layer;
    c->wrap_device_api = &detail_layer::WrapDeviceApi;
    c->wrap_function = wraps.functions ? &detail_layer::WrapFunction : nullptr;
    c->wrap_build = wraps.builds ? &detail_layer::WrapBuild : nullptr;
    c->on_module = wraps.modules ? &detail_layer::OnModule : nullptr;
    return PtrValue(c);
  });
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_LAYER_HPP_
