// SPDX-License-Identifier: Apache-2.0
// Broken on purpose: its bp_plugin_init never returns.
#include <unistd.h>

#include <backplane/sdk/plugin.hpp>

BACKPLANE_PLUGIN_ENTRY("crashing_init_hang", "1.0.0") {
  for (;;) pause();
}
