// SPDX-License-Identifier: Apache-2.0
#include "codegen.h"

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/codegen.hpp>
#include <backplane/sdk/plugin.hpp>
#include <string>

#include "c_emitter.h"
#include "compiler.h"
#include "module.h"

namespace backplane {
namespace cpu {

Module BuildC(const std::string& ir_text, const Target& target) {
  if (target.Kind() != "c") {
    throw Error(BP_ERR_INVALID_ARGUMENT, "target.build.c: got a Target of kind '" + target.Kind() +
                                             "'; it builds for kind 'c' only (e.g. \"c\" or "
                                             "\"c -mcpu=skylake\")");
  }
  ir::IRModule module;
  std::string source;
  std::vector<codegen::FaultSite> sites;
  CompileOptions options = OptionsFromTarget(target);
  try {
    module = ir::Parse(ir_text, "target.build.c input");
    ir::VerifyOptions verify;
    verify.device_is_cpu = true;
    ir::Verify(module, verify);
    codegen::CEmitOptions emit;
    emit.num_threads = options.num_threads;
    codegen::CEmitter emitter(emit);
    codegen::CheckOptions checks;
    checks.bounds_check = target.GetAttr<bool>("bounds-check").value_or(false);
    emitter.set_checks(checks);
    source = emitter.Emit(module);
    sites = emitter.fault_sites();
  } catch (const ir::Error& e) {
    // A construct the code generator refuses (float16, vector types) stays BP_ERR_UNSUPPORTED:
    // callers (the conformance kit) tell a missing feature from bad input by the kind.
    throw Error(
        e.kind() == ir::ErrorKind::kUnsupported ? BP_ERR_UNSUPPORTED : BP_ERR_INVALID_ARGUMENT,
        std::string("target.build.c: ") + e.what());
  }
  std::string library = CompileSharedLibrary(source, options);
  // The module keeps the canonical text, so a saved module's IR reads the same everywhere.
  return MakeCModule(std::move(module), std::move(source), std::move(options), std::move(library),
                     std::move(sites));
}

void RegisterCodegen() {
  // The SDK's wrappers check the packed arguments (IR text and a Target of kind c; bytes) and
  // return the Module as an object value.
  sdk::RegisterCodegen("c", BuildC);
  // A saved c module holds a shared library, which runs in the host's process once mapped: the
  // core loads such modules only when the host allows native code (docs/security.md).
  sdk::RegisterModuleLoader("c", LoadCModule, sdk::ModuleCode::kNative);
}

}  // namespace cpu
}  // namespace backplane
