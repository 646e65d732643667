// SPDX-License-Identifier: Apache-2.0
// The control: the simulated accelerator the broken plugins derive from, unbroken, with its
// code generator. It creates streams and runs kernels on the active stream, so every test of
// the kit applies to it, and it passes them all -- which shows that each broken plugin fails
// for the clause it breaks, not for something the simulation lacks.
#include "sim_codegen.h"

namespace {

struct Kind {
  static constexpr const char* kKind = "simok";
};

class SimOk final : public backplane::sim::SimDeviceAPI {
 public:
  SimOk() : SimDeviceAPI("simok") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("simok", "1.0.0") {
  static SimOk api;
  api.Register();
  backplane::sim::RegisterSimCodegen<Kind>(&api, backplane::sim::CodegenOptions{});
}
