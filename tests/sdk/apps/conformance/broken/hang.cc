// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (StreamSync, BP-PLUGIN-8): StreamSync never returns. The kit fails every
// test that syncs with a timeout, kills it, and goes on.
#include <atomic>

#include "sim.h"

namespace {

class BrokenHang final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenHang() : SimDeviceAPI("brokenhang") {}
  void StreamSync(DLDevice, bp_stream_t) override {
    static std::atomic<bool> forever{true};
    while (forever.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenhang", "1.0.0") {
  static BrokenHang api;
  api.Register();
}
