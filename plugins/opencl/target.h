// SPDX-License-Identifier: Apache-2.0
// The `opencl` TargetKind.
#ifndef BACKPLANE_PLUGINS_OPENCL_TARGET_H_
#define BACKPLANE_PLUGINS_OPENCL_TARGET_H_

namespace backplane {
namespace opencl {

void RegisterTargetKind();

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_TARGET_H_
