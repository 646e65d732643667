// SPDX-License-Identifier: Apache-2.0
// target.build.vulkan: the kernels SplitHostDevice made, as GLSL compute shaders compiled to
// SPIR-V in process by shaderc, in a vulkan Module (module.h). Reads the Target only, never a
// device, so it builds on a machine without one. The SPIR-V is cached in memory and on disk
// (spirv_cache.h): a kernel built before compiles nothing.
#ifndef BACKPLANE_PLUGINS_VULKAN_CODEGEN_H_
#define BACKPLANE_PLUGINS_VULKAN_CODEGEN_H_

#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace vulkan {

// Builds `ir_text` (the IR's text form; every function a kernel) for `target` (kind vulkan:
// max_num_threads and max_push_constants_size bound each kernel). Throws ir::Error for IR the
// target cannot express and Error(BP_ERR_INVALID_ARGUMENT) with shaderc's message and the
// GLSL line it points at when a shader does not compile.
Module BuildVulkan(const std::string& ir_text, const Target& target);

// Registers target.build.vulkan, runtime.module.load_from_bytes.vulkan and
// vulkan.spirv_cache_stats (spirv_cache.h).
void RegisterCodegen();

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_CODEGEN_H_
