// SPDX-License-Identifier: Apache-2.0
// What the remote plugin (client) and `backplane serve` (server) share besides the protocol
// (remote.proto): addresses, limits, secrets. docs/remote.md.
#ifndef BACKPLANE_REMOTE_COMMON_H_
#define BACKPLANE_REMOTE_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace backplane {
namespace remote {

// The port `backplane serve` listens on when --listen names none.
constexpr int kDefaultPort = 7100;
// Bulk copies and module uploads move in chunks of this size: one gRPC message each, so
// HTTP/2 flow control bounds what is in flight and neither side holds a whole transfer.
constexpr size_t kChunkBytes = size_t{1} << 20;
// The largest message either side accepts: a chunk plus its envelope, with room to spare.
constexpr int kMaxMessageBytes = 8 << 20;
// Metadata key of the bearer token (a token over TLS: docs/security.md, "Remote devices").
constexpr const char* kTokenMetadata = "authorization";

// "host:port", "[v6 address]:port" or "host" (the port defaults to kDefaultPort).
struct Address {
  std::string host;  // without brackets
  int port = 0;
  // host:port as gRPC takes it (brackets around an IPv6 address).
  std::string Target() const;
};
// Parses `text`; throws std::invalid_argument saying what is wrong and what is expected. A port
// of 0 is accepted only with allow_port_zero (a server asking the system for a free port).
Address ParseAddress(const std::string& text, bool allow_port_zero = false);

// True for names and addresses that only reach this machine: localhost, 127.0.0.0/8, ::1.
// Everything else (0.0.0.0, [::] and every other address or name) is not loopback.
bool IsLoopback(const std::string& host);

// The whole of a small file (a certificate, a key, a token); throws std::runtime_error naming
// `what` and the path when it cannot be read or is empty or larger than 1 MiB.
std::string ReadSecretFile(const std::string& path, const std::string& what);

// The bytes a tensor view reaches from its byte_offset: (the offset of its last element + 1)
// elements of (bits * lanes + 7) / 8 bytes, or 0 when an extent is 0; `strides` null means
// compact row-major. Nothing when an extent or a stride is negative or the size overflows 64
// bits. The client checks a call's tensors with it before sending, the server again.
std::optional<uint64_t> ViewBytes(int ndim, const int64_t* shape, const int64_t* strides,
                                  uint32_t bits, uint32_t lanes);

// Compares two secrets in time that does not depend on where they differ.
bool SameSecret(const std::string& a, const std::string& b);

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_COMMON_H_
