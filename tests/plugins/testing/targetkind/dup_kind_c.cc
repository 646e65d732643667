// SPDX-License-Identifier: Apache-2.0
// A plugin that registers the target kind "c" again, which the cpu plugin owns: its init
// must fail with a message naming both plugins. Built into a folder of its own so that it
// never takes part in discovering the test plugins.
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <string>

BACKPLANE_PLUGIN_ENTRY("dup_kind_c", "1.0.0") {
  backplane::sdk::TargetKindBuilder("c", "cpu")
      .Keys({"cpu"})
      .Attr<std::string>("mcpu", backplane::sdk::kNoDefault, "a second c kind")
      .Register();
}
