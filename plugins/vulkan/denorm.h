// SPDX-License-Identifier: Apache-2.0
// Subnormal floats in the vulkan plugin's pipelines: the SPIR-V of a kernel, asked to keep
// them (docs/vulkan.md, "Subnormal floats"). A header of its own so that vulkan_checks_test
// compiles and checks it without the plugin.
#ifndef BACKPLANE_PLUGINS_VULKAN_DENORM_H_
#define BACKPLANE_PLUGINS_VULKAN_DENORM_H_

#include <cstdint>
#include <vector>

namespace backplane {
namespace vulkan {

// `spirv` with the execution mode DenormPreserve for 32-bit floats (and for 64-bit ones when
// `float64` and the module declares the Float64 capability), its capability and, before
// SPIR-V 1.4, the SPV_KHR_float_controls extension: the IR keeps subnormal floats, and without
// the mode a device may flush them to zero. Only a device whose float controls offer
// shaderDenormPreserveFloat32 (Vulkan 1.2) may be asked; its pipelines are made from the
// result (module.cc), the saved and cached SPIR-V stays without it. (NVIDIA's driver flushes
// float32 subnormals and offers no way to ask: docs/vulkan.md, "Subnormal floats".) Throws
// Error(BP_ERR_INTERNAL) for damaged SPIR-V.
std::vector<uint32_t> WithDenormPreserve(const std::vector<uint32_t>& spirv, bool float64);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_DENORM_H_
