// SPDX-License-Identifier: Apache-2.0
// device_api.cuda: every device the CUDA driver reports, in cuDeviceGet order (cuda:N is the
// driver's device N, so CUDA_VISIBLE_DEVICES selects and orders them as for any CUDA
// program). Each device works in its primary context, retained on first use. Data space is
// cuMemAlloc memory (the DLTensor's data is the device pointer, as DLPack defines it);
// streams are non-blocking CUstreams; the null stream is the context's legacy stream.
//
// Without a usable driver (no libcuda.so.1, cuInit failing) the device count is 0, every
// device answers kExist = 0, and GetProperty(any device, "status") says why; every other
// method throws BP_ERR_NOT_FOUND with that reason.
#ifndef BACKPLANE_PLUGINS_CUDA_DEVICE_API_H_
#define BACKPLANE_PLUGINS_CUDA_DEVICE_API_H_

#include <cuda.h>

#include <atomic>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/handle_table.hpp>
#include <backplane/sdk/stream_registry.hpp>
#include <backplane/sdk/workspace_pool.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver.h"

namespace backplane {
namespace cuda {

// Free workspace buffers of one device (sdk::WorkspacePool), kept for reuse by
// AllocWorkspace. Work queued before a buffer was freed may still be using it, so each buffer
// keeps the stream it was freed on and an event recorded there: the same stream may take it
// at once (its later work runs after), another stream only once the event has completed.
struct FreedOn {
  CUstream stream = nullptr;  // the stream FreeWorkspace saw active
  CUevent event = nullptr;    // recorded on `stream` at the free; the taker destroys it
  bool any_stream = false;    // `stream` was freed: only the event tells
};
struct WorkspacePool {
  std::mutex mu;
  // Classes up to 1 TiB; at most 1 GiB of freed buffers kept (a free beyond is cuMemFree).
  sdk::WorkspacePool<CUdeviceptr, FreedOn> kept{
      {.min_class = size_t{4} << 10, .max_class = size_t{1} << 40, .max_cached = size_t{1} << 30}};
};

class CUDADeviceAPI : public sdk::DeviceAPI {
 public:
  static CUDADeviceAPI* Global();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  // "status": "ok: N device(s), driver X" or why there are none; "uuid"-free by design.
  // "pci_bus_id", "compute_capability_major"/"_minor" for existing devices.
  Any GetProperty(DLDevice dev, const std::string& key) override;
  std::vector<std::string> ListProperties(DLDevice dev) override;
  // Makes the primary context of `dev` current on the calling thread.
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void* AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) override;
  void FreeWorkspace(DLDevice dev, void* ptr) override;
  // Host <-> device, device <-> device and peer (cuMemcpyPeerAsync) copies, queued on
  // `stream` (of the device side; for device <-> device, of the source's device). A copy into
  // cpu memory waits for the stream, so the host may read the result on return.
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_stream_t CreateStream(DLDevice dev) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void SetStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  // An event recorded on `src`, waited for by `dst` (cuStreamWaitEvent): no host wait.
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;
  // Events are CUevents (timing enabled) of the device's primary context.
  void* CreateEvent(DLDevice dev) override;
  void FreeEvent(DLDevice dev, void* event) override;
  void RecordEvent(DLDevice dev, void* event, bp_stream_t stream) override;
  void StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) override;
  bool EventDone(DLDevice dev, void* event) override;
  void SyncEvent(DLDevice dev, void* event) override;
  double EventElapsedMs(DLDevice dev, void* start, void* end) override;
  // BUFFER: the data handle's CUdeviceptr (the handle itself; BUFFER_OFFSET 0); QUEUE: the
  // CUstream (0, the legacy stream, for the null stream); CONTEXT: the primary CUcontext;
  // DEVICE: the CUdevice.
  uint64_t NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object) override;
  // A CUdeviceptr the driver knows on `dev` (cuMemAlloc of any library in this process,
  // cuMemAllocAsync, a pool), `size` bytes inside one allocation: the data handle is the address
  // itself, and unwrapping keeps nothing to release.
  void* WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) override;
  void UnwrapNative(DLDevice dev, void* data) override;

  // The limits a launch is checked against (the launch kit's, and shared memory), read once
  // per device.
  struct LaunchLimits : launch::DeviceLimits {
    int64_t shared_optin = 0;  // the most dynamic shared memory a kernel may opt in to
  };
  // The allocation holding an address: where it starts and its size.
  struct Range {
    uintptr_t base = 0;
    size_t size = 0;
    bool plugins = false;  // one of the plugin's allocations (else one the driver knows)
  };

  int32_t DeviceCount() const { return static_cast<int32_t>(devices_.size()); }
  // Why there are no devices ("" when the driver is usable).
  const std::string& Reason() const { return reason_; }
  // Checks `dev` exists and makes its primary context current; BP_ERR_NOT_FOUND naming the
  // devices that exist (or why there are none) otherwise.
  CUcontext Activate(DLDevice dev);
  // The CUstream of `stream` on `dev` (null: the legacy stream), checked to be a live stream
  // of that device.
  CUstream Stream(DLDevice dev, bp_stream_t stream);
  // The stream SetStream made active for this thread on `dev`.
  CUstream ActiveStream(DLDevice dev);
  const Driver& driver() const { return *driver_; }
  // The device's primary context (retained), for work done outside Activate's thread state.
  CUcontext Context(int32_t device_id);
  // The grid, block and shared-memory limits of cuda:`device_id` (read once; after that a
  // read without a lock).
  const LaunchLimits& Limits(int32_t device_id);
  // The allocation on `dev` that holds `ptr`: memory the plugin allocated there, or an
  // allocation the driver knows (cuMemGetAddressRange) on that device. BP_ERR_INVALID_ARGUMENT
  // naming `what` (called only then) and the address otherwise.
  Range Locate(DLDevice dev, uintptr_t ptr, const std::function<std::string()>& what);
  // Counts the frees of data space and workspaces: an answer of Locate with `plugins` set stays
  // true while this is unchanged (no allocation of the plugin was taken out, and a new one
  // cannot overlap a live one), so a launch may keep it (acquire: read it before Locate).
  uint64_t Frees() const { return frees_.load(std::memory_order_acquire); }
  // Checks that [ptr, ptr + nbytes) is device memory on `dev`: memory the plugin allocated
  // there, or an allocation the driver knows (cuMemGetAddressRange), bounds included.
  // BP_ERR_INVALID_ARGUMENT naming `what`, the address and the range otherwise.
  // `what` names the call in the message; it is called only when the check fails.
  void CheckDeviceRange(DLDevice dev, uintptr_t ptr, size_t nbytes,
                        const std::function<std::string()>& what);

 private:
  struct Device {
    CUdevice handle = 0;
    // Set once (under mu_) and read without a lock after; movable, for the vector.
    template <typename T>
    struct Slot {
      std::atomic<T> value{nullptr};
      Slot() = default;
      Slot(Slot&& o) noexcept : value(o.value.load()) {}
      T load(std::memory_order order) const { return value.load(order); }
      void store(T v, std::memory_order order) { value.store(v, order); }
    };
    Slot<CUcontext> context;  // the primary context, retained on first use (Context())
    std::unique_ptr<WorkspacePool> pool = std::make_unique<WorkspacePool>();
    std::unique_ptr<LaunchLimits> limits;    // read on first launch
    Slot<const LaunchLimits*> limits_ready;  // limits.get() once read
  };

  CUDADeviceAPI();
  void RequireDevice(DLDevice dev) const;
  int Attribute(int32_t id, CUdevice_attribute attr);
  void* Allocate(DLDevice dev, size_t nbytes, size_t alignment, size_t workspace_class);
  // Records a new allocation (cuMemAlloc's `base`) in handles_, or frees it when that fails.
  void AddOrFree(DLDevice dev, uintptr_t handle, size_t nbytes, bool workspace, uintptr_t base);

  const Driver* driver_;
  std::string reason_;
  std::vector<Device> devices_;
  std::mutex mu_;
  // Live allocations by the address handed out; each keeps what cuMemAlloc returned (below
  // the handle when over-aligned). A workspace's size is its size class.
  sdk::HandleTable<uintptr_t> handles_{"cuda"};
  sdk::StreamRegistry streams_{"cuda"};  // live streams and each thread's active one
  std::atomic<uint64_t> frees_{0};       // Frees()
};

// device_api.cuda_host: pinned (page-locked) host memory from cuMemHostAlloc, portable to
// every context. One device, cuda_host:0, which exists when the driver is usable. Copies
// between it and cpu memory are memcpy; copies to and from cuda devices go to device_api.cuda
// whichever side the core asks (both types are this plugin's), queued on the cuda device's
// stream and asynchronous there: keep the host buffer unchanged, and read it, only after
// StreamSync of that stream on the cuda device.
class CUDAHostDeviceAPI : public sdk::DeviceAPI {
 public:
  static CUDAHostDeviceAPI* Global();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  Any GetProperty(DLDevice dev, const std::string& key) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;

  // Throws BP_ERR_INVALID_ARGUMENT unless `nbytes` at t's data + byte_offset lie inside one
  // live allocation of this DeviceAPI (a freed, made-up or foreign address, or a range past the
  // end). `what` names the call in the message.
  void CheckRange(const DLTensor* t, size_t nbytes, const char* what);

 private:
  CUDAHostDeviceAPI() : sdk::DeviceAPI(Entries{.streams = false, .sync_stream_from_to = false}) {}
  void RequireDevice(DLDevice dev);
  sdk::HandleTable<> handles_{"cuda_host"};
};

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_DEVICE_API_H_
