// SPDX-License-Identifier: Apache-2.0
// A fresh process for vulkan_spirv_cache_test: builds one catalog kernel for the `vulkan`
// target (the SPIR-V cache folder is whatever XDG_CACHE_HOME says), runs it on vulkan:0 on
// random inputs from `seed` against the float64 reference when that device exists, and
// prints what the test checks, one fact a line:
//   stats compiled=N memory=M disk=K     (vulkan.spirv_cache_stats after the build)
//   spirv <32 hex digits> <bytes>        (a hash of the kernel's SPIR-V)
//   run ok | run failed: <why> | run skipped: <why>
//   validation <errors>                  (-1 when the validation layer is missing)
//   pipeline loaded=... writes=...       (vulkan.pipeline_cache_stats after the run)
//   first_call_us <F> again_us <A>       (the first call and a second one, with the stream
//                                         synced: the first makes the pipeline; never compared)
// Usage: vulkan_spirv_cache_child <kernel> <seed>. Exit status 0 when the build succeeded.
#include <backplane/runner/runner.hpp>
#include <backplane/sdk/disk_cache.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

// The kernel's SPIR-V words from a saved vulkan module ("spirv <length>\n<bytes>\n").
std::string SpirvOf(const std::string& saved) {
  const size_t at = saved.find("\nspirv ");
  if (at == std::string::npos) return "";
  const size_t nl = saved.find('\n', at + 1);
  const size_t len = std::stoull(saved.substr(at + 7, nl - at - 7));
  return saved.substr(nl + 1, len);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <kernel> <seed>\n", argv[0]);
    return 2;
  }
  try {
    const backplane::kernels::Case* c = backplane::kernels::Find(argv[1]);
    if (c == nullptr) {
      std::fprintf(stderr, "no kernel %s in the catalog\n", argv[1]);
      return 2;
    }
    backplane::Module m =
        backplane::Build(backplane::runner::KernelSource(*c), backplane::Target::Parse("vulkan"));
    std::printf("stats %s\n",
                backplane::Function::Get("vulkan.spirv_cache_stats")().AsString().c_str());
    const std::string spirv = SpirvOf(m.Imports().at(0).SaveToBytes());
    std::printf("spirv %s %zu\n", backplane::sdk::CacheKey(spirv).c_str(), spirv.size());
    const backplane::Device dev(DLDevice{kDLVulkan, 0});
    if (!backplane::DeviceAPI::Get(dev).Exists()) {
      std::printf("run skipped: no Vulkan device\n");
    } else {
      {  // the VkDevice is made here, outside the first call
        backplane::Tensor::Empty({1}, DLDataType{kDLFloat, 32, 1}, dev);
      }
      const backplane::runner::Result r =
          backplane::runner::RunCase(*c, m, dev, c->small, 1, std::strtoull(argv[2], nullptr, 10));
      std::printf("first_call_us %.0f again_us %.0f\n", r.first_call_seconds * 1e6,
                  r.seconds * 1e6);
      std::printf("pipeline %s\n",
                  backplane::Function::Get("vulkan.pipeline_cache_stats")().AsString().c_str());
      if (r.ok) {
        std::printf("run ok\n");
      } else {
        std::printf("run failed: %s\n", r.error.c_str());
      }
      std::printf(
          "validation %lld\n",
          static_cast<long long>(backplane::Function::Get("vulkan.validation_errors")().AsInt()));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
