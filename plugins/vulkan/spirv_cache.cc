// SPDX-License-Identifier: Apache-2.0
#include "spirv_cache.h"

#include <atomic>
#include <backplane/sdk/disk_cache.hpp>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {
namespace vulkan {

namespace {

constexpr uint32_t kSpirvMagic = 0x07230203u;
constexpr size_t kHeaderWords = 5;
constexpr uint32_t kOpFunctionEnd = 56;
// The memory level's bound: a catalog kernel's SPIR-V is 2-20 KiB, so thousands of kernels.
constexpr size_t kMemoryBytes = size_t{64} << 20;

std::atomic<int64_t> g_compiled{0};
std::atomic<int64_t> g_memory{0};
std::atomic<int64_t> g_disk{0};

// The memory level: key -> SPIR-V, the oldest dropped first past kMemoryBytes.
class MemoryCache {
 public:
  bool Find(const std::string& key, std::vector<uint32_t>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    *out = it->second;
    return true;
  }
  void Put(const std::string& key, const std::vector<uint32_t>& spirv) {
    const size_t bytes = spirv.size() * sizeof(uint32_t);
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_.emplace(key, spirv).second) return;  // another thread put it first
    order_.push_back(key);
    bytes_ += bytes;
    while (bytes_ > kMemoryBytes && order_.size() > 1) {
      auto oldest = entries_.find(order_.front());
      bytes_ -= oldest->second.size() * sizeof(uint32_t);
      entries_.erase(oldest);
      order_.pop_front();
    }
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<uint32_t>> entries_;
  std::deque<std::string> order_;
  size_t bytes_ = 0;
};

MemoryCache& Memory() {
  static MemoryCache* cache = new MemoryCache();  // lives until the process ends
  return *cache;
}

// The SPIR-V of the disk entry at `path`, or false when there is none or it is not usable.
bool ReadDisk(const std::string& path, std::vector<uint32_t>* out) {
  std::string bytes;
  // (An empty entry is no module; memcpy must not be given its null data either.)
  if (!sdk::ReadCacheEntry(path, &bytes) || bytes.empty() || bytes.size() % sizeof(uint32_t) != 0) {
    return false;
  }
  std::vector<uint32_t> words(bytes.size() / sizeof(uint32_t));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  if (!LooksLikeSpirv(words)) return false;
  *out = std::move(words);
  return true;
}

void WriteDisk(const std::string& path, const std::vector<uint32_t>& spirv) {
  try {
    sdk::WriteCacheEntry(path, std::string(reinterpret_cast<const char*>(spirv.data()),
                                           spirv.size() * sizeof(uint32_t)));
  } catch (const std::exception&) {
    // Best effort: a cache that cannot be written never fails a build.
  }
}

}  // namespace

std::string CacheDir() {
  static const std::string dir = sdk::CacheFolder("vulkan");
  return dir;
}

bool LooksLikeSpirv(const std::vector<uint32_t>& words) {
  if (words.size() < kHeaderWords || words[0] != kSpirvMagic) return false;
  size_t at = kHeaderWords, last = 0;
  while (at < words.size()) {
    const uint32_t count = words[at] >> 16;
    if (count == 0 || count > words.size() - at) return false;
    last = at;
    at += count;
  }
  // Function definitions come last in a module, so a whole module ends with OpFunctionEnd; an
  // entry cut at an instruction boundary does not.
  return last != 0 && words[last] == ((1u << 16) | kOpFunctionEnd);
}

std::vector<uint32_t> CachedSpirv(const std::string& key_material,
                                  const std::function<std::vector<uint32_t>()>& compile) {
  const std::string key = sdk::CacheKey(key_material);
  std::vector<uint32_t> spirv;
  if (Memory().Find(key, &spirv)) {
    ++g_memory;
    return spirv;
  }
  const std::string dir = CacheDir();
  const std::string path = dir.empty() ? "" : dir + "/" + key + ".spv";
  if (!path.empty() && ReadDisk(path, &spirv)) {
    ++g_disk;
    Memory().Put(key, spirv);
    return spirv;
  }
  spirv = compile();
  ++g_compiled;
  Memory().Put(key, spirv);
  if (!path.empty()) WriteDisk(path, spirv);
  return spirv;
}

SpirvCacheStats GetSpirvCacheStats() {
  return SpirvCacheStats{g_compiled.load(), g_memory.load(), g_disk.load()};
}

}  // namespace vulkan
}  // namespace backplane
