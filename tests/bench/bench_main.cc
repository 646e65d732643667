// SPDX-License-Identifier: Apache-2.0
// bench_backplane and bench_remote: run the benchmarks (Google Benchmark's usual flags apply),
// then print a summary: each Backplane path as a ratio to its baseline measured in this run,
// with its goal.
//
// Extra flags (removed before Google Benchmark sees the command line):
//   --bp_summary_json=FILE     also write the summary as JSON to FILE
//   --bp_fail_on_missed_goal   exit 1 when a measured pair misses its goal
// With repetitions, the summary uses each benchmark's median. The exit code is 1 when a
// benchmark failed (it reports why), so CI notices a path that stopped working.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_pairs.h"

// The pairs this executable summarizes: bench_backplane's by default, another table of
// bench_pairs.h where its CMake target says (bench_remote: kRemotePairs).
#ifndef BACKPLANE_BENCH_PAIRS
#define BACKPLANE_BENCH_PAIRS kPairs
#endif

namespace backplane {
namespace bench {
namespace {

using Json = nlohmann::ordered_json;

struct Figure {
  double ns_per_iteration = 0;
  bool from_median = false;
  std::vector<double> repetitions;  // ns per iteration of each repetition, in run order
  double stddev_ns = -1;            // the stddev aggregate, when only aggregates are reported
};

// The console output as usual, and each benchmark's time per iteration kept for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  explicit SummaryReporter(OutputOptions options) : ConsoleReporter(options) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) {
        errors_[run.run_name.function_name] = run.error_message;
        continue;
      }
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      const double ns =
          run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit) * 1e9;
      // Under its function's name (a pair of benchmarks without arguments) and its full name
      // ("BM_X/16/real_time": one of several arguments).
      std::vector<std::string> keys = {run.run_name.function_name};
      if (run.run_name.str() != keys[0]) keys.push_back(run.run_name.str());
      for (const std::string& key : keys) {
        Figure& figure = figures_[key];
        if (run.run_type == Run::RT_Aggregate) {
          if (run.aggregate_name == "stddev") figure.stddev_ns = ns;
          if (!median) continue;
        } else {
          figure.repetitions.push_back(ns);
        }
        if (figure.from_median && !median) continue;  // a median, once seen, wins
        figure.ns_per_iteration = ns;
        figure.from_median = median;
      }
    }
  }

  std::optional<Figure> Find(const std::string& name) const {
    auto it = figures_.find(name);
    if (it == figures_.end()) return std::nullopt;
    return it->second;
  }
  const std::map<std::string, std::string>& errors() const { return errors_; }
  std::string ErrorOf(const std::string& name) const {
    auto it = errors_.find(name);
    return it == errors_.end() ? std::string() : it->second;
  }

 private:
  std::map<std::string, Figure> figures_;
  std::map<std::string, std::string> errors_;
};

// Google Benchmark applies --benchmark_color only to the reporter it creates itself; a
// custom display reporter has to honour it here (auto: colour when stdout is a terminal).
benchmark::ConsoleReporter::OutputOptions ConsoleOptions(int argc, char** argv) {
  std::string color = "auto";
  const std::string flag = "--benchmark_color=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], flag.c_str(), flag.size()) == 0) color = argv[i] + flag.size();
  }
  bool use_color = isatty(STDOUT_FILENO) != 0;
  if (color == "true" || color == "yes" || color == "1") use_color = true;
  if (color == "false" || color == "no" || color == "0") use_color = false;
  return use_color ? benchmark::ConsoleReporter::OO_ColorTabular
                   : benchmark::ConsoleReporter::OO_Tabular;
}

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

// "12.3 ns", "4.56 ms", "9.87 GB/s".
// The work one iteration of a side of `pair` does (bytes or flops).
double Work(const Pair& pair, bool baseline) {
  return static_cast<double>(baseline && pair.baseline_bytes != 0 ? pair.baseline_bytes
                                                                  : pair.bytes);
}

std::string Absolute(const Pair& pair, double ns, bool baseline) {
  switch (pair.measure) {
    case Measure::kTimePerCall:
      return Format("%.2f ns", ns);
    case Measure::kElapsedTime:
      return Format("%.3f ms", ns / 1e6);
    case Measure::kTimeRatio:  // from nanoseconds (a workspace) to milliseconds (a kernel)
      if (ns < 1e3) return Format("%.1f ns", ns);
      if (ns < 1e6) return Format("%.1f us", ns / 1e3);
      return Format("%.3f ms", ns / 1e6);
    case Measure::kBandwidth:
      return Format("%.2f GB/s", Work(pair, baseline) / ns);
    case Measure::kFlops:
      return Format("%.2f GFLOP/s", Work(pair, baseline) / ns);
  }
  return {};
}

// The spread of a time ratio over the run: the lowest and highest ratio of the two sides'
// repetitions taken in run order (with --benchmark_enable_random_interleaving they alternate),
// else the ratio's relative spread from the two standard deviations; "" with one repetition.
std::string Spread(const Figure& ours, const Figure& base, double ratio) {
  const size_t n = std::min(ours.repetitions.size(), base.repetitions.size());
  if (n >= 2) {
    double lo = 1e300, hi = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = ours.repetitions[i] / base.repetitions[i];
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    return Format("%.2f", lo) + Format("-%.2fx", hi);
  }
  if (ours.stddev_ns >= 0 && base.stddev_ns >= 0 && ours.ns_per_iteration > 0 &&
      base.ns_per_iteration > 0) {
    const double a = ours.stddev_ns / ours.ns_per_iteration;
    const double b = base.stddev_ns / base.ns_per_iteration;
    return Format("+-%.2fx", ratio * std::sqrt(a * a + b * b));
  }
  return "";
}

std::string GoalText(const Pair& pair) {
  switch (pair.measure) {
    case Measure::kTimePerCall:
      return Format("<= %.0f ns", pair.goal);
    case Measure::kElapsedTime:
      return Format("<= %.0f ms", pair.goal);
    case Measure::kTimeRatio:
      return Format("<= %.2fx baseline", pair.goal);
    case Measure::kBandwidth:
    case Measure::kFlops:
      return Format(">= %.0f%% of baseline", pair.goal * 100);
  }
  return {};
}

// Builds the summary of every pair and prints it; returns whether every measured pair met
// its goal.
bool Summarize(const SummaryReporter& reporter, Json* summary) {
  std::vector<std::vector<std::string>> rows = {
      {"MEASURE", "BACKPLANE", "BASELINE", "RATIO", "SPREAD", "GOAL", "MET"}};
  bool all_met = true;
  *summary = Json::array();
  for (const Pair& pair : BACKPLANE_BENCH_PAIRS) {
    std::optional<Figure> ours = reporter.Find(pair.benchmark);
    std::optional<Figure> base = reporter.Find(pair.baseline);
    Json entry{{"measure", pair.label},
               {"benchmark", pair.benchmark},
               {"baseline", pair.baseline},
               {"baseline_is", pair.baseline_label},
               {"goal", GoalText(pair)}};
    if (!ours || !base) {
      std::string error = reporter.ErrorOf(pair.benchmark);
      if (error.empty()) error = reporter.ErrorOf(pair.baseline);
      std::string why = error.empty() ? "not run (filtered out)" : "failed: " + error;
      for (const char* name : {pair.benchmark, pair.baseline}) {
        auto it = Unavailable().find(name);
        if (error.empty() && it != Unavailable().end()) why = "not run: " + it->second;
      }
      rows.push_back({pair.label, why, "", "", "", GoalText(pair), "-"});
      entry["status"] = why;
      summary->push_back(std::move(entry));
      continue;
    }
    // For times the ratio is ours / baseline (lower is better); for bandwidth and flops it
    // is the fraction of the baseline's rate we reach (higher is better).
    const bool rate = pair.measure == Measure::kBandwidth || pair.measure == Measure::kFlops;
    double ratio = rate ? (Work(pair, false) / ours->ns_per_iteration) /
                              (Work(pair, true) / base->ns_per_iteration)
                        : ours->ns_per_iteration / base->ns_per_iteration;
    bool met = false;
    switch (pair.measure) {
      case Measure::kTimePerCall:
        met = ours->ns_per_iteration <= pair.goal;
        break;
      case Measure::kElapsedTime:
        met = ours->ns_per_iteration / 1e6 <= pair.goal;
        break;
      case Measure::kTimeRatio:
        met = ratio <= pair.goal;
        break;
      case Measure::kBandwidth:
      case Measure::kFlops:
        met = ratio >= pair.goal;
        break;
    }
    all_met = all_met && met;
    std::string ratio_text = rate ? Format("%.1f%%", ratio * 100) : Format("%.2fx", ratio);
    const std::string spread = rate ? "" : Spread(*ours, *base, ratio);
    rows.push_back({pair.label, Absolute(pair, ours->ns_per_iteration, false),
                    Absolute(pair, base->ns_per_iteration, true) + " (" + pair.baseline_label + ")",
                    ratio_text, spread, GoalText(pair), met ? "yes" : "NO"});
    if (!spread.empty()) entry["spread"] = spread;
    entry["value"] = Absolute(pair, ours->ns_per_iteration, false);
    entry["baseline_value"] = Absolute(pair, base->ns_per_iteration, true);
    entry["ns_per_iteration"] = ours->ns_per_iteration;
    entry["baseline_ns_per_iteration"] = base->ns_per_iteration;
    entry["ratio"] = ratio;
    entry["met"] = met;
    summary->push_back(std::move(entry));
  }

  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::cout << "\nSummary (ratio: time = Backplane / baseline, bandwidth and flops = Backplane "
               "as % of baseline; both measured in this run)\n";
  for (const auto& row : rows) {
    std::cout << "  ";
    for (size_t c = 0; c < row.size(); ++c) {
      std::cout << row[c];
      if (c + 1 < row.size()) std::cout << std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::cout << '\n';
  }
  return all_met;
}

}  // namespace
}  // namespace bench
}  // namespace backplane

int main(int argc, char** argv) {
  const std::string program = std::filesystem::path(argv[0]).filename().string();
  std::string summary_path;
  bool fail_on_missed_goal = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const char* kSummaryFlag = "--bp_summary_json=";
    if (std::strncmp(argv[i], kSummaryFlag, std::strlen(kSummaryFlag)) == 0) {
      summary_path = argv[i] + std::strlen(kSummaryFlag);
      if (summary_path.empty()) {
        std::cerr << program
                  << ": --bp_summary_json= needs a file name, e.g. "
                     "--bp_summary_json=summary.json\n";
        return 2;
      }
    } else if (std::strcmp(argv[i], "--bp_fail_on_missed_goal") == 0) {
      fail_on_missed_goal = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int bench_argc = static_cast<int>(args.size());
  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) return 2;

  backplane::bench::SummaryReporter reporter(backplane::bench::ConsoleOptions(argc, argv));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  backplane::bench::Json summary;
  bool all_met = backplane::bench::Summarize(reporter, &summary);
  if (!summary_path.empty()) {
    std::ofstream out(summary_path);
    out << summary.dump(2) << '\n';
    if (!out) {
      std::cerr << program << ": cannot write the summary to '" << summary_path
                << "'; check that its folder exists and is writable\n";
      return 1;
    }
  }
  if (!reporter.errors().empty()) {
    std::cerr << "\n" << program << ": " << reporter.errors().size() << " benchmark(s) failed:\n";
    for (const auto& [name, message] : reporter.errors()) {
      std::cerr << "  " << name << ": " << message << '\n';
    }
    return 1;
  }
  return fail_on_missed_goal && !all_met ? 1 : 0;
}
