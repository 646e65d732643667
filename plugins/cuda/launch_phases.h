// SPDX-License-Identifier: Apache-2.0
// The launch path's per-phase timer: where the time of a CUDA launch goes, measured
// inside the plugin, on machines where no host profiler runs.
//
// Off unless BACKPLANE_CUDA_LAUNCH_PHASES is set (to anything but "" or "0") when the plugin
// loads. Off, a launch pays one branch on a flag read once, per phase mark. On, each launch
// reads steady_clock (clock_gettime(CLOCK_MONOTONIC), the vDSO: no system call) at the start,
// at the end of each phase and at the end, and adds the differences to its thread's totals;
// `cuda.launch_phases` returns the sums over every thread as JSON ("reset" zeroes them), and
// the process prints them to stderr when it exits. The timer's own clock reads (20 to 35 ns
// each; the report says how much here) are inside the phases they end: compare phases with
// each other and with the raw call, not with a launch timed without the timer.
#ifndef BACKPLANE_PLUGINS_CUDA_LAUNCH_PHASES_H_
#define BACKPLANE_PLUGINS_CUDA_LAUNCH_PHASES_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace backplane {
namespace cuda {

// The phases of CUDAModule::Launch, in the order a launch passes them. Every launch that
// completes marks each of them once, including those with nothing to do (a kernel without
// run-time checks spends ~0 ns in the fault phases), so after N launches each count is N.
enum class LaunchPhase : int {
  kBind = 0,   // launch::Bind: the arguments checked against the kernel's signature, each
               // buffer's address found in the plugin's allocations, grid and block computed
  kPack,       // the kernel's parameter slots (addresses, scalars, block offsets)
  kContext,    // the device's primary context made current (cuCtxGetCurrent, rarely Set)
  kModule,     // the kernel's CUfunction in that context (the module loaded on first use)
  kStream,     // the thread's active stream on the device
  kFaultLock,  // kernels with run-time checks: the module's fault lock and record
  kLaunch,     // cuLaunchKernel (one call a part of a split grid)
  kFaultRead,  // kernels with run-time checks: the record read back (waits for the kernel)
  kCount
};

// "bind", "pack", "context", "module", "stream", "fault_lock", "launch", "fault_read".
const char* LaunchPhaseName(LaunchPhase phase);

namespace detail {
// Read once, when the plugin loads (BACKPLANE_CUDA_LAUNCH_PHASES).
extern const bool g_launch_phases_on;
}  // namespace detail

// Whether the timer is on in this process.
inline bool LaunchPhasesOn() { return detail::g_launch_phases_on; }

// Times one launch: made at its start, Mark(p) at the end of each phase p, and the launch is
// counted (with its total) when the timer is destroyed after the last phase. A launch that
// ends early (an empty grid, an error) adds the phases it finished and is not counted.
class LaunchPhaseTimer {
 public:
  LaunchPhaseTimer() : on_(LaunchPhasesOn()) {
    if (__builtin_expect(on_, 0)) {
      start_ = last_ = Now();
    }
  }
  LaunchPhaseTimer(const LaunchPhaseTimer&) = delete;
  LaunchPhaseTimer& operator=(const LaunchPhaseTimer&) = delete;
  ~LaunchPhaseTimer() {
    if (__builtin_expect(on_, 0)) {
      Finish();
    }
  }

  void Mark(LaunchPhase phase) {
    if (__builtin_expect(on_, 0)) {
      MarkSlow(phase);
    }
  }

 private:
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void MarkSlow(LaunchPhase phase);
  void Finish();

  const bool on_;
  bool complete_ = false;  // the last phase was marked
  int64_t start_ = 0;
  int64_t last_ = 0;
};

// The totals over every thread, as JSON: {"enabled": bool, "launches": N, "total_ns": T,
// "clock_ns": C, "phases": [{"name": "bind", "count": N, "ns": T}, ...]} in LaunchPhase order;
// "launches" counts completed launches, "total_ns" their whole time in Launch, "clock_ns" what
// one clock read costs (each phase's time includes one; 0 when off).
std::string LaunchPhasesJson();
// The same as a table, a line a phase (what the process prints to stderr at exit).
std::string LaunchPhasesText();
// Zeroes the totals (call it while no launch runs; one running may keep part of its time).
void ResetLaunchPhases();

// Registers `cuda.launch_phases`: with no argument or "json", LaunchPhasesJson(); "text",
// LaunchPhasesText(); "reset", the JSON, then ResetLaunchPhases().
void RegisterLaunchPhases();

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_LAUNCH_PHASES_H_
