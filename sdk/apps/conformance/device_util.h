// SPDX-License-Identifier: Apache-2.0
// Helpers the device tests share: data spaces that free themselves, byte copies between the
// host and a device through the core (bp_device_copy_data_from_to, as host applications
// copy), streams, and byte comparisons whose failure says which byte of which copy.
#ifndef BACKPLANE_SDK_CONFORMANCE_DEVICE_UTIL_H_
#define BACKPLANE_SDK_CONFORMANCE_DEVICE_UTIL_H_

#include <backplane/c_api.h>

#include <backplane/backplane.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "conformance.h"

namespace backplane {
namespace conformance {

constexpr DLDevice kHost{kDLCPU, 0};

// A data space of `size` bytes on `dev`, freed when it goes out of scope (a failure to free
// then is ignored; Free() checks it).
class DataSpace {
 public:
  DataSpace() = default;
  // Allocates; fails the test naming the request when the plugin refuses it.
  DataSpace(DLDevice dev, size_t size, size_t alignment = 64);
  ~DataSpace();
  DataSpace(DataSpace&& o) noexcept;
  DataSpace& operator=(DataSpace&& o) noexcept;
  DataSpace(const DataSpace&) = delete;
  DataSpace& operator=(const DataSpace&) = delete;

  void* handle() const { return handle_; }
  size_t size() const { return size_; }
  DLDevice device() const { return dev_; }
  // Frees now, failing the test when the plugin reports an error.
  void Free();

 private:
  DLDevice dev_{kDLCPU, 0};
  void* handle_ = nullptr;
  size_t size_ = 0;
  bool live_ = false;
};

// A stream created on `dev` (null on a single-queue device), freed when it goes out of scope.
class StreamHandle {
 public:
  explicit StreamHandle(DLDevice dev);
  ~StreamHandle();
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  bp_stream_t get() const { return stream_; }

 private:
  DLDevice dev_;
  bp_stream_t stream_ = nullptr;
};

// One side of a byte copy: a device and a pointer (a host address or a data space handle)
// with a byte offset.
struct Place {
  DLDevice dev;
  void* data;
  size_t offset = 0;
};
inline Place HostAt(void* data, size_t offset = 0) { return Place{kHost, data, offset}; }
inline Place At(const DataSpace& d, size_t offset = 0) {
  return Place{d.device(), d.handle(), offset};
}

// Copies `n` bytes (a uint8 tensor of shape [n] on each side, byte_offset as given) through
// bp_device_copy_data_from_to. RawCopy returns the status; Copy fails the test on error,
// naming `what`.
bp_status_t RawCopy(const Place& from, const Place& to, size_t n, bp_stream_t stream);
void Copy(const Place& from, const Place& to, size_t n, bp_stream_t stream,
          const std::string& what);
// bp_device_stream_sync, failing the test on error.
void Sync(DLDevice dev, bp_stream_t stream, const std::string& what);

// Deterministic random bytes: the same seed gives the same bytes.
std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed);
// Bytes that differ from `avoid` everywhere (so a copy that did not happen shows).
std::vector<uint8_t> DifferentBytes(const std::vector<uint8_t>& avoid, uint64_t seed);

// Fails unless got[0..n) == want[0..n): "byte 4096 of <what> is 0x17, expected 0x9c", adding
// how many bytes differ and, when given, which other pattern the bad bytes match.
void ExpectBytes(const uint8_t* got, const uint8_t* want, size_t n, const std::string& what,
                 const uint8_t* old = nullptr, const std::string& old_name = "");

// Bytes of the copies that keep a stream busy.
constexpr size_t kLongCopy = size_t{4} << 20;

// Whether work queued on stream 2 after it was made to wait for stream 1 sees stream 1's
// writes (BP-PLUGIN-8), in rounds over data spaces B and C of `n` bytes and two of kLongCopy
// bytes. A round sets B to old bytes, queues on stream 1 `before` (may be empty), a long copy,
// a long device copy and the write of B's new bytes, runs `wait` (which makes stream 2 wait
// for that work), queues B to C and C to the host on stream 2 and syncs stream 2; it fails
// with "round N: <the bytes that differ>: <broken>" unless the host got B's new bytes.
class StreamWaitCheck {
 public:
  // The random bytes come from seed + 1, seed + 2, ...
  StreamWaitCheck(DLDevice dev, bp_stream_t s1, bp_stream_t s2, size_t n, uint64_t seed);
  void Round(int round, const std::function<void()>& before, const std::function<void()>& wait,
             const std::string& broken);

 private:
  DLDevice dev_;
  bp_stream_t s1_, s2_;
  size_t n_;
  uint64_t seed_;
  DataSpace big_, big2_, b_, c_;
  std::vector<uint8_t> long_data_;
};

// The code generators for the device's type, after loading the plugin and choosing the
// device; skips when there is none.
std::vector<std::string> SetUpKinds(Context& ctx);

// Target::FromDevice(the device under test, kind); fails naming the device and the kind.
Target TargetFor(const Context& ctx, const std::string& kind);

}  // namespace conformance
}  // namespace backplane

#endif  // BACKPLANE_SDK_CONFORMANCE_DEVICE_UTIL_H_
