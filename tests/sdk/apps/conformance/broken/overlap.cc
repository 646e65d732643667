// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (AllocDataSpace): each data space starts half way into the one before, so
// live allocations overlap. The kit fails device.memory.distinct.
#include "sim.h"

namespace {

class BrokenOverlap final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenOverlap() : SimDeviceAPI("brokenoverlap") {}

 protected:
  backplane::sim::Region NewRegion(size_t n) override {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_ || next_ + n > pool_->size()) {
      pool_ = std::make_shared<std::vector<uint8_t>>(std::max<size_t>(n, size_t{64} << 20));
      next_ = 0;
    }
    backplane::sim::Region r{pool_, next_, n};
    next_ += n / 2 + 1;  // the bug: the next allocation starts inside this one
    return r;
  }

 private:
  std::mutex pool_mu_;
  std::shared_ptr<std::vector<uint8_t>> pool_;
  size_t next_ = 0;
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenoverlap", "1.0.0") {
  static BrokenOverlap api;
  api.Register();
}
