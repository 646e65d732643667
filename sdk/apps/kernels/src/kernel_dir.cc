// SPDX-License-Identifier: Apache-2.0
// Where the kernel files are: the search order is in catalog.hpp.
#include <dlfcn.h>

#include <backplane/kernels/catalog.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#ifndef BACKPLANE_KERNEL_DIR_FROM_LIBDIR
#error "BACKPLANE_KERNEL_DIR_FROM_LIBDIR must be defined (the build does)"
#endif

namespace backplane {
namespace kernels {
namespace {

namespace fs = std::filesystem;

// The variable's value, ignored in setuid programs as the plugin search path is.
const char* GetEnv(const char* name) {
#if defined(__GLIBC__)
  return secure_getenv(name);
#else
  return std::getenv(name);
#endif
}

std::string Trimmed(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// The folder of the libbackplane in this process, found through one of its symbols: the
// catalog links no libbackplane itself, so a program without one has none (empty path).
fs::path CoreLibraryDir() {
  void* symbol = dlsym(RTLD_DEFAULT, "bp_abi_version");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  fs::path lib = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : lib.parent_path();
}

// The candidate folders after the variable, in order, each with where it comes from.
std::vector<std::pair<fs::path, std::string>> Candidates() {
  std::vector<std::pair<fs::path, std::string>> out;
  if (fs::path lib = CoreLibraryDir(); !lib.empty()) {
    // The install's layout (libdir to datadir, as configured), then the build tree's.
    out.emplace_back((lib / BACKPLANE_KERNEL_DIR_FROM_LIBDIR).lexically_normal(),
                     "beside libbackplane");
    out.emplace_back((lib / "../share/backplane/kernels").lexically_normal(),
                     "beside libbackplane");
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.emplace_back(
        (exe.parent_path().parent_path() / "share" / "backplane" / "kernels").lexically_normal(),
        "beside the program");
  }
  return out;
}

}  // namespace

std::string KernelDir() {
  if (const char* env = GetEnv("BACKPLANE_KERNEL_DIR"); env != nullptr && *env != '\0') {
    return Trimmed(env);
  }
  const auto candidates = Candidates();
  for (const auto& [dir, from] : candidates) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return Trimmed(dir.string());
  }
  // None exists: the first place looked, so that a failed read names a folder of this
  // install rather than of the machine the package was built on.
  return candidates.empty() ? std::string("share/backplane/kernels")
                            : Trimmed(candidates.front().first.string());
}

std::string ReadKernelFile(const std::string& file) {
  const std::string path = KernelDir() + "/" + file;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    std::string message = "cannot read the kernel file '" + path + "'";
    const char* env = GetEnv("BACKPLANE_KERNEL_DIR");
    if (env == nullptr || *env == '\0') {
      std::string looked;
      for (const auto& [dir, from] : Candidates()) {
        looked += (looked.empty() ? "" : ", ") + dir.string() + " (" + from + ")";
      }
      message += "; the reference kernels were looked for in " +
                 (looked.empty() ? std::string("no folder") : looked) +
                 ": set BACKPLANE_KERNEL_DIR to the folder with the *.bpir files "
                 "(<prefix>/share/backplane/kernels in an install)";
    }
    throw std::runtime_error(message);
  }
  return text.str();
}

}  // namespace kernels
}  // namespace backplane
