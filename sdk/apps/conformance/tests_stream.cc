// SPDX-License-Identifier: Apache-2.0
// Streams (BP-PLUGIN-8): the null stream is valid everywhere; CreateStream/FreeStream;
// StreamSync returns only after all earlier work; SyncStreamFromTo orders two streams;
// SetStream accepts the streams the device made.
#include <backplane/backplane.hpp>
#include <thread>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

std::string StreamText(bp_stream_t s) {
  return s == nullptr ? std::string("the null stream")
                      : "stream " + Hex(reinterpret_cast<uintptr_t>(s), 1);
}

void RoundTripOn(Context& ctx, bp_stream_t s, size_t n, uint64_t seed) {
  DataSpace d(ctx.dev, n);
  const std::vector<uint8_t> data = RandomBytes(n, seed);
  std::vector<uint8_t> back = DifferentBytes(data, seed + 1);
  Copy(HostAt(const_cast<uint8_t*>(data.data())), At(d), n, s, "a copy on " + StreamText(s));
  Copy(At(d), HostAt(back.data()), n, s, "a copy back on " + StreamText(s));
  Sync(ctx.dev, s, "a round trip on " + StreamText(s));
  ExpectBytes(back.data(), data.data(), n,
              "a " + std::to_string(n) + "-byte round trip on " + StreamText(s));
}

void NullStream(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  RoundTripOn(ctx, nullptr, 4097, 700);
  CheckCall(bp_device_stream_set(ctx.dev, nullptr), "set_stream(null stream)");
  CheckCall(bp_device_sync_stream_from_to(ctx.dev, nullptr, nullptr),
            "sync_stream_from_to(null, null)");
  CheckCall(bp_device_stream_sync(ctx.dev, nullptr), "stream_sync(null stream)");
  RoundTripOn(ctx, nullptr, 3, 701);
}

void CreateFree(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<bp_stream_t> streams;
  for (int i = 0; i < 8; ++i) {
    bp_stream_t s = nullptr;
    CheckCall(bp_device_stream_create(ctx.dev, &s), "create_stream #" + std::to_string(i + 1));
    for (bp_stream_t other : streams) {
      if (s != nullptr && s == other)
        Fail("create_stream returned " + StreamText(s) + " twice, both alive");
    }
    streams.push_back(s);
  }
  if (streams.front() == nullptr) {
    ctx.Detail("create_stream gives the null stream: a single-queue device");
  }
  for (size_t i = 0; i < streams.size(); ++i) RoundTripOn(ctx, streams[i], 4097, 710 + i);
  for (size_t i = streams.size(); i-- > 0;) {
    CheckCall(bp_device_stream_free(ctx.dev, streams[i]),
              "free_stream(" + StreamText(streams[i]) + ")");
  }
  for (int i = 0; i < 100; ++i) {
    bp_stream_t s = nullptr;
    CheckCall(bp_device_stream_create(ctx.dev, &s), "create_stream in a loop");
    CheckCall(bp_device_stream_free(ctx.dev, s), "free_stream in a loop");
  }
  RoundTripOn(ctx, nullptr, 64, 720);
}

void SyncWaits(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  StreamHandle created(ctx.dev);
  std::vector<bp_stream_t> streams = {nullptr};
  if (created.get() != nullptr) streams.push_back(created.get());
  uint64_t seed = 800;
  for (bp_stream_t s : streams) {
    DataSpace a(ctx.dev, kLongCopy);
    DataSpace b(ctx.dev, kLongCopy);
    for (int round = 0; round < 3; ++round) {
      const std::vector<uint8_t> data = RandomBytes(kLongCopy, ++seed);
      std::vector<uint8_t> out = DifferentBytes(data, ++seed);
      const std::vector<uint8_t> before = out;
      // Three copies in a row, the last one to the host; nothing waits in between.
      Copy(HostAt(const_cast<uint8_t*>(data.data())), At(a), kLongCopy, s,
           "host to device on " + StreamText(s));
      Copy(At(a), At(b), kLongCopy, s, "device to device on " + StreamText(s));
      Copy(At(b), HostAt(out.data()), kLongCopy, s, "device to host on " + StreamText(s));
      Sync(ctx.dev, s, StreamText(s));
      try {
        ExpectBytes(out.data(), data.data(), kLongCopy,
                    "the device-to-host copy queued before stream_sync(" + StreamText(s) + ")",
                    before.data(), "what the host buffer held before the copy");
      } catch (const TestFailure& e) {
        Fail(std::string("right after stream_sync returned (round ") + std::to_string(round + 1) +
             "), " + e.what() +
             ": stream_sync returned before the work submitted earlier completed (BP-PLUGIN-8)");
      }
    }
  }
}

void SyncStreamFromTo(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  StreamHandle s1(ctx.dev);
  StreamHandle s2(ctx.dev);
  if (s1.get() == nullptr) ctx.Detail("single-queue device: both streams are the null stream");
  if (ctx.api->sync_stream_from_to == nullptr) {
    ctx.Detail("no sync_stream_from_to entry: the core waits for the source stream on the host");
  }
  // Stream 1: long work, then the write of B. Stream 2 waits for it, then reads B.
  StreamWaitCheck check(ctx.dev, s1.get(), s2.get(), size_t{64} << 10, 900);
  for (int round = 0; round < 3; ++round) {
    check.Round(
        round, nullptr,
        [&] {
          CheckCall(bp_device_sync_stream_from_to(ctx.dev, s1.get(), s2.get()),
                    "sync_stream_from_to(stream 1, stream 2)");
        },
        "the copy queued on stream 2 after sync_stream_from_to(stream 1, stream 2) did not wait "
        "for the work queued on stream 1 before it (BP-PLUGIN-8)");
    Sync(ctx.dev, s1.get(), "stream 1");
  }
}

void SetStream(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  CheckCall(bp_device_stream_set(ctx.dev, nullptr), "set_stream(null stream)");
  StreamHandle s(ctx.dev);
  if (s.get() == nullptr) {
    ctx.Detail("single-queue device: only the null stream can be active");
    return;
  }
  if (ctx.api->set_stream == nullptr) {
    ctx.Detail(
        "no set_stream entry: the device creates streams, but generated code always runs "
        "on the null stream");
    return;
  }
  CheckCall(bp_device_stream_set(ctx.dev, s.get()), "set_stream(" + StreamText(s.get()) + ")");
  RoundTripOn(ctx, s.get(), 4097, 950);
  RoundTripOn(ctx, nullptr, 4097, 951);
  std::string problem;
  std::thread other([&] {
    const bp_status_t st = bp_device_stream_set(ctx.dev, s.get());
    if (st != BP_OK) problem = "set_stream on another thread failed (" + TakeError(st) + ")";
    if (bp_device_stream_set(ctx.dev, nullptr) != BP_OK) bp_error_clear();
  });
  other.join();
  if (!problem.empty()) Fail(problem);
  CheckCall(bp_device_stream_set(ctx.dev, nullptr), "set_stream(null stream) after another");
}

}  // namespace

void AddStreamTests(std::vector<TestCase>* out) {
  out->push_back({"device.stream.null",
                  "the null stream is valid everywhere: copies, StreamSync, SetStream and "
                  "SyncStreamFromTo accept it",
                  "BP-PLUGIN-8", kNeedsDevice, NullStream});
  out->push_back(
      {"device.stream.create_free",
       "CreateStream gives distinct usable streams (or null on a single-queue device) and "
       "FreeStream frees them",
       "BP-PLUGIN-8", kNeedsDevice, CreateFree});
  out->push_back({"device.stream.sync_waits",
                  "StreamSync returns once all memory transfers submitted before it have completed",
                  "BP-PLUGIN-8", kNeedsDevice, SyncWaits});
  out->push_back({"device.stream.sync_stream_from_to",
                  "after SyncStreamFromTo(src, dst), work queued on dst does not proceed until src "
                  "has completed the work queued on it before",
                  "BP-PLUGIN-8", kNeedsDevice, SyncStreamFromTo});
  out->push_back(
      {"device.stream.set_stream",
       "SetStream accepts the null stream and every stream the device made, from any thread",
       "BP-PLUGIN-8", kNeedsDevice, SetStream});
}

}  // namespace conformance
}  // namespace backplane
