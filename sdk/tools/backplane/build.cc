// SPDX-License-Identifier: Apache-2.0
// `backplane build KERNEL.bpir --target T -o MODULE`: builds kernel IR for a Target with
// bp_build and saves the module (with everything it imports) in Backplane's module file
// format, for `backplane run` here or on another machine.
#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "input.h"

namespace backplane::cli {

namespace {

const InputKind kKernelFile = {
    "kernel file",
    "the IR's text form (.bpir, docs/ir.md), e.g. share/backplane/kernels/matmul.bpir",
    kMaxKernelFileBytes};

struct BuildOptions {
  std::string input;
  std::string target;
  std::string host;
  std::string output;
  std::vector<std::string> functions;
  std::vector<std::string> plugin_paths;
};

int RunBuild(const BuildOptions& o) {
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  std::string ir_text;
  const std::string problem = ReadInputFile(o.input, kKernelFile, &ir_text);
  if (!problem.empty()) {
    std::cerr << "backplane build: " << problem << "\n";
    return kExitUsage;
  }
  // Parsed here, under the file's name, whether or not --func picks functions: every parse
  // error is "FILE:LINE:COL: ..." with the same exit code (bp_build names it too, but --func
  // needs the functions first).
  ir::IRModule file;
  try {
    file = ir::Parse(ir_text, o.input);
  } catch (const ir::Error& e) {
    std::cerr << "backplane build: " << e.what() << "\n";
    return kExitUsage;
  }
  if (file.functions().empty()) {
    std::cerr << "backplane build: " << o.input << " holds no function (only comments or "
              << "blank lines); a kernel file holds at least one `func NAME(...) { ... }` "
              << "(docs/ir.md); give such a file\n";
    return kExitUsage;
  }
  if (!o.functions.empty()) {
    // Only the functions asked for: a file may hold CPU and GPU variants side by side.
    ir::IRModule chosen;
    for (const std::string& name : o.functions) {
      const ir::PrimFunc* f = file.Find(name);
      if (f == nullptr) {
        std::string names;
        for (const ir::PrimFunc& g : file.functions())
          names += (names.empty() ? "" : ", ") + g.name;
        std::cerr << "backplane build: " << o.input << " has no function '" << name
                  << "'; it has: " << names << "\n";
        return kExitUsage;
      }
      chosen.Add(*f);
    }
    ir_text = ir::Print(chosen);
  }
  // The file's name in bp_build's messages, when it builds the file as written.
  const std::string source_name = o.functions.empty() ? o.input : o.input + " (--func)";
  Target target = Target::Parse(o.target);
  Target host = o.host.empty() ? Target() : Target::Parse(o.host);
  const auto t0 = std::chrono::steady_clock::now();
  Module module;
  try {
    module = Build(ir_text, target, host, source_name);
  } catch (const Error& e) {
    std::string hint;
    if (std::string(e.what()).find("on a CPU target") != std::string::npos) {
      hint = "\n(the file holds GPU variants; build the CPU functions only, e.g. --func NAME)";
    }
    // IR that does not verify is an error in the user's file, like one that does not parse:
    // the same exit code, and the file named.
    if (e.kind() == BP_ERR_INVALID_ARGUMENT) {
      std::cerr << "backplane build: " << o.input << ": " << e.what() << hint << "\n";
      return kExitUsage;
    }
    throw Error(e.kind(), o.input + ": " + e.what() + hint);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::string bytes = module.SaveToBytes();
  std::ofstream out(o.output, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::cerr << "backplane build: cannot write '" << o.output << "'; check the folder exists "
              << "and is writable\n";
    return kExitFailure;
  }
  std::string names;
  for (const std::string& f : module.ListFunctions()) names += (names.empty() ? "" : ", ") + f;
  std::string kinds = module.Kind();
  for (const Module& imp : module.Imports()) kinds += " + " + imp.Kind();
  std::cout << "built " << names << " for " << target.Kind() << " (module " << kinds << ") in "
            << static_cast<int>(ms + 0.5) << " ms; saved " << bytes.size() << " bytes to "
            << o.output << "\n";
  return kExitOk;
}

}  // namespace

Command AddBuildCommand(CLI::App& parent) {
  auto o = std::make_shared<BuildOptions>();
  CLI::App* app = parent.add_subcommand(
      "build", "Build a kernel file (the IR's text form) for a Target and save the module");
  app->add_option("KERNEL", o->input,
                  "The kernel file (.bpir), e.g. share/backplane/kernels/"
                  "matmul.bpir")
      ->required();
  app->add_option("--target,-t", o->target,
                  "The Target: 'c', 'c -mcpu=skylake -num-cores=4', a tag or JSON")
      ->required();
  app->add_option("--host", o->host, "The host Target for host code (a CPU kind; optional)");
  app->add_option("--output,-o", o->output, "Where to save the module")->required();
  app->add_option("--func,-f", o->functions,
                  "Build only this function of the file (repeat for several); by default all")
      ->type_name("NAME");
  app->add_option("--plugin-path", o->plugin_paths, "Search DIR for plugins first")
      ->type_name("DIR")
      ->allow_extra_args(false)
      ->transform(CLI::Validator(CheckPluginFolder, "", "existing folder"));
  return Command{app, [o] { return RunBuild(*o); }};
}

}  // namespace backplane::cli
