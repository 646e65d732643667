// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (the code generator): its kernels compute the right outputs but then
// write into an input -- the first element of each kernel's first buffer is off by one. The
// float64 reference compares outputs only; the kit's comparison with the IR interpreter,
// which compares every buffer, fails codegen.kernel.*.
#include "sim_codegen.h"

namespace {

struct Kind {
  static constexpr const char* kKind = "brokeninputs";
};

class BrokenInputs final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenInputs() : SimDeviceAPI("brokeninputs") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokeninputs", "1.0.0") {
  static BrokenInputs api;
  api.Register();
  backplane::sim::CodegenOptions o;
  o.clobber_input = true;
  backplane::sim::RegisterSimCodegen<Kind>(&api, o);
}
