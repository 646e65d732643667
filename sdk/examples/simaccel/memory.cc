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

void* DeviceMemory::Alloc(size_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  BACKPLANE_REQUIRE(nbytes <= capacity_ - used_, BP_ERR_OUT_OF_MEMORY,
                    "cannot allocate " + std::to_string(nbytes) + " bytes on " + Name() + ": " +
                        std::to_string(capacity_ - used_) + " of its " + std::to_string(capacity_) +
                        " bytes of device memory are free; free tensors or allocate less");
  auto allocation = std::make_shared<Allocation>(nbytes);  // may throw std::bad_alloc
  const uint64_t id = kHandleTag | (static_cast<uint64_t>(device_id_ & 0xFF) << 48) |
                      (next_serial_++ & kSerialMask);
  allocations_.emplace(id, std::move(allocation));
  used_ += nbytes;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(id));
}

void DeviceMemory::Free(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(handle));
  BACKPLANE_REQUIRE(it != allocations_.end(), BP_ERR_INVALID_ARGUMENT,
                    backplane::sdk::PointerString(handle) + " is not a live data space of " +
                        Name() +
                        " (freed already, or allocated by another device or backend); free "
                        "each handle once, on the device that allocated it");
  used_ -= it->second->size;
  allocations_.erase(it);
}

std::shared_ptr<Allocation> DeviceMemory::Resolve(const void* handle, uint64_t offset,
                                                  size_t nbytes, const char* what) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(handle));
  BACKPLANE_REQUIRE(it != allocations_.end(), BP_ERR_INVALID_ARGUMENT,
                    std::string("the ") + what + " " + backplane::sdk::PointerString(handle) +
                        " is not a live data space of " + Name() +
                        (IsHandle(handle) ? " (freed already, or from another device)"
                                          : " (it looks like a host pointer; simaccel memory "
                                            "is reachable only through its handles)") +
                        "; pass the handle alloc_data_space returned, plus a byte_offset");
  const size_t size = it->second->size;
  BACKPLANE_REQUIRE(offset <= size && nbytes <= size - offset, BP_ERR_INVALID_ARGUMENT,
                    std::string("the ") + what + " covers bytes [" + std::to_string(offset) + ", " +
                        std::to_string(offset + nbytes) + ") of data space " +
                        backplane::sdk::PointerString(handle) + " on " + Name() + ", which holds " +
                        std::to_string(size) +
                        " bytes; keep byte_offset plus the size within the allocation");
  return it->second;
}

uint64_t DeviceMemory::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

int64_t DeviceMemory::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(allocations_.size());
}

}  // namespace simaccel
