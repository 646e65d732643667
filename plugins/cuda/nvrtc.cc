// SPDX-License-Identifier: Apache-2.0
#include "nvrtc.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <backplane/sdk/disk_cache.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "target.h"

namespace backplane {
namespace cuda {

namespace {

// Bumped when the generated code's conventions change, so old cache entries are not reused.
constexpr const char* kCacheFormat = "cuda-cache-1";

#define BACKPLANE_NVRTC_STR(x) #x
#define BACKPLANE_NVRTC_XSTR(x) BACKPLANE_NVRTC_STR(x)

Nvrtc* Load() {
  auto* n = new Nvrtc();  // lives until the process ends
  std::vector<std::string> candidates;
  const char* env = secure_getenv("BACKPLANE_NVRTC_LIBRARY");
  if (env != nullptr && env[0] != '\0') {
    candidates.push_back(env);
  } else {
    const std::string major = BACKPLANE_CUDA_TOOLKIT_VERSION_MAJOR;
    candidates = {std::string(BACKPLANE_CUDA_TOOLKIT_LIBRARY_DIR) + "/libnvrtc.so." + major,
                  "libnvrtc.so." + major, "libnvrtc.so"};
  }
  void* lib = nullptr;
  std::string errors;
  for (const std::string& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      n->library = c;
      break;
    }
    const char* err = dlerror();
    errors += "\n  " + c + ": " + (err != nullptr ? err : "not loadable");
  }
  if (lib == nullptr) {
    n->reason = "NVRTC (the CUDA runtime compiler) was not found; tried:" + errors +
                "\ninstall the CUDA Toolkit (" BACKPLANE_CUDA_TOOLKIT_VERSION_MAJOR
                ".x, package cuda-nvrtc) or set BACKPLANE_NVRTC_LIBRARY to libnvrtc.so";
    return n;
  }
  std::string missing;
#define BACKPLANE_NVRTC_RESOLVE(name)                                                    \
  n->name = reinterpret_cast<decltype(n->name)>(dlsym(lib, BACKPLANE_NVRTC_XSTR(name))); \
  if (n->name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + #name;
  BACKPLANE_NVRTC_SYMBOLS(BACKPLANE_NVRTC_RESOLVE)
#undef BACKPLANE_NVRTC_RESOLVE
  if (!missing.empty()) {
    n->reason = "NVRTC " + n->library + " lacks " + missing + "; install a newer CUDA Toolkit";
    return n;
  }
  int major = 0, minor = 0;
  n->nvrtcVersion(&major, &minor);
  n->version = std::to_string(major) + "." + std::to_string(minor);
  n->ok = true;
  return n;
}

// NVRTC's log with each generated line it points at ("bp.cu(12): error: ...").
std::string ExplainLog(const std::string& log, const std::string& source) {
  std::vector<std::string> lines;
  std::stringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  std::stringstream logs(log);
  for (std::string l; std::getline(logs, l);) {
    out += l + "\n";
    const size_t open = l.find(".cu(");
    if (open == std::string::npos) continue;
    const size_t number = open + 4;
    const size_t close = l.find(')', number);
    if (close == std::string::npos) continue;
    const long n = std::strtol(l.substr(number, close - number).c_str(), nullptr, 10);
    if (n >= 1 && static_cast<size_t>(n) <= lines.size()) {
      out += "    line " + std::to_string(n) + ": " + lines[static_cast<size_t>(n) - 1] + "\n";
    }
  }
  return out;
}

}  // namespace

const Nvrtc& Nvrtc::Get() {
  static const Nvrtc* nvrtc = Load();
  return *nvrtc;
}

std::string CacheDir() {
  static const std::string dir = sdk::CacheFolder("cuda");
  return dir;
}

CompileResult CompileCuda(const std::string& source, const std::string& arch, bool cubin,
                          const std::vector<std::string>& extra_options) {
  const Nvrtc& n = Nvrtc::Get();
  if (!n.ok) throw Error(BP_ERR_NOT_FOUND, "target.build.cuda: " + n.reason);
  std::vector<std::string> options = {"--gpu-architecture=" + (cubin ? arch : VirtualArch(arch)),
                                      "--std=c++17", "--device-as-default-execution-space"};
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::string key_material = std::string(kCacheFormat) + "\n" + n.version + "\n";
  for (const std::string& o : options) key_material += o + "\n";
  key_material += source;
  const std::string key = sdk::CacheKey(key_material);
  const std::string dir = CacheDir();
  const std::string path = dir.empty() ? "" : dir + "/" + key + (cubin ? ".cubin" : ".ptx");
  CompileResult result;
  result.cubin = cubin;
  if (!path.empty() && sdk::ReadCacheEntry(path, &result.binary) && !result.binary.empty()) {
    result.from_cache = true;
    return result;
  }

  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.nvrtcCreateProgram(&prog, source.c_str(), "bp.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    throw Error(BP_ERR_INTERNAL, std::string("target.build.cuda: nvrtcCreateProgram failed: ") +
                                     n.nvrtcGetErrorString(r));
  }
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  r = n.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  if (n.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    result.log.resize(log_size);
    n.nvrtcGetProgramLog(prog, result.log.data());
    while (!result.log.empty() && result.log.back() == '\0') result.log.pop_back();
  }
  if (r != NVRTC_SUCCESS) {
    n.nvrtcDestroyProgram(&prog);
    std::string opts;
    for (const std::string& o : options) opts += " " + o;
    throw Error(BP_ERR_INVALID_ARGUMENT,
                std::string("target.build.cuda: NVRTC ") + n.version +
                    " could not compile the "
                    "generated CUDA C (" +
                    n.nvrtcGetErrorString(r) + ", options" + opts + "):\n" +
                    ExplainLog(result.log, source) +
                    "If the arch is not supported by this NVRTC, pick another with -arch (e.g. "
                    "sm_90); otherwise this is a bug in the cuda code generator.");
  }
  size_t size = 0;
  if (cubin) {
    r = n.nvrtcGetCUBINSize(prog, &size);
    result.binary.resize(size);
    if (r == NVRTC_SUCCESS) r = n.nvrtcGetCUBIN(prog, result.binary.data());
  } else {
    r = n.nvrtcGetPTXSize(prog, &size);
    result.binary.resize(size);
    if (r == NVRTC_SUCCESS) r = n.nvrtcGetPTX(prog, result.binary.data());
    while (!result.binary.empty() && result.binary.back() == '\0') result.binary.pop_back();
  }
  n.nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    throw Error(BP_ERR_INTERNAL, std::string("target.build.cuda: reading NVRTC's output failed: ") +
                                     n.nvrtcGetErrorString(r));
  }
  if (!path.empty()) sdk::WriteCacheEntry(path, result.binary);  // best effort
  return result;
}

}  // namespace cuda
}  // namespace backplane
