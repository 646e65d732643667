// SPDX-License-Identifier: Apache-2.0
// simaccel's code generator, target.build.simaccel, and its module loader (codegen.cc).
#ifndef SIMACCEL_CODEGEN_H_
#define SIMACCEL_CODEGEN_H_

#include <backplane/backplane.hpp>
#include <string>

#include "device_api.h"

namespace simaccel {

// target.build.simaccel: the kernels SplitHostDevice made from a module (IR text) in, a
// module of kind simaccel out. Reads only `target` (max_num_threads,
// max_shared_memory_per_block, arch), never a device. Throws BP_ERR_INVALID_ARGUMENT for a
// function that is not a kernel or a kernel that does not fit the Target.
backplane::Module BuildModule(SimAccelDeviceAPI* api, const std::string& ir_text,
                              const backplane::Target& target);

// runtime.module.load_from_bytes.simaccel: what a simaccel module's SaveToBytes wrote.
backplane::Module LoadModule(SimAccelDeviceAPI* api, const std::string& bytes);

}  // namespace simaccel

#endif  // SIMACCEL_CODEGEN_H_
