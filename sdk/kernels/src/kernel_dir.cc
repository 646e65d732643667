// SPDX-License-Identifier: Apache-2.0
// Where the kernel files are: the search order is in catalog.hpp.
#include <backplane/kernels/catalog.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#ifndef BACKPLANE_KERNEL_SOURCE_DIR
#error "BACKPLANE_KERNEL_SOURCE_DIR must be defined (the build does)"
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

}  // namespace

std::string KernelDir() {
  if (const char* env = GetEnv("BACKPLANE_KERNEL_DIR"); env != nullptr && *env != '\0') {
    return Trimmed(env);
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = exe.parent_path().parent_path() / "share" / "backplane" / "kernels";
    if (fs::is_directory(dir, ec)) return Trimmed(dir.lexically_normal().string());
  }
  return Trimmed(BACKPLANE_KERNEL_SOURCE_DIR);
}

std::string ReadKernelFile(const std::string& file) {
  const std::string path = KernelDir() + "/" + file;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    throw std::runtime_error("cannot read the kernel file '" + path + "'");
  }
  return text.str();
}

}  // namespace kernels
}  // namespace backplane
