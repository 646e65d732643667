// SPDX-License-Identifier: Apache-2.0
// Not broken: a code generator of an older IR, as the kit sees one. Its target.build refuses a
// kernel with floormod as bp_build refuses a kernel that needs a newer IR text version than
// a code generator reads (BP_ERR_UNSUPPORTED, "... which needs IR text version 9; ..."), which
// skips the clause; and a kernel with min(...) with a plain BP_ERR_UNSUPPORTED, which skips
// only a clause whose feature a device may lack (an optional dtype) and fails the others.
#include "sim_codegen.h"

namespace {

struct Kind {
  static constexpr const char* kKind = "simoldir";
};

class SimOldIr final : public backplane::sim::SimDeviceAPI {
 public:
  SimOldIr() : SimDeviceAPI("simoldir") {}
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("simoldir", "1.0.0") {
  static SimOldIr api;
  api.Register();
  backplane::sim::CodegenOptions o;
  o.refuse_as_newer_ir = "floormod(";
  o.refuse_unsupported = "min(";
  backplane::sim::RegisterSimCodegen<Kind>(&api, o);
}
