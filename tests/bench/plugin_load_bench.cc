// SPDX-License-Identifier: Apache-2.0
// Discovering and loading every plugin, each iteration in a fresh process (bench_plugin_load,
// which times itself), against dlopen of the same plugin files in a fresh process.
#include <benchmark/benchmark.h>

#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_BENCH_LOAD_PATH
#error "BACKPLANE_BENCH_LOAD_PATH must name the bench_plugin_load executable"
#endif

namespace {

using Json = nlohmann::json;

// Runs bench_plugin_load with `args` and returns its report, or an error text in `error`.
Json RunChild(const std::vector<std::string>& args, std::string* error) {
  std::vector<std::string> argv = {BACKPLANE_BENCH_LOAD_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  backplane::subprocess::Result result;
  try {
    result = backplane::subprocess::Run(argv);
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
  Json doc = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  if (result.exit_code != 0 || doc.is_discarded() || !doc.contains("elapsed_ns")) {
    *error = "bench_plugin_load " + args.front() + ": " + result.Describe() + ": " + result.err;
    return nullptr;
  }
  return doc;
}

// Times `args` once per iteration; the child's own figure is the iteration's time.
void TimeChild(benchmark::State& state, const std::vector<std::string>& args) {
  int64_t loaded = 0;
  for (auto _ : state) {
    std::string error;
    Json report = RunChild(args, &error);
    if (report.is_null()) {
      state.SkipWithError(error.c_str());
      return;
    }
    state.SetIterationTime(report["elapsed_ns"].get<double>() * 1e-9);
    loaded = report["loaded"].get<int64_t>();
  }
  state.counters["plugins"] = static_cast<double>(loaded);
  if (loaded == 0) state.SkipWithError("no plugin was loaded: is the cpu plugin built?");
}

// The libraries a fresh process loads, found by running the core once.
const std::vector<std::string>& LoadedLibraries(std::string* error) {
  static std::string first_error;
  static const std::vector<std::string> libraries = [] {
    std::vector<std::string> out;
    Json report = RunChild({"core"}, &first_error);
    if (!report.is_null()) {
      for (const Json& lib : report["libraries"]) out.push_back(lib.get<std::string>());
    }
    return out;
  }();
  *error = first_error;
  return libraries;
}

void BM_Plugins_DiscoverLoadAll(benchmark::State& state) { TimeChild(state, {"core"}); }
BENCHMARK(BM_Plugins_DiscoverLoadAll)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Plugins_DlopenOnly(benchmark::State& state) {
  std::string error;
  const std::vector<std::string>& libraries = LoadedLibraries(&error);
  if (libraries.empty()) {
    state.SkipWithError(error.empty() ? "no plugin was loaded: is the cpu plugin built?"
                                      : error.c_str());
    return;
  }
  std::vector<std::string> args = {"dlopen"};
  args.insert(args.end(), libraries.begin(), libraries.end());
  TimeChild(state, args);
}
BENCHMARK(BM_Plugins_DlopenOnly)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
