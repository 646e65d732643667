// SPDX-License-Identifier: Apache-2.0
// A fake accelerator stream: a queue of work run in order by its own worker thread.
//
// Work is numbered as it is submitted; WaitFor(n) returns once the first n items ran, which
// gives stream_sync ("everything submitted before the call") and, queued on another stream,
// sync_stream_from_to (the destination's worker blocks until the source reaches the number
// it had when the call was made). Hold/Release park the worker at a point in its queue so
// tests can prove ordering without relying on timing.
#ifndef BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_STREAM_H_
#define BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_STREAM_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace backplane {
namespace fakeacc {

class Stream {
 public:
  // `name` appears in error messages ("fakeacc:0 stream 0x5e...").
  Stream(int32_t device_id, std::string name);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device_id() const { return device_id_; }
  const std::string& name() const { return name_; }

  // Queues `work`; returns its number (1, 2, ...). Throws after Stop.
  uint64_t Submit(std::function<void()> work);
  // The number of the last item submitted so far.
  uint64_t Submitted() const;
  // Returns once items 1..n have run. With `report_errors`, a failure of queued work is
  // thrown here (once) as BP_ERR_DEVICE naming the stream.
  void WaitFor(uint64_t n, bool report_errors = true);
  // Parks the worker at the current end of the queue until Release.
  void Hold();
  void Release();
  // Releases a hold, runs what is queued and joins the worker. Idempotent.
  void Stop();

  // Every item sleeps this long before it runs (tests: make reordering visible).
  static std::atomic<int64_t> delay_us;

 private:
  void Run();

  const int32_t device_id_;
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  bool held_ = false;
  bool stopping_ = false;
  std::string error_;  // the first failure not reported yet
  std::thread worker_;
};

}  // namespace fakeacc
}  // namespace backplane

#endif  // BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_STREAM_H_
