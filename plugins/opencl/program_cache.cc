// SPDX-License-Identifier: Apache-2.0
#include "program_cache.h"

#include <atomic>
#include <backplane/sdk/disk_cache.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace backplane {
namespace opencl {

namespace {

// Bumped when the generated code's conventions or the entry format change.
constexpr const char* kCacheFormat = "opencl-cache-1";

std::atomic<int64_t> g_compiled{0};
std::atomic<int64_t> g_loaded{0};

std::string Info(cl_device_id id, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(id, what, 0, nullptr, &n) != CL_SUCCESS) return "";
  std::string s(n, '\0');
  if (clGetDeviceInfo(id, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
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
  // The IR's float32 `/` and sqrt are correctly rounded; OpenCL C's may be 2.5 and 3 ulp off
  // unless asked, which a device allows where CL_DEVICE_SINGLE_FP_CONFIG says so
  // (docs/opencl.md, "Float division and sqrt").
  cl_device_fp_config fp32 = 0;
  if (clGetDeviceInfo(d.id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fp32), &fp32, nullptr) ==
          CL_SUCCESS &&
      (fp32 & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0) {
    options += std::string(options.empty() ? "" : " ") + "-cl-fp32-correctly-rounded-divide-sqrt";
  }
  return options;
}

std::string ProgramCacheDir() {
  static const std::string dir = sdk::CacheFolder("opencl");
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
  const std::string entry = dir.empty() ? "" : dir + "/" + sdk::CacheKey(key_material) + ".bin";
  if (!entry.empty()) {
    std::string binary;
    if (sdk::ReadCacheEntry(entry, &binary) && !binary.empty()) {
      if (cl_program p = FromBinary(d, binary, options)) {
        ++g_loaded;
        return p;
      }
    }
  }
  // 64-bit atomics (int64, float64) are an extension: refuse them by name, not by a build log.
  if (source.find("#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable") !=
          std::string::npos &&
      (" " + Info(d.id, CL_DEVICE_EXTENSIONS) + " ").find(" cl_khr_int64_base_atomics ") ==
          std::string::npos) {
    throw Error(BP_ERR_UNSUPPORTED,
                "opencl: " + what +
                    " uses 64-bit atomics (int64 or float64 atomic_add, "
                    "atomic_min or atomic_max), which need cl_khr_int64_base_atomics; " +
                    Info(d.id, CL_DEVICE_NAME) +
                    " lacks it: accumulate in int32 or float32, or per thread and then reduce");
  }
  // float16 as OpenCL's half needs cl_khr_fp16 (a module built for a Target that claimed it,
  // loaded on a device without it): refused by name too.
  if (source.find("#pragma OPENCL EXTENSION cl_khr_fp16 : enable") != std::string::npos &&
      (" " + Info(d.id, CL_DEVICE_EXTENSIONS) + " ").find(" cl_khr_fp16 ") == std::string::npos) {
    throw Error(BP_ERR_UNSUPPORTED,
                "opencl: " + what +
                    " computes in OpenCL's half, which needs cl_khr_fp16 (its Target had "
                    "supports_float16 = true); " +
                    Info(d.id, CL_DEVICE_NAME) +
                    " lacks it: build the module for this device's own Target "
                    "(Target::FromDevice; `backplane build -t opencl:N`), where float16 is "
                    "computed in float and rounded to "
                    "half after every operation, or run it on a device with cl_khr_fp16 "
                    "(`backplane info --prop supports_fp16`)");
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
    if (!binary.empty()) sdk::WriteCacheEntry(entry, binary);  // best effort
  }
  return program;
}

}  // namespace opencl
}  // namespace backplane
