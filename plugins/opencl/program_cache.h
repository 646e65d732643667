// SPDX-License-Identifier: Apache-2.0
// Builds OpenCL programs from generated source, with a disk cache of program binaries.
//
// A program built before for the same source, build options, device (CL_DEVICE_NAME,
// CL_DEVICE_VERSION) and driver (CL_DRIVER_VERSION) is created from its binary
// (clCreateProgramWithBinary) instead of being compiled again: PoCL takes about a second to
// compile a kernel, and a cached binary a few milliseconds. The cache folder is
// $XDG_CACHE_HOME/backplane/opencl, else ~/.cache/backplane/opencl, created mode 0700; a
// folder that another user owns or others can write to is not used (a binary from it is
// native code for PoCL), and then nothing is cached on disk. Each entry carries a checksum:
// a damaged or truncated entry, or one the driver refuses, is rebuilt from source and
// replaced, never trusted. Entries are published with an atomic rename.
#ifndef BACKPLANE_PLUGINS_OPENCL_PROGRAM_CACHE_H_
#define BACKPLANE_PLUGINS_OPENCL_PROGRAM_CACHE_H_

#include <CL/cl.h>

#include <cstdint>
#include <string>

#include "device_api.h"

namespace backplane {
namespace opencl {

// Build options every program gets (part of the cache key).
constexpr const char* kBuildOptions = "";

// The options a program gets on `device`: kBuildOptions, plus -DBP_NO_UNROLL_HINTS on a CPU
// device (CL_DEVICE_TYPE_CPU), where the generated unroll hints made matmul_tiled_gpu 3x
// slower on PoCL 3.1 (docs/opencl.md); GPU compilers keep them. And
// -cl-fp32-correctly-rounded-divide-sqrt where the device offers it (the IR's float32 `/` and
// sqrt are correctly rounded).
std::string BuildOptions(const OpenCLDeviceAPI::Device& device);

// A built program of `source` for `device` (its context), owned by the caller
// (clReleaseProgram). A source that does not compile is Error(BP_ERR_INVALID_ARGUMENT) with
// the OpenCL build log, each error followed by the generated line it points at; `what`
// names the module in messages. Driver failures are BP_ERR_DEVICE or BP_ERR_OUT_OF_MEMORY.
cl_program BuildProgram(const OpenCLDeviceAPI::Device& device, const std::string& source,
                        const std::string& what);

// The disk cache folder, or "" when no private folder could be made (nothing is cached).
std::string ProgramCacheDir();

// Counts since the process started: programs compiled from source, programs created from a
// cached binary. Registered as the global function `opencl.program_cache_stats`.
struct ProgramCacheStats {
  int64_t compiled = 0;
  int64_t loaded = 0;
};
ProgramCacheStats GetProgramCacheStats();

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_PROGRAM_CACHE_H_
