// SPDX-License-Identifier: Apache-2.0
// `backplane`: the command-line tool of the Backplane SDK. It parses the command line with
// CLI11 and hands over to one subcommand (see commands.h).
#include <backplane/c_api.h>

#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli_help.hpp"
#include "commands.h"

#ifndef BACKPLANE_VERSION
#error "BACKPLANE_VERSION must be defined by the build (the project version)"
#endif

namespace {

// "Backplane 0.1.0 (ABI 1.0)", plus the library's ABI when it differs from the headers'.
std::string VersionText() {
  std::string text = std::string("Backplane ") + BACKPLANE_VERSION + " (ABI " +
                     std::to_string(BP_ABI_VERSION_MAJOR) + "." +
                     std::to_string(BP_ABI_VERSION_MINOR);
  uint32_t major = 0;
  uint32_t minor = 0;
  if (bp_abi_version(&major, &minor) == BP_OK &&
      (major != BP_ABI_VERSION_MAJOR || minor != BP_ABI_VERSION_MINOR)) {
    text += "; the loaded libbackplane speaks ABI " + std::to_string(major) + "." +
            std::to_string(minor);
  }
  return text + ")";
}

// "info, target, ..." for messages.
std::string CommandNames(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

// The first word that is not an option, when it names no command: CLI11 would only say
// "a subcommand is required", which hides the typo. The top level takes no option values,
// so that word is where the command belongs.
std::string UnknownCommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') continue;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->check_name(arg);
    }
    return known ? std::string() : arg;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Backplane: plugin-based device backends. Inspect what this machine has, build kernels "
      "and run them.",
      "backplane");
  backplane::tools::UseWrappingHelp(app);
  app.set_version_flag("--version", VersionText, "Print the Backplane and ABI versions and exit");
  app.footer(
      "Examples:\n"
      "  backplane info\n"
      "  backplane target --list\n"
      "  backplane build vector_add.bpir -t c -o va.bpmod\n"
      "  backplane run va.bpmod -f vector_add --dim n=1000000 --allow-native\n"
      "  backplane demo --size small\n"
      "  backplane help run\n"
      "Exit codes: 0 success, 1 failure, 2 usage error.\n"
      "Environment: BACKPLANE_PLUGIN_PATH (plugin folders, searched first), "
      "BACKPLANE_PLUGIN_FILES (only these plugin libraries), BACKPLANE_DISABLE_PLUGINS, "
      "BACKPLANE_DEBUG=loader (trace loading), BACKPLANE_CC, BACKPLANE_KERNEL_DIR, XDG_CACHE_HOME "
      "(the compile cache), COLUMNS (the width of "
      "tables and help when stdout is no terminal).\nDocumentation: " +
      backplane::tools::DocsPath("cli.md"));
  app.require_subcommand(1);
  app.fallthrough(false);

  std::vector<backplane::cli::Command> commands;
  commands.push_back(backplane::cli::AddInfoCommand(app));
  commands.push_back(backplane::cli::AddTargetCommand(app));
  commands.push_back(backplane::cli::AddBuildCommand(app));
  commands.push_back(backplane::cli::AddRunCommand(app));
  commands.push_back(backplane::cli::AddDemoCommand(app));
  commands.push_back(backplane::cli::AddServeCommand(app));
  // `backplane help [COMMAND]`: the same text as --help.
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Show the help of backplane or of one command");
  help->add_option("COMMAND", help_topic, "The command, e.g. run");

  if (std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
    std::cerr << "backplane: unknown command '" << unknown
              << "'; the commands are: " << CommandNames(app)
              << ". Run 'backplane --help' for what each does.\n";
    return backplane::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty() && e.get_name() == "RequiredError") {
      std::cerr << "backplane: no command given; the commands are: " << CommandNames(app)
                << ". Run 'backplane --help' for what each does.\n";
      return backplane::cli::kExitUsage;
    }
    std::string where = "backplane";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::cerr << where << ": usage error: " << e.what() << "\nRun '" << where
              << " --help' for the options.\n";
    return backplane::cli::kExitUsage;
  }

  if (help->parsed()) {
    if (help_topic.empty()) {
      std::cout << app.help();
      return backplane::cli::kExitOk;
    }
    for (const backplane::cli::Command& command : commands) {
      if (command.app->check_name(help_topic)) {
        std::cout << command.app->help();
        return backplane::cli::kExitOk;
      }
    }
    std::cerr << "backplane help: unknown command '" << help_topic
              << "'; the commands are: " << CommandNames(app) << "\n";
    return backplane::cli::kExitUsage;
  }
  for (const backplane::cli::Command& command : commands) {
    if (!command.app->parsed()) continue;
    try {
      return command.run();
    } catch (const backplane::Error& e) {
      std::cerr << "backplane " << command.app->get_name() << ": error ("
                << bp_error_kind_name(e.kind()) << "): " << e.what() << '\n';
      return backplane::cli::kExitFailure;
    } catch (const std::exception& e) {
      std::cerr << "backplane " << command.app->get_name() << ": error: " << e.what() << '\n';
      return backplane::cli::kExitFailure;
    }
  }
  // require_subcommand(1) makes this unreachable; keep a clear message all the same.
  std::cerr << "backplane: no command given; run 'backplane --help' for the commands\n";
  return backplane::cli::kExitUsage;
}
