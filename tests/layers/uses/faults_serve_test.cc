// SPDX-License-Identifier: Apache-2.0
// The faults layer under `backplane serve` (docs/layers/faults.md, "Under the conformance kit
// and the remote server"), run by ctest as the command of tests/remote/with_server.sh with
// SERVE_LAYERS=faults:... (the server's environment alone): the kit on the server's remote:0 as
// the client, twice: the client's failures carry the server's "faults: injected" message and
// none crashes; the server keeps serving (the second run, then this process's own session, get
// their answers); when the clients are gone it holds no buffer, stream or module.
// with_server.sh then checks that it stops cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <backplane/backplane.hpp>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "layers/uses/kit_run.h"

namespace backplane {
namespace layers_test {
namespace {

nlohmann::json ServerStatus(const std::string& address) {
  return nlohmann::json::parse(backplane::Function::Get("remote.status")(address).AsString());
}

// The server with_server.sh started is alive.
bool ServerRunning() {
  const char* pid = std::getenv("BACKPLANE_SERVER_PID");
  return pid != nullptr && kill(static_cast<pid_t>(std::atol(pid)), 0) == 0;
}

TEST(FaultsUnderTheServer, ClientsGetNamedErrorsAndTheServerKeepsServing) {
  const char* address = std::getenv("BACKPLANE_REMOTE");
  if (address == nullptr || std::getenv("BACKPLANE_SERVER_PID") == nullptr) {
    GTEST_SKIP() << "run by ctest (layers.faults.serve) through tests/remote/with_server.sh, "
                    "which starts the server and sets BACKPLANE_REMOTE";
  }
  ASSERT_EQ(std::getenv("BACKPLANE_LAYERS"), nullptr) << "the layer belongs to the server alone";
  // Two clients, one after the other: the kit on remote:0 (the cpu plugin beside it generates
  // the code the server loads).
  for (const char* tag : {"serve_faults_1", "serve_faults_2"}) {
    const KitRun run = RunKit({kPlugins + "/libbackplane_remote.so", "--device", "remote:0",
                               "--with", kPlugins + "/libbackplane_cpu.so"},
                              tag, {}, {});
    ExpectNamedFaultsOnly(run);
    ASSERT_TRUE(ServerRunning()) << "the server ended";
  }
  // The clients' sessions ended with them, and freed all they held (remote.status does not
  // open a session of this process's own).
  nlohmann::json status;
  for (int i = 0; i < 200; ++i) {  // a session ends when the server sees its stream close
    status = ServerStatus(address);
    if (status["sessions"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status["sessions"], 0) << status;
  EXPECT_EQ(status["buffers"], 0) << status;
  EXPECT_EQ(status["bytes"], 0) << status;
  EXPECT_EQ(status["streams"], 0) << status;
  EXPECT_EQ(status["modules"], 0) << status;
  // The server still answers this process's session: a copy that meets a fault says so, one
  // that does not is exact.
  int named = 0, exact = 0;
  const backplane::Device remote("remote", 0);
  for (int i = 0; i < 40; ++i) {
    std::vector<uint8_t> in(4096), out(4096);
    for (size_t k = 0; k < in.size(); ++k) in[k] = static_cast<uint8_t>(k * 7 + i);
    try {
      backplane::Tensor t = backplane::Tensor::Empty({4096}, backplane::UInt8(), remote);
      t.CopyFromBytes(in.data(), in.size());
      t.CopyToBytes(out.data(), out.size());
      EXPECT_EQ(in, out) << i;
      ++exact;
    } catch (const backplane::Error& e) {
      EXPECT_TRUE(Has(e.what(), "faults: injected")) << e.what();
      ++named;
    }
  }
  EXPECT_GT(exact, 0);
  EXPECT_GT(named, 0) << "no fault reached this session";
  // A free is sent without waiting for its reply: the last may still be on its way.
  for (int i = 0; i < 200; ++i) {
    status = ServerStatus(address);
    if (status["buffers"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status["sessions"], 1) << status;
  EXPECT_EQ(status["buffers"], 0) << status;
}

}  // namespace
}  // namespace layers_test
}  // namespace backplane
