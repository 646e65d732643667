// SPDX-License-Identifier: Apache-2.0
// The `opencl` TargetKind: TVM's attributes for kind opencl, with its defaults. FromDevice
// fills the limits the DeviceAPI reports from clGetDeviceInfo (work-group size, local
// memory, device name, cl_khr_fp16 as supports_float16); thread_warp_size is 1 as OpenCL C promises
// no lockstep execution (the device's warp_size attribute is only its preferred multiple).
#include "target.h"

#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <string>

namespace backplane {
namespace opencl {

void RegisterTargetKind() {
  namespace sdk = ::backplane::sdk;
  sdk::TargetKindBuilder("opencl", "opencl")
      .Attr<int64_t>("max_num_threads", int64_t{256}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "CL_DEVICE_MAX_WORK_GROUP_SIZE")
      .Attr<int64_t>("max_threads_per_block", int64_t{256}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "CL_DEVICE_MAX_WORK_GROUP_SIZE")
      // Not read from the device: its warp_size is the SIMD width it prefers, but OpenCL C
      // promises no lockstep execution, so generated code may not rely on one.
      .Attr<int64_t>("thread_warp_size", int64_t{1},
                     "1: OpenCL C guarantees no lockstep execution across work-items")
      .Attr<int64_t>("max_shared_memory_per_block", int64_t{16384},
                     BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, "CL_DEVICE_LOCAL_MEM_SIZE")
      .Attr<int64_t>("texture_spatial_limit", int64_t{16384}, "largest image width/height")
      .Attr<int64_t>("image_base_address_alignment", int64_t{64}, "bytes")
      .Attr<std::string>("device_name", std::string(), BP_ATTR_DEVICE_NAME, "CL_DEVICE_NAME")
      // False unless the device says so: OpenCL C has float16 only with cl_khr_fp16, an
      // optional extension, so a Target that names no device promises none.
      .Attr<bool>("supports_float16", false, BP_ATTR_SUPPORTS_FP16,
                  "cl_khr_fp16: kernels may compute in float16 (else float16 is refused)")
      .Attr<bool>("fast-math-contract", false,
                  "allow fusing, e.g. a*b+c into an FMA (otherwise #pragma OPENCL FP_CONTRACT "
                  "OFF keeps the IR's separate roundings)")
      .Attr<bool>("bounds-check", false,
                  "check every index against its extent: an access out of bounds is an error "
                  "naming the kernel, buffer, index and extent (slower)")
      .Register();
}

}  // namespace opencl
}  // namespace backplane
