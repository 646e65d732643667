// SPDX-License-Identifier: Apache-2.0
// A session of the remote device server (session.hpp): loading modules, calling functions, and
// the values both carry. A call's tensor arguments are views of the session's buffers, checked
// to stay inside them; modules with native code load only with --allow-native-modules, and a
// registered function is callable by name only when --expose names it, never from the host code
// of an uploaded module (loaded with BP_MODULE_LOAD_NO_GLOBAL_CALLS).
#include <backplane/c_api.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/ir/version.hpp>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/remote/common.hpp"
#include "session.hpp"

namespace backplane {
namespace remote {

namespace {

uint64_t CheckedAdd(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) Fail(BP_ERR_INVALID_ARGUMENT, what + " overflows");
  return r;
}

}  // namespace

DLDataType ToDL(const pb::DataType& t, const std::string& what) {
  if (t.code() > 255 || t.bits() == 0 || t.bits() > 255 || t.lanes() == 0 || t.lanes() > 65535) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": dtype (code " + std::to_string(t.code()) + ", bits " +
                                      std::to_string(t.bits()) + ", lanes " +
                                      std::to_string(t.lanes()) +
                                      ") is not one DLPack can hold (code 0..255, bits 1..255, "
                                      "lanes 1..65535)");
  }
  return DLDataType{static_cast<uint8_t>(t.code()), static_cast<uint8_t>(t.bits()),
                    static_cast<uint16_t>(t.lanes())};
}

namespace {

void FromDL(DLDataType t, pb::DataType* out) {
  out->set_code(t.code);
  out->set_bits(t.bits);
  out->set_lanes(t.lanes);
}

// An array object as a list of strings or of ints; false when it holds anything else.
bool ArrayToValue(const bp_object_t* array, pb::Value* out) {
  size_t n = 0;
  Must(bp_array_size(array, &n), "reading an array");
  std::vector<bp_value_t> items(n);
  bool all_ints = true;
  bool all_strings = true;
  for (size_t i = 0; i < n; ++i) {
    Must(bp_array_get(array, i, &items[i]), "reading an array");  // borrowed
    int32_t type = 0;
    if (items[i].type == BP_VALUE_OBJECT) bp_object_type(items[i].u.v_obj, &type);
    all_ints = all_ints && items[i].type == BP_VALUE_INT;
    all_strings = all_strings && items[i].type == BP_VALUE_OBJECT && type == BP_OBJECT_STRING;
  }
  if (all_strings) {  // an empty array reads as an empty list of strings
    pb::StringList* list = out->mutable_strings();
    for (const bp_value_t& v : items) list->add_items(GetString(v.u.v_obj));
    return true;
  }
  if (all_ints) {
    pb::IntList* list = out->mutable_ints();
    for (const bp_value_t& v : items) list->add_items(v.u.v_int64);
    return true;
  }
  return false;
}

}  // namespace

// A value (an attribute, a property, a result) as the protocol carries it; objects are
// borrowed. Values the protocol cannot carry (pointers, tensors, other objects) are
// BP_ERR_INVALID_ARGUMENT naming `what`.
void ToValue(const bp_value_t& v, pb::Value* out, const std::string& what) {
  switch (v.type) {
    case BP_VALUE_NONE:
      out->set_none(true);
      return;
    case BP_VALUE_INT:
      out->set_i(v.u.v_int64);
      return;
    case BP_VALUE_FLOAT:
      out->set_f(v.u.v_float64);
      return;
    case BP_VALUE_DTYPE:
      FromDL(v.u.v_dtype, out->mutable_dtype());
      return;
    case BP_VALUE_OBJECT: {
      int32_t type = 0;
      Must(bp_object_type(v.u.v_obj, &type), what);
      if (type == BP_OBJECT_STRING) {
        out->set_s(GetString(v.u.v_obj));
        return;
      }
      if (type == BP_OBJECT_BYTES) {
        const void* data = nullptr;
        size_t size = 0;
        Must(bp_bytes_get(v.u.v_obj, &data, &size), what);
        out->set_b(std::string(static_cast<const char*>(data), size));
        return;
      }
      if (type == BP_OBJECT_ARRAY && ArrayToValue(v.u.v_obj, out)) return;
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": the result is an object of type " + std::to_string(type) +
               ", which the remote protocol cannot carry (it carries none, int, float, dtype, "
               "string, bytes and arrays of strings or ints)");
    }
    default:
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": the result is a " + detail::ValueTypeName(v) +
               " value, which the remote protocol cannot carry (it carries none, int, float, "
               "dtype, string, bytes and arrays of strings or ints)");
  }
}

// Under the mock BACKPLANE_SERVE_MOCK_IR_NEWEST (server.cc), which plays a server that reads IR
// text versions 1 to ServerInfo.ir_version_newest only: what such a server's library says of an
// upload that holds newer IR text (its parser refuses the header line). This server's own
// library reads every version a client writes, and refuses a newer one itself when it parses.
void ClientSession::RefuseNewerIR(const std::string& bytes) const {
  const int newest = static_cast<int>(shared_.info.ir_version_newest());
  if (newest >= ir::kTextFormatVersion) return;
  const std::string header = "# backplane-ir ";
  for (size_t at = bytes.find(header); at != std::string::npos; at = bytes.find(header, at + 1)) {
    const size_t digit = at + header.size();
    if (digit < bytes.size() && bytes[digit] >= '0' && bytes[digit] <= '9' &&
        bytes[digit] - '0' > newest) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           "loading a module of " + std::to_string(bytes.size()) +
               " bytes: unsupported backplane-ir version '" + bytes[digit] +
               "': this server reads IR text versions 1 to " + std::to_string(newest) +
               "; build the module for this server (its ServerInfo says what it reads)");
    }
  }
}

ClientSession::Answer ClientSession::LoadModule(const pb::Command& cmd, pb::Reply* reply) {
  const pb::LoadModule& m = cmd.load_module();
  if (uploads_.count(m.transfer()) == 0 && uploads_.size() >= kMaxUploads) {
    Fail(BP_ERR_INVALID_ARGUMENT, "loading a module: " + std::to_string(kMaxUploads) +
                                      " module uploads of this session are unfinished (no "
                                      "chunk with `last`); finish one first");
  }
  Upload& up = uploads_[m.transfer()];
  if (!up.failed) {
    if (m.data().size() > kMaxModuleBytes - upload_bytes_) {
      up.failed = true;
      up.code = BP_ERR_INVALID_ARGUMENT;
      up.message = "loading a module: the upload is larger than " +
                   std::to_string(kMaxModuleBytes >> 20) +
                   " MiB, the most this server takes for modules in flight";
      upload_bytes_ -= up.bytes.size();
      std::string().swap(up.bytes);
    } else {
      up.bytes += m.data();
      upload_bytes_ += m.data().size();
    }
  }
  if (!m.last()) return Answer::kNone;
  const Upload done = std::move(up);
  upload_bytes_ -= done.bytes.size();
  uploads_.erase(m.transfer());
  if (done.failed) Fail(done.code, done.message);
  RefuseNewerIR(done.bytes);
  // Host code (ir_host) calls only the module's own kernels: a packed call that reached the
  // registry would call any registered function of this process, --expose or not.
  bp_module_load_options_t options{};
  options.struct_size = sizeof(options);
  options.flags = BP_MODULE_LOAD_NO_GLOBAL_CALLS |
                  (shared_.options.allow_native_modules ? BP_MODULE_LOAD_ALLOW_NATIVE : 0u);
  bp_object_t* module = nullptr;
  const bp_status_t status =
      bp_module_load_with_options(done.bytes.data(), done.bytes.size(), &options, &module);
  if (status != BP_OK) {
    const std::string message = LastError();
    if (!shared_.options.allow_native_modules && status == BP_ERR_INVALID_ARGUMENT &&
        message.find("carries native code") != std::string::npos) {
      Fail(status,
           "loading a module of " + std::to_string(done.bytes.size()) +
               " bytes: it carries native code (a library that would run inside the server "
               "process, with its rights), and this server does not load native code. Its "
               "operator can start it with `backplane serve --allow-native-modules` to load "
               "modules from clients it trusts (docs/security.md); or build the module for a "
               "Target without native code");
    }
    if (status == BP_ERR_INVALID_ARGUMENT &&
        message.find("BP_MODULE_LOAD_NO_GLOBAL_CALLS") != std::string::npos) {
      Fail(status, "loading a module of " + std::to_string(done.bytes.size()) +
                       " bytes: its host code calls functions other than its own kernels, and "
                       "this server runs uploaded modules confined to their kernels (a registered "
                       "function is callable only by name, from the client, when the server "
                       "exposes it with --expose): " +
                       message);
    }
    Fail(status, "loading a module of " + std::to_string(done.bytes.size()) + " bytes: " + message);
  }
  ModuleEntry entry{ObjectRef::Adopt(module), {}};
  const char* kind = nullptr;
  Must(bp_module_kind(module, &kind), "reading the kind of a loaded module");
  if (shared_.callable_kinds.count(kind != nullptr ? kind : "") == 0) {
    // A device module alone (the kernels of a GPU Target without the host code that launches
    // them): its functions would run on whatever grid the client passes, past its buffers.
    Fail(
        BP_ERR_INVALID_ARGUMENT,
        "loading a module of " + std::to_string(done.bytes.size()) +
            " bytes: it is a module of "
            "kind '" +
            std::string(kind != nullptr ? kind : "") +
            "', device kernels that launch on "
            "a grid their caller chooses, and this server calls only host code that checks its "
            "arguments and launches its kernels on the grids their loops assume (modules of kind " +
            Join(std::vector<std::string>(shared_.callable_kinds.begin(),
                                          shared_.callable_kinds.end())) +
            "); upload the module bp_build returned for the device's Target (kind ir_host, which "
            "imports the kernels), not its kernels alone (docs/remote.md, \"Calls\")");
  }
  bp_object_t* names = nullptr;
  Must(bp_module_list_functions(module, &names), "listing the functions of a loaded module");
  entry.functions = GetStringArray(ObjectRef::Adopt(names).get());
  for (const std::string& f : entry.functions) reply->add_names(f);
  const uint64_t handle = next_module_++;
  modules_.emplace(handle, std::move(entry));
  shared_.totals.modules++;
  reply->set_handle(handle);
  return Answer::kUsual;
}

void ClientSession::Call(const pb::Call& c, pb::Reply* reply) {
  std::string what = "calling " + c.function();
  ObjectRef func;
  if (c.module() != 0) {
    auto it = modules_.find(c.module());
    what += " of module " + std::to_string(c.module());
    if (it == modules_.end()) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": no module " + std::to_string(c.module()) + " in this session");
    }
    bp_object_t* f = nullptr;
    const bp_status_t found =
        // The module's own functions only (query_imports 0): host code, which launches its
        // kernels on the grids their loops assume; a kernel of an import is not called directly.
        bp_module_get_function(it->second.module.get(), c.function().c_str(), 0, &f);
    if (found == BP_ERR_NOT_FOUND) {
      Fail(BP_ERR_NOT_FOUND, what + ": the module has no function '" + c.function() +
                                 "'; its functions are: " + Join(it->second.functions));
    }
    Must(found, what);
    func = ObjectRef::Adopt(f);
  } else {
    const std::vector<std::string>& expose = shared_.options.expose;
    if (std::find(expose.begin(), expose.end(), c.function()) == expose.end()) {
      Fail(BP_ERR_NOT_FOUND, what + ": this server does not expose the registered function '" +
                                 c.function() + "' (it exposes: " + Join(expose) +
                                 "); its operator can with `backplane serve --expose " +
                                 c.function() + "`");
    }
    bp_object_t* f = nullptr;
    Must(bp_registry_get(c.function().c_str(), &f), what);
    func = ObjectRef::Adopt(f);
  }
  // The arguments; tensors, strings and bytes live until the call returns.
  const int n = c.args_size();
  std::vector<bp_value_t> args(static_cast<size_t>(n));
  std::vector<ObjectRef> objects;
  std::deque<DLTensor> tensors;
  std::deque<std::vector<int64_t>> dims;
  for (int i = 0; i < n; ++i) {
    const pb::Arg& a = c.args(i);
    bp_value_t& v = args[static_cast<size_t>(i)];
    v.reserved0 = 0;
    const std::string at = what + ": argument " + std::to_string(i);
    switch (a.kind_case()) {
      case pb::Arg::kNone:
        v.type = BP_VALUE_NONE;
        v.u.v_int64 = 0;
        break;
      case pb::Arg::kI:
        v.type = BP_VALUE_INT;
        v.u.v_int64 = a.i();
        break;
      case pb::Arg::kF:
        v.type = BP_VALUE_FLOAT;
        v.u.v_float64 = a.f();
        break;
      case pb::Arg::kS: {
        bp_object_t* s = nullptr;
        Must(bp_string_create(a.s().data(), a.s().size(), &s), at);
        objects.push_back(ObjectRef::Adopt(s));
        v.type = BP_VALUE_OBJECT;
        v.u.v_obj = s;
        break;
      }
      case pb::Arg::kB: {
        bp_object_t* b = nullptr;
        Must(bp_bytes_create(a.b().data(), a.b().size(), &b), at);
        objects.push_back(ObjectRef::Adopt(b));
        v.type = BP_VALUE_OBJECT;
        v.u.v_obj = b;
        break;
      }
      case pb::Arg::kDevice:
        v.type = BP_VALUE_DEVICE;
        v.u.v_device = Dev(a.device()).dev;
        used_devices_.insert(a.device());
        break;
      case pb::Arg::kDtype:
        v.type = BP_VALUE_DTYPE;
        v.u.v_dtype = ToDL(a.dtype(), at);
        break;
      case pb::Arg::kTensor: {
        const pb::TensorArg& t = a.tensor();
        Buffer& b = Buf(t.buffer());
        if (t.device() != b.device) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": buffer " + std::to_string(t.buffer()) + " is on " +
                                            Dev(b.device).label + ", not on device " +
                                            std::to_string(t.device()));
        }
        const int ndim = t.shape_size();
        if (ndim > kMaxTensorDims) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": " + std::to_string(ndim) + " dimensions; at most " +
                                            std::to_string(kMaxTensorDims));
        }
        if (t.strides_size() != 0 && t.strides_size() != ndim) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": " + std::to_string(t.strides_size()) +
                                            " strides for " + std::to_string(ndim) + " dimensions");
        }
        const DLDataType dtype = ToDL(t.dtype(), at);
        for (int k = ndim - 1; k >= 0; --k) {
          const int64_t extent = t.shape(k);
          const int64_t stride = t.strides_size() != 0 ? t.strides(k) : 0;
          if (extent < 0 || stride < 0) {
            Fail(BP_ERR_INVALID_ARGUMENT, at + ": dimension " + std::to_string(k) + " has " +
                                              (extent < 0 ? "extent " + std::to_string(extent)
                                                          : "stride " + std::to_string(stride)) +
                                              "; remote tensors need extents and strides >= 0");
          }
        }
        // The highest byte the view touches must be in the buffer.
        const std::string size = at + ": the tensor's extent";
        const std::optional<uint64_t> bytes =
            ViewBytes(ndim, t.shape().data(), t.strides_size() != 0 ? t.strides().data() : nullptr,
                      dtype.bits, dtype.lanes);
        if (!bytes) Fail(BP_ERR_INVALID_ARGUMENT, size + " overflows");
        const uint64_t end = CheckedAdd(t.byte_offset(), *bytes, size);
        if (end > b.nbytes) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": the view of buffer " + std::to_string(t.buffer()) +
                                            " reaches byte " + std::to_string(end) +
                                            " but the buffer holds " + std::to_string(b.nbytes));
        }
        // The function may read any byte of the buffer (a kernel's loads are checked against
        // the view, not against what this session wrote).
        BeforeRead(b, 0, b.nbytes, at);
        dims.emplace_back(t.shape().begin(), t.shape().end());
        int64_t* shape = dims.back().data();
        int64_t* strides = nullptr;
        if (t.strides_size() != 0) {
          dims.emplace_back(t.strides().begin(), t.strides().end());
          strides = dims.back().data();
        }
        DLTensor& dl = tensors.emplace_back();
        dl.data = b.data;
        dl.device = Dev(b.device).dev;
        dl.ndim = ndim;
        dl.dtype = dtype;
        dl.shape = shape;
        dl.strides = strides;
        dl.byte_offset = t.byte_offset();
        v.type = BP_VALUE_TENSOR;
        v.u.v_tensor = &dl;
        used_devices_.insert(b.device);
        break;
      }
      case pb::Arg::KIND_NOT_SET:
        Fail(BP_ERR_INVALID_ARGUMENT, at + " has no value (a newer client?)");
    }
  }
  // The streams the call runs on; each device's null stream is set back afterwards, whatever
  // happens.
  struct Restore {
    std::vector<DLDevice> devices;
    ~Restore() {
      for (const DLDevice& d : devices) bp_device_stream_set(d, nullptr);
    }
  } restore;
  for (const pb::ActiveStream& a : c.streams()) {
    const ExportedDevice& d = Dev(a.device());
    const std::string at =
        what + ": making stream " + std::to_string(a.stream()) + " active on " + d.label;
    bp_stream_t s = StreamOf(a.stream(), a.device(), at);
    restore.devices.push_back(d.dev);
    Must(bp_device_stream_set(d.dev, s), at);
  }
  OwnedValue result;
  Must(bp_function_call(func.get(), args.data(), n, &result.v), what);
  ToValue(result.v, reply->mutable_value(), what);
}

}  // namespace remote
}  // namespace backplane
