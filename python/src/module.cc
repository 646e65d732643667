// SPDX-License-Identifier: Apache-2.0
// backplane._backplane: the Python binding of the C++ host API (backplane/backplane.hpp),
// built with nanobind. The package backplane/ (__init__.py) re-exports it and adds what is
// simpler in Python (the error classes, from_dlpack, numpy()).
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

#include <atomic>
#include <backplane/backplane.hpp>
#include <chrono>
#include <cstdint>
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
//
// A call is the hot path (its goal: at most twice a nanobind no-op with the same
// arguments). Function and KernelFunction are called through their type's tp_call slot
// (SetCallSlot), not through nanobind's dispatcher: no overload resolution, no cast of self.
// Arguments are told apart by their exact Python type first (a pointer compare), tensors
// are read in place (nb::inst_ptr), and nothing is allocated for a call with up to
// kInlineArgs arguments.
//
// NumPy arrays (exactly numpy.ndarray, writable, of a dtype DLPack has) going to a module's
// function are read through the buffer protocol into a DLTensor on the stack that the call
// borrows: no capsule, no tensor object, no cache that could go stale (the buffer holds the
// array and its memory for the call, and every call reads the array's pointer, shape,
// strides, dtype and flags afresh). Any other array with __dlpack__, and a read-only NumPy
// array (which must go as a tensor object: the launch kit refuses it where the kernel
// writes, with its own message), is taken over through DLPack as before.

// The Python types the call path tells apart by pointer; set when the module loads.
struct CallTypes {
  PyTypeObject* tensor = nullptr;
  PyTypeObject* device = nullptr;
  PyObject* ndarray = nullptr;  // numpy.ndarray once NumPy is imported (a strong reference)
};
// Constant-initialised (no guard on the hot path); never destroyed: outlives the module.
CallTypes g_call_types;
CallTypes& Types() { return g_call_types; }

// numpy.ndarray if NumPy is imported (the call path never imports it), else nullptr.
PyTypeObject* NdarrayType() {
  CallTypes& t = Types();
  if (t.ndarray == nullptr) {
    PyObject* numpy = PyImport_GetModule(nb::str("numpy").ptr());  // new reference or null
    if (numpy == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    t.ndarray = PyObject_GetAttrString(numpy, "ndarray");
    Py_DECREF(numpy);
    if (t.ndarray == nullptr || !PyType_Check(t.ndarray)) {
      PyErr_Clear();
      Py_CLEAR(t.ndarray);
      return nullptr;
    }
  }
  return reinterpret_cast<PyTypeObject*>(t.ndarray);
}

// A writable NumPy array seen through the buffer protocol, as the DLTensor DLPack would give
// (numpy's __dlpack__: its data pointer, shape, strides in elements, byte offset 0, cpu:0).
constexpr int kMaxBufferDims = 8;
struct BufferArg {
  Py_buffer view;
  DLTensor dl;
  int64_t shape[kMaxBufferDims];
  int64_t strides[kMaxBufferDims];
};

// The DLPack dtype of a buffer's struct-module format, for the formats NumPy gives arrays of
// native byte order; false for any other (the array then goes through DLPack, which decides).
bool BufferDType(const Py_buffer& v, DLDataType* out) {
  if (v.format == nullptr || v.format[0] == '\0' || v.format[1] != '\0') return false;
  const Py_ssize_t size = v.itemsize;
  if (size != 1 && size != 2 && size != 4 && size != 8) return false;
  const auto bits = static_cast<uint8_t>(size * 8);
  switch (v.format[0]) {
    case '?':
      if (size != 1) return false;
      *out = backplane::MakeDType(kDLBoolCode, 8);
      return true;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
      *out = backplane::MakeDType(kDLInt, bits);
      return true;
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
      *out = backplane::MakeDType(kDLUInt, bits);
      return true;
    case 'e':
    case 'f':
    case 'd':
      if (size == 1) return false;
      *out = backplane::MakeDType(kDLFloat, bits);
      return true;
    default:
      return false;
  }
}

// Reads `a`, a numpy.ndarray, into `b`; false (and `b` holds nothing) where the array must go
// through DLPack instead: read-only, a dtype or byte order the formats above do not name, a
// stride that is not a whole number of elements, more than kMaxBufferDims dimensions.
bool ReadBuffer(PyObject* a, BufferArg* b) {
  if (PyObject_GetBuffer(a, &b->view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  const Py_buffer& v = b->view;
  bool ok = !v.readonly && v.ndim >= 0 && v.ndim <= kMaxBufferDims &&
            BufferDType(v, &b->dl.dtype) && (v.ndim == 0 || v.shape != nullptr);
  for (int i = 0; ok && i < v.ndim; ++i) {
    const Py_ssize_t stride = v.strides != nullptr ? v.strides[i] : 0;
    ok = v.strides != nullptr && stride % v.itemsize == 0;
    b->shape[i] = v.shape[i];
    b->strides[i] = stride / v.itemsize;
  }
  if (!ok) {
    PyBuffer_Release(&b->view);
    return false;
  }
  b->dl.data = v.buf;
  b->dl.device = DLDevice{kDLCPU, 0};
  b->dl.ndim = v.ndim;
  b->dl.shape = b->shape;
  b->dl.strides = b->strides;
  b->dl.byte_offset = 0;
  return true;
}

// Python arguments as packed values, and what they borrow until the call returns. Tensors
// and strings are borrowed from the caller's arguments; NumPy arrays from their buffers.
constexpr size_t kInlineArgs = 8;
class Packed {
 public:
  Packed() = default;
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;
  ~Packed() {
    for (int i = 0; i < num_buffers_; ++i) PyBuffer_Release(&buffers_[i].view);
  }

  bp_value_t* Values(size_t n) {
    if (n <= kInlineArgs) return inline_values_;
    more_.resize(n);
    return more_.data();
  }
  // A slot for a NumPy array's buffer, or nullptr when the inline ones are taken.
  BufferArg* NextBuffer() {
    return num_buffers_ < int{kInlineArgs} ? &buffers_[num_buffers_] : nullptr;
  }
  void KeepBuffer() { ++num_buffers_; }
  std::vector<Tensor>& keep() { return keep_; }

 private:
  bp_value_t inline_values_[kInlineArgs];
  std::vector<bp_value_t> more_;  // beyond kInlineArgs
  std::vector<Tensor> keep_;      // arrays taken over through DLPack
  int num_buffers_ = 0;
  BufferArg buffers_[kInlineArgs];  // filled up to num_buffers_ only
};

// A module's function: its tensors may go as borrowed DLTensors (module functions only read
// them during the call). Any other function gets tensor objects, which it may keep.
PyObject* KernelVectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) noexcept;
struct KernelFunction : backplane::Function {
  KernelFunction() = default;  // only for the probe that finds vectorcall's offset
  KernelFunction(backplane::Function f, const backplane::Module& m)
      : backplane::Function(std::move(f)), cpu_code(m.Kind() == "c" && m.Imports().empty()) {}
  // Python calls an instance through this pointer (the type's tp_vectorcall_offset points
  // at it: SetKernelVectorcall), with the arguments as they are on its stack: no tuple.
  vectorcallfunc vectorcall = &KernelVectorcall;
  // A function of a cpu ('c') module that imports none: it runs on the calling thread (and
  // its parallel loops' workers) and waits for no other device's work (see MayKeepGil).
  bool cpu_code = false;
};

// Python callables that Backplane holds (register_function). While one lives, Backplane code
// (a kernel's call_packed, on any thread) may call into Python and need the GIL.
std::atomic<int64_t>& LivePythonCallables() {
  static std::atomic<int64_t> n{0};
  return n;
}

// Whether a call of `f` may keep the GIL instead of releasing it around the call. Releasing
// and retaking it costs more than the rest of a small call together (docs/performance.md),
// and it serves only other threads that want the GIL while the call runs. There are none
// when (1) the calling thread is its interpreter's only thread (no other Python thread
// exists, and none can start without the GIL; a C thread that takes it with
// PyGILState_Ensure waits until the call returns, as it waits for any Python code), and
// (2) nothing the call does can wait for such a thread: the function is cpu code (its own
// threads are its parallel loops' workers) and no Python callable is registered (a
// call_packed from a worker would need the GIL the caller holds: a deadlock).
bool MayKeepGil(const KernelFunction& f) {
  if (!f.cpu_code || LivePythonCallables().load(std::memory_order_relaxed) != 0) return false;
  PyThreadState* ts = PyThreadState_Get();
  return PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(ts)) == ts &&
         PyThreadState_Next(ts) == nullptr;
}

// Whether the host has bp_tensor_flags (ABI 1.6); checked once, when the module loads.
bool& HostHasTensorFlags() {
  static bool has = false;
  return has;
}

bp_value_t PackTensor(const Tensor& t, bool kernel) {
  // To a kernel, a writable tensor goes as its DLTensor (the cheaper path through the launch
  // kit); a read-only one as the object, whose flag the kit checks against the buffers it
  // writes.
  if (kernel) {
    uint64_t flags = 0;
    if (HostHasTensorFlags()) backplane::Check(bp_tensor_flags(t.object().get(), &flags));
    if ((flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0) return backplane::detail::ToArg(t.dl());
  }
  return backplane::detail::ToArg(t.object());
}

// What backplane.from_dlpack(a) does for an array, without its Python frame: the producer's
// capsule (DLPack 1.x where it speaks it), taken over (FromCapsule).
Tensor ImportArray(nb::handle a) {
  nb::object dlpack = a.attr("__dlpack__");
  nb::object capsule;
  try {
    capsule = dlpack("max_version"_a = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = dlpack();  // a producer older than the 2023 array API: DLPack 0.x only
  }
  return FromCapsule(capsule);
}

// Any argument but the common cases PackArg tests first.
bp_value_t PackOther(PyObject* a, size_t i, Packed& p, bool kernel) {
  if (nb::isinstance<Tensor>(a)) return PackTensor(nb::cast<const Tensor&>(nb::handle(a)), kernel);
  if (PyLong_Check(a)) return backplane::detail::ToArg(nb::cast<int64_t>(nb::handle(a)));
  if (PyFloat_Check(a)) return backplane::detail::ToArg(PyFloat_AS_DOUBLE(a));
  if (a == Py_None) return backplane::detail::ArgValue(BP_VALUE_NONE);
  if (PyUnicode_Check(a)) {
    // The str's own UTF-8 copy, which lives as long as the str (the caller's argument).
    const char* s = PyUnicode_AsUTF8(a);
    if (s == nullptr) throw nb::python_error();
    return backplane::detail::ToArg(s);
  }
  if (nb::isinstance<Device>(a))
    return backplane::detail::ToArg(nb::cast<Device>(nb::handle(a)).dl);
  nb::handle h(a);
  const nb::object& from_dlpack = FromDlpackFunction();
  if (nb::hasattr(h, "__dlpack__") && from_dlpack.is_valid()) {
    // JAX, PyTorch, a read-only NumPy array: taken over without a copy for the call.
    p.keep().push_back(ImportArray(h));
    return backplane::detail::ToArg(p.keep().back().object());
  }
  if (nb::hasattr(h, "item") && nb::hasattr(h, "dtype")) {
    // A NumPy scalar (numpy.float32(1.5)): its Python value.
    nb::object item = h.attr("item")();
    if (PyFloat_Check(item.ptr())) return backplane::detail::ToArg(nb::cast<double>(item));
    return backplane::detail::ToArg(nb::cast<int64_t>(item));
  }
  Throw(BP_ERR_TYPE, "argument " + std::to_string(i) + " is a " +
                         nb::cast<std::string>(nb::handle(h.type()).attr("__name__")) +
                         "; pass a backplane.Tensor, an array with __dlpack__, an int, a "
                         "float, a str or a backplane.Device");
}

inline bp_value_t PackArg(PyObject* a, size_t i, Packed& p, bool kernel) {
  PyTypeObject* type = Py_TYPE(a);
  if (type == Types().tensor && nb::inst_ready(a)) {
    return PackTensor(*nb::inst_ptr<Tensor>(a), kernel);
  }
  if (type == &PyLong_Type) {
    const long long v = PyLong_AsLongLong(a);
    if (!(v == -1 && PyErr_Occurred())) return backplane::detail::ToArg(int64_t{v});
    PyErr_Clear();  // out of range: nanobind's cast says so
  }
  if (type == &PyFloat_Type) return backplane::detail::ToArg(PyFloat_AS_DOUBLE(a));
  if (kernel && type == NdarrayType()) {
    BufferArg* b = p.NextBuffer();
    if (b != nullptr && ReadBuffer(a, b)) {
      p.KeepBuffer();
      return backplane::detail::ToArg(&b->dl);
    }
  }
  return PackOther(a, i, p, kernel);
}

// Calls `f`; `keep_gil`: without releasing the GIL (MayKeepGil), else around the call, so a
// long kernel lets other Python threads run (tests/test_threads.py).
nb::object Call(const backplane::Function& f, PyObject* const* args, size_t n, bool kernel,
                bool keep_gil) {
  Packed p;
  bp_value_t* values = p.Values(n);
  for (size_t i = 0; i < n; ++i) values[i] = PackArg(args[i], i, p, kernel);
  bp_value_t result = backplane::detail::ArgValue(BP_VALUE_NONE);
  bp_status_t status;
  if (keep_gil) {
    status =
        backplane::detail::FunctionCall(f.object().get(), values, static_cast<int32_t>(n), &result);
  } else {
    nb::gil_scoped_release release;
    status =
        backplane::detail::FunctionCall(f.object().get(), values, static_cast<int32_t>(n), &result);
  }
  backplane::Check(status);
  if (result.type == BP_VALUE_NONE) return nb::none();
  Any owned(result);
  return ToPython(owned.raw());
}

// The exception being handled as the Python error nanobind's dispatcher would raise: the
// module's translator (backplane::Error), a Python error, then nanobind's default
// translator's mapping (nb_internals.cpp).
void RaiseCurrentException() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    RaiseBackplaneError(e);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::bad_alloc& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (const std::domain_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::length_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::range_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::overflow_error& e) {
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_SystemError, "an unknown C++ exception in a Backplane call");
  }
}

// The tp_call slot of Function (kKernel false) and KernelFunction (true): Python's call of an
// instance lands here directly. Errors become exceptions as nanobind's dispatcher makes them.
template <bool kKernel>
PyObject* CallSlot(PyObject* self, PyObject* args, PyObject* kwargs) noexcept {
  const char* what = kKernel ? "KernelFunction" : "Function";
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_Format(PyExc_TypeError, "%s.__call__() takes positional arguments only", what);
    return nullptr;
  }
  if (!nb::inst_ready(self)) {
    PyErr_Format(PyExc_TypeError, "%s is not initialised", what);
    return nullptr;
  }
  try {
    PyObject* const* items = &PyTuple_GET_ITEM(args, 0);
    const auto n = static_cast<size_t>(PyTuple_GET_SIZE(args));
    if constexpr (kKernel) {
      const auto* f = nb::inst_ptr<KernelFunction>(self);
      return Call(*f, items, n, true, MayKeepGil(*f)).release().ptr();
    }
    return Call(*nb::inst_ptr<backplane::Function>(self), items, n, false, false).release().ptr();
  } catch (...) {
    RaiseCurrentException();
    return nullptr;
  }
}

PyObject* KernelVectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) noexcept {
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
    PyErr_SetString(PyExc_TypeError, "KernelFunction.__call__() takes positional arguments only");
    return nullptr;
  }
  // Only a constructed instance has a non-null pointer at the offset (nanobind zeroes a new
  // instance), so `self` is ready here.
  try {
    const auto* f = nb::inst_ptr<KernelFunction>(self);
    return Call(*f, args, static_cast<size_t>(PyVectorcall_NARGS(nargsf)), true, MayKeepGil(*f))
        .release()
        .ptr();
  } catch (...) {
    RaiseCurrentException();
    return nullptr;
  }
}

// Makes KernelFunction a vectorcall type: its tp_vectorcall_offset is where an instance keeps
// KernelFunction::vectorcall, found on a probe instance (nanobind keeps the C++ object of an
// instance returned by value inside the Python object, at the same place in each). Where the
// pointer is null (an instance not yet constructed), Python falls back to tp_call (CallSlot).
void SetKernelVectorcall(nb::handle cls) {
  nb::object probe = nb::cast(KernelFunction());
  if (Py_TYPE(probe.ptr()) != reinterpret_cast<PyTypeObject*>(cls.ptr()) ||
      !nb::inst_ready(probe)) {
    return;  // keeps tp_call
  }
  const char* base = reinterpret_cast<const char*>(probe.ptr());
  const char* field =
      reinterpret_cast<const char*>(&nb::inst_ptr<KernelFunction>(probe)->vectorcall);
  const Py_ssize_t offset = field - base;
  if (offset <= 0 || static_cast<size_t>(offset) + sizeof(vectorcallfunc) >
                         static_cast<size_t>(Py_TYPE(probe.ptr())->tp_basicsize)) {
    return;  // not inside the Python object: keeps tp_call
  }
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  type->tp_vectorcall_offset = offset;
  type->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  PyType_Modified(type);
}

// Points the class's tp_call at CallSlot. Called after its "__call__" is defined (for its
// docstring and the stubs; defining it pointed tp_call at the generic slot that looks it up
// and goes through nanobind's dispatcher).
template <bool kKernel>
void SetCallSlot(nb::handle cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  type->tp_call = &CallSlot<kKernel>;
  PyType_Modified(type);
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
    explicit Held(PyObject* f) : fn(f) {
      Py_INCREF(fn);
      LivePythonCallables().fetch_add(1, std::memory_order_relaxed);
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() {
      LivePythonCallables().fetch_sub(1, std::memory_order_relaxed);
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
  auto function_cls =
      nb::class_<backplane::Function>(m, "Function",
                                      "A packed function (a module's kernel, or a registered one).")
          .def(
              "__call__",
              [](const backplane::Function& f, nb::args args) {
                return Call(f, &PyTuple_GET_ITEM(args.ptr(), 0), args.size(), false, false);
              },
              "Calls it with tensors (backplane.Tensor or any array with __dlpack__), ints, "
              "floats, "
              "strs and devices.");
  auto kernel_function_cls =
      nb::class_<KernelFunction, backplane::Function>(m, "KernelFunction",
                                                      "A module's function (Module[name]).")
          .def(
              "__call__",
              [](const KernelFunction& f, nb::args args) {
                return Call(f, &PyTuple_GET_ITEM(args.ptr(), 0), args.size(), true, MayKeepGil(f));
              },
              "Calls it with tensors (backplane.Tensor or any array with __dlpack__), ints, "
              "floats, "
              "strs and devices.");
  // Calls skip nanobind's dispatcher (see ---- calls ----); __call__ stays for its docstring.
  SetCallSlot<false>(function_cls);
  SetCallSlot<true>(kernel_function_cls);
  SetKernelVectorcall(kernel_function_cls);
  Types().tensor = reinterpret_cast<PyTypeObject*>(nb::type<Tensor>().ptr());
  Types().device = reinterpret_cast<PyTypeObject*>(nb::type<Device>().ptr());
  HostHasTensorFlags() = backplane::detail::HostHas(BACKPLANE_HOST_ENTRY_END(tensor_flags));

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
            return KernelFunction(mod.GetFunction(name, query_imports), mod);
          },
          "name"_a, "query_imports"_a = true)
      .def("__getitem__",
           [](const backplane::Module& mod, const std::string& name) {
             return KernelFunction(mod.GetFunction(name), mod);
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
  // The C++ call under a Python call, timed in a C++ loop (the arguments packed once): what
  // the benchmark subtracts to name the binding's own cost.
  m.def(
      "_cpp_call_ns",
      [](const KernelFunction& f, nb::tuple args, int64_t number) {
        Packed p;
        const size_t n = args.size();
        bp_value_t* values = p.Values(n);
        for (size_t i = 0; i < n; ++i) values[i] = PackArg(args[i].ptr(), i, p, true);
        const auto start = std::chrono::steady_clock::now();
        for (int64_t k = 0; k < number; ++k) {
          bp_value_t result = backplane::detail::ArgValue(BP_VALUE_NONE);
          backplane::Check(backplane::detail::FunctionCall(f.object().get(), values,
                                                           static_cast<int32_t>(n), &result));
          Any owned(result);
        }
        const std::chrono::duration<double, std::nano> t = std::chrono::steady_clock::now() - start;
        return t.count() / static_cast<double>(number);
      },
      "f"_a, "args"_a, "number"_a);
  // A no-op taking any 3 objects as they are: the baseline of a call with 3 NumPy arrays.
  m.def(
      "_noop3_any", [](nb::handle, nb::handle, nb::handle) {}, "a"_a, "b"_a, "c"_a);
  // The same, releasing and taking back the GIL as a call does (what that costs).
  m.def(
      "_noop3_release_gil",
      [](const Tensor&, const Tensor&, const Tensor&) { nb::gil_scoped_release release; }, "a"_a,
      "b"_a, "c"_a);
}
