// SPDX-License-Identifier: Apache-2.0
#include "memory.h"

#include <backplane/sdk/plugin.hpp>
#include <cstring>

namespace simaccel {

namespace {

// Handle layout: tag (8 bits) | device id (8 bits) | serial number (48 bits).
constexpr uint64_t kHandleTag = 0xACull << 56;
constexpr uint64_t kTagMask = 0xFFull << 56;
constexpr uint64_t kSerialMask = (1ull << 48) - 1;

// What fresh device memory holds: a kernel that reads before writing sees this, not zeros.
constexpr uint8_t kGarbage = 0xCD;

}  // namespace

Allocation::Allocation(size_t n) : bytes(new uint8_t[n == 0 ? 1 : n]), size(n) {
  std::memset(bytes.get(), kGarbage, n);
}

DeviceMemory::DeviceMemory(int32_t device_id, uint64_t capacity)
    : device_id_(device_id), capacity_(capacity) {}

bool DeviceMemory::IsHandle(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & kTagMask) == kHandleTag;
}

std::string DeviceMemory::Name() const { return "simaccel:" + std::to_string(device_id_); }

void* DeviceMemory::Alloc(DLDevice dev, size_t nbytes) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    BACKPLANE_REQUIRE(nbytes <= capacity_ - used_, BP_ERR_OUT_OF_MEMORY,
                      "cannot allocate " + std::to_string(nbytes) + " bytes on " + Name() + ": " +
                          std::to_string(capacity_ - used_) + " of its " +
                          std::to_string(capacity_) +
                          " bytes of device memory are free; free tensors or allocate less");
    used_ += nbytes;
    id = kHandleTag | (static_cast<uint64_t>(device_id_ & 0xFF) << 48) |
         (next_serial_++ & kSerialMask);
  }
  void* handle = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
  try {
    handles_.Add(dev, handle, nbytes, /*workspace=*/false, std::make_shared<Allocation>(nbytes));
  } catch (...) {  // std::bad_alloc: give the bytes back
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= nbytes;
    throw;
  }
  return handle;
}

void DeviceMemory::Free(DLDevice dev, void* handle) {
  const size_t size = handles_.Remove(dev, handle, /*workspace=*/false).size;
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= size;
}

std::shared_ptr<Allocation> DeviceMemory::Resolve(DLDevice dev, const void* handle, uint64_t offset,
                                                  size_t nbytes, const char* what) const {
  BACKPLANE_REQUIRE(IsHandle(handle), BP_ERR_INVALID_ARGUMENT,
                    std::string("the ") + what + " " + backplane::sdk::PointerString(handle) +
                        " looks like a host pointer; simaccel memory is reachable only through "
                        "its handles: pass the handle alloc_data_space returned, plus a "
                        "byte_offset");
  return handles_.Resolve(dev, handle, offset, nbytes, std::string("the ") + what).info;
}

uint64_t DeviceMemory::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

}  // namespace simaccel
