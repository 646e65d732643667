// SPDX-License-Identifier: Apache-2.0
// A tiny healthy plugin: registers "testing.hello", which returns a greeting (naming its
// argument when one is passed). Used by the lazy-load and "same library twice" tests.
#include <backplane/sdk/plugin.hpp>
#include <string>

BACKPLANE_PLUGIN_ENTRY("hello", "1.0.0") {
  backplane::sdk::RegisterFunction("testing.hello", [](backplane::PackedArgs args) {
    const std::string who = args.size() > 0 ? args.String(0) : std::string("world");
    return backplane::sdk::StringValue("hello, " + who);
  });
}
