// SPDX-License-Identifier: Apache-2.0
// The CPU workspace pool: fast, thread-safe scratch memory.
//
// Requests are rounded up to a power-of-two size class (64 B .. 16 MiB). Each thread keeps
// a small free list per class up to 256 KiB, so an alloc/free pair on the same thread
// takes no lock; lists that grow past their cap spill half to a shared pool (one lock per
// class), and empty lists refill from it. Larger classes live in the shared pool only;
// requests past 16 MiB go to the system allocator directly. A thread's cached blocks go
// back to the shared pool when the thread exits, and the shared pool frees everything when
// the plugin is unloaded, so nothing leaks.
//
// Every block carries a 64-byte header in front of it (class and a live/free tag), which
// makes Free O(1) and lets it reject pointers it did not hand out and double frees.
#ifndef BACKPLANE_PLUGINS_CPU_WORKSPACE_POOL_H_
#define BACKPLANE_PLUGINS_CPU_WORKSPACE_POOL_H_

#include <cstddef>
#include <cstdint>

namespace backplane {
namespace cpu {

class WorkspacePool {
 public:
  // Workspace pointers are aligned to this.
  static constexpr size_t kAlignment = 64;

  // Allocates `nbytes` (0 is valid). Throws BP_ERR_OUT_OF_MEMORY with a message when the
  // system cannot provide the memory.
  static void* Alloc(size_t nbytes);

  // Returns a block from Alloc; any thread may free it. Null is ignored. A pointer Alloc
  // did not return, or one freed already, is BP_ERR_INVALID_ARGUMENT (best effort: the
  // header in front of it is read).
  static void Free(void* ptr);

  // Bytes the pool holds from the system right now (blocks in use and cached).
  static uint64_t ReservedBytes();
};

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_WORKSPACE_POOL_H_
