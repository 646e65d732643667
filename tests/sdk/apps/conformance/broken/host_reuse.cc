// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (CopyDataFromTo, BP-PLUGIN-7): a host-to-device copy reads the host buffer
// when its stream gets to it, after the call returned, instead of before returning. The kit
// fails device.copy.host_reuse.
#include "sim.h"

namespace {

class BrokenHostReuse final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenHostReuse() : SimDeviceAPI("brokenhostreuse", /*delay_us=*/2000) { snapshot_host_ = false; }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenhostreuse", "1.0.0") {
  static BrokenHostReuse api;
  api.Register();
}
