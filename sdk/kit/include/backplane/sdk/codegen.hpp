// SPDX-License-Identifier: Apache-2.0
// Plugin-author helpers for code generators: one line registers `target.build.<kind>`, one
// line its module loader `runtime.module.load_from_bytes.<kind>`.
//
//   // IR text in (the serialized form, first line "# backplane-ir N": N the oldest text
//   // version that has what the kernel uses, docs/ir.md), a Target of kind foo in, a Module
//   // out. Reads the Target only, never a device.
//   backplane::Module BuildFoo(const std::string& ir_text, const backplane::Target& target);
//   // What a FooModule's SaveToBytes wrote, back into a Module.
//   backplane::Module LoadFoo(const std::string& bytes);
//
//   BACKPLANE_PLUGIN_ENTRY("foo", "1.0.0") {
//     backplane::sdk::RegisterCodegen("foo", BuildFoo);        // target.build.foo
//     backplane::sdk::RegisterModuleLoader("foo", LoadFoo);    // load_from_bytes.foo
//   }
//
// The wrappers do what every code generator would otherwise repeat: check the packed
// arguments (an IR string and a Target object of this kind; bytes for a loader), turn an
// ir::Error thrown by the IR library (a parse or verify failure) into
// BP_ERR_INVALID_ARGUMENT, refuse an empty Module, and hand the Module back as an owned
// object value. Messages need not start with the function's name: the core puts
// "target.build.foo: " in front when it reports a failure. Other exceptions reach the caller as
// they are (backplane::Error keeps its kind). The IR library itself (Backplane::ir) is linked only
// by plugins that parse the IR; this header needs only its header-only error type.
#ifndef BACKPLANE_SDK_CODEGEN_HPP_
#define BACKPLANE_SDK_CODEGEN_HPP_

#include <backplane/ir/error.hpp>
#include <backplane/ir/version.hpp>
#include <backplane/sdk/module.hpp>
#include <backplane/sdk/plugin.hpp>
#include <string>
#include <type_traits>
#include <utility>

namespace backplane {
namespace sdk {

// A Module as an owned object value, the result a registered function returns.
inline Any ModuleValue(const Module& m) {
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_OBJECT);
  ObjectRef obj = m.object();
  v.u.v_obj = obj.release();
  return Any(v);
}

namespace detail {

// The object of argument `i` if it is an object of `type`, else Error(BP_ERR_TYPE) saying
// that `fn` wants `what` there.
inline bp_object_t* ObjectArg(const PackedArgs& args, int32_t i, int32_t type,
                              const std::string& fn, const char* what) {
  const bp_value_t& v = args[i];
  int32_t actual = 0;
  if (v.type != BP_VALUE_OBJECT || v.u.v_obj == nullptr ||
      ::backplane::detail::Api()->object_type(v.u.v_obj, &actual) != BP_OK || actual != type) {
    ::backplane::detail::Api()->error_clear();
    throw Error(BP_ERR_TYPE, fn + ": argument " + std::to_string(i) + " must be " + what +
                                 ", got a value of type " + ::backplane::detail::ValueTypeName(v));
  }
  return v.u.v_obj;
}

// Runs `body` (returning a Module) and makes the registered function's result: ir::Error
// becomes BP_ERR_INVALID_ARGUMENT with its message (BP_ERR_UNSUPPORTED for kUnsupported) (the core
// puts the function's name in front when it reports a failure), an empty Module is a plugin bug.
template <typename Body>
Any ModuleResult(const std::string& fn, Body&& body) {
  Module m;
  try {
    m = body();
  } catch (const ir::Error& e) {
    throw Error(
        e.kind() == ir::ErrorKind::kUnsupported ? BP_ERR_UNSUPPORTED : BP_ERR_INVALID_ARGUMENT,
        e.what());
  }
  if (!m) {
    throw Error(BP_ERR_INTERNAL,
                fn + " returned no module (a bug in the plugin: return a Module or throw)");
  }
  return ModuleValue(m);
}

}  // namespace detail

// Registers `build` as the code generator "target.build.<kind>", the global function bp_build
// calls for Targets of that kind. `build` is callable as
// Module(const std::string& ir_text, const Target& target). The core calls it from bp_build
// with the IR's text form -- for a kind whose device type is not the CPU, only the kernels
// SplitHostDevice made (docs/codegen-guide.md) -- and a Target of this kind; the wrapper
// refuses a Target of another kind with BP_ERR_INVALID_ARGUMENT. Declare
// target.build.<kind> in the manifest (backplane_add_plugin PROVIDES).
//
// `reads`: the IR text versions `build` reads (docs/ir.md, "Versions"), declared to the core
// with BP_FUNCTION_READS_IR. The default is what the SDK's IR library parses (1 to
// ir::kTextFormatVersion of the headers the plugin is built with), right for a code generator
// that reads its input with ir::Parse; bp_build then hands it kernels in those versions only,
// lowered where an older version can say the same, and refuses the rest by name.
struct IRVersions {
  int oldest = 1;
  int newest = ir::kTextFormatVersion;
};
template <typename Build>
void RegisterCodegen(const std::string& kind, Build build, IRVersions reads = {}) {
  static_assert(std::is_invocable_r_v<Module, Build&, const std::string&, const Target&>,
                "RegisterCodegen: the code generator must be callable as "
                "Module(const std::string& ir_text, const Target& target)");
  const std::string fn = "target.build." + kind;
  RegisterFunction(
      fn,
      [fn, kind, build = std::move(build)](PackedArgs args) mutable {
        if (args.size() != 2) {
          throw Error(BP_ERR_INVALID_ARGUMENT,
                      fn + " takes 2 arguments (the IR text and a Target), got " +
                          std::to_string(args.size()));
        }
        const std::string ir_text = args.String(0);
        const Target target(
            ObjectRef::Borrow(detail::ObjectArg(args, 1, BP_OBJECT_TARGET, fn, "a Target object")));
        if (target.Kind() != kind) {
          throw Error(BP_ERR_INVALID_ARGUMENT, fn + " got a Target of kind '" + target.Kind() +
                                                   "'; it builds for kind '" + kind +
                                                   "' only; build through bp_build, which calls "
                                                   "target.build.<the Target's kind>");
        }
        return detail::ModuleResult(fn, [&] { return build(ir_text, target); });
      },
      BP_FUNCTION_READS_IR(reads.oldest, reads.newest));
}

// What the saved bytes of a module kind carry, for the core's rule on native code
// (docs/plugin-guide.md, BP-PLUGIN-11; docs/security.md, "Saved modules").
enum class ModuleCode {
  // IR, and device code that runs only on the device (PTX, SPIR-V, OpenCL C), which the loader
  // checks against the module's IR: such modules load from any file.
  kData,
  // Native code for the host's CPU (a shared library, an object file, machine code to map): it
  // runs in the host's process with its rights, so the core loads such modules only when the
  // host opts in (BP_MODULE_LOAD_ALLOW_NATIVE) and refuses them before calling the loader.
  kNative,
};

// Registers `load` as "runtime.module.load_from_bytes.<kind>", which bp_module_load calls for
// each module of kind `kind` in a saved file. `load` is callable as
// Module(const std::string& bytes) and receives exactly what the module's SaveToBytes
// returned. Bytes that are not a module of this kind are an error naming what is wrong
// (BP_ERR_INVALID_ARGUMENT), never a crash: a file may be damaged, from elsewhere or made by an
// attacker who recomputed its checksum, so `load` checks again everything the code generator
// established (BP-PLUGIN-12). A kind whose modules carry native code passes
// ModuleCode::kNative: that also registers "runtime.module.native_code.<kind>", the declaration
// the core reads (list it in the manifest's PROVIDES beside the loader).
template <typename Load>
void RegisterModuleLoader(const std::string& kind, Load load, ModuleCode code = ModuleCode::kData) {
  static_assert(std::is_invocable_r_v<Module, Load&, const std::string&>,
                "RegisterModuleLoader: the loader must be callable as "
                "Module(const std::string& bytes)");
  const std::string fn = "runtime.module.load_from_bytes." + kind;
  RegisterFunction(fn, [fn, load = std::move(load)](PackedArgs args) mutable {
    if (args.size() != 1) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  fn + " takes 1 argument (a bytes object), got " + std::to_string(args.size()));
    }
    bp_object_t* bytes = detail::ObjectArg(args, 0, BP_OBJECT_BYTES, fn, "a bytes object");
    const void* data = nullptr;
    size_t size = 0;
    Check(::backplane::detail::Api()->bytes_get(bytes, &data, &size));
    const std::string text(static_cast<const char*>(data), size);
    return detail::ModuleResult(fn, [&] { return load(text); });
  });
  if (code == ModuleCode::kNative) {
    // Only its presence counts; it answers none.
    RegisterFunction("runtime.module.native_code." + kind, [](PackedArgs) { return Any(); });
  }
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_CODEGEN_HPP_
