// SPDX-License-Identifier: Apache-2.0
// The test variant of simaccel's DeviceAPI, and the pinned host type beside it: what Backplane's
// own tests need of a simulated accelerator beyond what the example offers its readers.
//
// - TestingDeviceAPI is simaccel's DeviceAPI (sdk/apps/examples/simaccel/device_api.h) with
//   hooks: each copy can be made to sleep first on its stream (SetDelayUs), a stream can be
//   parked after its queued work and released (HoldStream, ReleaseStream), so tests prove
//   ordering without timing, and it counts the copies it made with simaccel_host memory. It
//   leaves out simaccel's event entries, so that the core's events are the ones tested on a
//   device with asynchronous streams (simaccel's own are tested where it is built out of tree,
//   by tests/install and conformance.simaccel).
// - HostDeviceAPI is device type simaccel_host: simaccel's "pinned" host memory, as a vendor's
//   page-locked type is (cuda_host). One device, simaccel_host:0, host-addressable; copies
//   between it and cpu memory are memcpy, and copies between it and simaccel go to
//   TestingDeviceAPI, queued on the simaccel stream like any host copy of that device.
#ifndef BACKPLANE_TESTS_SDK_APPS_EXAMPLES_SIMACCEL_PLUGIN_HOOKS_H_
#define BACKPLANE_TESTS_SDK_APPS_EXAMPLES_SIMACCEL_PLUGIN_HOOKS_H_

#include <atomic>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/handle_table.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "device_api.h"  // simaccel's

namespace backplane {
namespace simaccel_testing {

class TestingDeviceAPI final : public ::simaccel::SimAccelDeviceAPI {
 public:
  // The one instance, never destroyed (as simaccel's).
  static TestingDeviceAPI* Global();

  // simaccel's copy, after the hooks: a side on simaccel_host is checked against its live
  // memory, counted, and handed to simaccel as the host memory it is; with a delay set, the
  // copy's stream first sleeps that long.
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;

  // Parks `stream` of `dev` (null: the null stream) after the work queued so far, until
  // ReleaseStream. Releasing a stream that is not held does nothing.
  void HoldStream(DLDevice dev, bp_stream_t stream);
  void ReleaseStream(DLDevice dev, bp_stream_t stream);
  // Data spaces alive on `dev` (its "live_allocations" property); BP_ERR_NOT_FOUND for a
  // device that does not exist.
  int64_t LiveAllocations(DLDevice dev);
  // Copies between simaccel and simaccel_host that this DeviceAPI made itself, in stream order
  // (the core routes them here, both types being this plugin's, instead of staging them).
  int64_t PinnedCopies() const { return pinned_copies_.load(); }
  // Every copy queued from now on first sleeps `us` microseconds on its stream (0: none).
  static void SetDelayUs(int64_t us) { delay_us_.store(us); }

 private:
  // simaccel's entries less the events: tests see the core's events (a stream sync and the
  // host's clock) on a device whose streams run asynchronously.
  TestingDeviceAPI() : SimAccelDeviceAPI(NoEvents()) {}
  static constexpr Entries NoEvents() {
    Entries e = kEntries;
    e.events = false;
    return e;
  }

  static std::atomic<int64_t> delay_us_;
  std::atomic<int64_t> pinned_copies_{0};
  std::mutex mu_;
  // The gate each held stream waits at, by device id and handle.
  std::map<std::pair<int32_t, bp_stream_t>, std::shared_ptr<::simaccel::Event>> holds_;
};

class HostDeviceAPI final : public sdk::DeviceAPI {
 public:
  HostDeviceAPI();
  static HostDeviceAPI* Global();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;

  // The host address of [byte_offset, + nbytes) of `t`, a tensor on simaccel_host:0, checked
  // to lie inside one live allocation; otherwise BP_ERR_INVALID_ARGUMENT naming `what`.
  uint8_t* Bytes(const DLTensor* t, size_t nbytes, const char* what);

 private:
  void CheckDevice(DLDevice dev) const;
  sdk::HandleTable<> handles_{"simaccel_host"};
};

}  // namespace simaccel_testing
}  // namespace backplane

#endif  // BACKPLANE_TESTS_SDK_APPS_EXAMPLES_SIMACCEL_PLUGIN_HOOKS_H_
