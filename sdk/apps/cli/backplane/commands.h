// SPDX-License-Identifier: Apache-2.0
// The subcommands of the `backplane` tool. Each lives in its own file and adds itself to
// the top-level CLI::App; main() runs the one the user chose.
#ifndef BACKPLANE_TOOLS_COMMANDS_H_
#define BACKPLANE_TOOLS_COMMANDS_H_

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace backplane {
namespace cli {

// Exit codes shared by every subcommand.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the command ran and something it needed failed
constexpr int kExitUsage = 2;    // the user asked for something that cannot be done

// A subcommand: the CLI11 sub-app that holds its options, and what to do when it is chosen
// (returns the process exit code; may throw backplane::Error or std::exception, which
// main() reports). The options the sub-app parses live in state the action captures.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Adds --plugin-path DIR (repeatable) to `app`, filling `paths`: every command that loads plugins
// has it. The folder must exist and be a folder; a relative path is made absolute.
void AddPluginPathOption(CLI::App* app, std::vector<std::string>* paths);

// Adds --layer NAME[:OPTIONS] (repeatable) to `app`, filling `layers`; with `trace` non-null
// also --trace FILE (the trace layer, trace:file=FILE). layers.cc.
void AddLayerOptions(CLI::App* app, std::vector<std::string>* layers, std::string* trace);

// Enables the layers of --trace and --layer (trace first, so it is the outermost and records
// the calls as the command makes them; then the --layer ones in the order given) and loads
// them. Call before the first device use. Returns "" or the message of a usage error, which
// names the option and the layer.
std::string EnableCliLayers(const std::vector<std::string>& layers, const std::string& trace);

// `backplane info`: plugins, device types, devices and their attributes, global functions.
Command AddInfoCommand(CLI::App& parent);

// `backplane target`: parse a Target and print its canonical JSON, or list kinds and tags.
Command AddTargetCommand(CLI::App& parent);

// `backplane build`: build a kernel file for a Target and save the module.
Command AddBuildCommand(CLI::App& parent);

// `backplane run`: run a function of a saved module on random inputs, checked and timed.
Command AddRunCommand(CLI::App& parent);

// `backplane demo`: every reference kernel on every device here, checked and timed.
Command AddDemoCommand(CLI::App& parent);

// `backplane serve`: this machine's devices over gRPC, for remote clients (docs/remote.md).
Command AddServeCommand(CLI::App& parent);

// A new subcommand adds an Add<Name>Command here and one line in main.cc.

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_COMMANDS_H_
