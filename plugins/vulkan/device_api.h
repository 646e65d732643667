// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan: every physical device with a compute queue, in the loader's order
// (vkEnumeratePhysicalDevices), is vulkan:0, vulkan:1, ... Data space is a VkBuffer with its
// memory behind an opaque handle; copies with the host go through a pooled staging buffer;
// streams run asynchronously on timeline semaphores (stream.cc).
#ifndef BACKPLANE_PLUGINS_VULKAN_DEVICE_API_H_
#define BACKPLANE_PLUGINS_VULKAN_DEVICE_API_H_

#include <vulkan/vulkan.h>

#include <backplane/launch/launch.hpp>
#include <backplane/sdk/device_api.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "context.h"

namespace backplane {
namespace vulkan {

class Context;
struct Device;

// One opened device with its lock held, for the plugin's kernels (module.cc): valid only
// inside the VulkanDeviceAPI::WithDevice callback that received it.
class DeviceScope {
 public:
  VkDevice device() const;
  const VkPhysicalDeviceProperties& properties() const;
  bool shader_int64() const;
  bool shader_float64() const;
  // shaderFloat16 and storageBuffer16BitAccess, both enabled (what float16 kernels need).
  bool float16() const;
  // The KernelLayout::atomics bits the device has (and were enabled).
  uint32_t atomics() const;
  // What shaders may ask their float controls to keep (subnormals; signed zeros, infinities
  // and NaNs), by width.
  const FloatControls& float_controls() const;
  // The device's pipeline cache, read from disk on first use (docs/vulkan.md).
  VkPipelineCache PipelineCache();
  // Writes the pipeline cache to disk (atomically) when its data differs from what the file
  // holds; a failure to write is ignored, the cache being an optimisation.
  void SavePipelineCache();
  // A compute pipeline made through the device's pipeline cache, which is then saved
  // (SavePipelineCache). Error(BP_ERR_DEVICE, or BP_ERR_OUT_OF_MEMORY) naming `what` when the
  // driver fails; the caller owns the pipeline.
  VkPipeline CreateComputePipeline(const VkComputePipelineCreateInfo& ci, const std::string& what);
  // The VkBuffer behind data-space `handle` when [offset, offset + nbytes) lies inside it;
  // else Error(BP_ERR_INVALID_ARGUMENT) naming what `what()` returns (called only then).
  VkBuffer Resolve(void* handle, uint64_t offset, uint64_t nbytes,
                   const std::function<std::string()>& what);
  // How many data spaces of this device have been freed so far: a VkBuffer handle seen at
  // one count may name a different buffer at a later one (the driver reuses handles).
  uint64_t FreedCount() const;
  // Records `record` into a command buffer and submits it on the calling thread's active
  // stream of the device (SetStream; the null stream by default), after that stream's earlier
  // work; returns without waiting for it. Error(BP_ERR_INVALID_ARGUMENT) when the active
  // stream was freed.
  Use Submit(const std::function<void(VkCommandBuffer)>& record);
  // Returns once `use` is done.
  void Wait(const Use& use);
  // Returns once all work submitted to the device is done.
  void WaitIdle();
  // A new, cleared error record for a kernel (docs/vulkan.md, "Errors the shader reports");
  // `raise` throws the Error a non-zero record describes.
  std::shared_ptr<KernelStatus> NewKernelStatus(std::function<void(const uint32_t*)> raise);
  // Notes that the dispatch `use` may write `status`: its record is read once that is done.
  void Watch(const std::shared_ptr<KernelStatus>& status, const Use& use);
  // Reads the records whose dispatches are all done and throws the first error (CheckStatus).
  void CheckStatus();

 private:
  friend class VulkanDeviceAPI;
  DeviceScope(Context* ctx, Device* d, DLDevice dev) : ctx_(ctx), d_(d), dev_(dev) {}
  Context* ctx_;
  Device* d_;
  DLDevice dev_;
};

// What the devices' pipeline caches did in this process, for tests and measurements
// (vulkan.pipeline_cache_stats, docs/vulkan.md).
struct PipelineCacheStats {
  int64_t loaded = 0;        // caches made with the data of their file on disk
  int64_t loaded_bytes = 0;  // the bytes of that data, summed
  int64_t ignored = 0;       // files found damaged or not this device's, and not used
  int64_t writes = 0;        // files written (SavePipelineCache with new data)
  int64_t pipelines = 0;     // compute pipelines made (CreateComputePipeline)
  int64_t pipeline_ns = 0;   // the time spent in vkCreateComputePipelines, summed
};
PipelineCacheStats GetPipelineCacheStats();

class VulkanDeviceAPI final : public sdk::DeviceAPI {
 public:
  static VulkanDeviceAPI* Global();
  // Validation errors seen so far with BACKPLANE_VULKAN_VALIDATION=1, or -1 when validation
  // is off (the variable unset, or no VK_LAYER_KHRONOS_validation).
  int64_t ValidationErrors();
  // Opens `dev` (creating its VkDevice on first use) and runs `fn` with its lock held. Throws
  // Error(BP_ERR_INVALID_ARGUMENT) for a device that does not exist.
  void WithDevice(DLDevice dev, const std::function<void(DeviceScope&)>& fn);
  // The number of Vulkan devices with a compute queue.
  int32_t DeviceCount();
  // Where data-space `handle` of `dev` lies, for the launch kit: its Buffer (the id), offset
  // 0, its size. Error(BP_ERR_INVALID_ARGUMENT) when it is not a live data space of `dev`.
  // The answer may be stale once the device's lock is released: a launch resolves the handle
  // again under it (DeviceScope::Resolve).
  launch::Allocation FindDataSpace(DLDevice dev, void* handle);
  // `dev`'s launch limits: maxComputeWorkGroupCount per grid axis, maxComputeWorkGroupSize per
  // block axis, maxComputeWorkGroupInvocations per block (read when devices are listed).
  const launch::DeviceLimits& LaunchLimits(DLDevice dev);

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  Any GetProperty(DLDevice dev, const std::string& key) override;
  std::vector<std::string> ListProperties(DLDevice dev) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  // Workspaces come from a pool per device (sdk::WorkspacePool), ordered on the calling
  // thread's active stream: a workspace freed there is handed out again to that stream at
  // once, to another once the work queued before the free is done.
  void* AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) override;
  void FreeWorkspace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_stream_t CreateStream(DLDevice dev) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void SetStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;

  // Events (events.cc; docs/vulkan.md, "Events"): a stream's timeline value, with a timestamp
  // query where the queue family can write timestamps.
  void* CreateEvent(DLDevice dev) override;
  void FreeEvent(DLDevice dev, void* event) override;
  void RecordEvent(DLDevice dev, void* event, bp_stream_t stream) override;
  void StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) override;
  bool EventDone(DLDevice dev, void* event) override;
  void SyncEvent(DLDevice dev, void* event) override;
  double EventElapsedMs(DLDevice dev, void* start, void* end) override;

  // Native handles (native.cc; docs/vulkan.md, "Native handles"): the VkBuffer, VkDeviceMemory,
  // VkQueue, VkDevice, VkPhysicalDevice and VkInstance behind Backplane's objects, and an
  // application's VkBuffer with its VkDeviceMemory wrapped as data space.
  uint64_t NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object) override;
  void* WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) override;
  void UnwrapNative(DLDevice dev, void* data) override;

 private:
  VulkanDeviceAPI();
  Context& Ctx();
  // `dev`, opened (its VkDevice created on first use), with `lock` holding its mutex. Throws
  // Error(BP_ERR_INVALID_ARGUMENT) for a device that does not exist.
  Device& Opened(DLDevice dev, std::unique_lock<std::mutex>& lock);
  std::unique_ptr<Context> ctx_;
};

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_DEVICE_API_H_
