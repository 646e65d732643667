// SPDX-License-Identifier: Apache-2.0
#include "workspace_pool.h"

#include "device_api.h"

namespace backplane {
namespace opencl {

size_t WorkspacePool::ClassBytes(size_t nbytes) {
  if (nbytes <= kMinClassBytes) return kMinClassBytes;
  if (nbytes > kMaxClassBytes) return 0;
  // The power of two below nbytes, in quarters: 4 KiB < nbytes <= 16 MiB, so step >= 1 KiB.
  const int top = 63 - __builtin_clzll(static_cast<unsigned long long>(nbytes - 1));
  const size_t step = (size_t{1} << top) / 4;
  return (nbytes + step - 1) / step * step;
}

Buffer* WorkspacePool::Take(size_t class_bytes) {
  auto it = free_.find(class_bytes);
  if (it == free_.end() || it->second.empty()) return nullptr;
  Buffer* b = it->second.back();
  it->second.pop_back();
  cached_bytes_ -= class_bytes;
  return b;
}

bool WorkspacePool::Keep(Buffer* b) {
  if (cached_bytes_ + b->capacity > kMaxCachedBytes) return false;
  free_[b->capacity].push_back(b);
  cached_bytes_ += b->capacity;
  return true;
}

std::vector<Buffer*> WorkspacePool::TakeAll() {
  std::vector<Buffer*> all;
  for (auto& [bytes, list] : free_) all.insert(all.end(), list.begin(), list.end());
  free_.clear();
  cached_bytes_ = 0;
  return all;
}

}  // namespace opencl
}  // namespace backplane
