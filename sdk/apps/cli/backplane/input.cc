// SPDX-License-Identifier: Apache-2.0
#include "input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace backplane {
namespace cli {

namespace {

std::string MiB(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string ReadInputFile(const std::string& path, const InputKind& kind, std::string* out) {
  const std::string give = std::string("give a ") + kind.what + " in " + kind.expected;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return "cannot read '" + path + "' (" + std::strerror(errno) + "); " + give;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return "cannot read '" + path + "' (" + why + "); " + give;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return "'" + path + "' is a directory, not a " + kind.what + "; " + give;
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kind.max_bytes) {
    ::close(fd);
    return "'" + path + "' is " + std::to_string(st.st_size) + " bytes, larger than " +
           MiB(kind.max_bytes) + ", the limit for a " + kind.what + "; " + give;
  }
  std::string data;
  char buf[1 << 16];
  while (data.size() <= kind.max_bytes) {
    const size_t want = std::min(sizeof(buf), kind.max_bytes + 1 - data.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return "cannot read '" + path + "' (" + why + "); " + give;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (data.size() > kind.max_bytes) {
    return "'" + path + "' holds more than " + MiB(kind.max_bytes) + ", the limit for a " +
           kind.what + " (a device such as /dev/zero or an endless stream?); " + give;
  }
  if (data.empty()) {
    return "'" + path + "' is empty; " + give;
  }
  *out = std::move(data);
  return "";
}

}  // namespace cli
}  // namespace backplane
