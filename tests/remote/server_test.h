// SPDX-License-Identifier: Apache-2.0
// What the tests of `backplane serve` share (server_test.cc, server_call_test.cc,
// server_security_test.cc): starting the built tool as a child process on 127.0.0.1 with port 0,
// and a client session over the generated gRPC stub, one command at a time.
#ifndef BACKPLANE_TESTS_REMOTE_SERVER_TEST_H_
#define BACKPLANE_TESTS_REMOTE_SERVER_TEST_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <backplane/sdk/child_process.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backplane/remote/common.hpp"
#include "backplane/remote/remote.grpc.pb.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_MAKE_CERTS
#error "BACKPLANE_MAKE_CERTS must name tests/remote/make_certs.sh"
#endif
#ifndef BACKPLANE_TEST_SCRATCH_DIR
#error "BACKPLANE_TEST_SCRATCH_DIR must name a scratch folder"
#endif

namespace backplane {
namespace remote {
namespace test {

namespace pb = backplane::remote::v1;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// This process's environment without BACKPLANE_PLUGIN_PATH (the server finds the build tree's
// plugins, as the CLI tests' tools do) and BACKPLANE_REMOTE, plus `extra` (NAME and value).
inline std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  return sdk::EnvironmentWith(extra, {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_REMOTE"});
}

// How the tests start a program (this one again, or the built tool): in this process's group,
// stdin inherited, with `env`; stdout and stderr to `log`, or with `out_pipe` stdout to a pipe
// (output(), WaitForOutput()) and stderr alone to `log`.
inline sdk::ChildOptions ChildOf(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& log,
                                 bool out_pipe = false) {
  sdk::ChildOptions o;
  o.argv = argv;
  o.env = env;
  (out_pipe ? o.stderr_file : o.log_file) = log;
  o.null_stdin = false;
  o.own_group = false;
  return o;
}

// A scratch folder per test.
inline fs::path ScratchDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(BACKPLANE_TEST_SCRATCH_DIR) /
                 (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// `backplane serve` as a child process, stopped with SIGTERM when destroyed.
class ServerProcess {
 public:
  // `port` 0: a free one the system picks (port()).
  ServerProcess(const fs::path& dir, const std::vector<std::string>& args, int port = 0)
      : dir_(dir) {
    fs::create_directories(dir);
    const fs::path port_file = dir / "port";
    fs::remove(port_file);
    log_ = (dir / "server.log").string();
    std::vector<std::string> argv = {BACKPLANE_CLI_PATH, "serve",
                                     "--listen",         "127.0.0.1:" + std::to_string(port),
                                     "--port-file",      port_file.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    child_.emplace(
        ChildOf(argv, ChildEnvironment({{"XDG_CACHE_HOME", (dir / "cache").string()}}), log_));
    if (!child_->started()) {
      error_ = "cannot start " + std::string(BACKPLANE_CLI_PATH) + ": " + child_->start_error();
      child_.reset();
      return;
    }
    const auto end = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < end) {
      const std::string text = ReadFile(port_file);
      if (!text.empty() && text.back() == '\n') {
        port_ = std::stoi(text);
        return;
      }
      if (child_->WaitFor(0.01)) {
        child_.reset();
        error_ = "the server ended before it listened:\n" + Log();
        return;
      }
    }
    error_ = "no port file after 30 s:\n" + Log();
  }
  ~ServerProcess() { Stop(); }

  // Sends SIGTERM and waits; the server's exit status (0: it stopped cleanly).
  int Stop() {
    if (!child_) return exit_status_;
    child_->Signal(SIGTERM);
    if (!child_->WaitFor(20)) {
      child_->Kill();
      child_->Wait();
      ADD_FAILURE() << "the server did not stop within 20 s of SIGTERM:\n" << Log();
    }
    const int status = child_->status();
    child_.reset();
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }
  // Kills the server with SIGKILL (a crash, a power cut) and reaps it.
  void Kill() {
    if (!child_) return;
    child_->Kill();
    child_->Wait();
    child_.reset();
  }
  // Its pid while it runs, else -1.
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string Log() const { return ReadFile(log_); }

 private:
  fs::path dir_;
  std::string log_;
  std::optional<sdk::ChildProcess> child_;
  int port_ = 0;
  int exit_status_ = -1;
  std::string error_;
};

inline std::unique_ptr<pb::Remote::Stub> Connect(
    const std::string& target,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return pb::Remote::NewStub(grpc::CreateCustomChannel(target, creds, args));
}

inline void SetDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

inline grpc::Status Describe(pb::Remote::Stub& stub, pb::ServerInfo* info,
                             const std::string& token = "") {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 20);
  if (!token.empty()) ctx.AddMetadata(kTokenMetadata, "Bearer " + token);
  pb::DescribeRequest req;
  return stub.Describe(&ctx, req, info);
}

inline pb::ServerStatus GetStatus(pb::Remote::Stub& stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 20);
  pb::ServerStatus status;
  grpc::Status s = stub.Status(&ctx, pb::StatusRequest(), &status);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return status;
}

// Polls Status until no session holds anything (at most `seconds`); the last answer.
inline pb::ServerStatus WaitForEmpty(pb::Remote::Stub& stub, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  pb::ServerStatus s;
  do {
    s = GetStatus(stub);
    if (s.sessions() == 0 && s.buffers() == 0 && s.bytes() == 0 && s.streams() == 0 &&
        s.modules() == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (Clock::now() < end);
  return s;
}

inline pb::DataType DType(uint32_t code, uint32_t bits, uint32_t lanes = 1) {
  pb::DataType t;
  t.set_code(code);
  t.set_bits(bits);
  t.set_lanes(lanes);
  return t;
}

// A client session: commands one at a time, each answered before the next is sent.
class Session {
 public:
  explicit Session(pb::Remote::Stub& stub, const std::string& token = "") {
    SetDeadline(&ctx_, 120);
    if (!token.empty()) ctx_.AddMetadata(kTokenMetadata, "Bearer " + token);
    rw_ = stub.Session(&ctx_);
  }
  ~Session() {
    if (!finished_) {
      rw_->WritesDone();
      rw_->Finish();
    }
  }

  pb::Reply Hello(uint32_t protocol = pb::PROTOCOL_VERSION) {
    pb::Command c;
    c.mutable_hello()->set_protocol(protocol);
    c.mutable_hello()->set_client("remote_server_test");
    return Do(c);
  }
  // Sends `c` (with the next id and want_reply) and reads its reply; a reply with code -1 if
  // the stream ended.
  pb::Reply Do(pb::Command c) {
    c.set_id(next_id_++);
    c.set_want_reply(true);
    Send(c);
    return Receive(c.id());
  }
  void Send(const pb::Command& c) { EXPECT_TRUE(rw_->Write(c)) << "the stream is closed"; }
  pb::Reply Receive(uint64_t id) {
    pb::Reply r;
    if (!rw_->Read(&r)) {
      r.set_code(-1);
      r.set_message("the stream ended");
      return r;
    }
    EXPECT_EQ(r.id(), id);
    return r;
  }
  uint64_t NextId() { return next_id_++; }

  uint64_t Alloc(uint32_t device, uint64_t nbytes, bool workspace = false) {
    pb::Command c;
    c.mutable_alloc()->set_device(device);
    c.mutable_alloc()->set_nbytes(nbytes);
    c.mutable_alloc()->set_workspace(workspace);
    pb::Reply r = Do(c);
    EXPECT_EQ(r.code(), 0) << r.message();
    EXPECT_NE(r.handle(), 0u);
    return r.handle();
  }
  // Writes `data` at `offset` in chunks of `chunk` bytes (one transfer); the last chunk's reply.
  pb::Reply Write(uint64_t buffer, uint64_t offset, const std::string& data,
                  size_t chunk = kChunkBytes, uint64_t stream = 0) {
    const uint64_t transfer = next_id_;
    size_t done = 0;
    uint64_t last_id = 0;
    do {
      const size_t n = std::min(chunk, data.size() - done);
      pb::Command c;
      c.set_id(last_id = NextId());
      pb::Write* w = c.mutable_write();
      w->set_transfer(transfer);
      w->set_buffer(buffer);
      w->set_offset(offset + done);
      w->set_data(data.substr(done, n));
      w->set_stream(stream);
      done += n;
      w->set_last(done == data.size());
      c.set_want_reply(w->last());
      Send(c);
    } while (done < data.size());
    return Receive(last_id);
  }
  // Reads `nbytes` at `offset`; the bytes, or the error reply in *error.
  std::string Read(uint64_t buffer, uint64_t offset, uint64_t nbytes, pb::Reply* error = nullptr,
                   uint64_t chunk = 0, uint64_t stream = 0) {
    pb::Command c;
    c.set_id(NextId());
    c.set_want_reply(true);
    c.mutable_read()->set_buffer(buffer);
    c.mutable_read()->set_offset(offset);
    c.mutable_read()->set_nbytes(nbytes);
    c.mutable_read()->set_chunk_bytes(chunk);
    c.mutable_read()->set_stream(stream);
    Send(c);
    std::string out;
    for (;;) {
      pb::Reply r = Receive(c.id());
      if (r.code() != 0) {
        if (error != nullptr) *error = r;
        return out;
      }
      out += r.data();
      if (r.last()) return out;
    }
  }
  pb::Reply Free(uint64_t buffer) {
    pb::Command c;
    c.mutable_free()->set_buffer(buffer);
    return Do(c);
  }
  pb::Reply Copy(uint64_t from, uint64_t from_offset, uint64_t to, uint64_t to_offset,
                 uint64_t nbytes, uint64_t stream = 0) {
    pb::Command c;
    pb::Copy* p = c.mutable_copy();
    p->set_from_buffer(from);
    p->set_from_offset(from_offset);
    p->set_to_buffer(to);
    p->set_to_offset(to_offset);
    p->set_nbytes(nbytes);
    p->set_stream(stream);
    return Do(c);
  }
  pb::Reply LoadModule(const std::string& bytes, size_t chunk) {
    const uint64_t transfer = next_id_;
    size_t done = 0;
    uint64_t last_id = 0;
    do {
      const size_t n = std::min(chunk, bytes.size() - done);
      pb::Command c;
      c.set_id(last_id = NextId());
      c.mutable_load_module()->set_transfer(transfer);
      c.mutable_load_module()->set_data(bytes.substr(done, n));
      done += n;
      c.mutable_load_module()->set_last(done == bytes.size());
      c.set_want_reply(done == bytes.size());
      Send(c);
    } while (done < bytes.size());
    return Receive(last_id);
  }
  pb::Reply Ping() {
    pb::Command c;
    c.mutable_ping();
    return Do(c);
  }
  // Half-closes and waits for the server's status.
  grpc::Status Finish() {
    rw_->WritesDone();
    finished_ = true;
    return rw_->Finish();
  }
  void Cancel() { ctx_.TryCancel(); }
  // For a stream the server ended: the status, without WritesDone.
  grpc::Status FinishNow() {
    finished_ = true;
    return rw_->Finish();
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::Command, pb::Reply>> rw_;
  uint64_t next_id_ = 1;
  bool finished_ = false;
};

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng() & 0xff);
  return s;
}

class RemoteServer : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ScratchDir(); }
  // Starts a server with `args`; the test stops if it cannot start.
  ServerProcess& Start(const std::vector<std::string>& args = {}) {
    const fs::path dir = dir_ / ("server" + std::to_string(servers_.size()));
    fs::create_directories(dir);
    servers_.push_back(std::make_unique<ServerProcess>(dir, args));
    return *servers_.back();
  }
  fs::path dir_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

#define START_SERVER(var, ...)             \
  ServerProcess& var = Start(__VA_ARGS__); \
  ASSERT_TRUE(var.error().empty()) << var.error()

}  // namespace test
}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_TESTS_REMOTE_SERVER_TEST_H_
