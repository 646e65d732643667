// SPDX-License-Identifier: Apache-2.0
// The C++ host API: a header-only layer over c_api.h. It adds no ABI: every call goes
// through the host function table (bp_host_api_t), so the same header serves host
// applications (which link libbackplane) and plugins (which get the table at init and
// define BACKPLANE_PLUGIN before including this header; the SDK does that). The one
// exception is the packed call in a host, which calls the exported bp_function_call that the
// table holds (detail::FunctionCall).
//
// Errors become backplane::Error exceptions here; the edge wrappers (Function::FromCallable,
// the SDK's entry points) turn exceptions back into statuses before anything crosses the C
// boundary.
//
// One header on purpose (over 1,000 lines): a host or plugin includes one name for the whole
// API, and each class here is a thin wrapper over a handful of C calls, read next to them.
#ifndef BACKPLANE_BACKPLANE_HPP_
#define BACKPLANE_BACKPLANE_HPP_

#include <backplane/c_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {

namespace detail {
#ifdef BACKPLANE_PLUGIN
// Set by the SDK's entry point before the plugin does anything else.
inline const bp_host_api_t* g_host_api = nullptr;
inline const bp_host_api_t* Api() { return g_host_api; }
// A packed call, the hottest entry: through the table the plugin was given.
inline bp_status_t FunctionCall(const bp_object_t* func, const bp_value_t* args, int32_t num_args,
                                bp_value_t* out_result) {
  return g_host_api->function_call(func, args, num_args, out_result);
}
#else
inline const bp_host_api_t* Api() {
  static const bp_host_api_t* api = bp_host_api();
  return api;
}
// A packed call, the hottest entry: a host links libbackplane, so it calls the exported
// function, whose address the dynamic loader has cached, instead of loading the table behind
// Api()'s init guard on every call. The table holds the same function (host_api.cc).
inline bp_status_t FunctionCall(const bp_object_t* func, const bp_value_t* args, int32_t num_args,
                                bp_value_t* out_result) {
  return bp_function_call(func, args, num_args, out_result);
}
#endif
}  // namespace detail

// An error that crossed (or will cross) the C boundary: a bp_error_kind_t and a message.
class Error : public std::runtime_error {
 public:
  Error(bp_status_t kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  bp_status_t kind() const { return kind_; }

 private:
  bp_status_t kind_;
};

namespace detail {
// Check's failure path, out of line and cold: a Check inlined at every call costs one compare.
[[noreturn]] [[gnu::noinline, gnu::cold]] inline void ThrowLastError(bp_status_t status) {
  const char* message = nullptr;
  bp_status_t kind = status;
  Api()->error_last(&kind, &message);
  throw Error(status, message != nullptr ? message : "unknown error");
}
}  // namespace detail

// Throws the calling thread's last error if `status` is not BP_OK.
inline void Check(bp_status_t status) {
  if (status != BP_OK) detail::ThrowLastError(status);
}

namespace detail {
// Whether the host table has the entry that ends at byte `end` (offsetof + sizeof): a host
// library older than the minor that added it has a shorter table.
#define BACKPLANE_HOST_ENTRY_END(field) (offsetof(bp_host_api_t, field) + sizeof(void*))
inline bool HostHas(size_t end) { return Api()->struct_size >= end; }
// The host table, checked to have the entry ending at `end`; otherwise BP_ERR_UNSUPPORTED:
// "<what> needs libbackplane with ABI <since> or newer; this one is X.Y: upgrade
// Backplane<advice>".
inline const bp_host_api_t* HostSince(size_t end, const std::string& what, const char* since,
                                      const char* advice = "") {
  const bp_host_api_t* api = Api();
  if (api->struct_size < end) {
    throw Error(BP_ERR_UNSUPPORTED, what + " needs libbackplane with ABI " + since +
                                        " or newer; this one is " + std::to_string(api->abi_major) +
                                        "." + std::to_string(api->abi_minor) +
                                        ": upgrade Backplane" + advice);
  }
  return api;
}
}  // namespace detail

// Runs `body` and converts any exception into a status and the error slot. Used at every
// place where C++ code is called from C.
template <typename Body>
bp_status_t CatchAtEdge(Body&& body) noexcept {
  try {
    body();
    return BP_OK;
  } catch (const Error& e) {
    return detail::Api()->error_set(e.kind(), e.what());
  } catch (const std::bad_alloc&) {
    return detail::Api()->error_set(BP_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return detail::Api()->error_set(BP_ERR_INTERNAL, e.what());
  } catch (...) {
    return detail::Api()->error_set(BP_ERR_INTERNAL, "unknown C++ exception");
  }
}

// An owning reference to a bp_object_t.
class ObjectRef {
 public:
  ObjectRef() = default;
  // Adopts an owned reference.
  static ObjectRef Adopt(bp_object_t* obj) {
    ObjectRef r;
    r.obj_ = obj;
    return r;
  }
  // Takes a new reference to a borrowed object.
  static ObjectRef Borrow(bp_object_t* obj) {
    detail::Api()->object_retain(obj);
    return Adopt(obj);
  }
  ObjectRef(const ObjectRef& other) : obj_(other.obj_) { detail::Api()->object_retain(obj_); }
  ObjectRef(ObjectRef&& other) noexcept : obj_(std::exchange(other.obj_, nullptr)) {}
  ObjectRef& operator=(ObjectRef other) noexcept {
    std::swap(obj_, other.obj_);
    return *this;
  }
  ~ObjectRef() {
    if (obj_ != nullptr) detail::Api()->object_release(obj_);
  }
  bp_object_t* get() const { return obj_; }
  // Gives up ownership without releasing.
  bp_object_t* release() { return std::exchange(obj_, nullptr); }
  explicit operator bool() const { return obj_ != nullptr; }
  int32_t type() const {
    int32_t t = 0;
    Check(detail::Api()->object_type(obj_, &t));
    return t;
  }

 private:
  bp_object_t* obj_ = nullptr;
};

// Creates a string object.
inline ObjectRef MakeString(std::string_view text) {
  bp_object_t* out = nullptr;
  Check(detail::Api()->string_create(text.data(), text.size(), &out));
  return ObjectRef::Adopt(out);
}

// Reads a string object.
inline std::string GetString(const bp_object_t* str) {
  const char* data = nullptr;
  size_t size = 0;
  Check(detail::Api()->string_get(str, &data, &size));
  return std::string(data, size);
}

// Reads an array of string objects.
inline std::vector<std::string> GetStringArray(const bp_object_t* array) {
  size_t n = 0;
  Check(detail::Api()->array_size(array, &n));
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    bp_value_t v;
    Check(detail::Api()->array_get(array, i, &v));
    if (v.type != BP_VALUE_OBJECT) throw Error(BP_ERR_TYPE, "array element is not a string");
    out.push_back(GetString(v.u.v_obj));
  }
  return out;
}

namespace detail {
inline std::string ValueTypeName(const bp_value_t& v) {
  static const char* const kNames[] = {"none",  "int",    "float", "pointer", "device",
                                       "dtype", "tensor", "str",   "object"};
  if (v.type >= 0 && v.type <= BP_VALUE_OBJECT) return kNames[v.type];
  return "unknown(" + std::to_string(v.type) + ")";
}
inline int32_t ObjectTypeOf(const bp_value_t& v) {
  int32_t t = 0;
  if (v.type == BP_VALUE_OBJECT) Api()->object_type(v.u.v_obj, &t);
  return t;
}
[[noreturn]] inline void ThrowType(const char* expected, const bp_value_t& v) {
  throw Error(BP_ERR_TYPE, std::string("expected ") + expected + " value, got " + ValueTypeName(v));
}
inline int64_t ValueAsInt(const bp_value_t& v) {
  if (v.type != BP_VALUE_INT) ThrowType("an int", v);
  return v.u.v_int64;
}
inline double ValueAsFloat(const bp_value_t& v) {
  if (v.type == BP_VALUE_INT) return static_cast<double>(v.u.v_int64);
  if (v.type != BP_VALUE_FLOAT) ThrowType("a float", v);
  return v.u.v_float64;
}
inline void* ValueAsPtr(const bp_value_t& v) {
  if (v.type != BP_VALUE_PTR) ThrowType("a pointer", v);
  return v.u.v_ptr;
}
inline std::string ValueAsString(const bp_value_t& v) {
  if (v.type == BP_VALUE_STR) return v.u.v_str;
  if (ObjectTypeOf(v) != BP_OBJECT_STRING) ThrowType("a string", v);
  return GetString(v.u.v_obj);
}
}  // namespace detail

// An owned value: a result or an attribute. Releases an object it holds.
class Any {
 public:
  Any() {
    value_.type = BP_VALUE_NONE;
    value_.u.v_int64 = 0;
  }
  // Adopts a value whose object reference (if any) is owned.
  explicit Any(const bp_value_t& owned) : value_(owned) {}
  Any(const Any& other) : value_(other.value_) {
    if (value_.type == BP_VALUE_OBJECT) detail::Api()->object_retain(value_.u.v_obj);
  }
  Any(Any&& other) noexcept : value_(other.value_) { other.value_.type = BP_VALUE_NONE; }
  Any& operator=(Any other) noexcept {
    std::swap(value_, other.value_);
    return *this;
  }
  ~Any() {
    if (value_.type == BP_VALUE_OBJECT) detail::Api()->object_release(value_.u.v_obj);
  }
  int32_t type() const { return value_.type; }
  bool is_none() const { return value_.type == BP_VALUE_NONE; }
  const bp_value_t& raw() const { return value_; }
  // Storage a callee writes an owned result into; only for an Any that holds none.
  bp_value_t* result_slot() { return &value_; }
  // Gives the value away with its reference.
  bp_value_t release() {
    bp_value_t v = value_;
    value_.type = BP_VALUE_NONE;
    return v;
  }

  int64_t AsInt() const { return detail::ValueAsInt(value_); }
  double AsFloat() const { return detail::ValueAsFloat(value_); }
  void* AsPtr() const { return detail::ValueAsPtr(value_); }
  std::string AsString() const { return detail::ValueAsString(value_); }
  ObjectRef AsObject() const {
    if (value_.type != BP_VALUE_OBJECT) detail::ThrowType("an object", value_);
    return ObjectRef::Borrow(value_.u.v_obj);
  }
  // A readable rendering: "—" for none, numbers and strings as they are.
  std::string ToString() const {
    switch (value_.type) {
      case BP_VALUE_NONE:
        return "\xE2\x80\x94";
      case BP_VALUE_INT:
        return std::to_string(value_.u.v_int64);
      case BP_VALUE_FLOAT:
        return std::to_string(value_.u.v_float64);
      case BP_VALUE_STR:
        return value_.u.v_str;
      case BP_VALUE_OBJECT:
        return detail::ObjectTypeOf(value_) == BP_OBJECT_STRING ? GetString(value_.u.v_obj)
                                                                : "<object>";
      default:
        return "<" + TypeName() + ">";
    }
  }
  std::string TypeName() const { return detail::ValueTypeName(value_); }

 private:
  bp_value_t value_;
};

namespace detail {
// Borrowed argument conversion; the argument must outlive the call.
inline bp_value_t ArgValue(bp_value_type_t type) {
  bp_value_t v;
  v.type = type;
  v.reserved0 = 0;
  v.u.v_int64 = 0;
  return v;
}
template <typename T>
bp_value_t ToArg(const T& x) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_enum_v<T>) {
    bp_value_t v = ArgValue(BP_VALUE_INT);
    v.u.v_int64 = static_cast<int64_t>(x);
    return v;
  } else if constexpr (std::is_floating_point_v<T>) {
    bp_value_t v = ArgValue(BP_VALUE_FLOAT);
    v.u.v_float64 = static_cast<double>(x);
    return v;
  } else if constexpr (std::is_same_v<T, DLDevice>) {
    bp_value_t v = ArgValue(BP_VALUE_DEVICE);
    v.u.v_device = x;
    return v;
  } else if constexpr (std::is_same_v<T, DLDataType>) {
    bp_value_t v = ArgValue(BP_VALUE_DTYPE);
    v.u.v_dtype = x;
    return v;
  } else if constexpr (std::is_same_v<T, DLTensor*>) {
    bp_value_t v = ArgValue(BP_VALUE_TENSOR);
    v.u.v_tensor = x;
    return v;
  } else if constexpr (std::is_same_v<T, std::string>) {
    bp_value_t v = ArgValue(BP_VALUE_STR);
    v.u.v_str = x.c_str();
    return v;
  } else if constexpr (std::is_convertible_v<T, const char*>) {
    bp_value_t v = ArgValue(BP_VALUE_STR);
    v.u.v_str = x;
    return v;
  } else if constexpr (std::is_same_v<T, ObjectRef>) {
    bp_value_t v = ArgValue(BP_VALUE_OBJECT);
    v.u.v_obj = x.get();
    return v;
  } else if constexpr (std::is_same_v<T, Any>) {
    return x.raw();
  } else if constexpr (std::is_pointer_v<T>) {
    bp_value_t v = ArgValue(BP_VALUE_PTR);
    v.u.v_ptr = const_cast<void*>(static_cast<const void*>(x));
    return v;
  } else {
    static_assert(sizeof(T) == 0, "no conversion of this type to a Backplane value");
  }
}
}  // namespace detail

// The arguments of a packed call, as seen by a function's body.
class PackedArgs {
 public:
  PackedArgs(const bp_value_t* args, int32_t n) : args_(args), n_(n) {}
  int32_t size() const { return n_; }
  const bp_value_t& operator[](int32_t i) const {
    if (i < 0 || i >= n_) {
      throw Error(BP_ERR_INVALID_ARGUMENT, "argument " + std::to_string(i) +
                                               " requested but only " + std::to_string(n_) +
                                               " were passed");
    }
    return args_[i];
  }
  int64_t Int(int32_t i) const { return detail::ValueAsInt((*this)[i]); }
  double Float(int32_t i) const { return detail::ValueAsFloat((*this)[i]); }
  std::string String(int32_t i) const { return detail::ValueAsString((*this)[i]); }
  void* Ptr(int32_t i) const { return detail::ValueAsPtr((*this)[i]); }
  // The raw values, to pass on whole (Function::CallPacked(args.data(), args.size())).
  const bp_value_t* data() const { return args_; }

 private:
  const bp_value_t* args_;
  int32_t n_;
};

// A packed function object.
class Function {
 public:
  Function() = default;
  explicit Function(ObjectRef obj) : obj_(std::move(obj)) {}

  // Wraps a C++ callable `Any(PackedArgs)` as a function object; exceptions it throws
  // become statuses at the C edge. `flags`: more bp_function_create_with_flags bits, such as a
  // code generator's BP_FUNCTION_READS_IR (dropped on a host older than 1.8, which reads none).
  template <typename Callable>
  static Function FromCallable(Callable callable, uint32_t flags = 0) {
    using Holder = std::function<Any(PackedArgs)>;
    auto* holder = new Holder(std::move(callable));
    bp_object_t* out = nullptr;
    bp_status_t st = CreateContained(
        [](void* resource, const bp_value_t* args, int32_t n, bp_value_t* out_result) {
          return CatchAtEdge([&] {
            Any result = (*static_cast<Holder*>(resource))(PackedArgs(args, n));
            *out_result = result.release();
          });
        },
        holder, [](void* resource) { delete static_cast<Holder*>(resource); }, &out, flags);
    if (st != BP_OK) {
      delete holder;
      Check(st);
    }
    return Function(ObjectRef::Adopt(out));
  }

  // bp_function_create for a body that contains its exceptions and sets a message on every
  // failure (one wrapped in CatchAtEdge): BP_FUNCTION_CONTAINED where the host knows it (1.7),
  // so a call needs no guard of the core's; a plain function on an older host.
  static bp_status_t CreateContained(bp_packed_fn_t body, void* resource,
                                     void (*deleter)(void* resource), bp_object_t** out,
                                     uint32_t flags = 0) {
    const bp_host_api_t* api = detail::Api();
    if (detail::HostHas(BACKPLANE_HOST_ENTRY_END(function_create_with_flags))) {
      if (api->abi_minor < 8) flags &= ~BP_FUNCTION_READS_IR_MASK;
      return api->function_create_with_flags(body, resource, deleter, BP_FUNCTION_CONTAINED | flags,
                                             out);
    }
    return api->function_create(body, resource, deleter, out);
  }

  // Looks a function up in the global registry; throws if absent.
  static Function Get(const std::string& name) {
    bp_object_t* out = nullptr;
    Check(detail::Api()->registry_get(name.c_str(), &out));
    return Function(ObjectRef::Adopt(out));
  }

  // Calls with the raw value array.
  Any CallPacked(const bp_value_t* args, int32_t n) const {
    Any result;  // written in place: the callee's stores are read back from where they land
    Check(detail::FunctionCall(obj_.get(), args, n, result.result_slot()));
    return result;
  }

  // Calls with typed arguments.
  template <typename... Args>
  Any operator()(const Args&... args) const {
    if constexpr (sizeof...(Args) == 0) {
      return CallPacked(nullptr, 0);
    } else {
      const bp_value_t values[] = {detail::ToArg(args)...};
      return CallPacked(values, static_cast<int32_t>(sizeof...(Args)));
    }
  }

  const ObjectRef& object() const { return obj_; }
  explicit operator bool() const { return static_cast<bool>(obj_); }

 private:
  ObjectRef obj_;
};

// The global function registry.
struct Registry {
  static void Set(const std::string& name, const Function& f, bool allow_override = false) {
    Check(detail::Api()->registry_set(name.c_str(), f.object().get(), allow_override ? 1 : 0));
  }
  static Function Get(const std::string& name) { return Function::Get(name); }
  // Returns an empty Function if `name` is not registered.
  static Function TryGet(const std::string& name) {
    bp_object_t* out = nullptr;
    if (detail::Api()->registry_get(name.c_str(), &out) != BP_OK) {
      detail::Api()->error_clear();
      return Function();
    }
    return Function(ObjectRef::Adopt(out));
  }
  static void Remove(const std::string& name) {
    Check(detail::Api()->registry_remove(name.c_str()));
  }
  static std::vector<std::string> List() {
    bp_object_t* out = nullptr;
    Check(detail::Api()->registry_list(&out));
    ObjectRef names = ObjectRef::Adopt(out);
    return GetStringArray(names.get());
  }
};

// Device type names and ids.
inline int32_t DeviceTypeFromName(const std::string& name) {
  int32_t id = 0;
  Check(detail::Api()->device_type_from_name(name.c_str(), &id));
  return id;
}
inline std::string DeviceTypeName(int32_t type) {
  const char* name = nullptr;
  Check(detail::Api()->device_type_name(type, &name));
  return name;
}

// A DLDevice with names. Device("cpu", 0) or Device::Parse("cpu:0").
struct Device {
  DLDevice dl{kDLCPU, 0};

  Device() = default;
  explicit Device(DLDevice d) : dl(d) {}
  Device(const std::string& type_name, int32_t id)
      : dl{static_cast<DLDeviceType>(DeviceTypeFromName(type_name)), id} {}
  // "cpu", "cpu:1", "opencl:0".
  static Device Parse(const std::string& text) {
    auto colon = text.find(':');
    std::string name = text.substr(0, colon);
    int32_t id = 0;
    if (colon != std::string::npos) {
      const std::string digits = text.substr(colon + 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
        throw Error(
            BP_ERR_INVALID_ARGUMENT,
            "device '" + text + "': expected NAME or NAME:ID with a decimal ID, e.g. cpu:0");
      }
      const size_t first = std::min(digits.find_first_not_of('0'), digits.size());
      if (digits.size() - first > 10 || std::stoll(digits) > INT32_MAX) {
        throw Error(
            BP_ERR_INVALID_ARGUMENT,
            "device '" + text + "': the ID is larger than 2147483647, the largest there is");
      }
      id = static_cast<int32_t>(std::stoll(digits));
    }
    return Device(name, id);
  }
  std::string TypeName() const { return DeviceTypeName(dl.device_type); }
  std::string ToString() const { return TypeName() + ":" + std::to_string(dl.device_id); }
  bool operator==(const Device& o) const {
    return dl.device_type == o.dl.device_type && dl.device_id == o.dl.device_id;
  }
};

inline DLDataType MakeDType(uint8_t code, uint8_t bits, uint16_t lanes = 1) {
  DLDataType t;
  t.code = code;
  t.bits = bits;
  t.lanes = lanes;
  return t;
}
inline DLDataType Float32() { return MakeDType(kDLFloat, 32); }
inline DLDataType UInt8() { return MakeDType(kDLUInt, 8); }

// Stream RAII handle: created on a device, freed on destruction. A device with a single
// queue gives the null stream, which is valid everywhere.
class Stream {
 public:
  Stream() = default;
  explicit Stream(Device dev) : dev_(dev) {
    Check(detail::Api()->device_stream_create(dev.dl, &handle_));
    owned_ = true;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept
      : dev_(o.dev_),
        handle_(std::exchange(o.handle_, nullptr)),
        owned_(std::exchange(o.owned_, false)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      Reset();
      dev_ = o.dev_;
      handle_ = std::exchange(o.handle_, nullptr);
      owned_ = std::exchange(o.owned_, false);
    }
    return *this;
  }
  ~Stream() { Reset(); }
  bp_stream_t handle() const { return handle_; }
  Device device() const { return dev_; }
  void Sync() const { Check(detail::Api()->device_stream_sync(dev_.dl, handle_)); }
  void SetActive() const { Check(detail::Api()->device_stream_set(dev_.dl, handle_)); }
  // `this` waits for the work queued on `src` now.
  void WaitFor(const Stream& src) const {
    Check(detail::Api()->device_sync_stream_from_to(dev_.dl, src.handle_, handle_));
  }

 private:
  void Reset() noexcept {
    if (owned_ && handle_ != nullptr) detail::Api()->device_stream_free(dev_.dl, handle_);
    handle_ = nullptr;
    owned_ = false;
  }
  Device dev_;
  bp_stream_t handle_ = nullptr;
  bool owned_ = false;
};

// An event: a point in a stream's work (bp_event_*), to order streams and to time work.
// Throws BP_ERR_UNSUPPORTED on a host older than ABI 1.6.
class Event {
 public:
  Event() = default;
  explicit Event(Device dev) {
    bp_object_t* out = nullptr;
    Check(Api()->event_create(dev.dl, &out));
    obj_ = ObjectRef::Adopt(out);
  }
  // Marks the point after the work queued on `stream` (null: the null stream) so far.
  void Record(bp_stream_t stream = nullptr) const {
    Check(Api()->event_record(obj_.get(), stream));
  }
  void Record(const Stream& stream) const { Record(stream.handle()); }
  // Work queued on `stream` from now on waits for the recorded point; the host does not.
  void MakeWait(const Stream& stream) const {
    Check(Api()->event_wait(obj_.get(), stream.handle()));
  }
  // Whether the recorded point is passed (true for an event never recorded).
  bool Done() const {
    int32_t done = 0;
    Check(Api()->event_query(obj_.get(), &done));
    return done != 0;
  }
  void Sync() const { Check(Api()->event_sync(obj_.get())); }
  // Milliseconds from `start`'s point to this event's, both passed.
  double ElapsedMsSince(const Event& start) const {
    double ms = 0;
    Check(Api()->event_elapsed_ms(start.obj_.get(), obj_.get(), &ms));
    return ms;
  }
  const ObjectRef& object() const { return obj_; }

 private:
  static const bp_host_api_t* Api() {
    return detail::HostSince(BACKPLANE_HOST_ENTRY_END(event_elapsed_ms), "events", "1.6",
                             ", or synchronize streams instead");
  }
  ObjectRef obj_;
};

// The backend's handle of `kind` (bp_native_kind_t) on `dev`: for a stream (`object`, null:
// the default) BP_NATIVE_QUEUE's cl_command_queue, VkQueue or CUstream; its cl_context,
// VkDevice or CUcontext (BP_NATIVE_CONTEXT), device and platform. Borrowed: never free it.
// Tensor::NativeHandle gives a tensor's buffer.
inline uint64_t NativeHandle(Device dev, bp_native_kind_t kind, const void* object = nullptr) {
  uint64_t out = 0;
  Check(detail::HostSince(BACKPLANE_HOST_ENTRY_END(native_handle), "native handles", "1.6")
            ->native_handle(dev.dl, kind, object, &out));
  return out;
}

// The DeviceAPI of a device type, called through the core (defaults and checks applied).
class DeviceAPI {
 public:
  // Finds the DeviceAPI for `dev`'s type, loading its plugin on first use. Throws with the
  // device type and the plugins that were looked at when none provides it.
  static DeviceAPI Get(Device dev) {
    const bp_device_api_t* table = nullptr;
    Check(detail::Api()->device_api_get(dev.dl.device_type, &table));
    return DeviceAPI(dev, table);
  }
  const bp_device_api_t* table() const { return table_; }
  Device device() const { return dev_; }

  // The attribute, or a none Any where it cannot be queried or does not apply.
  Any GetAttr(bp_device_attr_kind_t kind) const {
    bp_value_t out;
    Check(detail::Api()->device_get_attr(dev_.dl, kind, &out));
    return Any(out);
  }
  // A string-keyed property beyond the enum, or none.
  Any GetProperty(const std::string& key) const {
    bp_value_t out;
    Check(detail::Api()->device_get_property(dev_.dl, key.c_str(), &out));
    return Any(out);
  }
  // The keys GetProperty answers for this device (bp_device_list_properties). Empty for a
  // plugin built before ABI 1.5 and on a host older than 1.5.
  std::vector<std::string> ListProperties() const {
    if (!detail::HostHas(BACKPLANE_HOST_ENTRY_END(device_list_properties))) return {};
    bp_object_t* out = nullptr;
    Check(detail::Api()->device_list_properties(dev_.dl, &out));
    return GetStringArray(ObjectRef::Adopt(out).get());
  }
  bool Exists() const {
    Any v = GetAttr(BP_ATTR_EXIST);
    return !v.is_none() && v.AsInt() != 0;
  }
  void SetDevice() const { Check(detail::Api()->device_set(dev_.dl)); }
  void* AllocDataSpace(size_t nbytes, size_t alignment, DLDataType hint) const {
    void* p = nullptr;
    Check(detail::Api()->device_alloc_data_space(dev_.dl, nbytes, alignment, hint, &p));
    return p;
  }
  void FreeDataSpace(void* p) const { Check(detail::Api()->device_free_data_space(dev_.dl, p)); }
  void* AllocWorkspace(size_t nbytes, DLDataType hint = UInt8()) const {
    void* p = nullptr;
    Check(detail::Api()->device_alloc_workspace(dev_.dl, nbytes, hint, &p));
    return p;
  }
  void FreeWorkspace(void* p) const { Check(detail::Api()->device_free_workspace(dev_.dl, p)); }
  void StreamSync(bp_stream_t s = nullptr) const {
    Check(detail::Api()->device_stream_sync(dev_.dl, s));
  }

 private:
  DeviceAPI(Device dev, const bp_device_api_t* table) : dev_(dev), table_(table) {}
  Device dev_;
  const bp_device_api_t* table_;
};

// One device as ListDevices finds it.
struct DeviceEntry {
  Device device;          // type id and index
  std::string type_name;  // "opencl"
  int32_t index = 0;      // the device id within its type
  std::string name;       // BP_ATTR_DEVICE_NAME, or "" where the backend has none
};

// Every device here, by type id then index (bp_device_list): loads the plugins that provide
// DeviceAPIs. Throws BP_ERR_UNSUPPORTED on a host older than ABI 1.5.
inline std::vector<DeviceEntry> ListDevices() {
  const bp_host_api_t* api =
      detail::HostSince(BACKPLANE_HOST_ENTRY_END(device_list), "listing devices", "1.5",
                        ", or probe BP_ATTR_EXIST per device type");
  size_t count = 0;
  Check(api->device_list(nullptr, 0, &count));
  std::vector<DLDevice> devices(count);
  // Plugins found between the two calls could add devices; the second count is the truth.
  Check(api->device_list(devices.data(), devices.size(), &count));
  devices.resize(std::min(count, devices.size()));
  std::vector<DeviceEntry> out;
  for (const DLDevice& dl : devices) {
    DeviceEntry e;
    e.device = Device(dl);
    e.type_name = DeviceTypeName(dl.device_type);
    e.index = dl.device_id;
    bp_value_t v;
    Check(api->device_get_attr(dl, BP_ATTR_DEVICE_NAME, &v));
    Any name(v);
    if (!name.is_none()) e.name = name.AsString();
    out.push_back(std::move(e));
  }
  return out;
}

// Enables layers for this process (bp_layers_enable; docs/layer-guide.md): "validation",
// "trace:file=run.json", "faults:seed=7:rate=0.01", or several separated by commas, outermost
// first. Call it before the first use of a device. Throws BP_ERR_UNSUPPORTED on a host older
// than ABI 1.9.
inline void EnableLayers(const std::string& spec) {
  Check(detail::HostSince(BACKPLANE_HOST_ENTRY_END(layers_enable), "layers", "1.9")
            ->layers_enable(spec.c_str()));
}

// The enabled layers, outermost first, each "name" or "name:options" (bp_layers_active):
// builds the chain, so a layer that cannot load throws here. Empty on a host older than 1.9.
inline std::vector<std::string> ActiveLayers() {
  const bp_host_api_t* api = detail::Api();
  if (!detail::HostHas(BACKPLANE_HOST_ENTRY_END(layers_active))) return {};
  bp_object_t* names = nullptr;
  Check(api->layers_active(&names));
  ObjectRef owned = ObjectRef::Adopt(names);
  return GetStringArray(owned.get());
}

// Copies between any two tensors (see bp_device_copy_data_from_to).
inline void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream = nullptr) {
  Check(detail::Api()->device_copy_data_from_to(from, to, stream));
}

// A refcounted tensor that owns its data space, freed through its DeviceAPI when the last
// reference goes.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(ObjectRef obj) : obj_(std::move(obj)) {
    Check(detail::Api()->tensor_get(obj_.get(), &dl_));
  }
  // Allocates a compact tensor on `dev`.
  static Tensor Empty(const std::vector<int64_t>& shape, DLDataType dtype, Device dev) {
    bp_object_t* out = nullptr;
    Check(detail::Api()->tensor_empty(static_cast<int32_t>(shape.size()), shape.data(), dtype,
                                      dev.dl, &out));
    return Tensor(ObjectRef::Adopt(out));
  }
  // Takes over a DLPack 1.x producer's tensor without copying (bp_tensor_from_dlpack_versioned):
  // its deleter runs when the last Tensor referring to it goes. If this throws, the caller
  // still owns `managed`.
  static Tensor FromDLPack(DLManagedTensorVersioned* managed) {
    bp_object_t* out = nullptr;
    Check(Api16("importing a DLPack tensor")->tensor_from_dlpack_versioned(managed, &out));
    return Tensor(ObjectRef::Adopt(out));
  }
  // The same for a DLPack 0.x producer's DLManagedTensor.
  static Tensor FromDLPack(DLManagedTensor* managed) {
    bp_object_t* out = nullptr;
    Check(Api16("importing a DLPack tensor")->tensor_from_dlpack(managed, &out));
    return Tensor(ObjectRef::Adopt(out));
  }
  // A tensor of `dev` over an application's native buffer (cl_mem, VkBuffer with its memory,
  // CUdeviceptr), without a copy (bp_tensor_from_native). The buffer must live until `release`
  // runs: once, when the last reference to the tensor goes. If this throws, release is not
  // called and the buffer is the caller's alone.
  static Tensor FromNative(Device dev, const bp_native_buffer_t& buffer,
                           const std::vector<int64_t>& shape, DLDataType dtype,
                           std::function<void()> release = {}) {
    const bp_host_api_t* api = Api16("wrapping a native buffer");
    auto* ctx = release ? new std::function<void()>(std::move(release)) : nullptr;
    bp_object_t* out = nullptr;
    const bp_status_t st =
        api->tensor_from_native(dev.dl, &buffer, static_cast<int32_t>(shape.size()), shape.data(),
                                dtype, ctx != nullptr ? &RunRelease : nullptr, ctx, &out);
    if (st != BP_OK) {
      delete ctx;
      Check(st);
    }
    return Tensor(ObjectRef::Adopt(out));
  }
  // The backend's handle of `kind` for this tensor's data handle (bp_native_handle): its
  // cl_mem, VkBuffer or CUdeviceptr (BP_NATIVE_BUFFER), where its data starts in it
  // (BP_NATIVE_BUFFER_OFFSET; add byte_offset for the first element), its VkDeviceMemory.
  uint64_t NativeHandle(bp_native_kind_t kind) const {
    uint64_t out = 0;
    Check(Api16("native handles")->native_handle(dl_->device, kind, dl_->data, &out));
    return out;
  }
  // This tensor for a DLPack 1.x consumer, which must call the result's deleter once
  // (bp_tensor_to_dlpack_versioned); it keeps the tensor's memory alive until then.
  DLManagedTensorVersioned* ToDLPackVersioned() const {
    DLManagedTensorVersioned* out = nullptr;
    Check(Api16("exporting a DLPack tensor")->tensor_to_dlpack_versioned(obj_.get(), &out));
    return out;
  }
  // The same for a DLPack 0.x consumer; a read-only tensor throws (0.x cannot say so).
  DLManagedTensor* ToDLPack() const {
    DLManagedTensor* out = nullptr;
    Check(Api16("exporting a DLPack tensor")->tensor_to_dlpack(obj_.get(), &out));
    return out;
  }
  // DLPACK_FLAG_BITMASK_* (bp_tensor_flags); 0 on a host older than ABI 1.6, which imports
  // no DLPack tensors.
  uint64_t Flags() const {
    if (!detail::HostHas(BACKPLANE_HOST_ENTRY_END(tensor_flags))) return 0;
    uint64_t flags = 0;
    Check(detail::Api()->tensor_flags(obj_.get(), &flags));
    return flags;
  }
  bool IsReadOnly() const { return (Flags() & DLPACK_FLAG_BITMASK_READ_ONLY) != 0; }
  DLTensor* dl() const { return dl_; }
  Device device() const { return Device(dl_->device); }
  DLDataType dtype() const { return dl_->dtype; }
  std::vector<int64_t> shape() const {
    return std::vector<int64_t>(dl_->shape, dl_->shape + dl_->ndim);
  }
  size_t NumElements() const {
    size_t n = 1;
    for (int i = 0; i < dl_->ndim; ++i) n *= static_cast<size_t>(dl_->shape[i]);
    return n;
  }
  size_t NumBytes() const { return NumElements() * ((dl_->dtype.bits * dl_->dtype.lanes + 7) / 8); }

  // Copies `nbytes` of host memory in (CopyDataFromTo on `stream`), then waits for it
  // (StreamSync), so the tensor holds the data when this returns.
  void CopyFromBytes(const void* data, size_t nbytes, bp_stream_t stream = nullptr) const {
    CheckBytes(nbytes);
    CheckWritable();
    DLTensor src = HostView(const_cast<void*>(data));
    CopyDataFromTo(&src, dl_, stream);
    Check(detail::Api()->device_stream_sync(dl_->device, stream));
  }
  // Copies the tensor out to host memory and waits.
  void CopyToBytes(void* data, size_t nbytes, bp_stream_t stream = nullptr) const {
    CheckBytes(nbytes);
    DLTensor dst = HostView(data);
    CopyDataFromTo(dl_, &dst, stream);
    Check(detail::Api()->device_stream_sync(dl_->device, stream));
  }
  template <typename T>
  void CopyFrom(const std::vector<T>& host) const {
    CopyFromBytes(host.data(), host.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> ToVector() const {
    std::vector<T> out(NumBytes() / sizeof(T));
    CopyToBytes(out.data(), out.size() * sizeof(T));
    return out;
  }
  // A copy of this tensor on `dev`.
  Tensor CopyTo(Device dev) const {
    Tensor out = Empty(shape(), dtype(), dev);
    CopyDataFromTo(dl_, out.dl_, nullptr);
    Check(detail::Api()->device_stream_sync(dev.dl, nullptr));
    if (!(dev == device())) Check(detail::Api()->device_stream_sync(dl_->device, nullptr));
    return out;
  }
  const ObjectRef& object() const { return obj_; }

 private:
  void CheckBytes(size_t nbytes) const {
    if (nbytes != NumBytes()) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "tensor copy: host buffer has " + std::to_string(nbytes) +
                      " bytes but the tensor holds " + std::to_string(NumBytes()) +
                      "; pass a buffer of exactly the tensor's size");
    }
  }
  void CheckWritable() const {
    if (IsReadOnly()) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "tensor copy: the destination is read-only (its DLPack producer said so); copy "
                  "into a tensor of your own");
    }
  }
  // FromNative's release: runs the application's callable once, then frees it.
  static void RunRelease(void* ctx) {
    auto* release = static_cast<std::function<void()>*>(ctx);
    (*release)();
    delete release;
  }
  // The host table, checked to have the entries of ABI 1.6.
  static const bp_host_api_t* Api16(const char* what) {
    return detail::HostSince(BACKPLANE_HOST_ENTRY_END(tensor_from_native), what, "1.6");
  }
  DLTensor HostView(void* data) const {
    DLTensor t = *dl_;
    t.data = data;
    t.device = DLDevice{kDLCPU, 0};
    t.strides = nullptr;
    t.byte_offset = 0;
    return t;
  }
  ObjectRef obj_;
  DLTensor* dl_ = nullptr;
};

// An immutable Target: the kind and attributes of the device code will run on (docs/targets.md).
// Parse accepts JSON, a kind name, a tag, or "kind -key=value -flag".
class Target {
 public:
  Target() = default;
  explicit Target(ObjectRef obj) : obj_(std::move(obj)) {}

  // Text holding a NUL byte is refused (Error, BP_ERR_INVALID_ARGUMENT), naming the word it
  // is in: the C API reads up to the first NUL, so the rest would be dropped silently.
  static Target Parse(const std::string& text) {
    if (const size_t nul = text.find('\0'); nul != std::string::npos) {
      const size_t begin = text.find_last_of(" \t\r\n", nul);
      const size_t start = begin == std::string::npos ? 0 : begin + 1;
      std::string word = text.substr(start, text.find_first_of(" \t\r\n", nul) - start);
      const size_t eq = word.find('=');
      // "-key=value" with the NUL in the value names the key.
      const std::string key =
          word.size() > 1 && word[0] == '-' && eq != std::string::npos && start + eq < nul
              ? "attribute '" + word.substr(1, eq - 1) + "'"
              : "the text";
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "target: " + key + " holds a NUL byte at offset " + std::to_string(nul) +
                      "; a Target's text ends at the first NUL in C, so what follows would be "
                      "dropped silently: remove it");
    }
    bp_object_t* out = nullptr;
    Check(detail::Api()->target_parse(text.c_str(), &out));
    return Target(ObjectRef::Adopt(out));
  }
  // A Target whose attributes come from the device (the only place a device is queried).
  static Target FromDevice(Device dev, const std::string& kind = "") {
    bp_object_t* out = nullptr;
    Check(detail::Api()->target_from_device(dev.dl, kind.empty() ? nullptr : kind.c_str(), &out));
    return Target(ObjectRef::Adopt(out));
  }

  std::string Kind() const {
    const char* kind = nullptr;
    Check(detail::Api()->target_kind(obj_.get(), &kind));
    return kind;
  }
  // Canonical JSON: keys sorted, defaults included; Parse(ToJson()) == *this.
  std::string ToJson() const {
    bp_object_t* out = nullptr;
    Check(detail::Api()->target_to_json(obj_.get(), &out));
    return GetString(ObjectRef::Adopt(out).get());
  }
  bool operator==(const Target& other) const { return ToJson() == other.ToJson(); }
  bool operator!=(const Target& other) const { return !(*this == other); }

  // The attribute as T (bool, int64_t, double, std::string, std::vector<int64_t>,
  // std::vector<std::string>, or Target for "host"), or nullopt if the Target lacks it.
  // Throws for a name the kind does not declare or a T that does not fit the type.
  template <typename T>
  std::optional<T> GetAttr(const std::string& name) const {
    bp_value_t raw;
    Check(detail::Api()->target_get_attr(obj_.get(), name.c_str(), &raw));
    Any v(raw);
    if (v.is_none()) return std::nullopt;
    if constexpr (std::is_same_v<T, bool>) {
      return v.AsInt() != 0;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(v.AsInt());
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(v.AsFloat());
    } else if constexpr (std::is_same_v<T, std::string>) {
      return v.AsString();
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      return GetStringArray(v.AsObject().get());
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      ObjectRef arr = v.AsObject();
      size_t n = 0;
      Check(detail::Api()->array_size(arr.get(), &n));
      std::vector<int64_t> out(n);
      for (size_t i = 0; i < n; ++i) {
        bp_value_t e;
        Check(detail::Api()->array_get(arr.get(), i, &e));
        out[i] = detail::ValueAsInt(e);
      }
      return out;
    } else if constexpr (std::is_same_v<T, Target>) {
      return Target(v.AsObject());
    } else {
      static_assert(sizeof(T) == 0, "no conversion of a target attribute to this type");
    }
  }
  // The attribute, or `fallback` if the Target lacks it.
  template <typename T>
  T GetAttr(const std::string& name, T fallback) const {
    std::optional<T> v = GetAttr<T>(name);
    return v ? *v : fallback;
  }
  std::vector<std::string> Keys() const {
    return GetAttr<std::vector<std::string>>("keys").value_or(std::vector<std::string>{});
  }
  std::optional<Target> Host() const { return GetAttr<Target>("host"); }

  const ObjectRef& object() const { return obj_; }
  explicit operator bool() const { return static_cast<bool>(obj_); }

 private:
  ObjectRef obj_;
};

// The TargetKind and tag registries.
struct TargetKinds {
  // Every kind with its schema, and every tag, as JSON (see bp_target_kinds_describe).
  static std::string Describe() {
    bp_object_t* out = nullptr;
    Check(detail::Api()->target_kinds_describe(&out));
    return GetString(ObjectRef::Adopt(out).get());
  }
  static void RegisterTag(const std::string& tag, const std::string& target_text) {
    Check(detail::Api()->target_tag_register(tag.c_str(), target_text.c_str()));
  }
};

// What Module::LoadFromBytes may load (bp_module_load_options_t).
struct ModuleLoadOptions {
  // Load modules that carry native code (a "c" module's shared library): it runs in this
  // process, with its rights, as soon as it is loaded, and a file's checksum does not say who
  // wrote it. Set it only for files this program built itself or got from a source it trusts
  // (docs/security.md, "Saved modules"). Without it such a file is refused, naming the opt-in.
  bool allow_native = false;
  // Since ABI 1.6 (BP_MODULE_LOAD_NO_GLOBAL_CALLS): the host code of the loaded modules may call
  // only the functions of the modules it imports (its kernels), never the global registry; a file
  // whose host code names another function is refused. For files from callers who may not call
  // every registered function (a server's clients). It does not restrict native code.
  bool no_global_calls = false;
};

// A runtime Module: what a code generator returns. Every PrimFunc it was built from is found
// by name (bp_build checks this); it can show its generated source, import other modules, and
// be saved with its imports into one file that LoadFromBytes reads back on another machine.
class Module {
 public:
  Module() = default;
  explicit Module(ObjectRef obj) : obj_(std::move(obj)) {}

  std::string Kind() const {
    const char* kind = nullptr;
    Check(detail::Api()->module_kind(obj_.get(), &kind));
    return kind;
  }
  // The function `name`, searching imports too unless `query_imports` is false; throws if
  // absent, naming the nearest names.
  Function GetFunction(const std::string& name, bool query_imports = true) const {
    bp_object_t* out = nullptr;
    Check(
        detail::Api()->module_get_function(obj_.get(), name.c_str(), query_imports ? 1 : 0, &out));
    return Function(ObjectRef::Adopt(out));
  }
  std::vector<std::string> ListFunctions() const {
    bp_object_t* out = nullptr;
    Check(detail::Api()->module_list_functions(obj_.get(), &out));
    return GetStringArray(ObjectRef::Adopt(out).get());
  }
  // Generated source ("" = the module's main form); empty if the module has none.
  std::string InspectSource(const std::string& format = "") const {
    bp_object_t* out = nullptr;
    Check(detail::Api()->module_inspect_source(obj_.get(), format.c_str(), &out));
    return out == nullptr ? std::string() : GetString(ObjectRef::Adopt(out).get());
  }
  void Import(const Module& other) {
    Check(detail::Api()->module_import(obj_.get(), other.obj_.get()));
  }
  std::vector<Module> Imports() const {
    bp_object_t* out = nullptr;
    Check(detail::Api()->module_imports(obj_.get(), &out));
    ObjectRef arr = ObjectRef::Adopt(out);
    size_t n = 0;
    Check(detail::Api()->array_size(arr.get(), &n));
    std::vector<Module> mods;
    for (size_t i = 0; i < n; ++i) {
      bp_value_t v;
      Check(detail::Api()->array_get(arr.get(), i, &v));
      mods.emplace_back(ObjectRef::Borrow(v.u.v_obj));
    }
    return mods;
  }
  // The module and its imports in Backplane's module file format.
  std::string SaveToBytes() const {
    bp_object_t* out = nullptr;
    Check(detail::Api()->module_save(obj_.get(), &out));
    ObjectRef bytes = ObjectRef::Adopt(out);
    const void* data = nullptr;
    size_t size = 0;
    Check(detail::Api()->bytes_get(bytes.get(), &data, &size));
    return std::string(static_cast<const char*>(data), size);
  }
  // Reads what SaveToBytes wrote (bp_module_load_with_options). A module that carries native
  // code loads only with `options.allow_native`: Module::LoadFromBytes(bytes,
  // ModuleLoadOptions{true}) for a file this program built itself. On a host older than ABI 1.4
  // this is bp_module_load, which did not refuse native code. `options.no_global_calls` throws
  // BP_ERR_UNSUPPORTED on a host older than ABI 1.6, which cannot enforce it.
  static Module LoadFromBytes(const std::string& bytes, const ModuleLoadOptions& options = {}) {
    bp_object_t* out = nullptr;
    const bp_host_api_t* api = detail::Api();
    if (options.no_global_calls) {
      detail::HostSince(BACKPLANE_HOST_ENTRY_END(tensor_from_dlpack_versioned),
                        "ModuleLoadOptions::no_global_calls", "1.6");
    }
    if (api->struct_size < offsetof(bp_host_api_t, module_load_with_options) + sizeof(void*)) {
      Check(api->module_load(bytes.data(), bytes.size(), &out));
    } else {
      bp_module_load_options_t o{};
      o.struct_size = sizeof(o);
      o.flags = (options.allow_native ? BP_MODULE_LOAD_ALLOW_NATIVE : 0u) |
                (options.no_global_calls ? BP_MODULE_LOAD_NO_GLOBAL_CALLS : 0u);
      Check(api->module_load_with_options(bytes.data(), bytes.size(), &o, &out));
    }
    return Module(ObjectRef::Adopt(out));
  }
  const ObjectRef& object() const { return obj_; }
  explicit operator bool() const { return static_cast<bool>(obj_); }

 private:
  ObjectRef obj_;
};

// Builds kernel IR (its text form, docs/ir.md) for `target`; `host` (optional) is the CPU
// Target of the host code. Every PrimFunc of the IR is a function of the result (bp_build).
// Parse errors name the input `source_name` (a file name, say; "bp_build input" if empty).
// Host apps holding an ir::IRModule pass ir::Print(module).
inline Module Build(const std::string& ir_text, const Target& target, const Target& host = Target(),
                    const std::string& source_name = "") {
  bp_object_t* out = nullptr;
  const bp_host_api_t* api = detail::Api();
  const bp_object_t* host_obj = host ? host.object().get() : nullptr;
  if (api->struct_size < offsetof(bp_host_api_t, build_with_options) + sizeof(void*)) {
    // A host older than ABI 1.4: its parse errors say "bp_build input".
    Check(api->build(ir_text.data(), ir_text.size(), target.object().get(), host_obj, &out));
  } else {
    bp_build_options_t options{};
    options.struct_size = sizeof(options);
    options.host = host_obj;
    options.source_name = source_name.empty() ? nullptr : source_name.c_str();
    Check(api->build_with_options(ir_text.data(), ir_text.size(), target.object().get(), &options,
                                  &out));
  }
  return Module(ObjectRef::Adopt(out));
}

}  // namespace backplane

#endif  // BACKPLANE_BACKPLANE_HPP_
