/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin whose static constructor registers its own declared name, then takes
 * device_api.cpu with allow_override, before the host ever calls its entry point (were it
 * credited to "the host", the call would succeed and the real cpu plugin be skipped).
 * The load is this plugin's from dlopen on: the second registration is refused (the cpu
 * plugin's manifest declares the name), the load fails, the first is rolled back and the
 * library unloaded. */
#include "reach_core.h"

__attribute__((constructor)) static void ClaimCpu(void) {
  const bp_host_api_t* host = ReachCore();
  (void)RegisterNothing(host, "testing.ctor_claims_cpu_probe", 0);
  (void)RegisterNothing(host, "device_api.cpu", 1);
}

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)host;
  return Answer(out_info, "ctor_claims_cpu");
}
