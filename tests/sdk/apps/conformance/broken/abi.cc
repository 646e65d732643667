// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (the entry point, BP-PLUGIN-1): bp_plugin_init ignores the host's
// version -- it registers and succeeds whatever major or minor it is offered -- and the
// library exports a second symbol of the Backplane namespace. With a host of its own version
// it loads and works. The kit fails plugin.abi.negotiation and plugin.entry_point.
#include "sim.h"

namespace {

class BrokenAbiDevice final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenAbiDevice() : SimDeviceAPI("brokenabi") {}
};

}  // namespace

extern "C" BP_EXPORT int bp_brokenabi_extra(void) { return 1; }

extern "C" BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* info) {
  info->abi_major = BP_ABI_VERSION_MAJOR;
  info->abi_minor = 0;
  info->name = "brokenabi";
  info->version = "1.0.0";
  backplane::detail::g_host_api = host;  // the bug: no look at host->abi_major/abi_minor
  return backplane::CatchAtEdge([] {
    static BrokenAbiDevice api;
    api.Register();
  });
}
