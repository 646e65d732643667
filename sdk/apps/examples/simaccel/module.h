// SPDX-License-Identifier: Apache-2.0
// simaccel's runtime Module: the kernels target.build.simaccel produced, callable by name.
//
// What the code generator lowers the kernels to is the IR interpreter's compiled form
// (backplane::ir::Interpreter compiles each PrimFunc once into closures and simulates the
// GPU grid: blocks, threads, shared memory, barriers). A real backend would hold a device
// binary here instead; everything around it -- launching on the active stream, checking
// arguments with the SDK's launch kit (backplane/launch/launch.hpp), saving and loading -- is
// what a real backend does too.
#ifndef SIMACCEL_MODULE_H_
#define SIMACCEL_MODULE_H_

#include <backplane/ir/interp.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/module.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device_api.h"

namespace simaccel {

// What the Target allowed when the kernels were built; checked again at each launch, where
// the launch sizes are known.
struct KernelLimits {
  int64_t max_num_threads = 0;
};

class SimAccelModule : public backplane::sdk::KernelModule {
 public:
  // The module kind: sdk::MakeModule needs it (a static_assert says so where it is missing);
  // saved modules carry it, and runtime.module.load_from_bytes.simaccel reads them back.
  static constexpr const char* kKind = "simaccel";

  // `kernels` holds only kernels (functions with the attribute launch_params), as
  // SplitHostDevice makes them. Throws ir::Error if the interpreter cannot run one.
  SimAccelModule(SimAccelDeviceAPI* api, backplane::ir::IRModule kernels, KernelLimits limits);

  // What SaveToBytes wrote; BP_ERR_INVALID_ARGUMENT for anything else.
  static std::shared_ptr<SimAccelModule> FromBytes(SimAccelDeviceAPI* api,
                                                   const std::string& bytes);

  // "simaccel-module 1", the limits, then the kernels' IR text.
  std::optional<std::string> SaveToBytes() override;
  // "" or "ir": the kernels' IR text.
  std::optional<std::string> InspectSource(const std::string& format) override;

 private:
  // GetFunction (sdk::KernelModule) gives a function that calls this: it checks the
  // arguments and queues the kernel on the active stream of the device its tensors are on
  // (simaccel:0 when it has no tensors, as the launch kit decides). The packed arguments are
  // the kernel's params, then one int64 extent per launch param.
  void Launch(size_t index, backplane::PackedArgs args) override;

  SimAccelDeviceAPI* const api_;
  const std::string text_;  // the kernels' canonical IR text
  const KernelLimits limits_;
  const backplane::ir::Interpreter program_;
  backplane::launch::DeviceLimits launch_limits_;  // the Target's max_num_threads per block
  // Per kernel (kernel_names_' order), made once: what the launch kit binds a call by.
  std::vector<backplane::launch::KernelSignature> sigs_;
};

}  // namespace simaccel

#endif  // SIMACCEL_MODULE_H_
