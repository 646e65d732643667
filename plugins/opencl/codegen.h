// SPDX-License-Identifier: Apache-2.0
// target.build.opencl and runtime.module.load_from_bytes.opencl.
#ifndef BACKPLANE_PLUGINS_OPENCL_CODEGEN_H_
#define BACKPLANE_PLUGINS_OPENCL_CODEGEN_H_

#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace opencl {

// The code generator: the kernels of `ir_text` (what bp_build's SplitHostDevice made) as
// OpenCL C, in an `opencl` module. Reads only the Target and touches no device: the program
// is built on the first call on a device. A function that is not a kernel, or a construct
// OpenCL C cannot express, is an ir::Error (BP_ERR_INVALID_ARGUMENT at the edge).
Module BuildOpenCL(const std::string& ir_text, const Target& target);

// Registers target.build.opencl, runtime.module.load_from_bytes.opencl and
// opencl.program_cache_stats (a string "compiled=N loaded=M": programs compiled from source
// and programs created from cached binaries in this process).
void RegisterCodegen();

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_CODEGEN_H_
