// SPDX-License-Identifier: Apache-2.0
#include "codegen.h"

#include <backplane/ir/text.hpp>
#include <backplane/sdk/codegen.hpp>
#include <string>

#include "emitter.h"
#include "module.h"
#include "program_cache.h"

namespace backplane {
namespace opencl {

Module BuildOpenCL(const std::string& ir_text, const Target& target) {
  ir::IRModule m = ir::Parse(ir_text, "target.build.opencl input");
  OpenCLCodeOptions options;
  options.fp_contract = target.GetAttr<bool>("fast-math-contract").value_or(false);
  options.bounds_check = target.GetAttr<bool>("bounds-check").value_or(false);
  options.float16 = target.GetAttr<bool>("supports_float16").value_or(false);
  OpenCLCode code = EmitOpenCL(m, options);
  return MakeOpenCLModule(std::move(m), std::move(code), options);
}

void RegisterCodegen() {
  sdk::RegisterCodegen("opencl", BuildOpenCL);
  sdk::RegisterModuleLoader("opencl", LoadOpenCLModule);
  sdk::RegisterFunction("opencl.program_cache_stats", [](PackedArgs) {
    const ProgramCacheStats s = GetProgramCacheStats();
    return sdk::StringValue("compiled=" + std::to_string(s.compiled) +
                            " loaded=" + std::to_string(s.loaded));
  });
  // "set=N unchanged=M": kernel arguments set, and left as an earlier launch set them.
  sdk::RegisterFunction("opencl.kernel_arg_stats", [](PackedArgs) {
    const KernelArgStats s = GetKernelArgStats();
    return sdk::StringValue("set=" + std::to_string(s.set) +
                            " unchanged=" + std::to_string(s.unchanged));
  });
}

}  // namespace opencl
}  // namespace backplane
