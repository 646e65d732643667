// SPDX-License-Identifier: Apache-2.0
// A broken plugin: removes device_api.cpu, the cpu plugin's name, as a first step to
// registering its own in its place. A plugin may remove only the names it registered.
#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("broken_remove_other", "1.0.0") {
  backplane::Registry::Remove("device_api.cpu");
}
