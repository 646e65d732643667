// SPDX-License-Identifier: Apache-2.0
// backplane._backplane: the Python binding of the C++ host API (backplane/backplane.hpp),
// built with nanobind. The package backplane/ (__init__.py) re-exports it and adds what is
// simpler in Python (the error classes, from_dlpack, numpy()). Issue 19, items 4 to 6.
//
// The GIL is released around everything that may take long or wait: builds, module loads,
// copies, syncs and function calls. Errors of Backplane (backplane::Error) become the Python
// class of their kind (backplane.InvalidArgumentError, ...), which __init__.py hands over with
// _set_error_classes before anything else runs.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <backplane/backplane.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using backplane::Any;
using backplane::Device;
using backplane::Error;
using backplane::ObjectRef;
using backplane::Tensor;

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

// DLPack 0.8's kDLBool (Debian's dlpack.h is 0.6): NumPy exports bool arrays with it.
constexpr uint8_t kDLBoolCode = 6;

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

nb::object ToPython(const bp_value_t& v);

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

// ---- calls -------------------------------------------------------------------------------

// Python arguments as packed values; `keep` holds what they borrow until the call returns
// (only arrays of other libraries and strings need it; tensors are borrowed from `args`).
constexpr size_t kInlineArgs = 8;
struct Packed {
  bp_value_t inline_values[kInlineArgs];
  std::vector<bp_value_t> more;  // beyond kInlineArgs
  std::vector<Tensor> keep;
  std::deque<std::string> strings;  // stable addresses for the c_str()s in values
  bp_value_t* values = inline_values;
};

// A module's function: its tensors may go as borrowed DLTensors (module functions only read
// them during the call). Any other function gets tensor objects, which it may keep.
struct KernelFunction : backplane::Function {
  explicit KernelFunction(backplane::Function f) : backplane::Function(std::move(f)) {}
};

bp_value_t PackOne(nb::handle a, size_t i, Packed& p, nb::handle from_dlpack, bool kernel) {
  if (nb::isinstance<Tensor>(a)) {
    // To a kernel, a writable tensor goes as its DLTensor (the cheaper path through the launch
    // kit); a read-only one as the object, whose flag the kit checks against the buffers it
    // writes.
    const Tensor& t = nb::cast<const Tensor&>(a);
    if (kernel && !t.IsReadOnly()) return backplane::detail::ToArg(t.dl());
    return backplane::detail::ToArg(t.object());
  }
  if (PyLong_Check(a.ptr())) return backplane::detail::ToArg(nb::cast<int64_t>(a));
  if (PyFloat_Check(a.ptr())) return backplane::detail::ToArg(PyFloat_AS_DOUBLE(a.ptr()));
  if (a.is_none()) return backplane::detail::ArgValue(BP_VALUE_NONE);
  if (nb::isinstance<nb::str>(a)) {
    p.strings.push_back(nb::cast<std::string>(a));
    return backplane::detail::ToArg(p.strings.back().c_str());
  }
  if (nb::isinstance<Device>(a)) return backplane::detail::ToArg(nb::cast<Device>(a).dl);
  if (nb::hasattr(a, "__dlpack__") && from_dlpack.is_valid()) {
    // NumPy, JAX, PyTorch: taken over without a copy for the call.
    p.keep.push_back(nb::cast<Tensor>(from_dlpack(a)));
    return backplane::detail::ToArg(p.keep.back().object());
  }
  if (nb::hasattr(a, "item") && nb::hasattr(a, "dtype")) {
    // A NumPy scalar (numpy.float32(1.5)): its Python value.
    nb::object item = a.attr("item")();
    if (PyFloat_Check(item.ptr())) return backplane::detail::ToArg(nb::cast<double>(item));
    return backplane::detail::ToArg(nb::cast<int64_t>(item));
  }
  Throw(BP_ERR_TYPE, "argument " + std::to_string(i) + " is a " +
                         nb::cast<std::string>(nb::handle(a.type()).attr("__name__")) +
                         "; pass a backplane.Tensor, an array with __dlpack__, an int, a "
                         "float, a str or a backplane.Device");
}

nb::object Call(const backplane::Function& f, nb::args args, nb::handle from_dlpack, bool kernel) {
  Packed p;
  const size_t n = args.size();
  if (n > kInlineArgs) {
    p.more.resize(n);
    p.values = p.more.data();
  }
  for (size_t i = 0; i < n; ++i) p.values[i] = PackOne(args[i], i, p, from_dlpack, kernel);
  bp_value_t result = backplane::detail::ArgValue(BP_VALUE_NONE);
  bp_status_t status;
  {
    nb::gil_scoped_release release;
    status = backplane::detail::FunctionCall(f.object().get(), p.values, static_cast<int32_t>(n),
                                             &result);
  }
  backplane::Check(status);
  if (result.type == BP_VALUE_NONE) return nb::none();
  Any owned(result);
  return ToPython(owned.raw());
}

// A Python result as an owned value: None, int, float, str, Tensor, Device.
Any FromPython(nb::handle r, const std::string& name) {
  bp_value_t v = backplane::detail::ArgValue(BP_VALUE_NONE);
  if (r.is_none()) return Any();
  if (PyLong_Check(r.ptr())) {
    v.type = BP_VALUE_INT;
    v.u.v_int64 = nb::cast<int64_t>(r);
    return Any(v);
  }
  if (PyFloat_Check(r.ptr())) {
    v.type = BP_VALUE_FLOAT;
    v.u.v_float64 = PyFloat_AS_DOUBLE(r.ptr());
    return Any(v);
  }
  if (nb::isinstance<nb::str>(r)) {
    v.type = BP_VALUE_OBJECT;
    v.u.v_obj = backplane::MakeString(nb::cast<std::string>(r)).release();
    return Any(v);
  }
  if (nb::isinstance<Tensor>(r)) {
    v.type = BP_VALUE_OBJECT;
    v.u.v_obj = nb::cast<const Tensor&>(r).object().get();
    bp_object_retain(v.u.v_obj);
    return Any(v);
  }
  if (nb::isinstance<Device>(r)) {
    v.type = BP_VALUE_DEVICE;
    v.u.v_device = nb::cast<Device>(r).dl;
    return Any(v);
  }
  Throw(BP_ERR_TYPE, "Python function '" + name + "' returned a " +
                         nb::cast<std::string>(nb::handle(r.type()).attr("__name__")) +
                         "; return None, an int, a float, a str, a backplane.Tensor or a Device");
}

// The error kind of a Python exception raised by a registered Python function.
bp_status_t KindOf(const nb::python_error& e) {
  nb::handle type = e.type();
  const auto is = [&](PyObject* base) { return PyObject_IsSubclass(type.ptr(), base) == 1; };
  if (nb::hasattr(type, "kind")) {
    const std::string kind = nb::cast<std::string>(nb::str(type.attr("kind")));
    for (int k = 1; k <= BP_ERR_INTERNAL; ++k) {
      const char* n = bp_error_kind_name(static_cast<bp_status_t>(k));
      if (n != nullptr && kind == n) return static_cast<bp_status_t>(k);
    }
  }
  if (is(PyExc_ValueError)) return BP_ERR_INVALID_ARGUMENT;
  if (is(PyExc_TypeError)) return BP_ERR_TYPE;
  if (is(PyExc_LookupError)) return BP_ERR_NOT_FOUND;
  if (is(PyExc_MemoryError)) return BP_ERR_OUT_OF_MEMORY;
  if (is(PyExc_NotImplementedError)) return BP_ERR_UNSUPPORTED;
  return BP_ERR_INTERNAL;
}

// A Python callable as a Backplane function: called with the GIL taken, its arguments shown as
// Python values, its exception an error of the matching kind. The callable is released with
// the GIL, or leaked when the interpreter is gone (a function object the registry keeps until
// the process ends outlives Python).
backplane::Function FunctionOf(nb::callable fn, std::string name) {
  struct Held {
    PyObject* fn;
    explicit Held(PyObject* f) : fn(f) { Py_INCREF(fn); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() {
      if (!Py_IsInitialized()) return;
      PyGILState_STATE state = PyGILState_Ensure();
      Py_DECREF(fn);
      PyGILState_Release(state);
    }
  };
  auto held = std::make_shared<Held>(fn.ptr());
  return backplane::Function::FromCallable([held, name](backplane::PackedArgs args) -> Any {
    nb::gil_scoped_acquire gil;
    try {
      nb::list py_args;
      for (int32_t i = 0; i < args.size(); ++i) py_args.append(ToPython(args[i]));
      nb::object r = nb::handle(held->fn)(*py_args);
      return FromPython(r, name);
    } catch (nb::python_error& e) {
      const bp_status_t kind = KindOf(e);
      throw Error(kind, "Python function '" + name + "' raised " +
                            nb::cast<std::string>(nb::handle(e.type()).attr("__name__")) + ": " +
                            nb::cast<std::string>(nb::str(e.value())));
    }
  });
}

std::string ReadIr(const std::string& text_or_path) {
  if (text_or_path.find('\n') == std::string::npos &&
      text_or_path.rfind("# backplane-ir", 0) != 0) {
    nb::object path = nb::module_::import_("pathlib").attr("Path")(text_or_path);
    if (nb::cast<bool>(path.attr("is_file")())) {
      return nb::cast<std::string>(path.attr("read_text")("encoding"_a = "utf-8"));
    }
    Throw(BP_ERR_INVALID_ARGUMENT,
          "build: '" + text_or_path +
              "' is neither kernel IR text (it has no newline) nor a file that exists; pass the "
              "IR text or the path of a .bpir file");
  }
  return text_or_path;
}

nb::object AttrValue(const Device& d, int32_t kind) {
  bp_value_t v;
  backplane::Check(bp_device_get_attr(d.dl, kind, &v));
  Any owned(v);
  return ToPython(owned.raw());
}

}  // namespace

NB_MODULE(_backplane, m) {
  m.doc() = "Backplane's C++ host API (the package backplane re-exports it)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      RaiseBackplaneError(e);
    }
  });
  m.def("_set_error_classes", &SetErrorClasses, "classes"_a,
        "Sets the exception class of each error kind (index: the kind's number).");
  m.def(
      "_set_from_dlpack", [](nb::object f) { FromDlpackFunction() = std::move(f); }, "f"_a);
  m.def(
      "error_kind_name", [](int kind) { return std::string(bp_error_kind_name(kind)); }, "kind"_a,
      "The name of an error kind ('BP_ERR_INVALID_ARGUMENT').");
  m.attr("abi_version") = nb::make_tuple(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  m.attr("_install_kernel_dir") = BACKPLANE_PY_KERNEL_DIR;

  // ---- Device ----
  nb::class_<Device>(m, "Device",
                     "A device: a type ('cpu', 'opencl', 'vulkan', 'cuda') and an index.")
      .def(
          "__init__",
          [](Device* self, const std::string& spec, std::optional<int64_t> index) {
            Device d = Device::Parse(spec);
            if (index) {
              if (*index < 0 || *index > INT32_MAX) {
                Throw(BP_ERR_INVALID_ARGUMENT, "Device('" + spec + "', " + std::to_string(*index) +
                                                   "): the index must be 0 to 2147483647");
              }
              d.dl.device_id = static_cast<int32_t>(*index);
            }
            new (self) Device(d);
          },
          "spec"_a, "index"_a = nb::none(),
          "Device('opencl:0') or Device('opencl', 0). An unknown type name raises NotFoundError.")
      .def_prop_ro("type", &Device::TypeName, "The device type's name ('opencl').")
      .def_prop_ro(
          "index", [](const Device& d) { return d.dl.device_id; }, "The index within its type.")
      .def_prop_ro(
          "type_id", [](const Device& d) { return static_cast<int32_t>(d.dl.device_type); },
          "The device type's id (DLDeviceType for the DLPack types).")
      .def_prop_ro(
          "exists", [](const Device& d) { return backplane::DeviceAPI::Get(d).Exists(); },
          "Whether the device is here (its plugin loaded and reports it).")
      .def_prop_ro(
          "name", [](const Device& d) { return AttrValue(d, BP_ATTR_DEVICE_NAME); },
          "The device's name, or None where its backend has none.")
      .def(
          "attr",
          [](const Device& d, const std::string& name) {
            for (int32_t k = 0; k < BP_ATTR_COUNT; ++k) {
              const char* n = bp_device_attr_name(k);
              if (n != nullptr && name == n) return AttrValue(d, k);
            }
            Throw(BP_ERR_NOT_FOUND,
                  "device attribute '" + name + "' is not known; Device.attrs() lists them all");
          },
          "name"_a, "One attribute ('max_threads_per_block'), None where it does not apply.")
      .def(
          "attrs",
          [](const Device& d) {
            nb::dict out;
            for (int32_t k = 0; k < BP_ATTR_COUNT; ++k) {
              const char* n = bp_device_attr_name(k);
              if (n != nullptr) out[n] = AttrValue(d, k);
            }
            return out;
          },
          "Every attribute by name (docs/device-attributes.md), None where one does not apply.")
      .def(
          "properties",
          [](const Device& d) {
            backplane::DeviceAPI api = backplane::DeviceAPI::Get(d);
            nb::dict out;
            for (const std::string& key : api.ListProperties()) {
              Any v = api.GetProperty(key);
              out[key.c_str()] = ToPython(v.raw());
            }
            return out;
          },
          "The backend's string-keyed properties ('status', ...).")
      .def("__repr__", [](const Device& d) { return "Device('" + d.ToString() + "')"; })
      .def("__str__", &Device::ToString)
      .def("__eq__",
           [](const Device& a, nb::handle b) {
             return nb::isinstance<Device>(b) && a == nb::cast<Device>(b);
           })
      .def("__hash__", [](const Device& d) {
        return static_cast<int64_t>(d.dl.device_type) * 1000003 + d.dl.device_id;
      });

  m.def(
      "devices",
      [] {
        std::vector<backplane::DeviceEntry> entries;
        {
          nb::gil_scoped_release release;
          entries = backplane::ListDevices();
        }
        std::vector<Device> out;
        for (const auto& e : entries) out.push_back(e.device);
        return out;
      },
      "Every device here, loading the plugins that provide DeviceAPIs.");

  // ---- Stream and Event ----
  nb::class_<backplane::Stream>(m, "Stream", "A stream (queue) of work on one device.")
      .def(
          "__init__",
          [](backplane::Stream* self, nb::handle dev) {
            new (self) backplane::Stream(DeviceOf(dev));
          },
          "device"_a)
      .def_prop_ro("device", &backplane::Stream::device)
      .def_prop_ro(
          "handle",
          [](const backplane::Stream& s) { return reinterpret_cast<uintptr_t>(s.handle()); },
          "The stream's handle as a number (for native interop).")
      .def(
          "sync",
          [](const backplane::Stream& s) {
            nb::gil_scoped_release release;
            s.Sync();
          },
          "Waits for the work queued on the stream.")
      .def("set_active", &backplane::Stream::SetActive,
           "Makes this the stream that functions called on this thread queue work on.")
      .def("wait_for", &backplane::Stream::WaitFor, "other"_a,
           "Work queued here from now on waits for the work queued on `other` so far.");

  nb::class_<backplane::Event>(m, "Event",
                               "A point in a stream's work, to order streams and time work.")
      .def(
          "__init__",
          [](backplane::Event* self, nb::handle dev) {
            new (self) backplane::Event(DeviceOf(dev));
          },
          "device"_a)
      .def(
          "record",
          [](const backplane::Event& e, const backplane::Stream* s) {
            nb::gil_scoped_release release;
            e.Record(s != nullptr ? s->handle() : nullptr);
          },
          "stream"_a = nb::none(), "Marks the point after the work queued on `stream` so far.")
      .def("wait", &backplane::Event::MakeWait, "stream"_a,
           "Work queued on `stream` from now on waits for the recorded point (no host wait).")
      .def_prop_ro("done", &backplane::Event::Done, "Whether the recorded point is passed.")
      .def(
          "sync",
          [](const backplane::Event& e) {
            nb::gil_scoped_release release;
            e.Sync();
          },
          "Waits until the recorded point is passed.")
      .def(
          "elapsed_ms",
          [](const backplane::Event& end, const backplane::Event& start) {
            nb::gil_scoped_release release;
            return end.ElapsedMsSince(start);
          },
          "start"_a, "Milliseconds from `start`'s point to this event's (waits for both).");

  // ---- Tensor ----
  nb::class_<Tensor>(m, "Tensor",
                     "A tensor on a device (a DLTensor and the memory it owns or borrows).")
      .def_prop_ro("shape",
                   [](const Tensor& t) {
                     nb::list s;
                     for (int64_t e : t.shape()) s.append(e);
                     return nb::tuple(s);
                   })
      .def_prop_ro("dtype", [](const Tensor& t) { return DTypeName(t.dtype()); })
      .def_prop_ro("device", &Tensor::device)
      .def_prop_ro("ndim", [](const Tensor& t) { return t.dl()->ndim; })
      .def_prop_ro("size", &Tensor::NumElements, "The number of elements.")
      .def_prop_ro("nbytes", &Tensor::NumBytes)
      .def_prop_ro("read_only", &Tensor::IsReadOnly,
                   "Whether its DLPack producer marked it read-only (kernels may not write it).")
      .def_prop_ro(
          "data_ptr",
          [](const Tensor& t) {
            return reinterpret_cast<uintptr_t>(t.dl()->data) + t.dl()->byte_offset;
          },
          "The address of the first element (a device handle plus offset off the CPU).")
      .def(
          "_copy_from_tensor",
          [](const Tensor& dst, const Tensor& src) {
            if (dst.IsReadOnly()) {
              Throw(BP_ERR_INVALID_ARGUMENT,
                    "copy_from: the tensor is read-only; copy into one of your own");
            }
            nb::gil_scoped_release release;
            backplane::CopyDataFromTo(src.dl(), dst.dl(), nullptr);
            backplane::Check(bp_device_stream_sync(dst.dl()->device, nullptr));
            backplane::Check(bp_device_stream_sync(src.dl()->device, nullptr));
          },
          "src"_a)
      .def(
          "to",
          [](const Tensor& t, nb::handle dev) {
            Device d = DeviceOf(dev);
            nb::gil_scoped_release release;
            return t.CopyTo(d);
          },
          "device"_a, "A copy of the tensor on `device`.")
      .def(
          "native_handle",
          [](const Tensor& t, int kind) {
            return t.NativeHandle(static_cast<bp_native_kind_t>(kind));
          },
          "kind"_a, "The backend's handle of `kind` (NATIVE_BUFFER, ...) for the tensor's memory.")
      .def("_to_capsule", &ToCapsule, "versioned"_a)
      .def("__repr__", [](const Tensor& t) {
        std::string s = "Tensor(shape=(";
        const std::vector<int64_t> shape = t.shape();
        for (size_t i = 0; i < shape.size(); ++i) {
          s += (i ? ", " : "") + std::to_string(shape[i]);
        }
        if (shape.size() == 1) s += ",";
        return s + "), dtype=" + DTypeName(t.dtype()) + ", device=" + t.device().ToString() + ")";
      });

  m.def(
      "empty",
      [](std::vector<int64_t> shape, nb::handle dtype, nb::handle dev) {
        const DLDataType t = DTypeOf(dtype);
        const Device d = DeviceOf(dev);
        nb::gil_scoped_release release;
        return Tensor::Empty(shape, t, d);
      },
      "shape"_a, "dtype"_a = "float32", "device"_a = "cpu:0",
      "An uninitialised compact tensor of `shape` and `dtype` on `device`.");
  m.def("_from_capsule", &FromCapsule, "capsule"_a);

  // ---- Target ----
  nb::class_<backplane::Target>(
      m, "Target", "An immutable Target: the kind and attributes of the device code runs on.")
      .def(
          "__init__",
          [](backplane::Target* self, const std::string& text) {
            new (self) backplane::Target(backplane::Target::Parse(text));
          },
          "text"_a, "Target('opencl'), Target('c -num-cores=2'), a tag, or its JSON.")
      .def_static(
          "from_device",
          [](nb::handle dev, const std::string& kind) {
            return backplane::Target::FromDevice(DeviceOf(dev), kind);
          },
          "device"_a, "kind"_a = "", "The Target of a device here, its attributes read from it.")
      .def_prop_ro("kind", &backplane::Target::Kind)
      .def_prop_ro("json", &backplane::Target::ToJson, "The Target as JSON text.")
      .def_prop_ro("keys", &backplane::Target::Keys,
                   "The Target's keys, the families it belongs to (['cpu'], ['opencl', 'gpu']).")
      .def("__str__", &backplane::Target::ToJson)
      .def("__repr__", [](const backplane::Target& t) { return "Target(" + t.ToJson() + ")"; });

  // ---- Function and Module ----
  nb::class_<backplane::Function>(m, "Function",
                                  "A packed function (a module's kernel, or a registered one).")
      .def(
          "__call__",
          [](const backplane::Function& f, nb::args args) {
            return Call(f, args, FromDlpackFunction(), /*kernel=*/false);
          },
          "Calls it with tensors (backplane.Tensor or any array with __dlpack__), ints, floats, "
          "strs and devices.");
  nb::class_<KernelFunction, backplane::Function>(m, "KernelFunction",
                                                  "A module's function (Module[name]).")
      .def(
          "__call__",
          [](const KernelFunction& f, nb::args args) {
            return Call(f, args, FromDlpackFunction(), /*kernel=*/true);
          },
          "Calls it with tensors (backplane.Tensor or any array with __dlpack__), ints, floats, "
          "strs and devices.");

  m.def(
      "get_function", [](const std::string& name) { return backplane::Function::Get(name); },
      "name"_a, "The registered function `name` (loading the plugin that provides it).");
  m.def(
      "register_function",
      [](const std::string& name, nb::callable fn, bool allow_override) {
        backplane::Registry::Set(name, FunctionOf(std::move(fn), name), allow_override);
      },
      "name"_a, "fn"_a, "allow_override"_a = false,
      "Registers a Python callable as the function `name`, callable from C, C++ and Python "
      "(its arguments as Python values; an exception it raises becomes an error of the "
      "matching kind).");
  m.def(
      "remove_function", [](const std::string& name) { backplane::Registry::Remove(name); },
      "name"_a, "Removes the registered function `name` (NotFoundError if absent).");
  m.def(
      "list_functions", [] { return backplane::Registry::List(); },
      "The names of the registered functions.");

  nb::class_<backplane::Module>(m, "Module", "A built or loaded module: functions over kernels.")
      .def_prop_ro("kind", &backplane::Module::Kind, "'c', 'opencl', 'vulkan', 'cuda', ...")
      .def_prop_ro("functions", &backplane::Module::ListFunctions)
      .def_prop_ro("imports", &backplane::Module::Imports,
                   "The modules this one imports: for a GPU Target, the host code module "
                   "('ir_host') imports the kernels' module, whose source() is the kernels'.")
      .def(
          "get_function",
          [](const backplane::Module& mod, const std::string& name, bool query_imports) {
            return KernelFunction(mod.GetFunction(name, query_imports));
          },
          "name"_a, "query_imports"_a = true)
      .def("__getitem__",
           [](const backplane::Module& mod, const std::string& name) {
             return KernelFunction(mod.GetFunction(name));
           })
      .def("source", &backplane::Module::InspectSource, "format"_a = "",
           "The generated source (C, OpenCL C, GLSL, CUDA C) where the module keeps it.")
      .def(
          "to_bytes",
          [](const backplane::Module& mod) {
            std::string bytes;
            {
              nb::gil_scoped_release release;
              bytes = mod.SaveToBytes();
            }
            return nb::bytes(bytes.data(), bytes.size());
          },
          "The module and its imports in Backplane's module file format.")
      .def(
          "save",
          [](const backplane::Module& mod, const std::string& path) {
            std::string bytes;
            {
              nb::gil_scoped_release release;
              bytes = mod.SaveToBytes();
            }
            nb::object f = nb::module_::import_("builtins").attr("open")(path, "wb");
            f.attr("write")(nb::bytes(bytes.data(), bytes.size()));
            f.attr("close")();
          },
          "path"_a, "Writes to_bytes() to `path`.");

  m.def(
      "_load_module_bytes",
      [](nb::bytes data, bool allow_native) {
        std::string bytes(static_cast<const char*>(data.data()), data.size());
        nb::gil_scoped_release release;
        return backplane::Module::LoadFromBytes(bytes, backplane::ModuleLoadOptions{allow_native});
      },
      "data"_a, "allow_native"_a = false);

  m.def(
      "build",
      [](const std::string& ir, const backplane::Target& target,
         std::optional<backplane::Target> host, const std::string& source_name) {
        const std::string text = ReadIr(ir);
        const std::string name = source_name.empty() && text != ir ? ir : source_name;
        nb::gil_scoped_release release;
        return backplane::Build(text, target, host ? *host : backplane::Target(), name);
      },
      "ir"_a, "target"_a, "host"_a = nb::none(), "source_name"_a = "",
      "Builds kernel IR (its text, or the path of a .bpir file) for `target`.");

  // The bp_native_kind_t values.
  m.attr("NATIVE_BUFFER") = static_cast<int>(BP_NATIVE_BUFFER);
  m.attr("NATIVE_BUFFER_OFFSET") = static_cast<int>(BP_NATIVE_BUFFER_OFFSET);
  m.attr("NATIVE_MEMORY") = static_cast<int>(BP_NATIVE_MEMORY);
  m.attr("NATIVE_MEMORY_OFFSET") = static_cast<int>(BP_NATIVE_MEMORY_OFFSET);
  m.attr("NATIVE_QUEUE") = static_cast<int>(BP_NATIVE_QUEUE);
  m.attr("NATIVE_QUEUE_FAMILY") = static_cast<int>(BP_NATIVE_QUEUE_FAMILY);
  m.attr("NATIVE_CONTEXT") = static_cast<int>(BP_NATIVE_CONTEXT);
  m.attr("NATIVE_DEVICE") = static_cast<int>(BP_NATIVE_DEVICE);
  m.attr("NATIVE_PLATFORM") = static_cast<int>(BP_NATIVE_PLATFORM);
  m.def(
      "native_handle",
      [](nb::handle dev, int kind, const backplane::Stream* stream) {
        return backplane::NativeHandle(DeviceOf(dev), static_cast<bp_native_kind_t>(kind),
                                       stream != nullptr ? stream->handle() : nullptr);
      },
      "device"_a, "kind"_a, "stream"_a = nb::none(),
      "The backend's handle of `kind` on `device` (a stream's queue with NATIVE_QUEUE).");

  // A no-op of the same shape as a call with three tensors: the baseline of the call benchmark.
  m.def(
      "_noop3", [](const Tensor&, const Tensor&, const Tensor&) {}, "a"_a, "b"_a, "c"_a);
  // The same, releasing and taking back the GIL as a call does (what that costs).
  m.def(
      "_noop3_release_gil",
      [](const Tensor&, const Tensor&, const Tensor&) { nb::gil_scoped_release release; }, "a"_a,
      "b"_a, "c"_a);
}
