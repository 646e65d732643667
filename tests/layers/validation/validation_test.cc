// SPDX-License-Identifier: Apache-2.0
// The validation layer (plugins/layers/validation, docs/layers/validation.md): every rule
// BP-VALID-1..10 is broken through the C API on the simulated accelerator (simaccel: two
// devices, opaque memory, asynchronous streams, events) or the cpu, and the finding comes back
// from the entry as BP_ERR_INVALID_ARGUMENT naming the rule, the entry and the device; the
// misuse never reaches the plugin. Correct use beside it (random data round trips, launches
// synchronised by stream_sync or an event) gives no finding. One chain per process: ctest runs
// each case in a process of its own.
#include <stdlib.h>

#include <backplane/backplane.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;
using bptest::Status;

// On simaccel_testing (test hooks, the core's events), or with Events, on the example simaccel
// itself (its own events, which the layer sees).
class Validation : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("BACKPLANE_LAYERS");
    // Not with the example simaccel: simaccel_testing there registers the same names.
    if (!events_) {
      ASSERT_EQ(bp_plugin_path_add(bptest::TestPluginDir().c_str()), BP_OK);
    }
    backplane::EnableLayers("validation");
    if (events_) {
      setenv("SIMACCEL_DEVICES", "2", 1);
      const Status s = Capture(bp_plugin_load(SIMACCEL_EVENTS_PLUGIN));
      ASSERT_TRUE(s.ok()) << s;
    } else {
      ASSERT_NO_FATAL_FAILURE(bptest::LoadTestPlugin("simaccel_testing"));
    }
    type_ = backplane::DeviceTypeFromName("simaccel");
    ASSERT_EQ(bp_device_api_get(type_, &api_), BP_OK);
  }

  DLDevice Acc(int32_t id) const { return DLDevice{static_cast<DLDeviceType>(type_), id}; }
  int64_t Live(int32_t id) const {
    return backplane::Function::Get("simaccel_testing.live_allocations")(id).AsInt();
  }
  void* Alloc(DLDevice dev, size_t n) const {
    void* p = nullptr;
    EXPECT_EQ(bp_device_alloc_data_space(dev, n, 64, backplane::UInt8(), &p), BP_OK);
    return p;
  }
  Status Copy(void* from, DLDevice from_dev, uint64_t from_off, void* to, DLDevice to_dev,
              uint64_t to_off, int64_t n, bp_stream_t stream = nullptr) const {
    int64_t shape[1] = {n};
    DLTensor a = bptest::ByteView(from, from_dev, shape, from_off);
    DLTensor b = bptest::ByteView(to, to_dev, shape, to_off);
    return Capture(bp_device_copy_data_from_to(&a, &b, stream));
  }
  static std::string Findings() {
    return backplane::Function::Get("validation.findings")().AsString();
  }
  // The status is the rule's finding: BP_ERR_INVALID_ARGUMENT, "BP-VALID-<n> (<name>): <entry>
  // on <device>: ...; ..." (after the core's prefix), also kept by validation.findings.
  static void ExpectFinding(const Status& s, int rule, const std::string& name,
                            const std::string& entry, const std::string& device) {
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
    const std::string head =
        "BP-VALID-" + std::to_string(rule) + " (" + name + "): " + entry + " on " + device + ": ";
    const size_t at = s.message.find(head);  // after the core's "<device> <entry>: "
    ASSERT_NE(at, std::string::npos) << s.message << "\nwanted: " << head;
    EXPECT_NE(s.message.find("; ", at), std::string::npos) << s.message;
    EXPECT_NE(Findings().find(s.message.substr(at) + "\n"), std::string::npos) << Findings();
  }
  // Random bytes through `d` (n bytes on `dev`) and back: the data is intact.
  void RoundTrip(DLDevice dev, void* d, size_t n, uint32_t seed) const {
    const auto in = bptest::RandomBytes(n, seed);
    std::vector<uint8_t> out(n);
    ASSERT_TRUE(Copy(const_cast<uint8_t*>(in.data()), bptest::CpuDevice(), 0, d, dev, 0, n).ok());
    ASSERT_TRUE(Copy(d, dev, 0, out.data(), bptest::CpuDevice(), 0, n).ok());
    ASSERT_EQ(bp_device_stream_sync(dev, nullptr), BP_OK);
    EXPECT_EQ(in, out);
  }

  void InFlight();

  bool events_ = false;
  int32_t type_ = 0;
  const bp_device_api_t* api_ = nullptr;
};

class ValidationEvents : public Validation {
 protected:
  void SetUp() override {
    events_ = true;
    ASSERT_NO_FATAL_FAILURE(Validation::SetUp());
    ASSERT_NE(api_->event_create, nullptr);
  }
};

TEST_F(Validation, CorrectUseHasNoFinding) {
  void* d = Alloc(Acc(0), 4096);
  RoundTrip(Acc(0), d, 4096, 1);
  bp_stream_t s = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(1), &s), BP_OK);
  void* e = Alloc(Acc(1), 100);
  const auto in = bptest::RandomBytes(100, 2);
  std::vector<uint8_t> out(100);
  ASSERT_TRUE(
      Copy(const_cast<uint8_t*>(in.data()), bptest::CpuDevice(), 0, e, Acc(1), 0, 100, s).ok());
  ASSERT_TRUE(Copy(e, Acc(1), 0, out.data(), bptest::CpuDevice(), 0, 100, s).ok());
  ASSERT_EQ(bp_device_stream_sync(Acc(1), s), BP_OK);
  EXPECT_EQ(in, out);
  // A copy inside one allocation between ranges that do not overlap, and from its last byte.
  ASSERT_TRUE(Copy(d, Acc(0), 0, d, Acc(0), 2048, 2048).ok());
  ASSERT_TRUE(Copy(d, Acc(0), 4095, out.data(), bptest::CpuDevice(), 0, 1).ok());
  EXPECT_EQ(bp_device_free_data_space(Acc(0), d), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(Acc(1), e), BP_OK);
  EXPECT_EQ(bp_device_stream_free(Acc(1), s), BP_OK);
  // Host memory that is not a cpu data space is the application's own: not checked.
  std::vector<uint8_t> a(64), b(64);
  EXPECT_TRUE(Copy(a.data(), bptest::CpuDevice(), 0, b.data(), bptest::CpuDevice(), 0, 64).ok());
  EXPECT_EQ(Findings(), "");
}

// Four threads at once, each with its own stream and allocations, and a double free in each:
// every round trip is intact, and each thread gets exactly its own finding.
TEST_F(Validation, ConcurrentCallsFromSeveralThreads) {
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0), findings(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const DLDevice dev = Acc(t % 2);
      bp_stream_t s = nullptr;
      if (bp_device_stream_create(dev, &s) != BP_OK) {
        bad[t]++;
        return;
      }
      for (int r = 0; r < kRounds; ++r) {
        const size_t n = 64 + 16 * ((t * kRounds + r) % 37);
        const auto in = bptest::RandomBytes(n, 100 + t * kRounds + r);
        std::vector<uint8_t> out(n);
        void* d = nullptr;
        if (bp_device_alloc_data_space(dev, n, 64, backplane::UInt8(), &d) != BP_OK) {
          bad[t]++;
          continue;
        }
        bad[t] +=
            !Copy(const_cast<uint8_t*>(in.data()), bptest::CpuDevice(), 0, d, dev, 0, n, s).ok();
        bad[t] += !Copy(d, dev, 0, out.data(), bptest::CpuDevice(), 0, n, s).ok();
        bad[t] += bp_device_stream_sync(dev, s) != BP_OK;
        bad[t] += in != out;
        bad[t] += bp_device_free_data_space(dev, d) != BP_OK;
        if (r == kRounds / 2) {
          const Status twice = Capture(bp_device_free_data_space(dev, d));
          findings[t] += twice.message.find("BP-VALID-2 (double free)") != std::string::npos;
        }
      }
      bad[t] += bp_device_stream_free(dev, s) != BP_OK;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(bad[t], 0) << "thread " << t;
    EXPECT_EQ(findings[t], 1) << "thread " << t;
  }
}

TEST_F(Validation, Rule1UseAfterFree) {
  void* d = Alloc(Acc(0), 256);
  ASSERT_EQ(bp_device_free_data_space(Acc(0), d), BP_OK);
  std::vector<uint8_t> host(256);
  ExpectFinding(Copy(host.data(), bptest::CpuDevice(), 0, d, Acc(0), 0, 256), 1, "use after free",
                "copy_data_from_to", "simaccel:0");
  bp_stream_t s = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(0), &s), BP_OK);
  ASSERT_EQ(bp_device_stream_free(Acc(0), s), BP_OK);
  ExpectFinding(Capture(bp_device_stream_sync(Acc(0), s)), 1, "use after free", "stream_sync",
                "simaccel:0");
}

TEST_F(ValidationEvents, Rule1UseAfterFreeOfAnEvent) {
  void* ev = nullptr;
  ASSERT_EQ(api_->event_create(api_->self, Acc(0), &ev), BP_OK);
  ASSERT_EQ(api_->event_free(api_->self, Acc(0), ev), BP_OK);
  ExpectFinding(Capture(api_->event_sync(api_->self, Acc(0), ev)), 1, "use after free",
                "event_sync", "simaccel:0");
  ExpectFinding(Capture(api_->event_record(api_->self, Acc(0), ev, nullptr)), 1, "use after free",
                "event_record", "simaccel:0");
}

TEST_F(Validation, Rule2DoubleFreeNeverReachesThePlugin) {
  const int64_t before = Live(0);
  void* d = Alloc(Acc(0), 256);
  ASSERT_EQ(bp_device_free_data_space(Acc(0), d), BP_OK);
  ExpectFinding(Capture(bp_device_free_data_space(Acc(0), d)), 2, "double free", "free_data_space",
                "simaccel:0");
  EXPECT_EQ(Live(0), before);
  bp_stream_t s = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(0), &s), BP_OK);
  ASSERT_EQ(bp_device_stream_free(Acc(0), s), BP_OK);
  ExpectFinding(Capture(bp_device_stream_free(Acc(0), s)), 2, "double free", "free_stream",
                "simaccel:0");
}

TEST_F(ValidationEvents, Rule2DoubleFreeOfAnEvent) {
  void* ev = nullptr;
  ASSERT_EQ(api_->event_create(api_->self, Acc(0), &ev), BP_OK);
  ASSERT_EQ(api_->event_free(api_->self, Acc(0), ev), BP_OK);
  ExpectFinding(Capture(api_->event_free(api_->self, Acc(0), ev)), 2, "double free", "event_free",
                "simaccel:0");
}

TEST_F(Validation, Rule3UnknownHandle) {
  int local = 0;
  ExpectFinding(Capture(bp_device_free_data_space(Acc(0), &local)), 3, "unknown handle",
                "free_data_space", "simaccel:0");
  std::vector<uint8_t> host(16);
  ExpectFinding(Copy(host.data(), bptest::CpuDevice(), 0, &local, Acc(0), 0, 4), 3,
                "unknown handle", "copy_data_from_to", "simaccel:0");
  ExpectFinding(Capture(bp_device_stream_sync(Acc(0), reinterpret_cast<bp_stream_t>(&local))), 3,
                "unknown handle", "stream_sync", "simaccel:0");
}

TEST_F(Validation, Rule4WrongDevice) {
  void* d = Alloc(Acc(0), 256);
  const int64_t live0 = Live(0);
  ExpectFinding(Capture(bp_device_free_data_space(Acc(1), d)), 4, "wrong device", "free_data_space",
                "simaccel:1");
  EXPECT_EQ(Live(0), live0);  // not freed
  std::vector<uint8_t> host(256);
  ExpectFinding(Copy(host.data(), bptest::CpuDevice(), 0, d, Acc(1), 0, 256), 4, "wrong device",
                "copy_data_from_to", "simaccel:1");
  bp_stream_t s = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(0), &s), BP_OK);
  ExpectFinding(Capture(bp_device_stream_sync(Acc(1), s)), 4, "wrong device", "stream_sync",
                "simaccel:1");
  // A stream of simaccel:0 for a copy on simaccel:1.
  void* e = Alloc(Acc(1), 256);
  ExpectFinding(Copy(host.data(), bptest::CpuDevice(), 0, e, Acc(1), 0, 256, s), 4, "wrong device",
                "copy_data_from_to", "simaccel:1");
  // A cpu data space freed as simaccel's.
  void* c = Alloc(bptest::CpuDevice(), 64);
  ExpectFinding(Capture(bp_device_free_data_space(Acc(0), c)), 4, "wrong device", "free_data_space",
                "simaccel:0");
  EXPECT_EQ(bp_device_free_data_space(bptest::CpuDevice(), c), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(Acc(0), d), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(Acc(1), e), BP_OK);
  EXPECT_EQ(bp_device_stream_free(Acc(0), s), BP_OK);
}

TEST_F(Validation, Rule5MismatchedFree) {
  void* w = nullptr;
  const DLDevice cpu = bptest::CpuDevice();
  ASSERT_EQ(bp_device_alloc_workspace(cpu, 512, backplane::UInt8(), &w), BP_OK);
  ExpectFinding(Capture(bp_device_free_data_space(cpu, w)), 5, "mismatched free", "free_data_space",
                "cpu:0");
  EXPECT_EQ(bp_device_free_workspace(cpu, w), BP_OK);
}

TEST_F(Validation, Rule6CopyOutOfBounds) {
  void* d = Alloc(Acc(0), 256);
  std::vector<uint8_t> host(512);
  ExpectFinding(Copy(host.data(), bptest::CpuDevice(), 0, d, Acc(0), 64, 256), 6,
                "copy out of bounds", "copy_data_from_to", "simaccel:0");
  ExpectFinding(Copy(d, Acc(0), 0, host.data(), bptest::CpuDevice(), 0, 257), 6,
                "copy out of bounds", "copy_data_from_to", "simaccel:0");
  // A cpu data space allocated through the table is checked too.
  void* c = Alloc(bptest::CpuDevice(), 100);
  ExpectFinding(Copy(host.data(), bptest::CpuDevice(), 0, c, bptest::CpuDevice(), 0, 101), 6,
                "copy out of bounds", "copy_data_from_to", "cpu:0");
  // In bounds, the data arrives.
  RoundTrip(Acc(0), d, 256, 3);
  EXPECT_EQ(bp_device_free_data_space(Acc(0), d), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(bptest::CpuDevice(), c), BP_OK);
}

TEST_F(Validation, Rule7OverlappingCopy) {
  void* d = Alloc(Acc(0), 512);
  ExpectFinding(Copy(d, Acc(0), 0, d, Acc(0), 128, 256), 7, "overlapping copy", "copy_data_from_to",
                "simaccel:0");
  void* c = Alloc(bptest::CpuDevice(), 512);
  ExpectFinding(Copy(c, bptest::CpuDevice(), 100, c, bptest::CpuDevice(), 0, 256), 7,
                "overlapping copy", "copy_data_from_to", "cpu:0");
  EXPECT_EQ(bp_device_free_data_space(Acc(0), d), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(bptest::CpuDevice(), c), BP_OK);
}

// A module function call (scale_add, built for simaccel) uses three data spaces; freeing one
// before the stream it was queued on is synchronised is found, and after, it is not.
void Validation::InFlight() {
  backplane::Module m =
      backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::Parse("simaccel"));
  backplane::Function f = m.GetFunction("scale_add");
  const int rows = 4, n = rows * 256;
  const std::vector<float> x = bptest::RandomFloats(n, 5), y = bptest::RandomFloats(n, 6);
  int64_t shape[2] = {rows, 256};
  auto tensor = [&](void* data) {
    DLTensor t{};
    t.data = data;
    t.device = Acc(0);
    t.ndim = 2;
    t.dtype = backplane::Float32();
    t.shape = shape;
    return t;
  };
  void* dx = Alloc(Acc(0), n * 4);
  void* dy = Alloc(Acc(0), n * 4);
  void* dout = Alloc(Acc(0), n * 4);
  ASSERT_TRUE(
      Copy(const_cast<float*>(x.data()), bptest::CpuDevice(), 0, dx, Acc(0), 0, n * 4).ok());
  ASSERT_TRUE(
      Copy(const_cast<float*>(y.data()), bptest::CpuDevice(), 0, dy, Acc(0), 0, n * 4).ok());
  DLTensor tx = tensor(dx), ty = tensor(dy), tout = tensor(dout);
  f(rows, &tx, &ty, &tout);
  ExpectFinding(Capture(bp_device_free_data_space(Acc(0), dx)), 8, "freed while in flight",
                "free_data_space", "simaccel:0");
  EXPECT_NE(Findings().find("scale_add"), std::string::npos) << Findings();
  ASSERT_EQ(bp_device_stream_sync(Acc(0), nullptr), BP_OK);
  std::vector<float> out(n);
  ASSERT_TRUE(Copy(dout, Acc(0), 0, out.data(), bptest::CpuDevice(), 0, n * 4).ok());
  ASSERT_EQ(bp_device_stream_sync(Acc(0), nullptr), BP_OK);
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], 2.0f * x[i] + y[i]) << i;

  // On a stream of its own: syncing the null stream does not complete it, syncing it does.
  bp_stream_t s = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(0), &s), BP_OK);
  ASSERT_EQ(bp_device_stream_set(Acc(0), s), BP_OK);
  f(rows, &tx, &ty, &tout);
  ASSERT_EQ(bp_device_stream_sync(Acc(0), nullptr), BP_OK);
  ExpectFinding(Capture(bp_device_free_data_space(Acc(0), dy)), 8, "freed while in flight",
                "free_data_space", "simaccel:0");
  ASSERT_EQ(bp_device_stream_sync(Acc(0), s), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(Acc(0), dy), BP_OK);
  // A call with the freed one is use after free, refused before the kernel runs.
  const Status freed = bptest::CaptureError([&] { f(rows, &tx, &ty, &tout); });
  ExpectFinding(freed, 1, "use after free", "function scale_add", "simaccel:0");

  // An event recorded after the launch and synchronised completes it (on a device whose
  // events are its own: the example simaccel).
  if (events_) {
    f(rows, &tx, &tx, &tout);
    void* ev = nullptr;
    ASSERT_EQ(api_->event_create(api_->self, Acc(0), &ev), BP_OK);
    ASSERT_EQ(api_->event_record(api_->self, Acc(0), ev, s), BP_OK);
    ExpectFinding(Capture(bp_device_free_data_space(Acc(0), dout)), 8, "freed while in flight",
                  "free_data_space", "simaccel:0");
    ASSERT_EQ(api_->event_sync(api_->self, Acc(0), ev), BP_OK);
    EXPECT_EQ(api_->event_free(api_->self, Acc(0), ev), BP_OK);
  }
  EXPECT_EQ(bp_device_free_data_space(Acc(0), dout), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(Acc(0), dx), BP_OK);
  ASSERT_EQ(bp_device_stream_set(Acc(0), nullptr), BP_OK);
  EXPECT_EQ(bp_device_stream_free(Acc(0), s), BP_OK);
}

TEST_F(Validation, Rule8FreedWhileALaunchIsInFlight) { InFlight(); }
TEST_F(ValidationEvents, Rule8AnEventSyncCompletesTheLaunch) { InFlight(); }

TEST_F(ValidationEvents, Rule9EventWaitedOnAnotherDevice) {
  bp_object_t* ev = nullptr;
  ASSERT_EQ(bp_event_create(Acc(0), &ev), BP_OK);
  ASSERT_EQ(bp_event_record(ev, nullptr), BP_OK);
  bp_stream_t s1 = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(1), &s1), BP_OK);
  ExpectFinding(Capture(bp_event_wait(ev, s1)), 9, "event of another device", "stream_wait_event",
                "simaccel:0");
  bp_stream_t s0 = nullptr;
  ASSERT_EQ(bp_device_stream_create(Acc(0), &s0), BP_OK);
  EXPECT_EQ(bp_event_wait(ev, s0), BP_OK);  // its own device's stream
  EXPECT_EQ(bp_device_stream_sync(Acc(0), s0), BP_OK);
  EXPECT_EQ(bp_device_stream_free(Acc(0), s0), BP_OK);
  EXPECT_EQ(bp_device_stream_free(Acc(1), s1), BP_OK);
  bp_object_release(ev);
}

void LeakAndExit(int32_t type) {
  const DLDevice acc{static_cast<DLDeviceType>(type), 0};
  void* d = nullptr;
  bp_stream_t s = nullptr;
  if (bp_device_alloc_data_space(acc, 128, 64, backplane::UInt8(), &d) != BP_OK) std::_Exit(3);
  if (bp_device_stream_create(acc, &s) != BP_OK) std::_Exit(4);
  std::exit(0);
}

TEST_F(Validation, Rule10LeaksAreReportedAtExitWithWhereTheyWereMade) {
  EXPECT_EXIT(LeakAndExit(type_), ::testing::ExitedWithCode(0),
              "BP-VALID-10 \\(leak\\): alloc_data_space on simaccel:0: data space 0x[0-9a-f]+ of "
              "128 bytes is still alive at exit; free it with free_data_space; made at:\n"
              "    [^\n]*\n(.|\n)*"
              "BP-VALID-10 \\(leak\\): create_stream on simaccel:0: stream 0x[0-9a-f]+ is still "
              "alive at exit");
}

// Builds scale_add for simaccel (a module of kind ir_host importing one of kind simaccel) and,
// unless `release`, keeps it to exit; leaks one data space either way, so the report's count
// shows whether the modules were in it.
void ModulesAndExit(int32_t type, bool release) {
  const DLDevice acc{static_cast<DLDeviceType>(type), 0};
  backplane::Module m =
      backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::Parse("simaccel"));
  if (!release) (void)backplane::ObjectRef(m.object()).release();  // one reference never let go
  m = backplane::Module();
  void* d = nullptr;
  if (bp_device_alloc_data_space(acc, 64, 64, backplane::UInt8(), &d) != BP_OK) std::_Exit(3);
  std::exit(0);
}

TEST_F(Validation, Rule10ModulesAliveAtExitAreLeaksToo) {
  EXPECT_EXIT(ModulesAndExit(type_, false), ::testing::ExitedWithCode(0),
              "BP-VALID-10 \\(leak\\): bp_module_create: module 0x[0-9a-f]+ of kind 'simaccel' "
              "is still alive at exit; release it, or the module that imports it "
              "\\(bp_object_release[^\n]*; made at:\n"
              "    [^\n]*\n(.|\n)*"
              "BP-VALID-10 \\(leak\\): bp_module_create: module 0x[0-9a-f]+ of kind 'ir_host' "
              "is still alive at exit(.|\n)*"
              "validation layer: 3 handle\\(s\\) leaked");
  // Released, they are not: the count is the data space alone.
  EXPECT_EXIT(ModulesAndExit(type_, true), ::testing::ExitedWithCode(0),
              "data space 0x[0-9a-f]+ of 64 bytes is still alive at exit(.|\n)*"
              "validation layer: 1 handle\\(s\\) leaked");
}

void DoubleFreeUnderAbort() {
  unsetenv("BACKPLANE_LAYERS");
  backplane::EnableLayers("validation:abort");
  void* d = nullptr;
  const DLDevice cpu{kDLCPU, 0};
  (void)bp_device_alloc_data_space(cpu, 64, 64, backplane::UInt8(), &d);
  (void)bp_device_free_data_space(cpu, d);
  (void)bp_device_free_data_space(cpu, d);
}

TEST(ValidationOptions, AbortPrintsTheFindingAndABacktrace) {
  EXPECT_DEATH(DoubleFreeUnderAbort(),
               "BP-VALID-2 \\(double free\\): free_data_space on cpu:0: .*\n"
               "validation layer: aborting \\(option abort\\); backtrace:\n");
}

TEST(ValidationOptions, AnUnknownOptionIsRefusedNamingItAndTheOptions) {
  unsetenv("BACKPLANE_LAYERS");
  backplane::EnableLayers("validation:leaks=off:bogus");
  void* d = nullptr;
  const Status s =
      Capture(bp_device_alloc_data_space(DLDevice{kDLCPU, 0}, 64, 64, backplane::UInt8(), &d));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("unknown option 'bogus'"), std::string::npos) << s;
  EXPECT_NE(s.message.find("abort"), std::string::npos) << s;
  EXPECT_NE(s.message.find("leaks=off"), std::string::npos) << s;
}

}  // namespace
