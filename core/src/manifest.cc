// SPDX-License-Identifier: Apache-2.0
#include "manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common.h"

namespace backplane {
namespace core {
namespace {

constexpr size_t kMaxManifestBytes = 1 << 20;

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  Fail(BP_ERR_PLUGIN, "manifest " + path + " is invalid: " + what);
}

// The text of the manifest at `path`. It must be a regular file of at most 1 MiB: checked on
// the open file before a byte is read, and opened without blocking, so a FIFO (which would
// block every discovery) or a huge or sparse file (read whole, it would take seconds and
// gigabytes) is refused at once.
std::string ReadManifestText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) Fail(BP_ERR_PLUGIN, "manifest " + path + " cannot be read: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Fail(BP_ERR_PLUGIN, "manifest " + path + " cannot be examined: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    Fail(BP_ERR_PLUGIN,
         "manifest " + path + " is not a regular file (a FIFO, socket or device is never read)");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxManifestBytes) {
    Bad(path, "it is " + std::to_string(st.st_size) +
                  " bytes, larger than the 1 MiB a manifest may have");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail(BP_ERR_PLUGIN, "manifest " + path + " cannot be read: " + std::strerror(errno));
    if (n == 0) break;  // shrank while read: parse what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

std::string StringField(const nlohmann::json& j, const char* key, bool required,
                        const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) Bad(path, std::string("the field \"") + key + "\" is missing");
    return "";
  }
  if (!it->is_string()) Bad(path, std::string("the field \"") + key + "\" must be a string");
  return it->get<std::string>();
}

std::vector<std::string> StringList(const nlohmann::json& j, const char* key,
                                    const std::string& path) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) Bad(path, std::string("the field \"") + key + "\" must be an array");
  for (const auto& e : *it) {
    if (!e.is_string() || e.get<std::string>().empty()) {
      Bad(path, std::string("the field \"") + key + "\" must hold non-empty strings only");
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

Manifest ReadManifest(const std::string& path) {
  const std::string text = ReadManifestText(path);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Bad(path, "it is not valid JSON");
  if (!j.is_object()) Bad(path, "expected a JSON object at the top level");
  auto mv = j.find("manifest_version");
  if (mv == j.end() || !mv->is_number_integer() || mv->get<int64_t>() != 1) {
    Bad(path, "expected \"manifest_version\": 1");
  }
  Manifest m;
  m.path = path;
  m.name = StringField(j, "name", true, path);
  m.library = StringField(j, "library", true, path);
  m.abi_version = StringField(j, "abi_version", true, path);
  m.version = StringField(j, "version", false, path);
  m.vendor = StringField(j, "vendor", false, path);
  m.provides = StringList(j, "provides", path);
  m.device_types = StringList(j, "device_types", path);
  if (m.name.empty() ||
      m.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    Bad(path, "\"name\" must be 1 or more characters of a-z, 0-9 and _");
  }
  if (m.library.empty() || m.library.find('/') != std::string::npos || m.library == "." ||
      m.library == "..") {
    Bad(path, "\"library\" must be a file name in the manifest's own folder, without '/'");
  }
  return m;
}

}  // namespace core
}  // namespace backplane
