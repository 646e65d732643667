// SPDX-License-Identifier: Apache-2.0
// The CPU plugin's entry point: registers device_api.cpu (device type cpu = kDLCPU), the
// target kind `c` and the cpu tags.
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>

#include "blas.h"
#include "codegen.h"
#include "device_api.h"
#include "target.h"

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{
    "cpu", BACKPLANE_CPU_VERSION, "Backplane", BP_ABI_VERSION_MINOR})) {
  backplane::sdk::RegisterDeviceAPI("cpu", backplane::cpu::CpuDeviceAPI::Global());
  backplane::cpu::RegisterTargetKinds();
  backplane::cpu::RegisterCodegen();
  backplane::cpu::RegisterBlas();
}
