// SPDX-License-Identifier: Apache-2.0
// The remote plugin end to end (docs/remote.md), as a host application uses it: real
// `backplane serve` processes, attached with backplane::remote::Attach, their devices used
// through the C++ host API. Faults: a server killed during a 256 MiB copy and during a kernel, a
// stopped server past the deadline, reconnecting, a client killed while it holds buffers; a
// load test of 8 client processes; two servers at once.
//
// The program is also its own client process:
//   remote_client_test --load ADDRESS ITERATIONS SEED   alloc / copy / verify / free, exit 0 if
//                                                      every round trip came back intact
//   remote_client_test --hold ADDRESS                  allocates, says "ready", then waits
#include <backplane/backplane.hpp>
#include <backplane/remote.hpp>
#include <cstring>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>

#include "server_test.h"
#include "subprocess.h"

namespace backplane {
namespace remote {
namespace test {
namespace {

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kU8{kDLUInt, 8, 1};

void LoadPlugins() {
  for (const char* name : {"remote", "cpu", "opencl", "vulkan"}) {
    const std::string path = std::string(BACKPLANE_PLUGIN_DIR) + "/libbackplane_" + name + ".so";
    if (fs::exists(path)) bp_plugin_load(path.c_str());
    bp_error_clear();
  }
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The devices Attach gave, in order: {"remote:N", "cpu:0"}.
std::vector<std::pair<Device, std::string>> Devices(const std::string& attach_json) {
  std::vector<std::pair<Device, std::string>> out;
  const nlohmann::json server = nlohmann::json::parse(attach_json);
  for (const auto& d : server["devices"])
    out.emplace_back(Device::Parse(d["device"].get<std::string>()), d["remote"].get<std::string>());
  return out;
}

// remote.servers' entry for `address` (null when it is not attached).
nlohmann::json ServerEntry(const std::string& address) {
  const nlohmann::json all = nlohmann::json::parse(remote::Servers());
  for (const auto& sv : all["servers"]) {
    if (sv["address"] == address) return sv;
  }
  return nullptr;
}

nlohmann::json ServerStatusJson(const std::string& address) {
  return nlohmann::json::parse(remote::Status(address));
}

// Waits until the server holds nothing (bounded); the last status.
nlohmann::json WaitForNothingHeld(const std::string& address, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  nlohmann::json s;
  do {
    s = ServerStatusJson(address);
    if (s["buffers"] == 0 && s["bytes"] == 0 && s["streams"] == 0 && s["modules"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (Clock::now() < end);
  return s;
}

// A CPU kernel that runs for a while: `rounds` times n additions into one element.
constexpr const char* kSlowKernel = R"(# backplane-ir 1
func spin(n: int32, rounds: int32, x: buffer<float32>[n]) {
  for r in serial(0, rounds) {
    for i in serial(0, n) {
      x[i] = x[i] * 0.999f32 + 1.0f32
    }
  }
}
)";

// c = a + b: the CPU form (a parallel loop) and the GPU form (thread axes).
constexpr const char* kAddCpu = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for i in parallel(0, n) {
    c[i] = a[i] + b[i]
  }
}
)";
constexpr const char* kAddGpu = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 255) / 256) {
    for tx in thread(threadIdx.x, 0, 256) {
      if (bx * 256 + tx < n) {
        c[bx * 256 + tx] = a[bx * 256 + tx] + b[bx * 256 + tx]
      }
    }
  }
}
)";

// Whether this machine has an OpenCL device (PoCL in CI) a server can serve.
bool HasOpenCL() {
  try {
    const int32_t type = DeviceTypeFromName("opencl");
    return DeviceAPI::Get(Device(DLDevice{static_cast<DLDeviceType>(type), 0})).Exists();
  } catch (const Error&) {
    return false;
  }
}

// Whether process `pid` is stopped by a signal, waiting at most `seconds` for it to be.
bool WaitUntilStopped(pid_t pid, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (Clock::now() < end);
  return false;
}

class RemoteClient : public ::testing::Test {
 protected:
  void SetUp() override { LoadPlugins(); }
};

TEST_F(RemoteClient, CopiesKernelsAndSavedModulesOnEveryServedDevice) {
  ServerProcess server(ScratchDir(), {"--allow-native-modules"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  const auto devices = Devices(remote::Attach(server.target()));
  ASSERT_FALSE(devices.empty());
  for (const auto& [dev, remote_name] : devices) {
    SCOPED_TRACE(dev.ToString() + " = " + remote_name);
    // 3 MiB + 5 bytes: three full chunks and a partial one, at an offset.
    const size_t n = (size_t{3} << 20) + 5;
    const std::vector<uint8_t> data = RandomBytes(n, 7);
    Tensor t = Tensor::Empty({static_cast<int64_t>(n + 64)}, kU8, dev);
    DLTensor host{const_cast<uint8_t*>(data.data()), {kDLCPU, 0}, 1, kU8, nullptr, nullptr, 0};
    int64_t shape[1] = {static_cast<int64_t>(n)};
    host.shape = shape;
    DLTensor view = *t.dl();
    view.shape = shape;
    view.byte_offset = 64;
    Check(bp_device_copy_data_from_to(&host, &view, nullptr));
    Tensor u = Tensor::Empty({static_cast<int64_t>(n)}, kU8, dev);
    Check(bp_device_copy_data_from_to(&view, u.dl(), nullptr));  // on the server
    std::vector<uint8_t> back(n);
    u.CopyToBytes(back.data(), n);
    ASSERT_EQ(back, data);

    // A kernel built for the device's Target, run there, checked against the host.
    const Target target = Target::FromDevice(dev);
    const std::vector<std::string> keys = target.Keys();
    const bool cpu = std::find(keys.begin(), keys.end(), "cpu") != keys.end();
    const std::string func = "vector_add";
    Module m = Build(cpu ? kAddCpu : kAddGpu, target);
    const int32_t len = 70001;
    const std::vector<float> a = RandomFloats(len, 1), b = RandomFloats(len, 2);
    Tensor ta = Tensor::Empty({len}, kF32, dev), tb = Tensor::Empty({len}, kF32, dev),
           tc = Tensor::Empty({len}, kF32, dev);
    ta.CopyFrom(a);
    tb.CopyFrom(b);
    m.GetFunction(func)(len, ta.dl(), tb.dl(), tc.dl());
    std::vector<float> c = tc.ToVector<float>();
    for (int32_t i = 0; i < len; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "element " << i;

    // Saved, loaded back (it uploads itself again) and run on new inputs.
    Module again = Module::LoadFromBytes(m.SaveToBytes());
    EXPECT_EQ(again.Kind(), "remote");
    tb.CopyFrom(a);
    again.GetFunction(func)(len, ta.dl(), tb.dl(), tc.dl());
    c = tc.ToVector<float>();
    for (int32_t i = 0; i < len; ++i) ASSERT_EQ(c[i], a[i] + a[i]) << "element " << i;
  }
  // What the tensors held is freed on the server once they are gone.
  EXPECT_EQ(WaitForNothingHeld(server.target(), 10)["bytes"], 0) << server.Log();
}

TEST_F(RemoteClient, ErrorsNameWhatIsWrong) {
  ServerProcess a(ScratchDir() / "a", {"--devices", "cpu", "--allow-native-modules"});
  ServerProcess b(ScratchDir() / "b", {"--devices", "cpu"});
  ASSERT_TRUE(a.error().empty()) << a.error();
  ASSERT_TRUE(b.error().empty()) << b.error();
  const Device da = Devices(remote::Attach(a.target()))[0].first;
  const Device db = Devices(remote::Attach(b.target()))[0].first;
  // Which server holds which device.
  EXPECT_EQ(ServerEntry(a.target())["devices"][0]["device"], da.ToString());
  EXPECT_EQ(ServerEntry(b.target())["devices"][0]["device"], db.ToString());
  EXPECT_EQ(DeviceAPI::Get(da).GetProperty("server").AsString(), a.target());
  EXPECT_EQ(DeviceAPI::Get(db).GetProperty("server").AsString(), b.target());

  // Copies between the two servers go through this host.
  const std::vector<uint8_t> data = RandomBytes(5000, 3);
  Tensor x = Tensor::Empty({5000}, kU8, da), y = Tensor::Empty({5000}, kU8, db);
  x.CopyFromBytes(data.data(), data.size());
  Check(bp_device_copy_data_from_to(x.dl(), y.dl(), nullptr));
  std::vector<uint8_t> back(5000);
  y.CopyToBytes(back.data(), back.size());
  EXPECT_EQ(back, data);

  // Past the end of the buffer.
  DLTensor past = *x.dl();
  past.byte_offset = 10;
  std::vector<uint8_t> big(5000);
  DLTensor host{big.data(), {kDLCPU, 0}, 1, kU8, x.dl()->shape, nullptr, 0};
  const bp_status_t st = bp_device_copy_data_from_to(&host, &past, nullptr);
  EXPECT_EQ(st, BP_ERR_INVALID_ARGUMENT);
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  EXPECT_TRUE(Contains(message, "past the end")) << message;

  // A module of server a called with a buffer of server b.
  const Target t = Target::FromDevice(da);
  Module m = Build(kSlowKernel, t);
  Tensor xf = Tensor::Empty({4}, kF32, da), yf = Tensor::Empty({4}, kF32, db);
  try {
    m.GetFunction("spin")(4, 1, yf.dl());
    FAIL() << "a buffer of another server was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), b.target())) << e.what();
  }
  // Native code on a server that does not allow it: refused at build, naming the option.
  try {
    Build(kSlowKernel, Target::FromDevice(db));
    FAIL() << "a server without --allow-native-modules took a module of native code";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "--allow-native-modules")) << e.what();
  }

  // Detached: its devices say so, the other server's go on.
  remote::Detach(b.target());
  try {
    Tensor::Empty({4}, kU8, db);
    FAIL() << "a device of a detached server allocated";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "detached")) << e.what();
  }
  Tensor still = Tensor::Empty({4}, kU8, da);
  EXPECT_EQ(DeviceAPI::Get(da).GetAttr(BP_ATTR_EXIST).AsInt(), 1);
}

TEST_F(RemoteClient, AnExposedFunctionIsCalledByNameAndNothingElse) {
  ServerProcess server(ScratchDir(), {"--devices", "cpu", "--expose", "blas.sgemm"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  const Device dev = Devices(remote::Attach(server.target()))[0].first;
  // c = 1.5 a b + 0.5 c on the server's cpu:0, through its exposed blas.sgemm.
  const int64_t m = 37, n = 29, k = 41;
  const std::vector<float> a = RandomFloats(m * k, 21), b = RandomFloats(k * n, 22),
                           c0 = RandomFloats(m * n, 23);
  Tensor ta = Tensor::Empty({m, k}, kF32, dev), tb = Tensor::Empty({k, n}, kF32, dev),
         tc = Tensor::Empty({m, n}, kF32, dev);
  ta.CopyFrom(a);
  tb.CopyFrom(b);
  tc.CopyFrom(c0);
  Function sgemm = remote::ServerFunction(server.target(), "blas.sgemm");
  sgemm(m, n, k, 1.5, ta.dl(), tb.dl(), 0.5, tc.dl());
  const std::vector<float> c = tc.ToVector<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0.5 * c0[i * n + j];
      for (int64_t p = 0; p < k; ++p) ref += 1.5 * double(a[i * k + p]) * b[p * n + j];
      ASSERT_NEAR(c[i * n + j], ref, 1e-3 * (1 + std::abs(ref))) << i << "," << j;
    }
  }
  // Anything not exposed is refused, naming the option.
  try {
    remote::ServerFunction(server.target(), "device_api.cpu")();
    FAIL() << "a function that is not exposed was called";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "--expose")) << e.what();
  }
}

// A free port on loopback: a server's, stopped.
int FreePort(const fs::path& dir) {
  ServerProcess probe(dir / "probe", {"--devices", "cpu"});
  const int port = probe.port();
  probe.Stop();
  return port;
}

TEST_F(RemoteClient, AServerThatStartsLaterIsAttachedAndAModuleOutlivesDetachAndAttach) {
  const fs::path dir = ScratchDir();
  const int port = FreePort(dir);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  try {
    remote::Attach(address, R"({"connect_timeout_ms": 2000})");
    FAIL() << "attached a server that is not running";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), address)) << e.what();
  }
  ServerProcess server(dir, {"--devices", "cpu", "--allow-native-modules"}, port);
  ASSERT_TRUE(server.error().empty()) << server.error();
  Device dev = Devices(remote::Attach(address))[0].first;  // now it is there
  Module m = Build(kAddCpu, Target::FromDevice(dev));
  auto run = [&](const Device& d, uint32_t seed) {
    const int32_t len = 1000;
    const std::vector<float> a = RandomFloats(len, seed), b = RandomFloats(len, seed + 1);
    Tensor ta = Tensor::Empty({len}, kF32, d), tb = Tensor::Empty({len}, kF32, d),
           tc = Tensor::Empty({len}, kF32, d);
    ta.CopyFrom(a);
    tb.CopyFrom(b);
    m.GetFunction("vector_add")(len, ta.dl(), tb.dl(), tc.dl());
    const std::vector<float> c = tc.ToVector<float>();
    for (int32_t i = 0; i < len; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "element " << i;
  };
  run(dev, 30);
  Tensor old = Tensor::Empty({16}, kU8, dev);
  // Detached and attached again: new ids; the module uploads itself to the new session, and
  // a buffer of the detached one says so.
  remote::Detach(address);
  const Device again = Devices(remote::Attach(address))[0].first;
  EXPECT_NE(again.dl.device_id, dev.dl.device_id);
  run(again, 40);
  std::vector<uint8_t> back(16);
  try {
    old.CopyToBytes(back.data(), back.size());
    FAIL() << "a buffer of a detached server was read";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "detached")) << e.what();
  }
}

TEST_F(RemoteClient, AServerBackWithOtherDevicesIsRefusedAndTooLargeACallKeepsTheSession) {
  const fs::path dir = ScratchDir();
  auto server = std::make_unique<ServerProcess>(
      dir, std::vector<std::string>{"--devices", "cpu", "--expose", "blas.sgemm"});
  ASSERT_TRUE(server->error().empty()) << server->error();
  const std::string address = server->target();
  const int port = server->port();
  const Device dev = Devices(remote::Attach(address))[0].first;
  // A call over the message limit: refused here, and the session goes on.
  try {
    remote::ServerFunction(address, "blas.sgemm")(std::string(9 << 20, 'x'));
    FAIL() << "a 9 MiB call was sent";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(Contains(e.what(), "remote tensor")) << e.what();
  }
  Tensor kept = Tensor::Empty({16}, kU8, dev);
  const std::vector<uint8_t> data = RandomBytes(16, 5);
  kept.CopyFromBytes(data.data(), data.size());
  EXPECT_GE(ServerStatusJson(address)["sessions"].get<int>(), 1);
  if (!HasOpenCL()) GTEST_SKIP() << "no opencl device to change the list with";
  server->Kill();
  ServerProcess other(dir / "other", {"--devices", "cpu,opencl"}, port);
  ASSERT_TRUE(other.error().empty()) << other.error();
  try {
    Tensor::Empty({16}, kU8, dev);
    FAIL() << "a server with other devices took an allocation for the old ids";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "other devices")) << e.what();
  }
  const nlohmann::json entry = ServerEntry(address);
  ASSERT_TRUE(entry["error"].is_string()) << entry.dump();
  EXPECT_TRUE(Contains(entry["error"].get<std::string>(), "other devices")) << entry.dump();
}

TEST_F(RemoteClient, AServerKilledDuringA256MiBCopyIsAnErrorAndReconnectingWorks) {
  const fs::path dir = ScratchDir();
  auto server = std::make_unique<ServerProcess>(dir, std::vector<std::string>{"--devices", "cpu"});
  ASSERT_TRUE(server->error().empty()) << server->error();
  const std::string address = server->target();
  const Device dev = Devices(remote::Attach(address))[0].first;
  const size_t n = size_t{256} << 20;
  std::vector<uint8_t> data(n, 0x5a);
  Tensor big = Tensor::Empty({static_cast<int64_t>(n)}, kU8, dev);
  Tensor kept = Tensor::Empty({16}, kU8, dev);
  // Copies one after another until the kill ends one: however fast the machine, the server
  // dies during a copy (or between two, and the next fails the same way).
  auto copy = std::async(std::launch::async, [&] {
    try {
      for (int i = 0; i < 100; ++i) big.CopyFromBytes(data.data(), n);
      return std::string("100 copies succeeded");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  server->Kill();
  const std::string what = copy.get();
  EXPECT_TRUE(Contains(what, address)) << what;
  EXPECT_TRUE(Contains(what, "session ended")) << what;

  // The same address again, a new server: the next call connects again; what the old session
  // held is gone, and says so.
  ServerProcess again(dir / "again", {"--devices", "cpu"}, server->port());
  ASSERT_TRUE(again.error().empty()) << again.error();
  Tensor fresh = Tensor::Empty({1024}, kU8, dev);
  const std::vector<uint8_t> small = RandomBytes(1024, 9);
  fresh.CopyFromBytes(small.data(), small.size());
  std::vector<uint8_t> back(1024);
  fresh.CopyToBytes(back.data(), back.size());
  EXPECT_EQ(back, small);
  try {
    kept.CopyToBytes(back.data(), 16);
    FAIL() << "a buffer of the ended session was read";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "ended")) << e.what();
  }
}

TEST_F(RemoteClient, AServerKilledDuringAKernelIsAnErrorNamingIt) {
  ServerProcess server(ScratchDir(), {"--devices", "cpu", "--allow-native-modules"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  const Device dev = Devices(remote::Attach(server.target()))[0].first;
  Module m = Build(kSlowKernel, Target::FromDevice(dev));
  Tensor x = Tensor::Empty({1 << 16}, kF32, dev);
  x.CopyFrom(RandomFloats(1 << 16, 4));
  const auto t0 = Clock::now();
  m.GetFunction("spin")(1 << 16, 1 << 20, x.dl());  // minutes of work, queued
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server.Kill();
  });
  try {
    DeviceAPI::Get(dev).StreamSync();
    FAIL() << "the sync returned while the server was dying";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), server.target())) << e.what();
  }
  killer.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(30));
}

TEST_F(RemoteClient, AStoppedServerFailsTheCallAtItsDeadlineAndTheHostGoesOn) {
  ServerProcess server(ScratchDir(), {"--devices", "cpu"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  const Device dev = Devices(remote::Attach(server.target(), R"({"timeout_ms": 1000})"))[0].first;
  Tensor t = Tensor::Empty({64}, kU8, dev);
  kill(server.pid(), SIGSTOP);
  // SIGSTOP takes effect when the kernel gets to it: wait until the server is stopped ('T' in
  // /proc/PID/stat), and let it go on whatever happens below.
  ASSERT_TRUE(WaitUntilStopped(server.pid(), 10)) << "the server did not stop within 10 s";
  struct Continue {
    pid_t pid;
    ~Continue() { kill(pid, SIGCONT); }
  } resume{server.pid()};
  const auto t0 = Clock::now();
  try {
    Tensor::Empty({64}, kU8, dev);
    FAIL() << "an alloc on a stopped server returned";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), server.target())) << e.what();
    EXPECT_TRUE(Contains(e.what(), "deadline")) << e.what();
  }
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(10));
  kill(server.pid(), SIGCONT);
  // The server let a deadline pass: it is unreachable for a while, and a call fails at once
  // saying so (a command waits for a silent server once, not once per call).
  const auto t1 = Clock::now();
  try {
    Tensor::Empty({64}, kU8, dev);
    FAIL() << "an alloc right after the deadline asked the server again";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "is unreachable")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "remote.attach")) << e.what();
  }
  EXPECT_LT(Clock::now() - t1, std::chrono::milliseconds(500));
  // Attaching it again by name asks at once: a new session, and this works again.
  remote::Attach(server.target());
  Tensor u = Tensor::Empty({64}, kU8, dev);
  const std::vector<uint8_t> data = RandomBytes(64, 11);
  u.CopyFromBytes(data.data(), data.size());
  std::vector<uint8_t> back(64);
  u.CopyToBytes(back.data(), back.size());
  EXPECT_EQ(back, data);
}

TEST_F(RemoteClient, AClientKilledWhileHoldingBuffersLeavesNothingOnTheServer) {
  const fs::path dir = ScratchDir();
  ServerProcess server(dir, {"--devices", "cpu"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  remote::Attach(server.target());
  const nlohmann::json start = ServerStatusJson(server.target());
  sdk::ChildProcess child(ChildOf({"/proc/self/exe", "--hold", server.target()},
                                  ChildEnvironment({}), (dir / "client.log").string(),
                                  /*out_pipe=*/true));
  ASSERT_TRUE(child.started()) << child.start_error();
  ASSERT_TRUE(child.WaitForOutput("ready", 60)) << ReadFile(dir / "client.log");
  const nlohmann::json holding = ServerStatusJson(server.target());
  EXPECT_GE(holding["bytes"].get<uint64_t>(), (uint64_t{48} << 20)) << holding.dump();
  child.Kill();
  child.Wait();
  const nlohmann::json end = WaitForNothingHeld(server.target(), 30);
  EXPECT_EQ(end["bytes"], start["bytes"]) << end.dump() << "\n" << server.Log();
  EXPECT_EQ(end["buffers"], start["buffers"]);
  EXPECT_EQ(end["streams"], 0);
}

TEST_F(RemoteClient, EightClientsOfAThousandRoundTripsEachLoseNothing) {
  const fs::path dir = ScratchDir();
  ServerProcess server(dir, {"--devices", "cpu"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  remote::Attach(server.target());
  const auto t0 = Clock::now();
  std::vector<sdk::ChildProcess> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back(
        ChildOf({"/proc/self/exe", "--load", server.target(), "1000", std::to_string(100 + i)},
                ChildEnvironment({}), (dir / ("client" + std::to_string(i) + ".log")).string()));
    ASSERT_TRUE(clients.back().started()) << clients.back().start_error();
  }
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(clients[i].WaitFor(300)) << "client " << i << " did not finish within 300 s";
    const int status = clients[i].status();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "client " << i << ": " << ReadFile(dir / ("client" + std::to_string(i) + ".log"));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << "8 clients x 1000 alloc/copy/verify/free: " << seconds << " s\n";
  const nlohmann::json end = WaitForNothingHeld(server.target(), 30);
  EXPECT_EQ(end["bytes"], 0) << end.dump();
  EXPECT_EQ(end["buffers"], 0) << end.dump();
}

// ---- the client processes ----------------------------------------------------------------

int LoadClient(const std::string& address, int iterations, uint32_t seed) {
  LoadPlugins();
  try {
    const Device dev = Devices(remote::Attach(address))[0].first;
    std::mt19937 rng(seed);
    for (int i = 0; i < iterations; ++i) {
      const size_t n = 1 + rng() % 65536;
      const std::vector<uint8_t> data = RandomBytes(n, rng());
      Tensor t = Tensor::Empty({static_cast<int64_t>(n)}, kU8, dev);
      t.CopyFromBytes(data.data(), n);
      std::vector<uint8_t> back(n);
      t.CopyToBytes(back.data(), n);
      if (back != data) {
        std::cerr << "iteration " << i << ": " << n << " bytes came back changed\n";
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}

// A server that answers Hello (one cpu device) and nothing after it: a stalled `backplane
// serve`, or a proxy that lets only the first message through.
class SilentServer final : public pb::Remote::Service {
 public:
  SilentServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~SilentServer() override { server_->Shutdown(std::chrono::system_clock::now()); }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

  grpc::Status Session(grpc::ServerContext*,
                       grpc::ServerReaderWriter<pb::Reply, pb::Command>* stream) override {
    pb::Command cmd;
    if (!stream->Read(&cmd)) return grpc::Status::OK;
    pb::Reply hello;
    hello.set_id(cmd.id());
    pb::ServerInfo* info = hello.mutable_info();
    info->set_protocol(pb::PROTOCOL_VERSION);
    info->set_version("silent");
    pb::DeviceInfo* d = info->add_devices();
    d->set_type("cpu");
    d->set_id(0);
    d->set_name("a silent cpu");
    d->set_target_kind("c");
    stream->Write(hello);
    while (stream->Read(&cmd)) {
    }
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A server that answers Hello and then nothing costs a command one deadline,
// not one per request: it is then unreachable (named, with the deadline it let pass), and the
// commands that were asked for its devices fail saying so.
TEST_F(RemoteClient, ASilentServerCostsOneDeadlineAndFailsTheCommandsThatNeedIt) {
  SilentServer silent;
  subprocess::Options o;
  o.timeout_s = 120;
  o.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  o.set_env = {{"BACKPLANE_REMOTE", silent.target()}, {"BACKPLANE_REMOTE_TIMEOUT_MS", "1000"}};
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"info"}, {"info", "-l"}, {"info", "--json"}}) {
    std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto t0 = Clock::now();
    const subprocess::Result r = subprocess::Run(argv, o);
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    SCOPED_TRACE(args.back());
    EXPECT_EQ(r.exit_code, 1) << r.Describe() << r.err;
    EXPECT_TRUE(Contains(r.err, "remote server " + silent.target() + " is unreachable")) << r.err;
    EXPECT_TRUE(Contains(r.err, "deadline")) << r.err;
    // One deadline (1 s) and the local plugins; not one per attribute (30 s and more).
    EXPECT_LT(took, 12.0) << r.err;
    if (args.back() == "--json") {
      EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
    }
  }
  // In a host: the first request waits for its deadline, the next fail at once, naming it.
  const Device dev = Devices(remote::Attach(silent.target(), R"({"timeout_ms": 1000})"))[0].first;
  const DeviceAPI api = DeviceAPI::Get(dev);
  auto t0 = Clock::now();
  EXPECT_THROW(api.GetProperty("max_threads_per_block"), Error);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(900));
  t0 = Clock::now();
  try {
    Tensor::Empty({64}, kU8, dev);
    FAIL() << "an alloc on a silent server returned";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), silent.target() + " is unreachable")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "deadline")) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(500));
  const nlohmann::json entry = ServerEntry(silent.target());
  EXPECT_EQ(entry["state"], "unreachable") << entry.dump();
  EXPECT_TRUE(Contains(entry["error"].get<std::string>(), "deadline")) << entry.dump();
  remote::Detach(silent.target());
}

// With nothing listening at an address BACKPLANE_REMOTE names, `backplane demo`
// and `info -l` fail and name it (they printed only the local devices before, and exited 0).
TEST_F(RemoteClient, ADeadServerFailsTheCommandsThatNeedItsDevices) {
  int port = 0;
  {
    // A port that was free a moment ago, and that nothing listens on now.
    SilentServer probe;
    port = std::stoi(probe.target().substr(probe.target().rfind(':') + 1));
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  subprocess::Options o;
  o.timeout_s = 300;
  o.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  o.set_env = {{"BACKPLANE_REMOTE", address},
               {"XDG_CACHE_HOME", (ScratchDir() / "cache").string()}};
  subprocess::Result r =
      subprocess::Run({BACKPLANE_CLI_PATH, "demo", "--size", "small", "-k", "vector_add"}, o);
  EXPECT_EQ(r.exit_code, 1) << r.Describe() << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "remote server " + address + " is unreachable")) << r.err;
  EXPECT_TRUE(Contains(r.out, "vector_add")) << r.out;  // the local devices still ran
  EXPECT_TRUE(Contains(r.out, "1 remote server(s) unreachable")) << r.out;
  EXPECT_FALSE(Contains(r.out, "code generator")) << r.out;
  r = subprocess::Run({BACKPLANE_CLI_PATH, "info", "-l"}, o);
  EXPECT_EQ(r.exit_code, 1) << r.Describe() << r.err;
  EXPECT_TRUE(Contains(r.err, "remote server " + address + " is unreachable")) << r.err;
  EXPECT_TRUE(Contains(r.out, "cpu:0")) << r.out;
}

// A process whose first call is an alloc on remote:0 gets it (the server is
// attached on first use by every entry point, as the local plugins are).
TEST_F(RemoteClient, AnAllocAsTheFirstCallAttachesTheServer) {
  ServerProcess server(ScratchDir(), {"--devices", "cpu"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  for (const char* first : {"alloc", "stream", "set_device"}) {
    subprocess::Options o;
    o.timeout_s = 60;
    o.set_env = {{"BACKPLANE_REMOTE", server.target()}};
    const subprocess::Result r = subprocess::Run({"/proc/self/exe", "--first-call", first}, o);
    EXPECT_EQ(r.exit_code, 0) << first << ": " << r.Describe() << r.out << r.err;
    EXPECT_TRUE(Contains(r.out, "ok")) << first << ": " << r.out << r.err;
  }
}

// The child of AnAllocAsTheFirstCallAttachesTheServer: `what` on remote:0 is the first call
// to the remote plugin (BACKPLANE_REMOTE names the server), then 64 bytes go there and back.
int FirstCallClient(const std::string& what) {
  LoadPlugins();
  int32_t type = 0;
  if (bp_device_type_from_name("remote", &type) != BP_OK) return 3;
  const DLDevice dev{static_cast<DLDeviceType>(type), 0};
  bp_status_t st = BP_OK;
  if (what == "stream") {
    bp_stream_t s = nullptr;
    st = bp_device_stream_create(dev, &s);
    if (st == BP_OK) st = bp_device_stream_free(dev, s);
  } else if (what == "set_device") {
    st = bp_device_set(dev);
  }
  void* data = nullptr;
  if (st == BP_OK) st = bp_device_alloc_data_space(dev, 64, 64, kU8, &data);
  if (st != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    std::cerr << what << " as the first call: " << (message != nullptr ? message : "") << "\n";
    return 1;
  }
  std::vector<uint8_t> bytes = RandomBytes(64, 5);
  std::vector<uint8_t> back(64);
  int64_t shape[1] = {64};
  auto view = [&](void* p, DLDevice d) {
    DLTensor t{};
    t.data = p;
    t.device = d;
    t.ndim = 1;
    t.dtype = kU8;
    t.shape = shape;
    return t;
  };
  DLTensor host_in = view(bytes.data(), DLDevice{kDLCPU, 0});
  DLTensor remote = view(data, dev);
  DLTensor host_out = view(back.data(), DLDevice{kDLCPU, 0});
  Check(bp_device_copy_data_from_to(&host_in, &remote, nullptr));
  Check(bp_device_copy_data_from_to(&remote, &host_out, nullptr));
  Check(bp_device_stream_sync(dev, nullptr));
  Check(bp_device_free_data_space(dev, data));
  std::cout << (back == bytes ? "ok" : "changed") << std::endl;
  return back == bytes ? 0 : 1;
}

int HoldClient(const std::string& address) {
  LoadPlugins();
  const Device dev = Devices(remote::Attach(address))[0].first;
  std::vector<Tensor> held;
  for (int i = 0; i < 3; ++i) held.push_back(Tensor::Empty({16 << 20}, kU8, dev));
  bp_stream_t s = nullptr;
  Check(bp_device_stream_create(dev.dl, &s));
  std::cout << "ready" << std::flush;
  for (;;) pause();
}

}  // namespace
}  // namespace test
}  // namespace remote
}  // namespace backplane

int main(int argc, char** argv) {
  using namespace backplane::remote::test;
  if (argc == 5 && std::string(argv[1]) == "--load")
    return LoadClient(argv[2], std::atoi(argv[3]), static_cast<uint32_t>(std::atoi(argv[4])));
  if (argc == 3 && std::string(argv[1]) == "--hold") return HoldClient(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--first-call") return FirstCallClient(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
