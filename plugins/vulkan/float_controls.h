// SPDX-License-Identifier: Apache-2.0
// Float controls in the vulkan plugin's pipelines: the SPIR-V of a kernel, asked to keep
// subnormal floats, signed zeros, infinities and NaNs as the IR does (docs/vulkan.md,
// "Float controls"). A header of its own so that vulkan_checks_test compiles and checks it
// without the plugin.
#ifndef BACKPLANE_PLUGINS_VULKAN_FLOAT_CONTROLS_H_
#define BACKPLANE_PLUGINS_VULKAN_FLOAT_CONTROLS_H_

#include <cstdint>
#include <vector>

namespace backplane {
namespace vulkan {

// What a device's float controls (Vulkan 1.2, or VK_KHR_shader_float_controls) let a shader
// ask for, by float width: DenormPreserve (shaderDenormPreserveFloat32/64) and
// SignedZeroInfNanPreserve (shaderSignedZeroInfNanPreserveFloat16/32/64).
struct FloatControls {
  bool denorm32 = false, denorm64 = false;
  bool specials16 = false, specials32 = false, specials64 = false;
  bool Any() const { return denorm32 || denorm64 || specials16 || specials32 || specials64; }
};

// `spirv` with the execution modes `want` allows for the float widths the module uses (32
// always; 64 and 16 where it declares the Float64 or Float16 capability), their capabilities
// and, before SPIR-V 1.4, the SPV_KHR_float_controls extension. DenormPreserve: the IR keeps
// subnormal floats, and without the mode a device may flush them to zero (NVIDIA's driver
// flushes float32 subnormals and offers no way to ask). SignedZeroInfNanPreserve: without it a
// driver may take floats for finite and zeros for unsigned (lavapipe folded
// `double(0.0) * x` to 0 for x infinite, and a NaN test after it away). Pipelines are made from
// the result (module.cc); the saved and cached SPIR-V stays without it. Throws
// Error(BP_ERR_INTERNAL) for damaged SPIR-V.
std::vector<uint32_t> WithFloatControls(const std::vector<uint32_t>& spirv,
                                        const FloatControls& want);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_FLOAT_CONTROLS_H_
