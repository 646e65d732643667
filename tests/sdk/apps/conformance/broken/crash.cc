// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (BP-PLUGIN-10): a device-to-host copy writes to address 8 and
// the process dies of SIGSEGV. The kit fails the copy tests with the signal and goes on.
#include "sim.h"

namespace {

class BrokenCrash final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenCrash() : SimDeviceAPI("brokencrash") {}

 protected:
  void DeviceToHost(uint8_t*, const uint8_t*, size_t) override {
    // Page zero, but not the null pointer itself, so UBSan lets it through to the SIGSEGV.
    volatile uintptr_t address = 8;
    *reinterpret_cast<volatile uint8_t*>(address) = 1;
  }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokencrash", "1.0.0") {
  static BrokenCrash api;
  api.Register();
}
