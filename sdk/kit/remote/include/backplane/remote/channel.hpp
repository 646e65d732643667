// SPDX-License-Identifier: Apache-2.0
// The gRPC channel arguments of the remote plugin's connections (docs/remote.md), shared with
// the benchmark that compares it with raw gRPC over the same settings (tests/bench).
#ifndef BACKPLANE_REMOTE_CHANNEL_H_
#define BACKPLANE_REMOTE_CHANNEL_H_

#include <grpcpp/support/channel_arguments.h>

namespace backplane {
namespace remote {

// Messages up to kMaxMessageBytes; keepalive pings every 10 s (5 s to answer), also without
// calls, so a vanished server ends the session; reconnect backoff 100 ms to 1 s; a connection of
// the channel's own (each attached server has its own).
grpc::ChannelArguments ClientChannelArguments();

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_CHANNEL_H_
