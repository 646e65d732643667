// SPDX-License-Identifier: Apache-2.0
#include "arena.h"

#include <backplane/sdk/plugin.hpp>

namespace backplane {
namespace fakeacc {
namespace {

constexpr uint64_t kHandleTag = 0xFAull << 56;
constexpr uint64_t kTagMask = 0xFFull << 56;
constexpr uint64_t kSerialMask = (1ull << 48) - 1;

uint64_t Encode(int32_t device_id, uint64_t serial) {
  return kHandleTag | (static_cast<uint64_t>(device_id & 0xFF) << 48) | (serial & kSerialMask);
}

}  // namespace

bool Arena::IsHandle(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & kTagMask) == kHandleTag;
}

std::string Arena::Name() const { return "fakeacc:" + std::to_string(device_id_); }

void* Arena::Alloc(size_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  BACKPLANE_REQUIRE(nbytes <= capacity_ - used_, BP_ERR_OUT_OF_MEMORY,
                    "cannot allocate " + std::to_string(nbytes) + " bytes on " + Name() + ": " +
                        std::to_string(capacity_ - used_) + " of " + std::to_string(capacity_) +
                        " bytes of device memory are free; free tensors or request less");
  const uint64_t id = Encode(device_id_, next_serial_++);
  buffers_.emplace(id, std::make_shared<Buffer>(nbytes));
  used_ += nbytes;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(id));
}

void Arena::Free(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(reinterpret_cast<uintptr_t>(handle));
  BACKPLANE_REQUIRE(it != buffers_.end(), BP_ERR_INVALID_ARGUMENT,
                    sdk::PointerString(handle) + " is not a live data space of " + Name() +
                        " (freed already, or made by another device or backend); free each "
                        "handle once, on its device");
  used_ -= it->second->size;
  buffers_.erase(it);
}

std::shared_ptr<Buffer> Arena::Lookup(const void* handle, uint64_t offset, size_t nbytes,
                                      const char* what) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(reinterpret_cast<uintptr_t>(handle));
  BACKPLANE_REQUIRE(it != buffers_.end(), BP_ERR_INVALID_ARGUMENT,
                    std::string("the ") + what + " " + sdk::PointerString(handle) +
                        " is not a live data space of " + Name() +
                        (IsHandle(handle) ? " (freed already, or from another device)"
                                          : " (it looks like a host pointer; fakeacc memory "
                                            "is reachable only through its handles)") +
                        "; pass the handle alloc_data_space returned and a byte_offset");
  const size_t size = it->second->size;
  BACKPLANE_REQUIRE(offset <= size && nbytes <= size - offset, BP_ERR_INVALID_ARGUMENT,
                    std::string("the ") + what + " covers bytes [" + std::to_string(offset) + ", " +
                        std::to_string(offset + nbytes) + ") of data space " +
                        sdk::PointerString(handle) + " on " + Name() + ", which holds " +
                        std::to_string(size) +
                        " bytes; keep byte_offset plus the copy size within the allocation");
  return it->second;
}

uint64_t Arena::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

size_t Arena::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffers_.size();
}

}  // namespace fakeacc
}  // namespace backplane
