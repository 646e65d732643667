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
#include <backplane/ir/ir.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace opencl {

// What a module's OpenCL C depends on besides its IR: the Target's attributes.
struct OpenCLCodeOptions {
  bool fp_contract = false;   // fast-math-contract
  bool bounds_check = false;  // bounds-check
  // supports_float16: float16 is OpenCL's half (the device needs cl_khr_fp16, checked by name
  // when the program is built); without it a float rounded to half after every operation, in
  // memory through vload_half / vstore_half_rte. Saved with the module ("float16").
  bool float16 = false;
};

// The OpenCL C of the kernels of `m` and its run-time checks (OpenCLEmitter::fault_sites).
struct OpenCLCode {
  std::string source;
  std::vector<codegen::FaultSite> sites;
};

// What the code generator emits for `m` (kernels only); loading a saved module emits it again
// to check the file. Throws ir::Error for what OpenCL C cannot express or a function that is
// not a kernel.
OpenCLCode EmitOpenCL(const ir::IRModule& m, const OpenCLCodeOptions& options);

// A module of the kernels in `m` (kernels only, parsed once by the caller: the build and the
// loader hand over what they parsed) whose OpenCL C and checks are `code`, emitted with
// `options`. Throws ir::Error if a function is not a kernel.
Module MakeOpenCLModule(ir::IRModule m, OpenCLCode code, OpenCLCodeOptions options);

// What an opencl module's SaveToBytes wrote, back into a module. The bytes may come from
// anyone: the IR must verify and consist of kernels, and the OpenCL C and check table must be
// exactly what EmitOpenCL makes of that IR with the saved options, so the module runs no code
// its IR does not describe. Anything else is Error(BP_ERR_INVALID_ARGUMENT) naming what is
// wrong.
Module LoadOpenCLModule(const std::string& bytes);

// The kernel arguments this process's opencl modules set (clSetKernelArg) and those they left
// as set by an earlier launch because their bytes had not changed (opencl.kernel_arg_stats).
struct KernelArgStats {
  int64_t set = 0;
  int64_t unchanged = 0;
};
KernelArgStats GetKernelArgStats();

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_MODULE_H_
