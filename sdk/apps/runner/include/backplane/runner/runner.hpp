// SPDX-License-Identifier: Apache-2.0
// Runs catalog kernels (backplane/kernels/catalog.hpp) on a device: uploads random inputs,
// calls a module's function, times it, downloads the outputs and checks them against the
// float64 reference. Shared by the tests, `backplane run`, `backplane demo` and benchmarks.
#ifndef BACKPLANE_RUNNER_RUNNER_HPP_
#define BACKPLANE_RUNNER_RUNNER_HPP_

#include <backplane/backplane.hpp>
#include <backplane/kernels/catalog.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace runner {

// The arguments of a call on a device: one tensor per buffer, values for the call.
class DeviceArgs {
 public:
  // Copies `args` to tensors on `dev` (elements converted from double to each dtype).
  DeviceArgs(const std::vector<kernels::Arg>& args, Device dev);
  const std::vector<bp_value_t>& values() const { return values_; }
  // Copies each output tensor back into `args`.
  void Download(std::vector<kernels::Arg>* args) const;

 private:
  std::vector<Tensor> tensors_;  // per arg; empty for scalars
  std::vector<bp_value_t> values_;
};

struct Result {
  bool ok = false;            // ran and every output is within the tolerance
  std::string error;          // why not, when !ok
  double max_error = 0;       // the largest RelativeError over the outputs
  double seconds = 0;         // the median time of one call (call + device sync)
  std::vector<double> times;  // each timed call's time, in the order they ran
  // The first call (function lookup, call, device sync), which is checked: it includes what a
  // driver compiles at first launch (OpenCL's and Vulkan's JIT), which `seconds` leaves out.
  double first_call_seconds = 0;
  double gflops = 0;        // from Case::flops, 0 if memory-bound
  double gbytes_per_s = 0;  // from Case::bytes
};

// `dims` with the case's Case::block_param, where `dims` lack it, set to the device's warp
// (SIMD) width, BP_ATTR_WARP_SIZE (kernels::kDefaultBlock where the device reports none), times
// Case::block_warps where that warp is 32 lanes or more, at most BP_ATTR_MAX_THREADS_PER_BLOCK;
// and its Case::grid_param, where `dims` lack it, set to 8 blocks a multiprocessor
// (BP_ATTR_MULTI_PROCESSOR_COUNT; 1024 where the device reports none) on a device whose warp is
// 32 lanes or more, else one a compute unit (64 where the device reports none).
kernels::Dims DimsForDevice(const kernels::Case& c, Device dev, kernels::Dims dims);

// The properties of `dev` that choose a kernel's variant (kernels::DeviceTraits): its device
// type name, BP_ATTR_DEVICE_KIND and BP_ATTR_WARP_SIZE (each empty or 0 where the device
// reports none).
kernels::DeviceTraits DeviceTraitsOf(Device dev);

// The variant of `c` for `dev`: kernels::ChooseVariant(c, DeviceTraitsOf(dev)). `c` itself
// for a function without variants or a variant's own function. Never null.
const kernels::Case* ChooseVariant(const kernels::Case& c, Device dev);

// Runs `c` from module `m` on `dev` with DimsForDevice(c, dev, dims) (missing ones from
// c.demo): one checked
// call, then `repeats` timed calls (at least one). Errors of the call become !ok with the
// message; nothing throws for a failing kernel.
Result RunCase(const kernels::Case& c, const Module& m, Device dev, const kernels::Dims& dims,
               int repeats, uint64_t seed = 1);

// The IR text of a module holding only the case's function, from its kernel file (the files
// hold CPU and GPU variants side by side; a CPU Target refuses the GPU ones).
std::string KernelSource(const kernels::Case& c);

// "1.23 ms", "456 us".
std::string FormatSeconds(double s);

}  // namespace runner
}  // namespace backplane

#endif  // BACKPLANE_RUNNER_RUNNER_HPP_
