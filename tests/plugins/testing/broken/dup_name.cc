// SPDX-License-Identifier: Apache-2.0
// A broken plugin: registers "testing.dup_probe", then "device_api.cpu", which the cpu
// plugin owns. The second registration fails, init fails, and the host must roll the
// first one back. Its manifest declares only testing.dup_probe, so discovery never picks
// it for device_api.cpu.
#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("broken_dup_name", "1.0.0") {
  namespace sdk = backplane::sdk;
  sdk::RegisterFunction("testing.dup_probe",
                        [](backplane::PackedArgs) { return sdk::StringValue("dup"); });
  sdk::RegisterFunction("device_api.cpu",
                        [](backplane::PackedArgs) { return sdk::PtrValue(nullptr); });
}
