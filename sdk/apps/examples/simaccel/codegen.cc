// SPDX-License-Identifier: Apache-2.0
// target.build.simaccel. bp_build has already parsed and verified the IR, split the host
// code from the kernels (the host part runs in the core), and sends only the kernels here.
// Building a kernel for simaccel means checking it against the Target -- the checks a GPU
// compiler makes before it emits code -- and compiling it for the IR interpreter, which is
// what this simulated device executes (module.h). A shared array sized at launch is checked
// by the launch kit at each launch, against the device's shared memory.
#include "codegen.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "module.h"

namespace simaccel {

namespace ir = backplane::ir;
namespace sdk = backplane::sdk;
using backplane::Error;
using backplane::Module;
using backplane::Target;

Module BuildModule(SimAccelDeviceAPI* api, const std::string& ir_text, const Target& target) {
  // Only the Target is read: the machine that builds may have no simaccel device.
  const std::string arch = target.GetAttr<std::string>("arch", "sim1");
  BACKPLANE_REQUIRE(
      arch == "sim1", BP_ERR_INVALID_ARGUMENT,
      "attribute 'arch' is '" + arch + "'; this code generator emits code for arch sim1 only");
  KernelLimits limits;
  limits.max_num_threads = target.GetAttr<int64_t>("max_num_threads", 0);
  const int64_t max_shared = target.GetAttr<int64_t>("max_shared_memory_per_block", 0);
  BACKPLANE_REQUIRE(limits.max_num_threads > 0, BP_ERR_INVALID_ARGUMENT,
                    "attribute 'max_num_threads' is " + std::to_string(limits.max_num_threads) +
                        "; give a positive count");

  // An ir::Error from Parse (or from the interpreter's compiler below) becomes
  // BP_ERR_INVALID_ARGUMENT in sdk::RegisterCodegen's wrapper.
  ir::IRModule kernels = ir::Parse(ir_text, "target.build.simaccel input");
  for (const ir::PrimFunc& f : kernels.functions()) {
    BACKPLANE_REQUIRE(f.launch_axes.has_value(), BP_ERR_INVALID_ARGUMENT,
                      "function '" + f.name +
                          "' is not a kernel (it has no launch_params); build through "
                          "bp_build, which splits host code from kernels");
    // The launch kit lays the shared arrays out (constant-sized ones here; those sized at
    // launch are checked against the device at each launch).
    const int64_t shared = static_cast<int64_t>(
        backplane::launch::KernelSignature(f, "simaccel").static_shared_bytes());
    BACKPLANE_REQUIRE(shared <= max_shared, BP_ERR_INVALID_ARGUMENT,
                      "kernel '" + f.name + "' uses " + std::to_string(shared) +
                          " bytes of shared memory but the Target allows "
                          "max_shared_memory_per_block = " +
                          std::to_string(max_shared) + "; use smaller tiles");
  }
  return sdk::MakeModule(std::make_shared<SimAccelModule>(api, std::move(kernels), limits));
}

Module LoadModule(SimAccelDeviceAPI* api, const std::string& bytes) {
  return sdk::MakeModule(SimAccelModule::FromBytes(api, bytes));
}

}  // namespace simaccel
