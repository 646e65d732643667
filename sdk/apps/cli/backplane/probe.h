// SPDX-License-Identifier: Apache-2.0
// Loading each plugin first in a child process of its own, as `backplane info` does: a plugin
// that crashes, aborts, calls exit() or hangs in a static constructor or in bp_plugin_init
// takes only that child down, and the report names it and how it failed. Ordinary hosts do
// not pay for this: only the tool probes; bp_plugins_load_all stays in-process.
#ifndef BACKPLANE_TOOLS_PROBE_H_
#define BACKPLANE_TOOLS_PROBE_H_

#include <string>
#include <vector>

namespace backplane {
namespace cli {

struct ProbeResult {
  std::string library;
  bool survived = false;  // its load returned (loaded or refused) in the child
  std::string failure;    // when it did not: how the child ended, in words
};

// Loads each of `libraries` in a child: this program run again as
// `backplane info --probe-one LIBRARY` with `plugin_paths`, all at once (at most 8 running),
// each stopped after `timeout_s` seconds. The results come back in the order of `libraries`.
std::vector<ProbeResult> ProbePlugins(const std::vector<std::string>& libraries,
                                      const std::vector<std::string>& plugin_paths,
                                      double timeout_s);

// The child's side: loads `library` with bp_plugin_load and tells the parent (on fd 3) that
// the load returned, then leaves without running static destructors.
[[noreturn]] void ProbeOne(const std::string& library,
                           const std::vector<std::string>& plugin_paths);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_PROBE_H_
