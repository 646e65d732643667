// SPDX-License-Identifier: Apache-2.0
// `backplane serve` (sdk/remote/server.cc) end to end: the built tool runs as a child process on
// 127.0.0.1 with port 0, and the tests speak the protocol (remote.proto) to it with the generated
// gRPC stub: devices, the Hello rule, transfers and their bounds, isolation between sessions,
// cleanup when a client cancels or is killed, native modules, exposed functions, and the
// security options (the loopback rule, mutual TLS, tokens).
//
// The program is also its own client process: `remote_server_test --hold-session PORT` opens a
// session, allocates 64 MiB, says "ready" and waits to be killed.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <backplane/backplane.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backplane/remote/common.h"
#include "backplane/remote/remote.grpc.pb.h"
#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_MAKE_CERTS
#error "BACKPLANE_MAKE_CERTS must name tests/remote/make_certs.sh"
#endif
#ifndef BACKPLANE_TEST_SCRATCH_DIR
#error "BACKPLANE_TEST_SCRATCH_DIR must name a scratch folder"
#endif

extern char** environ;

namespace backplane::remote {
namespace {

namespace pb = backplane::remote::v1;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kHoldBytes = uint64_t{64} << 20;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// This process's environment without BACKPLANE_PLUGIN_PATH (the server finds the build tree's
// plugins, as the CLI tests' tools do) and BACKPLANE_REMOTE, plus `extra`.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("BACKPLANE_PLUGIN_PATH=", 0) == 0) continue;
    if (entry.rfind("BACKPLANE_REMOTE=", 0) == 0) continue;
    env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// Starts `argv` with stdout and stderr to `log` (or a pipe, when `out_fd` is not null); returns
// its pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& log, int* out_fd = nullptr) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int pipe_fds[2] = {-1, -1};
  if (out_fd != nullptr) {
    if (pipe(pipe_fds) != 0) return -1;
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (out_fd != nullptr) {
    close(pipe_fds[1]);
    *out_fd = pipe_fds[0];
  }
  return rc == 0 ? pid : -1;
}

// Waits up to `seconds` for `pid`; its wait status, or -1 if it is still running.
int WaitFor(pid_t pid, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    if (Clock::now() > end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A scratch folder per test.
fs::path ScratchDir() {
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
  ServerProcess(const fs::path& dir, const std::vector<std::string>& args) : dir_(dir) {
    const fs::path port_file = dir / "port";
    fs::remove(port_file);
    log_ = (dir / "server.log").string();
    std::vector<std::string> argv = {BACKPLANE_CLI_PATH, "serve",       "--listen",
                                     "127.0.0.1:0",      "--port-file", port_file.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = Spawn(argv, ChildEnvironment({"XDG_CACHE_HOME=" + (dir / "cache").string()}), log_);
    if (pid_ < 0) {
      error_ = "cannot start " + std::string(BACKPLANE_CLI_PATH);
      return;
    }
    const auto end = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < end) {
      const std::string text = ReadFile(port_file);
      if (!text.empty() && text.back() == '\n') {
        port_ = std::stoi(text);
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        error_ = "the server ended before it listened:\n" + Log();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    error_ = "no port file after 30 s:\n" + Log();
  }
  ~ServerProcess() { Stop(); }

  // Sends SIGTERM and waits; the server's exit status (0: it stopped cleanly).
  int Stop() {
    if (pid_ < 0) return exit_status_;
    kill(pid_, SIGTERM);
    int status = WaitFor(pid_, 20);
    if (status == -1) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      ADD_FAILURE() << "the server did not stop within 20 s of SIGTERM:\n" << Log();
    }
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string Log() const { return ReadFile(log_); }

 private:
  fs::path dir_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string error_;
};

std::unique_ptr<pb::Remote::Stub> Connect(
    const std::string& target,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return pb::Remote::NewStub(grpc::CreateCustomChannel(target, creds, args));
}

void SetDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

grpc::Status Describe(pb::Remote::Stub& stub, pb::ServerInfo* info, const std::string& token = "") {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 20);
  if (!token.empty()) ctx.AddMetadata(kTokenMetadata, "Bearer " + token);
  pb::DescribeRequest req;
  return stub.Describe(&ctx, req, info);
}

pb::ServerStatus GetStatus(pb::Remote::Stub& stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 20);
  pb::ServerStatus status;
  grpc::Status s = stub.Status(&ctx, pb::StatusRequest(), &status);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return status;
}

// Polls Status until no session holds anything (at most `seconds`); the last answer.
pb::ServerStatus WaitForEmpty(pb::Remote::Stub& stub, double seconds) {
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

pb::DataType DType(uint32_t code, uint32_t bits, uint32_t lanes = 1) {
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

std::string RandomBytes(size_t n, uint64_t seed) {
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

// The device types this process sees (the build tree's plugins), without remote.
std::multiset<std::string> LocalDevices() {
  std::multiset<std::string> out;
  for (const DeviceEntry& d : ListDevices()) {
    const std::string name = Device(d.device).ToString();
    if (name.rfind("remote:", 0) != 0) out.insert(name);
  }
  return out;
}

TEST_F(RemoteServer, DescribeListsThisMachinesDevicesAndNeverRemoteOnes) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  pb::ServerInfo info;
  grpc::Status s = Describe(*stub, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.protocol(), static_cast<uint32_t>(pb::PROTOCOL_VERSION));
  EXPECT_FALSE(info.version().empty());
  EXPECT_FALSE(info.host().empty());
  EXPECT_FALSE(info.allows_native_modules());
  EXPECT_EQ(info.functions_size(), 0);
  std::multiset<std::string> served;
  for (const pb::DeviceInfo& d : info.devices()) {
    EXPECT_NE(d.type(), "remote");
    served.insert(d.type() + ":" + std::to_string(d.id()));
    if (d.type() == "cpu") {
      EXPECT_EQ(d.target_kind(), "c");
    }
  }
  ASSERT_FALSE(info.devices().empty());
  EXPECT_EQ(info.devices(0).type(), "cpu");
  EXPECT_EQ(info.devices(0).id(), 0);
  EXPECT_FALSE(info.devices(0).name().empty());
  EXPECT_EQ(served, LocalDevices()) << server.Log();
  {
    // A session's Hello carries the same.
    Session session(*stub);
    pb::Reply hello = session.Hello();
    ASSERT_EQ(hello.code(), 0) << hello.message();
    EXPECT_EQ(hello.info().devices_size(), info.devices_size());
    EXPECT_TRUE(session.Finish().ok());
  }
  stub.reset();  // an open channel would hold the stop for its 2 s grace
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_TRUE(Contains(server.Log(), "listening on 127.0.0.1:")) << server.Log();
  EXPECT_TRUE(Contains(server.Log(), "plaintext loopback")) << server.Log();
}

TEST_F(RemoteServer, DevicesOptionChoosesTypes) {
  START_SERVER(server, {"--devices", "cpu"});
  auto stub = Connect(server.target());
  pb::ServerInfo info;
  ASSERT_TRUE(Describe(*stub, &info).ok());
  ASSERT_EQ(info.devices_size(), 1);
  EXPECT_EQ(info.devices(0).type(), "cpu");
}

TEST_F(RemoteServer, HelloOfAnotherProtocolIsRefused) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  {
    Session session(*stub);
    pb::Reply r = session.Hello(99);
    EXPECT_EQ(r.code(), BP_ERR_VERSION_MISMATCH);
    EXPECT_TRUE(Contains(r.message(), "protocol 1")) << r.message();
    EXPECT_TRUE(Contains(r.message(), "99")) << r.message();
    EXPECT_EQ(session.Receive(0).code(), -1);  // the server ended the stream
    session.FinishNow();
  }
  {
    Session session(*stub);
    pb::Reply r = session.Ping();
    EXPECT_EQ(r.code(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(r.message(), "Hello")) << r.message();
    session.FinishNow();
  }
  {
    Session session(*stub);
    ASSERT_EQ(session.Hello().code(), 0);
    pb::Reply again = session.Hello();
    EXPECT_EQ(again.code(), BP_ERR_INVALID_ARGUMENT) << again.message();
    EXPECT_EQ(session.Ping().code(), 0);  // still open
    EXPECT_TRUE(session.Finish().ok());
  }
}

TEST_F(RemoteServer, WritesAndReadsBackEveryDevice) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0) << hello.message();
  const size_t n = (size_t{3} << 20) + 17;
  std::vector<uint64_t> buffers;
  std::vector<std::string> contents;  // what each buffer holds
  for (int d = 0; d < hello.info().devices_size(); ++d) {
    SCOPED_TRACE(hello.info().devices(d).type() + ":" +
                 std::to_string(hello.info().devices(d).id()));
    const std::string data = RandomBytes(n, 1000 + static_cast<uint64_t>(d));
    const uint32_t dev = static_cast<uint32_t>(d);
    const uint64_t buf = session.Alloc(dev, n);
    buffers.push_back(buf);
    pb::Reply w = session.Write(buf, 0, data);
    ASSERT_EQ(w.code(), 0) << w.message();
    pb::Reply error;
    EXPECT_TRUE(session.Read(buf, 0, n, &error) == data) << error.message();
    // Odd chunks, an offset, and a stream of the device.
    pb::Command cs;
    cs.mutable_create_stream()->set_device(dev);
    pb::Reply stream = session.Do(cs);
    ASSERT_EQ(stream.code(), 0) << stream.message();
    const std::string part = RandomBytes(100000, 2000 + static_cast<uint64_t>(d));
    ASSERT_EQ(session.Write(buf, 12345, part, 7777, stream.handle()).code(), 0);
    EXPECT_TRUE(session.Read(buf, 12345, part.size(), &error, 4099, stream.handle()) == part)
        << error.message();
    contents.push_back(data);
    contents.back().replace(12345, part.size(), part);
    pb::Command sync;
    sync.mutable_sync_stream()->set_device(dev);
    sync.mutable_sync_stream()->set_stream(stream.handle());
    EXPECT_EQ(session.Do(sync).code(), 0);
    pb::Command fs;
    fs.mutable_free_stream()->set_device(dev);
    fs.mutable_free_stream()->set_stream(stream.handle());
    EXPECT_EQ(session.Do(fs).code(), 0);
    // An empty read is one reply.
    EXPECT_EQ(session.Read(buf, n, 0, &error), "");
    // A workspace holds bytes too.
    const uint64_t ws = session.Alloc(dev, 4096, /*workspace=*/true);
    ASSERT_EQ(session.Write(ws, 0, part.substr(0, 4096)).code(), 0);
    EXPECT_TRUE(session.Read(ws, 0, 4096) == part.substr(0, 4096));
    EXPECT_EQ(session.Free(ws).code(), 0);
  }
  // Device to device: each buffer into the next device's, at an offset.
  const int count = hello.info().devices_size();
  for (int d = 0; d < count; ++d) {
    const uint32_t to_dev = static_cast<uint32_t>((d + 1) % count);
    const uint64_t to = session.Alloc(to_dev, n + 5);
    pb::Reply c = session.Copy(buffers[static_cast<size_t>(d)], 0, to, 5, n);
    ASSERT_EQ(c.code(), 0) << c.message();
    EXPECT_TRUE(session.Read(to, 5, n) == contents[static_cast<size_t>(d)])
        << "copy from device " << d;
    EXPECT_EQ(session.Free(to).code(), 0);
  }
  pb::ServerStatus status = GetStatus(*stub);
  EXPECT_EQ(status.sessions(), 1u);
  EXPECT_EQ(status.buffers(), static_cast<uint64_t>(count));
  EXPECT_EQ(status.bytes(), static_cast<uint64_t>(count) * n);
  EXPECT_EQ(status.streams(), 0u);
  for (uint64_t b : buffers) EXPECT_EQ(session.Free(b).code(), 0);
  EXPECT_EQ(session.Free(buffers[0]).code(), BP_ERR_INVALID_ARGUMENT);  // freed already
  EXPECT_TRUE(session.Finish().ok());
  pb::ServerStatus after = WaitForEmpty(*stub, 10);
  EXPECT_EQ(after.sessions(), 0u);
  EXPECT_EQ(after.buffers(), 0u);
}

TEST_F(RemoteServer, OutOfBoundsTransfersAreRefused) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0);
  const uint64_t buf = session.Alloc(0, 1000);
  // A transfer whose second chunk goes past the end: the last chunk's reply has the error.
  pb::Reply w = session.Write(buf, 500, RandomBytes(600, 1), 300);
  EXPECT_EQ(w.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(w.message(), "past its end")) << w.message();
  EXPECT_TRUE(Contains(w.message(), "1000 bytes")) << w.message();
  // Offsets near 2^64 do not wrap.
  EXPECT_EQ(session.Write(buf, UINT64_MAX - 2, "abcd").code(), BP_ERR_INVALID_ARGUMENT);
  pb::Reply error;
  EXPECT_EQ(session.Read(buf, 900, 101, &error), "");
  EXPECT_EQ(error.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(error.message(), "past its end")) << error.message();
  session.Read(buf, UINT64_MAX, 2, &error);
  EXPECT_EQ(error.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(session.Copy(buf, 0, buf, 999, 2).code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(session.Copy(buf, UINT64_MAX, buf, 0, 2).code(), BP_ERR_INVALID_ARGUMENT);
  pb::Reply overlap = session.Copy(buf, 0, buf, 10, 20);
  EXPECT_EQ(overlap.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(overlap.message(), "overlap")) << overlap.message();
  EXPECT_EQ(session.Copy(buf, 0, buf, 20, 20).code(), 0);
  // In bounds still works, and the failed writes wrote nothing.
  EXPECT_EQ(session.Write(buf, 0, std::string(1000, 'x')).code(), 0);
  EXPECT_EQ(session.Write(buf, 990, RandomBytes(20, 2), 10).code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(session.Read(buf, 0, 1000).substr(0, 990), std::string(990, 'x'));
  // A device index past the end names the count.
  pb::Command a;
  a.mutable_alloc()->set_device(1000);
  a.mutable_alloc()->set_nbytes(16);
  pb::Reply r = session.Do(a);
  EXPECT_EQ(r.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(r.message(), "serves " + std::to_string(hello.info().devices_size())))
      << r.message();
  EXPECT_TRUE(session.Finish().ok());
}

TEST_F(RemoteServer, HostileCommandsAreRefusedNotFatal) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0);
  session.Alloc(0, 64);
  auto expect_error = [&](pb::Command c, const std::string& what) {
    pb::Reply r = session.Do(std::move(c));
    EXPECT_NE(r.code(), 0) << what;
    EXPECT_NE(r.code(), -1) << what << ": the stream ended";
    EXPECT_FALSE(r.message().empty()) << what;
  };
  {
    pb::Command c;
    c.mutable_alloc()->set_device(0);
    c.mutable_alloc()->set_nbytes(UINT64_MAX);
    expect_error(c, "alloc of 2^64-1 bytes");
    c.mutable_alloc()->set_nbytes(64);
    c.mutable_alloc()->set_alignment(3);
    expect_error(c, "alignment 3");
  }
  {
    pb::Command c;
    c.mutable_get_attr()->set_device(77);
    expect_error(c, "attribute of device 77");
    for (int32_t kind : {-5, 1000, INT32_MAX}) {
      c.mutable_get_attr()->set_device(0);
      c.mutable_get_attr()->set_kind(kind);
      pb::Reply r = session.Do(c);
      EXPECT_NE(r.code(), -1) << "attribute kind " << kind;
    }
  }
  {
    pb::Command c;
    c.mutable_free_stream()->set_device(0);
    c.mutable_free_stream()->set_stream(0);
    expect_error(c, "freeing the null stream");
    c.mutable_free_stream()->set_stream(42);
    expect_error(c, "freeing stream 42");
  }
  {
    pb::Command c;
    c.mutable_free_module()->set_module(5);
    expect_error(c, "freeing module 5");
  }
  {
    pb::Command c;
    c.mutable_call()->set_module(12345);
    c.mutable_call()->set_function("f");
    expect_error(c, "calling into module 12345");
  }
  {
    pb::Command c;
    expect_error(c, "a command with no operation");
  }
  EXPECT_NE(session.LoadModule("not a module file", 4).code(), 0);
  EXPECT_NE(session.LoadModule(std::string(10000, '\xff'), 4096).code(), 0);
  {
    // A stream of another device.
    pb::Command cs;
    cs.mutable_create_stream()->set_device(0);
    pb::Reply s = session.Do(cs);
    ASSERT_EQ(s.code(), 0) << s.message();
    if (hello.info().devices_size() > 1) {
      pb::Command c;
      c.mutable_sync_stream()->set_device(1);
      c.mutable_sync_stream()->set_stream(s.handle());
      expect_error(c, "a stream of device 0 on device 1");
    }
  }
  {
    pb::Command c;
    c.mutable_alloc()->set_device(0);
    c.mutable_alloc()->set_nbytes(16);
    *c.mutable_alloc()->mutable_type_hint() = DType(2, 0, 70000);
    EXPECT_EQ(session.Do(c).code(), 0) << "a hint of 0 bits reads as none";
    *c.mutable_alloc()->mutable_type_hint() = DType(2, 32, 70000);
    expect_error(c, "70000 lanes");
  }
  EXPECT_EQ(session.Ping().code(), 0);
  EXPECT_TRUE(session.Finish().ok());
}

TEST_F(RemoteServer, SessionsCannotTouchEachOthersHandles) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session a(*stub);
  Session b(*stub);
  ASSERT_EQ(a.Hello().code(), 0);
  ASSERT_EQ(b.Hello().code(), 0);
  const std::string data = RandomBytes(4096, 7);
  const uint64_t mine = a.Alloc(0, data.size());
  ASSERT_EQ(a.Write(mine, 0, data).code(), 0);
  const uint64_t theirs = b.Alloc(0, data.size());
  pb::Reply error;
  // b's handle numbers start at 1 too; a's buffer 1 is not b's. Handle 2 is nobody's in b.
  const uint64_t foreign = mine + 1;
  EXPECT_TRUE(b.Read(foreign, 0, 16, &error).empty());
  EXPECT_EQ(error.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(
      Contains(error.message(), "no buffer " + std::to_string(foreign) + " in this session"))
      << error.message();
  // b writes its own buffer 1; a's buffer 1 is untouched.
  ASSERT_EQ(theirs, mine);
  ASSERT_EQ(b.Write(theirs, 0, std::string(data.size(), 'b')).code(), 0);
  EXPECT_TRUE(a.Read(mine, 0, data.size()) == data);
  // a second buffer in a; b cannot free, read, write or copy it.
  const uint64_t second = a.Alloc(0, 64);
  pb::Reply f = b.Free(second);
  EXPECT_EQ(f.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(f.message(), "no buffer " + std::to_string(second) + " in this session"));
  b.Read(second, 0, 8, &error);
  EXPECT_EQ(error.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.Copy(second, 0, theirs, 0, 8).code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.Copy(theirs, 0, second, 0, 8).code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.Write(second, 0, "12345678").code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(a.Read(second, 0, 8).size(), 8u);
  EXPECT_EQ(a.Free(second).code(), 0);
  EXPECT_TRUE(a.Finish().ok());
  EXPECT_TRUE(b.Finish().ok());
}

TEST_F(RemoteServer, ACancelledSessionFreesEverything) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  {
    Session session(*stub);
    pb::Reply hello = session.Hello();
    ASSERT_EQ(hello.code(), 0);
    for (int d = 0; d < hello.info().devices_size(); ++d) {
      session.Alloc(static_cast<uint32_t>(d), 1 << 20);
      session.Alloc(static_cast<uint32_t>(d), 4096, /*workspace=*/true);
      pb::Command cs;
      cs.mutable_create_stream()->set_device(static_cast<uint32_t>(d));
      EXPECT_EQ(session.Do(cs).code(), 0);
    }
    pb::ServerStatus held = GetStatus(*stub);
    EXPECT_EQ(held.sessions(), 1u);
    EXPECT_EQ(held.buffers(), 2u * static_cast<uint64_t>(hello.info().devices_size()));
    EXPECT_EQ(held.streams(), static_cast<uint64_t>(hello.info().devices_size()));
    session.Cancel();
    session.FinishNow();
  }
  pb::ServerStatus s = WaitForEmpty(*stub, 10);
  EXPECT_EQ(s.sessions(), 0u);
  EXPECT_EQ(s.buffers(), 0u);
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(s.streams(), 0u);
  stub.reset();  // an open channel would hold the stop for its 2 s grace
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_TRUE(Contains(server.Log(), "ended: freed")) << server.Log();
}

TEST_F(RemoteServer, StoppingTheServerEndsItsSessions) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  ASSERT_EQ(session.Hello().code(), 0);
  session.Alloc(0, 4096);
  const auto t0 = Clock::now();
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(session.Ping().code(), -1);  // the server ended the stream
  session.FinishNow();
  const std::string log = server.Log();
  EXPECT_TRUE(Contains(log, "received SIGTERM")) << log;
  EXPECT_TRUE(Contains(log, "freed 1 buffers (4096 bytes)")) << log;
  EXPECT_TRUE(Contains(log, "stopped")) << log;
}

TEST_F(RemoteServer, AKilledClientsSessionFreesEverything) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  int out = -1;
  const pid_t child = Spawn({"/proc/self/exe", "--hold-session", server.target()},
                            ChildEnvironment({}), (dir_ / "client.log").string(), &out);
  ASSERT_GT(child, 0);
  // Wait (bounded) for the child to hold its buffer.
  std::string said;
  pollfd p{out, POLLIN, 0};
  const auto end = Clock::now() + std::chrono::seconds(30);
  while (!Contains(said, "ready") && Clock::now() < end) {
    if (poll(&p, 1, 100) > 0) {
      char buf[64];
      const ssize_t n = read(out, buf, sizeof(buf));
      if (n <= 0) break;
      said.append(buf, static_cast<size_t>(n));
    }
  }
  close(out);
  ASSERT_TRUE(Contains(said, "ready")) << ReadFile(dir_ / "client.log");
  pb::ServerStatus held = GetStatus(*stub);
  EXPECT_EQ(held.sessions(), 1u);
  EXPECT_EQ(held.buffers(), 1u);
  EXPECT_EQ(held.bytes(), kHoldBytes);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  pb::ServerStatus s = WaitForEmpty(*stub, 20);
  EXPECT_EQ(s.sessions(), 0u);
  EXPECT_EQ(s.buffers(), 0u);
  EXPECT_EQ(s.bytes(), 0u) << server.Log();
  stub.reset();
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_TRUE(Contains(server.Log(), "freed 1 buffers (" + std::to_string(kHoldBytes) + " bytes)"))
      << server.Log();
}

// vector_add built here for the c target (a module that carries native code), saved.
std::string NativeModule(const fs::path& dir, const kernels::Case** out_case) {
  setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);
  const kernels::Case* c = kernels::Find("vector_add");
  if (c == nullptr) throw std::runtime_error("no vector_add in the kernel catalog");
  *out_case = c;
  // The file also holds the GPU variant, which a CPU Target cannot build: only this function.
  const ir::IRModule file = ir::Parse(kernels::ReadKernelFile(c->file), c->file);
  ir::IRModule one;
  one.Add(*file.Find(c->func));
  Module m = Build(ir::Print(one), Target::Parse("c"));
  return m.SaveToBytes();
}

TEST_F(RemoteServer, NativeModulesLoadOnlyWhenAllowed) {
  const kernels::Case* kcase = nullptr;
  const std::string bytes = NativeModule(dir_, &kcase);
  ASSERT_GT(bytes.size(), 100u);
  {
    START_SERVER(server);
    auto stub = Connect(server.target());
    Session session(*stub);
    ASSERT_EQ(session.Hello().code(), 0);
    pb::Reply r = session.LoadModule(bytes, 4096);
    EXPECT_EQ(r.code(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(r.message(), "backplane serve --allow-native-modules")) << r.message();
    EXPECT_TRUE(Contains(r.message(), "does not load native code")) << r.message();
    EXPECT_TRUE(session.Finish().ok());
  }
  START_SERVER(server, {"--allow-native-modules"});
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0);
  EXPECT_TRUE(hello.info().allows_native_modules());
  pb::Reply loaded = session.LoadModule(bytes, 4096);
  ASSERT_EQ(loaded.code(), 0) << loaded.message() << "\n" << server.Log();
  ASSERT_NE(loaded.handle(), 0u);
  EXPECT_NE(std::find(loaded.names().begin(), loaded.names().end(), "vector_add"),
            loaded.names().end());
  EXPECT_EQ(GetStatus(*stub).modules(), 1u);
  // Random inputs, run remotely, compared with the host reference.
  std::vector<kernels::Arg> args = kcase->make_args(kcase->small, 42);
  std::vector<kernels::Arg> want = args;
  kcase->reference(want);
  pb::Command call;
  call.mutable_call()->set_module(loaded.handle());
  call.mutable_call()->set_function("vector_add");
  std::vector<uint64_t> handles(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    const kernels::Arg& a = args[i];
    pb::Arg* arg = call.mutable_call()->add_args();
    if (!a.is_buffer) {
      if (a.dtype.is_float()) {
        arg->set_f(a.scalar);
      } else {
        arg->set_i(static_cast<int64_t>(a.scalar));
      }
      continue;
    }
    std::vector<float> host(a.data.begin(), a.data.end());
    std::string raw(reinterpret_cast<const char*>(host.data()), host.size() * sizeof(float));
    handles[i] = session.Alloc(0, raw.size());
    ASSERT_EQ(session.Write(handles[i], 0, raw).code(), 0);
    pb::TensorArg* t = arg->mutable_tensor();
    t->set_device(0);
    t->set_buffer(handles[i]);
    *t->mutable_dtype() = DType(kDLFloat, 32);
    for (int64_t s : a.shape) t->add_shape(s);
  }
  pb::Reply result = session.Do(call);
  ASSERT_EQ(result.code(), 0) << result.message();
  EXPECT_TRUE(result.value().none());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_output) continue;
    const std::string raw = session.Read(handles[i], 0, args[i].data.size() * sizeof(float));
    ASSERT_EQ(raw.size(), args[i].data.size() * sizeof(float));
    std::vector<float> got(args[i].data.size());
    std::memcpy(got.data(), raw.data(), raw.size());
    kernels::Arg out = args[i];
    out.data.assign(got.begin(), got.end());
    EXPECT_LE(kernels::RelativeError(out, want[i]), kcase->tolerance) << args[i].name;
  }
  // A name the module lacks lists the ones it has.
  call.mutable_call()->set_function("vector_sub");
  pb::Reply missing = session.Do(call);
  EXPECT_EQ(missing.code(), BP_ERR_NOT_FOUND);
  EXPECT_TRUE(Contains(missing.message(), "vector_add")) << missing.message();
  pb::Command free;
  free.mutable_free_module()->set_module(loaded.handle());
  EXPECT_EQ(session.Do(free).code(), 0);
  EXPECT_EQ(GetStatus(*stub).modules(), 0u);
  EXPECT_TRUE(session.Finish().ok());
}

// blas.sgemm (the cpu plugin's) with row-major a [m, k], b [k, n], c [m, n] in buffers of cpu:0.
TEST_F(RemoteServer, OnlyExposedFunctionsCanBeCalledByName) {
  START_SERVER(server, {"--expose", "blas.sgemm"});
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0);
  ASSERT_EQ(hello.info().functions_size(), 1);
  EXPECT_EQ(hello.info().functions(0), "blas.sgemm");
  const int64_t m = 3, n = 4, k = 5;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (float& x : c) x = dist(rng);
  auto upload = [&](const std::vector<float>& v) {
    const std::string raw(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    const uint64_t h = session.Alloc(0, raw.size());
    EXPECT_EQ(session.Write(h, 0, raw).code(), 0);
    return h;
  };
  const uint64_t ha = upload(a), hb = upload(b), hc = upload(c);
  auto matrix = [&](pb::Arg* arg, uint64_t h, int64_t rows, int64_t cols) {
    pb::TensorArg* t = arg->mutable_tensor();
    t->set_device(0);
    t->set_buffer(h);
    *t->mutable_dtype() = DType(kDLFloat, 32);
    t->add_shape(rows);
    t->add_shape(cols);
  };
  pb::Command call;
  pb::Call* p = call.mutable_call();
  p->set_function("blas.sgemm");
  p->add_args()->set_i(m);
  p->add_args()->set_i(n);
  p->add_args()->set_i(k);
  p->add_args()->set_f(1.5);
  matrix(p->add_args(), ha, m, k);
  matrix(p->add_args(), hb, k, n);
  p->add_args()->set_f(0.5);
  matrix(p->add_args(), hc, m, n);
  pb::Reply r = session.Do(call);
  ASSERT_EQ(r.code(), 0) << r.message();
  const std::string raw = session.Read(hc, 0, c.size() * sizeof(float));
  ASSERT_EQ(raw.size(), c.size() * sizeof(float));
  std::vector<float> got(c.size());
  std::memcpy(got.data(), raw.data(), raw.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.5 * c[i * n + j];
      for (int64_t l = 0; l < k; ++l) want += 1.5 * a[i * k + l] * b[l * n + j];
      EXPECT_NEAR(got[i * n + j], want, 1e-5) << i << "," << j;
    }
  }
  // Views past the buffer, negative extents or strides, and too many dimensions are refused
  // before the function sees them.
  auto refused = [&](const std::function<void(pb::TensorArg*)>& edit, const std::string& part) {
    pb::Command bad = call;
    edit(bad.mutable_call()->mutable_args(7)->mutable_tensor());
    pb::Reply e = session.Do(bad);
    EXPECT_EQ(e.code(), BP_ERR_INVALID_ARGUMENT) << part;
    EXPECT_TRUE(Contains(e.message(), part)) << e.message();
  };
  refused([](pb::TensorArg* t) { t->set_shape(0, 4); }, "the buffer holds 48");
  refused([](pb::TensorArg* t) { t->set_byte_offset(4); }, "reaches byte 52");
  refused([](pb::TensorArg* t) { t->set_shape(1, -1); }, "extent -1");
  refused(
      [](pb::TensorArg* t) {
        t->add_strides(4);
        t->add_strides(-1);
      },
      "stride -1");
  refused(
      [](pb::TensorArg* t) {
        t->add_strides(INT64_MAX);
        t->add_strides(1);
      },
      "overflows");
  refused(
      [](pb::TensorArg* t) {
        for (int i = 0; i < 40; ++i) t->add_shape(1);
      },
      "at most 32");
  refused([](pb::TensorArg* t) { t->set_buffer(999); }, "no buffer 999");
  // Functions not exposed are refused, naming the option.
  pb::Command other;
  other.mutable_call()->set_function("device_api.cpu");
  pb::Reply no = session.Do(other);
  EXPECT_EQ(no.code(), BP_ERR_NOT_FOUND);
  EXPECT_TRUE(Contains(no.message(), "--expose device_api.cpu")) << no.message();
  EXPECT_TRUE(session.Finish().ok());
}

TEST_F(RemoteServer, MaxSessionsIsEnforced) {
  START_SERVER(server, {"--max-sessions", "1"});
  auto stub = Connect(server.target());
  Session first(*stub);
  ASSERT_EQ(first.Hello().code(), 0);
  {
    Session second(*stub);
    EXPECT_EQ(second.Hello().code(), -1);
    grpc::Status s = second.FinishNow();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_TRUE(Contains(s.error_message(), "--max-sessions 1")) << s.error_message();
  }
  EXPECT_TRUE(first.Finish().ok());
  WaitForEmpty(*stub, 10);
  Session third(*stub);
  EXPECT_EQ(third.Hello().code(), 0);
  EXPECT_TRUE(third.Finish().ok());
}

TEST_F(RemoteServer, HelpFitsTheTerminalAndShowsExamples) {
  subprocess::Options o;
  o.timeout_s = 60;
  o.set_env = {{"COLUMNS", "80"}};
  subprocess::Result r = subprocess::Run({BACKPLANE_CLI_PATH, "serve", "--help"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  for (const char* part : {"Examples:", "Exit codes:", "Environment:", "--allow-native-modules",
                           "--expose", "--max-sessions", "--port-file", "--token-file"}) {
    EXPECT_TRUE(Contains(r.out, part)) << part;
  }
}

TEST_F(RemoteServer, AnAddressOtherMachinesReachNeedsTls) {
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH, "serve", "--listen", "0.0.0.0:0"};
  subprocess::Options o;
  o.timeout_s = 60;
  subprocess::Result r = subprocess::Run(argv, o);
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << r.err;
  for (const char* part :
       {"--tls-cert", "--tls-key", "--client-ca", "--token-file", "docs/security.md"}) {
    EXPECT_TRUE(Contains(r.err, part)) << part << " in: " << r.err;
  }
  // TLS without client authentication is not enough there either.
  const fs::path certs = dir_ / "certs";
  ASSERT_EQ(subprocess::Run({"/bin/sh", BACKPLANE_MAKE_CERTS, certs.string()}, o).exit_code, 0);
  r = subprocess::Run(
      {BACKPLANE_CLI_PATH, "serve", "--listen", "0.0.0.0:0", "--tls-cert",
       (certs / "server.pem").string(), "--tls-key", (certs / "server.key").string()},
      o);
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << r.err;
  // A port that is taken is a failure to start (1).
  START_SERVER(server);
  r = subprocess::Run({BACKPLANE_CLI_PATH, "serve", "--listen", server.target()}, o);
  EXPECT_EQ(r.exit_code, 1) << r.Describe() << r.err;
  EXPECT_TRUE(Contains(r.err, server.target())) << r.err;
}

std::shared_ptr<grpc::ChannelCredentials> Tls(const fs::path& certs, const std::string& client) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFile(certs / "ca.pem");
  if (!client.empty()) {
    o.pem_cert_chain = ReadFile(certs / (client + ".pem"));
    o.pem_private_key = ReadFile(certs / (client + ".key"));
  }
  return grpc::SslCredentials(o);
}

TEST_F(RemoteServer, MutualTlsNeedsACertificateTheCaSigned) {
  const fs::path certs = dir_ / "certs";
  subprocess::Options o;
  o.timeout_s = 60;
  ASSERT_EQ(subprocess::Run({"/bin/sh", BACKPLANE_MAKE_CERTS, certs.string()}, o).exit_code, 0);
  START_SERVER(server,
               {"--tls-cert", (certs / "server.pem").string(), "--tls-key",
                (certs / "server.key").string(), "--client-ca", (certs / "ca.pem").string()});
  EXPECT_TRUE(Contains(server.Log(), "TLS+mTLS")) << server.Log();
  pb::ServerInfo info;
  {
    auto stub = Connect(server.target(), grpc::InsecureChannelCredentials());
    EXPECT_FALSE(Describe(*stub, &info).ok()) << "plaintext";
  }
  {
    auto stub = Connect(server.target(), Tls(certs, ""));
    EXPECT_FALSE(Describe(*stub, &info).ok()) << "no client certificate";
  }
  {
    auto stub = Connect(server.target(), Tls(certs, "other_client"));
    EXPECT_FALSE(Describe(*stub, &info).ok()) << "a certificate of another CA";
  }
  auto stub = Connect(server.target(), Tls(certs, "client"));
  grpc::Status s = Describe(*stub, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  Session session(*stub);
  ASSERT_EQ(session.Hello().code(), 0);
  const uint64_t buf = session.Alloc(0, 100);
  EXPECT_EQ(session.Write(buf, 0, std::string(100, 'z')).code(), 0);
  EXPECT_EQ(session.Read(buf, 0, 100), std::string(100, 'z'));
  EXPECT_TRUE(session.Finish().ok());
}

TEST_F(RemoteServer, ATokenIsNeededWhenTheServerHasOne) {
  const fs::path certs = dir_ / "certs";
  subprocess::Options o;
  o.timeout_s = 60;
  ASSERT_EQ(subprocess::Run({"/bin/sh", BACKPLANE_MAKE_CERTS, certs.string()}, o).exit_code, 0);
  const std::string token = "0123456789abcdef-test-token";
  std::ofstream(dir_ / "token") << token << "\n";
  START_SERVER(server,
               {"--tls-cert", (certs / "server.pem").string(), "--tls-key",
                (certs / "server.key").string(), "--token-file", (dir_ / "token").string()});
  EXPECT_TRUE(Contains(server.Log(), "TLS+token")) << server.Log();
  auto stub = Connect(server.target(), Tls(certs, ""));
  pb::ServerInfo info;
  grpc::Status none = Describe(*stub, &info);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Contains(none.error_message(), "Bearer")) << none.error_message();
  EXPECT_EQ(Describe(*stub, &info, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Describe(*stub, &info, token + "x").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 20);
    pb::ServerStatus st;
    EXPECT_EQ(stub->Status(&ctx, pb::StatusRequest(), &st).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    Session session(*stub, "wrong");
    EXPECT_EQ(session.Hello().code(), -1);
    EXPECT_EQ(session.FinishNow().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::Status s = Describe(*stub, &info, token);
  ASSERT_TRUE(s.ok()) << s.error_message();
  Session session(*stub, token);
  ASSERT_EQ(session.Hello().code(), 0);
  EXPECT_EQ(session.Ping().code(), 0);
  EXPECT_TRUE(session.Finish().ok());
}

// The client process of AKilledClientsSessionFreesEverything: opens a session on `target`,
// allocates kHoldBytes on device 0, writes to them, prints "ready" and waits to be killed.
int HoldSession(const std::string& target) {
  auto stub = Connect(target);
  Session session(*stub);
  if (session.Hello().code() != 0) return 3;
  const uint64_t buf = session.Alloc(0, kHoldBytes);
  if (session.Write(buf, kHoldBytes - 4, "last").code() != 0) return 4;
  std::cout << "ready" << std::endl;
  for (;;) pause();
}

}  // namespace
}  // namespace backplane::remote

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--hold-session") {
    return backplane::remote::HoldSession(argv[2]);
  }
  // The devices this process compares with are its own, never a server's.
  unsetenv("BACKPLANE_REMOTE");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
