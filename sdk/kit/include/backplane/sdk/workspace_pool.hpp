// SPDX-License-Identifier: Apache-2.0
// The workspace pool of a device plugin: freed workspaces of one device, kept in size classes
// and handed out again by AllocWorkspace, so a scratch request is not a driver round trip.
//
//   sdk::WorkspacePool<Buffer*, Use> pool;                 // one per device, under your lock
//   const size_t c = pool.ClassBytes(nbytes);              // 0: too large to pool
//   if (c != 0 && pool.Take(c, usable_now, &b)) ...        // else create one of c bytes
//   if (!pool.Keep(c, b, use)) release b;                  // at FreeWorkspace
//
// Classes: a request up to `min_class` bytes takes `min_class`; a larger one is rounded up to a
// quarter of the power of two below it (4 steps per doubling, so at most 25% is unused).
// Requests above `max_class` are not pooled. At most `max_cached` bytes of freed buffers are
// kept; a free beyond that is the caller's to release.
//
// Work queued before a free may still use the buffer. Each kept buffer carries a token of the
// plugin's (`Ready`: a recorded event, a stream and timeline value, ...) and Take hands out only
// a buffer whose token the caller's predicate accepts: the work is done, or it runs before
// anything the taker queues (the same in-order stream). A backend whose driver keeps freed
// memory alive for queued work (OpenCL's reference counts) uses no token.
//
// Not thread-safe: the plugin calls it under the lock that guards its handles, so an alloc or
// a free takes one lock in all.
#ifndef BACKPLANE_SDK_WORKSPACE_POOL_HPP_
#define BACKPLANE_SDK_WORKSPACE_POOL_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace backplane {
namespace sdk {

// A Ready token for a pool that needs none.
struct NoToken {};

template <typename Buffer, typename Ready = NoToken>
class WorkspacePool {
 public:
  struct Limits {
    size_t min_class = size_t{4} << 10;    // every request up to this takes one of this size
    size_t max_class = size_t{16} << 20;   // larger requests are not pooled
    size_t max_cached = size_t{64} << 20;  // bytes of freed buffers kept per device
  };
  struct Entry {
    Buffer buffer;
    Ready ready;
  };

  WorkspacePool() = default;
  explicit WorkspacePool(Limits limits) : limits_(limits) {}

  const Limits& limits() const { return limits_; }

  // The class of a request of `nbytes`, or 0 when it is too large to be pooled (above
  // max_class, or a class that would pass SIZE_MAX).
  size_t ClassBytes(size_t nbytes) const {
    if (nbytes <= limits_.min_class) return limits_.min_class;
    if (nbytes > limits_.max_class) return 0;
    // The power of two below nbytes, in quarters (at least 1 byte a step).
    const int top = 63 - __builtin_clzll(static_cast<unsigned long long>(nbytes - 1));
    const size_t step = top >= 2 ? (size_t{1} << top) / 4 : 1;
    size_t rounded = 0;
    if (__builtin_add_overflow((nbytes - 1) / step * step, step, &rounded)) return 0;
    return rounded;
  }

  // At most this many tokens are asked per Take from each end of a class's list.
  static constexpr size_t kProbes = 8;

  // Takes a kept buffer of class `class_bytes` whose token `usable(const Ready&)` accepts into
  // *out; false when there is none. It asks the newest kProbes (the same stream may take them
  // at once) and the oldest kProbes (whose work most likely finished), not every kept buffer:
  // a pool of many small buffers must not turn one allocation into thousands of driver
  // queries under the plugin's lock. A buffer not asked about stays for a later Take.
  template <typename Usable>
  bool Take(size_t class_bytes, Usable&& usable, Buffer* out, Ready* ready_out = nullptr) {
    auto it = free_.find(class_bytes);
    if (it == free_.end()) return false;
    std::vector<Entry>& entries = it->second;
    const size_t n = entries.size();
    const size_t newest = n < kProbes ? n : kProbes;
    const size_t oldest = n - newest < kProbes ? n - newest : kProbes;
    for (size_t probe = 0; probe < newest + oldest; ++probe) {
      const size_t i = probe < newest ? n - 1 - probe : probe - newest;
      if (!usable(static_cast<const Ready&>(entries[i].ready))) continue;
      *out = std::move(entries[i].buffer);
      if (ready_out != nullptr) *ready_out = std::move(entries[i].ready);
      entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
      cached_bytes_ -= class_bytes;
      return true;
    }
    return false;
  }
  bool Take(size_t class_bytes, Buffer* out) {
    return Take(
        class_bytes, [](const Ready&) { return true; }, out);
  }

  // Keeps `buffer` (of class `class_bytes`, from ClassBytes) for reuse. False when that would
  // pass max_cached or the class is not pooled: the caller still owns the buffer.
  bool Keep(size_t class_bytes, Buffer buffer, Ready ready = Ready()) {
    if (class_bytes == 0 || class_bytes > limits_.max_class ||
        cached_bytes_ + class_bytes > limits_.max_cached) {
      return false;
    }
    free_[class_bytes].push_back(Entry{std::move(buffer), std::move(ready)});
    cached_bytes_ += class_bytes;
    return true;
  }

  // Calls `fn(Ready&)` for every kept buffer's token (say, when the stream it names is freed).
  template <typename Fn>
  void ForEachReady(Fn&& fn) {
    for (auto& [bytes, entries] : free_) {
      for (Entry& e : entries) fn(e.ready);
    }
  }

  // Empties the pool; the caller releases what it returns.
  std::vector<Entry> TakeAll() {
    std::vector<Entry> all;
    for (auto& [bytes, entries] : free_) {
      for (Entry& e : entries) all.push_back(std::move(e));
    }
    free_.clear();
    cached_bytes_ = 0;
    return all;
  }

  // Bytes of freed buffers kept right now.
  size_t CachedBytes() const { return cached_bytes_; }

 private:
  Limits limits_;
  size_t cached_bytes_ = 0;
  std::map<size_t, std::vector<Entry>> free_;  // class bytes -> kept buffers, oldest first
};

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_WORKSPACE_POOL_HPP_
