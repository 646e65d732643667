// SPDX-License-Identifier: Apache-2.0
// `backplane demo`: builds every reference kernel for every device this machine has (the
// Target read from the device), runs it on random inputs, checks it against the float64
// reference and prints one line per kernel and device: ok, time, GFLOP/s or GB/s.
#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"

namespace backplane::cli {

namespace {

struct DemoOptions {
  std::string size = "demo";
  int repeat = 3;
  std::vector<std::string> kernels;
  std::vector<std::string> plugin_paths;
};

// Devices of one type are tried from id 0 while they exist, up to this many.
constexpr int kMaxDevicesPerType = 64;

std::vector<Device> Devices() {
  std::vector<int32_t> types(BP_DEVICE_TYPE_MAX);
  size_t count = 0;
  Check(bp_device_type_list(types.data(), types.size(), &count));
  types.resize(std::min(count, types.size()));
  std::vector<Device> devices;
  for (int32_t type : types) {
    const bp_device_api_t* api = nullptr;
    if (bp_device_api_get(type, &api) != BP_OK) {
      bp_error_clear();  // no plugin for this type here
      continue;
    }
    for (int32_t id = 0; id < kMaxDevicesPerType; ++id) {
      DLDevice dev{static_cast<DLDeviceType>(type), id};
      bp_value_t exists;
      if (bp_device_get_attr(dev, BP_ATTR_EXIST, &exists) != BP_OK) {
        bp_error_clear();
        break;
      }
      if (exists.type != BP_VALUE_INT || exists.u.v_int64 == 0) break;
      devices.emplace_back(dev);
    }
  }
  return devices;
}

std::string DeviceName(Device d) {
  const char* name = nullptr;
  if (bp_device_type_name(d.dl.device_type, &name) != BP_OK) bp_error_clear();
  return std::string(name != nullptr ? name : "?") + ":" + std::to_string(d.dl.device_id);
}

int RunDemo(const DemoOptions& o) {
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  if (o.size != "demo" && o.size != "small") {
    std::cerr << "backplane demo: --size is 'demo' or 'small', not '" << o.size << "'\n";
    return kExitUsage;
  }
  Check(bp_plugins_load_all());
  std::vector<Device> devices = Devices();
  std::printf("%-18s %-10s %-8s %-10s %-10s %14s  %s\n", "kernel", "device", "result", "build",
              "time", "throughput", "max error");
  int passed = 0, failed = 0, skipped_devices = 0;
  for (Device dev : devices) {
    const std::string where = DeviceName(dev);
    Target target;
    try {
      target = Target::FromDevice(dev);
    } catch (const Error& e) {
      std::printf("%-18s %-10s %-8s %s\n", "(all)", where.c_str(), "skipped", e.what());
      ++skipped_devices;
      continue;
    }
    // A plugin may give a device and no code generator (a DeviceAPI-only backend): its
    // device is skipped with the reason, not counted as failed kernels.
    if (!Registry::TryGet("target.build." + target.Kind())) {
      std::printf(
          "%-18s %-10s %-8s no code generator for target kind '%s' (no plugin registers "
          "target.build.%s)\n",
          "(all)", where.c_str(), "skipped", target.Kind().c_str(), target.Kind().c_str());
      ++skipped_devices;
      continue;
    }
    const bool cpu = dev.dl.device_type == kDLCPU;
    for (const kernels::Case& c : kernels::Catalog()) {
      if (c.needs_threads == cpu) continue;  // GPU kernels for GPU targets only
      if (!o.kernels.empty() &&
          std::find(o.kernels.begin(), o.kernels.end(), c.func) == o.kernels.end()) {
        continue;
      }
      std::fflush(stdout);
      runner::Result r;
      double build_s = 0;
      try {
        auto t0 = std::chrono::steady_clock::now();
        Module m = Build(runner::KernelSource(c), target);
        build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r = runner::RunCase(c, m, dev, o.size == "small" ? c.small : c.demo, o.repeat);
      } catch (const std::exception& e) {
        r.ok = false;
        r.error = e.what();
      }
      char rate[32] = "";
      if (r.ok && r.gflops > 0) std::snprintf(rate, sizeof(rate), "%.2f GFLOP/s", r.gflops);
      if (r.ok && r.gflops == 0) std::snprintf(rate, sizeof(rate), "%.2f GB/s", r.gbytes_per_s);
      char err[32] = "";
      if (r.ok) std::snprintf(err, sizeof(err), "%.2g", r.max_error);
      std::printf("%-18s %-10s %-8s %-10s %-10s %14s  %s\n", c.func.c_str(), where.c_str(),
                  r.ok ? "ok" : "FAILED", runner::FormatSeconds(build_s).c_str(),
                  r.ok ? runner::FormatSeconds(r.seconds).c_str() : "", rate, err);
      if (!r.ok) std::printf("    %s\n", r.error.c_str());
      (r.ok ? passed : failed) += 1;
    }
  }
  std::printf(
      "\n%d passed, %d failed on %zu device(s)%s\n", passed, failed,
      devices.size() - static_cast<size_t>(skipped_devices),
      skipped_devices > 0 ? " (devices without a target kind or code generator skipped)" : "");
  return failed == 0 && passed > 0 ? kExitOk : kExitFailure;
}

}  // namespace

Command AddDemoCommand(CLI::App& parent) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* app = parent.add_subcommand(
      "demo",
      "Build every reference kernel for every device here, run it on random inputs, check it "
      "against a float64 reference and print the times");
  app->add_option("--size", o->size, "Problem sizes: demo (default) or small");
  app->add_option("--repeat,-r", o->repeat, "Timed runs per kernel (default 3)");
  app->add_option("--kernel,-k", o->kernels, "Only this kernel (repeat for several)")
      ->type_name("NAME");
  app->add_option("--plugin-path", o->plugin_paths, "Search DIR for plugins first")
      ->type_name("DIR")
      ->allow_extra_args(false)
      ->transform(CLI::Validator(CheckPluginFolder, "", "existing folder"));
  return Command{app, [o] { return RunDemo(*o); }};
}

}  // namespace backplane::cli
