// SPDX-License-Identifier: Apache-2.0
// The call path of Function and KernelFunction (the hot path: a type's own call slot, no
// allocation for a few arguments) and the bindings of functions and modules.
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "common.h"

using namespace nb::literals;

namespace backplane_python {

// ---- calls -------------------------------------------------------------------------------
//
// A call is the hot path (at most twice a nanobind no-op with the same
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

void BindCalls(nb::module_& m) {
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

}  // namespace backplane_python
