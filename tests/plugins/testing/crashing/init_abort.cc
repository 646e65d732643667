// SPDX-License-Identifier: Apache-2.0
// Crashes on purpose: its bp_plugin_init calls abort(), so the process dies of SIGABRT.
#include <backplane/sdk/plugin.hpp>
#include <cstdlib>

BACKPLANE_PLUGIN_ENTRY("crashing_init_abort", "1.0.0") { std::abort(); }
