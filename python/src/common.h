// SPDX-License-Identifier: Apache-2.0
// What the pieces of backplane._backplane share: conversions between Python and Backplane
// values (convert.cc), the call path (call.cc), and the bindings of each (module.cc, call.cc).
#ifndef BACKPLANE_PYTHON_SRC_COMMON_H_
#define BACKPLANE_PYTHON_SRC_COMMON_H_

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

namespace backplane_python {

using backplane::Any;
using backplane::Device;
using backplane::Error;
using backplane::ObjectRef;
using backplane::Tensor;

// DLPack 0.8's kDLBool (Debian's dlpack.h is 0.6): NumPy exports bool arrays with it.
constexpr uint8_t kDLBoolCode = 6;

// ---- convert.cc ----
// The exception class of each error kind (_set_error_classes), and backplane.from_dlpack.
std::vector<nb::object>& ErrorClasses();
nb::object& FromDlpackFunction();
void SetErrorClasses(nb::list classes);
// Sets the Python error of `e`, of the class of its kind.
void RaiseBackplaneError(const Error& e);
[[noreturn]] void Throw(bp_status_t kind, const std::string& message);
const char* DTypeCodeName(uint8_t code);
std::string DTypeName(DLDataType t);
DLDataType ParseDType(const std::string& text);
DLDataType DTypeOf(nb::handle dtype);
Device DeviceOf(nb::handle d);
nb::object ObjectToPython(bp_object_t* obj);
nb::object ToPython(const bp_value_t& v);
Tensor FromCapsule(nb::handle capsule);
nb::object ToCapsule(const Tensor& t, bool versioned);

// ---- call.cc ----
// The value of device attribute `kind` of `d`, as a Python value.
nb::object AttrValue(const Device& d, int32_t kind);
// Binds Function, KernelFunction, Module and what builds, loads and calls them.
void BindCalls(nb::module_& m);

}  // namespace backplane_python

#endif  // BACKPLANE_PYTHON_SRC_COMMON_H_
