// SPDX-License-Identifier: Apache-2.0
// bench_remote_raw_server PORT_FILE: the raw gRPC side of the remote-device benchmarks
// (remote_bench.cc). It serves remote_bench.proto on 127.0.0.1 with a port the system picks,
// written to PORT_FILE once it listens, with the server arguments `backplane serve` uses
// (sdk/apps/serve/server.cc: message size limits, keepalive), and stops on SIGTERM or SIGINT.
// Push counts what it receives; Pull sends bytes from a buffer filled once.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backplane/bench/remote_bench.grpc.pb.h"
#include "backplane/remote/common.hpp"

namespace {

namespace pb = backplane::bench::v1;
using backplane::remote::kChunkBytes;
using backplane::remote::kMaxMessageBytes;

// Pull's source: the largest size asked for so far, filled once.
constexpr uint64_t kMaxPullBytes = uint64_t{1} << 30;

class RawBench final : public pb::RawBench::Service {
 public:
  grpc::Status Push(grpc::ServerContext*, grpc::ServerReader<pb::Chunk>* reader,
                    pb::Ack* ack) override {
    pb::Chunk chunk;
    uint64_t bytes = 0;
    while (reader->Read(&chunk)) bytes += chunk.data().size();
    ack->set_bytes(bytes);
    return grpc::Status::OK;
  }

  grpc::Status Pull(grpc::ServerContext*, const pb::PullRequest* request,
                    grpc::ServerWriter<pb::Chunk>* writer) override {
    if (request->nbytes() > kMaxPullBytes) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Pull: at most 1 GiB");
    }
    const char* source = Source(request->nbytes());
    const uint64_t chunk_bytes = request->chunk_bytes() == 0
                                     ? kChunkBytes
                                     : std::min<uint64_t>(request->chunk_bytes(), kChunkBytes);
    pb::Chunk chunk;
    for (uint64_t done = 0; done < request->nbytes();) {
      const uint64_t n = std::min(chunk_bytes, request->nbytes() - done);
      chunk.set_data(source + done, n);
      if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client left");
      done += n;
    }
    return grpc::Status::OK;
  }

  grpc::Status Ping(grpc::ServerContext*, const pb::Empty*, pb::Empty*) override {
    return grpc::Status::OK;
  }

 private:
  const char* Source(uint64_t nbytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (source_.size() < nbytes) source_.assign(nbytes, '\x5a');
    return source_.data();
  }
  std::mutex mu_;
  std::string source_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: bench_remote_raw_server PORT_FILE\n";
    return 2;
  }
  // SIGINT and SIGTERM wait for sigwait below, in every thread gRPC starts.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  RawBench service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  // What `backplane serve` sets (sdk/apps/serve/server.cc).
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "bench_remote_raw_server: cannot listen on 127.0.0.1\n";
    return 1;
  }
  const std::string path = argv[1];
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::cerr << "bench_remote_raw_server: cannot write " << path << '\n';
    return 1;
  }
  std::thread stopper([&] {
    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  });
  server->Wait();
  stopper.join();
  return 0;
}
