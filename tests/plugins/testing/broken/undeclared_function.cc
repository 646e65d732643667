// SPDX-License-Identifier: Apache-2.0
// A broken plugin (BP-PLUGIN-2): registers the name its manifest declares, then one no
// manifest declares. The second registration is refused, init fails, and the host rolls the
// first back.
#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("broken_undeclared_function", "1.0.0") {
  namespace sdk = backplane::sdk;
  sdk::RegisterFunction("testing.undeclared_probe",
                        [](backplane::PackedArgs) { return sdk::StringValue("probe"); });
  sdk::RegisterFunction("testing.never_declared",
                        [](backplane::PackedArgs) { return sdk::StringValue("undeclared"); });
}
