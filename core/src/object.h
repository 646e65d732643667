// SPDX-License-Identifier: Apache-2.0
// The core's object model. bp_object_t is opaque outside the core; inside, every object
// derives from it, carries an atomic refcount and is deleted by the core that made it.
#ifndef BACKPLANE_CORE_OBJECT_H_
#define BACKPLANE_CORE_OBJECT_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common.h"

struct bp_object {
  explicit bp_object(int32_t type) : type_(type) {}
  virtual ~bp_object() = default;
  bp_object(const bp_object&) = delete;
  bp_object& operator=(const bp_object&) = delete;

  void Retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  int32_t type() const { return type_; }
  // The references held now; a snapshot (another thread may take or drop one at once).
  int64_t RefCount() const { return refs_.load(std::memory_order_acquire); }

 private:
  std::atomic<int64_t> refs_{1};
  const int32_t type_;
};

namespace backplane {
namespace core {

struct StringObject final : bp_object {
  explicit StringObject(std::string s) : bp_object(BP_OBJECT_STRING), text(std::move(s)) {}
  const std::string text;
};

struct BytesObject final : bp_object {
  explicit BytesObject(std::string b) : bp_object(BP_OBJECT_BYTES), data(std::move(b)) {}
  const std::string data;
};

struct ArrayObject final : bp_object {
  ArrayObject() : bp_object(BP_OBJECT_ARRAY) {}
  ~ArrayObject() override;
  std::vector<bp_value_t> values;  // object values hold one reference each
};

struct FunctionObject final : bp_object {
  FunctionObject(bp_packed_fn_t b, void* r, void (*d)(void*), bool c, uint8_t ir_oldest = 0,
                 uint8_t ir_newest = 0)
      : bp_object(BP_OBJECT_FUNCTION),
        body(b),
        resource(r),
        deleter(d),
        contained(c),
        reads_ir_oldest(ir_oldest),
        reads_ir_newest(ir_newest) {}
  ~FunctionObject() override;
  const bp_packed_fn_t body;
  void* const resource;
  void (*const deleter)(void*);
  const bool contained;  // BP_FUNCTION_CONTAINED: bp_function_call tail-calls the body
  // BP_FUNCTION_READS_IR: the IR text versions a code generator reads; 0 and 0 when undeclared.
  const uint8_t reads_ir_oldest;
  const uint8_t reads_ir_newest;
};

// Runs plugin code that frees something from a destructor: an exception it lets out is
// contained and reported on stderr, since a destructor cannot return it and must not let it
// reach std::terminate (a plugin's failure must never abort the host).
void RunReleaseHook(const char* what, void (*hook)(void*), void* arg) noexcept;

// "string", "function", ...
const char* ObjectTypeName(int32_t type);

// Throws the error of As: `obj` is null (BP_ERR_INVALID_ARGUMENT) or not of `type`
// (BP_ERR_TYPE), naming `what`.
[[noreturn]] void FailAs(const bp_object_t* obj, int32_t type, const std::string& what);

// Returns `obj` as T after checking its type; throws naming `what`. The `const char*` form
// builds no string on the way through (hot entries such as bp_tensor_flags and bp_tensor_get).
template <typename T>
const T& As(const bp_object_t* obj, int32_t type, const std::string& what) {
  if (obj == nullptr || obj->type() != type) FailAs(obj, type, what);
  return static_cast<const T&>(*obj);
}
template <typename T>
const T& As(const bp_object_t* obj, int32_t type, const char* what) {
  if (__builtin_expect(obj == nullptr || obj->type() != type, 0)) FailAs(obj, type, what);
  return static_cast<const T&>(*obj);
}

// An owning pointer to an object, for core-internal use.
class Ref {
 public:
  Ref() = default;
  static Ref Adopt(bp_object_t* o) {
    Ref r;
    r.obj_ = o;
    return r;
  }
  static Ref Share(bp_object_t* o) {
    if (o) o->Retain();
    return Adopt(o);
  }
  Ref(const Ref& o) : obj_(o.obj_) {
    if (obj_) obj_->Retain();
  }
  Ref(Ref&& o) noexcept : obj_(o.obj_) { o.obj_ = nullptr; }
  Ref& operator=(Ref o) noexcept {
    std::swap(obj_, o.obj_);
    return *this;
  }
  ~Ref() {
    if (obj_) obj_->Release();
  }
  bp_object_t* get() const { return obj_; }
  bp_object_t* release() {
    bp_object_t* o = obj_;
    obj_ = nullptr;
    return o;
  }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  bp_object_t* obj_ = nullptr;
};

// Makes a string object (owned).
bp_object_t* NewString(std::string text);
// Makes an array of string objects (owned).
bp_object_t* NewStringArray(const std::vector<std::string>& texts);

// Calls a function object, checking its status; `describe` names it in errors and runs only
// when there is one, so a hot caller builds no string per call.
bp_value_t CallFunctionDescribed(const bp_object_t* func, const bp_value_t* args, int32_t n,
                                 const std::function<std::string()>& describe);

// Calls a function object, checking its status; `what` names it in errors.
inline bp_value_t CallFunction(const bp_object_t* func, const bp_value_t* args, int32_t n,
                               const std::string& what) {
  return CallFunctionDescribed(func, args, n, [&what] { return what; });
}

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_OBJECT_H_
