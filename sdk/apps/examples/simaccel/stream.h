// SPDX-License-Identifier: Apache-2.0
// simaccel's streams and events: the asynchronous half of a DeviceAPI.
//
// A Stream is a queue of work that its own worker thread runs in order, as a hardware queue
// would. Submitting returns at once. An Event marks a point in a stream: it completes when
// everything queued before it has run. With the two, the DeviceAPI's stream operations are short:
//   StreamSync(s)            s.Record()->Wait()        the caller waits for s's work so far
//   SyncStreamFromTo(a, b)   b.WaitFor(a.Record())     b's later work waits for a's work so far
// which is how CUDA spells them too (cudaEventRecord, cudaStreamWaitEvent). The events a host
// makes (bp_event_create) are marks of this kind: device_api.cc, "events".
#ifndef SIMACCEL_STREAM_H_
#define SIMACCEL_STREAM_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace simaccel {

// A one-shot completion flag: Signal once, Wait any number of times from any thread. It keeps
// the time it was signalled, which for a mark in a stream (Stream::Record) is when the stream's
// worker got there: the device's clock, as a GPU's event timestamp is.
class Event {
 public:
  using Clock = std::chrono::steady_clock;

  void Signal();
  void Wait() const;
  bool Done() const;
  // When Signal ran; waits for it first.
  Clock::time_point Time() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  Clock::time_point time_;
};

class Stream {
 public:
  // `device_id` is the device it belongs to; `name` appears in messages
  // ("simaccel:0 stream 0x5e..."). Starts the worker thread.
  Stream(int32_t device_id, std::string name);
  // Runs what is queued, then stops the worker.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device_id() const { return device_id_; }
  const std::string& name() const { return name_; }

  // Queues `work`; it runs after everything queued before it. An exception it throws is kept
  // and reported by the next Synchronize (the stream goes on with the next item).
  void Submit(std::function<void()> work);
  // An event that completes once everything queued so far has run.
  std::shared_ptr<Event> Record();
  // Work queued after this call waits until `event` completes.
  void WaitFor(std::shared_ptr<Event> event);
  // Blocks the caller until everything queued so far has run. Throws BP_ERR_DEVICE with
  // the first failure of queued work since the last Synchronize, naming the stream.
  void Synchronize();

 private:
  void Run();

  const int32_t device_id_;
  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::string failure_;  // the first failure not reported yet
  std::thread worker_;   // last: starts after the members it uses exist
};

}  // namespace simaccel

#endif  // SIMACCEL_STREAM_H_
