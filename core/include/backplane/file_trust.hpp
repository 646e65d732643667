// SPDX-License-Identifier: Apache-2.0
// The one rule set that decides whether a file or folder may hold code Backplane runs or
// reads as trusted: plugin libraries, their manifests and plugin folders (the core's
// discovery) and the code generators' disk caches (backplane/sdk/disk_cache.hpp). Header-only
// and POSIX-only, so that the core, the SDK's plugin helpers and a host that checks folders
// of its own all apply the same rules (docs/security.md, "Plugins and discovery").
//
// The rules, applied to the REAL path (every symlink resolved), never to the path as given:
//   1. It is a regular file (kFile) or a folder (kFolder): a FIFO, socket or device is
//      refused, so nothing blocks on it or reads it endlessly.
//   2. It is owned by root or by the process's effective user (with owned_by_user: by the
//      effective user only, as a private cache folder must be).
//   3. Neither its group nor others may write it.
//   4. Every folder above it, up to /, is owned by root or the effective user and is writable
//      by neither group nor others, except a folder owned by root with the sticky bit set
//      (as /tmp is): there no one can rename or remove what another user owns.
// A folder others may write is refused even when the file in it is sound: they could
// replace the file, or (for a search folder) add files of their own.
//
// Running as root changes nothing in the rules: they read owners and mode bits, not what
// the caller could access, so a file another user owns is refused for root as well.
#ifndef BACKPLANE_FILE_TRUST_HPP_
#define BACKPLANE_FILE_TRUST_HPP_

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace backplane {
namespace file_trust {

enum class Kind { kFile, kFolder };

struct Options {
  Kind kind = Kind::kFile;
  // The path itself must belong to the effective user, not root (a private folder). Folders
  // above it follow rule 4 either way.
  bool owned_by_user = false;
};

namespace detail {

inline std::string Mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

inline std::string UserText(uid_t uid) {
  std::string text = "user " + std::to_string(uid);
  struct passwd pw;
  struct passwd* found = nullptr;
  char buffer[1024];
  if (getpwuid_r(uid, &pw, buffer, sizeof(buffer), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr) {
    text += " (" + std::string(found->pw_name) + ")";
  }
  return text;
}

inline const char* TypeText(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Why the object at `real` (a component of the checked path) may not be trusted, or "".
// `label` names it in the message ("library /x/y.so", "the folder /x above it").
inline std::string Problem(const std::string& real, const std::string& label, bool leaf,
                           const Options& options) {
  struct stat st;
  if (::lstat(real.c_str(), &st) != 0) {
    return label + " cannot be examined: " + std::strerror(errno);
  }
  if (S_ISLNK(st.st_mode)) {
    return label + " was replaced by a symbolic link while it was being checked";
  }
  const bool want_folder = !leaf || options.kind == Kind::kFolder;
  if (want_folder && !S_ISDIR(st.st_mode)) return label + " is not a folder";
  if (!want_folder && !S_ISREG(st.st_mode)) {
    return label + " is " + TypeText(st.st_mode) +
           ", not a regular file; only regular files are read or loaded";
  }
  const uid_t me = ::geteuid();
  const bool owner_ok =
      (leaf && options.owned_by_user) ? st.st_uid == me : (st.st_uid == 0 || st.st_uid == me);
  if (!owner_ok) {
    return label + " is owned by " + UserText(st.st_uid) + ", neither " +
           (leaf && options.owned_by_user ? std::string() : "root nor ") + "this process's user (" +
           UserText(me) +
           "): that user could replace what it holds, so it is refused; chown it to " +
           (leaf && options.owned_by_user ? "yourself" : "root or yourself");
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    // A sticky folder of root's (/tmp) protects what others own in it: allowed above the
    // checked path, never as the path itself.
    if (!leaf && (st.st_mode & S_ISVTX) != 0 && st.st_uid == 0) return "";
    return label + " is world-writable (mode " + Mode(st.st_mode) +
           "): anyone could replace what it holds, so it is refused; remove write permission "
           "for others (chmod o-w " +
           real + ")";
  }
  if ((st.st_mode & S_IWGRP) != 0) {
    if (!leaf && (st.st_mode & S_ISVTX) != 0 && st.st_uid == 0) return "";
    return label + " is group-writable (mode " + Mode(st.st_mode) + "): members of group " +
           std::to_string(st.st_gid) +
           " could replace what it holds, so it is refused; remove write permission for the "
           "group (chmod g-w " +
           real + ")";
  }
  return "";
}

}  // namespace detail

// Why `path` may not be trusted, or "" when it may: the real path and every folder above it
// against the rules at the top of this file. `what` names the path in the message ("library",
// "manifest", "plugin folder", "cache folder"); the message names the component at fault and
// how to fix it.
inline std::string Refusal(const std::string& path, const std::string& what,
                           const Options& options = {}) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) {
    return what + " " + path + " cannot be resolved: " + std::strerror(errno);
  }
  const std::string real = resolved;
  std::free(resolved);
  const std::string via = real == path ? std::string() : " (the real path of " + path + ")";
  std::string problem = detail::Problem(real, what + " " + real + via, true, options);
  if (!problem.empty()) return problem;
  std::string folder = real;
  while (folder != "/") {
    const size_t slash = folder.rfind('/');
    folder = slash == 0 ? "/" : folder.substr(0, slash);
    problem = detail::Problem(folder, "the folder " + folder + " above " + what + " " + real + via,
                              false, options);
    if (!problem.empty()) return problem;
  }
  return "";
}

// Whether `path` passes every rule.
inline bool Trusted(const std::string& path, const Options& options = {}) {
  return Refusal(path, "path", options).empty();
}

}  // namespace file_trust
}  // namespace backplane

#endif  // BACKPLANE_FILE_TRUST_HPP_
