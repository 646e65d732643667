// SPDX-License-Identifier: Apache-2.0
// --layer and --trace (commands.h): the layers a command runs under (docs/layer-guide.md),
// enabled before its first device use.
#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"

namespace backplane {
namespace cli {

void AddLayerOptions(CLI::App* app, std::vector<std::string>* layers, std::string* trace) {
  app->add_option("--layer", *layers,
                  "Run under the layer NAME with its OPTIONS, e.g. --layer validation or "
                  "--layer trace:file=run.json (repeat for several, outermost first; "
                  "BACKPLANE_LAYERS adds more, outside these; docs/layer-guide.md)")
      ->type_name("NAME[:OPTIONS]")
      ->allow_extra_args(false);
  if (trace != nullptr) {
    app->add_option("--trace", *trace,
                    "Write a Chrome trace-event file of every call, copy, launch and build to "
                    "FILE when the command ends, for Perfetto or chrome://tracing (the trace "
                    "layer, outermost: the same as --layer trace:file=FILE; "
                    "docs/layers/trace.md)")
        ->type_name("FILE");
  }
}

std::string EnableCliLayers(const std::vector<std::string>& layers, const std::string& trace) {
  std::vector<std::pair<std::string, std::string>> specs;  // (option, spec)
  if (!trace.empty()) {
    if (trace.find_first_of(",:") != std::string::npos) {
      return "--trace " + trace +
             ": the file name may not hold ',' or ':' (they separate layers and options); "
             "name a file without them";
    }
    specs.emplace_back("--trace " + trace, "trace:file=" + trace);
  }
  for (const std::string& l : layers) {
    if (l.find(',') != std::string::npos) {
      return "--layer " + l + ": one layer per --layer; repeat --layer for several";
    }
    specs.emplace_back("--layer " + l, l);
  }
  for (const auto& [option, spec] : specs) {
    try {
      EnableLayers(spec);
    } catch (const Error& e) {
      return option + ": " + e.what();
    }
  }
  const char* env = secure_getenv("BACKPLANE_LAYERS");
  const bool from_env = env != nullptr && *env != '\0';
  if (specs.empty() && !from_env) return "";
  try {
    ActiveLayers();  // loads them now, so a bad name or option is a usage error
  } catch (const Error& e) {
    std::string options = from_env ? "BACKPLANE_LAYERS=" + std::string(env) : "";
    for (const auto& spec : specs) options += (options.empty() ? "" : " ") + spec.first;
    return options + ": " + e.what();
  }
  return "";
}

}  // namespace cli
}  // namespace backplane
