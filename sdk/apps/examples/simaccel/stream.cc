// SPDX-License-Identifier: Apache-2.0
#include "stream.h"

#include <backplane/sdk/plugin.hpp>
#include <exception>
#include <utility>

namespace simaccel {

void Event::Signal() {
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    time_ = now;
    done_ = true;
  }
  cv_.notify_all();
}

void Event::Wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
}

Event::Clock::time_point Event::Time() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return time_;
}

bool Event::Done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Stream::Stream(int32_t device_id, std::string name)
    : device_id_(device_id), name_(std::move(name)), worker_([this] { Run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Stream::Submit(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

std::shared_ptr<Event> Stream::Record() {
  auto event = std::make_shared<Event>();
  Submit([event] { event->Signal(); });
  return event;
}

void Stream::WaitFor(std::shared_ptr<Event> event) {
  // The worker blocks here, so nothing queued after it on this stream starts earlier. The
  // event belongs to another stream's worker, which never waits for this one in return
  // unless the caller builds a cycle of waits -- as on real hardware, that would hang.
  Submit([event = std::move(event)] { event->Wait(); });
}

void Stream::Synchronize() {
  Record()->Wait();
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) {
    std::string message = std::move(failure_);
    failure_.clear();
    throw backplane::Error(BP_ERR_DEVICE, name_ + ": queued work failed: " + message);
  }
}

void Stream::Run() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string failure;
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an unknown C++ exception";
    }
    work = nullptr;  // release what the work held (buffers, events) before going on
    if (!failure.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (failure_.empty()) failure_ = std::move(failure);
    }
  }
}

}  // namespace simaccel
