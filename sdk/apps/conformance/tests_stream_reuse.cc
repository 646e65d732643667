// SPDX-License-Identifier: Apache-2.0
// A stream freed while it is a thread's active stream (BP-PLUGIN-8): thread A makes a stream
// active; another thread frees it and creates streams until the plugin hands the same handle
// out again (a vendor API or an allocator may: the vulkan plugin's streams were heap objects
// whose address came back); then A calls generated code. That call must fail with an error:
// its work may go neither to the freed stream nor to the other thread's new stream, which is
// where a plugin that keeps each thread's active stream as a bare handle sends it.
// sdk::StreamRegistry gives a plugin this behaviour.
#include <backplane/backplane.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/runner.hpp>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

// Streams created on the other thread until the freed handle comes back, at most.
constexpr int kMaxCreates = 64;

std::string StreamText(bp_stream_t s) { return "stream " + Hex(reinterpret_cast<uintptr_t>(s), 1); }

void ActiveStreamFreed(Context& ctx) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  if (ctx.api->set_stream == nullptr) Skip("the DeviceAPI has no set_stream");
  const kernels::Case* c = kernels::Find(RunsCpuCode(ctx.dev) ? "vector_add" : "vector_add_gpu");
  if (c == nullptr) Fail("the kernel catalog has no vector_add");
  Module m;
  try {
    m = Build(runner::KernelSource(*c), Target::FromDevice(Device(ctx.dev), kinds.front()));
  } catch (const Error& e) {
    SkipIfRefused(e, "building " + c->func + " for kind " + kinds.front());
    Fail("building " + c->func + " for kind " + kinds.front() + " failed: " + e.what());
  }
  const Function f = m.GetFunction(c->func);
  std::vector<kernels::Arg> args = c->make_args({{"n", int64_t{1000}}}, 13);
  std::vector<kernels::Arg> want = args;
  c->reference(want);
  const runner::DeviceArgs dargs(args, Device(ctx.dev));
  auto call = [&] {
    f.CallPacked(dargs.values().data(), static_cast<int32_t>(dargs.values().size()));
  };

  bp_stream_t active = nullptr;
  CheckCall(bp_device_stream_create(ctx.dev, &active), "create_stream");
  if (active == nullptr) Skip("single-queue device: generated code has only the null stream");

  // Thread A: set_stream(active); wait for the other thread; call; then set_stream(null) and
  // call again, which must work.
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;  // 1: A's stream is active; 2: it was freed and maybe handed out again
  std::string set_error, call_error, recovery_error;
  bool call_ok = false;
  std::thread a([&] {
    const bp_status_t st = bp_device_stream_set(ctx.dev, active);
    if (st != BP_OK) set_error = TakeError(st);
    std::unique_lock<std::mutex> lock(mu);
    phase = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return phase == 2; });
    lock.unlock();
    if (!set_error.empty()) return;
    try {
      call();
      call_ok = true;
    } catch (const Error& e) {
      call_error = e.what();
    }
    const bp_status_t reset = bp_device_stream_set(ctx.dev, nullptr);
    if (reset != BP_OK) {
      recovery_error = "set_stream(null) failed: " + TakeError(reset);
      return;
    }
    try {
      call();
    } catch (const Error& e) {
      recovery_error = std::string("the call on the null stream failed: ") + e.what();
    }
  });
  // Releases thread A and joins it however this thread leaves.
  struct Release {
    std::mutex& mu;
    std::condition_variable& cv;
    int& phase;
    std::thread& a;
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(mu);
        phase = 2;
      }
      cv.notify_all();
      a.join();
    }
  };
  std::vector<bp_stream_t> made;
  int reused_at = 0;
  {
    Release release{mu, cv, phase, a};
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return phase == 1; });
    }
    if (!set_error.empty()) Fail("set_stream(a created stream) on thread A failed: " + set_error);
    CheckCall(bp_device_stream_free(ctx.dev, active), "free_stream(thread A's active stream)");
    for (int i = 1; i <= kMaxCreates && reused_at == 0; ++i) {
      bp_stream_t s = nullptr;
      CheckCall(bp_device_stream_create(ctx.dev, &s), "create_stream");
      made.push_back(s);
      if (s == active) reused_at = i;
    }
  }
  for (bp_stream_t s : made) bp_device_stream_free(ctx.dev, s);
  ctx.Detail(reused_at != 0 ? "create_stream handed the freed " + StreamText(active) +
                                  " out again on call " + std::to_string(reused_at)
                            : "create_stream did not hand the freed " + StreamText(active) +
                                  " out again in " + std::to_string(kMaxCreates) + " calls");
  if (call_ok) {
    Fail("thread A's active " + StreamText(active) + " was freed by another thread" +
         (reused_at != 0 ? ", which then got the same handle for a new stream" : "") +
         "; A's next call of " + c->func + " succeeded, so its work went to " +
         (reused_at != 0 ? "the other thread's new stream" : "a stream A did not choose") +
         ". A launch on an active stream that was freed must fail with an error "
         "(sdk::StreamRegistry does this)");
  }
  ctx.Detail("the call on the freed active stream failed: " + call_error);
  if (!recovery_error.empty()) {
    Fail("after its active stream was freed and the call refused, thread A could not go on: " +
         recovery_error);
  }
  // The call on the null stream computed the right output.
  Sync(ctx.dev, nullptr, "the null stream");
  dargs.Download(&args);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_output) continue;
    const double e = kernels::RelativeError(args[i], want[i]);
    if (!(e <= c->tolerance)) {
      Fail(c->func + " on the null stream, after the refused call, has relative error " +
           std::to_string(e));
    }
  }
}

}  // namespace

void AddStreamReuseTests(std::vector<TestCase>* out) {
  out->push_back({"codegen.active_stream_freed",
                  "a stream another thread freed is never a thread's active stream: that "
                  "thread's next launch fails, even when the plugin hands the handle out again",
                  "BP-PLUGIN-8", kNeedsDevice | kNeedsCodegen | kNeedsStreams, ActiveStreamFreed});
}

}  // namespace conformance
}  // namespace backplane
