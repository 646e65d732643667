// SPDX-License-Identifier: Apache-2.0
#include "codegen.h"

#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/plugin.hpp>
#include <string>

#include "c_module.h"
#include "compiler.h"

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
  CompileOptions options = OptionsFromTarget(target);
  try {
    module = ir::Parse(ir_text, "target.build.c input");
    ir::VerifyOptions verify;
    verify.device_is_cpu = true;
    ir::Verify(module, verify);
    codegen::CEmitOptions emit;
    emit.num_threads = options.num_threads;
    source = codegen::CEmitter(emit).Emit(module);
  } catch (const ir::Error& e) {
    throw Error(BP_ERR_INVALID_ARGUMENT, std::string("target.build.c: ") + e.what());
  }
  std::string library = CompileSharedLibrary(source, options);
  // The module keeps the canonical text, so a saved module's IR reads the same everywhere.
  return MakeCModule(ir::Print(module), std::move(source), std::move(options), std::move(library));
}

void RegisterCodegen() {
  sdk::RegisterFunction("target.build.c", [](PackedArgs args) {
    if (args.size() != 2) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "target.build.c takes 2 arguments (the IR text and a Target), got " +
                      std::to_string(args.size()));
    }
    const bp_value_t& t = args[1];
    int32_t type = 0;
    if (t.type != BP_VALUE_OBJECT || detail::Api()->object_type(t.u.v_obj, &type) != BP_OK ||
        type != BP_OBJECT_TARGET) {
      detail::Api()->error_clear();
      throw Error(BP_ERR_TYPE, "target.build.c: argument 1 must be a Target object");
    }
    Module m = BuildC(args.String(0), Target(ObjectRef::Borrow(t.u.v_obj)));
    bp_value_t out{};
    out.type = BP_VALUE_OBJECT;
    ObjectRef obj = m.object();
    out.u.v_obj = obj.release();
    return Any(out);
  });
  sdk::RegisterFunction("runtime.module.load_from_bytes.c", [](PackedArgs args) {
    const bp_value_t& b = args[0];
    const void* data = nullptr;
    size_t size = 0;
    if (b.type != BP_VALUE_OBJECT) {
      throw Error(BP_ERR_TYPE, "runtime.module.load_from_bytes.c: argument 0 must be bytes");
    }
    Check(detail::Api()->bytes_get(b.u.v_obj, &data, &size));
    Module m = LoadCModule(std::string(static_cast<const char*>(data), size));
    bp_value_t out{};
    out.type = BP_VALUE_OBJECT;
    ObjectRef obj = m.object();
    out.u.v_obj = obj.release();
    return Any(out);
  });
}

}  // namespace cpu
}  // namespace backplane
