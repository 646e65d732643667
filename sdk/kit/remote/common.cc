// SPDX-License-Identifier: Apache-2.0
#include "backplane/remote/common.hpp"

#include <arpa/inet.h>
#include <grpc/grpc.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "backplane/remote/channel.hpp"

namespace backplane {
namespace remote {

std::string Address::Target() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Address ParseAddress(const std::string& text, bool allow_port_zero) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("remote address '" + text + "': " + why +
                                 "; expected host:port, [IPv6]:port or host (port " +
                                 std::to_string(kDefaultPort) + ")");
  };
  if (text.empty()) throw bad("it is empty");
  Address a;
  std::string port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) throw bad("'[' without ']'");
    a.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw bad("something other than :port after ']'");
      port = text.substr(close + 2);
      if (port.empty()) throw bad("':' without a port");
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon)
      throw bad("an IPv6 address must be in brackets");
    a.host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) throw bad("':' without a port");
    }
  }
  if (a.host.empty()) throw bad("no host");
  for (char c : a.host) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_';
    if (!ok) throw bad(std::string("the host has the character '") + c + "'");
  }
  if (port.empty()) {
    a.port = kDefaultPort;
  } else {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
      throw bad("the port '" + port + "' is not a number");
    a.port = std::stoi(port);
    if (a.port > 65535 || (a.port == 0 && !allow_port_zero))
      throw bad("the port " + port + " is out of range 1..65535");
  }
  return a;
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] == 127;
  }
  return false;
}

std::string ReadSecretFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(what + " '" + path + "' cannot be read: " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.empty()) throw std::runtime_error(what + " '" + path + "' is empty");
  if (text.size() > (size_t{1} << 20))
    throw std::runtime_error(what + " '" + path + "' is larger than 1 MiB; is it the right file?");
  return text;
}

std::optional<uint64_t> ViewBytes(int ndim, const int64_t* shape, const int64_t* strides,
                                  uint32_t bits, uint32_t lanes) {
  const uint64_t element = (uint64_t{bits} * lanes + 7) / 8;
  bool empty = false;
  uint64_t last = 0;     // the offset, in elements, of the last element
  uint64_t compact = 1;  // the compact stride of the dimension being read
  for (int k = ndim - 1; k >= 0; --k) {
    const int64_t extent = shape[k];
    const int64_t stride = strides != nullptr ? strides[k] : 0;
    if (extent < 0 || stride < 0) return std::nullopt;
    if (extent == 0) empty = true;
    const uint64_t s = strides != nullptr ? static_cast<uint64_t>(stride) : compact;
    uint64_t step = 0;
    if (!empty && (__builtin_mul_overflow(static_cast<uint64_t>(extent - 1), s, &step) ||
                   __builtin_add_overflow(last, step, &last)))
      return std::nullopt;
    if (strides == nullptr && extent > 0 &&
        __builtin_mul_overflow(compact, static_cast<uint64_t>(extent), &compact))
      return std::nullopt;
  }
  if (empty) return 0;
  uint64_t bytes = 0;
  if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, element, &bytes))
    return std::nullopt;
  return bytes;
}

bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

grpc::ChannelArguments ClientChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

}  // namespace remote
}  // namespace backplane
