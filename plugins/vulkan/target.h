// SPDX-License-Identifier: Apache-2.0
// The `vulkan` TargetKind.
#ifndef BACKPLANE_PLUGINS_VULKAN_TARGET_H_
#define BACKPLANE_PLUGINS_VULKAN_TARGET_H_

namespace backplane {
namespace vulkan {

// Registers the target kind `vulkan` (TVM's attributes; FromDevice fills the limits).
void RegisterTargetKind();

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_TARGET_H_
