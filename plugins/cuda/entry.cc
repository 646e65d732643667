// SPDX-License-Identifier: Apache-2.0
// The CUDA plugin's entry point: registers device_api.cuda and device_api.cuda_host, the
// target kind `cuda` with its tags, the code generator and cuda.launch_phases. The driver is opened
// here; without one the plugin still loads and reports zero devices with the reason.
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>

#include "codegen.h"
#include "device_api.h"
#include "launch_phases.h"
#include "target.h"

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{
    "cuda", BACKPLANE_CUDA_VERSION, "Backplane", BP_ABI_VERSION_MINOR})) {
  backplane::sdk::RegisterDeviceAPI("cuda", backplane::cuda::CUDADeviceAPI::Global());
  backplane::sdk::RegisterDeviceAPI("cuda_host", backplane::cuda::CUDAHostDeviceAPI::Global());
  backplane::cuda::RegisterTargetKind();
  backplane::cuda::RegisterCodegen();
  backplane::cuda::RegisterLaunchPhases();
}
