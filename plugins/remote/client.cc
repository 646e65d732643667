// SPDX-License-Identifier: Apache-2.0
#include "client.h"

#include <unistd.h>

#include <algorithm>
#include <backplane/remote/channel.hpp>
#include <cctype>
#include <cstdlib>
#include <utility>

namespace backplane {
namespace remote {

namespace {

using Clock = std::chrono::steady_clock;

std::string EnvOr(const char* name, const std::string& fallback = "") {
  const char* v = secure_getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

int64_t PositiveMs(const nlohmann::json& v, const char* key) {
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    throw Error(BP_ERR_INVALID_ARGUMENT, std::string("remote attach option '") + key + "' is " +
                                             v.dump() +
                                             "; expected a positive number of milliseconds");
  }
  return v.get<int64_t>();
}

bp_status_t StatusOf(int32_t code) {
  return code > 0 && code <= BP_ERR_INTERNAL ? static_cast<bp_status_t>(code) : BP_ERR_INTERNAL;
}

std::string ClientName() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host) + " pid " + std::to_string(getpid());
}

bool SameDevices(const v1::ServerInfo& a, const v1::ServerInfo& b) {
  if (a.devices_size() != b.devices_size()) return false;
  for (int i = 0; i < a.devices_size(); ++i) {
    if (a.devices(i).type() != b.devices(i).type() || a.devices(i).id() != b.devices(i).id())
      return false;
  }
  return true;
}

std::string DeviceList(const v1::ServerInfo& info) {
  std::string out;
  for (const v1::DeviceInfo& d : info.devices())
    out += (out.empty() ? "" : ", ") + d.type() + ":" + std::to_string(d.id());
  return out.empty() ? "none" : out;
}

}  // namespace

ClientOptions ClientOptions::FromJson(const nlohmann::json& j) {
  ClientOptions o;
  o.ca_file = EnvOr("BACKPLANE_REMOTE_CA");
  o.cert_file = EnvOr("BACKPLANE_REMOTE_CERT");
  o.key_file = EnvOr("BACKPLANE_REMOTE_KEY");
  o.token_file = EnvOr("BACKPLANE_REMOTE_TOKEN_FILE");
  const std::string timeout = EnvOr("BACKPLANE_REMOTE_TIMEOUT_MS");
  if (!timeout.empty()) {
    nlohmann::json t = nlohmann::json::parse(timeout, nullptr, false);
    if (t.is_discarded()) t = timeout;
    o.timeout_ms = PositiveMs(t, "BACKPLANE_REMOTE_TIMEOUT_MS");
  }
  if (j.is_null()) return o;
  if (!j.is_object()) {
    throw Error(BP_ERR_INVALID_ARGUMENT, "remote attach options are " + j.dump() +
                                             "; expected a JSON object such as "
                                             "{\"ca\": \"ca.pem\", \"timeout_ms\": 10000}");
  }
  static const char* const kKnown[] = {
      "ca", "cert", "key", "token_file", "server_name", "timeout_ms", "connect_timeout_ms"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "remote attach option '" + key +
                      "' is unknown; the options are ca, cert, key, token_file, server_name, "
                      "timeout_ms and connect_timeout_ms (docs/remote.md)");
    }
    if (key == "timeout_ms" || key == "connect_timeout_ms") continue;
    if (!value.is_string()) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "remote attach option '" + key + "' is " + value.dump() + "; expected a string");
    }
  }
  if (j.contains("ca")) o.ca_file = j["ca"];
  if (j.contains("cert")) o.cert_file = j["cert"];
  if (j.contains("key")) o.key_file = j["key"];
  if (j.contains("token_file")) o.token_file = j["token_file"];
  if (j.contains("server_name")) o.server_name = j["server_name"];
  if (j.contains("timeout_ms")) o.timeout_ms = PositiveMs(j["timeout_ms"], "timeout_ms");
  if (j.contains("connect_timeout_ms"))
    o.connect_timeout_ms = PositiveMs(j["connect_timeout_ms"], "connect_timeout_ms");
  return o;
}

void ThrowReply(const std::string& label, const std::string& what, const v1::Reply& r) {
  throw Error(StatusOf(r.code()), label + ": " + what + ": " + r.message());
}

// ---- Session ------------------------------------------------------------------------------

Session::Session(std::string label, std::shared_ptr<grpc::Channel> channel, std::string token,
                 int64_t timeout_ms, uint64_t epoch)
    : label_(std::move(label)),
      channel_(std::move(channel)),
      stub_(v1::Remote::NewStub(channel_)),
      token_(std::move(token)),
      timeout_ms_(timeout_ms),
      epoch_(epoch) {}

Session::~Session() {
  Close();
  if (reader_.joinable()) reader_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

v1::ServerInfo Session::Open(int64_t connect_timeout_ms, const std::string& client_name) {
  if (!token_.empty()) context_.AddMetadata(kTokenMetadata, "Bearer " + token_);
  stream_ = stub_->Session(&context_);
  reader_ = std::thread([this] { ReaderLoop(); });
  watchdog_ = std::thread([this] { WatchdogLoop(); });
  v1::Command hello;
  hello.mutable_hello()->set_protocol(v1::PROTOCOL_VERSION);
  hello.mutable_hello()->set_client(client_name.empty() ? ClientName() : client_name);
  v1::Reply r = Request(hello, "hello", connect_timeout_ms);
  if (r.info().protocol() != v1::PROTOCOL_VERSION) {
    throw Error(BP_ERR_VERSION_MISMATCH,
                label_ + " speaks protocol " + std::to_string(r.info().protocol()) +
                    " and this plugin " + std::to_string(v1::PROTOCOL_VERSION) +
                    "; use the same Backplane version on both sides");
  }
  return r.info();
}

bool Session::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

std::string Session::broken_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_reason_;
}

bool Session::timed_out() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timed_out_;
}

void Session::Break(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_) {
      broken_ = true;
      broken_reason_ = reason;
    }
  }
  cv_.notify_all();
  context_.TryCancel();
}

void Session::ThrowBroken(const std::string& what) {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason = broken_reason_;
  }
  throw Error(BP_ERR_DEVICE, label_ + ": " + what + " failed: the session ended (" + reason +
                                 "); what it held on the server (buffers, streams, modules) is "
                                 "gone, and the next call connects again");
}

void Session::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (!broken_) {
      broken_ = true;
      broken_reason_ = "closed by this host";
    }
  }
  cv_.notify_all();
  context_.TryCancel();
}

uint64_t Session::Send(v1::Command& cmd, std::shared_ptr<Pending> pending, int64_t timeout_ms) {
  // A message over the limit would end the stream, and the session with it: refused here.
  const size_t size = cmd.ByteSizeLong();
  if (size > static_cast<size_t>(kMaxMessageBytes) - 4096) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                label_ + ": " + (pending ? pending->what : std::string("a command")) + " is " +
                    std::to_string(size) + " bytes, more than a message carries (" +
                    std::to_string(kMaxMessageBytes - 4096) +
                    "); pass large data as a remote tensor (copy it to the device first)");
  }
  const uint64_t id = cmd.id() != 0 ? cmd.id() : next_id_.fetch_add(1);
  cmd.set_id(id);
  cmd.set_want_reply(pending != nullptr);
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : timeout_ms_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_ && pending) {
      pending->deadline = deadline;
      pending_[id] = pending;
    }
  }
  if (broken()) ThrowBroken(pending ? pending->what : "a command");
  bool ok;
  {
    std::lock_guard<std::mutex> w(write_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_deadline_ = deadline;
      write_what_ = pending ? pending->what : "sending a command";
    }
    ok = stream_->Write(cmd);
    std::lock_guard<std::mutex> lock(mu_);
    write_deadline_ = {};
  }
  if (!ok) {
    // The stream is gone; the reader learns why from Finish.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(2), [&] { return broken_; });
    if (!broken_) {
      broken_ = true;
      broken_reason_ = "the stream to the server closed";
    }
    pending_.erase(id);
    lock.unlock();
    ThrowBroken(pending ? pending->what : "a command");
  }
  return id;
}

v1::Reply Session::Wait(uint64_t id, const std::shared_ptr<Pending>& pending) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending->done || broken_; });
  if (!pending->done) {
    pending_.erase(id);
    lock.unlock();
    ThrowBroken(pending->what);
  }
  lock.unlock();
  if (pending->reply.code() != 0) {
    ThrowDeferred();  // an earlier failure first: it came before this one
    ThrowReply(label_, pending->what, pending->reply);
  }
  // A command that succeeded keeps its result (a handle must not leak); the failure of an
  // earlier call is thrown by the next sync or copy (ThrowDeferred).
  return std::move(pending->reply);
}

void Session::ThrowDeferred() {
  std::unique_lock<std::mutex> lock(mu_);
  if (deferred_code_ == BP_OK) return;
  const bp_status_t code = deferred_code_;
  const std::string message = std::move(deferred_message_);
  deferred_code_ = BP_OK;
  deferred_message_.clear();
  lock.unlock();
  throw Error(code,
              label_ + ": an earlier call that did not wait for its reply failed: " + message);
}

v1::Reply Session::Request(v1::Command& cmd, const std::string& what, int64_t timeout_ms) {
  auto pending = std::make_shared<Pending>();
  pending->what = what;
  const uint64_t id = Send(cmd, pending, timeout_ms);
  return Wait(id, pending);
}

void Session::Post(v1::Command& cmd) { Send(cmd, nullptr, 0); }

void Session::Collect(v1::Command& cmd, const std::string& what,
                      std::function<void(const v1::Reply&)> on_reply, int64_t timeout_ms) {
  auto pending = std::make_shared<Pending>();
  pending->what = what;
  pending->on_reply = std::move(on_reply);
  const uint64_t id = Send(cmd, pending, timeout_ms);
  Wait(id, pending);
}

void Session::ReaderLoop() {
  v1::Reply r;
  while (stream_->Read(&r)) {
    std::shared_ptr<Pending> p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(r.id());
      if (it != pending_.end()) p = it->second;
      if (!p) {
        // The failure of a command sent without waiting: kept for the next one that waits.
        if (r.code() != 0 && deferred_code_ == BP_OK) {
          deferred_code_ = StatusOf(r.code());
          deferred_message_ = r.message();
        }
        continue;
      }
    }
    if (p->on_reply && r.code() == 0) {
      p->on_reply(r);
      if (!r.last()) continue;
      r.clear_data();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      p->reply = std::move(r);
      p->done = true;
      pending_.erase(p->reply.id());
    }
    cv_.notify_all();
    r = v1::Reply();
  }
  const grpc::Status st = stream_->Finish();
  std::string reason = st.ok() ? "the server ended it" : st.error_message();
  if (!st.ok()) {
    reason += " (gRPC " + std::to_string(static_cast<int>(st.error_code())) + ")";
  }
  Break(reason);
}

void Session::WatchdogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && !broken_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (stopping_ || broken_) break;
    const auto now = Clock::now();
    std::string late;
    for (const auto& [id, p] : pending_) {
      if (!p->done && p->deadline < now) {
        late = p->what;
        break;
      }
    }
    if (late.empty() && write_deadline_ != Clock::time_point{} && write_deadline_ < now)
      late = write_what_;
    if (!late.empty()) {
      broken_ = true;
      timed_out_ = true;
      broken_reason_ = "no answer to " + late + " before its deadline (" +
                       std::to_string(timeout_ms_) +
                       " ms unless the command sets its own; attach option timeout_ms or "
                       "BACKPLANE_REMOTE_TIMEOUT_MS)";
      lock.unlock();
      cv_.notify_all();
      context_.TryCancel();
      return;
    }
  }
}

// ---- RemoteServer -------------------------------------------------------------------------

RemoteServer::RemoteServer(std::string address_text, ClientOptions options)
    : address_text_(std::move(address_text)),
      address_([&] {
        try {
          return ParseAddress(address_text_);
        } catch (const std::exception& e) {
          throw Error(BP_ERR_INVALID_ARGUMENT, e.what());
        }
      }()),
      options_(std::move(options)) {
  const bool tls = !options_.ca_file.empty();
  try {
    if (!options_.token_file.empty()) {
      token_ = ReadSecretFile(options_.token_file, "the remote token file");
      while (!token_.empty() && std::isspace(static_cast<unsigned char>(token_.back())) != 0)
        token_.pop_back();
    }
  } catch (const std::exception& e) {
    throw Error(BP_ERR_INVALID_ARGUMENT, label() + ": " + e.what());
  }
  if (!tls && !IsLoopback(address_.host)) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                label() +
                    ": refusing to talk to a server that is not on loopback without TLS; give "
                    "the CA of its certificate (BACKPLANE_REMOTE_CA or the attach option \"ca\") "
                    "and this host's certificate and key (BACKPLANE_REMOTE_CERT, "
                    "BACKPLANE_REMOTE_KEY) or a token (BACKPLANE_REMOTE_TOKEN_FILE): "
                    "docs/security.md, \"Remote devices\"");
  }
  if (!tls && !token_.empty() && !IsLoopback(address_.host)) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                label() +
                    ": a token is only sent over TLS; give the server's CA as well "
                    "(BACKPLANE_REMOTE_CA or the attach option \"ca\")");
  }
  if (options_.cert_file.empty() != options_.key_file.empty()) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                label() +
                    ": a client certificate needs its key and a key its certificate; "
                    "give both (BACKPLANE_REMOTE_CERT and BACKPLANE_REMOTE_KEY)");
  }
}

std::shared_ptr<grpc::Channel> RemoteServer::Channel() {
  if (channel_) return channel_;
  grpc::ChannelArguments args = ClientChannelArguments();
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!options_.ca_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    try {
      ssl.pem_root_certs = ReadSecretFile(options_.ca_file, "the remote server's CA file");
      if (!options_.cert_file.empty()) {
        ssl.pem_cert_chain = ReadSecretFile(options_.cert_file, "the client certificate file");
        ssl.pem_private_key = ReadSecretFile(options_.key_file, "the client key file");
      }
    } catch (const std::exception& e) {
      throw Error(BP_ERR_INVALID_ARGUMENT, label() + ": " + e.what());
    }
    creds = grpc::SslCredentials(ssl);
    if (!options_.server_name.empty()) args.SetSslTargetNameOverride(options_.server_name);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  channel_ = grpc::CreateCustomChannel(address_.Target(), creds, args);
  return channel_;
}

void RemoteServer::AddToken(grpc::ClientContext& ctx) const {
  if (!token_.empty()) ctx.AddMetadata(kTokenMetadata, "Bearer " + token_);
}

std::shared_ptr<Session> RemoteServer::CurrentSession() {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ && !session_->broken()) return session_;
  return nullptr;
}

namespace {

// How long a server that let a deadline pass is unreachable: at least 10 s, and the command
// deadline when that is longer.
std::chrono::milliseconds UnreachableFor(const ClientOptions& o) {
  return std::chrono::milliseconds(std::max<int64_t>(o.timeout_ms, 10000));
}

}  // namespace

bool RemoteServer::UnreachableLocked(std::string* reason) {
  if (session_ && session_->broken() && session_->timed_out() &&
      timed_out_epoch_ != session_->epoch()) {
    MarkUnreachableLocked(*session_);
  }
  if (Clock::now() >= unreachable_until_) return false;
  if (reason != nullptr) *reason = unreachable_reason_;
  return true;
}

void RemoteServer::MarkUnreachableLocked(const Session& timed_out) {
  timed_out_epoch_ = timed_out.epoch();
  unreachable_reason_ = timed_out.broken_reason();
  unreachable_until_ = Clock::now() + UnreachableFor(options_);
}

bool RemoteServer::Unreachable(std::string* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  return UnreachableLocked(reason);
}

void RemoteServer::ClearUnreachable() {
  std::lock_guard<std::mutex> lock(mu_);
  unreachable_until_ = {};
  if (session_) timed_out_epoch_ = session_->epoch();
}

std::shared_ptr<Session> RemoteServer::GetSession() {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ && !session_->broken()) return session_;
  std::string silent;
  if (UnreachableLocked(&silent)) {
    throw Error(BP_ERR_DEVICE,
                label() + " is unreachable: " + silent + ". It is not asked again for " +
                    std::to_string(UnreachableFor(options_).count() / 1000) +
                    " s, so that a command waits for a silent server once; remote.attach(\"" +
                    address_text_ + "\") asks at once");
  }
  std::shared_ptr<grpc::Channel> channel = Channel();
  // A server that was down a moment ago may be up now: try at once, not after gRPC's backoff.
  grpc::experimental::ChannelResetConnectionBackoff(channel.get());
  auto s = std::make_shared<Session>(label(), channel, token_, options_.timeout_ms, ++epoch_);
  v1::ServerInfo info;
  try {
    info = s->Open(options_.connect_timeout_ms, "");
  } catch (const Error& e) {
    last_failure_reason_ = e.what();
    // Hello had no answer by its deadline: as silent as a command's (Unreachable).
    if (s->timed_out()) MarkUnreachableLocked(*s);
    // A channel that never connected can stay failed in gRPC; the next attempt takes a new one.
    channel_.reset();
    throw Error(e.kind(), "cannot open a session with " + label() + " (" + e.what() +
                              "); is `backplane serve` running there, and do its TLS settings "
                              "match this host's (docs/remote.md)?");
  }
  // The devices of a server that answered before must be the same ones: this host's ids name
  // them by their place in its list.
  if (opened_ && !SameDevices(info, info_)) {
    s->Close();
    last_failure_reason_ =
        "it came back with other devices (" + DeviceList(info) + ", was " + DeviceList(info_) + ")";
    throw Error(BP_ERR_DEVICE, label() + ": " + last_failure_reason_ +
                                   ", so the ids this host gave them would name others; detach "
                                   "it and attach it again");
  }
  info_ = std::move(info);
  opened_ = true;
  last_failure_reason_.clear();
  session_ = s;
  return s;
}

std::string RemoteServer::LastError() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!last_failure_reason_.empty()) return last_failure_reason_;
  if (session_ && session_->broken()) return "the last session ended: " + session_->broken_reason();
  return "";
}

v1::ServerInfo RemoteServer::Info() {
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

void RemoteServer::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_) session_->Close();
  session_.reset();
}

v1::ServerStatus RemoteServer::Status() {
  grpc::ClientContext ctx;
  AddToken(ctx);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(options_.timeout_ms));
  v1::ServerStatus status;
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    channel = Channel();
  }
  const grpc::Status st = v1::Remote::NewStub(channel)->Status(&ctx, v1::StatusRequest(), &status);
  if (!st.ok()) throw Error(BP_ERR_DEVICE, label() + ": Status failed: " + st.error_message());
  return status;
}

// ---- Fleet --------------------------------------------------------------------------------

Fleet& Fleet::Get() {
  static Fleet* fleet = new Fleet();  // never destroyed (client.h)
  return *fleet;
}

void Fleet::TryList(Entry& e, bool must_connect) {
  if (e.listed || !e.attached) return;
  const auto now = Clock::now();
  if (!must_connect && e.last_try != Clock::time_point{} &&
      now - e.last_try < std::chrono::seconds(1))
    return;
  e.last_try = now;
  try {
    e.server->GetSession();
    const v1::ServerInfo info = e.server->Info();
    e.devices.assign(info.devices().begin(), info.devices().end());
    e.first_id = next_id_;
    next_id_ += static_cast<int32_t>(e.devices.size());
    e.listed = true;
    e.error.clear();
  } catch (const Error& err) {
    e.error = err.what();
    if (must_connect) throw;
  }
}

std::shared_ptr<RemoteServer> Fleet::Attach(const std::string& address,
                                            const ClientOptions& options, bool must_connect) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.attached && e.server->address() == address) {
      // Asked for by name: a server in its unreachable while is asked again now.
      if (must_connect) e.server->ClearUnreachable();
      TryList(e, must_connect);
      return e.server;
    }
  }
  Entry e;
  e.server = std::make_shared<RemoteServer>(address, options);
  entries_.push_back(e);
  // must_connect: now; otherwise (BACKPLANE_REMOTE, at plugin init) when devices are next
  // counted, so loading the plugin never waits on the network.
  if (must_connect) TryList(entries_.back(), true);
  return entries_.back().server;
}

void Fleet::Detach(const std::string& address) {
  std::shared_ptr<RemoteServer> server;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : entries_) {
      if (e.attached && e.server->address() == address) {
        e.attached = false;
        server = e.server;
      }
    }
  }
  if (!server) {
    throw Error(BP_ERR_NOT_FOUND, "remote server " + address +
                                      " is not attached; remote.servers lists those that are");
  }
  server->Close();
}

std::shared_ptr<RemoteServer> Fleet::Find(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.attached && e.server->address() == address) return e.server;
  }
  return nullptr;
}

int32_t Fleet::Count() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) TryList(e, false);
  return next_id_;
}

void Fleet::ListPending() {
  for (Entry& e : entries_) TryList(e, false);
}

bool Fleet::Exists(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ListPending();  // the first use of a device lists its server, whatever the call
  for (Entry& e : entries_) {
    // A detached server's ids stay (listings stop at the first id that does not exist, and ids
    // are not reused); using one says the server was detached (Device).
    if (e.listed && id >= e.first_id && id < e.first_id + static_cast<int32_t>(e.devices.size()))
      return true;
  }
  return false;
}

bool Fleet::IsAttached(const RemoteServer* server) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.attached && e.server.get() == server) return true;
  }
  return false;
}

bool Fleet::Attached(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ListPending();
  for (Entry& e : entries_) {
    if (e.attached && e.listed && id >= e.first_id &&
        id < e.first_id + static_cast<int32_t>(e.devices.size()))
      return true;
  }
  return false;
}

DeviceRef Fleet::Device(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ListPending();  // alloc, a stream or set_device as the first call: the server is listed now
  std::string there;
  for (Entry& e : entries_) {
    if (!e.listed) continue;
    const int32_t n = static_cast<int32_t>(e.devices.size());
    if (!e.attached) {
      if (id >= e.first_id && id < e.first_id + n) {
        throw Error(BP_ERR_NOT_FOUND,
                    "remote:" + std::to_string(id) + " was " +
                        e.devices[static_cast<size_t>(id - e.first_id)].type() + ":" +
                        std::to_string(e.devices[static_cast<size_t>(id - e.first_id)].id()) +
                        " of " + e.server->label() +
                        ", which was detached; attach it again (its devices "
                        "get new ids)");
      }
      continue;
    }
    if (id >= e.first_id && id < e.first_id + n) {
      DeviceRef ref;
      ref.server = e.server;
      ref.index = static_cast<uint32_t>(id - e.first_id);
      ref.info = e.devices[ref.index];
      return ref;
    }
    if (n > 0) {
      there += (there.empty() ? "" : ", ") + std::string("remote:") + std::to_string(e.first_id) +
               (n > 1 ? "..remote:" + std::to_string(e.first_id + n - 1) : "") + " on " +
               e.server->address();
    }
  }
  throw Error(BP_ERR_NOT_FOUND,
              "remote:" + std::to_string(id) + " does not exist; " +
                  (there.empty() ? std::string("no attached server lists a device (attach one "
                                               "with BACKPLANE_REMOTE=host:port or remote.attach)")
                                 : "the remote devices are " + there));
}

nlohmann::json Fleet::Describe() {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json servers = nlohmann::json::array();
  for (Entry& e : entries_) {
    if (!e.attached) continue;
    TryList(e, false);
    nlohmann::json s{{"address", e.server->address()}};
    auto session = e.server->CurrentSession();
    std::string silent;
    const bool unreachable = !e.listed || e.server->Unreachable(&silent);
    s["state"] = unreachable ? "unreachable" : session ? "connected" : "disconnected";
    const std::string error = !silent.empty()   ? silent
                              : e.error.empty() ? e.server->LastError()
                                                : e.error;
    s["error"] = error.empty() ? nlohmann::json() : nlohmann::json(error);
    nlohmann::json devices = nlohmann::json::array();
    for (size_t i = 0; i < e.devices.size(); ++i) {
      devices.push_back(
          {{"device", "remote:" + std::to_string(e.first_id + static_cast<int32_t>(i))},
           {"remote", e.devices[i].type() + ":" + std::to_string(e.devices[i].id())},
           {"name", e.devices[i].name()},
           {"target_kind", e.devices[i].target_kind()}});
    }
    s["devices"] = devices;
    servers.push_back(s);
  }
  return {{"servers", servers}};
}

}  // namespace remote
}  // namespace backplane
