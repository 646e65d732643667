// SPDX-License-Identifier: Apache-2.0
// The faults layer (plugins/layers/faults, docs/layers/faults.md) through the C and C++ host
// APIs: at= fails exactly the call it names with the named error and the next call succeeds; a
// rate with a seed gives the same faults for the same calls, in another process too, and
// another seed other faults; the calls counted from several threads give the faults one thread
// gets; launches fail through module functions; a failed allocation allocates nothing; a failed
// sync returns only once the work queued before it is done; options it does not know or cannot
// read are refused by name. The chain is fixed once per process: ctest runs every case alone,
// and a case that needs several chains forks a child for each.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;

const DLDevice kCpu{kDLCPU, 0};

void UseTestPlugins() {
  ASSERT_EQ(bp_plugin_path_add(bptest::TestPluginDir().c_str()), BP_OK);
  unsetenv("BACKPLANE_LAYERS");
}

int64_t Injected() { return backplane::Function::Get("faults.injected")().AsInt(); }
std::string FaultLog() { return backplane::Function::Get("faults.log")().AsString(); }

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One copy of `n` bytes through the C API, between host memory and `data` on cpu:0.
bptest::Status Copy(void* host, void* data, int64_t n, bool to_device) {
  int64_t shape[1] = {n};
  DLTensor h = bptest::ByteView(host, kCpu, shape, 0);
  DLTensor d = bptest::ByteView(data, kCpu, shape, 0);
  return bptest::Capture(to_device ? bp_device_copy_data_from_to(&h, &d, nullptr)
                                   : bp_device_copy_data_from_to(&d, &h, nullptr));
}

bptest::Status Alloc(void** data, size_t n = 256) {
  *data = nullptr;
  return bptest::Capture(bp_device_alloc_data_space(kCpu, n, 64, backplane::UInt8(), data));
}

TEST(FaultsLayer, AtFailsExactlyThatCallWithTheNamedError) {
  UseTestPlugins();
  backplane::EnableLayers("faults:at=alloc_data_space#2+copy_data_from_to#3+stream_sync#1");
  std::vector<uint8_t> in = bptest::RandomBytes(256, 1), out(256);

  void* a = nullptr;
  ASSERT_TRUE(Alloc(&a).ok());
  void* b = reinterpret_cast<void*>(0x1);
  bptest::Status s = Alloc(&b);
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY) << s;
  EXPECT_TRUE(Has(s.message,
                  "cpu:0 alloc_data_space: faults: injected out-of-memory at "
                  "alloc_data_space call 2 on cpu:0 (at=alloc_data_space#2)"))
      << s;
  void* c = nullptr;
  ASSERT_TRUE(Alloc(&c).ok()) << "the call after the injected one succeeds";

  ASSERT_TRUE(Copy(in.data(), a, 256, true).ok());
  ASSERT_TRUE(Copy(out.data(), a, 256, false).ok());
  EXPECT_EQ(in, out);
  s = Copy(in.data(), c, 256, true);
  EXPECT_EQ(s.kind, BP_ERR_DEVICE) << s;
  EXPECT_TRUE(Has(s.message,
                  "faults: injected device error at copy_data_from_to call 3 on "
                  "cpu:0 (at=copy_data_from_to#3)"))
      << s;
  ASSERT_TRUE(Copy(in.data(), c, 256, true).ok());
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(Copy(out.data(), c, 256, false).ok());
  EXPECT_EQ(in, out);

  s = bptest::Capture(bp_device_stream_sync(kCpu, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_DEVICE) << s;
  EXPECT_TRUE(Has(s.message,
                  "faults: injected timeout at stream_sync call 1 on cpu:0 "
                  "(at=stream_sync#1)"))
      << s;
  EXPECT_TRUE(bptest::Capture(bp_device_stream_sync(kCpu, nullptr)).ok());

  EXPECT_EQ(bp_device_free_data_space(kCpu, a), BP_OK);
  EXPECT_EQ(bp_device_free_data_space(kCpu, c), BP_OK);
  EXPECT_EQ(Injected(), 3);
  EXPECT_EQ(FaultLog(), "alloc_data_space#2\ncopy_data_from_to#3\nstream_sync#1\n");
}

void ExpectFault(const bptest::Status& s, bp_status_t kind, const std::string& what,
                 const std::string& device) {
  EXPECT_EQ(s.kind, kind) << s;
  EXPECT_TRUE(Has(s.message, "faults: injected " + what + " call 1 on " + device + " (at=")) << s;
}

TEST(FaultsLayer, WorkspacesAndStreamsFailWithTheirErrorAndMakeNothing) {
  // The entries at= names fail on their first call with their error, leave the output unset,
  // and pass on their second.
  UseTestPlugins();
  backplane::EnableLayers("faults:at=alloc_workspace#1+create_stream#1");
  void* ws = reinterpret_cast<void*>(0x1);
  ExpectFault(bptest::Capture(bp_device_alloc_workspace(kCpu, 128, backplane::UInt8(), &ws)),
              BP_ERR_OUT_OF_MEMORY, "out-of-memory at alloc_workspace", "cpu:0");
  ASSERT_TRUE(bptest::Capture(bp_device_alloc_workspace(kCpu, 128, backplane::UInt8(), &ws)).ok());
  EXPECT_EQ(bp_device_free_workspace(kCpu, ws), BP_OK);

  bp_stream_t stream = nullptr;
  ExpectFault(bptest::Capture(bp_device_stream_create(kCpu, &stream)), BP_ERR_OUT_OF_MEMORY,
              "out-of-memory at create_stream", "cpu:0");
  EXPECT_EQ(stream, nullptr);
  ASSERT_TRUE(bptest::Capture(bp_device_stream_create(kCpu, &stream)).ok());
  EXPECT_TRUE(bptest::Capture(bp_device_stream_sync(kCpu, stream)).ok());
  EXPECT_EQ(bp_device_stream_free(kCpu, stream), BP_OK);
  EXPECT_EQ(Injected(), 2);
}

TEST(FaultsLayer, EventsOfAPluginWithEventsFailToo) {
  // cpu and the test plugins leave events to the core, which the layer does not see: this needs
  // a plugin with event entries of its own (OpenCL on PoCL, Vulkan on lavapipe).
  UseTestPlugins();
  backplane::EnableLayers("faults:at=event_create#1+event_sync#1");
  DLDevice dev{kDLCPU, -1};
  std::string name;
  for (const char* type_name : {"opencl", "vulkan"}) {
    int32_t type = 0;
    const bp_device_api_t* api = nullptr;
    bp_value_t exists;
    if (bp_device_type_from_name(type_name, &type) != BP_OK ||
        bp_device_api_get(type, &api) != BP_OK || api->event_create == nullptr ||
        api->event_sync == nullptr ||
        bp_device_get_attr(DLDevice{static_cast<DLDeviceType>(type), 0}, BP_ATTR_EXIST, &exists) !=
            BP_OK ||
        exists.type != BP_VALUE_INT || exists.u.v_int64 != 1) {
      continue;
    }
    dev = DLDevice{static_cast<DLDeviceType>(type), 0};
    name = std::string(type_name) + ":0";
    break;
  }
  if (dev.device_id < 0) GTEST_SKIP() << "no opencl:0 or vulkan:0 device with events here";
  bp_object_t* event = nullptr;
  ExpectFault(bptest::Capture(bp_event_create(dev, &event)), BP_ERR_OUT_OF_MEMORY,
              "out-of-memory at event_create", name);
  EXPECT_EQ(event, nullptr);
  ASSERT_TRUE(bptest::Capture(bp_event_create(dev, &event)).ok());
  ASSERT_TRUE(bptest::Capture(bp_event_record(event, nullptr)).ok());
  ExpectFault(bptest::Capture(bp_event_sync(event)), BP_ERR_DEVICE, "timeout at event_sync", name);
  EXPECT_TRUE(bptest::Capture(bp_event_sync(event)).ok());
  bp_object_release(event);
  EXPECT_EQ(Injected(), 2);
}

// A fixed mix of allocations, copies, syncs and streams on cpu:0: one character per call
// ('.' passed, the first letter of the error kind otherwise), and every failure's message
// checked against the option that injected it.
std::string Workload(int rounds, const std::string& why) {
  std::string pattern;
  std::vector<uint8_t> in = bptest::RandomBytes(512, 7), out(512);
  auto note = [&](const bptest::Status& s) {
    if (s.ok()) {
      pattern += '.';
      return true;
    }
    pattern += s.kind == BP_ERR_OUT_OF_MEMORY ? 'M' : s.kind == BP_ERR_DEVICE ? 'D' : '?';
    if (!Has(s.message, "faults: injected") || !Has(s.message, why)) {
      ADD_FAILURE() << "a failure not injected as asked: " << s;
    }
    return false;
  };
  for (int i = 0; i < rounds; ++i) {
    void* data = nullptr;
    const size_t n = 64 + 64 * (i % 8);
    if (!note(Alloc(&data, n))) continue;
    if (note(Copy(in.data(), data, static_cast<int64_t>(n), true))) {
      if (note(Copy(out.data(), data, static_cast<int64_t>(n), false))) {
        EXPECT_TRUE(std::equal(in.begin(), in.begin() + n, out.begin())) << i;
      }
    }
    note(bptest::Capture(bp_device_stream_sync(kCpu, nullptr)));
    EXPECT_EQ(bp_device_free_data_space(kCpu, data), BP_OK);
  }
  return pattern;
}

std::string ScratchFile(const std::string& name) {
  const std::string dir = BACKPLANE_TEST_SCRATCH_DIR;
  std::filesystem::create_directories(dir);
  return dir + "/faults_" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `body` in a forked child with the layers `spec`, which writes what `body` returns to
// `name` in the scratch folder; returns that text ("" when the child failed).
template <typename Body>
std::string InChild(const std::string& spec, const std::string& name, Body body) {
  const std::string path = ScratchFile(name);
  std::filesystem::remove(path);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (bp_plugin_path_add(bptest::TestPluginDir().c_str()) != BP_OK) _exit(3);
    unsetenv("BACKPLANE_LAYERS");
    if (bp_layers_enable(spec.c_str()) != BP_OK) _exit(4);
    const std::string text = body();
    std::ofstream(path) << text;
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name << ": status " << status;
  return ReadFile(path);
}

TEST(FaultsLayer, TheSameSeedGivesTheSameFaults) {
  // No device is used here before the children: each builds its own chain.
  auto run = [] {
    const std::string pattern = Workload(200, "(seed ");
    return pattern + "\n" + std::to_string(Injected()) + "\n" + FaultLog();
  };
  const std::string a = InChild("faults:seed=7:rate=0.1", "seed7a", run);
  const std::string b = InChild("faults:seed=7:rate=0.1", "seed7b", run);
  const std::string c = InChild("faults:seed=8:rate=0.1", "seed8", run);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a.substr(0, a.find('\n')), c.substr(0, c.find('\n')));
  // About one call in ten fails: between 3% and 30% of ~700 calls (the pattern is fixed by the
  // seed, so this never flakes; it catches a rate read wrongly).
  const std::string pattern = a.substr(0, a.find('\n'));
  const auto failed =
      std::count_if(pattern.begin(), pattern.end(), [](char ch) { return ch != '.'; });
  EXPECT_GT(failed, static_cast<long>(pattern.size() * 3 / 100)) << pattern;
  EXPECT_LT(failed, static_cast<long>(pattern.size() * 30 / 100)) << pattern;
  EXPECT_EQ(std::count(pattern.begin(), pattern.end(), '?'), 0) << pattern;
  // The layer's own count and log agree with what the caller saw.
  std::istringstream lines(a);
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);
  EXPECT_EQ(line, std::to_string(failed));
  int logged = 0;
  while (std::getline(lines, line)) logged += !line.empty();
  EXPECT_EQ(logged, failed);
}

TEST(FaultsLayer, OnlyLimitsTheRateAndThreadsSeeTheSameFaults) {
  // 400 allocations from one thread, then from four threads at once: the calls are numbered in
  // the order they reach the layer, so the same call numbers fail (but not on the same
  // threads), and only allocations fail.
  const char* spec = "faults:seed=5:rate=0.2:only=alloc_data_space";
  auto sorted_log = [] {
    std::vector<std::string> lines;
    std::istringstream in(FaultLog());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    return all;
  };
  auto allocs = [](int n, int* failed) {
    std::vector<uint8_t> in = bptest::RandomBytes(128, 9), out(128);
    for (int i = 0; i < n; ++i) {
      void* data = nullptr;
      const bptest::Status s = Alloc(&data, 128);
      if (!s.ok()) {
        EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY) << s;
        EXPECT_TRUE(Has(s.message, "(seed 5, rate 0.2)")) << s;
        EXPECT_EQ(data, nullptr);
        ++*failed;
        continue;
      }
      EXPECT_TRUE(Copy(in.data(), data, 128, true).ok());
      EXPECT_TRUE(Copy(out.data(), data, 128, false).ok());
      EXPECT_EQ(in, out);
      EXPECT_EQ(bp_device_free_data_space(kCpu, data), BP_OK);
    }
  };
  const std::string one = InChild(spec, "one_thread", [&] {
    int failed = 0;
    allocs(400, &failed);
    EXPECT_EQ(Injected(), failed);
    return sorted_log();
  });
  const std::string four = InChild(spec, "four_threads", [&] {
    int failed[4] = {0, 0, 0, 0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { allocs(100, &failed[t]); });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(Injected(), failed[0] + failed[1] + failed[2] + failed[3]);
    return sorted_log();
  });
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one, four);
  EXPECT_FALSE(Has(one, "copy_data_from_to")) << one;
}

TEST(FaultsLayer, ALaunchFailsThroughItsModuleFunction) {
  UseTestPlugins();
  bptest::LoadTestPlugin("simaccel_testing");
  // Every module function call is a launch: scale_add (module kind ir_host) runs on the host
  // and calls the device kernel scale_add_kernel (module kind simaccel), two launches a call.
  // Launch 3 is the second call's host function (which then calls no kernel), launch 7 the fourth
  // call's kernel.
  backplane::EnableLayers("faults:at=launch#3+launch#7");
  backplane::Module m =
      backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::Parse("simaccel"));
  const int rows = 2;
  const Device acc("simaccel", 0);
  std::vector<float> x = bptest::RandomFloats(rows * 256, 3),
                     y = bptest::RandomFloats(rows * 256, 4);
  backplane::Tensor tx = backplane::Tensor::Empty({rows, 256}, backplane::Float32(), acc);
  backplane::Tensor ty = backplane::Tensor::Empty({rows, 256}, backplane::Float32(), acc);
  backplane::Tensor to = backplane::Tensor::Empty({rows, 256}, backplane::Float32(), acc);
  tx.CopyFromBytes(x.data(), x.size() * sizeof(float));
  ty.CopyFromBytes(y.data(), y.size() * sizeof(float));
  backplane::Function f = m.GetFunction("scale_add");
  const char* expected[] = {
      nullptr,
      "faults: injected device error at launch call 3 of ir_host.scale_add on simaccel:0 "
      "(at=launch#3)",
      nullptr,
      "'scale_add_kernel' (called by host function 'scale_add'): faults: injected device error "
      "at launch call 7 of simaccel.scale_add_kernel on simaccel:0 (at=launch#7)"};
  for (int call = 0; call < 4; ++call) {
    std::vector<float> zero(rows * 256, 0.0f), out(rows * 256);
    to.CopyFromBytes(zero.data(), zero.size() * sizeof(float));
    const bptest::Status s = bptest::CaptureError([&] { f(rows, tx.dl(), ty.dl(), to.dl()); });
    to.CopyToBytes(out.data(), out.size() * sizeof(float));
    if (expected[call] != nullptr) {
      EXPECT_EQ(s.kind, BP_ERR_DEVICE) << s;
      EXPECT_TRUE(Has(s.message, expected[call])) << s;
      EXPECT_EQ(out, zero) << "the failed launch ran";
      continue;
    }
    ASSERT_TRUE(s.ok()) << call << ": " << s;
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 2.0f * x[i] + y[i]) << i;
  }
  EXPECT_EQ(FaultLog(), "launch#3\nlaunch#7\n");
  EXPECT_EQ(Injected(), 2);
}

TEST(FaultsLayer, AFailedAllocationLeavesNothingAlive) {
  // simaccel counts its live data spaces: allocations, copies and syncs on it fail at a rate,
  // cpu's are left alone (device=simaccel), and every tensor is freed at the end.
  UseTestPlugins();
  bptest::LoadTestPlugin("simaccel_testing");
  backplane::EnableLayers("faults:seed=3:rate=0.25:device=simaccel");
  const Device acc("simaccel", 0);
  backplane::Function live = backplane::Function::Get("simaccel_testing.live_allocations");
  const int64_t before = live(0).AsInt();
  int failed = 0, passed = 0;
  {
    std::vector<backplane::Tensor> kept;
    for (int i = 0; i < 120; ++i) {
      std::vector<float> in = bptest::RandomFloats(64, static_cast<uint32_t>(i)), out(64);
      const bptest::Status s = bptest::CaptureError([&] {
        backplane::Tensor t = backplane::Tensor::Empty({64}, backplane::Float32(), acc);
        t.CopyFromBytes(in.data(), in.size() * sizeof(float));
        t.CopyToBytes(out.data(), out.size() * sizeof(float));
        if (i % 3 == 0) kept.push_back(t);  // some live on past the loop
      });
      if (s.ok()) {
        EXPECT_EQ(in, out) << i;
        ++passed;
        continue;
      }
      ++failed;
      EXPECT_TRUE(s.kind == BP_ERR_OUT_OF_MEMORY || s.kind == BP_ERR_DEVICE) << s;
      EXPECT_TRUE(Has(s.message, "faults: injected")) << s;
      EXPECT_TRUE(Has(s.message, "on simaccel:0 (seed 3, rate 0.25)")) << s;
    }
    EXPECT_GT(live(0).AsInt(), before);
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(passed, 0);
  EXPECT_EQ(live(0).AsInt(), before) << "a data space outlived its tensor";
  // cpu is not wrapped: its calls all pass.
  std::vector<uint8_t> in = bptest::RandomBytes(64, 1), out(64);
  for (int i = 0; i < 50; ++i) {
    void* data = nullptr;
    ASSERT_TRUE(Alloc(&data, 64).ok());
    ASSERT_TRUE(Copy(in.data(), data, 64, true).ok());
    ASSERT_TRUE(Copy(out.data(), data, 64, false).ok());
    ASSERT_EQ(bp_device_free_data_space(kCpu, data), BP_OK);
  }
  EXPECT_FALSE(Has(FaultLog(), "cpu"));
}

TEST(FaultsLayer, AFailedSyncLeavesNoWorkRunning) {
  // A copy to host memory is queued on simaccel (its copies wait 100 ms first); the sync after
  // it is failed. The error must not come back before the copy is done: a caller frees its
  // buffer once it sees the error, and queued work writing there afterwards is a use after free.
  UseTestPlugins();
  bptest::LoadTestPlugin("simaccel_testing");
  backplane::EnableLayers("faults:at=stream_sync#1:device=simaccel");
  const DLDevice acc = Device("simaccel", 0).dl;
  const std::vector<uint8_t> in = bptest::RandomBytes(4096, 7);
  void* data = nullptr;
  ASSERT_TRUE(
      bptest::Capture(bp_device_alloc_data_space(acc, in.size(), 64, backplane::UInt8(), &data))
          .ok());
  int64_t shape[1] = {static_cast<int64_t>(in.size())};
  DLTensor h_in = bptest::ByteView(const_cast<uint8_t*>(in.data()), kCpu, shape, 0);
  DLTensor d = bptest::ByteView(data, acc, shape, 0);
  ASSERT_TRUE(bptest::Capture(bp_device_copy_data_from_to(&h_in, &d, nullptr)).ok());
  backplane::Function::Get("simaccel_testing.set_delay_us")(100000);
  std::vector<uint8_t> out(in.size(), 0);
  DLTensor h_out = bptest::ByteView(out.data(), kCpu, shape, 0);
  ASSERT_TRUE(bptest::Capture(bp_device_copy_data_from_to(&d, &h_out, nullptr)).ok());
  const bptest::Status s = bptest::Capture(bp_device_stream_sync(acc, nullptr));
  std::vector<uint8_t> seen = out;  // what the caller's buffer holds when the error comes back
  backplane::Function::Get("simaccel_testing.set_delay_us")(0);
  EXPECT_EQ(s.kind, BP_ERR_DEVICE) << s;
  EXPECT_TRUE(Has(s.message, "faults: injected timeout at stream_sync call 1 on simaccel:0")) << s;
  EXPECT_EQ(seen, in) << "the failed sync returned with the copy still queued";
  EXPECT_TRUE(bptest::Capture(bp_device_stream_sync(acc, nullptr)).ok());
  EXPECT_EQ(bp_device_free_data_space(acc, data), BP_OK);
  EXPECT_EQ(FaultLog(), "stream_sync#1\n");
}

TEST(FaultsLayer, UnknownOrUnreadableOptionsAreRefusedByName) {
  const struct {
    const char* options;
    const char* says;
  } cases[] = {
      {"colour=red", "unknown option 'colour=red'; the options, separated by ':', are seed=N"},
      {"", "nothing to inject"},
      {"seed=7", "'seed=7' injects nothing: give rate=R"},
      {"rate=1.5", "'rate=1.5': expected a probability from 0 to 1"},
      {"rate=0.1:rate=0.2", "'rate=0.2': the option is given twice"},
      {"seed=-1:rate=0.1", "'seed=-1': expected a decimal seed"},
      {"at=alloc#3",
       "'alloc' in 'at=alloc#3' is not an entry that can fail; the entries are "
       "alloc_data_space, alloc_workspace"},
      {"at=launch#0", "'at=launch#0': expected a call number from 1"},
      {"at=launch", "'at=launch': 'launch' is not ENTRY#K"},
      {"only=launch", "only= chooses the entries a rate applies to, but no rate=R is given"},
      {"rate=0.1:verbose", "'verbose' is not an option"},
      {"seed=:rate=0.1", "'seed=' has no value"},
      {"rate=5%", "'rate=5%': expected a probability"},
      {"rate=nan", "'rate=nan': expected a probability"},
  };
  for (const auto& c : cases) {
    const std::string options = c.options, says = c.says;
    EXPECT_EXIT(
        {
          UseTestPlugins();
          backplane::EnableLayers("faults:" + options);
          void* data = nullptr;
          const bptest::Status s = Alloc(&data);
          std::fprintf(stderr, "kind=%d %s\n", s.kind, s.message.c_str());
          std::exit(
              s.kind == BP_ERR_INVALID_ARGUMENT && Has(s.message, "layer faults: " + says) ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << options;
  }
}

}  // namespace
