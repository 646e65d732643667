// SPDX-License-Identifier: Apache-2.0
// `backplane run MODULE --func NAME [--device cpu:0] [--dim n=4096 ...] [--check]`: loads a
// saved module, runs one of its functions on random inputs, checks the result against the
// float64 reference when the function is one of the reference kernels, or against the IR
// interpreter on the same inputs with --check (any function), and prints the time.
#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <backplane/runner/runner.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "input.h"

namespace backplane::cli {

namespace {

const InputKind kKernelFile = {"kernel file", "the IR's text form (.bpir, docs/ir.md)",
                               kMaxKernelFileBytes};
const InputKind kModuleFile = {"module file",
                               "Backplane's module format (what 'backplane build' writes)",
                               kMaxModuleFileBytes};

// The device type the module's code runs on: the device type of the target kind named like
// the module, or of one of its imports (a split module is "ir_host" importing the kernels);
// "" when no kind is known by that name.
std::string ModuleDeviceType(const Module& m) {
  const nlohmann::json kinds = nlohmann::json::parse(TargetKinds::Describe());
  std::vector<Module> todo = {m};
  for (size_t i = 0; i < todo.size(); ++i) {
    const std::string kind = todo[i].Kind();
    for (const nlohmann::json& k : kinds["kinds"]) {
      if (k.value("name", "") == kind && k["device_type"].is_string()) {
        return k["device_type"].get<std::string>();
      }
    }
    for (Module& imp : todo[i].Imports()) todo.push_back(imp);
  }
  return "";
}

// "ir_host + opencl".
std::string ModuleKinds(const Module& m) {
  std::string kinds = m.Kind();
  for (const Module& imp : m.Imports()) kinds += " + " + imp.Kind();
  return kinds;
}

struct RunOptions {
  std::string module;
  std::string func;
  std::string device;             // "" = from the module's kind
  std::vector<std::string> dims;  // NAME=VALUE for scalar params
  bool check = false;             // compare with the IR interpreter
  std::string ir_file;            // the IR to compare with, instead of the module's own
  double rtol = -1;               // the float tolerance instead of the dtype's (< 0)
  int repeat = 5;
  uint64_t seed = 1;
  std::vector<std::string> plugin_paths;
  bool allow_native = false;  // load modules that carry native code (a c module's library)
};

// "n=4096", "alpha=-1.5" pairs; the values are parsed against the function's signature later.
bool ParseValues(const std::vector<std::string>& items, std::map<std::string, std::string>* out,
                 std::string* bad) {
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      *bad = item;
      return false;
    }
    (*out)[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return true;
}

// The values as catalog sizes, when every one is an integer (the catalog's runner takes
// integer sizes only).
bool AsDims(const std::map<std::string, std::string>& values, kernels::Dims* dims) {
  for (const auto& [name, text] : values) {
    try {
      size_t used = 0;
      (*dims)[name] = std::stoll(text, &used);
      if (used != text.size()) return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

double Median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Any function, its arguments from its signature (the IR the module keeps, or --ir): checked
// against the IR interpreter with --check, else only run and timed.
int RunGeneric(const Module& m, const kernels::Case* c, Device dev,
               std::map<std::string, std::string> values, const RunOptions& o,
               const std::string& device_text) {
  std::optional<runner::Oracle> oracle;
  if (!o.ir_file.empty()) {
    std::string text;
    const std::string problem = ReadInputFile(o.ir_file, kKernelFile, &text);
    if (!problem.empty()) {
      std::cerr << "backplane run: --ir: " << problem << "\n";
      return kExitUsage;
    }
    try {
      oracle.emplace(ir::Parse(text, o.ir_file));
    } catch (const ir::Error& e) {
      std::cerr << "backplane run: --ir: " << e.what() << "\n";
      return kExitUsage;
    }
  } else {
    try {
      oracle.emplace(runner::Oracle::FromModule(m));
    } catch (const Error& e) {
      if (o.check) {
        std::cerr << "backplane run: --check: " << o.module << ": " << e.what() << "\n";
        return kExitUsage;
      }
      std::cerr << "backplane run: '" << o.func << "' is not a reference kernel and " << o.module
                << ": " << e.what() << "\n";
      return kExitUsage;
    }
  }
  const ir::PrimFunc* f = nullptr;
  try {
    f = &oracle->Function(o.func);
  } catch (const Error& e) {
    std::cerr << "backplane run: " << (o.ir_file.empty() ? o.module : o.ir_file) << ": " << e.what()
              << "\n";
    return kExitUsage;
  }
  // A catalog kernel's sizes not given take its test sizes under --check (the interpreter is
  // 100 to 10,000 times slower than a device: demo sizes would take minutes), else its demo
  // sizes as without --check.
  if (c != nullptr) {
    for (const auto& [name, v] : o.check ? c->small : c->demo) {
      values.emplace(name, std::to_string(v));
    }
    for (const auto& [name, v] : c->demo) values.emplace(name, std::to_string(v));
  }
  std::vector<runner::CheckArg> args;
  try {
    args = runner::MakeCheckArgs(*f, values, o.seed);
  } catch (const Error& e) {
    std::cerr << "backplane run: " << e.what() << "\n";
    return kExitUsage;
  }
  std::string verdict = "ran (not checked; --check compares it with the IR interpreter)";
  if (o.check) {
    runner::CheckOptions options;
    options.rtol = o.rtol;
    runner::CheckResult r = runner::RunChecked(m, *oracle, o.func, dev, args, options);
    if (!r.ok) {
      std::cout << o.func << " on " << device_text
                << ": FAILED against the IR interpreter: " << r.error << "\n";
      return kExitFailure;
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2g", r.max_ratio);
    verdict =
        std::string("ok (matches the IR interpreter; largest error ") + buf + " of the tolerance)";
  }
  runner::CheckDeviceArgs device_args(args, dev);
  Function fn = m.GetFunction(o.func);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, o.repeat); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn.CallPacked(device_args.values().data(), static_cast<int32_t>(device_args.values().size()));
    Check(bp_device_stream_sync(dev.dl, nullptr));
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::cout << o.func << " on " << device_text << ": " << verdict << ", "
            << runner::FormatSeconds(Median(times)) << " median of " << times.size() << "\n";
  return kExitOk;
}

int RunRun(const RunOptions& o) {
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  std::map<std::string, std::string> values;
  std::string bad;
  if (!ParseValues(o.dims, &values, &bad)) {
    std::cerr << "backplane run: --dim '" << bad << "' is not NAME=VALUE (e.g. --dim n=4096, "
              << "--dim alpha=-1.5, --dim flag=true)\n";
    return kExitUsage;
  }
  std::string bytes;
  const std::string problem = ReadInputFile(o.module, kModuleFile, &bytes);
  if (!problem.empty()) {
    std::cerr << "backplane run: " << problem << "\n";
    return kExitUsage;
  }
  Module m;
  try {
    m = Module::LoadFromBytes(bytes, ModuleLoadOptions{o.allow_native});
  } catch (const Error& e) {
    // A damaged file, one of another format or one with native code not allowed is the user's
    // input: named, with the usage exit.
    if (e.kind() != BP_ERR_INVALID_ARGUMENT && e.kind() != BP_ERR_VERSION_MISMATCH) {
      throw Error(e.kind(), o.module + ": " + e.what());
    }
    std::cerr << "backplane run: " << o.module << ": " << e.what() << "\n";
    return kExitUsage;
  }
  const std::string module_device = ModuleDeviceType(m);
  std::string device_text = o.device;
  if (device_text.empty()) device_text = module_device.empty() ? "cpu:0" : module_device + ":0";
  Device dev = Device::Parse(device_text);
  if (!module_device.empty() && dev.TypeName() != module_device) {
    std::cerr << "backplane run: " << o.module << " holds code for " << module_device
              << " devices (module " << ModuleKinds(m) << "), so it cannot run on " << device_text
              << "; give --device " << module_device
              << ":0 (or leave --device out), or build the kernel for a Target of that "
              << "device's kind\n";
    return kExitUsage;
  }
  const kernels::Case* c = kernels::Find(o.func);
  kernels::Dims dims;
  if (c == nullptr || o.check || !o.ir_file.empty() || !AsDims(values, &dims)) {
    return RunGeneric(m, c, dev, values, o, device_text);
  }
  runner::Result r = runner::RunCase(*c, m, dev, dims, o.repeat, o.seed);
  if (!r.ok) {
    std::cout << o.func << " on " << device_text << ": FAILED: " << r.error << "\n";
    return kExitFailure;
  }
  char rate[64];
  if (r.gflops > 0) {
    std::snprintf(rate, sizeof(rate), "%.2f GFLOP/s", r.gflops);
  } else {
    std::snprintf(rate, sizeof(rate), "%.2f GB/s", r.gbytes_per_s);
  }
  char err[32];
  std::snprintf(err, sizeof(err), "%.2g", r.max_error);
  std::cout << o.func << " on " << device_text << ": ok (max relative error " << err
            << " vs the float64 reference), " << runner::FormatSeconds(r.seconds) << " median of "
            << std::max(1, o.repeat) << ", " << rate << "\n";
  return kExitOk;
}

}  // namespace

Command AddRunCommand(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand(
      "run", "Run a function of a saved module on random inputs, check it, and time it");
  app->add_option("MODULE", o->module, "A module file written by 'backplane build'")->required();
  app->add_option("--func,-f", o->func, "The function to run")->required();
  app->add_option(
      "--device,-d", o->device,
      "The device, e.g. cpu:0, opencl:1; by default device 0 of the type the module's code "
      "runs on (cpu:0 for a c module, opencl:0 for an opencl one)");
  app->add_option("--dim,--arg", o->dims,
                  "A scalar parameter: a size (--dim n=4096) or any scalar of the function, "
                  "e.g. --arg alpha=-1.5, --arg big=5000000000, --arg flag=true (repeat; the "
                  "sizes of a reference kernel not given take its demo size, float scalars not "
                  "given are random)")
      ->type_name("NAME=VALUE");
  app->add_flag("--check", o->check,
                "Run the function on the IR interpreter too, on the same inputs, and compare "
                "every buffer (tolerance by dtype: exact for integers and bool; "
                "docs/host-guide.md). Any kernel, not only the reference ones");
  app->add_option("--ir", o->ir_file,
                  "The kernel file (.bpir) the module was built from, for --check when the "
                  "module does not keep its IR, or to check it against another IR")
      ->type_name("FILE");
  app->add_option("--rtol", o->rtol,
                  "With --check: the relative tolerance for float buffers instead of the "
                  "dtype's (1e-2 float16, 1e-4 float32, 1e-10 float64)");
  app->add_option("--repeat,-r", o->repeat, "Timed runs after the checked one (default 5)");
  app->add_option("--seed", o->seed, "Seed of the random inputs (default 1)");
  app->add_flag("--allow-native", o->allow_native,
                "Load the module even if it carries native code (a c module's shared library), "
                "which runs in this process with your rights: only for a module you built "
                "yourself or got from a source you trust (docs/security.md)");
  app->add_option("--plugin-path", o->plugin_paths, "Search DIR for plugins first")
      ->type_name("DIR")
      ->allow_extra_args(false)
      ->transform(CLI::Validator(CheckPluginFolder, "", "existing folder"));
  return Command{app, [o] { return RunRun(*o); }};
}

}  // namespace backplane::cli
