// SPDX-License-Identifier: Apache-2.0
// `backplane serve` (sdk/kit/remote/) end to end, the protocol itself: the built tool runs as a
// child process and the tests speak remote.proto to it: devices, the Hello rule, transfers and
// their bounds, hostile commands, isolation between sessions, cleanup when a client cancels, is
// killed or the server stops, and the session limit. server_call_test.cc has modules and calls,
// server_security_test.cc the security options.
//
// The program is also its own client process: `remote_server_test --hold-session HOST:PORT`
// opens a session, allocates 64 MiB, says "ready" and waits to be killed.
#include "server_test.h"

#include <backplane/backplane.hpp>
#include <cstdlib>
#include <iostream>
#include <set>

#include "subprocess.h"

namespace backplane {
namespace remote {
namespace test {
namespace {

constexpr uint64_t kHoldBytes = uint64_t{64} << 20;

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
  sdk::ChildProcess child(ChildOf({"/proc/self/exe", "--hold-session", server.target()},
                                  ChildEnvironment({}), (dir_ / "client.log").string(),
                                  /*out_pipe=*/true));
  ASSERT_TRUE(child.started()) << child.start_error();
  // Wait (bounded) for the child to hold its buffer.
  ASSERT_TRUE(child.WaitForOutput("ready", 30)) << ReadFile(dir_ / "client.log");
  pb::ServerStatus held = GetStatus(*stub);
  EXPECT_EQ(held.sessions(), 1u);
  EXPECT_EQ(held.buffers(), 1u);
  EXPECT_EQ(held.bytes(), kHoldBytes);
  child.Kill();
  child.Wait();
  pb::ServerStatus s = WaitForEmpty(*stub, 20);
  EXPECT_EQ(s.sessions(), 0u);
  EXPECT_EQ(s.buffers(), 0u);
  EXPECT_EQ(s.bytes(), 0u) << server.Log();
  stub.reset();
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_TRUE(Contains(server.Log(), "freed 1 buffers (" + std::to_string(kHoldBytes) + " bytes)"))
      << server.Log();
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

// Isolation between sessions, on the protocol: what another session freed reads as zeros in every
// way a session can read a buffer it has not written whole: a read, a read past a partial write,
// the gap before a write at an offset, a copy out of it, and a call that takes it.
TEST_F(RemoteServer, FreedMemoryOfAnotherSessionReadsAsZeros) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  pb::ServerInfo info;
  ASSERT_TRUE(Describe(*stub, &info).ok());
  ASSERT_GT(info.devices_size(), 0) << "the server serves no device";
  const uint64_t n = (uint64_t{1} << 20) + 3;
  for (int d = 0; d < info.devices_size(); ++d) {
    SCOPED_TRACE(info.devices(d).type() + ":" + std::to_string(info.devices(d).id()));
    const uint32_t dev = static_cast<uint32_t>(d);
    // Session A fills buffers (data space and workspace) with a marker and frees them.
    {
      Session a(*stub);
      ASSERT_EQ(a.Hello().code(), 0);
      std::vector<uint64_t> held;
      for (int i = 0; i < 4; ++i) {
        held.push_back(a.Alloc(dev, n, /*workspace=*/i % 2 == 1));
        ASSERT_EQ(a.Write(held.back(), 0, std::string(n, '\xA5')).code(), 0);
      }
      for (uint64_t h : held) EXPECT_EQ(a.Free(h).code(), 0);
      EXPECT_TRUE(a.Finish().ok());
    }
    WaitForEmpty(*stub, 10);
    Session b(*stub);
    ASSERT_EQ(b.Hello().code(), 0);
    const std::string zeros(n, '\0');
    // Never written: zeros.
    const uint64_t x = b.Alloc(dev, n);
    EXPECT_TRUE(b.Read(x, 0, n) == zeros);
    // Written at the start in chunks, then read whole: its bytes, then zeros.
    const uint64_t y = b.Alloc(dev, n, /*workspace=*/true);
    const std::string head = RandomBytes(300000, 7);
    ASSERT_EQ(b.Write(y, 0, head, 65536).code(), 0);
    std::string want = zeros;
    want.replace(0, head.size(), head);
    EXPECT_TRUE(b.Read(y, 0, n) == want);
    // Written past a gap: the gap is zeros.
    const uint64_t z = b.Alloc(dev, n);
    ASSERT_EQ(b.Write(z, 500000, "tail").code(), 0);
    want = zeros;
    want.replace(500000, 4, "tail");
    EXPECT_TRUE(b.Read(z, 0, n) == want);
    // Copied out of a buffer never written, into one never written: zeros both.
    const uint64_t u = b.Alloc(dev, n, /*workspace=*/true);
    const uint64_t v = b.Alloc(dev, 2 * n);
    ASSERT_EQ(b.Copy(u, 0, v, 10, n).code(), 0);
    EXPECT_TRUE(b.Read(v, 0, 2 * n) == std::string(2 * n, '\0'));
    for (uint64_t h : {x, y, z, u, v}) EXPECT_EQ(b.Free(h).code(), 0);
    EXPECT_TRUE(b.Finish().ok());
    WaitForEmpty(*stub, 10);
  }
}

// A connection that never says Hello holds its session slot only until the
// Hello deadline; then the server ends it (and says so), and the slot is free again.
TEST_F(RemoteServer, ConnectionsWithoutHelloLoseTheirSlotAtTheDeadline) {
  // 3 s: long enough that a loaded machine sees the three sessions before their deadline.
  START_SERVER(server, {"--max-sessions", "3", "--hello-timeout-ms", "3000"});
  auto stub = Connect(server.target());
  std::vector<std::unique_ptr<Session>> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(std::make_unique<Session>(*stub));
  // The three hold every slot.
  const auto end = Clock::now() + std::chrono::seconds(20);
  while (GetStatus(*stub).sessions() < 3 && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(GetStatus(*stub).sessions(), 3u);
  // Past the deadline their sessions are ended by the server, and a client gets a slot.
  for (auto& s : silent) {
    EXPECT_EQ(s->Receive(0).code(), -1);  // the stream ends without a reply
    EXPECT_EQ(s->FinishNow().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(WaitForEmpty(*stub, 10).sessions(), 0u);
  Session late(*stub);
  EXPECT_EQ(late.Hello().code(), 0);
  EXPECT_EQ(late.Ping().code(), 0);
  EXPECT_TRUE(late.Finish().ok());
  EXPECT_TRUE(Contains(server.Log(), "no Hello within 3000 ms")) << server.Log();
  // --hello-timeout-ms is checked.
  subprocess::Options o;
  o.timeout_s = 30;
  subprocess::Result r =
      subprocess::Run({BACKPLANE_CLI_PATH, "serve", "--hello-timeout-ms", "0"}, o);
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// A client's name reaches the log escaped and cut: a newline cannot forge a
// line, an escape sequence cannot reach the operator's terminal, megabytes are not logged.
TEST_F(RemoteServer, ClientNamesAreLoggedEscapedAndCut) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Command hello;
  hello.mutable_hello()->set_protocol(pb::PROTOCOL_VERSION);
  const std::string forged = "me\nbackplane serve: received SIGTERM: stopping\x1b[2J";
  hello.mutable_hello()->set_client(forged + std::string(7 << 20, 'A'));
  ASSERT_EQ(session.Do(hello).code(), 0);
  EXPECT_TRUE(session.Finish().ok());
  EXPECT_EQ(server.Stop(), 0);
  const std::string log = server.Log();
  EXPECT_FALSE(Contains(log, "\nbackplane serve: received SIGTERM: stopping\x1b")) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_TRUE(Contains(log, "me\\x0abackplane serve: received SIGTERM: stopping\\x1b[2J")) << log;
  EXPECT_TRUE(Contains(log, "... (" + std::to_string(forged.size() + (7 << 20)) + " bytes)"))
      << log.substr(0, 2000);
  EXPECT_LT(log.size(), 64u * 1024) << "the name was logged whole";
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
}  // namespace test
}  // namespace remote
}  // namespace backplane

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--hold-session") {
    return backplane::remote::test::HoldSession(argv[2]);
  }
  // The devices this process compares with are its own, never a server's.
  unsetenv("BACKPLANE_REMOTE");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
