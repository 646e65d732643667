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

#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/stream_registry.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver.h"

namespace backplane {
namespace cuda {

// Free device buffers of one device, by power-of-two size class, kept for reuse by
// AllocWorkspace (the seed's workspace pool). Thread-safe.
class WorkspacePool {
 public:
  // A buffer of at least `nbytes` from the pool, or nullopt-like 0 when the pool has none.
  CUdeviceptr Take(size_t size_class);
  void Give(CUdeviceptr ptr, size_t size_class);
  // The size class of a request: a power of two, at least 4 KiB.
  static size_t SizeClass(size_t nbytes);

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<CUdeviceptr>> free_;
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

 private:
  struct Device {
    CUdevice handle = 0;
    CUcontext context = nullptr;  // primary, retained on first use
    std::unique_ptr<WorkspacePool> pool = std::make_unique<WorkspacePool>();
  };
  struct Allocation {
    size_t size = 0;
    int32_t device_id = 0;
    size_t workspace_class = 0;  // > 0: a workspace buffer of this size class
  };

  CUDADeviceAPI();
  void RequireDevice(DLDevice dev) const;
  int Attribute(int32_t id, CUdevice_attribute attr);
  void* Allocate(DLDevice dev, size_t nbytes, size_t workspace_class);
  // The allocation holding [ptr, ptr + nbytes), when the plugin made it; nullptr for memory
  // from elsewhere (left to the driver to check).
  const Allocation* Find(uintptr_t ptr, size_t nbytes, uintptr_t* base);

  const Driver* driver_;
  std::string reason_;
  std::vector<Device> devices_;
  std::mutex mu_;
  std::map<uintptr_t, Allocation> allocations_;  // by base address
  sdk::StreamRegistry streams_{"cuda"};          // live streams and each thread's active one
};

// device_api.cuda_host: pinned (page-locked) host memory from cuMemHostAlloc, portable to
// every context. One device, cuda_host:0, which exists when the driver is usable. Copies
// between it and cpu memory are memcpy; copies to and from cuda devices go through
// device_api.cuda (a cuda_host tensor there is asynchronous on the stream: keep the host
// buffer unchanged until StreamSync).
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

 private:
  CUDAHostDeviceAPI() : sdk::DeviceAPI(Entries{.streams = false, .sync_stream_from_to = false}) {}
  void RequireDevice(DLDevice dev);
  std::mutex mu_;
  std::map<uintptr_t, size_t> allocations_;
};

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_DEVICE_API_H_
