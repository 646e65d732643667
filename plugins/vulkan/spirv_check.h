// SPDX-License-Identifier: Apache-2.0
// Checking a kernel's SPIR-V read back from a saved module: it is valid for Vulkan 1.1
// (SPIRV-Tools' validator) and its interface is the one its layout says, which is what the
// runtime creates the pipeline with. A shader that reads a binding the layout lacks, pushes more
// constants than the layout holds, runs another workgroup size or reaches memory through raw
// addresses would make pipeline creation or dispatch undefined behaviour in the driver (on
// lavapipe, in this process).
#ifndef BACKPLANE_PLUGINS_VULKAN_SPIRV_CHECK_H_
#define BACKPLANE_PLUGINS_VULKAN_SPIRV_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "emitter.h"

namespace backplane {
namespace vulkan {

// "" when `spirv` is valid and matches `layout`: one GLCompute entry point "main" with the
// layout's local size, storage buffers only at set 0 and the layout's bindings (plus the error
// buffer when the kernel has checks), at most one push-constant block that fits push_size, no
// physical pointers; else what is wrong, one line.
std::string SpirvInterfaceProblem(const std::vector<uint32_t>& spirv, const KernelLayout& layout);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_SPIRV_CHECK_H_
