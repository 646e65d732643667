// SPDX-License-Identifier: Apache-2.0
// The target kind `remote` (docs/remote.md, "Building for a remote device"): {"kind": "remote",
// "server": "host:port", "device": "opencl:0", "target": {the remote device's own Target}}. Read
// from a device (Target::FromDevice), the server gives its device's Target; the kind alone parses
// as a Target bound to no device, which the build refuses. Its keys are "remote" and the inner
// Target's ("cpu", "gpu", ...), so tools choose kernels by what the code is.
// BP_TARGET_KIND_WHOLE_IR: the code generator (codegen.h) gets the whole IR.
#ifndef BACKPLANE_REMOTE_TARGET_H_
#define BACKPLANE_REMOTE_TARGET_H_

namespace backplane {
namespace remote {

// Registers the kind `remote`.
void RegisterRemoteTarget();

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_TARGET_H_
