// SPDX-License-Identifier: Apache-2.0
// The remote device server: what `backplane serve` runs (docs/remote.md). It exposes this
// machine's devices (every plugin the process loads) over gRPC, one session per client
// (remote.proto), and frees what a session held when it ends.
#ifndef BACKPLANE_REMOTE_SERVER_H_
#define BACKPLANE_REMOTE_SERVER_H_

#include <iosfwd>
#include <string>
#include <vector>

namespace backplane {
namespace remote {

struct ServerOptions {
  // host:port to listen on; port 0 asks the system for a free one (see port_file). A host
  // that is not loopback (IsLoopback) needs TLS with client authentication: tls_cert and
  // tls_key, and client_ca (mutual TLS) or token_file (a bearer token over TLS), or both.
  std::string listen = "127.0.0.1:7100";
  std::string tls_cert, tls_key;  // PEM files: the server's certificate chain and key
  std::string client_ca;          // PEM: clients must present a certificate it signed
  std::string token_file;         // clients must send this token (docs/security.md)
  // Load modules that carry native code (the cpu plugin's "c" modules). Off: such an upload
  // is refused with BP_ERR_INVALID_ARGUMENT naming this option.
  bool allow_native_modules = false;
  // The registered functions clients may call by name; nothing else is callable. The host code
  // of an uploaded module calls none, exposed or not: every upload is loaded with
  // BP_MODULE_LOAD_NO_GLOBAL_CALLS, so it calls only its own kernels.
  std::vector<std::string> expose;
  // Serve only these device types (empty: every type with devices).
  std::vector<std::string> device_types;
  int max_sessions = 64;
  // A connection must say Hello within this many milliseconds of opening its session, or the
  // server ends it: a client that never does cannot hold a session slot.
  int hello_timeout_ms = 10000;
  // When not empty, the port listened on is written here (decimal, newline) once the
  // server accepts connections: a test starts the server with port 0 and waits for the file.
  std::string port_file;
};

// Checks `options` (files readable, the loopback rule) and serves until SIGINT or SIGTERM;
// returns the process exit code (0 after a signal). Progress and each session's start and end
// go to `log`. Throws std::invalid_argument for options that cannot work, saying what to pass,
// and std::runtime_error when the server cannot start (the port is taken, say).
int Serve(const ServerOptions& options, std::ostream& log);

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_SERVER_H_
