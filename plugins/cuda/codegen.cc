// SPDX-License-Identifier: Apache-2.0
#include "codegen.h"

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/codegen.hpp>
#include <string>
#include <utility>

#include "emitter.h"
#include "module.h"
#include "nvrtc.h"
#include "target.h"

namespace backplane {
namespace cuda {

Module BuildCUDA(const std::string& ir_text, const Target& target) {
  CUDAModuleData data;
  data.arch = target.GetAttr<std::string>("arch").value_or(kDefaultArch);
  data.cubin = target.GetAttr<bool>("cubin").value_or(false);
  data.bounds_check = target.GetAttr<bool>("bounds-check").value_or(false);
  ir::IRModule module;
  try {
    module = ir::Parse(ir_text, "target.build.cuda input");
    data.ir = ir::Print(module);
    EmitCUDA(&data, module);
  } catch (const ir::Error& e) {
    // A construct the code generator refuses (float16, vector types) stays BP_ERR_UNSUPPORTED:
    // callers (the conformance kit) tell a missing feature from bad input by the kind.
    throw Error(
        e.kind() == ir::ErrorKind::kUnsupported ? BP_ERR_UNSUPPORTED : BP_ERR_INVALID_ARGUMENT,
        std::string("target.build.cuda: ") + e.what());
  }
  // The IR rounds a*b+c twice (docs/ir.md); NVRTC contracts it into an FMA unless told not to.
  const bool contract = target.GetAttr<bool>("fast-math-contract").value_or(false);
  CompileResult r =
      CompileCuda(data.source, data.arch, data.cubin, {contract ? "--fmad=true" : "--fmad=false"});
  data.binary = std::move(r.binary);
  return MakeCUDAModule(std::move(data), std::move(module));
}

void RegisterCodegen() {
  sdk::RegisterCodegen("cuda", BuildCUDA);
  sdk::RegisterModuleLoader("cuda", LoadCUDAModule);
}

}  // namespace cuda
}  // namespace backplane
