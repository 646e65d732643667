// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (CopyDataFromTo, BP-PLUGIN-7): ignores the device side's byte_offset.
// The kit fails device.copy.host_to_device_offsets and device.copy.device_to_host_offsets.
#include "sim.h"

namespace {

class BrokenOffset final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenOffset() : SimDeviceAPI("brokenoffset") {}

 protected:
  uint64_t DeviceOffset(const DLTensor*) override { return 0; }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenoffset", "1.0.0") {
  static BrokenOffset api;
  api.Register();
}
