// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (SyncStreamFromTo, BP-PLUGIN-8): does nothing, so work queued on the
// destination stream runs before the source stream's earlier work. The kit fails
// device.stream.sync_stream_from_to.
#include "sim.h"

namespace {

class BrokenOrder final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenOrder() : SimDeviceAPI("brokenorder", /*delay_us=*/3000) {}
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override {
    GetStream(dev, src);  // checks the handles, orders nothing
    GetStream(dev, dst);
  }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenorder", "1.0.0") {
  static BrokenOrder api;
  api.Register();
}
