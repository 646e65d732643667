// SPDX-License-Identifier: Apache-2.0
#include "driver.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace cuda {

namespace {

std::string NameOf(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName != nullptr && d.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.cuGetErrorString != nullptr && d.cuGetErrorString(r, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string s = name != nullptr ? name : "CUresult";
  s += " (" + std::to_string(static_cast<int>(r)) + ")";
  if (text != nullptr) s += ": " + std::string(text);
  return s;
}

#define BACKPLANE_CUDA_STR(x) #x
#define BACKPLANE_CUDA_XSTR(x) BACKPLANE_CUDA_STR(x)

Driver* Load() {
  auto* d = new Driver();  // lives until the process ends
  const char* env = secure_getenv("BACKPLANE_CUDA_DRIVER_LIBRARY");
  d->library = env != nullptr && env[0] != '\0' ? env : "libcuda.so.1";
  void* lib = dlopen(d->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    d->reason = "the CUDA driver library " + d->library + " could not be loaded (" +
                (err != nullptr ? err : "no message") +
                "); install the NVIDIA driver (it provides libcuda.so.1) on a machine with an "
                "NVIDIA GPU";
    return d;
  }
  std::string missing;
  // cuda.h maps each name to its current versioned symbol; the string is that symbol.
#define BACKPLANE_CUDA_RESOLVE(name)                                                    \
  d->name = reinterpret_cast<decltype(d->name)>(dlsym(lib, BACKPLANE_CUDA_XSTR(name))); \
  if (d->name == nullptr)                                                               \
    missing += std::string(missing.empty() ? "" : ", ") + BACKPLANE_CUDA_XSTR(name);
  BACKPLANE_CUDA_DRIVER_SYMBOLS(BACKPLANE_CUDA_RESOLVE)
#undef BACKPLANE_CUDA_RESOLVE
  if (!missing.empty()) {
    d->reason = "the CUDA driver " + d->library + " lacks " + missing +
                "; it is older than the CUDA API this plugin was built for (" +
                std::to_string(CUDA_VERSION) + "): update the NVIDIA driver";
    return d;
  }
  for (const char* name : {BACKPLANE_CUDA_XSTR(cuEventElapsedTime), "cuEventElapsedTime"}) {
    d->cuEventElapsedTime = reinterpret_cast<decltype(d->cuEventElapsedTime)>(dlsym(lib, name));
    if (d->cuEventElapsedTime != nullptr) break;
  }
  int version = 0;
  if (d->cuDriverGetVersion(&version) == CUDA_SUCCESS) d->version = version;
  const CUresult r = d->cuInit(0);
  if (r != CUDA_SUCCESS) {
    // Not ResultName: Driver::Get() is still initializing this table.
    d->reason =
        "cuInit failed: " + NameOf(*d, r) +
        (r == CUDA_ERROR_STUB_LIBRARY ? " (" + d->library + " is the toolkit's stub, not a driver)"
                                      : std::string()) +
        "; check that an NVIDIA GPU and its driver are installed (nvidia-smi) and that "
        "CUDA_VISIBLE_DEVICES does not hide every device";
    return d;
  }
  d->ok = true;
  return d;
}

}  // namespace

const Driver& Driver::Get() {
  static const Driver* driver = Load();
  return *driver;
}

std::string ResultName(CUresult r) { return NameOf(Driver::Get(), r); }

void Fail(CUresult r, const std::string& what) {
  const bp_status_t kind = r == CUDA_ERROR_OUT_OF_MEMORY ? BP_ERR_OUT_OF_MEMORY : BP_ERR_DEVICE;
  throw Error(kind, what + " failed: " + ResultName(r) +
                        (kind == BP_ERR_OUT_OF_MEMORY
                             ? "; free memory or allocate less (backplane info shows the "
                               "device's available memory)"
                             : "; check the arguments and the device (nvidia-smi)"));
}

int MaxPtxIsa(int driver_version) {
  // PTX ISA 7.x came with CUDA 11.x and 8.0-8.5 with CUDA 12.0-12.5; CUDA 12.6 kept 8.5, and
  // 12.8 and 12.9 brought 8.7 and 8.8; CUDA 13.x brings 9.x (the PTX ISA document's release
  // history).
  const int major = driver_version / 1000, minor = driver_version % 1000 / 10;
  if (major >= 13) return 90 + minor;
  if (major == 12) return minor <= 5 ? 80 + minor : 80 + std::min(minor - 1, 9);
  if (major == 11) return 70 + minor;
  return 60;
}

std::string DriverBranchForPtxIsa(int isa) {
  // The minimum driver of each CUDA release (the CUDA Toolkit release notes, table 3).
  struct Row {
    int isa;
    const char* branch;
  };
  static const Row kRows[] = {{90, "r580"}, {88, "r575"}, {87, "r570"}, {85, "r555"}, {84, "r550"},
                              {83, "r545"}, {82, "r535"}, {81, "r530"}, {80, "r525"}, {78, "r520"}};
  for (const Row& row : kRows) {
    if (isa >= row.isa) return row.branch;
  }
  return "r450";
}

const Driver& RequireDriver(const std::string& what) {
  const Driver& d = Driver::Get();
  if (!d.ok) throw Error(BP_ERR_NOT_FOUND, what + ": no CUDA device is usable: " + d.reason);
  return d;
}

}  // namespace cuda
}  // namespace backplane
