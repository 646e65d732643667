// SPDX-License-Identifier: Apache-2.0
// Remote devices against raw gRPC over the same loopback link, in the same run. Two
// children of this process: `backplane serve --devices cpu` (its cpu:0 attached here as a remote
// device) and bench_remote_raw_server (remote_raw_server.cc), a minimal gRPC service of the
// benchmark's own (remote_bench.proto) with the server arguments `backplane serve` uses; the
// raw client's channel has the remote plugin's arguments (plugins/remote/client.cc).
//
// - 256 MiB host -> remote cpu:0 (copy + sync) against a client stream of the same bytes in
//   the same chunks (kChunkBytes) that the raw server receives and counts.
// - 256 MiB remote cpu:0 -> host against a server stream of the same chunks, which the raw
//   client copies into its destination buffer as the remote plugin does.
// - An empty kernel's call + sync on the remote device (the call is posted, the sync is one
//   round trip) against one unary round trip plus the same kernel's call + sync on the local
//   cpu:0, in one loop; the two parts are also measured alone.
//
// Pairs and goals: kRemotePairs in bench_pairs.h; docs/performance.md has the figures.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <backplane/backplane.hpp>
#include <backplane/remote.hpp>
#include <backplane/remote/channel.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backplane/bench/remote_bench.grpc.pb.h"
#include "backplane/remote/common.hpp"
#include "bench_child.h"
#include "bench_pairs.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_BENCH_RAW_SERVER_PATH
#error "BACKPLANE_BENCH_RAW_SERVER_PATH must name bench_remote_raw_server"
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace pb = backplane::bench::v1;
using backplane::Device;
using backplane::DeviceAPI;
using backplane::Function;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;
using backplane::bench::kRemoteCopyBytes;
using backplane::bench::ReadFile;
using backplane::bench::StartChild;
using backplane::bench::WaitForPort;
using backplane::remote::kChunkBytes;
using backplane::remote::kMaxMessageBytes;

// An empty kernel: its one store never runs (n is never negative).
constexpr const char* kEmptyIR = R"IR(# backplane-ir 1
func empty(n: int32, x: buffer<float32>[n]) {
  if (n < 0) {
    x[0] = 0.0
  }
}
)IR";

// The children's and this process's compile cache: a private folder, removed at exit (the
// remote module's library is built here and loaded there).
struct PrivateDir {
  PrivateDir() {
    std::string dir = (fs::temp_directory_path() / "backplane-bench-remote-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) return;
    path = dir;
    setenv("XDG_CACHE_HOME", (fs::path(path) / "cache").c_str(), 1);
  }
  ~PrivateDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  std::string path;
};
const PrivateDir kDir;

// The two servers, started on first use and ended with this process (StartChild).
struct Servers {
  std::string remote_address;
  Device remote;  // the `backplane serve` child's cpu:0, attached here
  std::unique_ptr<pb::RawBench::Stub> raw;

  static Servers& Get() {
    static Servers* servers = new Servers();  // the children outlive every benchmark
    if (!servers->error_.empty()) throw std::runtime_error(servers->error_);
    return *servers;
  }

 private:
  Servers() {
    try {
      if (kDir.path.empty()) throw std::runtime_error("cannot make a temporary folder");
      const fs::path dir = kDir.path;
      // BACKPLANE_BENCH_CLI: another build's `backplane` to serve with (an A/B of two servers).
      const char* cli = getenv("BACKPLANE_BENCH_CLI");
      const pid_t serve =
          StartChild({cli != nullptr && *cli != '\0' ? cli : BACKPLANE_CLI_PATH, "serve",
                      "--listen", "127.0.0.1:0", "--port-file", (dir / "serve.port").string(),
                      "--devices", "cpu", "--allow-native-modules"},
                     (dir / "serve.log").string());
      const pid_t raw_server =
          StartChild({BACKPLANE_BENCH_RAW_SERVER_PATH, (dir / "raw.port").string()},
                     (dir / "raw.log").string());
      const int serve_port =
          WaitForPort(serve, dir / "serve.port", dir / "serve.log", "backplane serve");
      const int raw_port =
          WaitForPort(raw_server, dir / "raw.port", dir / "raw.log", "bench_remote_raw_server");

      remote_address = "127.0.0.1:" + std::to_string(serve_port);
      const nlohmann::json attached =
          nlohmann::json::parse(backplane::remote::Attach(remote_address));
      remote = Device::Parse(attached.at("devices").at(0).at("device").get<std::string>());

      // The remote plugin's own channel arguments.
      const grpc::ChannelArguments args = backplane::remote::ClientChannelArguments();
      raw = pb::RawBench::NewStub(grpc::CreateCustomChannel(
          "127.0.0.1:" + std::to_string(raw_port), grpc::InsecureChannelCredentials(), args));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      pb::Empty request, reply;
      const grpc::Status st = raw->Ping(&ctx, request, &reply);
      if (!st.ok())
        throw std::runtime_error("the raw server does not answer: " + st.error_message());
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  std::string error_;
};

template <typename Body>
void Guarded(benchmark::State& state, Body body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The source of the host -> device copies, filled once (so its pages exist).
const char* HostSource() {
  static const std::string* source = new std::string(kRemoteCopyBytes, '\x5a');
  return source->data();
}

DLTensor HostView(void* data, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  return t;
}

void SetBytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRemoteCopyBytes));
}

// ---- bulk copies ------------------------------------------------------------------------

void BM_Remote_CopyH2D_256MiB(benchmark::State& state) {
  Guarded(state, [&] {
    Servers& s = Servers::Get();
    const int64_t n = static_cast<int64_t>(kRemoteCopyBytes);
    Tensor dst = Tensor::Empty({n}, backplane::UInt8(), s.remote);
    int64_t shape[1] = {n};
    DLTensor src = HostView(const_cast<char*>(HostSource()), shape);
    const DeviceAPI api = DeviceAPI::Get(s.remote);
    // One untimed copy touches every page of the server's buffer.
    backplane::CopyDataFromTo(&src, dst.dl());
    api.StreamSync();
    for (auto _ : state) {
      backplane::CopyDataFromTo(&src, dst.dl());
      api.StreamSync();
    }
    SetBytes(state);
    std::string back(kRemoteCopyBytes, '\0');
    dst.CopyToBytes(back.data(), back.size());
    if (std::memcmp(back.data(), HostSource(), back.size()) != 0) {
      state.SkipWithError("the remote buffer does not hold what was copied in");
    }
  });
}
BENCHMARK(BM_Remote_CopyH2D_256MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Raw_Push_256MiB(benchmark::State& state) {
  Guarded(state, [&] {
    Servers& s = Servers::Get();
    const char* src = HostSource();
    pb::Chunk chunk;
    for (auto _ : state) {
      grpc::ClientContext ctx;
      pb::Ack ack;
      std::unique_ptr<grpc::ClientWriter<pb::Chunk>> writer = s.raw->Push(&ctx, &ack);
      for (size_t done = 0; done < kRemoteCopyBytes;) {
        const size_t n = std::min(kChunkBytes, kRemoteCopyBytes - done);
        chunk.set_data(src + done, n);
        if (!writer->Write(chunk)) break;
        done += n;
      }
      writer->WritesDone();
      const grpc::Status st = writer->Finish();
      if (!st.ok() || ack.bytes() != kRemoteCopyBytes) {
        throw std::runtime_error("Push: " + st.error_message() + " (" +
                                 std::to_string(ack.bytes()) + " bytes received)");
      }
    }
    SetBytes(state);
  });
}
BENCHMARK(BM_Raw_Push_256MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Remote_CopyD2H_256MiB(benchmark::State& state) {
  Guarded(state, [&] {
    Servers& s = Servers::Get();
    const int64_t n = static_cast<int64_t>(kRemoteCopyBytes);
    Tensor src = Tensor::Empty({n}, backplane::UInt8(), s.remote);
    src.CopyFromBytes(HostSource(), kRemoteCopyBytes);
    std::string host(kRemoteCopyBytes, '\0');  // its pages exist before the first copy
    int64_t shape[1] = {n};
    DLTensor dst = HostView(host.data(), shape);
    const DeviceAPI api = DeviceAPI::Get(s.remote);
    for (auto _ : state) {
      backplane::CopyDataFromTo(src.dl(), &dst);
      api.StreamSync();
    }
    SetBytes(state);
    if (std::memcmp(host.data(), HostSource(), host.size()) != 0) {
      state.SkipWithError("the copy out of the remote buffer is wrong");
    }
  });
}
BENCHMARK(BM_Remote_CopyD2H_256MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Raw_Pull_256MiB(benchmark::State& state) {
  Guarded(state, [&] {
    Servers& s = Servers::Get();
    std::string host(kRemoteCopyBytes, '\0');
    pb::PullRequest request;
    request.set_nbytes(kRemoteCopyBytes);
    request.set_chunk_bytes(kChunkBytes);
    pb::Chunk chunk;
    auto pull = [&] {
      grpc::ClientContext ctx;
      std::unique_ptr<grpc::ClientReader<pb::Chunk>> reader = s.raw->Pull(&ctx, request);
      size_t received = 0;
      while (reader->Read(&chunk)) {
        const std::string& d = chunk.data();
        if (d.size() > kRemoteCopyBytes - received) throw std::runtime_error("Pull: too much");
        std::memcpy(host.data() + received, d.data(), d.size());
        received += d.size();
      }
      const grpc::Status st = reader->Finish();
      if (!st.ok() || received != kRemoteCopyBytes) {
        throw std::runtime_error("Pull: " + st.error_message() + " (" + std::to_string(received) +
                                 " bytes received)");
      }
    };
    pull();  // untimed: the server fills its source buffer on the first Pull
    for (auto _ : state) pull();
    SetBytes(state);
    if (host.find_first_not_of('\x5a') != std::string::npos) {
      state.SkipWithError("Pull sent other bytes");
    }
  });
}
BENCHMARK(BM_Raw_Pull_256MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- an empty kernel ---------------------------------------------------------------------

// The empty kernel built for `dev`'s own Target, with a one-float buffer there.
struct EmptyKernel {
  explicit EmptyKernel(Device dev)
      : module(backplane::Build(kEmptyIR, Target::FromDevice(dev))),
        func(module.GetFunction("empty")),
        x(Tensor::Empty({1}, backplane::Float32(), dev)),
        api(DeviceAPI::Get(dev)) {}
  void CallAndSync() const {
    func(int64_t{1}, x.dl());
    api.StreamSync();
  }
  Module module;
  Function func;
  Tensor x;
  DeviceAPI api;
};

void Ping(pb::RawBench::Stub& stub) {
  grpc::ClientContext ctx;
  pb::Empty request, reply;
  const grpc::Status st = stub.Ping(&ctx, request, &reply);
  if (!st.ok()) throw std::runtime_error("Ping: " + st.error_message());
}

void BM_Remote_EmptyKernel(benchmark::State& state) {
  Guarded(state, [&] {
    const EmptyKernel k(Servers::Get().remote);
    k.CallAndSync();  // the module is on the server before the first timed call
    for (auto _ : state) k.CallAndSync();
  });
}
BENCHMARK(BM_Remote_EmptyKernel)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Raw_PingPlusLocalKernel(benchmark::State& state) {
  Guarded(state, [&] {
    Servers& s = Servers::Get();
    const EmptyKernel k(Device(DLDevice{kDLCPU, 0}));
    k.CallAndSync();
    for (auto _ : state) {
      Ping(*s.raw);
      k.CallAndSync();
    }
  });
}
BENCHMARK(BM_Raw_PingPlusLocalKernel)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The baseline's two parts alone.
void BM_Raw_Ping(benchmark::State& state) {
  Guarded(state, [&] {
    Servers& s = Servers::Get();
    for (auto _ : state) Ping(*s.raw);
  });
}
BENCHMARK(BM_Raw_Ping)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Local_EmptyKernel(benchmark::State& state) {
  Guarded(state, [&] {
    const EmptyKernel k(Device(DLDevice{kDLCPU, 0}));
    k.CallAndSync();
    for (auto _ : state) k.CallAndSync();
  });
}
BENCHMARK(BM_Local_EmptyKernel)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
