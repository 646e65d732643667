// SPDX-License-Identifier: Apache-2.0
// The `cuda` TargetKind (TVM's attributes) and the tags nvidia/h100 and nvidia/h200.
#ifndef BACKPLANE_PLUGINS_CUDA_TARGET_H_
#define BACKPLANE_PLUGINS_CUDA_TARGET_H_

#include <string>

namespace backplane {
namespace cuda {

// The arch a Target gets when neither its text nor a device gives one: PTX for it runs on
// every GPU the CUDA 13 driver supports (Turing and newer), compiled by the driver's JIT.
constexpr const char* kDefaultArch = "sm_75";

// "sm_90" for compute capability 9.0, "sm_86" for 8.6: never the arch-specific `a` form, whose
// PTX runs on that one compute capability only.
std::string ArchForComputeVersion(int major, int minor);

// The PTX virtual architecture of an arch: "sm_90a" -> "compute_90a". Throws
// BP_ERR_INVALID_ARGUMENT naming the attribute for a value that is not sm_<digits>[a|f].
std::string VirtualArch(const std::string& arch);

// Registers the kind `cuda` and its tags.
void RegisterTargetKind();

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_TARGET_H_
