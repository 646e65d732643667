// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (BP-PLUGIN-9): AllocDataSpace is not thread-safe -- it reads the next
// handle, works a while, then stores it -- so threads allocating at once get the same handle
// and share one data space. One thread at a time, it works. The kit fails
// device.concurrency.threads.
#include "sim.h"

namespace {

class BrokenThreads final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenThreads() : SimDeviceAPI("brokenthreads") {}
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t, DLDataType) override {
    Check(dev);
    const uint64_t serial = racy_serial_;  // the bug: read, wait, write back
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    racy_serial_ = serial + 1;
    const uint64_t handle = (uint64_t{0x5D} << 56) | serial;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(handle);
    if (it == regions_.end()) {
      regions_[handle] = NewRegion(nbytes);
    } else if (it->second.size < nbytes) {
      it->second = NewRegion(nbytes);
    }
    return reinterpret_cast<void*>(static_cast<uintptr_t>(handle));
  }
  void FreeDataSpace(DLDevice dev, void* ptr) override {
    Check(dev);
    std::lock_guard<std::mutex> lock(mu_);
    regions_.erase(reinterpret_cast<uintptr_t>(ptr));  // a shared handle may be gone already
  }

 private:
  volatile uint64_t racy_serial_ = 1;
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenthreads", "1.0.0") {
  static BrokenThreads api;
  api.Register();
}
