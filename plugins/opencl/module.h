// SPDX-License-Identifier: Apache-2.0
// The `opencl` runtime Module: the kernels' OpenCL C source, their IR and per-kernel argument
// metadata. On the first call on a device it builds the program for that device's context
// (program_cache.h: from a cached binary when it can) and keeps it for the module's life; a
// call checks its arguments against the kernel's PrimFunc (sdk/kernel_args.hpp), sets them
// and enqueues an NDRange (global = blocks * threads, local = threads) on the stream
// SetStream made active on that device, without waiting for it, unless the kernel has
// run-time checks (a division by a variable, -bounds-check): then it waits and reads the
// kernel's fault record (docs/codegen-guide.md, "Run-time checks").
#ifndef BACKPLANE_PLUGINS_OPENCL_MODULE_H_
#define BACKPLANE_PLUGINS_OPENCL_MODULE_H_

#include <backplane/backplane.hpp>
#include <backplane/codegen/c_family.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace opencl {

// A module of the kernels in `ir_text` (the IR's text form, kernels only) whose OpenCL C is
// `source`, whose run-time checks are `sites` (OpenCLEmitter::fault_sites). Throws ir::Error
// if the IR does not parse or a function is not a kernel.
Module MakeOpenCLModule(const std::string& ir_text, const std::string& source,
                        std::vector<codegen::FaultSite> sites);

// What an opencl module's SaveToBytes wrote, back into a module. Bytes that are not one are
// Error(BP_ERR_INVALID_ARGUMENT) naming what is wrong.
Module LoadOpenCLModule(const std::string& bytes);

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_MODULE_H_
