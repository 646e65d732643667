// SPDX-License-Identifier: Apache-2.0
// Plugin-author helper for a DeviceAPI whose streams are handles of the vendor API (a
// CUstream, a cl_command_queue): which handles are live streams of which device, and each
// thread's active stream per device (SetStream). It checks every handle a caller passes with
// one set of messages, and it notices a thread's active stream being freed by another thread,
// even when the vendor API hands the same handle out again for a new stream.
//
//   sdk::StreamRegistry streams_{"opencl"};
//   bp_stream_t CreateStream(DLDevice dev) { ...; streams_.Add(q, dev); return q; }
//   void FreeStream(DLDevice dev, bp_stream_t s) { streams_.Check(dev, s); ...;
//                                                  streams_.Remove(s); }
//   void SetStream(DLDevice dev, bp_stream_t s) { streams_.SetActive(dev, s); }
//   cl_command_queue q = static_cast<cl_command_queue>(streams_.Active(dev));  // at a launch
//
// A plugin whose streams are objects of its own (the vulkan plugin's) keeps no list of them
// beside the registry: ForEach visits a device's live streams.
//
// Thread-safe. Header-only, in Backplane::sdk (it includes backplane/sdk/plugin.hpp): it calls
// the core through the host table, and a plugin never links libbackplane (docs/plugin-guide.md).
#ifndef BACKPLANE_SDK_STREAM_REGISTRY_HPP_
#define BACKPLANE_SDK_STREAM_REGISTRY_HPP_

#include <atomic>
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace backplane {
namespace sdk {

class StreamRegistry {
 public:
  // `backend` names the streams in messages ("cuda", "opencl").
  explicit StreamRegistry(std::string backend)
      : backend_(std::move(backend)), id_(NextGeneration()) {}
  StreamRegistry(const StreamRegistry&) = delete;
  StreamRegistry& operator=(const StreamRegistry&) = delete;

  // Records `stream`, just created on `dev`, as live.
  void Add(bp_stream_t stream, DLDevice dev) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[stream] = Entry{dev.device_id, NextGeneration()};
  }

  // `stream` if it is null (the device's null stream) or a live stream of `dev`; otherwise
  // throws Error(BP_ERR_INVALID_ARGUMENT) saying which and what to pass instead.
  bp_stream_t Check(DLDevice dev, bp_stream_t stream) const {
    if (stream == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    CheckLocked(dev, stream);
    return stream;
  }

  // Forgets `stream` (call it once the vendor handle is released, or about to be). If it was
  // the calling thread's active stream, the null stream is active again; every other thread
  // whose active stream it was gets an error at its next Active() on that device.
  void Remove(bp_stream_t stream) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(stream);
    }
    auto& slots = Slots();
    for (auto it = slots.begin(); it != slots.end();) {
      it = it->first.first == id_ && it->second.stream == stream ? slots.erase(it) : ++it;
    }
  }

  // Calls f(stream) for every live stream of `dev`, in no particular order, holding the
  // registry's lock: `f` must not call the registry.
  template <typename F>
  void ForEach(DLDevice dev, F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [stream, entry] : live_) {
      if (entry.device_id == dev.device_id) f(stream);
    }
  }

  // Makes `stream` (null: the null stream) this thread's active stream on `dev`, after Check.
  void SetActive(DLDevice dev, bp_stream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream == nullptr) {
      Slots().erase(Key(id_, dev.device_id));
      return;
    }
    CheckLocked(dev, stream);
    Slots()[Key(id_, dev.device_id)] = ActiveSlot{stream, live_.at(stream).generation};
  }

  // This thread's active stream on `dev` (null: the null stream). Throws
  // Error(BP_ERR_INVALID_ARGUMENT) if that stream has been freed since SetActive, so work
  // never lands on a stream the caller no longer owns.
  bp_stream_t Active(DLDevice dev) const {
    auto& slots = Slots();
    auto it = slots.find(Key(id_, dev.device_id));
    if (it == slots.end()) return nullptr;
    const ActiveSlot active = it->second;
    std::lock_guard<std::mutex> lock(mu_);
    auto live = live_.find(active.stream);
    if (live == live_.end() || live->second.generation != active.generation) {
      slots.erase(it);
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "this thread's active " + backend_ + " stream on " + DeviceString(dev) + " (" +
                      PointerString(active.stream) +
                      ") has been freed; call set_stream with a live stream, or null for "
                      "the null stream, before queuing more work");
    }
    return active.stream;
  }

 private:
  struct Entry {
    int32_t device_id;
    uint64_t generation;  // tells a handle the vendor reused apart from the freed one
  };
  struct ActiveSlot {
    bp_stream_t stream;
    uint64_t generation;
  };
  using Key = std::pair<uint64_t, int32_t>;  // registry id, device id
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.first) * 31u + std::hash<int32_t>()(k.second);
    }
  };

  // Unique across the registries and streams of the plugin, so a thread's slot never matches
  // a stream, or a registry, it did not name (a registry made where a destroyed one was).
  static uint64_t NextGeneration() {
    static std::atomic<uint64_t> next{0};
    return ++next;
  }

  // The calling thread's active streams, of every registry of this plugin.
  static std::unordered_map<Key, ActiveSlot, KeyHash>& Slots() {
    thread_local std::unordered_map<Key, ActiveSlot, KeyHash> slots;
    return slots;
  }

  void CheckLocked(DLDevice dev, bp_stream_t stream) const {
    auto it = live_.find(stream);
    BACKPLANE_REQUIRE(it != live_.end(), BP_ERR_INVALID_ARGUMENT,
                      PointerString(stream) + " is not a live " + backend_ +
                          " stream (freed already, or another backend's); pass a stream from "
                          "create_stream or the null stream");
    BACKPLANE_REQUIRE(it->second.device_id == dev.device_id, BP_ERR_INVALID_ARGUMENT,
                      "stream " + PointerString(stream) + " belongs to " + backend_ + ":" +
                          std::to_string(it->second.device_id) + ", not " + DeviceString(dev) +
                          "; use a stream of the device the work runs on");
  }

  std::string backend_;
  const uint64_t id_;  // keys this registry's slots in every thread's map
  mutable std::mutex mu_;
  std::unordered_map<bp_stream_t, Entry> live_;
};

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_STREAM_REGISTRY_HPP_
