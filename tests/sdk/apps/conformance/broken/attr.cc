// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (GetAttr, BP-PLUGIN-5): answers garbage types -- a pointer for the device
// name, a string for the warp size, a type number no value has -- and kExist = 1 for every
// device id. The kit fails device.attr.types and device.attr.exist_count.
#include "sim.h"

namespace {

class BrokenAttr final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenAttr() : SimDeviceAPI("brokenattr") {}
  backplane::Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override {
    namespace sdk = backplane::sdk;
    switch (kind) {
      case BP_ATTR_EXIST:
        return sdk::IntValue(1);  // every id "exists"
      case BP_ATTR_DEVICE_NAME:
        return sdk::PtrValue(this);
      case BP_ATTR_WARP_SIZE:
        return sdk::StringValue("32");
      case BP_ATTR_MAX_CLOCK_RATE: {
        bp_value_t v{};
        v.type = 77;
        v.u.v_int64 = 1;
        return backplane::Any(v);
      }
      default:
        return SimDeviceAPI::GetAttr(DLDevice{dev.device_type, 0}, kind);
    }
  }
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenattr", "1.0.0") {
  static BrokenAttr api;
  api.Register();
}
