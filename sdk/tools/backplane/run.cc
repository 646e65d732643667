// SPDX-License-Identifier: Apache-2.0
// `backplane run MODULE --func NAME --device cpu:0 [--dim n=4096 ...]`: loads a saved module,
// runs one of its functions on random inputs, checks the result against the float64
// reference when the function is one of the reference kernels, and prints the time.
#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/runner.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "input.h"

namespace backplane::cli {

namespace {

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
  std::string device;  // "" = from the module's kind
  std::vector<std::string> dims;
  int repeat = 5;
  uint64_t seed = 1;
  std::vector<std::string> plugin_paths;
};

// "n=4096" pairs.
bool ParseDims(const std::vector<std::string>& items, kernels::Dims* out, std::string* bad) {
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      *bad = item;
      return false;
    }
    try {
      size_t used = 0;
      const std::string value = item.substr(eq + 1);
      (*out)[item.substr(0, eq)] = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      *bad = item;
      return false;
    }
  }
  return true;
}

// Random inputs from the function's signature: scalars from --dim (float scalars random),
// buffers of the shapes their expressions give.
std::vector<kernels::Arg> GenericArgs(const ir::PrimFunc& f, const kernels::Dims& dims,
                                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(0.1, 1.0);
  std::vector<kernels::Arg> args;
  std::vector<ir::ArgView> views;
  for (const ir::Param& p : f.params) {
    kernels::Arg a;
    if (!p.is_buffer()) {
      a.name = p.var().name();
      a.dtype = p.var().dtype();
      auto it = dims.find(a.name);
      if (a.dtype.is_float()) {
        a.scalar = it != dims.end() ? static_cast<double>(it->second) : dist(rng);
      } else if (it != dims.end()) {
        a.scalar = static_cast<double>(it->second);
      } else {
        throw Error(BP_ERR_INVALID_ARGUMENT, "function '" + f.name + "' needs a value for its " +
                                                 "scalar parameter '" + a.name +
                                                 "'; give it with --dim " + a.name + "=VALUE");
      }
      ir::ArgView v;
      v.kind = ir::ArgView::Kind::kInt;
      v.i = static_cast<int64_t>(a.scalar);
      views.push_back(v);
    } else {
      a.name = p.buffer().name();
      a.is_buffer = true;
      a.dtype = p.buffer().dtype();
      a.is_output = true;
      views.push_back(ir::ArgView());
    }
    args.push_back(std::move(a));
  }
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (!f.params[i].is_buffer()) continue;
    int64_t count = 1;
    for (const ir::Expr& d : f.params[i].buffer()->shape) {
      args[i].shape.push_back(ir::EvalIntExpr(f, d, views));
      count *= args[i].shape.back();
    }
    args[i].data.resize(static_cast<size_t>(count));
    for (double& x : args[i].data) x = dist(rng);
  }
  return args;
}

int RunGeneric(const Module& m, const std::string& func, Device dev, const kernels::Dims& dims,
               const RunOptions& o, const std::string& device_text) {
  const std::string ir_text = m.InspectSource("ir");
  if (ir_text.empty()) {
    std::cerr << "backplane run: '" << func << "' is not a reference kernel and the module "
              << "(kind " << m.Kind() << ") does not show its IR, so its arguments are unknown\n";
    return kExitUsage;
  }
  ir::IRModule ir = ir::Parse(ir_text, o.module);
  const ir::PrimFunc* f = ir.Find(func);
  if (f == nullptr) {
    std::cerr << "backplane run: the module has no function '" << func << "'\n";
    return kExitUsage;
  }
  std::vector<kernels::Arg> args = GenericArgs(*f, dims, o.seed);
  runner::DeviceArgs device_args(args, dev);
  Function fn = m.GetFunction(func);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, o.repeat); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn.CallPacked(device_args.values().data(), static_cast<int32_t>(device_args.values().size()));
    Check(bp_device_stream_sync(dev.dl, nullptr));
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  std::cout << func << " on " << device_text << ": ran (no reference known, not checked), "
            << runner::FormatSeconds(times[times.size() / 2]) << " median of " << times.size()
            << "\n";
  return kExitOk;
}

int RunRun(const RunOptions& o) {
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  kernels::Dims dims;
  std::string bad;
  if (!ParseDims(o.dims, &dims, &bad)) {
    std::cerr << "backplane run: --dim '" << bad << "' is not NAME=INTEGER (e.g. --dim n=4096)\n";
    return kExitUsage;
  }
  std::string bytes;
  const std::string problem = ReadInputFile(o.module, kModuleFile, &bytes);
  if (!problem.empty()) {
    std::cerr << "backplane run: " << problem << "\n";
    return kExitUsage;
  }
  Module m = Module::LoadFromBytes(bytes);
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
  if (c == nullptr) return RunGeneric(m, o.func, dev, dims, o, device_text);
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
  app->add_option("--dim", o->dims,
                  "A size parameter, e.g. --dim n=4096 (repeat; sizes not given take the "
                  "reference kernel's demo size)")
      ->type_name("NAME=N");
  app->add_option("--repeat,-r", o->repeat, "Timed runs after the checked one (default 5)");
  app->add_option("--seed", o->seed, "Seed of the random inputs (default 1)");
  app->add_option("--plugin-path", o->plugin_paths, "Search DIR for plugins first")
      ->type_name("DIR")
      ->allow_extra_args(false)
      ->transform(CLI::Validator(CheckPluginFolder, "", "existing folder"));
  return Command{app, [o] { return RunRun(*o); }};
}

}  // namespace backplane::cli
