/* SPDX-License-Identifier: Apache-2.0 */
/* A broken plugin: it speaks ABI 2.0, a major this host does not know. The host must refuse
 * it with a reason naming both versions. */
#include <backplane/c_api.h>

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)host;
  out_info->abi_major = 2;
  out_info->abi_minor = 0;
  out_info->name = "broken_abi_major2";
  out_info->version = "2.0.0";
  return BP_OK;
}
