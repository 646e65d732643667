// SPDX-License-Identifier: Apache-2.0
// simaccel's device memory: each device has its own, and the host reaches it only through
// opaque handles, as with a discrete accelerator. A handle is a tagged 64-bit number, never a
// host address (its top byte makes it a non-canonical address, so code that dereferences one
// faults at once instead of reading something plausible), and every use is checked: an
// unknown, freed or foreign handle is BP_ERR_INVALID_ARGUMENT, never a crash.
#ifndef SIMACCEL_MEMORY_H_
#define SIMACCEL_MEMORY_H_

#include <backplane/sdk/handle_table.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace simaccel {

// The bytes behind one handle. Work queued on a stream holds a shared_ptr, so freeing a data
// space while a copy or a kernel still uses it cannot make that work touch freed memory.
struct Allocation {
  explicit Allocation(size_t n);
  std::unique_ptr<uint8_t[]> bytes;
  size_t size;
};

class DeviceMemory {
 public:
  // The memory of simaccel:<device_id>, `capacity` bytes.
  DeviceMemory(int32_t device_id, uint64_t capacity);

  // A new handle for `nbytes` (0 gives a valid handle too) on `dev` (this memory's device).
  // The bytes start as garbage, as fresh device memory does. BP_ERR_OUT_OF_MEMORY past the
  // capacity.
  void* Alloc(DLDevice dev, size_t nbytes);
  // Frees a handle. BP_ERR_INVALID_ARGUMENT when it is not live on this device.
  void Free(DLDevice dev, void* handle);
  // The allocation behind a live handle, checked to hold bytes [offset, offset + nbytes);
  // otherwise BP_ERR_INVALID_ARGUMENT naming `what` ("copy source", "kernel argument").
  std::shared_ptr<Allocation> Resolve(DLDevice dev, const void* handle, uint64_t offset,
                                      size_t nbytes, const char* what) const;

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  int64_t live() const { return static_cast<int64_t>(handles_.size()); }

  // True when `p` has the shape of a simaccel data space handle (of any device).
  static bool IsHandle(const void* p);

 private:
  std::string Name() const;

  const int32_t device_id_;
  const uint64_t capacity_;
  mutable std::mutex mu_;
  uint64_t next_serial_ = 1;
  uint64_t used_ = 0;
  // The live handles, each with its bytes (the SDK's table checks every handle passed in).
  backplane::sdk::HandleTable<std::shared_ptr<Allocation>> handles_{"simaccel"};
};

}  // namespace simaccel

#endif  // SIMACCEL_MEMORY_H_
