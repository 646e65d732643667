// SPDX-License-Identifier: Apache-2.0
// `backplane serve` end to end: the security options. An address other machines reach needs TLS
// and client authentication; mutual TLS refuses clients without a certificate of the CA; a token
// server refuses RPCs without the token. Also the command's help page and exit codes.
#include <sstream>

#include "server_test.h"
#include "subprocess.h"

namespace backplane {
namespace remote {
namespace test {
namespace {

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
  // A certificate file that is not there is a usage error, naming the option.
  r = subprocess::Run({BACKPLANE_CLI_PATH, "serve", "--tls-cert", (certs / "nosuch.pem").string(),
                       "--tls-key", (certs / "server.key").string()},
                      o);
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << r.err;
  EXPECT_TRUE(Contains(r.err, "--tls-cert")) << r.err;
  // A port that is taken is a failure to start (1), found before the plugins load (the
  // server logs each device it serves once they have).
  START_SERVER(server);
  r = subprocess::Run({BACKPLANE_CLI_PATH, "serve", "--listen", server.target()}, o);
  EXPECT_EQ(r.exit_code, 1) << r.Describe() << r.err;
  EXPECT_TRUE(Contains(r.err, server.target())) << r.err;
  EXPECT_TRUE(Contains(r.err, "the port is taken")) << r.err;
  EXPECT_FALSE(Contains(r.err, "device 0:")) << r.err;
  // A key that is not the certificate's: a usage error saying so, before the plugins load.
  r = subprocess::Run({BACKPLANE_CLI_PATH, "serve", "--tls-cert", (certs / "server.pem").string(),
                       "--tls-key", (certs / "client.key").string()},
                      o);
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << r.err;
  EXPECT_TRUE(Contains(r.err, "--tls-key is not the private key")) << r.err;
  EXPECT_FALSE(Contains(r.err, "device 0:")) << r.err;
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
  // Each refusal says why to the client, and the server's log names the peer.
  {
    auto stub = Connect(server.target(), Tls(certs, ""));
    grpc::Status s = Describe(*stub, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), "presented no client certificate"))
        << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), "BACKPLANE_REMOTE_CERT")) << s.error_message();
    // A session is refused the same way: the client reads the reason from the stream's status.
    Session session(*stub);
    EXPECT_EQ(session.Hello().code(), -1);
    grpc::Status st = session.FinishNow();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(Contains(st.error_message(), "--client-ca")) << st.error_message();
  }
  {
    auto stub = Connect(server.target(), Tls(certs, "other_client"));
    grpc::Status s = Describe(*stub, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), "does not verify against --client-ca"))
        << s.error_message();
  }
  const std::string log = server.Log();
  EXPECT_TRUE(Contains(log, "refused ipv4:127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, ": it presented no client certificate")) << log;
  EXPECT_TRUE(Contains(log, "does not verify against --client-ca")) << log;
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

}  // namespace
}  // namespace test
}  // namespace remote
}  // namespace backplane
