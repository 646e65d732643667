// SPDX-License-Identifier: Apache-2.0
// The remote plugin's client side of the protocol (sdk/kit/remote/remote.proto, docs/remote.md):
//
// - Session: one bidirectional gRPC stream to a server, which carries this process's commands
//   in order. Replies come back on a reader thread; a watchdog thread gives every command a
//   deadline. A session that breaks (the server died, a deadline passed, the connection
//   dropped) stays broken: everything it held on the server is gone with it.
// - RemoteServer: one attached server, its channel and its current session, which it opens
//   again (reconnects) when the last one broke.
// - Fleet: every attached server, and the device ids (remote:0, remote:1, ...) of theirs.
#ifndef BACKPLANE_REMOTE_CLIENT_H_
#define BACKPLANE_REMOTE_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <backplane/remote/common.hpp>
#include <backplane/sdk/plugin.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backplane/remote/remote.grpc.pb.h"

namespace backplane {
namespace remote {

namespace v1 = ::backplane::remote::v1;

// How to reach one server (attach options, docs/remote.md "Attaching servers").
struct ClientOptions {
  std::string ca_file;    // PEM: the CA that signed the server's certificate (enables TLS)
  std::string cert_file;  // PEM: this client's certificate (mutual TLS), with key_file
  std::string key_file;
  std::string token_file;      // a bearer token the server asks for (over TLS only)
  std::string server_name;     // the name the server's certificate must hold (default: the host)
  int64_t timeout_ms = 60000;  // every command's deadline
  int64_t connect_timeout_ms = 5000;  // opening a session
  // Parses attach options ({"ca": ..., "cert": ..., "key": ..., "token_file": ...,
  // "server_name": ..., "timeout_ms": N, "connect_timeout_ms": N}) over the defaults, which come
  // from BACKPLANE_REMOTE_CA, _CERT, _KEY, _TOKEN_FILE and _TIMEOUT_MS (secure_getenv).
  static ClientOptions FromJson(const nlohmann::json& j);
};

class Session {
 public:
  Session(std::string label, std::shared_ptr<grpc::Channel> channel, std::string token,
          int64_t timeout_ms, uint64_t epoch);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Opens the stream and says Hello; the server's description, or Error naming the server.
  v1::ServerInfo Open(int64_t connect_timeout_ms, const std::string& client_name);
  // Sends `cmd` and waits for its reply; throws Error (the server's kind and message, or
  // BP_ERR_DEVICE naming the server when the session broke). `timeout_ms` 0: the default.
  // `what` names the command in messages ("alloc of 64 bytes on remote:0").
  v1::Reply Request(v1::Command& cmd, const std::string& what, int64_t timeout_ms = 0);
  // Sends `cmd` without waiting: a failure comes back later and is thrown by the next
  // Request, Collect or Flush ("an earlier ... failed").
  void Post(v1::Command& cmd);
  // Sends `cmd` and hands each reply to `on_reply` (on the reader thread) until one has
  // `last`; throws as Request.
  void Collect(v1::Command& cmd, const std::string& what,
               std::function<void(const v1::Reply&)> on_reply, int64_t timeout_ms = 0);
  // An id for a command sent later (Send keeps a command's id when it has one): a transfer's
  // chunks name their first chunk's id.
  uint64_t ReserveId() { return next_id_.fetch_add(1); }
  // Throws the failure of an earlier posted command, if one came back.
  void ThrowDeferred();
  // Ends the session: the server frees what it held.
  void Close();

  bool broken() const;
  std::string broken_reason() const;
  // Whether it broke because a command had no answer by its deadline (the server is silent, not
  // gone: a new session would answer Hello and wait again).
  bool timed_out() const;
  uint64_t epoch() const { return epoch_; }
  const std::string& label() const { return label_; }

 private:
  struct Pending {
    std::function<void(const v1::Reply&)> on_reply;  // streaming replies (Read)
    std::chrono::steady_clock::time_point deadline;
    std::string what;  // the command, for messages
    bool done = false;
    v1::Reply reply;
  };
  uint64_t Send(v1::Command& cmd, std::shared_ptr<Pending> pending, int64_t timeout_ms);
  v1::Reply Wait(uint64_t id, const std::shared_ptr<Pending>& pending);
  void ReaderLoop();
  void WatchdogLoop();
  void Break(const std::string& reason);
  [[noreturn]] void ThrowBroken(const std::string& what);

  const std::string label_;  // "server 127.0.0.1:7100"
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Remote::Stub> stub_;
  const std::string token_;
  const int64_t timeout_ms_;
  const uint64_t epoch_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::Command, v1::Reply>> stream_;

  std::mutex write_mu_;                                     // one Write at a time
  std::chrono::steady_clock::time_point write_deadline_{};  // set while a Write blocks
  std::string write_what_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::atomic<uint64_t> next_id_{1};
  bool broken_ = false;
  bool timed_out_ = false;
  std::string broken_reason_;
  bp_status_t deferred_code_ = BP_OK;
  std::string deferred_message_;
  bool stopping_ = false;
  std::thread reader_, watchdog_;
};

class RemoteServer : public std::enable_shared_from_this<RemoteServer> {
 public:
  RemoteServer(std::string address_text, ClientOptions options);
  // The live session, opened (again) when there is none or it broke. Throws Error naming the
  // server when it cannot be reached. A server that let a command pass its deadline is
  // unreachable for a while (Unreachable): GetSession then fails at once, so that one command
  // waits for a silent server once, not once per request.
  std::shared_ptr<Session> GetSession();
  // Whether the server is in that while, and why (the deadline it let pass).
  bool Unreachable(std::string* reason);
  // Ends that while: the next GetSession tries at once (remote.attach of an attached server).
  void ClearUnreachable();
  // The session if one is open and not broken; null otherwise (never connects).
  std::shared_ptr<Session> CurrentSession();
  // Why the last session could not open or ended ("" when none failed).
  std::string LastError();
  // What the server said in the Hello of the last session opened.
  v1::ServerInfo Info();
  // Status over a unary RPC, with the deadline.
  v1::ServerStatus Status();
  void Close();

  const std::string& address() const { return address_text_; }
  std::string label() const { return "remote server " + address_text_; }
  const ClientOptions& options() const { return options_; }

 private:
  std::shared_ptr<grpc::Channel> Channel();
  void AddToken(grpc::ClientContext& ctx) const;
  // Unreachable with mu_ held.
  bool UnreachableLocked(std::string* reason);
  // Starts the unreachable while for `timed_out`, a session that let a deadline pass; mu_ held.
  void MarkUnreachableLocked(const Session& timed_out);

  const std::string address_text_;
  const Address address_;
  const ClientOptions options_;
  std::string token_;
  std::mutex mu_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<Session> session_;
  v1::ServerInfo info_;
  uint64_t epoch_ = 0;
  bool opened_ = false;  // a session opened once: info_ holds the devices ids were given for
  std::string last_failure_reason_;
  // Set when a session of `timed_out_epoch_` or an opening let its deadline pass.
  std::chrono::steady_clock::time_point unreachable_until_{};
  std::string unreachable_reason_;
  uint64_t timed_out_epoch_ = 0;  // the session whose timeout was counted already
};

// One device of an attached server, as this host sees it.
struct DeviceRef {
  std::shared_ptr<RemoteServer> server;
  uint32_t index = 0;  // in the server's device list
  v1::DeviceInfo info;
  std::string RemoteName() const { return info.type() + ":" + std::to_string(info.id()); }
};

class Fleet {
 public:
  static Fleet& Get();  // never destroyed: sessions end with the process's connections

  // Attaches `address` (idempotent for the same address): connects and learns its devices,
  // which get the next device ids. Throws Error naming the server when `must_connect` and it
  // cannot be reached; otherwise a server that is down is kept and tried again later.
  std::shared_ptr<RemoteServer> Attach(const std::string& address, const ClientOptions& options,
                                       bool must_connect);
  // Detaches: ends its session; its devices stop existing (their ids are not reused).
  void Detach(const std::string& address);
  // The attached server at `address`, or null.
  std::shared_ptr<RemoteServer> Find(const std::string& address);
  // Device `id`; throws BP_ERR_NOT_FOUND naming the devices there are.
  DeviceRef Device(int32_t id);
  // Whether device `id` exists: its server listed it (a detached server's ids stay, so that
  // listings that stop at the first missing id go on; using one says it was detached).
  bool Exists(int32_t id);
  // Whether device `id` exists and its server is attached.
  bool Attached(int32_t id);
  // Whether `server` is attached (not detached).
  bool IsAttached(const RemoteServer* server);
  int32_t Count();
  // {"servers": [{"address", "state", "error", "devices": [{"device", "remote", "name"}]}]}
  nlohmann::json Describe();

 private:
  Fleet() = default;
  struct Entry {
    std::shared_ptr<RemoteServer> server;
    bool attached = true;
    bool listed = false;  // its devices have ids
    std::vector<v1::DeviceInfo> devices;
    int32_t first_id = -1;
    std::string error;
    std::chrono::steady_clock::time_point last_try{};
  };
  // Connects an entry whose devices are not listed yet (rate-limited); mu_ held.
  void TryList(Entry& e, bool must_connect);
  // TryList for every entry; mu_ held.
  void ListPending();

  std::mutex mu_;
  std::vector<Entry> entries_;
  int32_t next_id_ = 0;
};

// What the server's reply code and message become here.
[[noreturn]] void ThrowReply(const std::string& label, const std::string& what, const v1::Reply& r);

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_CLIENT_H_
