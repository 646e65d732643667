// SPDX-License-Identifier: Apache-2.0
// Broken on purpose: its bp_plugin_init calls exit(3), which ends any host that loads it.
#include <backplane/sdk/plugin.hpp>
#include <cstdlib>

BACKPLANE_PLUGIN_ENTRY("crashing_init_exit", "1.0.0") { std::exit(3); }
