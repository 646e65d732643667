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
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"

namespace backplane::cli {

namespace {

struct RunOptions {
  std::string module;
  std::string func;
  std::string device = "cpu:0";
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
               const RunOptions& o) {
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
  std::cout << func << " on " << o.device << ": ran (no reference known, not checked), "
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
  std::ifstream in(o.module, std::ios::binary);
  if (!in) {
    std::cerr << "backplane run: cannot read '" << o.module << "'; give a file that "
              << "'backplane build' wrote\n";
    return kExitUsage;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  Module m = Module::LoadFromBytes(bytes.str());
  Device dev = Device::Parse(o.device);
  const kernels::Case* c = kernels::Find(o.func);
  if (c == nullptr) return RunGeneric(m, o.func, dev, dims, o);
  runner::Result r = runner::RunCase(*c, m, dev, dims, o.repeat, o.seed);
  if (!r.ok) {
    std::cout << o.func << " on " << o.device << ": FAILED: " << r.error << "\n";
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
  std::cout << o.func << " on " << o.device << ": ok (max relative error " << err
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
  app->add_option("--device,-d", o->device, "The device, e.g. cpu:0 (default), opencl:1");
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
