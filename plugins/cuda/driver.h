// SPDX-License-Identifier: Apache-2.0
// The CUDA driver API, loaded at run time: one table of the libcuda symbols the plugin uses,
// and the status converter.
//
// The plugin is compiled against the toolkit's cuda.h but never linked with libcuda, so it
// loads on a machine without a GPU or driver. Driver::Get() opens libcuda.so.1 (or
// $BACKPLANE_CUDA_DRIVER_LIBRARY when set, e.g. the toolkit's stub for a test) once, resolves
// every symbol by the versioned name cuda.h maps it to (cuMemAlloc -> cuMemAlloc_v2) and
// calls cuInit(0). When any step fails, the table is not `ok` and `reason` says why; the
// DeviceAPI then reports zero devices with that reason instead of failing.
#ifndef BACKPLANE_PLUGINS_CUDA_DRIVER_H_
#define BACKPLANE_PLUGINS_CUDA_DRIVER_H_

#include <cuda.h>

#include <string>
#include <utility>

namespace backplane {
namespace cuda {

// Each entry is a pointer with the exact type of the cuda.h function it names.
#define BACKPLANE_CUDA_DRIVER_SYMBOLS(X) \
  X(cuInit)                              \
  X(cuDriverGetVersion)                  \
  X(cuGetErrorName)                      \
  X(cuGetErrorString)                    \
  X(cuDeviceGetCount)                    \
  X(cuDeviceGet)                         \
  X(cuDeviceGetName)                     \
  X(cuDeviceGetAttribute)                \
  X(cuDeviceTotalMem)                    \
  X(cuDeviceGetUuid)                     \
  X(cuDeviceGetPCIBusId)                 \
  X(cuDeviceCanAccessPeer)               \
  X(cuDevicePrimaryCtxRetain)            \
  X(cuDevicePrimaryCtxRelease)           \
  X(cuCtxSetCurrent)                     \
  X(cuCtxGetCurrent)                     \
  X(cuCtxPushCurrent)                    \
  X(cuCtxPopCurrent)                     \
  X(cuCtxEnablePeerAccess)               \
  X(cuMemGetInfo)                        \
  X(cuMemAlloc)                          \
  X(cuMemFree)                           \
  X(cuMemGetAddressRange)                \
  X(cuPointerGetAttribute)               \
  X(cuPointerGetAttributes)              \
  X(cuMemHostAlloc)                      \
  X(cuMemFreeHost)                       \
  X(cuMemcpyHtoDAsync)                   \
  X(cuMemcpyDtoHAsync)                   \
  X(cuMemcpyDtoDAsync)                   \
  X(cuMemcpyPeerAsync)                   \
  X(cuMemcpyAsync)                       \
  X(cuStreamCreate)                      \
  X(cuStreamDestroy)                     \
  X(cuStreamSynchronize)                 \
  X(cuStreamWaitEvent)                   \
  X(cuEventCreate)                       \
  X(cuEventRecord)                       \
  X(cuEventQuery)                        \
  X(cuEventSynchronize)                  \
  X(cuEventDestroy)                      \
  X(cuModuleLoadDataEx)                  \
  X(cuModuleUnload)                      \
  X(cuModuleGetFunction)                 \
  X(cuFuncSetAttribute)                  \
  X(cuLaunchKernel)

// The driver's symbols. Lives until the process ends (the library is never closed: modules
// and memory of the driver may be released from static destructors).
struct Driver {
#define BACKPLANE_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  BACKPLANE_CUDA_DRIVER_SYMBOLS(BACKPLANE_CUDA_DRIVER_MEMBER)
#undef BACKPLANE_CUDA_DRIVER_MEMBER

  // cuEventElapsedTime: cuda.h names the _v2 of 12.8; an older driver has only the first,
  // with the same signature (either is taken; null when neither is there: events then
  // cannot time).
  decltype(&::cuEventElapsedTime) cuEventElapsedTime = nullptr;

  bool ok = false;      // every symbol resolved and cuInit succeeded
  std::string library;  // the library file tried (or loaded)
  std::string reason;   // why not ok: "" when ok
  int version = 0;      // cuDriverGetVersion, e.g. 13000; 0 when unknown

  // The table, loaded on first use (thread-safe). Never throws.
  static const Driver& Get();
};

// The name of a CUresult ("CUDA_ERROR_OUT_OF_MEMORY"), from the driver when it is loaded.
std::string ResultName(CUresult r);

// Throws backplane::Error: "<what> failed: <name> (<code>): <description>", with
// BP_ERR_OUT_OF_MEMORY for out-of-memory results, BP_ERR_DEVICE else.
[[noreturn]] void Fail(CUresult r, const std::string& what);

// Throws as Fail when `r` is not CUDA_SUCCESS. `what` is a string, or a callable returning one
// that runs only on failure: hot paths (launches, copies) build no message when all is well.
inline void Check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) Fail(r, what);
}
inline void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) Fail(r, what);
}
template <typename Describe, typename = decltype(std::string(std::declval<Describe>()()))>
inline void Check(CUresult r, Describe&& describe) {
  if (r != CUDA_SUCCESS) Fail(r, describe());
}

// The newest PTX ISA version a driver of `driver_version` (cuDriverGetVersion, e.g. 12020) can
// JIT-compile, as major * 10 + minor (CUDA 12.2 -> 82, 13.0 -> 90), from the PTX ISA release
// notes; the oldest driver branch that loads PTX of `isa` ("r580" for 9.0), for messages.
int MaxPtxIsa(int driver_version);
std::string DriverBranchForPtxIsa(int isa);

// The driver table, or Error(BP_ERR_NOT_FOUND) carrying its reason and what to install.
const Driver& RequireDriver(const std::string& what);

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_DRIVER_H_
