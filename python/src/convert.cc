// SPDX-License-Identifier: Apache-2.0
// Conversions between Python and Backplane: error classes, dtypes, devices, values, and
// tensors through DLPack capsules.
#include "common.h"

using namespace nb::literals;

namespace backplane_python {

// ---- errors ------------------------------------------------------------------------------

// The Python class of each error kind (index: bp_status_t), from _set_error_classes.
std::vector<nb::object>& ErrorClasses() {
  static auto* classes = new std::vector<nb::object>();  // never destroyed: outlives the module
  return *classes;
}

// backplane.from_dlpack, set by __init__.py (_set_from_dlpack): arrays of other libraries
// passed to a function go through it.
nb::object& FromDlpackFunction() {
  static auto* f = new nb::object();  // never destroyed: outlives the module
  return *f;
}

void SetErrorClasses(nb::list classes) {
  std::vector<nb::object>& out = ErrorClasses();
  out.clear();
  for (nb::handle c : classes) out.push_back(nb::borrow(c));
}

void RaiseBackplaneError(const Error& e) {
  const std::vector<nb::object>& classes = ErrorClasses();
  const auto kind = static_cast<size_t>(e.kind());
  PyObject* cls = kind < classes.size() && classes[kind].is_valid() ? classes[kind].ptr()
                  : !classes.empty()                                ? classes[0].ptr()
                                                                    : PyExc_RuntimeError;
  PyErr_SetString(cls, e.what());
}

[[noreturn]] void Throw(bp_status_t kind, const std::string& message) {
  throw Error(kind, message);
}

// ---- values ------------------------------------------------------------------------------

const char* DTypeCodeName(uint8_t code) {
  switch (code) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case kDLBfloat:
      return "bfloat";
    case kDLBoolCode:
      return "bool";
    default:
      return nullptr;
  }
}

// "float32", "int64", "uint8", "bool", "float32x4".
std::string DTypeName(DLDataType t) {
  const char* code = DTypeCodeName(t.code);
  std::string s = code != nullptr ? code : "code" + std::to_string(t.code) + "_";
  if (t.code != kDLBoolCode) s += std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

DLDataType ParseDType(const std::string& text) {
  struct Known {
    const char* prefix;
    uint8_t code;
  };
  const Known known[] = {
      {"bfloat", kDLBfloat}, {"float", kDLFloat}, {"uint", kDLUInt}, {"int", kDLInt}};
  if (text == "bool") return backplane::MakeDType(kDLBoolCode, 8);
  std::string rest = text;
  uint16_t lanes = 1;
  const size_t x = text.find('x');
  if (x != std::string::npos) {
    rest = text.substr(0, x);
    const std::string l = text.substr(x + 1);
    if (l.empty() || l.size() > 4 || l.find_first_not_of("0123456789") != std::string::npos) {
      Throw(BP_ERR_INVALID_ARGUMENT, "dtype '" + text + "': the lanes after 'x' must be a number");
    }
    lanes = static_cast<uint16_t>(std::stoi(l));
  }
  for (const Known& k : known) {
    const std::string p = k.prefix;
    if (rest.rfind(p, 0) != 0) continue;
    const std::string bits = rest.substr(p.size());
    if (!bits.empty() && bits.size() <= 3 &&
        bits.find_first_not_of("0123456789") == std::string::npos) {
      const int b = std::stoi(bits);
      const bool fits = k.code == kDLBfloat  ? b == 16
                        : k.code == kDLFloat ? (b == 16 || b == 32 || b == 64)
                                             : (b == 8 || b == 16 || b == 32 || b == 64);
      if (fits) return backplane::MakeDType(k.code, static_cast<uint8_t>(b), lanes);
    }
    break;
  }
  Throw(BP_ERR_INVALID_ARGUMENT,
        "dtype '" + text +
            "' is not known; use a name such as float32, float64, int32, int64, uint8 or bool");
}

DLDataType DTypeOf(nb::handle dtype) {
  if (nb::isinstance<nb::str>(dtype)) return ParseDType(nb::cast<std::string>(dtype));
  // numpy.dtype, numpy scalar types (numpy.float32): their str() names them.
  nb::object named = nb::hasattr(dtype, "name") ? nb::getattr(dtype, "name") : nb::str(dtype);
  if (!nb::isinstance<nb::str>(named)) named = nb::str(dtype);
  return ParseDType(nb::cast<std::string>(named));
}

Device DeviceOf(nb::handle d) {
  if (nb::isinstance<Device>(d)) return nb::cast<Device>(d);
  if (nb::isinstance<nb::str>(d)) return Device::Parse(nb::cast<std::string>(d));
  Throw(BP_ERR_TYPE, "expected a backplane.Device or a device name such as 'cpu:0', got " +
                         nb::cast<std::string>(nb::str(nb::handle(d.type()))));
}

nb::object ObjectToPython(bp_object_t* obj) {
  int32_t type = 0;
  backplane::Check(bp_object_type(obj, &type));
  switch (type) {
    case BP_OBJECT_STRING:
      return nb::str(backplane::GetString(obj).c_str());
    case BP_OBJECT_TENSOR:
      return nb::cast(Tensor(ObjectRef::Borrow(obj)));
    case BP_OBJECT_ARRAY: {
      size_t n = 0;
      backplane::Check(bp_array_size(obj, &n));
      nb::list out;
      for (size_t i = 0; i < n; ++i) {
        bp_value_t e;
        backplane::Check(bp_array_get(obj, i, &e));  // borrowed from the array: not released
        out.append(ToPython(e));
      }
      return out;
    }
    default:
      Throw(BP_ERR_TYPE, "a value is an object of type " + std::to_string(type) +
                             ", which the Python API does not show");
  }
}

// A borrowed value as a Python object.
nb::object ToPython(const bp_value_t& v) {
  switch (v.type) {
    case BP_VALUE_NONE:
      return nb::none();
    case BP_VALUE_INT:
      return nb::int_(v.u.v_int64);
    case BP_VALUE_FLOAT:
      return nb::float_(v.u.v_float64);
    case BP_VALUE_STR:
      return nb::str(v.u.v_str);
    case BP_VALUE_DEVICE:
      return nb::cast(Device(v.u.v_device));
    case BP_VALUE_DTYPE:
      return nb::str(DTypeName(v.u.v_dtype).c_str());
    case BP_VALUE_OBJECT:
      return ObjectToPython(v.u.v_obj);
    default:
      Throw(BP_ERR_TYPE, "a value of type " + backplane::detail::ValueTypeName(v) +
                             " cannot be shown in Python");
  }
}

// ---- DLPack ------------------------------------------------------------------------------

// A capsule's destructor: the consumer renamed it "used_..." when it took the tensor over;
// otherwise nobody did, and its deleter runs here.
void DeleteVersionedCapsule(PyObject* cap) noexcept {
  if (PyCapsule_IsValid(cap, "used_dltensor_versioned")) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, tb);
}
void DeleteLegacyCapsule(PyObject* cap) noexcept {
  if (PyCapsule_IsValid(cap, "used_dltensor")) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, tb);
}

// Takes the tensor of a DLPack capsule over (no copy); the capsule is marked used.
Tensor FromCapsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    Tensor t = Tensor::FromDLPack(m);  // on failure the capsule keeps it: its destructor frees
    PyCapsule_SetName(c, "used_dltensor_versioned");
    return t;
  }
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    Tensor t = Tensor::FromDLPack(m);
    PyCapsule_SetName(c, "used_dltensor");
    return t;
  }
  PyErr_Clear();
  Throw(BP_ERR_TYPE,
        "from_dlpack: the producer's __dlpack__ did not return an unused DLPack capsule "
        "('dltensor_versioned' or 'dltensor'); was it consumed already?");
}

nb::object ToCapsule(const Tensor& t, bool versioned) {
  if (versioned) {
    DLManagedTensorVersioned* m = t.ToDLPackVersioned();
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", DeleteVersionedCapsule);
    if (cap == nullptr) {
      m->deleter(m);
      throw nb::python_error();
    }
    return nb::steal(cap);
  }
  DLManagedTensor* m = t.ToDLPack();
  PyObject* cap = PyCapsule_New(m, "dltensor", DeleteLegacyCapsule);
  if (cap == nullptr) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

}  // namespace backplane_python
