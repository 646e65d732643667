// SPDX-License-Identifier: Apache-2.0
// `backplane build KERNEL.bpir --target T -o MODULE`: builds kernel IR for a Target with
// bp_build and saves the module (with everything it imports) in Backplane's module file
// format, for `backplane run` here or on another machine.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "device_target.h"
#include "input.h"
#include "output.h"

namespace backplane {
namespace cli {

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
  bool json = false;
  bool verbose = false;
};

// Whether `target` runs CPU code: its kind's device type is cpu, or it has the key "cpu" (a
// remote Target of a server's cpu:0 has its inner Target's keys).
bool TargetIsCpu(const Target& target) {
  const std::vector<std::string> keys = target.Keys();
  if (std::find(keys.begin(), keys.end(), "cpu") != keys.end()) return true;
  const nlohmann::json kinds = nlohmann::json::parse(TargetKinds::Describe());
  for (const nlohmann::json& k : kinds["kinds"]) {
    if (k.value("name", "") == target.Kind()) return k.value("device_type", "") == "cpu";
  }
  return true;
}

// Why `f` does not fit a Target that is a CPU (`cpu`) or not: "" when it fits, or when it has
// an error of its own (which the build then reports: a bug in the file is never left out
// quietly).
std::string WhyItDoesNotFit(const ir::PrimFunc& f, bool cpu, const std::string& kind) {
  ir::IRModule one;
  one.Add(f);
  if (!ir::VerifyErrors(one).empty()) return "";
  if (cpu) {
    ir::VerifyOptions options;
    options.device_is_cpu = true;
    const std::vector<std::string> errors = ir::VerifyErrors(one, options);
    if (!errors.empty()) {
      return "it binds loops to GPU thread axes, which a CPU Target ('" + kind + "') cannot run (" +
             errors.front() + ")";
    }
    return "";
  }
  try {
    ir::SplitHostDevice(one, /*device_is_cpu=*/false);
  } catch (const ir::Error& e) {
    return std::string("it binds no GPU thread axis, so on Target '") + kind +
           "' it would be host code, which cannot touch device memory (" + e.what() + ")";
  }
  return "";
}

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
  // A device (-t opencl:0) gives its own Target, read off the device (Target::FromDevice).
  Target target;
  Target host;
  bool from_device = false;
  auto parse = [](const char* flag, const std::string& text, Target* out, bool* device) {
    const std::string e = ParseTargetOrDevice(text, out, device);
    if (e.empty()) return true;
    std::cerr << "backplane build: " << flag << ": " << e
              << (LooksLikeDevice(text) ? ""
                                        : " ('backplane target --list' shows the kinds and tags, "
                                          "'backplane info -l' the devices)")
              << "\n";
    return false;
  };
  if (!parse("--target", o.target, &target, &from_device)) return kExitUsage;
  if (!o.host.empty() && !parse("--host", o.host, &host, nullptr)) return kExitUsage;
  const std::string kind = target.Kind();
  std::vector<std::pair<std::string, std::string>> left_out;  // function, why
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
  } else if (file.functions().size() > 1) {
    // A file with CPU and GPU variants: build those that fit the Target, say which are left
    // out and why; refuse only when none fits.
    const bool cpu = TargetIsCpu(target);
    ir::IRModule fitting;
    for (const ir::PrimFunc& f : file.functions()) {
      std::string why = WhyItDoesNotFit(f, cpu, kind);
      if (why.empty()) {
        fitting.Add(f);
      } else {
        left_out.emplace_back(f.name, std::move(why));
      }
    }
    if (fitting.functions().empty()) {
      std::cerr << "backplane build: none of the functions of " << o.input << " fits Target '"
                << kind << "':\n";
      for (const auto& [name, why] : left_out) std::cerr << "  " << name << ": " << why << "\n";
      std::cerr << "build it for a " << (cpu ? "GPU" : "CPU") << " Target instead, e.g. -t "
                << (cpu ? "opencl" : "c") << "\n";
      return kExitUsage;
    }
    if (!left_out.empty()) ir_text = ir::Print(fitting);
  }
  for (const auto& [name, why] : left_out) {
    std::cerr << "backplane build: left out " << name << ": " << why << "\n";
  }
  // int32 arithmetic that can wrap for large sizes (docs/ir.md, "Int32 overflow check"): a
  // warning, not an error, since the check may flag an expression that a relation it does not
  // know keeps in range.
  std::vector<std::string> warnings;
  try {
    warnings = ir::Int32OverflowRisks(ir::Parse(ir_text, o.input));
  } catch (const ir::Error&) {
    // Not parsed or not checkable here: bp_build reports the problem below.
  }
  for (const std::string& w : warnings) std::cerr << "backplane build: warning: " << w << "\n";
  // The file's name in bp_build's messages, when it builds the file as written.
  const std::string source_name = !o.functions.empty() ? o.input + " (--func)"
                                  : left_out.empty()   ? o.input
                                                       : o.input + " (the functions that fit)";
  const auto t0 = std::chrono::steady_clock::now();
  Module module;
  Progress progress("backplane build", o.verbose);
  progress.Step("building " + o.input + " for " + target.Kind() + " (code generator and " +
                "compiler; a cold build can take seconds)");
  try {
    module = Build(ir_text, target, host, source_name);
    progress.Done();
  } catch (const Error& e) {
    progress.Done();
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
  OrderedJson kind_list = OrderedJson::array({module.Kind()});
  for (const Module& imp : module.Imports()) {
    kinds += " + " + imp.Kind();
    kind_list.push_back(imp.Kind());
  }
  if (o.json) {
    OrderedJson doc = JsonDocument("build");
    doc["input"] = o.input;
    doc["output"] = o.output;
    doc["target"] = OrderedJson::parse(target.ToJson());
    doc["target_from_device"] = from_device ? OrderedJson(o.target) : OrderedJson();
    doc["module_kinds"] = kind_list;
    doc["functions"] = module.ListFunctions();
    OrderedJson left = OrderedJson::array();
    for (const auto& [name, why] : left_out) left.push_back({{"function", name}, {"reason", why}});
    doc["left_out"] = left;
    doc["warnings"] = warnings;
    doc["bytes"] = bytes.size();
    doc["build_seconds"] = ms / 1000;
    return PrintJson("build", doc) ? kExitOk : kExitFailure;
  }
  std::cout << "built " << names << " for " << target.Kind()
            << (from_device ? " from " + o.target : "") << " (module " << kinds << ") in "
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
                  "The Target: 'c', 'c -mcpu=skylake -num-cores=4', a tag, JSON, or a device "
                  "(opencl:0, remote:1): that device's own Target, as 'backplane target "
                  "opencl:0' prints it")
      ->required();
  app->add_option("--host", o->host, "The host Target for host code (a CPU kind; optional)");
  app->add_option("--output,-o", o->output, "Where to save the module")->required();
  app->add_option("--func,-f", o->functions,
                  "Build only this function of the file (repeat for several); by default all")
      ->type_name("NAME");
  AddPluginPathOption(app, &o->plugin_paths);
  app->add_flag("--json", o->json,
                "Print the result as one JSON document (schema_version 1, docs/cli.md)");
  app->add_flag("--verbose,-v", o->verbose,
                "Say on stderr what is being built (shown anyway when stderr is a terminal)");
  app->footer(
      "A file with CPU and GPU variants builds the functions that fit the Target and names "
      "on stderr each one left out, and why. int32 arithmetic that can wrap for large sizes "
      "(e.g. a tile count `(n + 1023) / 1024`) is named in a warning on stderr (docs/ir.md, "
      "\"Int32 overflow check\").\n"
      "Examples:\n"
      "  backplane build vector_add.bpir -t c -o va.bpmod\n"
      "  backplane build vector_add.bpir -t opencl -o va_gpu.bpmod --json\n"
      "  backplane build vector_add.bpir -t opencl:0 -o va_gpu.bpmod\n"
      "  backplane build matmul.bpir -t 'c -num-cores=4' -f matmul_tiled -o mm.bpmod\n"
      "Exit codes: 0 built and saved, 1 the build or the write failed, 2 a usage error (bad "
      "option, kernel file or Target).\n"
      "Environment: BACKPLANE_PLUGIN_PATH, BACKPLANE_CC (the C compiler), XDG_CACHE_HOME (the "
      "compile cache); docs/cli.md.");
  return Command{app, [o] { return RunBuild(*o); }};
}

}  // namespace cli
}  // namespace backplane
