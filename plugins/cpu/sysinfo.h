// SPDX-License-Identifier: Apache-2.0
// What the CPU plugin knows about the machine, read from the OS (Linux: /proc, /sys,
// sysconf). Facts that do not change are read once; available memory is read per query.
#ifndef BACKPLANE_PLUGINS_CPU_SYSINFO_H_
#define BACKPLANE_PLUGINS_CPU_SYSINFO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace backplane {
namespace cpu {

struct MachineInfo {
  std::string model_name;      // /proc/cpuinfo "model name" (or the architecture)
  std::string vendor;          // /proc/cpuinfo "vendor_id"; empty when absent
  std::string arch;            // uname machine: "x86_64", "aarch64"
  std::string kernel_release;  // uname release
  int64_t online_cores = 0;    // logical CPUs online
  int64_t page_size = 0;
  std::optional<int64_t> total_memory;   // bytes
  std::optional<int64_t> max_clock_khz;  // cpufreq max, else "cpu MHz"
  std::optional<int64_t> l1d_cache_bytes;
  std::optional<int64_t> l2_cache_bytes;
  std::optional<int64_t> l3_cache_bytes;
  // /proc/cpuinfo "flags" (x86) or "Features" (ARM), sorted and without duplicates.
  std::vector<std::string> isa_flags;
};

// The machine's fixed facts, read on first use (thread-safe).
const MachineInfo& Machine();

// Memory available to new allocations now: MemAvailable from /proc/meminfo, else the free
// RAM that sysinfo reports; none when neither can be read.
std::optional<int64_t> AvailableMemoryBytes();

// The most bytes a single allocation can possibly get: RAM plus swap (or SIZE_MAX / 2 when
// unknown). Larger requests are refused before they reach the allocator.
uint64_t AllocationLimitBytes();

// Logical CPUs this process may run on (its affinity mask).
int64_t AffinityThreads();

// True when the ISA computes in float16 natively: avx512_fp16 on x86, fphp/asimdhp on ARM
// (F16C only converts).
bool HasNativeFp16(const std::vector<std::string>& isa_flags);

// Parses a cache size as /sys writes it ("2048K", "32M", "512") into bytes.
std::optional<int64_t> ParseCacheSize(const std::string& text);

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_SYSINFO_H_
