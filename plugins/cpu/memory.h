// SPDX-License-Identifier: Apache-2.0
// Host memory for the CPU device: aligned data space from the system allocator.
#ifndef BACKPLANE_PLUGINS_CPU_MEMORY_H_
#define BACKPLANE_PLUGINS_CPU_MEMORY_H_

#include <cstddef>

namespace backplane {
namespace cpu {

// Data space is at least this aligned, whatever the caller asks (AVX-512 and cache lines).
constexpr size_t kMinDataAlignment = 64;

// Allocates `nbytes` (0 is valid and gives a unique, freeable pointer) aligned to
// max(alignment, kMinDataAlignment); `alignment` is a power of two. Throws
// backplane::Error: BP_ERR_OUT_OF_MEMORY when the request exceeds the machine or the
// allocator fails, BP_ERR_INVALID_ARGUMENT for an alignment that is not a power of two.
void* AllocAligned(size_t nbytes, size_t alignment);

// Frees memory from AllocAligned; null is ignored.
void FreeAligned(void* ptr);

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_MEMORY_H_
