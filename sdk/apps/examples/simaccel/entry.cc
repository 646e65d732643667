// SPDX-License-Identifier: Apache-2.0
// simaccel: an example Backplane plugin for a simulated accelerator, built out of tree
// against the installed SDK (CMakeLists.txt). Its one entry point registers everything a new
// device needs, with no edit or rebuild of the core:
//   device_api.simaccel                       the DeviceAPI (device_api.h)
//   target kind simaccel                      its Target attributes (target.cc)
//   target.build.simaccel                     the code generator (codegen.cc)
//   runtime.module.load_from_bytes.simaccel   reads saved modules back (module.cc)
// The manifest that backplane_add_plugin() writes declares the same names, so the core loads
// the plugin on the first use of any of them.
#include <backplane/sdk/codegen.hpp>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <string>

#include "codegen.h"
#include "device_api.h"
#include "target.h"

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{"simaccel", SIMACCEL_VERSION,
                                                               "Backplane examples"})) {
  namespace sdk = backplane::sdk;
  using simaccel::SimAccelDeviceAPI;
  SimAccelDeviceAPI* api = SimAccelDeviceAPI::Global();

  sdk::RegisterDeviceAPI("simaccel", api);  // a fresh device type id; no enum edit
  simaccel::RegisterTargetKind();
  sdk::RegisterCodegen("simaccel", [api](const std::string& ir_text, const backplane::Target& t) {
    return simaccel::BuildModule(api, ir_text, t);
  });
  sdk::RegisterModuleLoader(
      "simaccel", [api](const std::string& bytes) { return simaccel::LoadModule(api, bytes); });
}
