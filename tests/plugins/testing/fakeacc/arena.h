// SPDX-License-Identifier: Apache-2.0
// The fake accelerator's memory: an arena per device whose data spaces are named by opaque
// handles. A handle is a tagged 64-bit id, never a host address (its top byte makes it a
// non-canonical address, so dereferencing one faults at once), and it is checked on every
// use: an unknown or freed handle is BP_ERR_INVALID_ARGUMENT, never a crash.
#ifndef BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_ARENA_H_
#define BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace backplane {
namespace fakeacc {

// The bytes behind one handle. Queued copies keep it alive through a shared_ptr, so a data
// space freed while a copy is pending does not leave the copy writing into freed memory.
struct Buffer {
  explicit Buffer(size_t n) : bytes(new uint8_t[n == 0 ? 1 : n]), size(n) {}
  std::unique_ptr<uint8_t[]> bytes;
  size_t size;
};

class Arena {
 public:
  Arena(int32_t device_id, uint64_t capacity) : device_id_(device_id), capacity_(capacity) {}

  // A new handle for `nbytes` (0 is valid). BP_ERR_OUT_OF_MEMORY past the capacity.
  void* Alloc(size_t nbytes);
  // Frees a handle; BP_ERR_INVALID_ARGUMENT when it is not live on this device.
  void Free(void* handle);
  // The buffer of a live handle with `offset + nbytes` in range, or BP_ERR_INVALID_ARGUMENT
  // naming `what` (e.g. "copy source").
  std::shared_ptr<Buffer> Lookup(const void* handle, uint64_t offset, size_t nbytes,
                                 const char* what) const;

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  size_t live() const;

  // True when `p` looks like a fakeacc data space handle (any device).
  static bool IsHandle(const void* p);

 private:
  std::string Name() const;

  const int32_t device_id_;
  const uint64_t capacity_;
  mutable std::mutex mu_;
  uint64_t next_serial_ = 1;
  uint64_t used_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Buffer>> buffers_;
};

}  // namespace fakeacc
}  // namespace backplane

#endif  // BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_ARENA_H_
