// SPDX-License-Identifier: Apache-2.0
// Remote devices from C++ (docs/remote.md): attach a `backplane serve` server and its devices
// appear as remote:0, remote:1, ... of this host, usable as any other device. Header-only, over
// the functions the remote plugin registers (its plugin loads on the first call); from C, call
// the same functions with bp_registry_get and bp_function_call.
//
//   backplane::remote::Attach("gpu-box:7100", R"({"ca": "ca.pem", "cert": "me.pem",
//                                                 "key": "me.key"})");
//   backplane::Tensor x = backplane::Tensor::Empty({1024}, f32,
//   backplane::Device::Parse("remote:0"));
#ifndef BACKPLANE_REMOTE_HPP_
#define BACKPLANE_REMOTE_HPP_

#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace remote {

// Attaches the server at `address` ("host:port", "[v6]:port"), connecting now; its devices get
// the next remote device ids. `options_json` (docs/remote.md, "Attaching servers"): "ca",
// "cert", "key", "token_file", "server_name", "timeout_ms", "connect_timeout_ms". Returns the
// server's description as JSON ({"address", "state", "devices": [{"device": "remote:0",
// "remote": "opencl:0", "name", "target_kind"}]}). Throws Error naming the server when it cannot
// be reached or refuses this host.
inline std::string Attach(const std::string& address, const std::string& options_json = "{}") {
  return Function::Get("remote.attach")(address, options_json).AsString();
}

// Ends the session with the server at `address` (the server frees what this host held there);
// its devices stop existing here.
inline void Detach(const std::string& address) { Function::Get("remote.detach")(address); }

// Every attached server with its state, its last error and its devices, as JSON.
inline std::string Servers() { return Function::Get("remote.servers")().AsString(); }

// What the server at `address` holds for all its clients ({"sessions", "buffers", "bytes",
// "streams", "modules"}), as JSON.
inline std::string Status(const std::string& address) {
  return Function::Get("remote.status")(address).AsString();
}

// The function `name` registered on the server at `address`, which its operator exposes
// (`backplane serve --expose NAME`); calling it runs it there and returns its result.
inline Function ServerFunction(const std::string& address, const std::string& name) {
  return Function(Function::Get("remote.function")(address, name).AsObject());
}

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_HPP_
