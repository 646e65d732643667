// SPDX-License-Identifier: Apache-2.0
// A broken plugin (BP-PLUGIN-2): registers a target kind its manifest does not declare.
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <string>

BACKPLANE_PLUGIN_ENTRY("broken_undeclared_kind", "1.0.0") {
  backplane::sdk::TargetKindBuilder("undeclaredkind", "cpu")
      .Keys({"cpu"})
      .Attr<std::string>("mcpu", backplane::sdk::kNoDefault, "a kind nobody declared")
      .Register();
}
