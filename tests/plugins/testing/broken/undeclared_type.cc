// SPDX-License-Identifier: Apache-2.0
// A broken plugin (BP-PLUGIN-2): registers a new device type its manifest does not declare in
// "device_types", taking an id discovery knew nothing about.
#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("broken_undeclared_type", "1.0.0") {
  backplane::sdk::RegisterDeviceType("undeclared_type");
}
