// SPDX-License-Identifier: Apache-2.0
// The OpenCL plugin's entry point: registers device_api.opencl (device type opencl) and the
// target kind `opencl`, its code generator target.build.opencl and module loader.
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>

#include "codegen.h"
#include "device_api.h"
#include "target.h"

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{
    "opencl", BACKPLANE_OPENCL_VERSION, "Backplane", BP_ABI_VERSION_MINOR})) {
  backplane::sdk::RegisterDeviceAPI("opencl", backplane::opencl::OpenCLDeviceAPI::Global());
  backplane::opencl::RegisterTargetKind();
  backplane::opencl::RegisterCodegen();
}
