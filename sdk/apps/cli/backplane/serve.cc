// SPDX-License-Identifier: Apache-2.0
// `backplane serve`: serves this machine's devices to remote clients (the `remote` plugin) over
// gRPC until SIGINT or SIGTERM (docs/remote.md). The server is sdk/apps/serve/server.cc; a build
// without gRPC still has the command, which then says how to get it.
#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"

#ifdef BACKPLANE_HAVE_REMOTE_SERVER
#include "backplane/remote/server.hpp"
#endif

namespace backplane {
namespace cli {

namespace {

struct ServeOptions {
  std::string listen = "127.0.0.1:7100";
  std::string tls_cert, tls_key, client_ca, token_file;
  bool allow_native_modules = false;
  std::vector<std::string> expose;
  std::vector<std::string> devices;
  int max_sessions = 64;
  int hello_timeout_ms = 10000;
  std::string port_file;
  std::vector<std::string> plugin_paths;
};

int RunServe(const ServeOptions& o) {
#ifdef BACKPLANE_HAVE_REMOTE_SERVER
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  remote::ServerOptions server;
  server.listen = o.listen;
  server.tls_cert = o.tls_cert;
  server.tls_key = o.tls_key;
  server.client_ca = o.client_ca;
  server.token_file = o.token_file;
  server.allow_native_modules = o.allow_native_modules;
  server.expose = o.expose;
  server.device_types = o.devices;
  server.max_sessions = o.max_sessions;
  server.hello_timeout_ms = o.hello_timeout_ms;
  server.port_file = o.port_file;
  try {
    return remote::Serve(server, std::cerr);
  } catch (const std::invalid_argument& e) {
    std::cerr << "backplane serve: " << e.what() << "\n";
    return kExitUsage;
  }
#else
  (void)o;
  std::cerr << "backplane serve: this backplane was built without gRPC, so it cannot serve "
               "devices; install libgrpc++-dev, protobuf-compiler-grpc, libprotobuf-dev and "
               "protobuf-compiler and build Backplane again (docs/remote.md)\n";
  return kExitUsage;
#endif
}

}  // namespace

Command AddServeCommand(CLI::App& parent) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* app = parent.add_subcommand(
      "serve", "Serve this machine's devices to remote clients over gRPC (docs/remote.md)");
  app->add_option("--listen", o->listen,
                  "HOST:PORT to listen on (port 0: a free one; see --port-file). An address "
                  "other machines reach needs TLS and client authentication")
      ->capture_default_str();
  app->add_option("--tls-cert", o->tls_cert, "The server's certificate chain (PEM)")
      ->type_name("FILE");
  app->add_option("--tls-key", o->tls_key, "The server's private key (PEM)")->type_name("FILE");
  app->add_option("--client-ca", o->client_ca,
                  "Clients must present a certificate this CA signed (mutual TLS; PEM)")
      ->type_name("FILE");
  app->add_option("--token-file", o->token_file,
                  "Clients must send the token in this file (a bearer token; use with TLS)")
      ->type_name("FILE");
  app->add_flag("--allow-native-modules", o->allow_native_modules,
                "Load uploaded modules that carry native code (the cpu plugin's c modules): "
                "that code runs in this process, so allow it only for clients you trust");
  app->add_option("--expose", o->expose,
                  "Let clients call this registered function by name (repeat for several)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app->add_option("--devices", o->devices,
                  "Serve only devices of these types (e.g. opencl,vulkan); default: all")
      ->type_name("TYPE[,TYPE]")
      ->delimiter(',')
      ->allow_extra_args(false);
  app->add_option("--max-sessions", o->max_sessions, "At most this many clients at once")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app->add_option("--hello-timeout-ms", o->hello_timeout_ms,
                  "End a connection that has not said Hello within this many milliseconds "
                  "(it would hold a session slot)")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  app->add_option("--port-file", o->port_file,
                  "Write the port listened on here once the server accepts connections")
      ->type_name("PATH");
  AddPluginPathOption(app, &o->plugin_paths);
  app->footer(
      "Serves until SIGINT or SIGTERM; each session's buffers, streams and modules are freed "
      "when its client leaves, dies or loses its connection.\n"
      "Examples:\n"
      "  backplane serve\n"
      "  backplane serve --listen 127.0.0.1:0 --port-file port.txt --devices opencl\n"
      "  backplane serve --listen 0.0.0.0:7100 --tls-cert server.pem \\\n"
      "      --tls-key server.key --client-ca clients.pem\n"
      "Exit codes: 0 stopped by a signal, 1 the server could not start (the port is taken), 2 a "
      "usage error (bad option, or an address other machines reach without TLS).\n"
      "Environment: BACKPLANE_PLUGIN_PATH, BACKPLANE_DISABLE_PLUGINS (which devices there are); "
      "docs/remote.md. Security: docs/security.md, \"Remote devices\".");
  return Command{app, [o] { return RunServe(*o); }};
}

}  // namespace cli
}  // namespace backplane
