// SPDX-License-Identifier: Apache-2.0
// Events of the vulkan plugin (ABI 1.6): a point in a stream's work is the value of the
// stream's timeline semaphore that its last submission signals (stream.cc). Recording notes
// that value; where the queue family can write timestamps, it first submits one command
// buffer on the stream that resets the event's query and writes a timestamp after the work
// queued so far, and the mark is that submission's value. Done and Sync read and wait for the
// timeline; StreamWaitEvent makes the waiting stream's next submission wait for the value on
// the device. Everything runs under the device's lock, as the rest of the plugin does.
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "context.h"
#include "device_api.h"

namespace backplane {
namespace vulkan {

namespace {

// Whether `d` can time events: its queue family writes timestamps that tick at a known rate.
bool CanTime(const Device& d) {
  return d.timestamp_bits > 0 && d.props.limits.timestampPeriod > 0.0f;
}

// A query pool of one timestamp query on `d`; the caller holds d.mu.
VkQueryPool NewQueries(Device& d) {
  VkQueryPoolCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = 1;
  VkQueryPool pool = VK_NULL_HANDLE;
  CheckVk(vkCreateQueryPool(d.device, &ci, nullptr, &pool), "vkCreateQueryPool");
  return pool;
}

// Destroys the retired query pools whose timestamp has been written; the caller holds d.mu.
void Reap(Device& d) {
  auto& retired = d.retired_queries;
  for (size_t i = 0; i < retired.size();) {
    if (Done(d, retired[i].second)) {
      vkDestroyQueryPool(d.device, retired[i].first, nullptr);
      retired.erase(retired.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

// The live event `event` of `d`, or Error(BP_ERR_INVALID_ARGUMENT) naming `what`; the caller
// holds d.mu.
Event& EventOf(Device& d, void* event, const char* what) {
  auto* e = static_cast<Event*>(event);
  if (d.events.count(e) == 0) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                std::string("vulkan ") + what + ": " + sdk::PointerString(event) +
                    " is not a live event of " + sdk::DeviceString(d.dl) +
                    " (freed already, made up, or another device's); pass one from "
                    "bp_event_create on that device");
  }
  return *e;
}

// The timestamp `e` holds, in ticks; the caller holds d.mu and the mark is done.
uint64_t Timestamp(Device& d, const Event& e) {
  uint64_t ticks = 0;
  CheckVk(vkGetQueryPoolResults(d.device, e.queries, 0, 1, sizeof(ticks), &ticks, sizeof(ticks),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
  return ticks;
}

}  // namespace

void DestroyEvents(Device& d) {
  for (auto& [pool, use] : d.retired_queries) vkDestroyQueryPool(d.device, pool, nullptr);
  d.retired_queries.clear();
  for (Event* e : d.events) {
    if (e->queries != VK_NULL_HANDLE) vkDestroyQueryPool(d.device, e->queries, nullptr);
    delete e;
  }
  d.events.clear();
}

void* VulkanDeviceAPI::CreateEvent(DLDevice dev) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  Reap(d);
  auto e = std::make_unique<Event>();
  if (CanTime(d)) e->queries = NewQueries(d);
  try {
    d.events.insert(e.get());
  } catch (...) {
    if (e->queries != VK_NULL_HANDLE) vkDestroyQueryPool(d.device, e->queries, nullptr);
    throw;
  }
  return e.release();
}

void VulkanDeviceAPI::FreeEvent(DLDevice dev, void* event) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  Event& e = EventOf(d, event, "FreeEvent");
  d.retired_queries.reserve(d.retired_queries.size() + 1);  // retiring below cannot throw
  d.events.erase(&e);
  std::unique_ptr<Event> owned(&e);
  // A timestamp still queued is written into the pool: it goes once that is done.
  if (e.queries != VK_NULL_HANDLE) {
    if (e.recorded && !Done(d, e.mark)) {
      d.retired_queries.emplace_back(e.queries, e.mark);
    } else {
      vkDestroyQueryPool(d.device, e.queries, nullptr);
    }
  }
  Reap(d);
}

void VulkanDeviceAPI::RecordEvent(DLDevice dev, void* event, bp_stream_t stream) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  Event& e = EventOf(d, event, "RecordEvent");
  Stream& s = StreamOf(d, stream, "RecordEvent");
  Reap(d);
  if (e.queries == VK_NULL_HANDLE) {
    // No timestamps: the mark is the stream's last submission (0, done, when it has none).
    e.mark = Use{s.id, s.submitted};
    e.recorded = true;
    return;
  }
  // Recorded again while the previous timestamp is still queued: that submission would write
  // the query this one resets, so the new mark gets a pool of its own and the old one retires.
  VkQueryPool pool = e.queries;
  VkQueryPool fresh = VK_NULL_HANDLE;
  if (e.recorded && !Done(d, e.mark)) {
    d.retired_queries.reserve(d.retired_queries.size() + 1);  // retiring below cannot throw
    pool = fresh = NewQueries(d);
  }
  Use mark;
  try {
    // After the stream's earlier submissions (its timeline): the timestamp is taken once the
    // work queued so far is done.
    mark = Submit(d, s, [pool](VkCommandBuffer cmd) {
      vkCmdResetQueryPool(cmd, pool, 0, 1);
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 0);
    });
    if (fresh != VK_NULL_HANDLE) d.retired_queries.emplace_back(e.queries, e.mark);
  } catch (...) {
    if (fresh != VK_NULL_HANDLE) vkDestroyQueryPool(d.device, fresh, nullptr);
    throw;  // the event keeps its previous mark
  }
  e.queries = pool;
  e.mark = mark;
  e.recorded = true;
}

void VulkanDeviceAPI::StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  Stream& s = StreamOf(d, stream, "StreamWaitEvent");
  const Event& e = EventOf(d, event, "StreamWaitEvent");
  if (e.recorded) OrderAfter(d, e.mark, s);  // a never-recorded event is passed
}

bool VulkanDeviceAPI::EventDone(DLDevice dev, void* event) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  const Event& e = EventOf(d, event, "EventDone");
  return !e.recorded || Done(d, e.mark);
}

void VulkanDeviceAPI::SyncEvent(DLDevice dev, void* event) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  const Event& e = EventOf(d, event, "SyncEvent");
  if (!e.recorded) return;
  Wait(d, e.mark);
  CheckStatus(d);  // as StreamSync: a kernel's error surfaces here at the latest
}

double VulkanDeviceAPI::EventElapsedMs(DLDevice dev, void* start, void* end) {
  std::unique_lock<std::mutex> lock;
  Device& d = Opened(dev, lock);
  const Event& a = EventOf(d, start, "EventElapsedMs: start");
  const Event& b = EventOf(d, end, "EventElapsedMs: end");
  if (!CanTime(d)) {
    throw Error(BP_ERR_UNSUPPORTED,
                "timing events on " + sdk::DeviceString(dev) + " ('" + d.props.deviceName +
                    "'): its compute queue family has timestampValidBits = " +
                    std::to_string(d.timestamp_bits) +
                    " and timestampPeriod = " + std::to_string(d.props.limits.timestampPeriod) +
                    ", so it cannot write timestamps; events still order streams, time on the "
                    "host around StreamSync instead");
  }
  if (!a.recorded || !b.recorded) {
    throw Error(BP_ERR_INVALID_ARGUMENT, "vulkan EventElapsedMs: the " +
                                             std::string(a.recorded ? "end" : "start") +
                                             " event was never recorded; record both first");
  }
  // The core has waited for both; waiting again costs nothing and keeps the reads defined.
  Wait(d, a.mark);
  Wait(d, b.mark);
  const uint64_t t0 = Timestamp(d, a), t1 = Timestamp(d, b);
  // Only the low timestampValidBits count: the difference is taken modulo 2^bits and read as
  // signed, so an end recorded before its start is negative, as CUDA's is.
  const uint32_t bits = d.timestamp_bits >= 64 ? 64 : d.timestamp_bits;
  uint64_t diff = t1 - t0;
  int64_t ticks = 0;
  if (bits == 64) {
    ticks = static_cast<int64_t>(diff);
  } else {
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    diff &= mask;
    ticks = diff >> (bits - 1) ? static_cast<int64_t>(diff) - static_cast<int64_t>(mask) - 1
                               : static_cast<int64_t>(diff);
  }
  return static_cast<double>(ticks) * d.props.limits.timestampPeriod / 1e6;
}

}  // namespace vulkan
}  // namespace backplane
