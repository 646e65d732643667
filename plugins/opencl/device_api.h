// SPDX-License-Identifier: Apache-2.0
// device_api.opencl: every device of every OpenCL platform the ICD loader lists.
//
// Device order (stable, documented in docs/opencl.md): platforms in clGetPlatformIDs order,
// within each platform its devices in clGetDeviceIDs(CL_DEVICE_TYPE_ALL) order; opencl:N is
// the N-th of that list. Each device has a context of its own and a default in-order queue
// (the null stream). Data space is a cl_mem behind an opaque handle; workspaces are such
// buffers too, kept in a per-device pool (sdk::WorkspacePool) when freed; streams are in-order
// command queues, with profiling on where the device has it (events time work by it). Events
// (event.cc) are markers on those queues; native handles and wrapped application cl_mems are in
// native.cc.
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
// A wrapped application cl_mem (WrapNative) is one too: the plugin holds one reference to it
// (clRetainMemObject), which UnwrapNative gives back.
struct Buffer {
  cl_mem mem = nullptr;
  size_t capacity = 0;  // the bytes of `mem` (a workspace's size class; at least 1)
};

// The handle CreateEvent returns: the marker of the event's last record, if any (event.cc).
struct Event;

class OpenCLDeviceAPI : public sdk::DeviceAPI {
 public:
  struct Device {
    cl_platform_id platform = nullptr;
    cl_device_id id = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;  // the null stream
    cl_ulong max_alloc = 0;            // CL_DEVICE_MAX_MEM_ALLOC_SIZE
    // Whether the device's queues are created with CL_QUEUE_PROFILING_ENABLE (every queue of a
    // device that lists it in CL_DEVICE_QUEUE_ON_HOST_PROPERTIES, as OpenCL requires of all).
    bool profiling = false;
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

  // Events (event.cc). An event holds the marker (clEnqueueMarkerWithWaitList) of its last
  // record, flushed so that other queues may wait for it; recording again releases the old
  // marker. StreamWaitEvent enqueues a barrier waiting for the marker (no host wait); EventDone
  // reads CL_EVENT_COMMAND_EXECUTION_STATUS and SyncEvent is clWaitForEvents, both DEVICE
  // errors naming the CL error when the work before the marker failed. EventElapsedMs is the
  // difference of the two markers' CL_PROFILING_COMMAND_END (a marker ends when the work
  // queued before it has), or BP_ERR_UNSUPPORTED where the driver keeps no profiling times.
  // An event of another device is BP_ERR_INVALID_ARGUMENT. Thread-safe: one thread may record
  // while another queries or waits.
  void* CreateEvent(DLDevice dev) override;
  void FreeEvent(DLDevice dev, void* event) override;
  void RecordEvent(DLDevice dev, void* event, bp_stream_t stream) override;
  void StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) override;
  bool EventDone(DLDevice dev, void* event) override;
  void SyncEvent(DLDevice dev, void* event) override;
  double EventElapsedMs(DLDevice dev, void* start, void* end) override;

  // Native handles (native.cc). BUFFER: the cl_mem of a live data handle or workspace (else
  // BP_ERR_INVALID_ARGUMENT); BUFFER_OFFSET: 0 (no sub-buffers); QUEUE: the cl_command_queue of
  // a stream (null: the device's default queue); CONTEXT, DEVICE, PLATFORM: the device's
  // cl_context, cl_device_id, cl_platform_id. Others: BP_ERR_UNSUPPORTED listing these.
  uint64_t NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object) override;
  // A data handle over an application's cl_mem: a buffer object (CL_MEM_OBJECT_BUFFER) of this
  // device's cl_context with CL_MEM_SIZE >= buffer.size, and memory, memory_offset 0; else
  // BP_ERR_INVALID_ARGUMENT and nothing kept. The plugin retains the cl_mem until
  // UnwrapNative, which releases it; FreeDataSpace refuses the handle. `buffer.buffer` must be
  // null or an OpenCL object: the ICD loader dispatches through it, so garbage cannot be told
  // from a cl_mem without touching it.
  void* WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) override;
  void UnwrapNative(DLDevice dev, void* data) override;

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
  // A new in-order queue of `d` (profiling on where d.profiling), or the CL error in *err.
  static cl_command_queue NewQueue(const Device& d, cl_int* err);

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
