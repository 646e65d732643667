/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin whose static constructor registers the name its manifest declares, and whose init
 * does nothing more: the name is this plugin's (bp_plugins_list, `backplane info`), not the
 * host's. */
#include "reach_core.h"

__attribute__((constructor)) static void RegisterEarly(void) {
  (void)RegisterNothing(ReachCore(), "testing.ctor_declared_probe", 0);
}

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)host;
  return Answer(out_info, "ctor_declared");
}
