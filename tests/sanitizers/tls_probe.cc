// SPDX-License-Identifier: Apache-2.0
// A library with a thread_local, loaded with dlopen by lsan_dynamic_tls_test: every thread that
// touches it gets a dynamic TLS block from the dynamic loader (through __tls_get_addr), as the
// plugins' own thread_locals and those of the drivers they load (PoCL, Mesa) do.
#include <cstdint>

namespace {
thread_local int64_t t_slots[2];
}  // namespace

extern "C" __attribute__((visibility("default"))) int64_t bp_test_touch_tls(int64_t value) {
  t_slots[value & 1] += value;
  return t_slots[0] + t_slots[1];
}
