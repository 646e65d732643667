// SPDX-License-Identifier: Apache-2.0
#include "program_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace backplane {
namespace opencl {

namespace {

// Bumped when the generated code's conventions or the entry format change.
constexpr const char* kCacheFormat = "opencl-cache-1";
constexpr const char* kEntryMagic = "BPCLBIN1\n";

std::atomic<int64_t> g_compiled{0};
std::atomic<int64_t> g_loaded{0};

uint64_t Fnv1a(const std::string& text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Info(cl_device_id id, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(id, what, 0, nullptr, &n) != CL_SUCCESS) return "";
  std::string s(n, '\0');
  if (clGetDeviceInfo(id, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

void MakeDirs(const std::string& path) {
  std::string partial;
  std::stringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    partial += "/" + part;
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) return;
  }
}

bool IsPrivateFolder(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::string ChooseCacheDir() {
  std::string base;
  const char* xdg = secure_getenv("XDG_CACHE_HOME");
  const char* home = secure_getenv("HOME");
  if (xdg != nullptr && xdg[0] == '/') {
    base = std::string(xdg) + "/backplane/opencl";
  } else if (home != nullptr && home[0] == '/') {
    base = std::string(home) + "/.cache/backplane/opencl";
  }
  if (base.empty()) return "";
  MakeDirs(base);
  return IsPrivateFolder(base) ? base : "";
}

// The payload of a cache entry, or "" when it is absent, truncated or damaged.
std::string ReadEntry(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string all = bytes.str();
  const size_t header = std::strlen(kEntryMagic) + 17;  // magic, 16 hex digits, newline
  if (all.size() <= header || all.compare(0, std::strlen(kEntryMagic), kEntryMagic) != 0) {
    return "";
  }
  std::string payload = all.substr(header);
  if (all.substr(std::strlen(kEntryMagic), 16) != Hex(Fnv1a(payload))) return "";
  return payload;
}

void WriteEntry(const std::string& path, const std::string& payload) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(getpid()) + "_" + std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kEntryMagic << Hex(Fnv1a(payload)) << "\n";
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out) {
      unlink(tmp.c_str());
      return;  // a cache that cannot be written only costs the next run a compile
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

std::string BuildLog(cl_program program, cl_device_id id) {
  size_t n = 0;
  if (clGetProgramBuildInfo(program, id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS) {
    return "(no build log)";
  }
  std::string log(n, '\0');
  clGetProgramBuildInfo(program, id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The build log, each error line followed by the generated line it points at
// ("<file>:12:5: error: ..." or "error: <file>:12:5: ...").
std::string ExplainBuildLog(const std::string& log, const std::string& source) {
  std::vector<std::string> lines;
  std::stringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  static const std::regex kWhere(R"(:(\d+):(\d+):)");
  std::string explained;
  std::stringstream out(log);
  int shown = 0;
  for (std::string l; std::getline(out, l) && shown < 40; ++shown) {
    explained += "  " + l + "\n";
    std::smatch m;
    if (l.find("error") == std::string::npos || !std::regex_search(l, m, kWhere)) continue;
    const long line = std::strtol(m[1].str().c_str(), nullptr, 10);
    if (line >= 1 && static_cast<size_t>(line) <= lines.size()) {
      explained += "  generated line " + std::to_string(line) + ": " +
                   lines[static_cast<size_t>(line - 1)] + "\n";
    }
  }
  return explained;
}

// The program's binary for its one device, or "" if the driver gives none.
std::string ProgramBinary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) !=
          CL_SUCCESS ||
      size == 0) {
    return "";
  }
  std::string binary(size, '\0');
  unsigned char* data = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr) != CL_SUCCESS) {
    return "";
  }
  return binary;
}

// A program built from a cached binary, or nullptr when the driver refuses it.
cl_program FromBinary(const OpenCLDeviceAPI::Device& d, const std::string& binary,
                      const std::string& options) {
  const size_t size = binary.size();
  const unsigned char* data = reinterpret_cast<const unsigned char*>(binary.data());
  cl_int status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(d.context, 1, &d.id, &size, &data, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS || program == nullptr) {
    if (program != nullptr) clReleaseProgram(program);
    return nullptr;
  }
  if (clBuildProgram(program, 1, &d.id, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

}  // namespace

std::string BuildOptions(const OpenCLDeviceAPI::Device& d) {
  std::string options = kBuildOptions;
  cl_device_type type = 0;
  if (clGetDeviceInfo(d.id, CL_DEVICE_TYPE, sizeof(type), &type, nullptr) == CL_SUCCESS &&
      (type & CL_DEVICE_TYPE_CPU) != 0) {
    options += std::string(options.empty() ? "" : " ") + "-DBP_NO_UNROLL_HINTS";
  }
  return options;
}

std::string ProgramCacheDir() {
  static const std::string dir = ChooseCacheDir();
  return dir;
}

ProgramCacheStats GetProgramCacheStats() {
  return ProgramCacheStats{g_compiled.load(), g_loaded.load()};
}

cl_program BuildProgram(const OpenCLDeviceAPI::Device& d, const std::string& source,
                        const std::string& what) {
  const std::string options = BuildOptions(d);
  const std::string key_material =
      std::string(kCacheFormat) + "\n" + options + "\n" + Info(d.id, CL_DEVICE_NAME) + "\n" +
      Info(d.id, CL_DEVICE_VERSION) + "\n" + Info(d.id, CL_DRIVER_VERSION) + "\n" + source;
  const std::string dir = ProgramCacheDir();
  const std::string entry = dir.empty()
                                ? ""
                                : dir + "/" + Hex(Fnv1a(key_material)) +
                                      Hex(Fnv1a(key_material, 0x84222325cbf29ce4ull)) + ".bin";
  if (!entry.empty()) {
    const std::string binary = ReadEntry(entry);
    if (!binary.empty()) {
      if (cl_program p = FromBinary(d, binary, options)) {
        ++g_loaded;
        return p;
      }
    }
  }
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(d.context, 1, &text, &length, &err);
  Check(err, "clCreateProgramWithSource (" + what + ")");
  err = clBuildProgram(program, 1, &d.id, options.c_str(), nullptr, nullptr);
  ++g_compiled;
  if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS) {
    const std::string log = BuildLog(program, d.id);
    clReleaseProgram(program);
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "opencl: building " + what + " for " + Info(d.id, CL_DEVICE_NAME) +
                    " failed (clBuildProgram: " + ErrorName(err) + "); the OpenCL build log:\n" +
                    ExplainBuildLog(log, source) +
                    "If the module was built by target.build.opencl and not edited, this is a "
                    "bug in the opencl code generator: please report it with the module's "
                    "source (Module::InspectSource).");
  }
  if (err != CL_SUCCESS) {
    clReleaseProgram(program);
    Check(err, "clBuildProgram (" + what + ")");
  }
  if (!entry.empty()) {
    const std::string binary = ProgramBinary(program);
    if (!binary.empty()) WriteEntry(entry, binary);
  }
  return program;
}

}  // namespace opencl
}  // namespace backplane
