// SPDX-License-Identifier: Apache-2.0
#include "memory.h"

#include <backplane/sdk/plugin.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sysinfo.h"

namespace backplane {
namespace cpu {

void* AllocAligned(size_t nbytes, size_t alignment) {
  BACKPLANE_REQUIRE(alignment != 0 && (alignment & (alignment - 1)) == 0, BP_ERR_INVALID_ARGUMENT,
                    "alignment " + std::to_string(alignment) +
                        " is not a power of two; pass 1, 2, 4, ... (64 suits every dtype)");
  if (alignment < kMinDataAlignment) alignment = kMinDataAlignment;
  // Refuse what no machine of this size can give before it reaches the allocator: a
  // sanitizer's allocator aborts on absurd sizes instead of returning null.
  const uint64_t limit = AllocationLimitBytes();
  BACKPLANE_REQUIRE(nbytes <= limit && nbytes <= SIZE_MAX - alignment, BP_ERR_OUT_OF_MEMORY,
                    "cannot allocate " + std::to_string(nbytes) +
                        " bytes of cpu memory: this machine has " + std::to_string(limit) +
                        " bytes of memory and swap; request less or split the tensor");
  // Round up so the size is a multiple of the alignment; a zero-size request still gets
  // one aligned block, so every call yields a distinct pointer.
  const size_t rounded = nbytes == 0 ? alignment : (nbytes + alignment - 1) & ~(alignment - 1);
  void* ptr = nullptr;
  const int rc = posix_memalign(&ptr, alignment, rounded);
  BACKPLANE_REQUIRE(rc == 0 && ptr != nullptr, BP_ERR_OUT_OF_MEMORY,
                    "the system allocator could not provide " + std::to_string(nbytes) +
                        " bytes of cpu memory aligned to " + std::to_string(alignment) + " (" +
                        (rc == ENOMEM ? "out of memory" : "error " + std::to_string(rc)) +
                        "); free memory or request less");
  return ptr;
}

void FreeAligned(void* ptr) { std::free(ptr); }

}  // namespace cpu
}  // namespace backplane
