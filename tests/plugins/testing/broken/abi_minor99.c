/* SPDX-License-Identifier: Apache-2.0 */
/* A broken plugin: it speaks ABI 1.99, a minor newer than this host. It answers that it
 * needs host minor 99 and returns BP_OK, leaving the refusal to the host, which must name
 * both versions. */
#include <backplane/c_api.h>

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)host;
  out_info->abi_major = BP_ABI_VERSION_MAJOR;
  out_info->abi_minor = 99;
  out_info->name = "broken_abi_minor99";
  out_info->version = "1.99.0";
  return BP_OK;
}
