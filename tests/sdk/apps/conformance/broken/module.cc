// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (modules): its modules save, but its loader cannot read them back. The
// kernels themselves are right. The kit fails codegen.module.save_load.
#include "sim_codegen.h"

namespace {

struct Kind {
  static constexpr const char* kKind = "brokenmodule";
};

class BrokenModule final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenModule() : SimDeviceAPI("brokenmodule") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenmodule", "1.0.0") {
  static BrokenModule api;
  api.Register();
  backplane::sim::CodegenOptions o;
  o.refuse_load = true;
  backplane::sim::RegisterSimCodegen<Kind>(&api, o);
}
