// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (BP-PLUGIN-2): registers a function its manifest does not declare, so
// discovery cannot know it provides it. The core refuses the registration, so the plugin
// does not load, and the kit fails plugin.load with the name.
#include "sim.h"

namespace {

class BrokenNames final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenNames() : SimDeviceAPI("brokennames") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokennames", "1.0.0") {
  static BrokenNames api;
  api.Register();
  backplane::sdk::RegisterFunction(
      "brokennames.undeclared", [](backplane::PackedArgs) { return backplane::sdk::IntValue(1); });
}
