// SPDX-License-Identifier: Apache-2.0
// The build driver (bp_build): IR text and a Target in, a Module out. It verifies the IR,
// splits host code from device kernels for non-CPU Targets, calls the kind's code generator
// "target.build.<kind>" and wraps the host code in an interpreted module of kind "ir_host".
#include "build.h"

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "layers.h"
#include "object.h"
#include "registry.h"
#include "runtime.h"
#include "target.h"

namespace backplane {
namespace core {
namespace {

// Zeroes `bytes` bytes at `data` on `dev`: host memory in place, device memory by copies from
// calloc's zero pages (8 MiB at a time, pages that reading never dirties), then a sync of the
// device's stream, so whatever runs next on the device sees zeros.
bp_status_t ZeroDeviceBytes(DLDevice dev, void* data, uint64_t bytes) {
  if (bytes == 0) return BP_OK;
  if (dev.device_type == kDLCPU) {
    std::memset(data, 0, static_cast<size_t>(bytes));
    return BP_OK;
  }
  constexpr uint64_t kChunk = uint64_t{8} << 20;
  static const char* zeros = static_cast<const char*>(std::calloc(kChunk, 1));
  if (zeros == nullptr) return BP_ERR_OUT_OF_MEMORY;
  for (uint64_t done = 0; done < bytes;) {
    int64_t n = static_cast<int64_t>(std::min(kChunk, bytes - done));
    DLTensor src{};
    src.data = const_cast<char*>(zeros);
    src.device = DLDevice{kDLCPU, 0};
    src.ndim = 1;
    src.dtype = DLDataType{kDLUInt, 8, 1};
    src.shape = &n;
    DLTensor dst = src;
    dst.data = data;
    dst.device = dev;
    dst.byte_offset = done;
    const bp_status_t st = bp_device_copy_data_from_to(&src, &dst, nullptr);
    if (st != BP_OK) return st;
    done += static_cast<uint64_t>(n);
  }
  return bp_device_stream_sync(dev, nullptr);
}

constexpr const char* kHostKind = "ir_host";

// A failed call of the core's own C API, rethrown with its message.
void Check(bp_status_t st) {
  if (st != BP_OK) {
    const char* msg = nullptr;
    bp_error_last(nullptr, &msg);
    Fail(st, msg != nullptr ? msg : "unknown error");
  }
}

// The host part of a split module: PrimFuncs that launch kernels, run by the interpreter.
struct HostModule {
  HostModule(ir::IRModule m, std::string t, std::string host, bool only_imports)
      : interp(std::move(m)),
        text(std::move(t)),
        host_target(std::move(host)),
        imports_only(only_imports) {}

  ir::Interpreter interp;
  std::string text;         // the host IR's text form: what the module saves
  std::string host_target;  // the host Target's canonical JSON ("" when none was given)
  // Loaded with BP_MODULE_LOAD_NO_GLOBAL_CALLS: call_packed never reaches the global registry.
  bool imports_only;
  bp_object_t* self = nullptr;  // the module object that owns this (not a reference)
  std::mutex mu;
  std::map<std::string, Ref> callees;  // call_packed targets, resolved once

  // A kernel (from the imported device modules) or else, unless imports_only, a global function.
  Ref Callee(const std::string& name) {
    std::lock_guard lock(mu);
    auto it = callees.find(name);
    if (it != callees.end()) return it->second;
    Ref found;
    bp_object_t* imports_raw = nullptr;
    Check(bp_module_imports(self, &imports_raw));
    Ref imports = Ref::Adopt(imports_raw);
    size_t n = 0;
    Check(bp_array_size(imports.get(), &n));
    for (size_t i = 0; i < n && !found; ++i) {
      bp_value_t v;
      Check(bp_array_get(imports.get(), i, &v));
      bp_object_t* f = nullptr;
      if (bp_module_get_function(v.u.v_obj, name.c_str(), 1, &f) == BP_OK) {
        found = Ref::Adopt(f);
      } else {
        bp_error_clear();
      }
    }
    if (!found && imports_only) {
      // The load checked every name against the imports' function lists (LoadBuiltinModule);
      // an import whose list names a function it does not give ends here, never in the registry.
      Fail(BP_ERR_NOT_FOUND, "host code calls '" + name +
                                 "', which none of the modules it imports has; it was loaded "
                                 "with BP_MODULE_LOAD_NO_GLOBAL_CALLS, so it may call only their "
                                 "functions, never the global registry's");
    }
    if (!found) {
      std::string looked_at;
      found = Runtime::Get().FindOrLoad(name, &looked_at);
      if (!found) {
        Fail(BP_ERR_NOT_FOUND, "host code calls '" + name +
                                   "', which neither the imported device modules nor the "
                                   "global registry has" +
                                   looked_at +
                                   "; build the kernels into this module or load "
                                   "the plugin that registers it");
      }
    }
    callees.emplace(name, found);
    return found;
  }
};

// A function of a host module: holds the module object, so imports stay reachable.
struct HostFunction {
  Ref module;
  std::shared_ptr<HostModule> impl;
  std::string name;
  const ir::PrimFunc* func;  // in impl->interp's module, which never changes
};

ir::DType DTypeOf(DLDataType t) {
  return ir::DType{static_cast<ir::DTypeCode>(t.code), t.bits, t.lanes};
}

DLTensor* TensorArg(const bp_value_t& v) {
  if (v.type == BP_VALUE_TENSOR) return v.u.v_tensor;
  if (v.type == BP_VALUE_OBJECT && v.u.v_obj != nullptr && v.u.v_obj->type() == BP_OBJECT_TENSOR) {
    DLTensor* t = nullptr;
    Check(bp_tensor_get(v.u.v_obj, &t));
    return t;
  }
  return nullptr;
}

void CallHost(const HostFunction& fn, const bp_value_t* args, int32_t n) {
  const ir::PrimFunc* func = fn.func;
  std::vector<ir::ArgView> views(static_cast<size_t>(n < 0 ? 0 : n));
  for (size_t i = 0; i < views.size(); ++i) {
    const bp_value_t& v = args[i];
    ir::ArgView& a = views[i];
    if (v.type == BP_VALUE_INT) {
      a.kind = ir::ArgView::Kind::kInt;
      a.i = v.u.v_int64;
    } else if (v.type == BP_VALUE_FLOAT) {
      a.kind = ir::ArgView::Kind::kFloat;
      a.f = v.u.v_float64;
    } else if (DLTensor* t = TensorArg(v)) {
      // Host code never reads device memory (SplitHostDevice moved every access into a
      // kernel), so the tensor may be on any device; data is only passed on.
      a.kind = ir::ArgView::Kind::kBuffer;
      a.data = t->data;
      a.dtype = DTypeOf(t->dtype);
      a.ndim = t->ndim;
      a.shape = t->shape;
      a.strides = t->strides;
      a.user = t;
    } else {
      Fail(BP_ERR_TYPE, "function '" + fn.name + "': argument " + std::to_string(i) +
                            " has value type " + std::to_string(v.type) +
                            "; expected an int, a float or a tensor");
    }
  }
  const std::string problem = ir::CheckArgs(*func, views);
  if (!problem.empty()) Fail(BP_ERR_INVALID_ARGUMENT, problem);
  ir::PackedCall call = [&](const std::string& name, const std::vector<ir::ArgView>& cargs) {
    Ref callee = fn.impl->Callee(name);
    std::vector<bp_value_t> values(cargs.size());
    for (size_t i = 0; i < cargs.size(); ++i) {
      bp_value_t& v = values[i];
      v.reserved0 = 0;
      switch (cargs[i].kind) {
        case ir::ArgView::Kind::kInt:
          v.type = BP_VALUE_INT;
          v.u.v_int64 = cargs[i].i;
          break;
        case ir::ArgView::Kind::kFloat:
          v.type = BP_VALUE_FLOAT;
          v.u.v_float64 = cargs[i].f;
          break;
        case ir::ArgView::Kind::kBuffer:
          if (cargs[i].user == nullptr) {
            Fail(BP_ERR_INVALID_ARGUMENT,
                 "function '" + fn.name + "': call_packed(\"" + name +
                     "\") gets a buffer allocated in host code; only parameter buffers can be "
                     "passed to a packed call");
          }
          v.type = BP_VALUE_TENSOR;
          v.u.v_tensor = static_cast<DLTensor*>(cargs[i].user);
          break;
      }
    }
    bp_value_t r = CallFunctionDescribed(
        callee.get(), values.data(), static_cast<int32_t>(values.size()),
        [&] { return "'" + name + "' (called by host function '" + fn.name + "')"; });
    if (r.type == BP_VALUE_OBJECT) bp_object_release(r.u.v_obj);
    return static_cast<int64_t>(r.type == BP_VALUE_INT ? r.u.v_int64 : 0);
  };
  // A workspace of the kernels (docs/ir.md, "Device workspaces") lives on the device of the
  // function's tensors, from the device's workspace pool, for as long as its statement runs.
  ir::WorkspaceAlloc workspace = [&](const std::string& wname, ir::DType dtype, int ndim,
                                     const int64_t* shape, uint64_t bytes) {
    const DLTensor* on = nullptr;
    for (const ir::ArgView& a : views) {
      if (a.kind == ir::ArgView::Kind::kBuffer) {
        on = static_cast<const DLTensor*>(a.user);
        break;
      }
    }
    const std::string what = "host function '" + fn.name + "': workspace '" + wname + "'";
    if (on == nullptr)
      Fail(BP_ERR_INVALID_ARGUMENT,
           what +
               " has no device to live on: the function has no tensor argument; pass its "
               "kernels at least one tensor of the device to run on");
    if (bytes > static_cast<uint64_t>(SIZE_MAX))
      Fail(BP_ERR_OUT_OF_MEMORY,
           what + " takes " + std::to_string(bytes) + " bytes, more than this process can address");
    struct Held {
      DLTensor t{};
      std::vector<int64_t> shape;
    };
    auto held = std::make_shared<Held>();
    held->shape.assign(shape, shape + ndim);
    held->t.device = on->device;
    held->t.ndim = ndim;
    held->t.dtype = DLDataType{static_cast<uint8_t>(dtype.code), static_cast<uint8_t>(dtype.bits),
                               static_cast<uint16_t>(dtype.lanes)};
    held->t.shape = held->shape.data();
    void* data = nullptr;
    // An empty workspace still gets a block, so the kernels get a valid pointer.
    const bp_status_t st = bp_device_alloc_workspace(
        on->device, static_cast<size_t>(std::max<uint64_t>(bytes, 1)), held->t.dtype, &data);
    if (st != BP_OK) {
      const char* msg = nullptr;
      bp_error_last(nullptr, &msg);
      const std::string why = msg != nullptr ? msg : "unknown error";
      bp_error_clear();
      Fail(st, what + " (" + std::to_string(bytes) +
                   " bytes) could not be allocated on the device: " + why);
    }
    held->t.data = data;
    // The block may come from the device's workspace pool, holding what another caller left
    // there (on a served device, another session's data): zeroed, as the interpreter's
    // allocation is, a kernel that reads before it writes sees zeros, never anyone's bytes.
    const bp_status_t zeroed = ZeroDeviceBytes(on->device, data, bytes);
    if (zeroed != BP_OK) {
      const char* msg = nullptr;
      bp_error_last(nullptr, &msg);
      const std::string why = msg != nullptr ? msg : "unknown error";
      bp_error_clear();
      if (bp_device_free_workspace(on->device, data) != BP_OK) bp_error_clear();
      Fail(zeroed, what + " (" + std::to_string(bytes) +
                       " bytes) could not be zeroed on the device: " + why);
    }
    ir::Workspace w;
    w.data = data;
    w.user = &held->t;
    w.release = [held, data] {
      // Launches are ordered on the device's stream, so the pool hands the block out again
      // only after the kernels that use it; a failure here has no one to report to.
      if (bp_device_free_workspace(held->t.device, data) != BP_OK) bp_error_clear();
    };
    return w;
  };
  try {
    fn.impl->interp.Run(fn.name, views, call, ir::Interpreter::Args::kAlreadyChecked, workspace);
  } catch (const ir::Error& e) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string("host function '") + fn.name + "': " + e.what());
  }
}

bp_status_t HostGetFunction(void* self, const char* name, bp_object_t** out) {
  BP_API_BEGIN
  auto impl = *static_cast<std::shared_ptr<HostModule>*>(self);
  *out = nullptr;
  const ir::PrimFunc* func = impl->interp.module().Find(name);
  if (func == nullptr) return BP_OK;
  auto* fn = new HostFunction{Ref::Share(impl->self), impl, name, func};
  bp_status_t st = bp_function_create(
      [](void* res, const bp_value_t* args, int32_t n, bp_value_t*) -> bp_status_t {
        BP_API_BEGIN
        CallHost(*static_cast<HostFunction*>(res), args, n);
        BP_API_END
      },
      fn, [](void* res) { delete static_cast<HostFunction*>(res); }, out);
  if (st != BP_OK) {
    delete fn;
    return st;
  }
  BP_API_END
}

bp_status_t HostListFunctions(void* self, bp_object_t** out) {
  BP_API_BEGIN
  auto& impl = *static_cast<std::shared_ptr<HostModule>*>(self);
  std::vector<std::string> names;
  for (const ir::PrimFunc& f : impl->interp.module().functions()) names.push_back(f.name);
  *out = NewStringArray(names);
  BP_API_END
}

bp_status_t HostSave(void* self, bp_object_t** out) {
  BP_API_BEGIN
  auto& impl = *static_cast<std::shared_ptr<HostModule>*>(self);
  return bp_bytes_create(impl->text.data(), impl->text.size(), out);
  BP_API_END
}

bp_status_t HostInspect(void* self, const char* format, bp_object_t** out) {
  BP_API_BEGIN
  auto& impl = *static_cast<std::shared_ptr<HostModule>*>(self);
  const std::string f = format == nullptr ? "" : format;
  *out = (f.empty() || f == "ir") ? NewString(impl->text) : nullptr;
  BP_API_END
}

void HostDestroy(void* self) { delete static_cast<std::shared_ptr<HostModule>*>(self); }

const bp_module_vtable_t kHostVtable = {
    .struct_size = sizeof(bp_module_vtable_t),
    .kind = kHostKind,
    .get_function = HostGetFunction,
    .list_functions = HostListFunctions,
    .save_to_bytes = HostSave,
    .inspect_source = HostInspect,
    .destroy = HostDestroy,
};

Ref MakeHostModule(ir::IRModule host, std::string host_target, bool imports_only) {
  std::string text = ir::Print(host);
  std::shared_ptr<HostModule> impl;
  try {
    impl = std::make_shared<HostModule>(std::move(host), std::move(text), std::move(host_target),
                                        imports_only);
  } catch (const ir::Error& e) {
    Fail(BP_ERR_INTERNAL, std::string("bp_build: the host part of the split IR does not verify "
                                      "(a bug in SplitHostDevice; please report it): ") +
                              e.what());
  }
  bp_object_t* out = nullptr;
  auto* self = new std::shared_ptr<HostModule>(impl);
  Check(bp_module_create(&kHostVtable, self, &out));  // destroys `self` on failure
  impl->self = out;
  return Ref::Adopt(out);
}

// "plugin 'x' 1.2.0" for the registry's owner "plugin 'x'" (its version from the plugin list).
std::string OwnerWithVersion(const std::string& owner) {
  const std::string prefix = "plugin '";
  if (owner.rfind(prefix, 0) != 0 || owner.size() <= prefix.size() + 1) return owner;
  const std::string name = owner.substr(prefix.size(), owner.size() - prefix.size() - 1);
  try {
    const nlohmann::json list = nlohmann::json::parse(Runtime::Get().loader.ToJson());
    for (const nlohmann::json& p : list.at("plugins")) {
      if (p.value("name", "") == name && p.value("state", "") == "loaded" &&
          p.contains("version") && p["version"].is_string()) {
        return owner + " " + p["version"].get<std::string>();
      }
    }
  } catch (const nlohmann::json::exception&) {
  }
  return owner;
}

// The IR text versions a code generator reads: what its function declares with
// BP_FUNCTION_READS_IR, else version 1 only (c_api.h).
std::pair<int, int> ReadsIR(const bp_object_t* codegen) {
  const auto* f = static_cast<const FunctionObject*>(codegen);
  if (f->reads_ir_oldest == 0) return {1, 1};
  return {f->reads_ir_oldest, f->reads_ir_newest};
}

// The number N in "... which needs IR text version N" of ir::LowerToVersion's refusal, else 0.
int NeededVersion(const std::string& message) {
  const std::string key = "needs IR text version ";
  const size_t at = message.find(key);
  if (at == std::string::npos) return 0;
  return std::atoi(message.c_str() + at + key.size());
}

// `message` ("function 'f_kernel' uses ...") with " (a kernel SplitHostDevice made of function
// 'f')" after the function's name when it is a kernel split from a function of `source` (named
// f_kernel or f_kernelN); else `message` as it is.
std::string WithKernelOrigin(const std::string& message, const ir::IRModule* source) {
  const std::string key = "function '";
  const size_t at = message.find(key);
  if (source == nullptr || at == std::string::npos) return message;
  const size_t end = message.find('\'', at + key.size());
  if (end == std::string::npos) return message;
  const std::string kernel = message.substr(at + key.size(), end - at - key.size());
  for (const ir::PrimFunc& f : source->functions()) {
    const std::string stem = f.name + "_kernel";
    if (kernel.rfind(stem, 0) == 0 &&
        kernel.find_first_not_of("0123456789", stem.size()) == std::string::npos) {
      return message.substr(0, end + 1) + " (a kernel SplitHostDevice made of function '" + f.name +
             "')" + message.substr(end + 1);
    }
  }
  return message;
}

// Calls "target.build.<kind>" with `module` as text and the Target. The text is in a version the
// code generator reads (ReadsIR): the oldest that has what the module uses, or the module lowered
// to the newest it reads (ir::LowerToVersion) when it uses more; a module that cannot be lowered
// is refused, naming the construct, the version it needs and the plugin. Every code generator
// recurses over the tree, so it runs with the stack a tree that deep needs (docs/ir.md,
// "Limits"), on another thread if this one has too little; this covers every code generator, the
// SDK's and third parties'.
// `source`: the module the kernels were split from, for messages (null: `module` is the input).
Ref CallCodegen(const std::string& kind, const ir::IRModule& module, const bp_object_t* target,
                const ir::IRModule* source = nullptr) {
  const std::string name = "target.build." + kind;
  std::string looked_at;
  Ref codegen = Runtime::Get().FindOrLoad(name, &looked_at);
  if (!codegen) {
    Fail(BP_ERR_NOT_FOUND, "bp_build: no code generator for target kind '" + kind +
                               "': no plugin registered '" + name + "'" + looked_at +
                               ". Install the plugin that provides it (backplane info lists "
                               "the loaded plugins)");
  }
  // The IR versions the plugin's code generator reads: a layer's wrapper (WrapCodegen) is a
  // plain function that carries no BP_FUNCTION_READS_IR, and passes the text on unchanged.
  const std::pair<int, int> reads = ReadsIR(codegen.get());
  codegen = WrapCodegen(kind, std::move(codegen));
  const int oldest = reads.first, newest = reads.second;
  auto reader = [&] {
    return "the code generator " + name + " (" +
           OwnerWithVersion(Runtime::Get().registry.OwnerOf(name)) + ") reads IR text versions " +
           std::to_string(oldest) + " to " + std::to_string(newest);
  };
  if (oldest > ir::kTextFormatVersion) {
    Fail(BP_ERR_VERSION_MISMATCH,
         "bp_build for target kind '" + kind + "': " + reader() +
             ", all newer than this Backplane writes (1 to " +
             std::to_string(ir::kTextFormatVersion) +
             "): upgrade libbackplane, or use a build of the plugin that reads older versions");
  }
  ir::IRModule lowered = module;
  if (ir::TextVersion(module) > newest) {
    try {
      lowered = ir::LowerToVersion(module, newest);
    } catch (const ir::Error& e) {
      // Another error: a module that does not verify (a WHOLE_IR kind's input is not verified
      // before its code generator sees it).
      if (e.kind() != ir::ErrorKind::kUnsupported) {
        Fail(BP_ERR_INVALID_ARGUMENT, "bp_build for target kind '" + kind +
                                          "': the IR cannot be written in a version " + name +
                                          " reads: " + e.what());
      }
      const std::string what = e.what();
      const int needed = NeededVersion(what);
      const std::string owner = Runtime::Get().registry.OwnerOf(name);
      Fail(BP_ERR_UNSUPPORTED,
           "bp_build for target kind '" + kind + "': " + WithKernelOrigin(what, source) + "; " +
               reader() + ": use a build of " +
               (owner.rfind("plugin '", 0) == 0 ? owner : "its plugin") + " that reads version " +
               (needed > 0 ? std::to_string(needed) : "it") + ", or write the kernel without it");
    }
  }
  const std::string text = ir::Print(lowered, std::max(ir::TextVersion(lowered), oldest));
  bp_value_t args[2];
  args[0].type = BP_VALUE_STR;
  args[0].reserved0 = 0;
  args[0].u.v_str = text.c_str();
  args[1].type = BP_VALUE_OBJECT;
  args[1].reserved0 = 0;
  args[1].u.v_obj = const_cast<bp_object_t*>(target);
  bp_value_t r{};
  ir::RunForDepth(ir::TreeDepth(lowered), [&] { r = CallFunction(codegen.get(), args, 2, name); });
  Ref result = r.type == BP_VALUE_OBJECT ? Ref::Adopt(r.u.v_obj) : Ref();
  if (!result || result.get()->type() != BP_OBJECT_MODULE) {
    Fail(BP_ERR_PLUGIN, name +
                            " must return a module object, but returned something else; "
                            "this is a bug in the plugin that provides it");
  }
  return result;
}

// The code-generator contract (docs/codegen-guide.md): every PrimFunc of the input is reachable
// by name in the output.
void CheckReachable(const Ref& module, const ir::IRModule& ir, const std::string& who) {
  for (const ir::PrimFunc& f : ir.functions()) {
    bp_object_t* fn = nullptr;
    if (bp_module_get_function(module.get(), f.name.c_str(), 1, &fn) != BP_OK) {
      const char* msg = nullptr;
      bp_error_last(nullptr, &msg);
      Fail(BP_ERR_PLUGIN, who + " returned a module without function '" + f.name +
                              "' (every PrimFunc of the input must be reachable by name; a "
                              "bug in the code generator): " +
                              (msg != nullptr ? msg : ""));
    }
    bp_object_release(fn);
  }
}

// The kernels host code can launch: every function of the imported modules, found as Callee
// finds them (each import in order, its own functions before its imports'), with the IR the
// module that has it keeps (InspectSource "ir"). A module that keeps no IR contributes nothing
// (its functions check their own calls; BP-PLUGIN-12).
struct KernelIR {
  std::vector<std::unique_ptr<ir::IRModule>> modules;
  std::vector<const ir::PrimFunc*> functions;
  std::set<std::string> names;  // every function the imports list, with IR or without
};

std::string KindOf(const bp_object_t* module) {
  const char* kind = nullptr;
  Check(bp_module_kind(module, &kind));
  return kind;
}

void CollectKernels(const bp_object_t* module, std::set<const bp_object_t*>* seen,
                    std::set<std::string>* names, KernelIR* out) {
  if (!seen->insert(module).second) return;
  bp_object_t* raw = nullptr;
  Check(bp_module_list_functions(module, &raw));
  Ref listed = Ref::Adopt(raw);
  std::vector<std::string> own;
  size_t n = 0;
  Check(bp_array_size(listed.get(), &n));
  for (size_t i = 0; i < n; ++i) {
    bp_value_t v;
    Check(bp_array_get(listed.get(), i, &v));
    const char* s = nullptr;
    size_t len = 0;
    Check(bp_string_get(v.u.v_obj, &s, &len));
    if (names->insert(std::string(s, len)).second) own.emplace_back(s, len);
  }
  bp_object_t* source = nullptr;
  Check(bp_module_inspect_source(module, "ir", &source));
  Ref text = Ref::Adopt(source);
  if (!own.empty() && text) {
    const std::string kind = KindOf(module);
    const char* s = nullptr;
    size_t len = 0;
    Check(bp_string_get(text.get(), &s, &len));
    auto ir_module = std::make_unique<ir::IRModule>();
    std::vector<std::string> problems;
    try {
      *ir_module = ir::Parse(std::string_view(s, len), "the imported " + kind + " module's IR");
      problems = ir::VerifyErrors(*ir_module);
    } catch (const ir::Error& e) {
      problems.push_back(e.what());
    }
    for (const std::string& name : own) {
      const ir::PrimFunc* f = problems.empty() ? ir_module->Find(name) : nullptr;
      if (problems.empty() && f == nullptr) {
        problems.push_back("it lists function '" + name + "', which its IR lacks");
      }
      out->functions.push_back(f);
    }
    if (!problems.empty()) {
      std::string all;
      for (const std::string& p : problems) all += "\n  " + p;
      Fail(BP_ERR_INVALID_ARGUMENT, "module file: the " + kind +
                                        " module that the ir_host module imports keeps IR that "
                                        "does not match what it holds; rebuild the module:" +
                                        all);
    }
    out->modules.push_back(std::move(ir_module));
  }
  bp_object_t* imports_raw = nullptr;
  Check(bp_module_imports(module, &imports_raw));
  Ref imports = Ref::Adopt(imports_raw);
  Check(bp_array_size(imports.get(), &n));
  for (size_t i = 0; i < n; ++i) {
    bp_value_t v;
    Check(bp_array_get(imports.get(), i, &v));
    CollectKernels(v.u.v_obj, seen, names, out);
  }
}

KernelIR ImportedKernels(const std::vector<Ref>& imports) {
  KernelIR out;
  std::set<const bp_object_t*> seen;
  for (const Ref& m : imports) CollectKernels(m.get(), &seen, &out.names, &out);
  return out;
}

const TargetObject& AsTarget(const bp_object_t* obj, const char* what) {
  return As<TargetObject>(obj, BP_OBJECT_TARGET, what);
}

}  // namespace

Ref Build(const std::string& text, const bp_object_t* target, const bp_object_t* host,
          const std::string& source_name) {
  const TargetObject& t = AsTarget(target, "bp_build target");
  LayerChain();  // built first, so that the layers are told of every module this makes
  const std::string kind = t.kind->name;
  std::string host_json;
  if (host == nullptr && t.json.contains("host") && t.json["host"].is_object()) {
    host_json = t.json["host"].dump();
  }
  if (host != nullptr) {
    const TargetObject& h = AsTarget(host, "bp_build host");
    if (h.kind->device_type_id != kDLCPU) {
      Fail(BP_ERR_INVALID_ARGUMENT, "bp_build: the host Target is of kind '" + h.kind->name +
                                        "', which runs on " + h.kind->device_type +
                                        "; host code runs on the CPU: give a CPU kind such as "
                                        "\"c\" or leave the host out");
    }
    host_json = h.text;
  }
  if (text.size() > kMaxIRTextBytes) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_build: the IR text is " + std::to_string(text.size()) + " bytes, more than the " +
             std::to_string(kMaxIRTextBytes >> 20) +
             " MiB limit (docs/host-guide.md, \"Input limits\"); split it into several modules");
  }
  ir::IRModule module;
  try {
    module = ir::Parse(text, source_name.empty() ? "bp_build input" : source_name);
  } catch (const ir::Error& e) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string("bp_build: the IR does not parse: ") + e.what());
  }
  if (module.functions().empty()) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         std::string("bp_build: the IR holds no function (") +
             (text.empty() ? "the text is empty" : "only comments, blank lines or a header") +
             "), so the module would be empty; give IR text with at least one `func NAME(...) "
             "{ ... }` (docs/ir.md)");
  }
  const std::string codegen = "target.build." + kind;
  if ((t.kind->flags & BP_TARGET_KIND_WHOLE_IR) != 0) {
    // The kind builds for another Target, which verifies and splits (c_api.h).
    Ref built = CallCodegen(kind, module, target);
    CheckReachable(built, module, codegen);
    return built;
  }
  const bool cpu = t.kind->device_type_id == kDLCPU;
  ir::VerifyOptions options;
  options.device_is_cpu = cpu;
  std::vector<std::string> problems = ir::VerifyErrors(module, options);
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += "\n  " + p;
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_build for target kind '" + kind + "': the IR does not verify:" + all);
  }
  if (cpu) {
    Ref built = CallCodegen(kind, module, target);
    CheckReachable(built, module, codegen);
    return built;
  }
  ir::SplitResult split;
  try {
    split = ir::SplitHostDevice(module, /*device_is_cpu=*/false);
  } catch (const ir::Error& e) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_build for target kind '" + kind + "': " + std::string(e.what()));
  }
  Ref device;
  if (!split.device.functions().empty()) {
    device = CallCodegen(kind, split.device, target, &module);
    CheckReachable(device, split.device, codegen);
  }
  Ref host_module = MakeHostModule(std::move(split.host), host_json, /*imports_only=*/false);
  if (device) Check(bp_module_import(host_module.get(), device.get()));
  CheckReachable(host_module, module, "bp_build");
  return host_module;
}

bool IsBuiltinModuleKind(const std::string& kind) { return kind == kHostKind; }

Ref LoadBuiltinModule(const std::string& at, const std::string& kind, const void* data, size_t size,
                      const std::vector<Ref>& imports, bool imports_only) {
  if (kind != kHostKind) Fail(BP_ERR_INTERNAL, "no built-in module kind '" + kind + "'");
  ir::IRModule host;
  try {
    host =
        ir::Parse(std::string_view(static_cast<const char*>(data), size), "saved ir_host module");
  } catch (const ir::Error& e) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         std::string("module file: the ir_host module's IR does not parse: ") + e.what());
  }
  // The file may have been written by anyone, checksum included: everything bp_build
  // established for the host code is checked again (docs/security.md, "Saved modules"). The
  // interpreter would otherwise run host code that writes through a device buffer's handle, or
  // launch a kernel on a grid its loops do not assume.
  const KernelIR kernels = ImportedKernels(imports);
  std::vector<std::string> problems = ir::SplitErrors(host, kernels.functions);
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += "\n  " + p;
    Fail(BP_ERR_INVALID_ARGUMENT,
         "module file: the ir_host module is not host code bp_build makes, so the file was "
         "changed after it was built or made by something else; rebuild it from its IR:" +
             all);
  }
  // BP_MODULE_LOAD_NO_GLOBAL_CALLS: every packed call must name a function of the imports (a
  // kernel, found as Callee finds it), or the host code could call any function registered in
  // this process, with arguments its caller chose (docs/security.md, "Remote devices").
  if (imports_only) {
    problems = ir::CallsOutside(host, kernels.names);
    if (!problems.empty()) {
      std::string all;
      for (const std::string& p : problems) all += "\n  " + p;
      Fail(BP_ERR_INVALID_ARGUMENT,
           "module file: " + at +
               " (kind ir_host) calls functions that none of the modules it imports has, and it "
               "is loaded with BP_MODULE_LOAD_NO_GLOBAL_CALLS: its host code may call only the "
               "functions of its imports (its kernels), never the global registry's; build the "
               "module without those calls, and call such a function from the caller instead:" +
               all);
    }
  }
  return MakeHostModule(std::move(host), "", imports_only);
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_build(const char* ir_text, size_t size, const bp_object_t* target,
                               const bp_object_t* host, bp_object_t** out_module) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_module != nullptr, "out_module is null");
  BP_REQUIRE_ARG(ir_text != nullptr || size == 0, "ir_text is null");
  BP_REQUIRE_ARG(target != nullptr, "target is null");
  *out_module = nullptr;
  *out_module =
      Build(std::string(ir_text == nullptr ? "" : ir_text, size), target, host, "").release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_build_with_options(const char* ir_text, size_t size,
                                            const bp_object_t* target,
                                            const bp_build_options_t* options,
                                            bp_object_t** out_module) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_module != nullptr, "out_module is null");
  BP_REQUIRE_ARG(ir_text != nullptr || size == 0, "ir_text is null");
  BP_REQUIRE_ARG(target != nullptr, "target is null");
  *out_module = nullptr;
  // Fields past the caller's struct_size read as zero (an older caller's struct is shorter).
  bp_build_options_t o{};
  if (options != nullptr) {
    constexpr size_t kFirstSize = offsetof(bp_build_options_t, source_name) + sizeof(const char*);
    if (options->struct_size < kFirstSize) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           "bp_build_with_options: options->struct_size is " +
               std::to_string(options->struct_size) + ", less than the " +
               std::to_string(kFirstSize) +
               " bytes of ABI 1.4's bp_build_options_t; zero the struct and set struct_size to "
               "sizeof(bp_build_options_t)");
    }
    std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
  }
  *out_module = Build(std::string(ir_text == nullptr ? "" : ir_text, size), target, o.host,
                      o.source_name == nullptr ? "" : o.source_name)
                    .release();
  BP_API_END
}

}  // extern "C"
