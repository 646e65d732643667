// SPDX-License-Identifier: Apache-2.0
// The plugin's per-device state, shared by device_api.cc (devices, memory, copies) and
// stream.cc (streams: submission, ordering and waiting). Internal to the plugin.
#ifndef BACKPLANE_PLUGINS_VULKAN_CONTEXT_H_
#define BACKPLANE_PLUGINS_VULKAN_CONTEXT_H_

#include <vulkan/vulkan.h>

#include <backplane/launch/launch.hpp>
#include <backplane/sdk/handle_table.hpp>
#include <backplane/sdk/stream_registry.hpp>
#include <backplane/sdk/workspace_pool.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emitter.h"
#include "float_controls.h"

namespace backplane {
namespace vulkan {

// A VkBuffer with its memory; the data-space handle is a pointer to one.
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;      // what the caller asked for: copies and kernels stay inside it
  VkDeviceSize capacity = 0;  // what the VkBuffer holds (a workspace's size class)
  void* mapped = nullptr;     // for host-visible staging buffers
  // An application's buffer (WrapNative, native.cc): `buffer` and `memory` are the
  // application's, bound at `memory_offset`; the plugin frees only this struct.
  bool wrapped = false;
  VkDeviceSize memory_offset = 0;  // where `buffer` is bound in `memory` (0 for the plugin's)
};

// Where work went: the stream's id and the value of its timeline that marks the work done.
// Once no live stream has the id, the work is done (a stream is drained before it is freed).
struct Use {
  uint64_t stream = 0;
  uint64_t value = 0;
};

// A stream: submissions on one queue, ordered among themselves by the stream's timeline
// semaphore (each waits for the value the previous one signals). With timeline semaphores
// off (a device older than Vulkan 1.2), every submission is waited for before it returns.
struct Stream {
  uint64_t id = 0;  // unique on its device; the null stream is 0
  VkSemaphore timeline = VK_NULL_HANDLE;
  uint64_t submitted = 0;  // the value the last submission signals
  // Semaphore values the next submission waits for (SyncStreamFromTo).
  std::vector<std::pair<VkSemaphore, uint64_t>> waits;
  // Command buffers in flight with the value that completes them, and idle ones.
  std::deque<std::pair<VkCommandBuffer, uint64_t>> in_flight;
  std::vector<VkCommandBuffer> idle;
};

// The error record of one kernel on one device (docs/vulkan.md, "Errors the shader reports"):
// kStatusWords uint32 words in host-visible, host-coherent memory that the kernel's shader
// writes at most once (atomicCompSwap on word 0): [0] the code (0: no error), [1] the
// kernel-local site id, [2..7] three int64 details as (low, high) word pairs. The host reads
// and clears it once the dispatches that use it are done.
// An event (events.cc): a point in a stream's work. Recording it notes the stream and the
// timeline value that marks the work queued so far; where the device can time, recording also
// submits a timestamp query that the value's submission writes (a query pool of one).
struct Event {
  bool recorded = false;
  Use mark;  // done once stream mark.stream reaches mark.value (or is freed)
  VkQueryPool queries = VK_NULL_HANDLE;  // one timestamp; null where the device cannot time
};

struct KernelStatus {
  VkDevice device = VK_NULL_HANDLE;
  Buffer buffer;  // mapped; freed by the destructor
  // Throws the Error that the record `words` describes (code != 0).
  std::function<void(const uint32_t* words)> raise;
  // The queued dispatches that may write the record: the last one per stream.
  std::vector<Use> pending;
  bool watched = false;  // in Device::watched
  KernelStatus() = default;
  KernelStatus(const KernelStatus&) = delete;
  KernelStatus& operator=(const KernelStatus&) = delete;
  ~KernelStatus();
};

struct Device {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceFeatures features{};
  VkPhysicalDeviceMemoryProperties mem{};
  uint32_t queue_family = 0;
  // The queue family's timestampValidBits: 0 when its queues cannot write timestamps.
  uint32_t timestamp_bits = 0;
  VkInstance instance = VK_NULL_HANDLE;  // the plugin's one instance (BP_NATIVE_PLATFORM)
  uint32_t subgroup_size = 0;
  uint32_t subgroup_operations = 0;  // VkSubgroupFeatureFlags, when compute has subgroups
  bool has_budget = false;
  bool has_timeline = false;  // the device offers timeline semaphores (Vulkan 1.2)
  // What the target kind's supports_* flags report (Target::FromDevice).
  bool float16 = false, int8 = false, buffer8 = false, buffer16 = false;
  // The atomics kernels may use beyond int32 (KernelLayout::atomics bits), in both storage
  // buffers and shared memory; enabled when the device is opened.
  uint32_t atomics = 0;
  // Float controls (Vulkan 1.2 or VK_KHR_shader_float_controls): whether a shader may ask to
  // keep subnormal floats (shaderDenormPreserveFloat32/64) and signed zeros, infinities and
  // NaNs (shaderSignedZeroInfNanPreserveFloat16/32/64); pipelines then do (WithFloatControls,
  // float_controls.h).
  FloatControls float_controls;
  bool float_controls_extension = false;  // enabled when the device is opened (before 1.2)
  std::set<std::string> extensions;
  // Identity and limits from vkGetPhysicalDeviceProperties2 (QueryIdentity), where the
  // device's version or extensions offer them.
  bool has_uuid = false;
  uint8_t uuid[VK_UUID_SIZE] = {};  // VkPhysicalDeviceIDProperties::deviceUUID (1.1)
  bool has_pci = false;             // VK_EXT_pci_bus_info
  uint32_t pci_domain = 0, pci_bus = 0, pci_device = 0, pci_function = 0;
  uint64_t max_allocation = 0;                  // Maintenance3 (1.1); 0: not reported
  uint32_t min_subgroup = 0, max_subgroup = 0;  // VK_EXT_subgroup_size_control; 0: not
  std::string driver_name, driver_info;         // VkPhysicalDeviceDriverProperties (1.2)
  bool has_conformance = false;                 // the same struct's conformanceVersion
  VkConformanceVersion conformance{};
  std::vector<VkQueueFamilyProperties> queue_families;  // every family, in the driver's order
  launch::DeviceLimits launch_limits;  // props.limits, as the launch kit reads them
  // Created on first use, under mu.
  std::mutex mu;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  DLDevice dl{kDLVulkan, 0};  // this device's id
  Stream null_stream;         // the stream of a null bp_stream_t
  // The plugin's one record of its streams: which Stream objects (from CreateStream) are
  // live on which device, and each thread's active stream (SetStream). Owned by the Context.
  sdk::StreamRegistry* streams = nullptr;
  uint64_t next_stream_id = 1;
  Buffer staging;   // grows on demand, host-visible and mapped
  Use staging_use;  // the last submission that touched the staging buffer
  // The plugin's live data spaces and workspaces (their size, device and kind), owned by the
  // Context: a freed workspace waiting in `workspaces` is not one.
  sdk::HandleTable<Buffer*>* handles = nullptr;
  uint64_t freed = 0;  // data spaces freed so far (DeviceScope::FreedCount)
  // Freed workspaces, each with the last submission of the stream it was freed on: that
  // stream may take it at once, another once the submission is done.
  sdk::WorkspacePool<Buffer*, Use> workspaces;
  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;  // created on first use
  std::string pipeline_cache_path;                  // "" when not kept on disk
  // What the file at pipeline_cache_path holds (as read, or as last written): a save with the
  // same bytes writes nothing (lavapipe's cache data is its 32-byte header, whatever it made).
  std::string pipeline_cache_on_disk;
  // Kernel error records with dispatches queued since they were last read (CheckStatus).
  std::vector<std::shared_ptr<KernelStatus>> watched;
  // Live events (CreateEvent), and the query pools of events freed or recorded again while
  // their timestamp was still queued: destroyed once that submission is done.
  std::set<Event*> events;
  std::vector<std::pair<VkQueryPool, Use>> retired_queries;
};

// Throws Error (BP_ERR_OUT_OF_MEMORY or BP_ERR_DEVICE) naming `what` unless r is VK_SUCCESS.
void CheckVk(VkResult r, const std::string& what);

// ---- streams (stream.cc); the caller holds d.mu for each -----------------------------------

// Makes `s` usable on the opened device `d` (its timeline semaphore).
void InitStream(Device& d, Stream& s);
// Waits for the work of `s`, then frees what it holds; pending waits of other streams on it
// are dropped (they are satisfied).
void DestroyStream(Device& d, Stream& s);
// The stream `stream` names on `d` (the null stream for nullptr), or
// Error(BP_ERR_INVALID_ARGUMENT) naming `what` when it is not a live stream of the device.
Stream& StreamOf(Device& d, void* stream, const std::string& what);
// The calling thread's active stream on `d` (SetStream; the null stream by default), or
// Error(BP_ERR_INVALID_ARGUMENT) naming `what` when another thread freed it since, even if a
// new stream has the freed one's address (sdk::StreamRegistry::Active).
Stream& ActiveStream(Device& d, const std::string& what);
// Every live stream of `d` from CreateStream (not the null stream).
std::vector<Stream*> Streams(const Device& d);
// Records `record` into a command buffer and submits it on `s` after the stream's earlier
// work and its pending waits; returns at once (timeline semaphores) or once it is done.
Use Submit(Device& d, Stream& s, const std::function<void(VkCommandBuffer)>& record);
// Returns once `use` is done.
void Wait(Device& d, const Use& use);
// Returns once every stream's submitted work is done.
void WaitAll(Device& d);
// `dst`'s next submission waits for the work `src` has submitted so far.
void Order(Device& d, Stream& src, Stream& dst);
// `dst`'s next submission waits on the device for `use` (nothing when it is done, its stream
// is freed, or it is `dst`'s own work).
void OrderAfter(Device& d, const Use& use, Stream& dst);
// Whether `use` is done (without waiting).
bool Done(Device& d, const Use& use);
// Destroys the events and retired query pools of `d` (device teardown, after vkDeviceWaitIdle).
void DestroyEvents(Device& d);
// Reads the error records of d.watched whose dispatches are all done: clears each one and
// throws the Error of the first that holds an error (the others stay watched, so a later call
// raises theirs). Records with dispatches still queued are left for a later call.
void CheckStatus(Device& d);

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_CONTEXT_H_
