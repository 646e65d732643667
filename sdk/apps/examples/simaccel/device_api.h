// SPDX-License-Identifier: Apache-2.0
// simaccel's DeviceAPI: the DeviceAPI of a simulated accelerator, as a third party writes one.
//
// - Devices simaccel:0 .. simaccel:N-1, N = kDefaultDevices or $SIMACCEL_DEVICES (0 to
//   kMaxDevices; 0 shows that building code needs no device).
// - Data space is the device's own memory, reached only through opaque handles (memory.h).
// - Work is asynchronous: each device has a default stream (the null stream), CreateStream
//   makes more, and each stream runs its work in order on a worker thread (stream.h). A
//   host-to-device copy reads the host buffer before it returns (BP-PLUGIN-7); a
//   device-to-host copy writes the host buffer when its stream gets to it, so the caller
//   synchronises the stream before reading.
// - Which stream handles are live, on which device, and each thread's active stream per
//   device (SetStream) are the SDK's StreamRegistry's to keep (backplane/sdk/stream_registry.hpp):
//   it checks every handle a caller passes with the SDK's messages, and a stream that one
//   thread frees while another has it active is an error at that thread's next launch, not
//   work on a dead queue. This class keeps only the Stream object behind each handle.
// - SetDevice and SetStream are per calling thread, as in CUDA: kernels the code generator
//   made run on the thread's active stream of their device (the null stream unless
//   SetStream chose another).
// - Events (ABI 1.6, Entries::events): an event is a mark recorded in a stream's work
//   (Stream::Record); other streams wait for it on their worker threads, the host waits with
//   SyncEvent, and its time is when the stream's worker reached it, so EventElapsedMs times
//   the work between two marks as the device ran it.
// - No workspace entries: the core falls back to data space (docs/abi.md, "The DeviceAPI table").
// - The class is not final, and its constructors and GetStream are protected: Backplane's own
//   tests link these sources into a second plugin whose DeviceAPI derives from this one
//   (tests/sdk/apps/examples/simaccel). A plugin of your own can make it final.
#ifndef SIMACCEL_DEVICE_API_H_
#define SIMACCEL_DEVICE_API_H_

#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/stream_registry.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory.h"
#include "stream.h"

namespace simaccel {

class SimAccelDeviceAPI : public backplane::sdk::DeviceAPI {
 public:
  static constexpr int32_t kDefaultDevices = 1;
  static constexpr int32_t kMaxDevices = 8;
  // Device memory of each device, and what the device reports about itself.
  static constexpr uint64_t kMemoryBytes = uint64_t{1} << 30;
  static constexpr int64_t kMaxThreadsPerBlock = 1024;
  static constexpr int64_t kWarpSize = 32;
  static constexpr int64_t kSharedMemoryPerBlock = 48 * 1024;

  // The one instance. It is never destroyed: the core may call it until the process ends.
  static SimAccelDeviceAPI* Global();

  // ---- the DeviceAPI: one method per entry of bp_device_api_t -------------------------
  backplane::Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  // "memory" = "opaque handles", "live_allocations": data spaces alive on the device.
  backplane::Any GetProperty(DLDevice dev, const std::string& key) override;
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
  // Events: a handle is a HostEvent of this class; the core checks that both events of
  // EventElapsedMs are recorded and of one device before it asks.
  void* CreateEvent(DLDevice dev) override;
  void FreeEvent(DLDevice dev, void* event) override;
  void RecordEvent(DLDevice dev, void* event, bp_stream_t stream) override;
  void StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) override;
  bool EventDone(DLDevice dev, void* event) override;
  void SyncEvent(DLDevice dev, void* event) override;
  double EventElapsedMs(DLDevice dev, void* start, void* end) override;

  // ---- for the code generator's modules (module.cc) -------------------------------------
  // The device the calling thread made active with SetDevice (simaccel:0 by default).
  DLDevice ActiveDevice() const;
  // The allocation behind a data space handle of `dev` (see DeviceMemory::Resolve).
  std::shared_ptr<Allocation> Resolve(DLDevice dev, const void* handle, uint64_t offset,
                                      size_t nbytes, const char* what);
  // Queues `work` on the calling thread's active stream of `dev` (generated code runs on the
  // active stream: set_stream in c_api.h).
  void Launch(DLDevice dev, std::function<void()> work);

  int32_t NumDevices() const { return num_devices_; }

 protected:
  // Every optional entry but workspace (AllocWorkspace falls back to data space in the core)
  // and native handles (a simulation has no vendor objects to hand out).
  static constexpr Entries kEntries{.property = true,
                                    .workspace = false,
                                    .streams = true,
                                    .sync_stream_from_to = true,
                                    .events = true};
  SimAccelDeviceAPI() : SimAccelDeviceAPI(kEntries) {}
  // A derived DeviceAPI may provide fewer entries; the core then applies their defaults.
  explicit SimAccelDeviceAPI(const Entries& entries);
  // The stream behind `handle` on `dev` (null: the device's default stream), or
  // BP_ERR_INVALID_ARGUMENT for a handle that is not a live stream of `dev` (the registry's
  // check and message).
  std::shared_ptr<Stream> GetStream(DLDevice dev, bp_stream_t handle);

 private:
  struct Device {
    std::unique_ptr<DeviceMemory> memory;
    std::shared_ptr<Stream> default_stream;  // the null stream, started on first use
  };
  // What bp_event_create hands out: the mark of the event's latest record (null until the
  // first; recording again replaces it, so waiters of the old mark are not disturbed).
  struct HostEvent {
    int32_t device_id;
    std::shared_ptr<Event> mark;
  };

  bool Exists(DLDevice dev) const;
  // `dev`, or BP_ERR_NOT_FOUND naming the devices there are.
  Device& CheckDevice(DLDevice dev);
  // The mark of `event` (null: never recorded), or BP_ERR_INVALID_ARGUMENT naming `what` for
  // a handle that is not a live event of `dev`.
  std::shared_ptr<Event> MarkOf(DLDevice dev, void* event, const char* what);
  std::string DeviceName(int32_t id) const { return "simaccel:" + std::to_string(id); }

  const int32_t num_devices_;
  Device devices_[kMaxDevices];
  backplane::sdk::StreamRegistry registry_{"simaccel"};  // live handles, active per thread
  std::mutex mu_;  // default streams, the stream objects and the events
  uint64_t next_stream_serial_ = 1;
  std::unordered_map<bp_stream_t, std::shared_ptr<Stream>> streams_;  // behind each handle
  std::unordered_map<void*, std::unique_ptr<HostEvent>> events_;
};

}  // namespace simaccel

#endif  // SIMACCEL_DEVICE_API_H_
