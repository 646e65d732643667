// SPDX-License-Identifier: Apache-2.0
// target.build.remote and the loader of saved remote modules (docs/remote.md): the whole IR is
// built here for the remote device's own Target, by this host's code generator of that kind;
// the module is saved and uploaded to the server (at once when the server is attached, so what
// it refuses is an error of the build), whose loaders check it as any file.
#ifndef BACKPLANE_REMOTE_CODEGEN_H_
#define BACKPLANE_REMOTE_CODEGEN_H_

namespace backplane {
namespace remote {

// Registers target.build.remote and runtime.module.load_from_bytes.remote.
void RegisterRemoteCodegen();

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_CODEGEN_H_
