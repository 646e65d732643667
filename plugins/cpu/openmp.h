// SPDX-License-Identifier: Apache-2.0
// The OpenMP runtime that the c target's kernels run on, and the two settings Backplane chooses
// for it (docs/performance.md, "OpenMP: waiting and binding").
//
// A kernel's parallel loops are OpenMP regions; its library links the compiler's OpenMP runtime
// (gcc: libgomp.so.1, clang: libomp.so.5), which the first kernel library pulls into the host's
// process. The runtime reads its settings from the environment once, when it initializes, and
// they hold for the process (a Target cannot change them per module). Backplane chooses:
//   waiting: OMP_WAIT_POLICY=passive. An idle thread sleeps instead of spinning. Spinning saves a
//     wake-up of about 9 us per region on a quiet machine, but where the cores are shared (other
//     processes, more threads than free cores), a spinning thread takes the core from the thread
//     it waits for, and a small parallel kernel ran 12 to 56 times slower than serially.
//   binding: OMP_PROC_BIND=false. Binding would pin the thread that loads the runtime (the host's
//     thread) to one core, and every thread it creates afterwards inherits that mask.
// A variable the user set wins: Backplane sets neither setting when any variable of its group is
// in the environment (kWaitVariables, kBindVariables). Backplane sets its values only while the
// first kernel library that brings a runtime loads (and, for libomp, initializes), then removes
// them: child processes and the host's later getenv() never see them. A runtime that is in the
// process before that (the host uses OpenMP itself, or a library linked it) has read its settings
// already: Backplane leaves it as it is and reports its settings as the host's.
#ifndef BACKPLANE_PLUGINS_CPU_OPENMP_H_
#define BACKPLANE_PLUGINS_CPU_OPENMP_H_

#include <string>

namespace backplane {
namespace cpu {
namespace openmp {

// The environment variables that choose how idle threads wait (libgomp and LLVM's libomp), and
// how threads are bound to cores. Any one of a group set, even empty, makes that group the user's.
inline constexpr const char* kWaitVariables[] = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                                 "KMP_BLOCKTIME", "KMP_LIBRARY"};
inline constexpr const char* kBindVariables[] = {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY",
                                                 "KMP_AFFINITY"};

// Backplane's values.
inline constexpr const char* kWaitPolicy = "passive";
inline constexpr const char* kProcBind = "false";

// One setting and who chose it.
struct Setting {
  // "passive", "false", ...: Backplane's value; the environment's (OMP_WAIT_POLICY's or
  // OMP_PROC_BIND's value, lowercased, else "NAME=value" of each variable of the group set,
  // joined by ", "); "default" when nobody set it. Once Backplane's settings are applied,
  // the binding is what the runtime answers (omp_get_proc_bind: false, true, primary, close,
  // spread).
  std::string value;
  // "backplane", "environment", or "host" (the runtime was loaded before Backplane's first
  // kernel library: whatever the host's environment held then).
  std::string from;
};

// Where the settings stand.
struct State {
  // "pending" (no runtime yet: these settings apply when the first kernel library loads one),
  // "applied" (a kernel library loaded the runtime with them), or "host" (a runtime was in the
  // process first).
  std::string settings;
  // The runtime's file name ("libgomp.so.1"); empty while none is loaded.
  std::string runtime;
  Setting wait_policy;
  Setting proc_bind;
};

// The settings now (thread-safe). While pending, the ones that will apply.
State Current();

// dlopen()s a kernel library (RTLD_NOW | RTLD_LOCAL) and returns its handle, or null (dlerror()
// says why). The first time an OpenMP runtime is not yet in the process, Backplane's settings are
// in the environment for that load (and libomp's initialization) only. Every runtime loaded
// stays loaded for the life of the process: its worker threads outlive any one kernel library.
// Loads are serialized (the environment is the process's).
void* LoadKernelLibrary(const std::string& path);

}  // namespace openmp
}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_OPENMP_H_
