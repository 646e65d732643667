// SPDX-License-Identifier: Apache-2.0
// The fake accelerator's DeviceAPI: device type "fakeacc" (a fresh id), devices 0 and 1
// (fewer when the environment variable BACKPLANE_FAKEACC_DEVICES gives a smaller count).
//
// It exists to prove that nothing above a DeviceAPI assumes a CPU pointer or a synchronous
// copy: data space is an opaque handle into the device's arena, and every copy runs later
// on a stream's worker thread (each created stream has one, and each device's null stream
// has its own). A host-to-device copy snapshots the host bytes before it returns; a
// device-to-host copy writes the host buffer when the worker gets to it, so the caller
// must stream_sync. It provides no workspace entries, so the core's fallback to data space
// is exercised.
#ifndef BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_DEVICE_API_H_
#define BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_DEVICE_API_H_

#include <atomic>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/handle_table.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "arena.h"
#include "stream.h"

namespace backplane {
namespace fakeacc {

class FakeAccDeviceAPI final : public sdk::DeviceAPI {
 public:
  static constexpr int32_t kNumDevices = 2;
  // The device memory each device pretends to have.
  static constexpr uint64_t kCapacityBytes = uint64_t{1} << 30;

  explicit FakeAccDeviceAPI(int32_t device_type);
  ~FakeAccDeviceAPI() override;

  // The instance, created on the first call with the registered device type id.
  static FakeAccDeviceAPI* Global(int32_t device_type);

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  // "memory" = "opaque handles"; "live_allocations" = data spaces alive on the device.
  Any GetProperty(DLDevice dev, const std::string& key) override;
  // The keys GetProperty answers: "memory" and "live_allocations".
  std::vector<std::string> ListProperties(DLDevice dev) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_stream_t CreateStream(DLDevice dev) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void SetStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;

  // For the code generator (codegen.cc): the bytes behind a data space handle of `dev`, and
  // running `work` on the stream this thread made active on `dev` (SetStream; the null stream
  // unless one was), after what is queued there (kernel launches are asynchronous like copies;
  // stream_sync waits for them and reports their failures).
  std::shared_ptr<Buffer> Resolve(DLDevice dev, const void* handle, uint64_t offset, size_t nbytes,
                                  const char* what);
  void Launch(DLDevice dev, std::function<void()> work);

  // Test helpers behind the fakeacc.* global functions.
  void HoldStream(DLDevice dev, bp_stream_t stream);
  void ReleaseStream(DLDevice dev, bp_stream_t stream);
  int64_t LiveAllocations(DLDevice dev);

  int32_t device_type() const { return device_type_; }
  // Copies between fakeacc and fakeacc_host that this DeviceAPI made itself, in stream order
  // (the core routes them here, both types being this plugin's, instead of staging them).
  int64_t PinnedCopies() const { return pinned_copies_.load(); }

 private:
  struct Device {
    std::unique_ptr<Arena> arena;
    std::shared_ptr<Stream> null_stream;  // created on first use
  };

  // Throws BP_ERR_NOT_FOUND unless `dev` is fakeacc:0 or fakeacc:1.
  Device& CheckDevice(DLDevice dev);
  // The stream behind a handle of `dev` (null: the device's null stream).
  std::shared_ptr<Stream> GetStream(DLDevice dev, bp_stream_t handle);

  const int32_t device_type_;
  Device devices_[kNumDevices];
  std::mutex mu_;  // null streams and the stream table
  uint64_t next_stream_serial_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Stream>> streams_;
  std::atomic<int64_t> pinned_copies_{0};
};

// device_api.fakeacc_host: the fake accelerator's "pinned" host memory, as a vendor's page-locked
// memory type is (cuda_host). One device, fakeacc_host:0. Its memory is host-addressable;
// copies between it and cpu memory are memcpy, and copies between it and fakeacc go to
// FakeAccDeviceAPI, queued on the fakeacc stream like any host copy of that device (stream_sync
// of that stream before reading the result).
class FakeAccHostDeviceAPI final : public sdk::DeviceAPI {
 public:
  FakeAccHostDeviceAPI();
  static FakeAccHostDeviceAPI* Global();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;

  // The host address of [byte_offset, + nbytes) of `t`, a tensor on fakeacc_host:0, checked
  // to lie inside one live allocation.
  uint8_t* Bytes(const DLTensor* t, size_t nbytes, const char* what);

 private:
  void CheckDevice(DLDevice dev) const;
  sdk::HandleTable<> handles_{"fakeacc_host"};
};

}  // namespace fakeacc
}  // namespace backplane

#endif  // BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_DEVICE_API_H_
