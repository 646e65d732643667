// SPDX-License-Identifier: Apache-2.0
// target.build.vulkan: IR -> GLSL (emitter.cc) -> SPIR-V (shaderc, Vulkan 1.1 environment,
// unoptimized) -> every float add, subtract, multiply, divide and negation decorated
// NoContraction (unless the Target says -fast-math-contract) -> SPIRV-Tools' performance
// passes, which keep those decorations. The result is cached in memory and on disk
// (spirv_cache.h), keyed by everything that goes into it (SpirvKeyMaterial).
#include "codegen.h"

#include <spirv-tools/libspirv.h>

#include <backplane/ir/text.hpp>
#include <backplane/sdk/codegen.hpp>
#include <set>
#include <shaderc/shaderc.hpp>
#include <spirv-tools/optimizer.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "device_api.h"
#include "emitter.h"
#include "module.h"
#include "spirv_cache.h"

#if __has_include(<glslang/build_info.h>)
#include <glslang/build_info.h>
#endif

namespace backplane {
namespace vulkan {

namespace {

// Bumped when what CompileGlsl does to the words changes (its options, ForbidContraction, the
// passes), so that entries made the old way are not reused.
constexpr const char* kSpirvCacheFormat = "vulkan-spirv-cache-1";

// What CompileGlsl asks of shaderc and SPIRV-Tools; their values are in the cache key.
constexpr shaderc_target_env kTargetEnv = shaderc_target_env_vulkan;
constexpr shaderc_env_version kEnvVersion = shaderc_env_version_vulkan_1_1;
// Optimized afterwards by SPIRV-Tools, after the NoContraction decorations.
constexpr shaderc_optimization_level kShadercOptimization = shaderc_optimization_level_zero;
constexpr spv_target_env kOptimizerEnv = SPV_ENV_VULKAN_1_1;

// The versions of the compilers linked into the plugin: glslang (shaderc's front end), the
// SPIR-V shaderc emits, SPIRV-Tools (the optimizer).
std::string ToolchainVersions() {
  std::string v = "glslang ";
#ifdef GLSLANG_VERSION_MAJOR
  v += std::to_string(GLSLANG_VERSION_MAJOR) + "." + std::to_string(GLSLANG_VERSION_MINOR) + "." +
       std::to_string(GLSLANG_VERSION_PATCH) + GLSLANG_VERSION_FLAVOR;
#else
  v += "unknown";
#endif
  unsigned int spv_version = 0, spv_revision = 0;
  shaderc_get_spv_version(&spv_version, &spv_revision);
  v += "; shaderc SPIR-V " + std::to_string(spv_version) + " rev " + std::to_string(spv_revision);
  v += "; SPIRV-Tools " + std::string(spvSoftwareVersionDetailsString());
  return v;
}

// Everything CompileGlsl's output depends on: the cache format, the plugin's and the
// compilers' versions, the options, the contraction rule, the kernel's name (shaderc's file
// name) and the GLSL.
std::string SpirvKeyMaterial(const std::string& name, const std::string& source, bool fp_contract) {
  static const std::string versions = ToolchainVersions();
  return std::string(kSpirvCacheFormat) + "\nplugin " BACKPLANE_VULKAN_VERSION "\n" + versions +
         "\nshaderc compute entry main env " + std::to_string(kTargetEnv) + " " +
         std::to_string(kEnvVersion) + " optimization " + std::to_string(kShadercOptimization) +
         "\nspirv-opt performance passes env " + std::to_string(kOptimizerEnv) + "\nfp_contract " +
         (fp_contract ? "1" : "0") + "\nname " + name + "\n" + source;
}

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

// Decorates every floating-point add, subtract, multiply, divide, remainder and negation of
// `spirv` NoContraction, so that neither SPIRV-Tools' optimizer nor a driver fuses a*b+c into
// one rounding (docs/ir.md's rules; docs/vulkan.md). glslang marks only what feeds a
// `precise` variable, and spirv-opt -O turned an unmarked a*b+c into GLSL.std.450 Fma.
void ForbidContraction(const std::string& name, std::vector<uint32_t>& spirv) {
  constexpr uint32_t kOpDecorate = 71, kNoContraction = 42;
  static const std::set<uint32_t> kFloatArithmetic = {
      127,  // OpFNegate
      129,  // OpFAdd
      131,  // OpFSub
      133,  // OpFMul
      136,  // OpFDiv
      140,  // OpFRem
      141,  // OpFMod
      142,  // OpVectorTimesScalar
  };
  // The instructions before the annotations: capabilities, extensions, imports, the memory
  // model, entry points, execution modes and debug information.
  static const std::set<uint32_t> kPreamble = {17, 10, 11, 14, 15, 16, 331, 7, 4, 3, 2, 5, 6, 330};
  std::set<uint32_t> ids, decorated;
  size_t insert_at = 0;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16, op = spirv[at] & 0xffffu;
    if (count == 0 || at + count > spirv.size()) {
      throw Error(BP_ERR_INTERNAL, "vulkan code generator: kernel '" + name +
                                       "' compiled to damaged SPIR-V (an instruction at word " +
                                       std::to_string(at) + "); report it as a bug");
    }
    if (insert_at == 0 && kPreamble.count(op) == 0) insert_at = at;
    if (op == kOpDecorate && count >= 3 && spirv[at + 2] == kNoContraction) {
      decorated.insert(spirv[at + 1]);
    }
    if (kFloatArithmetic.count(op) != 0 && count >= 4) ids.insert(spirv[at + 2]);
    at += count;
  }
  std::vector<uint32_t> decorations;
  for (uint32_t id : ids) {
    if (decorated.count(id) != 0) continue;
    decorations.insert(decorations.end(), {(3u << 16) | kOpDecorate, id, kNoContraction});
  }
  if (insert_at == 0) insert_at = spirv.size();
  spirv.insert(spirv.begin() + static_cast<std::ptrdiff_t>(insert_at), decorations.begin(),
               decorations.end());
}

std::vector<uint32_t> CompileGlsl(const std::string& name, const std::string& source,
                                  bool fp_contract) {
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(kTargetEnv, kEnvVersion);
  options.SetOptimizationLevel(kShadercOptimization);
  const std::string file = name + ".comp";
  shaderc::SpvCompilationResult r =
      compiler.CompileGlslToSpv(source, shaderc_compute_shader, file.c_str(), "main", options);
  if (r.GetCompilationStatus() != shaderc_compilation_status_success) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "vulkan code generator: kernel '" + name + "' did not compile to SPIR-V:\n" +
                    ExplainShaderErrors(r.GetErrorMessage(), file, source) +
                    "(the GLSL is in the error above; report it as a bug of the vulkan plugin)");
  }
  std::vector<uint32_t> spirv(r.cbegin(), r.cend());
  if (!fp_contract) ForbidContraction(name, spirv);
  spvtools::Optimizer optimizer(kOptimizerEnv);
  std::string messages;
  optimizer.SetMessageConsumer([&messages](spv_message_level_t, const char*, const spv_position_t&,
                                           const char* m) { messages += std::string(m) + "\n"; });
  optimizer.RegisterPerformancePasses();
  std::vector<uint32_t> optimized;
  if (!optimizer.Run(spirv.data(), spirv.size(), &optimized)) {
    throw Error(BP_ERR_INTERNAL, "vulkan code generator: SPIRV-Tools could not optimize kernel '" +
                                     name + "': " + messages + "(report it as a bug)");
  }
  return optimized;
}

}  // namespace

Module BuildVulkan(const std::string& ir_text, const Target& target) {
  ir::IRModule m = ir::Parse(ir_text, "target.build.vulkan input");
  GlslOptions options;
  options.max_threads = target.GetAttr<int64_t>("max_num_threads").value_or(256);
  options.max_push_constants = target.GetAttr<int64_t>("max_push_constants_size").value_or(128);
  options.fp_contract = target.GetAttr<bool>("fast-math-contract").value_or(false);
  options.bounds_check = target.GetAttr<bool>("bounds-check").value_or(false);
  std::vector<CompiledKernel> kernels;
  for (const ir::PrimFunc& f : m.functions()) {
    GlslKernel g = EmitGlslKernel(f, options);
    CompiledKernel k;
    k.spirv = CachedSpirv(SpirvKeyMaterial(f.name, g.source, options.fp_contract),
                          [&] { return CompileGlsl(f.name, g.source, options.fp_contract); });
    k.layout = std::move(g.layout);
    k.glsl = std::move(g.source);
    kernels.push_back(std::move(k));
  }
  return MakeVulkanModule(std::move(m), std::move(kernels), options);
}

void RegisterCodegen() {
  sdk::RegisterCodegen("vulkan", BuildVulkan);
  sdk::RegisterModuleLoader("vulkan", LoadVulkanModule);
  sdk::RegisterFunction("vulkan.spirv_cache_stats", [](PackedArgs) {
    const SpirvCacheStats s = GetSpirvCacheStats();
    return sdk::StringValue("compiled=" + std::to_string(s.compiled) + " memory=" +
                            std::to_string(s.memory) + " disk=" + std::to_string(s.disk));
  });
  // "loaded=1 loaded_bytes=32 ignored=0 writes=0 pipelines=1 pipeline_us=104000": what the
  // devices' pipeline caches did in this process (PipelineCacheStats).
  sdk::RegisterFunction("vulkan.pipeline_cache_stats", [](PackedArgs) {
    const PipelineCacheStats s = GetPipelineCacheStats();
    return sdk::StringValue(
        "loaded=" + std::to_string(s.loaded) + " loaded_bytes=" + std::to_string(s.loaded_bytes) +
        " ignored=" + std::to_string(s.ignored) + " writes=" + std::to_string(s.writes) +
        " pipelines=" + std::to_string(s.pipelines) +
        " pipeline_us=" + std::to_string(s.pipeline_ns / 1000));
  });
}

}  // namespace vulkan
}  // namespace backplane
