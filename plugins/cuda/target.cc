// SPDX-License-Identifier: Apache-2.0
// The `cuda` TargetKind: TVM's attributes for kind cuda with its defaults; FromDevice fills
// the limits from cuDeviceGetAttribute (through device_api.cuda), and the canonicalizer
// fills `arch` from the device's compute capability, or kDefaultArch without a device.
#include "target.h"

#include <backplane/sdk/target.hpp>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "device_api.h"

namespace backplane {
namespace cuda {

namespace {

namespace sdk = ::backplane::sdk;
using Json = nlohmann::json;

std::string Canonicalize(const std::string& attrs_json, const DLDevice* device) {
  Json attrs = Json::parse(attrs_json, nullptr, /*allow_exceptions=*/false);
  if (!attrs.is_object()) {
    throw Error(BP_ERR_INTERNAL,
                "target kind 'cuda': the canonicalizer got attributes that are not a JSON "
                "object (a bug in libbackplane; please report it)");
  }
  if (!attrs.contains("arch") && device != nullptr) {
    CUDADeviceAPI* api = CUDADeviceAPI::Global();
    const Any major = api->GetProperty(*device, "compute_capability_major");
    const Any minor = api->GetProperty(*device, "compute_capability_minor");
    if (major.type() == BP_VALUE_INT && minor.type() == BP_VALUE_INT) {
      attrs["arch"] =
          ArchForComputeVersion(static_cast<int>(major.AsInt()), static_cast<int>(minor.AsInt()));
    }
  }
  if (!attrs.contains("arch")) attrs["arch"] = kDefaultArch;
  if (!attrs["arch"].is_string()) {
    sdk::ThrowTargetAttrError("arch", "must be a string such as sm_90");
  }
  VirtualArch(attrs["arch"].get<std::string>());  // checks the spelling
  for (const char* name : {"max_num_threads", "max_threads_per_block", "thread_warp_size"}) {
    if (attrs.contains(name) && attrs[name].is_number_integer() && attrs[name].get<int64_t>() < 1) {
      sdk::ThrowTargetAttrError(name, "is " + attrs[name].dump() + "; expected at least 1");
    }
  }
  return attrs.dump();
}

}  // namespace

std::string ArchForComputeVersion(int major, int minor) {
  // Never the arch-specific sm_XYa: PTX for compute_90a runs only on compute capability 9.0
  // (the PTX ISA's "architecture-specific features"), so a module saved on an H100 would not
  // load on a later GPU. Code that needs those features asks for the `a` suffix itself.
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

std::string VirtualArch(const std::string& arch) {
  size_t i = 3;
  bool ok = arch.rfind("sm_", 0) == 0 && arch.size() > 3;
  while (ok && i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) ++i;
  ok = ok && i > 3 &&
       (i == arch.size() || (i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f')));
  if (!ok) {
    sdk::ThrowTargetAttrError("arch", "is '" + arch +
                                          "'; expected sm_<compute capability>, e.g. sm_90 "
                                          "(H100), sm_89, sm_80 or sm_75, with an 'a' suffix "
                                          "(sm_90a) for arch-specific features");
  }
  return "compute_" + arch.substr(3);
}

void RegisterTargetKind() {
  sdk::TargetKindBuilder("cuda", "cuda")
      .Keys({"cuda", "gpu"})
      .Attr<std::string>("arch", sdk::kNoDefault,
                         "sm_<compute capability>, e.g. sm_90; from the device when built "
                         "from one, else sm_75. sm_90a (arch-specific features) runs only on "
                         "that exact compute capability; sm_90 runs on it and every later GPU")
      .Attr<bool>("cubin", false,
                  "build a cubin for exactly `arch` instead of PTX the driver compiles")
      .Attr<std::string>("mcpu", sdk::kNoDefault, "TVM's alias of arch (informational)")
      .Attr<int64_t>("max_num_threads", int64_t{1024}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
      .Attr<int64_t>("max_threads_per_block", int64_t{1024}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
      .Attr<int64_t>("thread_warp_size", int64_t{32}, BP_ATTR_WARP_SIZE,
                     "CU_DEVICE_ATTRIBUTE_WARP_SIZE")
      .Attr<int64_t>("max_shared_memory_per_block", int64_t{49152},
                     BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK,
                     "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK")
      .Attr<int64_t>("registers_per_block", int64_t{65536}, BP_ATTR_MAX_REGISTERS_PER_BLOCK,
                     "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK")
      .Attr<int64_t>("l2_cache_size_bytes", sdk::kNoDefault, BP_ATTR_L2_CACHE_SIZE_BYTES,
                     "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE")
      .Attr<int64_t>("multiprocessor_count", sdk::kNoDefault, BP_ATTR_MULTI_PROCESSOR_COUNT,
                     "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
      .Attr<std::string>("model", sdk::kNoDefault, BP_ATTR_DEVICE_NAME, "the GPU's name")
      .Attr<std::vector<std::string>>("libs", sdk::kNoDefault, "external libraries, e.g. cublas")
      .Attr<bool>("fast-math-contract", false,
                  "allow fusing, e.g. a*b+c into an FMA (otherwise NVRTC runs with --fmad=false "
                  "and keeps the IR's separate roundings)")
      .Attr<bool>("bounds-check", false,
                  "check every index against its extent: an access out of bounds is an error "
                  "naming the kernel, buffer, index and extent (slower)")
      .Canonicalizer(Canonicalize)
      .Register();
  // NVIDIA H100 SXM5 and H200 SXM (GH100): compute capability 9.0, 132 SMs, 50 MiB of L2.
  sdk::RegisterTag("nvidia/h100",
                   R"({"kind": "cuda", "arch": "sm_90", "model": "NVIDIA H100",)"
                   R"( "max_num_threads": 1024, "max_threads_per_block": 1024,)"
                   R"( "thread_warp_size": 32, "max_shared_memory_per_block": 49152,)"
                   R"( "registers_per_block": 65536, "l2_cache_size_bytes": 52428800,)"
                   R"( "multiprocessor_count": 132})");
  sdk::RegisterTag("nvidia/h200",
                   R"({"kind": "cuda", "arch": "sm_90", "model": "NVIDIA H200",)"
                   R"( "max_num_threads": 1024, "max_threads_per_block": 1024,)"
                   R"( "thread_warp_size": 32, "max_shared_memory_per_block": 49152,)"
                   R"( "registers_per_block": 65536, "l2_cache_size_bytes": 52428800,)"
                   R"( "multiprocessor_count": 132})");
}

}  // namespace cuda
}  // namespace backplane
