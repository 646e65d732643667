// SPDX-License-Identifier: Apache-2.0
// The target kind `simaccel`. Parsing "simaccel -max_num_threads=256" or building a Target
// from a device (backplane::Target::FromDevice, `backplane demo`) gives a Target with these
// attributes; the code generator (codegen.cc) reads only them, never the device, so code for
// simaccel builds on a machine without one.
#include "target.h"

#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <string>

#include "device_api.h"

namespace simaccel {

void RegisterTargetKind() {
  backplane::sdk::TargetKindBuilder("simaccel", "simaccel")
      .Keys({"simaccel", "gpu"})
      .Attr<int64_t>("max_num_threads", SimAccelDeviceAPI::kMaxThreadsPerBlock,
                     BP_ATTR_MAX_THREADS_PER_BLOCK, "threads a block may have")
      .Attr<int64_t>("thread_warp_size", SimAccelDeviceAPI::kWarpSize, BP_ATTR_WARP_SIZE,
                     "threads that run in lockstep")
      .Attr<int64_t>("max_shared_memory_per_block", SimAccelDeviceAPI::kSharedMemoryPerBlock,
                     BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, "bytes of shared memory a block may use")
      .Attr<std::string>("arch", std::string("sim1"), "the instruction set generated code is for")
      .Register();
}

}  // namespace simaccel
