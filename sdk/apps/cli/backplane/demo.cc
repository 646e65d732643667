// SPDX-License-Identifier: Apache-2.0
// `backplane demo`: builds every reference kernel for every device this machine has (the
// Target read from the device), runs it on random inputs, checks it against the float64
// reference and prints one line per kernel and device: ok, time, GFLOP/s or GB/s.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "output.h"
#include "table.h"

namespace backplane {
namespace cli {

namespace {

struct DemoOptions {
  std::string size = "demo";
  int repeat = 3;
  std::vector<std::string> kernels;
  std::vector<std::string> plugin_paths;
  std::vector<std::string> layers;
  std::string trace;
  bool json = false;
  bool verbose = false;
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

// The table: kernel, device, result ("ok" or "FAILED", right after the device, where scripts
// and CI look for it), build, 1st call, time, throughput, max error. On a terminal narrower
// than the full layout it is compact: one space between columns, "GF/s" for "GFLOP/s" and
// one digit of the error, which fits 80 columns with kernel and device names up to 16 and 9.
class DemoTable {
 public:
  DemoTable(size_t kernel_width, size_t device_width) {
    widths_ = {
        std::max<size_t>(kernel_width, 6), std::max<size_t>(device_width, 6), 6, 9, 9, 9, 15, 9};
    size_t wide = 0;
    for (size_t w : widths_) wide += w + 2;
    compact_ = wide > OutputWidth();
    if (compact_) {
      widths_[6] = 10;  // "1234.5 GF/s" still fits: a column is never cut
      widths_[7] = 5;
      gap_ = 1;
    }
  }
  // The rate and the error as this layout writes them.
  std::string Rate(const runner::Result& r) const {
    if (!r.ok) return "";
    char buf[48];
    if (r.gflops > 0) {
      std::snprintf(buf, sizeof(buf), compact_ ? "%.1f GF/s" : "%.2f GFLOP/s", r.gflops);
    } else {
      std::snprintf(buf, sizeof(buf), compact_ ? "%.1f GB/s" : "%.2f GB/s", r.gbytes_per_s);
    }
    return buf;
  }
  std::string Error(const runner::Result& r) const {
    if (!r.ok) return "";
    char buf[32];
    std::snprintf(buf, sizeof(buf), compact_ ? "%.0e" : "%.2g", r.max_error);
    return r.max_error == 0 ? "0" : buf;
  }
  bool compact() const { return compact_; }
  void Row(const std::vector<std::string>& cells) const {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string cell = cells[i];
      if (i + 1 < cells.size()) {
        // Times and throughput right-aligned, names and results left-aligned.
        const size_t w = widths_[i];
        const std::string pad(cell.size() < w ? w - cell.size() : 0, ' ');
        cell = (i >= 3 ? pad + cell : cell + pad) + std::string(gap_, ' ');
      }
      line += cell;
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  std::vector<size_t> widths_;
  size_t gap_ = 2;
  bool compact_ = false;
};

int RunDemo(const DemoOptions& o) {
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  if (const std::string bad = EnableCliLayers(o.layers, o.trace); !bad.empty()) {
    std::cerr << "backplane demo: " << bad << "\n";
    return kExitUsage;
  }
  std::vector<const kernels::Case*> cases;
  for (const kernels::Case& c : kernels::Catalog()) {
    // A variant (kernels::Case::base) runs in place of its base on the devices that choose
    // it; it runs on every GPU device only when named.
    if ((o.kernels.empty() && c.base.empty()) ||
        std::find(o.kernels.begin(), o.kernels.end(), c.func) != o.kernels.end()) {
      cases.push_back(&c);
    }
  }
  for (const std::string& k : o.kernels) {
    if (kernels::Find(k) == nullptr) {
      std::string names;
      for (const kernels::Case& c : kernels::Catalog()) {
        names += (names.empty() ? "" : ", ") + c.func;
      }
      std::cerr << "backplane demo: --kernel " << k << ": no reference kernel has that name; "
                << "the kernels are: " << names << "\n";
      return kExitUsage;
    }
  }
  Check(bp_plugins_load_all());
  std::vector<Device> devices = Devices();
  size_t kernel_width = 0;
  size_t device_width = 0;
  // The names of the functions that will run: a kernel's variant for each device.
  for (const kernels::Case* c : cases) {
    kernel_width = std::max(kernel_width, c->func.size());
    for (Device d : devices) {
      kernel_width = std::max(kernel_width, runner::ChooseVariant(*c, d)->func.size());
    }
  }
  for (Device d : devices) device_width = std::max(device_width, DeviceName(d).size());
  const DemoTable table(kernel_width, device_width);
  if (!o.json) {
    table.Row({"kernel", "device", "result", "build", "1st call", "time", "throughput",
               table.compact() ? "error" : "max error"});
  }
  OrderedJson doc = JsonDocument("demo");
  doc["size"] = o.size;
  doc["repeat"] = o.repeat;
  OrderedJson results = OrderedJson::array();
  OrderedJson skipped = OrderedJson::array();
  Progress progress("backplane demo", o.verbose);
  int passed = 0, failed = 0;
  auto skip = [&](const std::string& where, const std::string& reason) {
    skipped.push_back({{"device", where}, {"reason", reason}});
    if (!o.json) std::printf("%s: skipped: %s\n", where.c_str(), reason.c_str());
  };
  for (Device dev : devices) {
    const std::string where = DeviceName(dev);
    Target target;
    try {
      target = Target::FromDevice(dev);
    } catch (const Error& e) {
      skip(where, e.what());
      continue;
    }
    // A plugin may give a device and no code generator (a DeviceAPI-only backend): its
    // device is skipped with the reason, not counted as failed kernels.
    if (!Registry::TryGet("target.build." + target.Kind())) {
      skip(where, "no code generator for target kind '" + target.Kind() +
                      "' (no plugin registers target.build." + target.Kind() + ")");
      continue;
    }
    // CPU kernels for a CPU, and for a device whose Target says its code is CPU code (the key
    // "cpu": a remote plugin's view of a server's cpu:0).
    const std::vector<std::string> keys = target.Keys();
    const bool cpu =
        dev.dl.device_type == kDLCPU || std::find(keys.begin(), keys.end(), "cpu") != keys.end();
    for (const kernels::Case* cp : cases) {
      if (cp->needs_threads == cpu) continue;  // GPU kernels for GPU targets only
      // The variant this device takes (the kernel itself where it has none).
      const kernels::Case& c = *runner::ChooseVariant(*cp, dev);
      runner::Result r;
      double build_s = 0;
      try {
        progress.Step("building " + c.func + " for " + where);
        auto t0 = std::chrono::steady_clock::now();
        Module m = Build(runner::KernelSource(c), target);
        build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        progress.Step("running " + c.func + " on " + where +
                      " (the first call includes the driver's compile)");
        r = runner::RunCase(c, m, dev, o.size == "small" ? c.small : c.demo, o.repeat);
      } catch (const std::exception& e) {
        r.ok = false;
        r.error = e.what();
      }
      progress.Done();
      OrderedJson row = {{"kernel", cp->func},
                         {"function", c.func},
                         {"variant", kernels::VariantName(c)},
                         {"device", where},
                         {"ok", r.ok},
                         {"build_seconds", build_s},
                         {"first_call_seconds", r.first_call_seconds},
                         {"seconds", r.seconds},
                         {"gflops", r.gflops},
                         {"gbytes_per_s", r.gbytes_per_s},
                         {"max_error", r.max_error}};
      if (!r.ok) row["error"] = r.error;
      results.push_back(row);
      if (!o.json) {
        table.Row({c.func, where, r.ok ? "ok" : "FAILED", runner::FormatSeconds(build_s),
                   r.first_call_seconds > 0 ? runner::FormatSeconds(r.first_call_seconds) : "",
                   r.ok ? runner::FormatSeconds(r.seconds) : "", table.Rate(r), table.Error(r)});
      }
      if (!r.ok)
        std::fprintf(stderr, "backplane demo: %s on %s FAILED: %s\n", c.func.c_str(), where.c_str(),
                     r.error.c_str());
      (r.ok ? passed : failed) += 1;
    }
  }
  const size_t ran_on = devices.size() - skipped.size();
  // Servers named in BACKPLANE_REMOTE (or attached) that cannot be reached: their devices are
  // not in this run, which fails, naming them.
  const OrderedJson unreachable = UnreachableRemoteServers();
  doc["results"] = results;
  doc["skipped"] = skipped;
  doc["unreachable_servers"] = unreachable;
  doc["passed"] = passed;
  doc["failed"] = failed;
  if (o.json) {
    if (!PrintJson("demo", doc)) return kExitFailure;
  } else {
    const std::string missing = unreachable.empty()
                                    ? std::string()
                                    : "; " + std::to_string(unreachable.size()) +
                                          " remote server(s) unreachable, their devices not run";
    std::printf("\n%d passed, %d failed on %zu device(s)%s%s\n", passed, failed, ran_on,
                skipped.empty() ? "" : " (the devices skipped above say why)", missing.c_str());
  }
  ReportUnreachableRemoteServers("backplane demo", unreachable);
  if (!unreachable.empty()) return kExitFailure;
  if (passed + failed == 0) {
    std::cerr << "backplane demo: no kernel ran: "
              << (o.kernels.empty()
                      ? std::string("no device here has a code generator")
                      : "the kernels given run on " +
                            std::string(cases.front()->needs_threads ? "GPU" : "CPU") +
                            " devices only, and none here has a code generator")
              << " ('backplane info' lists the devices)\n";
  }
  return failed == 0 && passed > 0 ? kExitOk : kExitFailure;
}

}  // namespace

Command AddDemoCommand(CLI::App& parent) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* app = parent.add_subcommand(
      "demo",
      "Build every reference kernel for every device here, run it on random inputs, check it "
      "against a float64 reference and print the times");
  app->add_option("--size", o->size, "Problem sizes: demo (default) or small")
      ->check(CLI::IsMember({"demo", "small"}));
  app->add_option("--repeat,-r", o->repeat, "Timed runs per kernel (default 3)")
      ->check(CLI::Range(1, 1000000));
  app->add_option("--kernel,-k", o->kernels, "Only this kernel (repeat for several)")
      ->type_name("NAME");
  AddPluginPathOption(app, &o->plugin_paths);
  AddLayerOptions(app, &o->layers, &o->trace);
  app->add_flag("--json", o->json,
                "Print the results as one JSON document (schema_version 1, docs/cli.md) "
                "instead of the table");
  app->add_flag("--verbose,-v", o->verbose,
                "Say on stderr what is being built and run (shown anyway when stderr is a "
                "terminal)");
  app->footer(
      "Columns: build is the code generator and compiler; 1st call is the first, checked call, "
      "which includes the driver's own compile (OpenCL, Vulkan); time is the median of the "
      "timed calls after it.\n"
      "Examples:\n"
      "  backplane demo\n"
      "  backplane demo --size small -k vector_add -k saxpy_gpu\n"
      "  backplane demo --json > demo.json\n"
      "  backplane demo --size small -k vector_add --trace demo.json\n"
      "Exit codes: 0 every kernel passed, 1 one failed or none ran, 2 a usage error.\n"
      "Environment: BACKPLANE_PLUGIN_PATH, BACKPLANE_DISABLE_PLUGINS, XDG_CACHE_HOME (the "
      "compile cache; a warm cache makes builds fast); docs/cli.md.");
  return Command{app, [o] { return RunDemo(*o); }};
}

}  // namespace cli
}  // namespace backplane
