// SPDX-License-Identifier: Apache-2.0
// Events (ABI 1.6) through the core's own implementation, which a DeviceAPI without event
// entries gets: recording waits for the stream's work and reads the host's clock, so an event
// is passed once recorded, a stream waiting for it needs nothing more, and the time between two
// events covers the work between them. On cpu and on the simulated accelerator, whose copies run
// later on a worker thread.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sdk/apps/examples/simaccel/simaccel_util.h"
#include "test_util.h"

namespace {

using backplane::Event;

TEST(Events, AnEventNeverRecordedIsDoneAndCannotBeTimed) {
  Event e{backplane::Device()};
  EXPECT_TRUE(e.Done());
  e.Sync();
  Event f{backplane::Device()};
  const bptest::Status s = bptest::CaptureError([&] { f.ElapsedMsSince(e); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("was never recorded"), std::string::npos) << s;
}

TEST(Events, BadArgumentsAreErrors) {
  bp_object_t* e = nullptr;
  EXPECT_EQ(bptest::Capture(bp_event_create(DLDevice{kDLCPU, 0}, nullptr)).kind,
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bptest::Capture(bp_event_record(nullptr, nullptr)).kind, BP_ERR_INVALID_ARGUMENT);
  backplane::Tensor t = backplane::Tensor::Empty({4}, backplane::Float32(), backplane::Device());
  const bptest::Status s = bptest::Capture(bp_event_sync(t.object().get()));
  EXPECT_EQ(s.kind, BP_ERR_TYPE) << s;
  EXPECT_NE(bptest::Capture(bp_event_create(DLDevice{kDLCPU, -1}, &e)).kind, BP_OK);
  EXPECT_EQ(e, nullptr);
}

class EventSimAccelTest : public bptest::SimAccelTest {};

TEST_F(EventSimAccelTest, RecordingWaitsForTheQueuedWorkAndTimesIt) {
  // Each queued item sleeps 20 ms first: a copy queued between two events takes at least that.
  backplane::Function::Get("simaccel_testing.set_delay_us")(20000);
  const size_t n = 4096;
  const std::vector<uint8_t> data = bptest::RandomBytes(n, 19);
  std::vector<uint8_t> back(n, 0);
  void* d = Alloc(0, n);
  backplane::Stream s(Device(0));
  Event start(Device(0)), end(Device(0));
  start.Record(s);
  ToDevice(data.data(), 0, d, n, 0, s.handle());
  ToHost(0, d, back.data(), n, 0, s.handle());
  end.Record(s);  // waits for both copies
  EXPECT_TRUE(end.Done());
  EXPECT_EQ(back, data) << "the recorded point was not after the queued copies";
  const double ms = end.ElapsedMsSince(start);
  EXPECT_GE(ms, 40.0) << "two 20 ms items ran between the events";
  EXPECT_LT(ms, 60000.0);
  // Another stream that waits for `end` sees the data without a sync of its own.
  backplane::Stream t(Device(0));
  end.MakeWait(t);
  std::vector<uint8_t> again(n, 0);
  ToHost(0, d, again.data(), n, 0, t.handle());
  Sync(0, t.handle());
  EXPECT_EQ(again, data);
  // Events of two devices are not timed against each other.
  Event other(Device(1));
  other.Record();
  const bptest::Status st = bptest::CaptureError([&] { other.ElapsedMsSince(start); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("time two events of one device"), std::string::npos) << st;
  Free(0, d);
}

}  // namespace

namespace {

// The cpu backend has no native handles (its data handles are host pointers: DLPack is its
// interop): both calls say so, and a refused wrap never calls the release.
TEST(NativeHandles, TheCpuBackendHasNoneAndSaysSo) {
  const backplane::Device cpu{DLDevice{kDLCPU, 0}};
  bptest::Status s = bptest::CaptureError([&] { backplane::NativeHandle(cpu, BP_NATIVE_QUEUE); });
  EXPECT_EQ(s.kind, BP_ERR_UNSUPPORTED) << s;
  EXPECT_NE(s.message.find("cpu:0's backend has no native handles"), std::string::npos) << s;
  std::vector<float> host(16, 1.5f);
  int released = 0;
  bp_native_buffer_t nb{sizeof(nb), reinterpret_cast<uint64_t>(host.data()), 0, 0,
                        host.size() * sizeof(float)};
  s = bptest::CaptureError([&] {
    backplane::Tensor::FromNative(cpu, nb, {16}, backplane::Float32(), [&] { ++released; });
  });
  EXPECT_EQ(s.kind, BP_ERR_UNSUPPORTED) << s;
  EXPECT_NE(s.message.find("bp_tensor_from_dlpack"), std::string::npos) << s;
  EXPECT_EQ(released, 0);
  // Bad arguments are refused before the backend is asked.
  EXPECT_EQ(
      bptest::Capture(bp_native_handle(DLDevice{kDLCPU, 0}, BP_NATIVE_QUEUE, nullptr, nullptr))
          .kind,
      BP_ERR_INVALID_ARGUMENT);
  bp_object_t* t = nullptr;
  EXPECT_EQ(bptest::Capture(bp_tensor_from_native(DLDevice{kDLCPU, 0}, nullptr, 0, nullptr,
                                                  backplane::Float32(), nullptr, nullptr, &t))
                .kind,
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
}

}  // namespace
