// SPDX-License-Identifier: Apache-2.0
// Broken on purpose (BP-PLUGIN-8): create_stream hands a freed stream's handle out again, as a
// vendor API may hand out a freed queue's address, while each thread keeps its active stream as
// a bare handle (the vulkan plugin's bug). A thread whose active stream
// another thread freed then launches onto that thread's new stream. The kit fails
// codegen.active_stream_freed.
#include <cstdint>
#include <vector>

#include "sim_codegen.h"

namespace {

struct Kind {
  static constexpr const char* kKind = "brokenstreamreuse";
};

class BrokenStreamReuse final : public backplane::sim::SimDeviceAPI {
 public:
  BrokenStreamReuse() : SimDeviceAPI("brokenstreamreuse") {}

  bp_stream_t CreateStream(DLDevice dev) override {
    Check(dev);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!freed_.empty()) {  // the bug's first half: the freed handle comes back
        const uint64_t handle = freed_.back();
        freed_.pop_back();
        streams_[handle] = std::make_shared<backplane::sim::Stream>(delay_us_);
        return reinterpret_cast<bp_stream_t>(static_cast<uintptr_t>(handle));
      }
    }
    return SimDeviceAPI::CreateStream(dev);
  }

  // The bug's second half is the simulation's own: other threads' active streams are bare
  // handles that freeing does not touch.
  void FreeStream(DLDevice dev, bp_stream_t stream) override {
    SimDeviceAPI::FreeStream(dev, stream);
    std::lock_guard<std::mutex> lock(mu_);
    freed_.push_back(reinterpret_cast<uintptr_t>(stream));
  }

 private:
  std::vector<uint64_t> freed_;
};

}  // namespace

BACKPLANE_PLUGIN_ENTRY("brokenstreamreuse", "1.0.0") {
  static BrokenStreamReuse api;
  api.Register();
  backplane::sim::RegisterSimCodegen<Kind>(&api, backplane::sim::CodegenOptions{});
}
