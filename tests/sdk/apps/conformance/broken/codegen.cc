// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (the code generator): its kernels compute wrong results -- the first
// element of each kernel's output is off by one. The kit fails codegen.kernel.*.
#include "sim_codegen.h"

namespace {

struct Kind {
  static constexpr const char* kKind = "brokencodegen";
};

class BrokenCodegen final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenCodegen() : SimDeviceAPI("brokencodegen") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokencodegen", "1.0.0") {
  static BrokenCodegen api;
  api.Register();
  backplane::sim::CodegenOptions o;
  o.wrong_results = true;
  backplane::sim::RegisterSimCodegen<Kind>(&api, o);
}
