// SPDX-License-Identifier: Apache-2.0
// A broken plugin: its init fails with an error and a message (written the normal way, by
// throwing inside the SDK's entry point). It registers a name first, which the host must
// roll back.
#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("broken_init_error", "1.0.0") {
  backplane::sdk::RegisterFunction("testing.init_error_probe",
                                   [](backplane::PackedArgs) { return backplane::Any(); });
  throw backplane::Error(BP_ERR_DEVICE,
                         "broken_init_error: the test device is unplugged; plug it in");
}
