// SPDX-License-Identifier: Apache-2.0
// The vulkan runtime Module: per kernel its SPIR-V, its GLSL and its layout (bindings, push
// constants, local size, launch params), plus the kernels' IR for checking calls. It is
// made and loaded without a device; a kernel's pipeline is created on its first call on each
// device, through the device's pipeline cache.
#ifndef BACKPLANE_PLUGINS_VULKAN_MODULE_H_
#define BACKPLANE_PLUGINS_VULKAN_MODULE_H_

#include <backplane/backplane.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "emitter.h"

namespace backplane {
namespace vulkan {

// A compiled kernel.
struct CompiledKernel {
  KernelLayout layout;
  std::string glsl;
  std::vector<uint32_t> spirv;
};

// The module of `kernels`, whose IR (the kernels SplitHostDevice made, parsed once by the
// caller: the build and the loader hand over what they parsed) is `m`, emitted with `options`.
Module MakeVulkanModule(ir::IRModule m, std::vector<CompiledKernel> kernels, GlslOptions options);

// What MakeVulkanModule's module saved (SaveToBytes), back into a Module. The bytes may come
// from anyone: the IR must verify, each kernel's GLSL and layout must be exactly what
// EmitGlslKernel makes of its IR with the saved options (the runtime binds and launches by the
// layout), and its SPIR-V must be valid and have that layout's interface
// (SpirvInterfaceProblem). Anything else is Error(BP_ERR_INVALID_ARGUMENT) saying what is wrong.
Module LoadVulkanModule(const std::string& bytes);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_MODULE_H_
