/* SPDX-License-Identifier: Apache-2.0 */
/* A broken plugin: a valid shared library that does not export bp_plugin_init (the author
 * misspelled it). The host must refuse it with a reason naming the missing entry point. */
#include <backplane/c_api.h>

BP_EXPORT bp_status_t bp_plugin_initialize(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)host;
  (void)out_info;
  return BP_OK;
}
