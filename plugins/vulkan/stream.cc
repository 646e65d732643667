// SPDX-License-Identifier: Apache-2.0
// Streams of the vulkan plugin: each is a chain of submissions on the device's one queue,
// ordered by the stream's timeline semaphore (a submission waits for the value its
// predecessor signals, which also makes that one's writes visible). Submitting returns at
// once; StreamSync waits on the host for the last value; SyncStreamFromTo makes the next
// submission of one stream wait for another's value on the device. Command buffers are
// recycled once the timeline passes their value.
#include <algorithm>
#include <backplane/sdk/plugin.hpp>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "context.h"

namespace backplane {
namespace vulkan {

namespace {

// How far the timeline of `s` has got.
uint64_t Completed(Device& d, Stream& s) {
  if (s.timeline == VK_NULL_HANDLE) return s.submitted;  // submissions were waited for
  uint64_t value = 0;
  CheckVk(vkGetSemaphoreCounterValue(d.device, s.timeline, &value), "vkGetSemaphoreCounterValue");
  return value;
}

// Waits on the host until the timeline of `s` reaches `value`.
void WaitValue(Device& d, Stream& s, uint64_t value) {
  if (s.timeline == VK_NULL_HANDLE || value == 0) return;
  VkSemaphoreWaitInfo wi{};
  wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wi.semaphoreCount = 1;
  wi.pSemaphores = &s.timeline;
  wi.pValues = &value;
  CheckVk(vkWaitSemaphores(d.device, &wi, UINT64_MAX), "vkWaitSemaphores");
}

// The stream with id `id` on `d`, or null once it is freed.
Stream* Find(Device& d, uint64_t id) {
  if (id == 0) return &d.null_stream;
  Stream* found = nullptr;
  d.streams->ForEach(d.dl, [&found, id](bp_stream_t s) {
    if (static_cast<Stream*>(s)->id == id) found = static_cast<Stream*>(s);
  });
  return found;
}

// `call` with an Error of the registry worded as the plugin's: "vulkan <what>: ...".
template <typename Call>
auto Named(const std::string& what, Call call) {
  try {
    return call();
  } catch (const Error& e) {
    throw Error(e.kind(), "vulkan " + what + ": " + e.what());
  }
}

}  // namespace

void InitStream(Device& d, Stream& s) {
  if (!d.has_timeline || s.timeline != VK_NULL_HANDLE) return;
  VkSemaphoreTypeCreateInfo type{};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  ci.pNext = &type;
  CheckVk(vkCreateSemaphore(d.device, &ci, nullptr, &s.timeline), "vkCreateSemaphore");
}

void DestroyStream(Device& d, Stream& s) {
  if (d.device == VK_NULL_HANDLE) return;
  WaitValue(d, s, s.submitted);
  // The timeline reaching its last value does not mean the driver is done with the stream's
  // semaphore and command buffers: lavapipe's queue thread still touches them after
  // signalling (destroying them then crashed device.concurrency.threads about once in 30
  // runs). An idle queue has let go of every submission.
  if (s.submitted > 0) CheckVk(vkQueueWaitIdle(d.queue), "vkQueueWaitIdle");
  std::vector<VkCommandBuffer> cmds = std::move(s.idle);
  for (const auto& [cmd, value] : s.in_flight) cmds.push_back(cmd);
  s.in_flight.clear();
  if (!cmds.empty()) {
    vkFreeCommandBuffers(d.device, d.pool, static_cast<uint32_t>(cmds.size()), cmds.data());
  }
  if (s.timeline != VK_NULL_HANDLE) {
    auto drop = [&s](Stream& other) {
      auto& w = other.waits;
      for (size_t i = 0; i < w.size();) {
        if (w[i].first == s.timeline) {
          w.erase(w.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    };
    drop(d.null_stream);
    for (Stream* other : Streams(d)) drop(*other);
    vkDestroySemaphore(d.device, s.timeline, nullptr);
    s.timeline = VK_NULL_HANDLE;
  }
}

std::vector<Stream*> Streams(const Device& d) {
  std::vector<Stream*> out;
  d.streams->ForEach(d.dl, [&out](bp_stream_t s) { out.push_back(static_cast<Stream*>(s)); });
  return out;
}

Stream& StreamOf(Device& d, void* stream, const std::string& what) {
  if (stream == nullptr) return d.null_stream;
  Named(what, [&] { return d.streams->Check(d.dl, stream); });
  return *static_cast<Stream*>(stream);
}

Stream& ActiveStream(Device& d, const std::string& what) {
  bp_stream_t active = Named(what, [&] { return d.streams->Active(d.dl); });
  return active == nullptr ? d.null_stream : *static_cast<Stream*>(active);
}

Use Submit(Device& d, Stream& s, const std::function<void(VkCommandBuffer)>& record) {
  // Recycle the command buffers the timeline has passed.
  const uint64_t done = s.in_flight.empty() ? 0 : Completed(d, s);
  while (!s.in_flight.empty() && s.in_flight.front().second <= done) {
    s.idle.push_back(s.in_flight.front().first);
    s.in_flight.pop_front();
  }
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  if (s.idle.empty()) {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = d.pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    CheckVk(vkAllocateCommandBuffers(d.device, &ai, &cmd), "vkAllocateCommandBuffers");
  } else {
    cmd = s.idle.back();
    s.idle.pop_back();
  }
  // Until it is in flight, the buffer goes back to the idle list, reset, on any error (a
  // buffer left recording could not be begun again).
  bool submitted = false;
  struct Keep {
    Stream& s;
    VkCommandBuffer cmd;
    const bool& submitted;
    ~Keep() {
      if (submitted) return;
      vkResetCommandBuffer(cmd, 0);
      s.idle.push_back(cmd);
    }
  } keep{s, cmd, submitted};
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  CheckVk(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  record(cmd);
  CheckVk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  const uint64_t value = s.submitted + 1;
  if (s.timeline == VK_NULL_HANDLE) {
    // No timeline semaphores: each submission is done before the next (ordered trivially).
    CheckVk(vkQueueSubmit(d.queue, 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
    CheckVk(vkQueueWaitIdle(d.queue), "vkQueueWaitIdle");
  } else {
    std::vector<VkSemaphore> wait_sems;
    std::vector<uint64_t> wait_values;
    // The stream's previous submission, unless it was seen done above (its command
    // buffer was recycled).
    if (!s.in_flight.empty()) {
      wait_sems.push_back(s.timeline);
      wait_values.push_back(s.submitted);
    }
    for (const auto& [sem, v] : s.waits) {
      wait_sems.push_back(sem);
      wait_values.push_back(v);
    }
    const std::vector<VkPipelineStageFlags> stages(wait_sems.size(),
                                                   VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    VkTimelineSemaphoreSubmitInfo ti{};
    ti.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    ti.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
    ti.pWaitSemaphoreValues = wait_values.data();
    ti.signalSemaphoreValueCount = 1;
    ti.pSignalSemaphoreValues = &value;
    si.pNext = &ti;
    si.waitSemaphoreCount = static_cast<uint32_t>(wait_sems.size());
    si.pWaitSemaphores = wait_sems.data();
    si.pWaitDstStageMask = stages.data();
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &s.timeline;
    CheckVk(vkQueueSubmit(d.queue, 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
  }
  submitted = true;
  s.waits.clear();
  s.submitted = value;
  s.in_flight.emplace_back(cmd, value);
  return Use{s.id, value};
}

void Wait(Device& d, const Use& use) {
  if (Stream* s = Find(d, use.stream)) WaitValue(d, *s, use.value);
}

void WaitAll(Device& d) {
  WaitValue(d, d.null_stream, d.null_stream.submitted);
  for (Stream* s : Streams(d)) WaitValue(d, *s, s->submitted);
}

void Order(Device& d, Stream& src, Stream& dst) {
  if (&src == &dst || src.submitted == 0 || src.timeline == VK_NULL_HANDLE) return;
  if (Completed(d, src) >= src.submitted) return;  // nothing left to wait for
  dst.waits.emplace_back(src.timeline, src.submitted);
}

void OrderAfter(Device& d, const Use& use, Stream& dst) {
  Stream* src = Find(d, use.stream);
  if (src == nullptr || src == &dst || use.value == 0 || src->timeline == VK_NULL_HANDLE) return;
  if (Completed(d, *src) >= use.value) return;  // nothing left to wait for
  dst.waits.emplace_back(src->timeline, use.value);
}

bool Done(Device& d, const Use& use) {
  Stream* s = Find(d, use.stream);
  return s == nullptr || Completed(d, *s) >= use.value;
}

void CheckStatus(Device& d) {
  std::vector<std::shared_ptr<KernelStatus>> finished;
  for (size_t i = 0; i < d.watched.size();) {
    KernelStatus& st = *d.watched[i];
    st.pending.erase(std::remove_if(st.pending.begin(), st.pending.end(),
                                    [&d](const Use& u) { return Done(d, u); }),
                     st.pending.end());
    if (st.pending.empty()) {
      st.watched = false;
      finished.push_back(std::move(d.watched[i]));
      d.watched.erase(d.watched.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < finished.size(); ++i) {
    auto* words = static_cast<uint32_t*>(finished[i]->buffer.mapped);
    if (words[0] == 0) continue;
    uint32_t record[kStatusWords];
    std::memcpy(record, words, sizeof(record));
    std::memset(words, 0, sizeof(record));
    // The records not read yet stay watched (with no dispatch pending) for the next call.
    for (size_t j = i + 1; j < finished.size(); ++j) {
      finished[j]->watched = true;
      d.watched.push_back(std::move(finished[j]));
    }
    finished[i]->raise(record);
  }
}

}  // namespace vulkan
}  // namespace backplane
