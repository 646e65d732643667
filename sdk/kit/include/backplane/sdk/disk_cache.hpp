// SPDX-License-Identifier: Apache-2.0
// Plugin-author helpers for an on-disk cache of compiled code (a code generator's libraries,
// program binaries, PTX, pipeline caches): where it lives, how entries are named, and how they
// are written and read so that a crash, a concurrent build or a damaged file never yields a
// wrong result. Header-only; no dependency beyond POSIX.
//
//   const std::string dir = sdk::CacheFolder("foo");            // once, e.g. in a static
//   const std::string path = dir + "/" + sdk::CacheKey(material) + ".bin";
//   std::string binary;
//   if (dir.empty() || !sdk::ReadCacheEntry(path, &binary)) {
//     binary = Compile(...);
//     if (!dir.empty()) sdk::WriteCacheEntry(path, binary);       // best effort
//   }
//
// `material` must hold everything the output depends on: a format tag bumped when the
// generated code's conventions change, the compiler and its version, the options, the
// device and driver where the output is device-specific, and the source.
#ifndef BACKPLANE_SDK_DISK_CACHE_HPP_
#define BACKPLANE_SDK_DISK_CACHE_HPP_

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <backplane/file_trust.hpp>
#include <backplane/hash.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace backplane {
namespace sdk {

namespace detail {

inline std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Creates every missing folder of `path` with mode 0700; stops at the first failure (the
// caller checks the result with IsPrivateFolder).
inline void MakeFolders(const std::string& path) {
  std::string partial;
  std::stringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    partial += "/" + part;
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) return;
  }
}

inline constexpr const char kEntryMagic[] = "BPCACHE1\n";

}  // namespace detail

// Why `path` cannot be a cache folder, or "" when it can: see IsPrivateFolder.
inline std::string CacheFolderRefusal(const std::string& path) {
  file_trust::Options options;
  options.kind = file_trust::Kind::kFolder;
  options.owned_by_user = true;
  return file_trust::Refusal(path, "cache folder", options);
}

// Whether `path` is a folder this user owns that no one else can write, and whose real path
// passes the rules every plugin file passes (backplane/file_trust.hpp): every folder above it
// owned by root or this user and writable by no one else (a root-owned sticky folder such as
// /tmp excepted). Only such a folder is used: files another user could place or replace
// there would be loaded as code.
inline bool IsPrivateFolder(const std::string& path) { return CacheFolderRefusal(path).empty(); }

// The cache folder of `name` (a code generator's kind, e.g. "c", "opencl"):
// $XDG_CACHE_HOME/backplane/<name> when XDG_CACHE_HOME is an absolute path, else
// ~/.cache/backplane/<name>, created with mode 0700 and used only if IsPrivateFolder. Both
// variables are read with secure_getenv, so a setuid program never caches in a folder its
// caller chose. When neither is usable, a fresh private folder /tmp/backplane-<name>-XXXXXX
// for this process (nothing is shared, nothing persists); "" when even that fails, in which
// case the caller builds without a cache or reports the error. Call it once and keep the
// result: each call may create a new temporary folder.
inline std::string CacheFolder(const std::string& name) {
  std::string base;
  const char* xdg = secure_getenv("XDG_CACHE_HOME");
  const char* home = secure_getenv("HOME");
  if (xdg != nullptr && xdg[0] == '/') {
    base = std::string(xdg) + "/backplane/" + name;
  } else if (home != nullptr && home[0] == '/') {
    base = std::string(home) + "/.cache/backplane/" + name;
  }
  if (!base.empty()) {
    detail::MakeFolders(base);
    if (IsPrivateFolder(base)) return base;
  }
  std::string tmpl = "/tmp/backplane-" + name + "-XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) return tmpl;
  return "";
}

// A file name stem for `material`: 32 hex digits from two 64-bit FNV-1a hashes with different
// offsets. Not cryptographic: the cache folder is private, so no one else chooses its files.
inline std::string CacheKey(const std::string& material) {
  return detail::Hex16(Fnv1a64(material)) + detail::Hex16(Fnv1a64(material, 0x84222325cbf29ce4ull));
}

// The whole content of `path` into `*out`; false when it cannot be opened or read.
inline bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return false;
  *out = bytes.str();
  return true;
}

// Writes `bytes` to `path` atomically: into a temporary file beside it, then renamed over it,
// so readers see the old file or the whole new one, and two processes writing the same entry
// do not interleave. False (and `path` unchanged, no temporary left) on any failure.
inline bool WriteFileAtomic(const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(getpid()) + "_" + std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      unlink(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

// A checksummed cache entry: a header (magic and the payload's hash) then the payload. Use
// it for anything handed to a driver (program binaries, PTX, pipeline caches), so that a
// truncated or damaged file is rebuilt instead of loaded. (A library that is dlopen'ed by path
// is written with WriteFileAtomic and checked some other way.)
inline bool WriteCacheEntry(const std::string& path, const std::string& payload) {
  return WriteFileAtomic(path,
                         detail::kEntryMagic + detail::Hex16(Fnv1a64(payload)) + "\n" + payload);
}

// The payload of the entry at `path` into `*payload`; false when the file is missing,
// truncated, damaged or not an entry (the caller rebuilds and writes it again).
inline bool ReadCacheEntry(const std::string& path, std::string* payload) {
  std::string all;
  if (!ReadWholeFile(path, &all)) return false;
  const size_t magic = std::strlen(detail::kEntryMagic);
  const size_t header = magic + 17;  // magic, 16 hex digits, newline
  if (all.size() < header || all.compare(0, magic, detail::kEntryMagic) != 0 ||
      all[header - 1] != '\n') {
    return false;
  }
  std::string body = all.substr(header);
  if (all.compare(magic, 16, detail::Hex16(Fnv1a64(body))) != 0) return false;
  *payload = std::move(body);
  return true;
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_DISK_CACHE_HPP_
