// SPDX-License-Identifier: Apache-2.0
// Crashes on purpose: a static constructor writes to address 8, so the process that loads it
// dies of SIGSEGV inside dlopen, before bp_plugin_init could run.
#include <backplane/sdk/plugin.hpp>
#include <cstdint>

namespace {

struct CrashWhenLoaded {
  CrashWhenLoaded() {
    // Page zero, but not the null pointer itself, so UBSan lets it through to the SIGSEGV.
    volatile uintptr_t address = 8;
    *reinterpret_cast<volatile int*>(address) = 1;
  }
};
CrashWhenLoaded crash_when_loaded;

}  // namespace

BACKPLANE_PLUGIN_ENTRY("crashing_ctor_segv", "1.0.0") {}
