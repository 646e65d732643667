// SPDX-License-Identifier: Apache-2.0
// The OpenCL workspace pool: freed workspace buffers of one device, kept for reuse.
//
// clCreateBuffer + clReleaseMemObject per scratch request is a driver round trip each time;
// the pool keeps freed workspace buffers in size classes and hands them out again. Classes:
// requests up to 4 KiB take 4 KiB; larger ones are rounded up to a quarter of the power of
// two below them (4 steps per doubling, so at most 25% is unused). Classes above
// kMaxClassBytes are not pooled. The pool keeps at most kMaxCachedBytes of free buffers; a
// free beyond that releases the buffer. The pool only stores Buffer objects: liveness
// (which handles are in use) stays with OpenCLDeviceAPI, which calls the pool under its own
// lock, so that a free or an alloc takes one lock in all (the pool has none of its own).
#ifndef BACKPLANE_PLUGINS_OPENCL_WORKSPACE_POOL_H_
#define BACKPLANE_PLUGINS_OPENCL_WORKSPACE_POOL_H_

#include <cstddef>
#include <unordered_map>
#include <vector>

namespace backplane {
namespace opencl {

struct Buffer;

class WorkspacePool {
 public:
  // The smallest class: every request up to this takes one buffer of this size.
  static constexpr size_t kMinClassBytes = size_t{4} << 10;
  // The largest pooled class; larger workspaces are created and released each time.
  static constexpr size_t kMaxClassBytes = size_t{16} << 20;
  // At most this many bytes of freed buffers are kept per device.
  static constexpr size_t kMaxCachedBytes = size_t{64} << 20;

  // The class of a request of `nbytes`, or 0 when it is too large to be pooled.
  static size_t ClassBytes(size_t nbytes);

  // A cached buffer of class `class_bytes`, taken out of the pool, or null when there is
  // none.
  Buffer* Take(size_t class_bytes);

  // Keeps `b` (a workspace buffer whose capacity is a class) for reuse. False when that
  // would pass kMaxCachedBytes: the caller still owns `b` and releases it.
  bool Keep(Buffer* b);

  // Empties the pool; the caller releases what it returns.
  std::vector<Buffer*> TakeAll();

  // Bytes of freed buffers held right now.
  size_t CachedBytes() const { return cached_bytes_; }

 private:
  size_t cached_bytes_ = 0;
  std::unordered_map<size_t, std::vector<Buffer*>> free_;  // class bytes -> free buffers
};

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_WORKSPACE_POOL_H_
