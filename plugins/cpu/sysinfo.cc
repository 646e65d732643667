// SPDX-License-Identifier: Apache-2.0
#include "sysinfo.h"

#include <sched.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace backplane {
namespace cpu {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The first value of `key` in a "key : value" file such as /proc/cpuinfo.
std::optional<std::string> ReadKeyed(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (Trim(line.substr(0, colon)) == key) return Trim(line.substr(colon + 1));
  }
  return std::nullopt;
}

std::optional<std::string> ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  return Trim(line);
}

std::optional<int64_t> ToInt(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<int64_t> SysconfPositive(int name) {
  const long v = sysconf(name);
  if (v > 0) return static_cast<int64_t>(v);
  return std::nullopt;
}

// Cache size of `level` ("Data" or "Unified" caches only) from cpu0's /sys cache entries.
std::optional<int64_t> SysfsCacheSize(int level) {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    auto lvl = ReadLine(dir + "/level");
    if (!lvl) break;
    if (ToInt(*lvl) != level) continue;
    auto type = ReadLine(dir + "/type");
    if (type && *type != "Data" && *type != "Unified") continue;
    if (auto size = ReadLine(dir + "/size")) return ParseCacheSize(*size);
  }
  return std::nullopt;
}

// The kernel's description of the caches (sysfs) first: glibc's sysconf guesses from CPUID
// and is wrong in virtual machines (it reported 320 MiB of L3 where sysfs and lscpu say 32).
std::optional<int64_t> CacheSize(int sysconf_name, int level) {
  if (auto v = SysfsCacheSize(level)) return v;
  return SysconfPositive(sysconf_name);
}

std::vector<std::string> IsaFlags() {
  std::optional<std::string> text = ReadKeyed("/proc/cpuinfo", "flags");
  if (!text) text = ReadKeyed("/proc/cpuinfo", "Features");
  std::set<std::string> flags;
  std::istringstream words(text.value_or(""));
  for (std::string w; words >> w;) flags.insert(w);
  return std::vector<std::string>(flags.begin(), flags.end());
}

std::optional<int64_t> MaxClockKhz() {
  if (auto khz = ReadLine("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")) {
    if (auto v = ToInt(*khz); v && *v > 0) return v;
  }
  if (auto mhz = ReadKeyed("/proc/cpuinfo", "cpu MHz")) {
    const double v = std::strtod(mhz->c_str(), nullptr);
    if (v > 0) return static_cast<int64_t>(v * 1000.0 + 0.5);
  }
  return std::nullopt;
}

MachineInfo ReadMachine() {
  MachineInfo m;
  struct utsname uts {};
  if (uname(&uts) == 0) {
    m.arch = uts.machine;
    m.kernel_release = uts.release;
  }
  // x86 says "model name"; some ARM kernels only "Processor" or "Hardware".
  for (const char* key : {"model name", "Processor", "Hardware", "cpu model"}) {
    if (auto v = ReadKeyed("/proc/cpuinfo", key); v && !v->empty()) {
      m.model_name = *v;
      break;
    }
  }
  if (m.model_name.empty()) m.model_name = m.arch.empty() ? "unknown CPU" : m.arch + " CPU";
  m.vendor = ReadKeyed("/proc/cpuinfo", "vendor_id").value_or("");
  m.online_cores = SysconfPositive(_SC_NPROCESSORS_ONLN).value_or(1);
  m.page_size = SysconfPositive(_SC_PAGESIZE).value_or(4096);
  struct sysinfo si {};
  if (sysinfo(&si) == 0) {
    m.total_memory = static_cast<int64_t>(si.totalram) * si.mem_unit;
  } else if (auto pages = SysconfPositive(_SC_PHYS_PAGES)) {
    m.total_memory = *pages * m.page_size;
  }
  m.max_clock_khz = MaxClockKhz();
  m.l1d_cache_bytes = CacheSize(_SC_LEVEL1_DCACHE_SIZE, 1);
  m.l2_cache_bytes = CacheSize(_SC_LEVEL2_CACHE_SIZE, 2);
  m.l3_cache_bytes = CacheSize(_SC_LEVEL3_CACHE_SIZE, 3);
  m.isa_flags = IsaFlags();
  return m;
}

}  // namespace

std::optional<int64_t> ParseCacheSize(const std::string& text) {
  const std::string t = Trim(text);
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (end == t.c_str() || v < 0) return std::nullopt;
  const std::string unit = Trim(end);
  if (unit.empty()) return static_cast<int64_t>(v);
  if (unit == "K" || unit == "KB" || unit == "k") return static_cast<int64_t>(v) << 10;
  if (unit == "M" || unit == "MB") return static_cast<int64_t>(v) << 20;
  if (unit == "G" || unit == "GB") return static_cast<int64_t>(v) << 30;
  return std::nullopt;
}

bool HasNativeFp16(const std::vector<std::string>& isa_flags) {
  for (const std::string& f : isa_flags) {
    if (f == "avx512_fp16" || f == "fphp" || f == "asimdhp") return true;
  }
  return false;
}

const MachineInfo& Machine() {
  static const MachineInfo info = ReadMachine();
  return info;
}

std::optional<int64_t> AvailableMemoryBytes() {
  if (auto kb = ReadKeyed("/proc/meminfo", "MemAvailable")) {
    // "23916212 kB"
    if (auto v = ToInt(*kb)) return *v * 1024;
  }
  struct sysinfo si {};
  if (sysinfo(&si) == 0) return static_cast<int64_t>(si.freeram) * si.mem_unit;
  return std::nullopt;
}

uint64_t AllocationLimitBytes() {
  static const uint64_t limit = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return static_cast<uint64_t>(SIZE_MAX / 2);
    return (static_cast<uint64_t>(si.totalram) + si.totalswap) * si.mem_unit;
  }();
  return limit;
}

int64_t AffinityThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return Machine().online_cores;
}

}  // namespace cpu
}  // namespace backplane
