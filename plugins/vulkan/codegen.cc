// SPDX-License-Identifier: Apache-2.0
// target.build.vulkan: IR -> GLSL (glsl.cc) -> SPIR-V (shaderc, Vulkan 1.1 environment).
#include "codegen.h"

#include <backplane/ir/text.hpp>
#include <backplane/sdk/codegen.hpp>
#include <shaderc/shaderc.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "glsl.h"
#include "module.h"

namespace backplane {
namespace vulkan {

namespace {

// shaderc's message, each "<name>:<line>: error" followed by that line of the source.
std::string ExplainShaderErrors(const std::string& message, const std::string& name,
                                const std::string& source) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  std::istringstream msg(message);
  for (std::string l; std::getline(msg, l);) {
    out += l + "\n";
    if (l.rfind(name + ":", 0) != 0) continue;
    const size_t at = name.size() + 1;
    const size_t colon = l.find(':', at);
    if (colon == std::string::npos) continue;
    try {
      const size_t n = std::stoul(l.substr(at, colon - at));
      if (n >= 1 && n <= lines.size()) out += "    " + lines[n - 1] + "\n";
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::vector<uint32_t> CompileGlsl(const std::string& name, const std::string& source) {
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
  options.SetOptimizationLevel(shaderc_optimization_level_performance);
  const std::string file = name + ".comp";
  shaderc::SpvCompilationResult r =
      compiler.CompileGlslToSpv(source, shaderc_compute_shader, file.c_str(), "main", options);
  if (r.GetCompilationStatus() != shaderc_compilation_status_success) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "vulkan code generator: kernel '" + name + "' did not compile to SPIR-V:\n" +
                    ExplainShaderErrors(r.GetErrorMessage(), file, source) +
                    "(the GLSL is in the error above; report it as a bug of the vulkan plugin)");
  }
  return std::vector<uint32_t>(r.cbegin(), r.cend());
}

}  // namespace

Module BuildVulkan(const std::string& ir_text, const Target& target) {
  ir::IRModule m = ir::Parse(ir_text, "target.build.vulkan input");
  const int64_t max_threads = target.GetAttr<int64_t>("max_num_threads").value_or(256);
  const int64_t max_push = target.GetAttr<int64_t>("max_push_constants_size").value_or(128);
  std::vector<CompiledKernel> kernels;
  for (const ir::PrimFunc& f : m.functions()) {
    GlslKernel g = EmitGlslKernel(f, max_threads, max_push);
    CompiledKernel k;
    k.spirv = CompileGlsl(f.name, g.source);
    k.layout = std::move(g.layout);
    k.glsl = std::move(g.source);
    kernels.push_back(std::move(k));
  }
  return MakeVulkanModule(ir::Print(m), std::move(kernels));
}

void RegisterCodegen() {
  sdk::RegisterCodegen("vulkan", BuildVulkan);
  sdk::RegisterModuleLoader("vulkan", LoadVulkanModule);
}

}  // namespace vulkan
}  // namespace backplane
