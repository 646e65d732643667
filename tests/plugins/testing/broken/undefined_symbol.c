/* SPDX-License-Identifier: Apache-2.0 */
/* A broken plugin: it calls a function no library defines (linked with undefined symbols
 * allowed). Loading it with RTLD_NOW must fail, and the reason must name the symbol. */
#include <backplane/c_api.h>

void bp_testing_symbol_that_does_not_exist(void);

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  (void)host;
  out_info->abi_major = BP_ABI_VERSION_MAJOR;
  out_info->abi_minor = 0;
  out_info->name = "broken_undefined_symbol";
  out_info->version = "1.0.0";
  bp_testing_symbol_that_does_not_exist();
  return BP_OK;
}
