// SPDX-License-Identifier: Apache-2.0
#include "device_util.h"

#include <random>
#include <utility>

namespace backplane {
namespace conformance {

DataSpace::DataSpace(DLDevice dev, size_t size, size_t alignment) : dev_(dev), size_(size) {
  DLDataType u8{kDLUInt, 8, 1};
  const bp_status_t st = bp_device_alloc_data_space(dev, size, alignment, u8, &handle_);
  if (st != BP_OK) {
    Fail("alloc_data_space(" + DeviceString(dev) + ", " + std::to_string(size) +
         " bytes, alignment " + std::to_string(alignment) + ") failed (" + TakeError(st) + ")");
  }
  live_ = true;
}

DataSpace::~DataSpace() {
  if (live_ && bp_device_free_data_space(dev_, handle_) != BP_OK) bp_error_clear();
}

DataSpace::DataSpace(DataSpace&& o) noexcept
    : dev_(o.dev_),
      handle_(std::exchange(o.handle_, nullptr)),
      size_(o.size_),
      live_(std::exchange(o.live_, false)) {}

DataSpace& DataSpace::operator=(DataSpace&& o) noexcept {
  if (this != &o) {
    if (live_ && bp_device_free_data_space(dev_, handle_) != BP_OK) bp_error_clear();
    dev_ = o.dev_;
    handle_ = std::exchange(o.handle_, nullptr);
    size_ = o.size_;
    live_ = std::exchange(o.live_, false);
  }
  return *this;
}

void DataSpace::Free() {
  if (!live_) return;
  live_ = false;
  CheckCall(bp_device_free_data_space(dev_, handle_), "free_data_space(" + DeviceString(dev_) +
                                                          ", a " + std::to_string(size_) +
                                                          "-byte data space)");
}

StreamHandle::StreamHandle(DLDevice dev) : dev_(dev) {
  CheckCall(bp_device_stream_create(dev, &stream_), "create_stream(" + DeviceString(dev) + ")");
}

StreamHandle::~StreamHandle() {
  if (stream_ != nullptr) {
    if (bp_device_stream_sync(dev_, stream_) != BP_OK) bp_error_clear();
    if (bp_device_stream_free(dev_, stream_) != BP_OK) bp_error_clear();
  }
}

bp_status_t RawCopy(const Place& from, const Place& to, size_t n, bp_stream_t stream) {
  int64_t from_shape = static_cast<int64_t>(n);
  int64_t to_shape = static_cast<int64_t>(n);
  DLTensor a{};
  a.data = from.data;
  a.device = from.dev;
  a.ndim = 1;
  a.dtype = DLDataType{kDLUInt, 8, 1};
  a.shape = &from_shape;
  a.byte_offset = from.offset;
  DLTensor b = a;
  b.data = to.data;
  b.device = to.dev;
  b.shape = &to_shape;
  b.byte_offset = to.offset;
  return bp_device_copy_data_from_to(&a, &b, stream);
}

void Copy(const Place& from, const Place& to, size_t n, bp_stream_t stream,
          const std::string& what) {
  const bp_status_t st = RawCopy(from, to, n, stream);
  if (st != BP_OK) Fail(what + ": copy_data_from_to failed (" + TakeError(st) + ")");
}

void Sync(DLDevice dev, bp_stream_t stream, const std::string& what) {
  const bp_status_t st = bp_device_stream_sync(dev, stream);
  if (st != BP_OK) {
    Fail(what + ": stream_sync(" + DeviceString(dev) + ", " +
         (stream == nullptr ? std::string("null stream")
                            : "stream " + Hex(reinterpret_cast<uintptr_t>(stream), 1)) +
         ") failed (" + TakeError(st) + ")");
  }
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t r = rng();
    for (size_t k = i; k < n && k < i + 8; ++k, r >>= 8) out[k] = static_cast<uint8_t>(r);
  }
  return out;
}

std::vector<uint8_t> DifferentBytes(const std::vector<uint8_t>& avoid, uint64_t seed) {
  std::vector<uint8_t> out = RandomBytes(avoid.size(), seed);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == avoid[i]) out[i] = static_cast<uint8_t>(~avoid[i]);
  }
  return out;
}

void ExpectBytes(const uint8_t* got, const uint8_t* want, size_t n, const std::string& what,
                 const uint8_t* old, const std::string& old_name) {
  size_t first = n;
  size_t bad = 0;
  size_t like_old = 0;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      if (first == n) first = i;
      ++bad;
      if (old != nullptr && got[i] == old[i]) ++like_old;
    }
  }
  if (bad == 0) return;
  std::string msg = "byte " + std::to_string(first) + " of " + what + " is " + Hex(got[first]) +
                    ", expected " + Hex(want[first]) + " (" + std::to_string(bad) + " of " +
                    std::to_string(n) + " bytes differ";
  if (old != nullptr && like_old == bad) {
    msg += "; every one of them still holds " + old_name;
  } else if (old != nullptr && like_old > 0) {
    msg += "; " + std::to_string(like_old) + " of them hold " + old_name;
  }
  Fail(msg + ")");
}

StreamWaitCheck::StreamWaitCheck(DLDevice dev, bp_stream_t s1, bp_stream_t s2, size_t n,
                                 uint64_t seed)
    : dev_(dev),
      s1_(s1),
      s2_(s2),
      n_(n),
      seed_(seed),
      big_(dev, kLongCopy),
      big2_(dev, kLongCopy),
      b_(dev, n),
      c_(dev, n),
      long_data_(RandomBytes(kLongCopy, ++seed_)) {}

void StreamWaitCheck::Round(int round, const std::function<void()>& before,
                            const std::function<void()>& wait, const std::string& broken) {
  const std::vector<uint8_t> old_b = RandomBytes(n_, ++seed_);
  const std::vector<uint8_t> new_b = DifferentBytes(old_b, ++seed_);
  Copy(HostAt(const_cast<uint8_t*>(old_b.data())), At(b_), n_, nullptr, "setting up data space B");
  Sync(dev_, nullptr, "setting up data space B");
  if (before) before();
  Copy(HostAt(long_data_.data()), At(big_), kLongCopy, s1_, "a long copy on stream 1");
  Copy(At(big_), At(big2_), kLongCopy, s1_, "a long device copy on stream 1");
  Copy(HostAt(const_cast<uint8_t*>(new_b.data())), At(b_), n_, s1_, "writing B on stream 1");
  wait();
  Copy(At(b_), At(c_), n_, s2_, "copying B to C on stream 2");
  std::vector<uint8_t> got = DifferentBytes(new_b, ++seed_);
  Copy(At(c_), HostAt(got.data()), n_, s2_, "reading C on stream 2");
  Sync(dev_, s2_, "stream 2");
  try {
    ExpectBytes(got.data(), new_b.data(), n_, "data space C (copied from B on stream 2)",
                old_b.data(), "B's contents before stream 1 wrote it");
  } catch (const TestFailure& e) {
    Fail(std::string("round ") + std::to_string(round + 1) + ": " + e.what() + ": " + broken);
  }
}

std::vector<std::string> SetUpKinds(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  const std::string type = DeviceTypeName(ctx.dev.device_type);
  std::vector<std::string> kinds = ctx.info.CodegenKinds(type);
  if (kinds.empty())
    Skip("the plugin has no code generator for a target kind of device type " + type);
  return kinds;
}

Target TargetFor(const Context& ctx, const std::string& kind) {
  try {
    return Target::FromDevice(Device(ctx.dev), kind);
  } catch (const Error& e) {
    Fail("Target::FromDevice(" + DeviceString(ctx.dev) + ", \"" + kind + "\") failed: " + e.what());
  }
}

}  // namespace conformance
}  // namespace backplane
