// SPDX-License-Identifier: Apache-2.0
// Objects: strings, bytes, arrays and functions, and their C entry points.
#include "object.h"

#include <cstdio>
#include <cstring>

namespace backplane {
namespace core {

ArrayObject::~ArrayObject() {
  for (bp_value_t& v : values) {
    if (v.type == BP_VALUE_OBJECT && v.u.v_obj != nullptr) v.u.v_obj->Release();
  }
}

const char* ObjectTypeName(int32_t type) {
  switch (type) {
    case BP_OBJECT_STRING:
      return "string";
    case BP_OBJECT_BYTES:
      return "bytes";
    case BP_OBJECT_FUNCTION:
      return "function";
    case BP_OBJECT_TENSOR:
      return "tensor";
    case BP_OBJECT_ARRAY:
      return "array";
    case BP_OBJECT_TARGET:
      return "target";
    case BP_OBJECT_MODULE:
      return "module";
    case BP_OBJECT_EVENT:
      return "event";
    default:
      return "unknown";
  }
}

void RunReleaseHook(const char* what, void (*hook)(void*), void* arg) noexcept {
  if (hook == nullptr) return;
  try {
    hook(arg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane: %s threw a C++ exception, which was contained: %s\n", what,
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "backplane: %s threw a C++ exception, which was contained\n", what);
  }
}

namespace {

// bp_function_call's ways out other than success, out of line and cold so that its fast path
// keeps no string in its frame and saves no registers for them.
__attribute__((noinline, cold)) bp_status_t FunctionCallBadArguments() {
  return SetError(BP_ERR_INVALID_ARGUMENT,
                  "bp_function_call: expected a function object, a result slot and "
                  "num_args >= 0 with args for each");
}

// Called from the handler of an exception a body let out (a body written without the SDK's
// edge wrapper): contains it.
__attribute__((noinline, cold)) void FunctionCallThrew() {
  StatusFromCurrentException();
  SetError(BP_ERR_PLUGIN, "a function threw a C++ exception across the C boundary (" +
                              LastErrorMessage() + "); wrap its body with CatchAtEdge");
}

// A body failed: gives the failure a message if the body set none (`seq` is the error sequence
// before the call).
__attribute__((noinline, cold)) bp_status_t FunctionCallFailed(bp_status_t st, uint64_t seq) {
  if (ErrorSequence() == seq) {
    return SetError(st, std::string("a function failed (") + bp_error_kind_name(st) +
                            ") without setting an error message");
  }
  return st;
}

}  // namespace

__attribute__((noinline, cold)) void FailAs(const bp_object_t* obj, int32_t type,
                                            const std::string& what) {
  if (obj == nullptr) Fail(BP_ERR_INVALID_ARGUMENT, what + ": the object is null");
  Fail(BP_ERR_TYPE, what + ": expected a " + ObjectTypeName(type) + " object, got a " +
                        ObjectTypeName(obj->type()) + " object");
}

FunctionObject::~FunctionObject() {
  RunReleaseHook("a function's resource deleter", deleter, resource);
}

bp_object_t* NewString(std::string text) { return new StringObject(std::move(text)); }

bp_object_t* NewStringArray(const std::vector<std::string>& texts) {
  auto* array = new ArrayObject();
  Ref owner = Ref::Adopt(array);
  array->values.reserve(texts.size());
  for (const auto& t : texts) {
    bp_value_t v;
    v.type = BP_VALUE_OBJECT;
    v.reserved0 = 0;
    v.u.v_obj = NewString(t);
    array->values.push_back(v);
  }
  return owner.release();
}

bp_value_t CallFunctionDescribed(const bp_object_t* func, const bp_value_t* args, int32_t n,
                                 const std::function<std::string()>& describe) {
  if (func == nullptr || func->type() != BP_OBJECT_FUNCTION) {
    As<FunctionObject>(func, BP_OBJECT_FUNCTION, describe());  // throws, naming the function
  }
  const auto& f = static_cast<const FunctionObject&>(*func);
  bp_value_t out;
  out.type = BP_VALUE_NONE;
  out.reserved0 = 0;
  out.u.v_int64 = 0;
  const uint64_t seq = ErrorSequence();
  bp_status_t st;
  try {
    st = f.body(f.resource, args, n, &out);
  } catch (...) {
    // A function written without the SDK's edge wrapper let an exception out.
    StatusFromCurrentException();
    Fail(BP_ERR_PLUGIN, describe() + ": threw a C++ exception across the C boundary (" +
                            LastErrorMessage() + "); wrap the body with CatchAtEdge");
  }
  if (st != BP_OK) CheckPluginStatus(st, seq, describe());
  return out;
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_object_retain(bp_object_t* obj) {
  if (obj != nullptr) obj->Retain();
  return BP_OK;
}

BP_EXPORT bp_status_t bp_object_release(bp_object_t* obj) {
  BP_API_BEGIN
  if (obj != nullptr) obj->Release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_object_type(const bp_object_t* obj, int32_t* out_type) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(obj != nullptr, "the object is null");
  BP_REQUIRE_ARG(out_type != nullptr, "out_type is null");
  *out_type = obj->type();
  BP_API_END
}

BP_EXPORT bp_status_t bp_string_create(const char* data, size_t size, bp_object_t** out_str) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(data != nullptr || size == 0, "data is null but size is not 0");
  BP_REQUIRE_ARG(out_str != nullptr, "out_str is null");
  *out_str = NewString(std::string(data == nullptr ? "" : data, size));
  BP_API_END
}

BP_EXPORT bp_status_t bp_string_get(const bp_object_t* str, const char** out_data,
                                    size_t* out_size) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_data != nullptr, "out_data is null");
  const auto& s = As<StringObject>(str, BP_OBJECT_STRING, "bp_string_get");
  *out_data = s.text.c_str();
  if (out_size != nullptr) *out_size = s.text.size();
  BP_API_END
}

BP_EXPORT bp_status_t bp_bytes_create(const void* data, size_t size, bp_object_t** out_bytes) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(data != nullptr || size == 0, "data is null but size is not 0");
  BP_REQUIRE_ARG(out_bytes != nullptr, "out_bytes is null");
  *out_bytes = new BytesObject(std::string(static_cast<const char*>(data), size));
  BP_API_END
}

BP_EXPORT bp_status_t bp_bytes_get(const bp_object_t* bytes, const void** out_data,
                                   size_t* out_size) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_data != nullptr && out_size != nullptr, "out_data or out_size is null");
  const auto& b = As<BytesObject>(bytes, BP_OBJECT_BYTES, "bp_bytes_get");
  *out_data = b.data.data();
  *out_size = b.data.size();
  BP_API_END
}

BP_EXPORT bp_status_t bp_array_create(const bp_value_t* values, size_t size,
                                      bp_object_t** out_array) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(values != nullptr || size == 0, "values is null but size is not 0");
  BP_REQUIRE_ARG(out_array != nullptr, "out_array is null");
  Ref array = Ref::Adopt(new ArrayObject());
  auto& vals = static_cast<ArrayObject*>(array.get())->values;
  vals.reserve(size);
  for (size_t i = 0; i < size; ++i) {
    bp_value_t v = values[i];
    if (v.type == BP_VALUE_TENSOR) {
      Fail(BP_ERR_INVALID_ARGUMENT, "bp_array_create: element " + std::to_string(i) +
                                        " is a borrowed DLTensor*; store a tensor object instead");
    }
    if (v.type < BP_VALUE_NONE || v.type > BP_VALUE_OBJECT) {
      Fail(BP_ERR_INVALID_ARGUMENT, "bp_array_create: element " + std::to_string(i) +
                                        " has unknown type " + std::to_string(v.type));
    }
    if (v.type == BP_VALUE_STR) {
      BP_REQUIRE_ARG(v.u.v_str != nullptr, "a string element is null");
      v.type = BP_VALUE_OBJECT;
      v.u.v_obj = NewString(values[i].u.v_str);
    } else if (v.type == BP_VALUE_OBJECT) {
      BP_REQUIRE_ARG(v.u.v_obj != nullptr, "an object element is null");
      v.u.v_obj->Retain();
    }
    vals.push_back(v);
  }
  *out_array = array.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_array_size(const bp_object_t* array, size_t* out_size) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_size != nullptr, "out_size is null");
  *out_size = As<ArrayObject>(array, BP_OBJECT_ARRAY, "bp_array_size").values.size();
  BP_API_END
}

BP_EXPORT bp_status_t bp_array_get(const bp_object_t* array, size_t index, bp_value_t* out_value) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_value != nullptr, "out_value is null");
  const auto& vals = As<ArrayObject>(array, BP_OBJECT_ARRAY, "bp_array_get").values;
  if (index >= vals.size()) {
    Fail(BP_ERR_INVALID_ARGUMENT, "bp_array_get: index " + std::to_string(index) +
                                      " is out of range for an array of " +
                                      std::to_string(vals.size()) + " elements");
  }
  *out_value = vals[index];
  BP_API_END
}

BP_EXPORT bp_status_t bp_function_create(bp_packed_fn_t body, void* resource,
                                         void (*resource_deleter)(void* resource),
                                         bp_object_t** out_func) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(body != nullptr, "body is null");
  BP_REQUIRE_ARG(out_func != nullptr, "out_func is null");
  *out_func = new FunctionObject(body, resource, resource_deleter, false);
  BP_API_END
}

BP_EXPORT bp_status_t bp_function_create_with_flags(bp_packed_fn_t body, void* resource,
                                                    void (*resource_deleter)(void* resource),
                                                    uint32_t flags, bp_object_t** out_func) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(body != nullptr, "body is null");
  BP_REQUIRE_ARG(out_func != nullptr, "out_func is null");
  const uint32_t unknown = flags & ~(uint32_t{BP_FUNCTION_CONTAINED} | BP_FUNCTION_READS_IR_MASK);
  if (unknown != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_function_create_with_flags: unknown flag bits " + std::to_string(unknown) +
             "; this Backplane knows BP_FUNCTION_CONTAINED (1) and BP_FUNCTION_READS_IR (bits 8 "
             "to 23) only: leave the other bits out, or upgrade Backplane");
  }
  const uint32_t oldest = BP_FUNCTION_READS_IR_OLDEST(flags);
  const uint32_t newest = BP_FUNCTION_READS_IR_NEWEST(flags);
  if ((oldest != 0 || newest != 0) && (oldest < 1 || oldest > newest)) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_function_create_with_flags: BP_FUNCTION_READS_IR(" + std::to_string(oldest) + ", " +
             std::to_string(newest) +
             ") is not a range of IR text versions; give 1 <= oldest <= newest (the versions the "
             "code generator's parser reads, docs/ir.md \"Versions\")");
  }
  *out_func =
      new FunctionObject(body, resource, resource_deleter, (flags & BP_FUNCTION_CONTAINED) != 0,
                         static_cast<uint8_t>(oldest), static_cast<uint8_t>(newest));
  BP_API_END
}

BP_EXPORT bp_status_t bp_function_call(const bp_object_t* func, const bp_value_t* args,
                                       int32_t num_args, bp_value_t* out_result) {
  // The hot path: no allocation, no branch taken, one indirect call, one callee-saved register
  // (the error sequence). Every way out other than success goes to a cold function, so nothing
  // that builds a message is in this frame. It cannot be a tail call: this frame is what
  // contains a body's exception and notices a failure without a message (docs/performance.md,
  // "Packed call").
  if (__builtin_expect(func == nullptr, 0)) return FunctionCallBadArguments();
  // num_args in [0, INT32_MAX] with args, exactly 0 without: one unsigned compare.
  const uint32_t max_args = args != nullptr ? 0x7fffffffu : 0u;
  if (__builtin_expect(func->type() != BP_OBJECT_FUNCTION || out_result == nullptr ||
                           static_cast<uint32_t>(num_args) > max_args,
                       0)) {
    return FunctionCallBadArguments();
  }
  const auto& f = static_cast<const FunctionObject&>(*func);
  out_result->type = BP_VALUE_NONE;
  out_result->u.v_int64 = 0;
  // A body that contains its exceptions and explains its failures needs no frame of ours.
  if (f.contained) return f.body(f.resource, args, num_args, out_result);
  const uint64_t seq = ErrorSequence();
  bp_status_t st;
  try {
    st = f.body(f.resource, args, num_args, out_result);
  } catch (...) {
    FunctionCallThrew();
    return BP_ERR_PLUGIN;  // nothing to keep across the end of the handler: no stack slot
  }
  if (__builtin_expect(st != BP_OK, 0)) return FunctionCallFailed(st, seq);
  return BP_OK;
}

}  // extern "C"
