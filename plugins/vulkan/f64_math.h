// SPDX-License-Identifier: Apache-2.0
// float64 math for GLSL: GLSL 4.50 has no double overload of exp, exp2, log, log2, pow, sin,
// cos or tanh (nor erf at all), and Vulkan does not make its double fma a fused operation, so
// the vulkan code generator writes its own, in GLSL, into the prelude of a shader that uses
// them (docs/vulkan.md, "float64 math": how each is computed and its measured error).
#ifndef BACKPLANE_PLUGINS_VULKAN_F64_MATH_H_
#define BACKPLANE_PLUGINS_VULKAN_F64_MATH_H_

#include <set>
#include <string>

namespace backplane {
namespace vulkan {

// Whether the float64 form of IR intrinsic `name` is one of these helpers (then it is called
// "bp_<name>"); the others map to GLSL built-ins.
bool IsFloat64MathHelper(const std::string& name);

// The GLSL of the helpers for the intrinsics in `used` (IR names for which
// IsFloat64MathHelper holds) and of everything they call, each once, callees first. Every
// variable is `precise`, so that the SPIR-V forbids contraction and reassociation in them
// whatever the Target's -fast-math-contract says: their double-double steps depend on each
// operation rounding on its own.
std::string Float64MathGlsl(const std::set<std::string>& used);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_F64_MATH_H_
