// SPDX-License-Identifier: Apache-2.0
// The runtime module of kind "cuda": PTX (or a cubin) with its function table, loaded into
// each device lazily (cuModuleLoadData in the device's primary context, on the first launch
// there), launched with cuLaunchKernel on the stream SetStream made active.
#ifndef BACKPLANE_PLUGINS_CUDA_MODULE_H_
#define BACKPLANE_PLUGINS_CUDA_MODULE_H_

#include <backplane/backplane.hpp>
#include <string>
#include <vector>

#include "emitter.h"

namespace backplane {
namespace cuda {

// Everything a cuda module is made of; what SaveToBytes writes.
struct CUDAModuleData {
  std::string arch;    // the Target's arch, e.g. sm_90
  bool cubin = false;  // binary is a cubin for `arch` (else PTX for its compute_ arch)
  std::string ir;      // the kernels' IR (text form), to check calls against
  std::string source;  // the generated CUDA C
  std::string binary;  // PTX text or cubin bytes
  std::vector<KernelInfo> kernels;
  std::vector<codegen::FaultSite> fault_sites;  // the run-time checks' messages
  bool bounds_check = false;                    // the Target's bounds-check (the emitter's option)
};

// Emits the CUDA C of `data.ir` (parsed and verified) into data.source, data.kernels and
// data.fault_sites, with data.bounds_check: what a build does before NVRTC, and what loading a
// saved module does again to check the file. Throws ir::Error for IR that does not parse or
// verify, or that CUDA C cannot express.
void EmitCUDA(CUDAModuleData* data);
// The same for `module`, data.ir's IR already parsed (the build and the loader parse it once).
void EmitCUDA(CUDAModuleData* data, const ir::IRModule& module);

// The module for `data`. Needs no device until a function is called. Throws ir::Error for IR
// that does not parse.
Module MakeCUDAModule(CUDAModuleData data);
// The same with data.ir already parsed into `module` (not parsed again).
Module MakeCUDAModule(CUDAModuleData data, ir::IRModule module);

// The module SaveToBytes wrote. The bytes may come from anyone: the IR must verify, the CUDA C,
// function table and check table must be exactly what EmitCUDA makes of it, and PTX must declare
// each kernel with scalar params that match the table (the launch passes one slot a param, then one
// per block offset). BP_ERR_INVALID_ARGUMENT naming what is wrong for other bytes.
Module LoadCUDAModule(const std::string& bytes);

// The saved form of `data` (a header line, a JSON function table, then the sections).
std::string SerializeCUDAModule(const CUDAModuleData& data);

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_MODULE_H_
