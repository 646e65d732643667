// SPDX-License-Identifier: Apache-2.0
// The runtime module of kind "cuda": PTX (or a cubin) with its function table, loaded into
// each device lazily (cuModuleLoadData in the device's primary context, on the first launch
// there), launched with cuLaunchKernel on the stream SetStream made active.
#ifndef BACKPLANE_PLUGINS_CUDA_CUDA_MODULE_H_
#define BACKPLANE_PLUGINS_CUDA_CUDA_MODULE_H_

#include <backplane/backplane.hpp>
#include <string>
#include <vector>

#include "emitter.h"

namespace backplane {
namespace cuda {

// Everything a cuda module is made of; what SaveToBytes writes.
struct CUDAModuleData {
  std::string arch;    // the Target's arch, e.g. sm_90a
  bool cubin = false;  // binary is a cubin for `arch` (else PTX for its compute_ arch)
  std::string ir;      // the kernels' IR (text form), to check calls against
  std::string source;  // the generated CUDA C
  std::string binary;  // PTX text or cubin bytes
  std::vector<KernelInfo> kernels;
  std::vector<codegen::FaultSite> fault_sites;  // the run-time checks' messages
};

// The module for `data`. Needs no device until a function is called. Throws ir::Error for IR
// that does not parse.
Module MakeCUDAModule(CUDAModuleData data);

// The module SaveToBytes wrote; BP_ERR_INVALID_ARGUMENT naming what is wrong for other bytes.
Module LoadCUDAModule(const std::string& bytes);

// The saved form of `data` (a header line, a JSON function table, then the sections).
std::string SerializeCUDAModule(const CUDAModuleData& data);

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_CUDA_MODULE_H_
