// SPDX-License-Identifier: Apache-2.0
// device_api.opencl: every device of every OpenCL platform the ICD loader lists.
//
// Device order (stable, documented in docs/opencl.md): platforms in clGetPlatformIDs order,
// within each platform its devices in clGetDeviceIDs(CL_DEVICE_TYPE_ALL) order; opencl:N is
// the N-th of that list. Each device has a context of its own and a default in-order queue
// (the null stream). Data space is a cl_mem behind an opaque handle; workspaces are such
// buffers too, kept in a per-device pool (sdk::WorkspacePool) when freed; streams are in-order
// command queues.
#ifndef BACKPLANE_PLUGINS_OPENCL_DEVICE_API_H_
#define BACKPLANE_PLUGINS_OPENCL_DEVICE_API_H_

#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <backplane/launch/launch.hpp>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/handle_table.hpp>
#include <backplane/sdk/stream_registry.hpp>
#include <backplane/sdk/workspace_pool.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace backplane {
namespace opencl {

// The handle AllocDataSpace and AllocWorkspace return: one cl_mem of one device. Its size,
// device and kind are in the plugin's handle table.
struct Buffer {
  cl_mem mem = nullptr;
  size_t capacity = 0;  // the bytes of `mem` (a workspace's size class; at least 1)
};

class OpenCLDeviceAPI : public sdk::DeviceAPI {
 public:
  struct Device {
    cl_platform_id platform = nullptr;
    cl_device_id id = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;  // the null stream
    cl_ulong max_alloc = 0;            // CL_DEVICE_MAX_MEM_ALLOC_SIZE
    // What the launch kit checks a launch against: block[d] = CL_DEVICE_MAX_WORK_ITEM_SIZES[d],
    // threads_per_block = CL_DEVICE_MAX_WORK_GROUP_SIZE, no grid limit (OpenCL counts
    // work-items, which the launch checks fit a size_t). Read once, when devices are listed.
    launch::DeviceLimits limits;
  };

  static OpenCLDeviceAPI* Global();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  Any GetProperty(DLDevice dev, const std::string& key) override;
  std::vector<std::string> ListProperties(DLDevice dev) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  // Data space freed as a workspace (or the reverse), or freed twice, is
  // BP_ERR_INVALID_ARGUMENT and changes nothing.
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  // A buffer of at least `nbytes` from the device's workspace pool, else a new one. The
  // handle is a buffer like data space (copies and kernels take it) until FreeWorkspace.
  void* AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) override;
  // Returns a workspace to the pool (released when the pool is full). It may be handed out
  // again at once: work queued on another stream that still uses it must be synced first.
  void FreeWorkspace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_stream_t CreateStream(DLDevice dev) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void SetStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;

  // The devices, enumerated on first use (not when the plugin loads: asking the ICD loader for
  // platforms loads every OpenCL driver installed, which takes tens of milliseconds).
  int32_t DeviceCount() const {
    std::call_once(enumerated_, [this] { const_cast<OpenCLDeviceAPI*>(this)->Enumerate(); });
    return static_cast<int32_t>(devices_.size());
  }
  // The device, or BP_ERR_NOT_FOUND naming the ones that exist.
  const Device& CheckDevice(DLDevice dev) const;
  // The queue of `stream` on `dev` (null: the device's default queue).
  cl_command_queue Queue(DLDevice dev, bp_stream_t stream);
  // The queue SetStream made active for this thread on `dev`.
  cl_command_queue ActiveQueue(DLDevice dev);
  // The buffer of `handle`, a live handle of `dev` holding [offset, offset + nbytes), or
  // BP_ERR_INVALID_ARGUMENT starting with `what` (sdk::HandleTable::Resolve).
  sdk::HandleTable<Buffer*>::Entry Resolve(DLDevice dev, const void* handle, uint64_t offset,
                                           size_t nbytes, const std::string& what);
  // Bytes of freed workspaces the pool of `dev` keeps (property "workspace_cached_bytes").
  size_t WorkspaceCachedBytes(DLDevice dev);

 private:
  OpenCLDeviceAPI();
  ~OpenCLDeviceAPI() override;

  // A new cl_mem of `bytes` (0 -> 1) on `dev`. A driver out-of-memory releases the pooled
  // workspaces of that device and tries once more.
  cl_mem CreateMem(DLDevice dev, const Device& d, size_t bytes);
  // Empties the pool of device `device_id` and forgets its buffers; the caller destroys them.
  std::vector<Buffer*> DrainPool(int32_t device_id);
  // Releases the cl_mem and the Buffer.
  static void Destroy(Buffer* b);

  void Enumerate();
  mutable std::once_flag enumerated_;
  std::vector<Device> devices_;  // filled once, by Enumerate (through DeviceCount)
  std::mutex mu_;
  // The preferred work-group size multiple of a trivial kernel, per device id: warp_size
  // where no vendor extension reports one (built once, on first query).
  std::mutex warp_mu_;
  std::map<int32_t, int64_t> preferred_multiple_;
  int64_t PreferredMultiple(int32_t device_id);
  // The live buffers (a freed workspace waiting in a pool is not one).
  sdk::HandleTable<Buffer*> handles_{"opencl"};
  // Live streams (command queues) and each thread's active one.
  sdk::StreamRegistry streams_{"opencl"};
  // One workspace pool per device, indexed like devices_; used under mu_.
  using Pool = sdk::WorkspacePool<Buffer*>;
  std::vector<std::unique_ptr<Pool>> pools_;
};

// Throws backplane::Error when `status` is not CL_SUCCESS: "<what>: <CL error name>".
void Check(cl_int status, const std::string& what);
const char* ErrorName(cl_int status);

}  // namespace opencl
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_OPENCL_DEVICE_API_H_
