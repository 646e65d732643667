// SPDX-License-Identifier: Apache-2.0
// A broken plugin written without the SDK: a raw extern "C" entry point that lets a C++
// exception escape. The host must catch it at its edge, record the reason and go on.
#include <backplane/c_api.h>

#include <stdexcept>

extern "C" BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host,
                                                bp_plugin_info_t* out_info) {
  out_info->abi_major = BP_ABI_VERSION_MAJOR;
  out_info->abi_minor = 0;
  out_info->name = "broken_init_throws";
  out_info->version = "1.0.0";
  if (host != nullptr) throw std::runtime_error("broken_init_throws: exception from init");
  return BP_OK;
}
