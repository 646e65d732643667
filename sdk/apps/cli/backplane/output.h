// SPDX-License-Identifier: Apache-2.0
// What every subcommand prints besides its table: the JSON document of --json (with a
// schema_version, so scripts need not grep the table), and progress lines on stderr for
// long work (when stderr is a terminal, or with --verbose).
#ifndef BACKPLANE_TOOLS_OUTPUT_H_
#define BACKPLANE_TOOLS_OUTPUT_H_

#include <nlohmann/json.hpp>
#include <string>

namespace backplane {
namespace cli {

using OrderedJson = nlohmann::ordered_json;

// The version of the --json documents of `build`, `run`, `demo` and `target --list`. A
// script checks it: a key is only ever added within a version; a key removed or changed in
// meaning bumps it (docs/cli.md, "JSON output").
constexpr int kJsonSchemaVersion = 1;

// {"schema_version": 1, "command": "<command>"}: the start of every --json document.
OrderedJson JsonDocument(const std::string& command);

// Prints `doc` on stdout, indented, and flushes. Returns false (after a message on stderr
// naming the command) when stdout cannot be written.
bool PrintJson(const std::string& command, const OrderedJson& doc);

// Progress of long work on stderr. On a terminal each Step overwrites the last one on a
// single line, which Done clears; with `verbose` (and no terminal) each step is a line of its
// own. Otherwise it prints nothing, so logs and tests see only results and errors.
class Progress {
 public:
  Progress(std::string command, bool verbose);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Step(const std::string& what);
  void Done();
  bool enabled() const { return tty_ || verbose_; }

 private:
  std::string command_;
  bool verbose_ = false;
  bool tty_ = false;
  bool open_ = false;  // a step is showing on the terminal line
};

// The attached remote servers (docs/remote.md) that cannot be reached now, each as {"address",
// "error"}: from the remote plugin's remote.servers, none when the plugin is not here.
OrderedJson UnreachableRemoteServers();

// Says on stderr, for `command` ("backplane demo"), that each of `servers` is unreachable and
// why; a command asked for the devices exits non-zero when there is one (its devices are
// missing from what it printed).
void ReportUnreachableRemoteServers(const std::string& command, const OrderedJson& servers);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_OUTPUT_H_
