// SPDX-License-Identifier: Apache-2.0
// simaccel's TargetKind (target.cc).
#ifndef SIMACCEL_TARGET_H_
#define SIMACCEL_TARGET_H_

namespace simaccel {

// Registers the target kind `simaccel` on device type simaccel: the attributes the code
// generator reads, each read from the device by Target::FromDevice where the device has it.
void RegisterTargetKind();

}  // namespace simaccel

#endif  // SIMACCEL_TARGET_H_
