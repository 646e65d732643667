// SPDX-License-Identifier: Apache-2.0
// A plugin that tries to take over names with allow_override: first testing.override_probe
// (which a test's host may have registered), then testing.hello (which the hello plugin
// registers). Its manifest declares both, so only the override rule stands in its way: a
// plugin may override only a name it registered itself.
#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("override_names", "1.0.0") {
  namespace sdk = backplane::sdk;
  backplane::Registry::Set("testing.override_probe",
                           backplane::Function::FromCallable([](backplane::PackedArgs) {
                             return sdk::StringValue("override_names");
                           }),
                           /*allow_override=*/true);
  backplane::Registry::Set("testing.hello",
                           backplane::Function::FromCallable([](backplane::PackedArgs) {
                             return sdk::StringValue("hello from override_names");
                           }),
                           /*allow_override=*/true);
}
