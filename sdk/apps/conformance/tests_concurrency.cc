// SPDX-License-Identifier: Apache-2.0
// Concurrency (BP-PLUGIN-9): several threads allocating, copying, querying and syncing at
// once, each on its own stream or all on the null stream.
#include <atomic>
#include <backplane/backplane.hpp>
#include <mutex>
#include <random>
#include <thread>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

constexpr int kThreads = 4;
constexpr int kIterations = 40;

// Runs `body(thread index)` on kThreads threads at once and fails with the first failure.
template <typename Body>
void OnThreads(const Body& body) {
  std::mutex mu;
  std::string problem;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      try {
        body(t);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (problem.empty()) problem = "thread " + std::to_string(t) + ": " + e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!problem.empty())
    Fail(problem + " (" + std::to_string(kThreads) + " threads at once; BP-PLUGIN-9)");
}

void Work(Context& ctx, int t, bp_stream_t stream, const std::string& where) {
  std::mt19937_64 rng(1000 + t);
  for (int i = 0; i < kIterations; ++i) {
    const size_t n = 1 + rng() % 65536;
    DataSpace a(ctx.dev, n);
    DataSpace b(ctx.dev, n);
    const std::vector<uint8_t> data = RandomBytes(n, rng());
    std::vector<uint8_t> back = DifferentBytes(data, rng());
    Copy(HostAt(const_cast<uint8_t*>(data.data())), At(a), n, stream,
         "a copy to the device " + where);
    Copy(At(a), At(b), n, stream, "a device copy " + where);
    Copy(At(b), HostAt(back.data()), n, stream, "a copy back " + where);
    Sync(ctx.dev, stream, where);
    ExpectBytes(
        back.data(), data.data(), n,
        "iteration " + std::to_string(i) + "'s " + std::to_string(n) + "-byte round trip " + where);
    if (i % 8 == 0) {
      bp_value_t v;
      CheckCall(bp_device_get_attr(ctx.dev, BP_ATTR_DEVICE_NAME, &v),
                "get_attr(device_name) " + where);
      if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
    }
    a.Free();
    b.Free();
  }
}

void Threads(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  OnThreads([&](int t) {
    StreamHandle s(ctx.dev);
    Work(ctx, t, s.get(), "on its own stream");
  });
}

void SharedStream(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  OnThreads([&](int t) { Work(ctx, t, nullptr, "on the shared null stream"); });
}

}  // namespace

void AddConcurrencyTests(std::vector<TestCase>* out) {
  out->push_back({"device.concurrency.threads",
                  "several threads allocate, copy, query and sync at once, each on a stream of its "
                  "own, and every byte arrives",
                  "BP-PLUGIN-9", kNeedsDevice, Threads});
  out->push_back({"device.concurrency.shared_stream",
                  "several threads use the null stream at once; each one's StreamSync covers its "
                  "own earlier copies",
                  "BP-PLUGIN-8, BP-PLUGIN-9", kNeedsDevice, SharedStream});
}

}  // namespace conformance
}  // namespace backplane
