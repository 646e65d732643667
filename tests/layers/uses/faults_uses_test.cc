// SPDX-License-Identifier: Apache-2.0
// The faults layer under the conformance kit and the remote server (docs/layers/faults.md,
// "Testing against faults"): every injected fault comes back as a named error, nothing crashes,
// nothing leaks.
//
// - The kit on the cpu plugin with faults at a rate: the clauses that meet a fault fail with
//   the "faults: injected" message as their reason (never a crash, a timeout or another
//   error), the others pass.
// - The same with the validation layer outside faults: the error paths leave no finding.
// - `backplane serve` with faults in its environment, the kit on its remote:0 as the client:
//   the client's failures carry the server's "faults: injected" message; the server keeps
//   serving (a second run, then this process's own session, get their answers); when the
//   clients are gone it holds no buffer, stream or module, and it stops cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <backplane/backplane.hpp>
#include <backplane/sdk/child_process.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sdk/apps/cli/subprocess.h"

namespace {

namespace fs = std::filesystem;
namespace sdk = backplane::sdk;

const std::string kKit = BACKPLANE_CONFORMANCE_PATH;
const std::string kCli = BACKPLANE_CLI_PATH;
const std::string kPlugins = BACKPLANE_PLUGIN_DIR;
const std::string kScratch = BACKPLANE_TEST_SCRATCH_DIR;

// The clauses run under faults: allocations, copies, streams, events, syncs and launches, a
// few seconds in all.
const std::vector<std::string> kClauses = {
    "-t", "device.memory.*",           "-t", "device.copy.*",
    "-t", "device.stream.*",           "-t", "device.event.*",
    "-t", "codegen.kernel.vector_add", "-t", "codegen.kernel.matmul"};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct KitRun {
  backplane::subprocess::Result process;
  nlohmann::json json;
  std::string Explain() const {
    return process.Describe() + "\n--- stdout ---\n" + process.out + "\n--- stderr ---\n" +
           process.err;
  }
};

KitRun RunKit(std::vector<std::string> args, const std::string& tag,
              const std::vector<std::pair<std::string, std::string>>& env,
              const std::vector<std::string>& unset) {
  fs::create_directories(kScratch);
  const std::string json_path = kScratch + "/" + tag + ".json";
  fs::remove(json_path);
  args.insert(args.begin(), kKit);
  args.insert(args.end(), kClauses.begin(), kClauses.end());
  args.insert(args.end(), {"--timeout", "60", "--json", json_path});
  backplane::subprocess::Options o;
  o.unset_env = unset;
  o.unset_env.push_back("BACKPLANE_PLUGIN_PATH");
  o.set_env = env;
  o.timeout_s = 300;
  KitRun run;
  run.process = backplane::subprocess::Run(args, o);
  run.json = nlohmann::json::parse(ReadFile(json_path), nullptr, false);
  return run;
}

// Every failed clause failed on an injected fault, by name; none crashed or timed out; some
// met a fault and some passed. Returns how many failed.
int ExpectNamedFaultsOnly(const KitRun& run) {
  EXPECT_FALSE(run.json.is_discarded()) << "the JSON report does not parse\n" << run.Explain();
  if (run.json.is_discarded()) return 0;
  // The kit's exit status: 1 for a run with failures, never a signal.
  EXPECT_EQ(run.process.term_signal, 0) << run.Explain();
  int failed = 0, passed = 0;
  for (const auto& t : run.json["tests"]) {
    const std::string name = t["name"], status = t["status"];
    if (status == "passed") ++passed;
    if (status != "failed") continue;
    ++failed;
    const std::string message = t.value("message", "");
    EXPECT_TRUE(Has(message, "faults: injected")) << name << " failed on something else: " << t;
    EXPECT_NE(t.value("failure", ""), "crash") << name << ": " << t;
    EXPECT_NE(t.value("failure", ""), "timeout") << name << ": " << t;
    EXPECT_EQ(t.value("signal", 0), 0) << name << ": " << t;
  }
  EXPECT_GT(failed, 0) << "no fault was injected: the layer did not run\n" << run.Explain();
  EXPECT_GT(passed, 0) << run.Explain();
  EXPECT_EQ(run.process.exit_code, failed > 0 ? 1 : 0) << run.Explain();
  return failed;
}

TEST(FaultsUnderTheKit, EveryInjectedFaultFailsItsClauseByName) {
  // The layer's plugin is named with --with: the kit's tests discover only the plugins named.
  const KitRun run =
      RunKit({kPlugins + "/libbackplane_cpu.so", "--with", kPlugins + "/libbackplane_faults.so",
              "--jobs", "2"},
             "kit_cpu_faults", {{"BACKPLANE_LAYERS", "faults:seed=7:rate=0.05"}}, {});
  ExpectNamedFaultsOnly(run);
}

TEST(FaultsUnderTheKit, TheValidationLayerFindsNothingOnTheErrorPaths) {
#ifndef BACKPLANE_FAULTS_USES_VALIDATION
  GTEST_SKIP() << "the validation layer is not built here";
#endif
  // validation outside faults sees every injected error as the host does: a failed
  // allocation is no allocation, a failed copy or launch leaves nothing in flight.
  const KitRun run =
      RunKit({kPlugins + "/libbackplane_cpu.so", "--with", kPlugins + "/libbackplane_faults.so",
              "--with", kPlugins + "/libbackplane_validation.so", "--jobs", "2"},
             "kit_cpu_validation_faults",
             {{"BACKPLANE_LAYERS", "validation,faults:seed=7:rate=0.05"}}, {});
  ExpectNamedFaultsOnly(run);
  if (run.json.is_discarded()) return;
  for (const auto& t : run.json["tests"]) {
    EXPECT_FALSE(Has(t.value("output", ""), "BP-VALID-")) << t;
    EXPECT_FALSE(Has(t.value("message", ""), "BP-VALID-")) << t;
  }
}

// `backplane serve` as a child process with `layers` in its environment.
class Server {
 public:
  Server(const fs::path& dir, const std::string& layers) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    log_ = (dir / "server.log").string();
    const fs::path port_file = dir / "port";
    sdk::ChildOptions o;
    o.argv = {kCli,          "serve",       "--listen",
              "127.0.0.1:0", "--port-file", port_file.string(),
              "--devices",   "cpu",         "--allow-native-modules"};
    o.env = sdk::EnvironmentWith(
        {{"BACKPLANE_LAYERS", layers}, {"XDG_CACHE_HOME", (dir / "cache").string()}},
        {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_REMOTE"});
    o.log_file = log_;
    o.own_group = false;
    child_.emplace(o);
    if (!child_->started()) {
      error_ = child_->start_error();
      child_.reset();
      return;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < end) {
      const std::string text = ReadFile(port_file);
      if (!text.empty() && text.back() == '\n') {
        address_ = "127.0.0.1:" + std::to_string(std::stoi(text));
        return;
      }
      if (child_->WaitFor(0.01)) {
        error_ = "the server ended before it listened:\n" + Log();
        child_.reset();
        return;
      }
    }
    error_ = "no port file after 30 s:\n" + Log();
  }
  ~Server() { Stop(); }

  bool Running() { return child_ && !child_->WaitFor(0); }
  // SIGTERM, then its wait status (-1: not running).
  int Stop() {
    if (!child_) return -1;
    child_->Signal(SIGTERM);
    if (!child_->WaitFor(20)) {
      child_->Kill();
      child_->Wait();
      ADD_FAILURE() << "the server did not stop within 20 s of SIGTERM:\n" << Log();
    }
    const int status = child_->status();
    child_.reset();
    return status;
  }
  const std::string& address() const { return address_; }
  const std::string& error() const { return error_; }
  std::string Log() const { return ReadFile(log_); }

 private:
  std::string log_, address_, error_;
  std::optional<sdk::ChildProcess> child_;
};

nlohmann::json ServerStatus(const std::string& address) {
  return nlohmann::json::parse(backplane::Function::Get("remote.status")(address).AsString());
}

TEST(FaultsUnderTheServer, ClientsGetNamedErrorsAndTheServerKeepsServing) {
#ifndef BACKPLANE_FAULTS_USES_REMOTE
  GTEST_SKIP() << "no remote server in this build (gRPC missing, or a sanitizer build)";
#endif
  Server server(fs::path(kScratch) / "serve_faults", "faults:seed=5:rate=0.05");
  ASSERT_TRUE(server.error().empty()) << server.error();
  // Two clients, one after the other: the kit on remote:0 (the cpu plugin beside it generates
  // the code the server loads), without the layer on its own side.
  for (const char* tag : {"serve_faults_1", "serve_faults_2"}) {
    const KitRun run = RunKit({kPlugins + "/libbackplane_remote.so", "--device", "remote:0",
                               "--with", kPlugins + "/libbackplane_cpu.so"},
                              tag, {{"BACKPLANE_REMOTE", server.address()}}, {"BACKPLANE_LAYERS"});
    ExpectNamedFaultsOnly(run);
    ASSERT_TRUE(server.Running()) << "the server ended:\n" << server.Log();
  }
  // The clients' sessions ended with them, and freed all they held (remote.status does not
  // open a session of this process's own).
  ASSERT_EQ(setenv("BACKPLANE_REMOTE", server.address().c_str(), 1), 0);
  unsetenv("BACKPLANE_LAYERS");
  nlohmann::json status;
  for (int i = 0; i < 200; ++i) {  // a session ends when the server sees its stream close
    status = ServerStatus(server.address());
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
  EXPECT_GT(named + exact, 39);
  status = ServerStatus(server.address());
  EXPECT_EQ(status["sessions"], 1) << status;
  EXPECT_EQ(status["buffers"], 0) << status;
  const int stopped = server.Stop();
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0) << "status " << stopped << "\n"
                                                               << server.Log();
}

}  // namespace
