// SPDX-License-Identifier: Apache-2.0
// The code generator's cache of SPIR-V: GLSL -> SPIR-V (shaderc, then SPIRV-Tools' passes)
// takes 70-150 ms a kernel on the 2-core machine, a whole build from the cache about 1 ms
// (docs/performance.md, "Building: the SPIR-V cache").
//
// Two levels, keyed by everything the SPIR-V depends on (codegen.cc's key material):
//   - this process's memory, so a second build of a kernel in the same process compiles
//     nothing (bounded: past 64 MiB of SPIR-V the oldest entries go first);
//   - the disk, <CacheDir()>/<sdk::CacheKey(material)>.spv, an sdk::WriteCacheEntry entry (a
//     checksum over the words) published with an atomic rename, so a fresh process, or two
//     building the same kernel at once, read the old entry or the whole new one.
// An entry is used only when its checksum holds and its payload has the shape of SPIR-V
// (word-aligned, LooksLikeSpirv). Anything else (truncated, damaged, written by something
// else) is compiled again and replaced. Writing is best effort: a folder that cannot be
// written, or none at all, only loses the disk level.
// Two threads that miss on the same kernel at once both compile it (the same words) and both
// publish it; nothing waits on a lock while compiling.
#ifndef BACKPLANE_PLUGINS_VULKAN_SPIRV_CACHE_H_
#define BACKPLANE_PLUGINS_VULKAN_SPIRV_CACHE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace backplane {
namespace vulkan {

// The folder of the plugin's disk caches: SPIR-V (<key>.spv) and the devices' pipeline caches
// (<vendor>-<device>-<pipelineCacheUUID>.bin). sdk::CacheFolder("vulkan"): $XDG_CACHE_HOME/
// backplane/vulkan, else ~/.cache/backplane/vulkan, private, chosen at the first call and kept
// for the process; "" when no private folder could be made (nothing is kept on disk).
std::string CacheDir();

// The SPIR-V for `key_material` (which must hold everything the SPIR-V depends on: toolchain
// versions, options, source): from memory, else from the disk cache, else `compile()`'s
// result, which is then kept in both. An exception from `compile` propagates and nothing is
// cached. Thread-safe.
std::vector<uint32_t> CachedSpirv(const std::string& key_material,
                                  const std::function<std::vector<uint32_t>()>& compile);

// Whether `words` has the shape of a whole SPIR-V module: the magic number, the 5-word
// header, then instructions whose word counts (never 0) end exactly at the end, the last one
// OpFunctionEnd. Says nothing about validity (SpirvInterfaceProblem does that for saved
// modules).
bool LooksLikeSpirv(const std::vector<uint32_t>& words);

// Counts since the process started: kernels compiled, served from memory, served from disk.
// Registered as the global function `vulkan.spirv_cache_stats` ("compiled=N memory=M disk=K").
struct SpirvCacheStats {
  int64_t compiled = 0;
  int64_t memory = 0;
  int64_t disk = 0;
};
SpirvCacheStats GetSpirvCacheStats();

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_SPIRV_CACHE_H_
