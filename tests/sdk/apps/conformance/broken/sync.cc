// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (StreamSync, BP-PLUGIN-8): syncing a created stream returns at once,
// before the work queued on it has run. The kit fails device.stream.sync_waits.
#include "sim.h"

namespace {

class BrokenSync final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenSync() : SimDeviceAPI("brokensync", /*delay_us=*/5000) {}
  void StreamSync(DLDevice dev, bp_stream_t stream) override {
    if (stream == nullptr) SimDeviceAPI::StreamSync(dev, stream);
    // the bug: a created stream is not waited for
  }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokensync", "1.0.0") {
  static BrokenSync api;
  api.Register();
}
