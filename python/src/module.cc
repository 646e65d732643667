// SPDX-License-Identifier: Apache-2.0
// backplane._backplane: the Python binding of the C++ host API (backplane/backplane.hpp),
// built with nanobind. The package backplane/ (__init__.py) re-exports it and adds what is
// simpler in Python (the error classes, from_dlpack, numpy()).
//
// The GIL is released around everything that may take long or wait: builds, module loads,
// copies, syncs and function calls. Errors of Backplane (backplane::Error) become the Python
// class of their kind (backplane.InvalidArgumentError, ...), which __init__.py hands over with
// _set_error_classes before anything else runs.
#include "common.h"

using namespace nb::literals;
using namespace backplane_python;

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
      "enable_layers",
      [](const std::string& spec) {
        nb::gil_scoped_release release;
        backplane::EnableLayers(spec);
      },
      "spec"_a,
      "Enables layers (docs/layer-guide.md): 'validation', 'trace:file=run.json', or several "
      "separated by commas, outermost first. Call it before the first use of a device.");
  m.def(
      "active_layers",
      [] {
        nb::gil_scoped_release release;
        return backplane::ActiveLayers();
      },
      "The enabled layers, outermost first, each 'name' or 'name:options'.");
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

  BindCalls(m);
}
