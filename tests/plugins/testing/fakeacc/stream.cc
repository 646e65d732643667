// SPDX-License-Identifier: Apache-2.0
#include "stream.h"

#include <backplane/sdk/plugin.hpp>
#include <chrono>
#include <exception>
#include <utility>

namespace backplane {
namespace fakeacc {

std::atomic<int64_t> Stream::delay_us{0};

Stream::Stream(int32_t device_id, std::string name)
    : device_id_(device_id), name_(std::move(name)), worker_([this] { Run(); }) {}

Stream::~Stream() { Stop(); }

uint64_t Stream::Submit(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  BACKPLANE_REQUIRE(!stopping_, BP_ERR_INVALID_ARGUMENT,
                    name_ + " is being freed; submit work to a live stream");
  queue_.push_back(std::move(work));
  work_cv_.notify_one();
  return ++submitted_;
}

uint64_t Stream::Submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submitted_;
}

void Stream::WaitFor(uint64_t n, bool report_errors) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return completed_ >= n; });
  if (report_errors && !error_.empty()) {
    std::string message = std::move(error_);
    error_.clear();
    throw Error(BP_ERR_DEVICE, name_ + ": queued work failed: " + message);
  }
}

void Stream::Hold() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  Submit([this] {
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait(lock, [&] { return !held_ || stopping_; });
  });
}

void Stream::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  work_cv_.notify_all();
}

void Stream::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
    held_ = false;
    work_cv_.notify_all();
  }
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

void Stream::Run() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    const int64_t delay = delay_us.load(std::memory_order_relaxed);
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    std::string failure;
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown exception";
    }
    work = nullptr;  // drop captured buffers before reporting completion
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure.empty() && error_.empty()) error_ = failure;
      ++completed_;
    }
    done_cv_.notify_all();
  }
}

}  // namespace fakeacc
}  // namespace backplane
