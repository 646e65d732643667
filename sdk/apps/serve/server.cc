// SPDX-License-Identifier: Apache-2.0
// The remote device server, what `backplane serve` runs (docs/remote.md): this machine's
// devices over gRPC, one session per client (remote.proto).
//
// Threads. gRPC's synchronous server gives each RPC a thread of its pool (sized for
// max_sessions); a session's commands run on its thread in arrival order: read, execute,
// reply. Sessions share only what is fixed at start (the devices, the options), the log and the
// totals the Status RPC reports (atomics).
//
// Trust. Everything a client sends is checked before it reaches a device: device indices,
// handles (each session has its own table; another session's numbers resolve to nothing),
// offsets and sizes (overflow-safe), and the views a call's tensor arguments make of buffers.
// Modules with native code load only with --allow-native-modules, and only the registered
// functions named with --expose can be called by name; the host code of an uploaded module
// calls only its own kernels (BP_MODULE_LOAD_NO_GLOBAL_CALLS, session_call.cc), and kernels
// never come without the host code that launches them (Shared::callable_kinds). Memory a session
// gets holds zeros or its own data (ClientSession::Buffer::clean). A connection holds a session
// slot only until its Hello deadline (HelloWatch); with --client-ca each RPC's peer certificate
// is checked here (ClientCa), so that a refusal names the peer and the reason.
#include "backplane/remote/server.hpp"

#include <backplane/c_api.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <netdb.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/ir/version.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backplane/remote/common.hpp"
#include "session.hpp"

namespace backplane {
namespace remote {

#ifdef BACKPLANE_VERSION
const char* const kServerVersion = BACKPLANE_VERSION;
#else
const char* const kServerVersion = "unknown";
#endif

namespace {

// Devices of one type are ids 0, 1, ... while BP_ATTR_EXIST says 1, up to this many.
constexpr int32_t kMaxDevicesPerType = 64;

// ---- client certificates ------------------------------------------------------------------

// OpenSSL's newest error as text ("no error" when it has none), and its queue emptied.
std::string SslError() {
  const unsigned long code = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (code == 0) return "no error";
  char text[256] = {};
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// The certificates of a PEM text, in order; throws std::invalid_argument naming `option` when it
// holds none or one that does not parse.
std::vector<std::unique_ptr<X509, decltype(&X509_free)>> ReadCertificates(
    const std::string& pem, const std::string& option) {
  std::vector<std::unique_ptr<X509, decltype(&X509_free)>> out;
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  for (;;) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    out.emplace_back(cert, &X509_free);
  }
  ERR_clear_error();  // the end of the text reads as an error
  if (out.empty()) {
    throw std::invalid_argument(option +
                                ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  return out;
}

// A certificate's subject as one line ("CN=client,O=...").
std::string Subject(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);  // NOLINT(runtime/int): OpenSSL's type
  return LogSafe(std::string(data, static_cast<size_t>(n)));
}

// The key pair of --tls-cert and --tls-key: both parse and the key is the certificate's. Checked
// before any plugin loads, so a wrong pair is a usage error that says so.
void CheckKeyPair(const std::string& cert_pem, const std::string& key_pem) {
  auto certs = ReadCertificates(cert_pem, "--tls-cert");
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) {
    throw std::invalid_argument("--tls-key: not a PEM private key without a passphrase (" +
                                SslError() + ")");
  }
  if (X509_check_private_key(certs.front().get(), key.get()) != 1) {
    ERR_clear_error();
    throw std::invalid_argument(
        "--tls-key is not the private key of the first certificate in --tls-cert (" +
        Subject(certs.front().get()) + "): give the key that certificate was made for");
  }
}

// --client-ca: the CAs a client's certificate must chain to. TLS asks every client for a
// certificate and checks that it holds the key of the one it sends; this checks the chain, per
// RPC, so that a refusal can say to the client and in the log which peer it was and why (gRPC's
// own check ends the handshake with no reason either side can read).
class ClientCa {
 public:
  explicit ClientCa(const std::string& pem) : store_(X509_STORE_new(), &X509_STORE_free) {
    for (auto& cert : ReadCertificates(pem, "--client-ca")) {
      if (X509_STORE_add_cert(store_.get(), cert.get()) != 1) {
        throw std::invalid_argument("--client-ca: a certificate cannot be used (" + SslError() +
                                    ")");
      }
    }
  }
  // "" when `context`'s peer presented a certificate the CA signed for TLS clients; else why not.
  std::string Check(const grpc::ServerContext* context) const {
    std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
    std::vector<grpc::string_ref> leaf =
        auth ? auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME)
             : std::vector<grpc::string_ref>();
    if (leaf.empty()) return "it presented no client certificate";
    auto certs =
        ReadCertificates(std::string(leaf.front().data(), leaf.front().size()), "the client's");
    std::unique_ptr<STACK_OF(X509), void (*)(STACK_OF(X509)*)> chain(
        sk_X509_new_null(), [](STACK_OF(X509) * s) { sk_X509_pop_free(s, X509_free); });
    for (const grpc::string_ref& pem :
         auth->FindPropertyValues(GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME)) {
      try {
        for (auto& c : ReadCertificates(std::string(pem.data(), pem.size()), "the chain")) {
          sk_X509_push(chain.get(), c.release());
        }
      } catch (const std::invalid_argument&) {
      }
    }
    std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                        &X509_STORE_CTX_free);
    if (!ctx ||
        X509_STORE_CTX_init(ctx.get(), store_.get(), certs.front().get(), chain.get()) != 1) {
      return "its certificate could not be checked (" + SslError() + ")";
    }
    X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_CLIENT);
    if (X509_verify_cert(ctx.get()) == 1) return "";
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return "its certificate (" + Subject(certs.front().get()) + ") does not verify against " +
           "--client-ca: " + X509_verify_cert_error_string(err);
  }

 private:
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store_;
};

// Fails (std::runtime_error, naming the address) when `address` cannot be bound here: taken, or
// not this machine's. Checked before the plugins load; the real listen may still lose a race.
void CheckListenAddress(const Address& address) {
  if (address.port == 0) return;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc =
      getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found);
  if (rc != 0) {
    throw std::runtime_error("cannot listen on " + address.Target() + ": '" + address.host +
                             "' does not resolve (" + gai_strerror(rc) + ")");
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, &freeaddrinfo);
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool bound = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    const int err = errno;
    close(fd);
    if (bound) return;
    why = std::strerror(err);
    if (err == EADDRINUSE) {
      why = "the port is taken (another server listens there; pick another --listen port)";
      break;
    }
    if (err == EADDRNOTAVAIL) why = "the address is not one of this machine's";
  }
  throw std::runtime_error("cannot listen on " + address.Target() + ": " + why);
}

// ---- the Hello deadline ---------------------------------------------------------------

// Ends the sessions that have not said Hello by their deadline (ServerOptions::hello_timeout_ms):
// one thread for all of them, which cancels the session's RPC; its Read then fails and the
// session, and its slot, end.
class HelloWatch {
 public:
  HelloWatch(ServerLog& log, std::chrono::milliseconds limit)
      : log_(log), limit_(limit), thread_([this] { Loop(); }) {}
  ~HelloWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HelloWatch(const HelloWatch&) = delete;
  HelloWatch& operator=(const HelloWatch&) = delete;

  // Watches `context` until Done(ticket); `context` must outlive that call.
  uint64_t Add(grpc::ServerContext* context, const std::string& peer) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t ticket = next_++;
    waiting_[ticket] = Entry{std::chrono::steady_clock::now() + limit_, context, peer};
    cv_.notify_all();
    return ticket;
  }
  void Done(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.erase(ticket);
  }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point deadline;
    grpc::ServerContext* context;
    std::string peer;
  };
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      auto next = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      const auto now = std::chrono::steady_clock::now();
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (it->second.deadline <= now) {
          it->second.context->TryCancel();
          log_.Line("ended the session of " + it->second.peer + ": no Hello within " +
                    std::to_string(limit_.count()) + " ms of connecting (--hello-timeout-ms)");
          it = waiting_.erase(it);
        } else {
          next = std::min(next, it->second.deadline);
          ++it;
        }
      }
      cv_.wait_until(lock, next);
    }
  }

  ServerLog& log_;
  const std::chrono::milliseconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> waiting_;
  uint64_t next_ = 1;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the rest is ready
};

// ---- the service ------------------------------------------------------------------------

class Service final : public pb::Remote::Service {
 public:
  Service(Shared& shared, HelloWatch& hello, const ClientCa* client_ca)
      : shared_(shared), hello_(hello), client_ca_(client_ca) {}

  grpc::Status Session(grpc::ServerContext* context, Stream* stream) override {
    grpc::Status auth = Authenticate(context);
    if (!auth.ok()) return auth;
    const int max = shared_.options.max_sessions;
    if (shared_.live_sessions.fetch_add(1) >= max) {
      shared_.live_sessions--;
      shared_.log.Line("refused a session from " + context->peer() + ": " + std::to_string(max) +
                       " sessions are open (--max-sessions)");
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the server has " + std::to_string(max) +
                              " sessions open, its limit (backplane serve --max-sessions " +
                              std::to_string(max) + "); try again later");
    }
    shared_.totals.sessions++;
    {
      const uint64_t ticket = hello_.Add(context, context->peer());
      struct Unwatch {
        HelloWatch& watch;
        uint64_t ticket;
        ~Unwatch() { watch.Done(ticket); }
      } unwatch{hello_, ticket};
      ClientSession session(shared_, shared_.next_session++, context->peer());
      session.Run(stream, [&] { hello_.Done(ticket); });
    }  // everything it held is freed here
    // The slot first: a client that reads no session in Status may open one at once (with the
    // count first, RemoteServer.MaxSessionsIsEnforced's third session was refused now and then).
    shared_.live_sessions--;
    shared_.totals.sessions--;
    return grpc::Status::OK;
  }

  grpc::Status Describe(grpc::ServerContext* context, const pb::DescribeRequest*,
                        pb::ServerInfo* info) override {
    grpc::Status auth = Authenticate(context);
    if (!auth.ok()) return auth;
    *info = shared_.info;
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext* context, const pb::StatusRequest*,
                      pb::ServerStatus* status) override {
    grpc::Status auth = Authenticate(context);
    if (!auth.ok()) return auth;
    status->set_sessions(shared_.totals.sessions.load());
    status->set_buffers(shared_.totals.buffers.load());
    status->set_bytes(shared_.totals.bytes.load());
    status->set_streams(shared_.totals.streams.load());
    status->set_modules(shared_.totals.modules.load());
    return grpc::Status::OK;
  }

 private:
  // With --token-file, every RPC must carry "authorization: Bearer <token>".
  // With --client-ca, every RPC's peer must have presented a certificate it signed.
  grpc::Status Authenticate(grpc::ServerContext* context) {
    if (client_ca_ != nullptr) {
      std::string why;
      try {
        why = client_ca_->Check(context);
      } catch (const std::exception& e) {
        why = std::string("its certificate cannot be read (") + e.what() + ")";
      }
      if (!why.empty()) {
        shared_.log.Line("refused " + context->peer() + ": " + why);
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "this server (mutual TLS) accepts only clients with a certificate "
                            "that its --client-ca signed, and " +
                                why +
                                ": give this host's certificate and key (BACKPLANE_REMOTE_CERT "
                                "and BACKPLANE_REMOTE_KEY, or the attach options cert and key) "
                                "from the server's operator (docs/security.md)");
      }
    }
    if (shared_.token.empty()) return grpc::Status::OK;
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kTokenMetadata);
    if (it == metadata.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this server needs a token: send the metadata '" +
                              std::string(kTokenMetadata) +
                              ": Bearer <token>' (docs/remote.md, docs/security.md)");
    }
    const std::string value(it->second.data(), it->second.size());
    const std::string prefix = "Bearer ";
    if (value.compare(0, prefix.size(), prefix) != 0 ||
        !SameSecret(value.substr(prefix.size()), shared_.token)) {
      shared_.log.Line("refused " + context->peer() + ": wrong token");
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the token is not this server's (docs/security.md)");
    }
    return grpc::Status::OK;
  }

  Shared& shared_;
  HelloWatch& hello_;
  const ClientCa* client_ca_;
};

// ---- starting -----------------------------------------------------------------------------

// The devices to serve, in the order of their type ids and then ids; "remote" devices never
// (a server re-exporting remote devices could loop back to itself). The types are walked here,
// not with bp_device_list, so the remote plugin's DeviceAPI is never asked anything.
std::vector<ExportedDevice> FindDevices(const std::vector<std::string>& wanted) {
  // A server serves its own devices: the remote plugin it loads attaches no server (itself,
  // possibly) from an inherited BACKPLANE_REMOTE.
  unsetenv("BACKPLANE_REMOTE");
  Must(bp_plugins_load_all(), "loading the plugins");
  size_t count = 0;
  Must(bp_device_type_list(nullptr, 0, &count), "listing device types");
  std::vector<int32_t> types(count);
  Must(bp_device_type_list(types.data(), types.size(), &count), "listing device types");
  types.resize(std::min(count, types.size()));
  std::sort(types.begin(), types.end());
  std::vector<ExportedDevice> out;
  std::set<std::string> with_devices;
  for (int32_t type : types) {
    const char* name = nullptr;
    if (bp_device_type_name(type, &name) != BP_OK || name == nullptr) continue;
    const std::string type_name = name;
    if (type_name == "remote") continue;
    const bp_device_api_t* api = nullptr;
    if (bp_device_api_get(type, &api) != BP_OK) continue;
    for (int32_t id = 0; id < kMaxDevicesPerType; ++id) {
      const DLDevice dev{static_cast<DLDeviceType>(type), id};
      OwnedValue exists;
      if (bp_device_get_attr(dev, BP_ATTR_EXIST, &exists.v) != BP_OK) break;
      if (exists.v.type != BP_VALUE_INT || exists.v.u.v_int64 == 0) break;
      with_devices.insert(type_name);
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), type_name) == wanted.end()) {
        continue;
      }
      out.push_back(ExportedDevice{dev, type_name + ":" + std::to_string(id)});
    }
  }
  bp_error_clear();
  for (const std::string& w : wanted) {
    if (w == "remote") {
      throw std::invalid_argument(
          "--devices remote: a server never serves remote devices (they could lead back to "
          "itself); name the types of this machine's devices");
    }
    if (with_devices.count(w) == 0) {
      throw std::invalid_argument(
          "--devices " + w + ": this machine has no devices of type '" + w +
          "'; the types with devices here are: " +
          Join(std::vector<std::string>(with_devices.begin(), with_devices.end())));
    }
  }
  return out;
}

// "ir_host" and the Target kinds of device type cpu (session.hpp, Shared::callable_kinds).
std::set<std::string> CallableModuleKinds() {
  std::set<std::string> kinds{"ir_host"};
  bp_object_t* json = nullptr;
  Must(bp_target_kinds_describe(&json), "listing the Target kinds");
  const nlohmann::json all = nlohmann::json::parse(GetString(ObjectRef::Adopt(json).get()));
  for (const nlohmann::json& k : all.at("kinds")) {
    if (k.value("device_type", "") == "cpu") kinds.insert(k.at("name").get<std::string>());
  }
  return kinds;
}

pb::DeviceInfo Describe(const ExportedDevice& d) {
  pb::DeviceInfo info;
  const char* type = nullptr;
  bp_device_type_name(d.dev.device_type, &type);
  info.set_type(type != nullptr ? type : "");
  info.set_id(d.dev.device_id);
  OwnedValue name;
  if (bp_device_get_attr(d.dev, BP_ATTR_DEVICE_NAME, &name.v) == BP_OK &&
      name.v.type == BP_VALUE_OBJECT) {
    int32_t t = 0;
    if (bp_object_type(name.v.u.v_obj, &t) == BP_OK && t == BP_OBJECT_STRING) {
      info.set_name(GetString(name.v.u.v_obj));
    }
  }
  bp_object_t* target = nullptr;
  if (bp_target_from_device(d.dev, nullptr, &target) == BP_OK) {
    ObjectRef ref = ObjectRef::Adopt(target);
    const char* kind = nullptr;
    if (bp_target_kind(target, &kind) == BP_OK && kind != nullptr) info.set_target_kind(kind);
  }
  bp_error_clear();
  return info;
}

// The newest IR text version this server says it reads: ir::kTextFormatVersion, or N from
// BACKPLANE_SERVE_MOCK_IR_NEWEST=N (1 to kTextFormatVersion). That variable is a mock, for
// tests only: it plays a server whose Backplane is older, which advertises versions 1 to N and
// refuses uploads that hold newer IR text as that library would (session_call.cc), so that a
// client's lowering for older servers is tested against something that would fail without it
// (tests/remote/older_server_test.sh).
int MockIRNewest() {
  const char* v = std::getenv("BACKPLANE_SERVE_MOCK_IR_NEWEST");
  if (v == nullptr || *v == '\0') return ir::kTextFormatVersion;
  const int n = std::atoi(v);
  if (n < 1 || n > ir::kTextFormatVersion) {
    throw std::invalid_argument("BACKPLANE_SERVE_MOCK_IR_NEWEST=" + std::string(v) +
                                ": give an IR text version from 1 to " +
                                std::to_string(ir::kTextFormatVersion) + ", or unset it");
  }
  return n;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// The token without the line end a file usually has; it must be text a header can carry.
// A file an option names (a certificate, a key, a token): one that cannot be read is an option
// that cannot work.
std::string ReadOptionFile(const std::string& path, const std::string& option) {
  try {
    return ReadSecretFile(path, option);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

std::string ReadToken(const std::string& path) {
  std::string token = ReadOptionFile(path, "--token-file");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) throw std::invalid_argument("--token-file '" + path + "' holds only spaces");
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      throw std::invalid_argument("--token-file '" + path +
                                  "': the token must be one line of printable ASCII without "
                                  "spaces (e.g. `openssl rand -hex 32`)");
    }
  }
  return token;
}

void WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
    out.close();
    if (!out) throw std::runtime_error("--port-file: cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("--port-file: cannot rename '" + tmp + "' to '" + path + "': " + why);
  }
}

// Blocks SIGINT and SIGTERM in this thread (and so in every thread it starts) for its life;
// a thread of the server takes them with sigwait.
class BlockStopSignals {
 public:
  BlockStopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockStopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockStopSignals(const BlockStopSignals&) = delete;
  BlockStopSignals& operator=(const BlockStopSignals&) = delete;
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

}  // namespace

int Serve(const ServerOptions& options, std::ostream& log_out) {
  // From here on, SIGINT and SIGTERM wait for the thread that stops the server, in every
  // thread: gRPC (from its first call) and plugins start theirs after this.
  BlockStopSignals signals;

  // The options first: nothing starts when they cannot work.
  const Address address = ParseAddress(options.listen, /*allow_port_zero=*/true);
  const bool tls = !options.tls_cert.empty() || !options.tls_key.empty();
  if (tls && (options.tls_cert.empty() || options.tls_key.empty())) {
    throw std::invalid_argument(
        "TLS needs both --tls-cert (the server's certificate chain, PEM) and --tls-key (its "
        "private key, PEM); docs/security.md");
  }
  if (!options.client_ca.empty() && !tls) {
    throw std::invalid_argument(
        "--client-ca checks client certificates, which needs TLS: pass --tls-cert and --tls-key "
        "too; docs/security.md");
  }
  if (!IsLoopback(address.host) &&
      (!tls || (options.client_ca.empty() && options.token_file.empty()))) {
    throw std::invalid_argument(
        "--listen " + options.listen +
        " is reachable from other machines, and a server there must use TLS and authenticate "
        "its clients: pass --tls-cert and --tls-key, and --client-ca (clients present "
        "certificates it signed) or --token-file (clients send a bearer token), or both; or "
        "listen on 127.0.0.1 (docs/security.md, \"Remote devices\")");
  }
  if (options.hello_timeout_ms < 1 || options.hello_timeout_ms > 3600000) {
    throw std::invalid_argument("--hello-timeout-ms " + std::to_string(options.hello_timeout_ms) +
                                " is out of range 1..3600000");
  }
  if (options.max_sessions < 1 || options.max_sessions > 100000) {
    throw std::invalid_argument("--max-sessions " + std::to_string(options.max_sessions) +
                                " is out of range 1..100000");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::unique_ptr<ClientCa> client_ca;
  std::string mode;
  if (tls) {
    const bool mtls = !options.client_ca.empty();
    // A client's certificate is asked for and its key checked by TLS; its chain is checked per
    // RPC (ClientCa), which names the peer and the reason on both sides.
    grpc::SslServerCredentialsOptions ssl(mtls ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY
                                               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    const std::string key = ReadOptionFile(options.tls_key, "--tls-key");
    const std::string cert = ReadOptionFile(options.tls_cert, "--tls-cert");
    CheckKeyPair(cert, key);
    ssl.pem_key_cert_pairs.push_back({key, cert});
    if (mtls) {
      ssl.pem_root_certs = ReadOptionFile(options.client_ca, "--client-ca");
      client_ca = std::make_unique<ClientCa>(ssl.pem_root_certs);
    }
    credentials = grpc::SslServerCredentials(ssl);
    mode = mtls ? "TLS+mTLS" : "TLS";
  } else {
    credentials = grpc::InsecureServerCredentials();
    mode = "plaintext loopback";
  }
  Shared shared(options, log_out);
  if (!options.token_file.empty()) {
    shared.token = ReadToken(options.token_file);
    mode += "+token";
  }

  // The address before the plugins load (seconds on a machine with GPUs): a port that is taken
  // fails at once, naming it.
  CheckListenAddress(address);
  shared.devices = FindDevices(options.device_types);
  shared.callable_kinds = CallableModuleKinds();
  shared.info.set_protocol(pb::PROTOCOL_VERSION);
  shared.info.set_version(kServerVersion);
  shared.info.set_host(HostName());
  shared.info.set_allows_native_modules(options.allow_native_modules);
  shared.info.set_ir_version_oldest(1);
  shared.info.set_ir_version_newest(MockIRNewest());
  for (const std::string& name : options.expose) {
    bp_object_t* f = nullptr;
    if (bp_registry_get(name.c_str(), &f) != BP_OK) {
      bp_error_clear();
      throw std::invalid_argument("--expose " + name + ": no registered function has that name " +
                                  "here (`backplane info` lists them)");
    }
    bp_object_release(f);
    shared.info.add_functions(name);
  }
  for (size_t i = 0; i < shared.devices.size(); ++i) {
    *shared.info.add_devices() = Describe(shared.devices[i]);
    const pb::DeviceInfo& d = shared.info.devices(static_cast<int>(i));
    shared.log.Line("device " + std::to_string(i) + ": " + shared.devices[i].label + " (" +
                    (d.name().empty() ? "no name" : d.name()) + ", target " +
                    (d.target_kind().empty() ? "none" : d.target_kind()) + ")");
  }

  HelloWatch hello(shared.log, std::chrono::milliseconds(options.hello_timeout_ms));
  Service service(shared, hello, client_ca.get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address.Target(), credentials, &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // A port another server holds is an error, not a port to share (SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client that vanishes without closing its connection is noticed within ~15 s, and its
  // session ends.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  // A thread per session, and some for Describe, Status, refusals and gRPC's pollers.
  grpc::ResourceQuota quota("backplane-serve");
  quota.SetMaxThreads(options.max_sessions + 16);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    if (server != nullptr) server->Shutdown();
    throw std::runtime_error("cannot listen on " + address.Target() +
                             ": gRPC refused it (its message above says why; the port was free "
                             "and the key pair matched when checked before the plugins loaded)");
  }
  const std::string where =
      address.port == 0 ? Address{address.host, port}.Target() : address.Target();
  shared.log.Line("listening on " + where + " (" + mode + "); " +
                  std::to_string(shared.devices.size()) + " devices; native modules " +
                  (options.allow_native_modules ? "allowed" : "refused") + "; exposes " +
                  Join(options.expose) + "; at most " + std::to_string(options.max_sessions) +
                  " sessions");
  // The port file last: whoever waits for it then reads a whole startup log (written after
  // the line above, RemoteServer.ATokenIsNeededWhenTheServerHasOne read "backplane serve: "
  // now and then).
  if (!options.port_file.empty()) {
    try {
      WritePortFile(options.port_file, port);
    } catch (...) {
      server->Shutdown();
      throw;
    }
  }

  std::thread stopper([&] {
    int sig = 0;
    while (sigwait(&signals.set(), &sig) != 0) {
    }
    shared.log.Line(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                    ": stopping (sessions end and everything they hold is freed)");
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  });
  server->Wait();
  stopper.join();
  shared.log.Line("stopped");
  return 0;
}

}  // namespace remote
}  // namespace backplane
