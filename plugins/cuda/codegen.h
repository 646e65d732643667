// SPDX-License-Identifier: Apache-2.0
// target.build.cuda and runtime.module.load_from_bytes.cuda.
#ifndef BACKPLANE_PLUGINS_CUDA_CODEGEN_H_
#define BACKPLANE_PLUGINS_CUDA_CODEGEN_H_

#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace cuda {

// Builds the kernels in `ir_text` (SplitHostDevice's output) for the cuda Target `target`:
// CUDA C on the C-family emitter, NVRTC to PTX for the Target's arch (a cubin with
// -cubin=1), cached on disk. Needs no GPU or driver. Throws BP_ERR_INVALID_ARGUMENT for IR the
// dialect cannot express or NVRTC refuses (with its log), BP_ERR_NOT_FOUND without NVRTC.
Module BuildCUDA(const std::string& ir_text, const Target& target);

// Registers target.build.cuda and runtime.module.load_from_bytes.cuda.
void RegisterCodegen();

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_CODEGEN_H_
