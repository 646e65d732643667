/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin whose init registers its declared name, then device_api.cpu (the cpu plugin's),
 * ignores the refusal and returns BP_OK. The init is rolled back all the same: the name
 * removed, the library unloaded, the reason recorded. */
#include "reach_core.h"

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)RegisterNothing(host, "testing.ignores_refusal_probe", 0);
  (void)RegisterNothing(host, "device_api.cpu", 1);
  return Answer(out_info, "init_ignores_refusal");
}
