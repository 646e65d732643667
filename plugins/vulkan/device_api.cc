// SPDX-License-Identifier: Apache-2.0
// device_api.vulkan over the Vulkan loader. One VkDevice per physical device, created on
// first use, with one compute queue. Copies and kernels are submitted on a stream
// (stream.cc) and return without waiting, except where the host must see the bytes
// (device -> host copies); StreamSync waits for a stream, SyncStreamFromTo orders two.
#include "device_api.h"

#include <unistd.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <backplane/sdk/disk_cache.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "context.h"
#include "emitter.h"
#include "instance.h"
#include "spirv_cache.h"

namespace backplane {
namespace vulkan {

VulkanDeviceAPI::VulkanDeviceAPI()
    : sdk::DeviceAPI(Entries{.events = true, .native_handles = true, .wrap_native = true}) {}

Device& VulkanDeviceAPI::Opened(DLDevice dev, std::unique_lock<std::mutex>& lock) {
  Device& d = Ctx().Dev(dev);
  lock = std::unique_lock<std::mutex>(d.mu);
  Ctx().Open(d);
  return d;
}

VulkanDeviceAPI* VulkanDeviceAPI::Global() {
  static VulkanDeviceAPI* api = new VulkanDeviceAPI();
  return api;
}

// ---- DeviceScope ---------------------------------------------------------------------------

VkDevice DeviceScope::device() const { return d_->device; }
const VkPhysicalDeviceProperties& DeviceScope::properties() const { return d_->props; }
bool DeviceScope::shader_int64() const { return d_->features.shaderInt64 == VK_TRUE; }
bool DeviceScope::shader_float64() const { return d_->features.shaderFloat64 == VK_TRUE; }
bool DeviceScope::float16() const { return d_->float16 && d_->buffer16; }
uint32_t DeviceScope::atomics() const { return d_->atomics; }
const FloatControls& DeviceScope::float_controls() const { return d_->float_controls; }

namespace {

std::atomic<int64_t> g_cache_loaded{0};
std::atomic<int64_t> g_cache_loaded_bytes{0};
std::atomic<int64_t> g_cache_ignored{0};
std::atomic<int64_t> g_cache_writes{0};
std::atomic<int64_t> g_pipelines{0};
std::atomic<int64_t> g_pipeline_ns{0};

// Whether `data` starts with the header of this device's pipeline cache data
// (VkPipelineCacheHeaderVersionOne: its size, version one, vendor, device, pipelineCacheUUID).
// The driver must ignore a foreign header, but it is checked here first: a file of another
// driver build is never handed over.
bool IsCacheOf(const std::string& data, const VkPipelineCacheHeaderVersionOne& want) {
  VkPipelineCacheHeaderVersionOne h{};
  if (data.size() < sizeof(h)) return false;
  std::memcpy(&h, data.data(), sizeof(h));
  return h.headerSize >= sizeof(h) && h.headerSize <= data.size() &&
         h.headerVersion == want.headerVersion && h.vendorID == want.vendorID &&
         h.deviceID == want.deviceID &&
         std::memcmp(h.pipelineCacheUUID, want.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

}  // namespace

PipelineCacheStats GetPipelineCacheStats() {
  PipelineCacheStats s;
  s.loaded = g_cache_loaded.load();
  s.loaded_bytes = g_cache_loaded_bytes.load();
  s.ignored = g_cache_ignored.load();
  s.writes = g_cache_writes.load();
  s.pipelines = g_pipelines.load();
  s.pipeline_ns = g_pipeline_ns.load();
  return s;
}

VkPipelineCache DeviceScope::PipelineCache() {
  if (d_->pipeline_cache != VK_NULL_HANDLE) return d_->pipeline_cache;
  // $XDG_CACHE_HOME/backplane/vulkan (else ~/.cache/...), private; "" keeps it in memory.
  const std::string dir = CacheDir();
  std::string initial;
  if (!dir.empty()) {
    // One file per device model and driver build: the UUID changes with the driver.
    char uuid[2 * VK_UUID_SIZE + 1] = {};
    for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) {
      std::snprintf(uuid + 2 * i, 3, "%02x", d_->props.pipelineCacheUUID[i]);
    }
    d_->pipeline_cache_path = dir + "/" + std::to_string(d_->props.vendorID) + "-" +
                              std::to_string(d_->props.deviceID) + "-" + uuid + ".bin";
    // A checksummed entry: a truncated or damaged file is never handed to the driver, nor one
    // whose header is not this device's.
    VkPipelineCacheHeaderVersionOne want{};
    want.headerVersion = VK_PIPELINE_CACHE_HEADER_VERSION_ONE;
    want.vendorID = d_->props.vendorID;
    want.deviceID = d_->props.deviceID;
    std::memcpy(want.pipelineCacheUUID, d_->props.pipelineCacheUUID, VK_UUID_SIZE);
    if (!sdk::ReadCacheEntry(d_->pipeline_cache_path, &initial) || !IsCacheOf(initial, want)) {
      if (access(d_->pipeline_cache_path.c_str(), F_OK) == 0) ++g_cache_ignored;
      initial.clear();
    }
  }
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  if (vkCreatePipelineCache(d_->device, &ci, nullptr, &d_->pipeline_cache) != VK_SUCCESS) {
    // The driver refused the data: start empty.
    if (!initial.empty()) ++g_cache_ignored;
    initial.clear();
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    CheckVk(vkCreatePipelineCache(d_->device, &ci, nullptr, &d_->pipeline_cache),
            "vkCreatePipelineCache");
  }
  if (!initial.empty()) {
    ++g_cache_loaded;
    g_cache_loaded_bytes += static_cast<int64_t>(initial.size());
  }
  d_->pipeline_cache_on_disk = std::move(initial);
  return d_->pipeline_cache;
}

void DeviceScope::SavePipelineCache() {
  if (d_->pipeline_cache == VK_NULL_HANDLE || d_->pipeline_cache_path.empty()) return;
  size_t size = 0;
  if (vkGetPipelineCacheData(d_->device, d_->pipeline_cache, &size, nullptr) != VK_SUCCESS) return;
  std::string data(size, '\0');
  if (vkGetPipelineCacheData(d_->device, d_->pipeline_cache, &size, data.data()) != VK_SUCCESS) {
    return;
  }
  data.resize(size);
  // Unchanged data is not written again: a process whose pipelines all came from the file
  // writes nothing (a write cost 0.25-0.4 ms per new pipeline here, docs/performance.md).
  if (data == d_->pipeline_cache_on_disk) return;
  if (sdk::WriteCacheEntry(d_->pipeline_cache_path, data)) {  // atomic; best effort
    ++g_cache_writes;
    d_->pipeline_cache_on_disk = std::move(data);
  }
}

VkPipeline DeviceScope::CreateComputePipeline(const VkComputePipelineCreateInfo& ci,
                                              const std::string& what) {
  VkPipelineCache cache = PipelineCache();
  VkPipeline pipeline = VK_NULL_HANDLE;
  const auto t0 = std::chrono::steady_clock::now();
  const VkResult r = vkCreateComputePipelines(d_->device, cache, 1, &ci, nullptr, &pipeline);
  g_pipeline_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  CheckVk(r, "vkCreateComputePipelines for " + what);
  ++g_pipelines;
  SavePipelineCache();
  return pipeline;
}

VkBuffer DeviceScope::Resolve(void* handle, uint64_t offset, uint64_t nbytes,
                              const std::function<std::string()>& what) {
  // Every launch resolves each buffer: `what` is built only for a message.
  try {
    return d_->handles->Resolve(dev_, handle, offset, nbytes, std::string()).info->buffer;
  } catch (const Error& e) {
    throw Error(e.kind(), "vulkan: " + what() + ": " + e.what());
  }
}

uint64_t DeviceScope::FreedCount() const { return d_->freed; }

Use DeviceScope::Submit(const std::function<void(VkCommandBuffer)>& record) {
  return vulkan::Submit(*d_, ActiveStream(*d_, "kernel launch"), record);
}

void DeviceScope::Wait(const Use& use) { vulkan::Wait(*d_, use); }

void DeviceScope::WaitIdle() { WaitAll(*d_); }

KernelStatus::~KernelStatus() {
  if (buffer.buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer.buffer, nullptr);
  if (buffer.memory != VK_NULL_HANDLE) vkFreeMemory(device, buffer.memory, nullptr);
}

std::shared_ptr<KernelStatus> DeviceScope::NewKernelStatus(
    std::function<void(const uint32_t*)> raise) {
  auto st = std::make_shared<KernelStatus>();
  st->device = d_->device;
  st->raise = std::move(raise);
  ctx_->Create(*d_, st->buffer, kStatusBufferWords * sizeof(uint32_t), /*host_visible=*/true);
  std::memset(st->buffer.mapped, 0, kStatusBufferWords * sizeof(uint32_t));
  return st;
}

void DeviceScope::Watch(const std::shared_ptr<KernelStatus>& status, const Use& use) {
  bool replaced = false;
  for (Use& u : status->pending) {
    if (u.stream == use.stream) {
      u.value = std::max(u.value, use.value);  // a stream's work completes in order
      replaced = true;
    }
  }
  if (!replaced) status->pending.push_back(use);
  if (!status->watched) {
    status->watched = true;
    d_->watched.push_back(status);
  }
}

void DeviceScope::CheckStatus() { vulkan::CheckStatus(*d_); }

void VulkanDeviceAPI::WithDevice(DLDevice dev, const std::function<void(DeviceScope&)>& fn) {
  Context& ctx = Ctx();
  Device& d = ctx.Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  ctx.Open(d);
  DeviceScope scope(&ctx, &d, dev);
  fn(scope);
}

int32_t VulkanDeviceAPI::DeviceCount() { return static_cast<int32_t>(Ctx().count()); }

launch::Allocation VulkanDeviceAPI::FindDataSpace(DLDevice dev, void* handle) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  const auto e = d.handles->Get(dev, handle, "");
  return {e.info, 0, e.size};
}

const launch::DeviceLimits& VulkanDeviceAPI::LaunchLimits(DLDevice dev) {
  return Ctx().Dev(dev).launch_limits;
}

Context& VulkanDeviceAPI::Ctx() {
  static std::once_flag once;
  std::call_once(once, [this] { ctx_ = std::make_unique<Context>(); });
  return *ctx_;
}

void VulkanDeviceAPI::SetDevice(DLDevice dev) { Ctx().Dev(dev); }

bp_stream_t VulkanDeviceAPI::CreateStream(DLDevice dev) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Ctx().Open(d);
  auto s = std::make_unique<Stream>();
  s->id = d.next_stream_id++;
  InitStream(d, *s);
  d.streams->Add(s.get(), dev);
  return s.release();
}

void VulkanDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  if (stream == nullptr) return;
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Stream& s = StreamOf(d, stream, "FreeStream");
  // Forgotten first: a thread whose active stream this was gets an error at its next launch,
  // even when a later CreateStream returns the same address.
  d.streams->Remove(stream);
  DestroyStream(d, s);  // waits for its work first
  delete &s;
}

void VulkanDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  StreamOf(d, stream, "SetStream");
  d.streams->SetActive(dev, stream);
}

void VulkanDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Stream& s = StreamOf(d, stream, "StreamSync");
  Wait(d, Use{s.id, s.submitted});
  CheckStatus(d);  // a kernel's error surfaces here at the latest
}

void VulkanDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  Device& d = Ctx().Dev(dev);
  std::lock_guard<std::mutex> lock(d.mu);
  Order(d, StreamOf(d, src, "SyncStreamFromTo: source"),
        StreamOf(d, dst, "SyncStreamFromTo: destination"));
}

}  // namespace vulkan
}  // namespace backplane
