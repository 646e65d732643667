// SPDX-License-Identifier: Apache-2.0
// NVRTC, loaded at run time: one table of its symbols, and CUDA C -> PTX with a disk cache.
//
// NVRTC is looked for, first match wins, in $BACKPLANE_NVRTC_LIBRARY, the toolkit found when
// the plugin was built (<toolkit>/lib64/libnvrtc.so.<major>), then the loader's search path
// (libnvrtc.so.<major>, libnvrtc.so). The plugin loads without it; building then fails with
// BP_ERR_NOT_FOUND naming what to install.
#ifndef BACKPLANE_PLUGINS_CUDA_NVRTC_H_
#define BACKPLANE_PLUGINS_CUDA_NVRTC_H_

#include <nvrtc.h>

#include <string>
#include <vector>

namespace backplane {
namespace cuda {

#define BACKPLANE_NVRTC_SYMBOLS(X) \
  X(nvrtcVersion)                  \
  X(nvrtcGetErrorString)           \
  X(nvrtcCreateProgram)            \
  X(nvrtcDestroyProgram)           \
  X(nvrtcCompileProgram)           \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcGetPTXSize)               \
  X(nvrtcGetPTX)                   \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)

struct Nvrtc {
#define BACKPLANE_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  BACKPLANE_NVRTC_SYMBOLS(BACKPLANE_NVRTC_MEMBER)
#undef BACKPLANE_NVRTC_MEMBER
  bool ok = false;
  std::string library;  // the file loaded
  std::string reason;   // why not ok
  std::string version;  // "13.0"

  // Loaded on first use (thread-safe); never throws.
  static const Nvrtc& Get();
};

// What NVRTC made of one source.
struct CompileResult {
  std::string binary;  // PTX text, or a cubin
  bool cubin = false;
  std::string log;  // NVRTC's log (warnings), possibly empty
  bool from_cache = false;
};

// Compiles `source` for `arch` (sm_XX[a]): PTX for the virtual architecture compute_XX, or a
// cubin for sm_XX when `cubin` is set. Results are cached on disk under
// $XDG_CACHE_HOME/backplane/cuda (or ~/.cache/backplane/cuda), keyed by the source, the
// options and NVRTC's version. Throws BP_ERR_NOT_FOUND when NVRTC is missing,
// BP_ERR_INVALID_ARGUMENT with NVRTC's log and the lines it points at when the source does
// not compile.
CompileResult CompileCuda(const std::string& source, const std::string& arch, bool cubin,
                          const std::vector<std::string>& extra_options);

// The folder of the NVRTC cache (created on first use).
std::string CacheDir();

}  // namespace cuda
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CUDA_NVRTC_H_
