// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (the workspace, BP-PLUGIN-4): its table sets alloc_workspace but leaves
// free_workspace null, so the core would free workspace blocks as data space. The kit fails
// device.memory.workspace and plugin.device_api_table.
#include "sim.h"

namespace {

class BrokenWorkspace final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenWorkspace() : SimDeviceAPI("brokenworkspace") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenworkspace", "1.0.0") {
  namespace sdk = backplane::sdk;
  static BrokenWorkspace api;
  api.Register(/*device_api=*/false);
  static bp_device_api_t table = *api.table();
  table.free_workspace = nullptr;  // the bug
  sdk::RegisterFunction("device_api.brokenworkspace",
                        [](backplane::PackedArgs) { return sdk::PtrValue(&table); });
}
