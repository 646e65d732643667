// SPDX-License-Identifier: Apache-2.0
// A small simulated accelerator that the broken plugins share: one device whose memory is
// named by opaque handles and lives in host memory the host cannot address through them,
// streams run by worker threads, and (sim_codegen.h) a code generator that runs kernels in
// the IR interpreter. It keeps the contract; each broken plugin derives from SimDeviceAPI and
// breaks one clause on purpose, so the conformance kit's tests can show they catch it.
#ifndef BACKPLANE_TESTS_CONFORMANCE_BROKEN_SIM_H_
#define BACKPLANE_TESTS_CONFORMANCE_BROKEN_SIM_H_

#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace backplane {
namespace sim {

// A data space: `size` bytes at `base` of a shared storage (several regions may share one, as
// the overlapping allocator does on purpose).
struct Region {
  std::shared_ptr<std::vector<uint8_t>> storage;
  size_t base = 0;
  size_t size = 0;
  uint8_t* data() const { return storage->data() + base; }
};

// A queue of work run in order by one worker thread; each item first sleeps `delay_us`.
class Stream {
 public:
  explicit Stream(int64_t delay_us) : delay_us_(delay_us), worker_([this] { Run(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  uint64_t Submit(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
    cv_.notify_all();
    return ++submitted_;
  }
  uint64_t Submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  // Returns once items 1..n ran; a failure of queued work is thrown here (once).
  void WaitFor(uint64_t n, bool report = true) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return completed_ >= n; });
    if (report && !error_.empty()) {
      const std::string e = std::move(error_);
      error_.clear();
      throw Error(BP_ERR_DEVICE, "queued work failed: " + e);
    }
  }
  void Sync() { WaitFor(Submitted()); }

 private:
  void Run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
      std::string failed;
      try {
        work();
      } catch (const std::exception& e) {
        failed = e.what();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failed.empty() && error_.empty()) error_ = failed;
        ++completed_;
      }
      done_.notify_all();
    }
  }

  const int64_t delay_us_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::deque<std::function<void()>> queue_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  std::string error_;
  std::thread worker_;
};

class SimDeviceAPI : public sdk::DeviceAPI {
 public:
  static constexpr uint64_t kCapacity = uint64_t{1} << 30;

  // `delay_us`: every queued item of every stream first sleeps this long.
  SimDeviceAPI(std::string name, int64_t delay_us = 0, Entries entries = Entries{})
      : sdk::DeviceAPI(entries), name_(std::move(name)), delay_us_(delay_us) {}

  // Registers the device type and (unless told not to) device_api.<name>.
  void Register(bool device_api = true) {
    type_ = sdk::RegisterDeviceType(name_);
    if (device_api) sdk::RegisterDeviceAPI(name_, this);
  }
  int32_t type() const { return type_; }
  const std::string& name() const { return name_; }

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override {
    const bool exists = Exists(dev);
    if (kind == BP_ATTR_EXIST) return sdk::IntValue(exists ? 1 : 0);
    if (!exists) return sdk::NoneValue();
    switch (kind) {
      case BP_ATTR_DEVICE_NAME:
        return sdk::StringValue("Backplane conformance sim (" + name_ + ")");
      case BP_ATTR_MAX_THREADS_PER_BLOCK:
        return sdk::IntValue(64);
      case BP_ATTR_TOTAL_GLOBAL_MEMORY:
        return sdk::IntValue(static_cast<int64_t>(kCapacity));
      case BP_ATTR_AVAILABLE_GLOBAL_MEMORY: {
        std::lock_guard<std::mutex> lock(mu_);
        return sdk::IntValue(static_cast<int64_t>(kCapacity - used_));
      }
      default:
        return sdk::NoneValue();
    }
  }

  void SetDevice(DLDevice dev) override { Check(dev); }

  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t, DLDataType) override {
    Check(dev);
    BACKPLANE_REQUIRE(nbytes <= kCapacity, BP_ERR_OUT_OF_MEMORY,
                      "cannot allocate " + std::to_string(nbytes) + " bytes on " + name_ +
                          ", which holds " + std::to_string(kCapacity));
    Region r = NewRegion(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    BACKPLANE_REQUIRE(used_ + nbytes <= kCapacity, BP_ERR_OUT_OF_MEMORY, name_ + " is full");
    const uint64_t handle = NextHandle();
    regions_[handle] = r;
    used_ += nbytes;
    return reinterpret_cast<void*>(static_cast<uintptr_t>(handle));
  }

  void FreeDataSpace(DLDevice dev, void* ptr) override {
    Check(dev);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
    BACKPLANE_REQUIRE(it != regions_.end(), BP_ERR_INVALID_ARGUMENT,
                      sdk::PointerString(ptr) + " is not a live data space of " + name_);
    used_ -= it->second.size;
    regions_.erase(it);
  }

  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override {
    const size_t n = sdk::TensorBytes(from);
    const bool from_host = from->device.device_type == kDLCPU;
    const bool to_host = to->device.device_type == kDLCPU;
    std::shared_ptr<Stream> s = GetStream(from_host ? to->device : from->device, stream);
    if (from_host) {
      Region dst = Resolve(to->data, DeviceOffset(to), n);
      const uint8_t* src = static_cast<const uint8_t*>(from->data) + from->byte_offset;
      if (!snapshot_host_) {  // a broken plugin reads the host buffer later, in the worker
        s->Submit([dst, src, n] { std::memcpy(dst.data(), src, n); });
        return;
      }
      auto copy = std::make_shared<std::vector<uint8_t>>(src, src + n);
      s->Submit([dst, copy] { std::memcpy(dst.data(), copy->data(), copy->size()); });
      return;
    }
    Region src = Resolve(from->data, DeviceOffset(from), n);
    if (to_host) {
      uint8_t* dst = static_cast<uint8_t*>(to->data) + to->byte_offset;
      s->Submit([this, src, dst, n] { DeviceToHost(dst, src.data(), n); });
      return;
    }
    Region dst = Resolve(to->data, DeviceOffset(to), n);
    s->Submit([src, dst, n] { std::memmove(dst.data(), src.data(), n); });
  }

  bp_stream_t CreateStream(DLDevice dev) override {
    Check(dev);
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t handle = NextHandle();
    streams_[handle] = std::make_shared<Stream>(delay_us_);
    return reinterpret_cast<bp_stream_t>(static_cast<uintptr_t>(handle));
  }

  void FreeStream(DLDevice dev, bp_stream_t stream) override {
    std::shared_ptr<Stream> s = GetStream(dev, stream);
    BACKPLANE_REQUIRE(stream != nullptr, BP_ERR_INVALID_ARGUMENT,
                      "the null stream cannot be freed");
    s->WaitFor(s->Submitted(), false);
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(reinterpret_cast<uintptr_t>(stream));
  }

  void SetStream(DLDevice dev, bp_stream_t stream) override {
    GetStream(dev, stream);
    Active() = stream;
  }

  void StreamSync(DLDevice dev, bp_stream_t stream) override { GetStream(dev, stream)->Sync(); }

  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override {
    std::shared_ptr<Stream> from = GetStream(dev, src);
    std::shared_ptr<Stream> to = GetStream(dev, dst);
    if (from == to) return;
    const uint64_t n = from->Submitted();
    to->Submit([from, n] { from->WaitFor(n, false); });
  }

  // The data space behind `handle` with [offset, offset + n) in range, or an error.
  Region Resolve(const void* handle, uint64_t offset, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(handle));
    BACKPLANE_REQUIRE(it != regions_.end(), BP_ERR_INVALID_ARGUMENT,
                      sdk::PointerString(handle) + " is not a live data space of " + name_);
    BACKPLANE_REQUIRE(offset <= it->second.size && n <= it->second.size - offset,
                      BP_ERR_INVALID_ARGUMENT,
                      std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                          " do not fit a data space of " + std::to_string(it->second.size));
    Region r = it->second;
    r.base += offset;
    r.size = n;
    return r;
  }

  // The stream `handle` of `dev` (null: the device's null stream).
  std::shared_ptr<Stream> GetStream(DLDevice dev, bp_stream_t handle) {
    Check(dev);
    std::lock_guard<std::mutex> lock(mu_);
    if (handle == nullptr) {
      if (!null_stream_) null_stream_ = std::make_shared<Stream>(delay_us_);
      return null_stream_;
    }
    auto it = streams_.find(reinterpret_cast<uintptr_t>(handle));
    BACKPLANE_REQUIRE(it != streams_.end(), BP_ERR_INVALID_ARGUMENT,
                      sdk::PointerString(handle) + " is not a live stream of " + name_);
    return it->second;
  }

  // Queues kernel work on the calling thread's active stream (set_stream's contract, c_api.h).
  void Launch(DLDevice dev, std::function<void()> work) {
    GetStream(dev, Active())->Submit(std::move(work));
  }

 protected:
  // Hooks a broken plugin overrides.
  virtual Region NewRegion(size_t n) {
    return Region{std::make_shared<std::vector<uint8_t>>(n == 0 ? 1 : n), 0, n};
  }
  virtual uint64_t DeviceOffset(const DLTensor* t) { return t->byte_offset; }
  virtual void DeviceToHost(uint8_t* dst, const uint8_t* src, size_t n) {
    std::memcpy(dst, src, n);
  }
  virtual uint64_t NextHandle() { return (uint64_t{0x5C} << 56) | next_serial_++; }

  bool Exists(DLDevice dev) const { return dev.device_type == type_ && dev.device_id == 0; }
  void Check(DLDevice dev) const {
    BACKPLANE_REQUIRE(Exists(dev), BP_ERR_NOT_FOUND,
                      "device " + sdk::DeviceString(dev) + " does not exist; " + name_ +
                          " has one device, " + name_ + ":0");
  }
  static bp_stream_t& Active() {
    thread_local bp_stream_t active = nullptr;
    return active;
  }

  const std::string name_;
  const int64_t delay_us_;
  int32_t type_ = -1;
  bool snapshot_host_ = true;
  std::mutex mu_;
  uint64_t next_serial_ = 1;
  uint64_t used_ = 0;
  std::map<uint64_t, Region> regions_;
  std::map<uint64_t, std::shared_ptr<Stream>> streams_;
  std::shared_ptr<Stream> null_stream_;
};

}  // namespace sim
}  // namespace backplane

#endif  // BACKPLANE_TESTS_CONFORMANCE_BROKEN_SIM_H_
