// SPDX-License-Identifier: Apache-2.0
#include "launch_phases.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <backplane/sdk/plugin.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace backplane {
namespace cuda {

namespace detail {
namespace {
bool ReadSwitch() {
  const char* v = secure_getenv("BACKPLANE_CUDA_LAUNCH_PHASES");
  return v != nullptr && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
}
}  // namespace
const bool g_launch_phases_on = ReadSwitch();
}  // namespace detail

namespace {

constexpr int kPhases = static_cast<int>(LaunchPhase::kCount);

// What one clock read costs here (ns; the median of 15 runs of 64 reads), measured once: each
// phase's time includes one, which a reader may subtract.
double ClockReadNs() {
  static const double ns = [] {
    std::vector<double> runs;
    for (int r = 0; r < 15; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 64; ++i) (void)std::chrono::steady_clock::now();
      const auto t1 = std::chrono::steady_clock::now();
      runs.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 64);
    }
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
  }();
  return ns;
}

// One thread's totals. Only the owning thread adds (a load and a store: no locked
// instruction on the launch path); readers sum them with relaxed loads. Kept until the process
// ends, so a thread that has exited still counts.
struct Totals {
  std::atomic<uint64_t> ns[kPhases] = {};
  std::atomic<uint64_t> count[kPhases] = {};
  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> total_ns{0};
};

struct Registry {
  std::mutex mu;
  std::vector<Totals*> threads;
};

Registry& Threads() {
  static Registry* r = new Registry();  // lives until the process ends (read at exit)
  return *r;
}

Totals& Mine() {
  thread_local Totals* mine = [] {
    auto* t = new Totals();
    Registry& r = Threads();
    std::lock_guard<std::mutex> lock(r.mu);
    r.threads.push_back(t);
    return t;
  }();
  return *mine;
}

void Add(std::atomic<uint64_t>& v, uint64_t d) {
  v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

struct Sums {
  uint64_t ns[kPhases] = {};
  uint64_t count[kPhases] = {};
  uint64_t launches = 0;
  uint64_t total_ns = 0;
};

Sums Sum() {
  Sums s;
  Registry& r = Threads();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Totals* t : r.threads) {
    for (int p = 0; p < kPhases; ++p) {
      s.ns[p] += t->ns[p].load(std::memory_order_relaxed);
      s.count[p] += t->count[p].load(std::memory_order_relaxed);
    }
    s.launches += t->launches.load(std::memory_order_relaxed);
    s.total_ns += t->total_ns.load(std::memory_order_relaxed);
  }
  return s;
}

// Prints the totals to stderr when the process exits (the plugin is never unloaded before).
struct ReportAtExit {
  ~ReportAtExit() {
    if (!LaunchPhasesOn()) return;
    const std::string text = LaunchPhasesText();
    std::fputs(text.c_str(), stderr);
  }
} report_at_exit;

}  // namespace

const char* LaunchPhaseName(LaunchPhase phase) {
  static const char* const kNames[kPhases] = {"bind",   "pack",       "context", "module",
                                              "stream", "fault_lock", "launch",  "fault_read"};
  const int i = static_cast<int>(phase);
  return i >= 0 && i < kPhases ? kNames[i] : "?";
}

void LaunchPhaseTimer::MarkSlow(LaunchPhase phase) {
  const int64_t now = Now();
  Totals& t = Mine();
  const int i = static_cast<int>(phase);
  Add(t.ns[i], static_cast<uint64_t>(now - last_));
  Add(t.count[i], 1);
  last_ = now;
  complete_ = phase == LaunchPhase::kFaultRead;
}

void LaunchPhaseTimer::Finish() {
  if (!complete_) return;
  Totals& t = Mine();
  Add(t.launches, 1);
  Add(t.total_ns, static_cast<uint64_t>(Now() - start_));
}

std::string LaunchPhasesJson() {
  const Sums s = Sum();
  std::string out = std::string("{\"enabled\": ") + (LaunchPhasesOn() ? "true" : "false") +
                    ", \"launches\": " + std::to_string(s.launches) +
                    ", \"total_ns\": " + std::to_string(s.total_ns) +
                    ", \"clock_ns\": " + std::to_string(LaunchPhasesOn() ? ClockReadNs() : 0.0) +
                    ", \"phases\": [";
  for (int p = 0; p < kPhases; ++p) {
    out += std::string(p == 0 ? "" : ", ") + "{\"name\": \"" +
           LaunchPhaseName(static_cast<LaunchPhase>(p)) +
           "\", \"count\": " + std::to_string(s.count[p]) + ", \"ns\": " + std::to_string(s.ns[p]) +
           "}";
  }
  return out + "]}";
}

std::string LaunchPhasesText() {
  const Sums s = Sum();
  char line[200];
  std::string out;
  std::snprintf(line, sizeof(line),
                "backplane cuda launch phases (BACKPLANE_CUDA_LAUNCH_PHASES): %" PRIu64
                " launches, %.1f ns a launch in the plugin; a clock read, in each phase, "
                "costs %.1f ns\n",
                s.launches, s.launches == 0 ? 0.0 : double(s.total_ns) / double(s.launches),
                LaunchPhasesOn() ? ClockReadNs() : 0.0);
  out += line;
  for (int p = 0; p < kPhases; ++p) {
    const double per = s.count[p] == 0 ? 0.0 : double(s.ns[p]) / double(s.count[p]);
    std::snprintf(line, sizeof(line), "  %-10s %10.1f ns a launch  %5.1f %%  (%" PRIu64 " times)\n",
                  LaunchPhaseName(static_cast<LaunchPhase>(p)), per,
                  s.total_ns == 0 ? 0.0 : 100.0 * double(s.ns[p]) / double(s.total_ns), s.count[p]);
    out += line;
  }
  return out;
}

void ResetLaunchPhases() {
  Registry& r = Threads();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Totals* t : r.threads) {
    for (int p = 0; p < kPhases; ++p) {
      t->ns[p].store(0, std::memory_order_relaxed);
      t->count[p].store(0, std::memory_order_relaxed);
    }
    t->launches.store(0, std::memory_order_relaxed);
    t->total_ns.store(0, std::memory_order_relaxed);
  }
}

void RegisterLaunchPhases() {
  sdk::RegisterFunction("cuda.launch_phases", [](PackedArgs args) {
    const std::string what = args.size() > 0 ? args.String(0) : std::string("json");
    if (what == "text") return sdk::StringValue(LaunchPhasesText());
    if (what != "json" && what != "reset") {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "cuda.launch_phases: unknown argument '" + what +
                      "'; pass nothing or \"json\", \"text\" or \"reset\"");
    }
    const std::string json = LaunchPhasesJson();
    if (what == "reset") ResetLaunchPhases();
    return sdk::StringValue(json);
  });
}

}  // namespace cuda
}  // namespace backplane
