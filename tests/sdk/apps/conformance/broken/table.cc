// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (BP-PLUGIN-4): device_api.brokentable returns a table whose struct_size
// is far short of a 1.0 bp_device_api_t, so the core refuses it. The kit fails
// plugin.device_api_table and says of every device test that the table was refused (not that
// no device is present).
#include <backplane/sdk/plugin.hpp>

namespace {

bp_device_api_t g_table{};  // lives until the process ends, as a table must

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokentable", "1.0.0") {
  namespace sdk = backplane::sdk;
  sdk::RegisterDeviceType("brokentable");
  g_table.struct_size = 24;  // the bug: a 1.0 table has 15 pointer-sized fields
  sdk::RegisterFunction("device_api.brokentable",
                        [](backplane::PackedArgs) { return sdk::PtrValue(&g_table); });
}
