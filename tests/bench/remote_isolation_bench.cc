// SPDX-License-Identifier: Apache-2.0
// What isolation between sessions costs a client of `backplane serve` (docs/remote.md,
// "Isolation between sessions"; docs/performance.md, "Remote devices: isolation"). One
// `backplane serve` child serving every device here (the `backplane` beside this program, or
// BACKPLANE_BENCH_CLI: another build's, to compare two servers), attached here; for each of its
// devices:
//
//   BM_AllocFree_64MiB/<device>         alloc 64 MiB, free it (the free waits for a ping)
//   BM_FirstRead_64MiB/<device>         alloc 64 MiB, read its first byte, free: the server
//                                       zeros the whole buffer before that read
//   BM_UploadFirstRead_64MiB/<device>   alloc 64 MiB, write it whole, read its first byte, free:
//                                       the usual upload, which needs no zeroing
//
// The cost of zeroing is FirstRead less AllocFree, beside what an upload of the same bytes costs
// in the same run; run it with BACKPLANE_BENCH_CLI set to a server without zeroing for before
// and after.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <backplane/backplane.hpp>
#include <backplane/remote.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_child.h"

namespace {

namespace fs = std::filesystem;
using backplane::Device;
using backplane::DeviceAPI;

constexpr uint64_t kBytes = uint64_t{64} << 20;

// `backplane serve` of every device here on a free loopback port; it gets SIGTERM when this
// process ends. Its address.
std::string StartServer(const fs::path& dir) {
  // The `backplane` beside this program (bin/ of the build tree, of an install and of the GPU
  // bundle alike), or BACKPLANE_BENCH_CLI's.
  const char* cli = std::getenv("BACKPLANE_BENCH_CLI");
  const std::string exe =
      cli != nullptr && *cli != '\0'
          ? std::string(cli)
          : (fs::read_symlink("/proc/self/exe").parent_path() / "backplane").string();
  const pid_t pid = backplane::bench::StartChild(
      {exe, "serve", "--listen", "127.0.0.1:0", "--port-file", (dir / "port").string()},
      (dir / "serve.log").string());
  return "127.0.0.1:" + std::to_string(backplane::bench::WaitForPort(
                            pid, dir / "port", dir / "serve.log", "backplane serve"));
}

DLTensor View(void* data, DLDevice dev, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  return t;
}

const std::vector<uint8_t>& Source() {
  static const std::vector<uint8_t>* bytes = new std::vector<uint8_t>(kBytes, 0x5a);
  return *bytes;
}

enum class Use { kNone, kFirstRead, kUploadFirstRead };

void Run(benchmark::State& state, Device dev, Use use) {
  const DeviceAPI api = DeviceAPI::Get(dev);
  uint8_t first = 0xEE;
  try {
    for (auto _ : state) {
      void* data = api.AllocDataSpace(kBytes, 64, backplane::UInt8());
      if (use == Use::kUploadFirstRead) {
        int64_t shape[1] = {static_cast<int64_t>(kBytes)};
        DLTensor from = View(const_cast<uint8_t*>(Source().data()), DLDevice{kDLCPU, 0}, shape);
        DLTensor to = View(data, dev.dl, shape);
        backplane::CopyDataFromTo(&from, &to);
      }
      if (use != Use::kNone) {
        int64_t one[1] = {1};
        DLTensor from = View(data, dev.dl, one);
        DLTensor to = View(&first, DLDevice{kDLCPU, 0}, one);
        backplane::CopyDataFromTo(&from, &to);
      }
      api.FreeDataSpace(data);
      api.StreamSync();  // the free is posted: wait for the server to have done it
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const uint8_t want = use == Use::kUploadFirstRead ? 0x5a : 0;
  if (use != Use::kNone && first != want) state.SkipWithError("the first byte read is wrong");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = (fs::temp_directory_path() / "backplane-bench-isolation-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::cerr << "bench_remote_isolation: cannot make a temporary folder\n";
    return 1;
  }
  setenv("XDG_CACHE_HOME", (fs::path(dir) / "cache").c_str(), 1);
  int rc = 0;
  try {
    const std::string address = StartServer(dir);
    const nlohmann::json attached = nlohmann::json::parse(backplane::remote::Attach(address));
    for (const nlohmann::json& d : attached.at("devices")) {
      const Device dev = Device::Parse(d.at("device").get<std::string>());
      const std::string name = d.at("remote").get<std::string>();
      benchmark::RegisterBenchmark(("BM_AllocFree_64MiB/" + name).c_str(), Run, dev, Use::kNone)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_FirstRead_64MiB/" + name).c_str(), Run, dev,
                                   Use::kFirstRead)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_UploadFirstRead_64MiB/" + name).c_str(), Run, dev,
                                   Use::kUploadFirstRead)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::cerr << "bench_remote_isolation: " << e.what() << "\n";
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return rc;
}
