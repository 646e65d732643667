// SPDX-License-Identifier: Apache-2.0
// The reference kernels (sdk/apps/kernels/*.bpir, in the IR's text form) and a catalog of them:
// for each kernel function, how to make random inputs of a given size, a float64 reference
// of its outputs, a tolerance, and its flop and byte counts. Tests, the `backplane run` and
// `backplane demo` commands and the benchmarks use it to run a kernel on any target and
// check what it computed. It links only Backplane::ir, never libbackplane.
//
//   const Case* c = Find("matmul_tiled");
//   IRModule mod = ir::Parse(ReadKernelFile(c->file), c->file);
//   std::vector<Arg> args = c->make_args(c->small, 42);   // inputs random, outputs garbage
//   std::vector<Arg> want = args;
//   c->reference(want);                                   // outputs in float64
//   ... run c->func on `args` (float32 buffers) and copy the outputs back into args ...
//   for (size_t i = 0; i < args.size(); ++i)
//     if (args[i].is_output) assert(RelativeError(args[i], want[i]) <= c->tolerance);
//
// Kernel files. docs/ir.md describes the text form. Every function is listed once in
// Catalog(); all arrays are row-major float32 and every shape is symbolic over int32
// parameters, so one function runs at any size. A function whose name ends in `_gpu` binds
// loops to GPU thread axes (Case::needs_threads) and runs only on GPU-like targets.
//
// Variants. One GPU kernel can have several functions that compute the same thing in forms
// that suit different devices: vector_add_gpu (one element a thread) and vector_add4_gpu
// (four through float32x4 accesses, a gather on a CPU device), matmul_tiled_gpu and
// matmul_smem_gpu (shared-memory tiles). Each is a Case of its own, listed once and tested
// like any other on every backend; the first, the base, lists them all in Case::variants with
// the device property that selects each. ChooseVariant picks one for a device's properties
// (runner::ChooseVariant reads them off a device), once per device; the tools say which ran
// and take --variant NAME (or the variant's own function name) to override it.
//
// Where the files are (KernelDir()), first match wins:
//   1. $BACKPLANE_KERNEL_DIR, if set and not empty (ignored in setuid programs);
//   2. beside the libbackplane loaded in the process (found at run time through its symbol
//      bp_abi_version): <libdir>/../share/backplane/kernels in an install (the configured
//      libdir-to-datadir layout) and in the build tree, which mirrors it, so a host program
//      anywhere finds the files of the prefix it runs against, even after the prefix moved;
//   3. <exe>/../share/backplane/kernels, where <exe> is the folder of the running program
//      (/proc/self/exe), for programs that do not load libbackplane.
// Nothing of the build machine's paths is compiled in: a program that finds none of these
// gets an error from ReadKernelFile that lists where it looked and names the variable.
#ifndef BACKPLANE_KERNELS_CATALOG_HPP_
#define BACKPLANE_KERNELS_CATALOG_HPP_

#include <backplane/ir/ir.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace backplane {
namespace kernels {

// One argument of a kernel on the host, in the order of the PrimFunc's params. Buffer
// elements are held as double whatever the dtype; make_args rounds them to the dtype (a
// float32 input holds float32 values exactly), so a reference computed from them sees the
// values the kernel sees.
struct Arg {
  std::string name;            // the PrimFunc param name
  bool is_buffer = false;      // a buffer (shape, data) or a scalar (scalar)
  ir::DType dtype;             // the scalar's dtype or the buffer's element dtype
  double scalar = 0;           // scalars
  std::vector<int64_t> shape;  // buffers
  std::vector<double> data;    // buffers, row-major
  bool is_output = false;      // written by the kernel; compared with the reference
};

// Values of a kernel's int32 scalar params by name, e.g. {"m", 64}, {"n", 48}, {"k", 33}:
// the sizes, and for conv2d also `pad`.
using Dims = std::map<std::string, int64_t>;

// What a variant's choice looks at: properties of the device it will run on (the device
// attributes, BP_ATTR_*, read by runner::DeviceTraitsOf).
struct DeviceTraits {
  std::string type;  // the device type name: "cuda", "opencl", "vulkan", "cpu", ...
  std::string kind;  // BP_ATTR_DEVICE_KIND: "cpu", "gpu", "accelerator", "other"; "" unknown
  int64_t warp = 0;  // BP_ATTR_WARP_SIZE; 0 where the device reports none
};

// One variant of a GPU kernel (see "Variants" above).
struct Variant {
  std::string name;  // short, for --variant: "base", "vec4", "smem"
  std::string func;  // its function (a Case of the catalog), e.g. "vector_add4_gpu"
  std::string when;  // the property that selects it, in words: "device type cuda"
  // Whether a device with these traits takes it. The base variant's is empty: it is taken
  // where no other variant's is true.
  std::function<bool(const DeviceTraits&)> selects;
};

// The threads a block make_args gives a Case::block_param that its dims leave out.
constexpr int64_t kDefaultBlock = 32;

// One kernel function and what is needed to run and check it.
struct Case {
  std::string file;            // the kernel file in KernelDir(), e.g. "matmul.bpir"
  std::string func;            // the PrimFunc in that file, e.g. "matmul_tiled"
  bool needs_threads = false;  // binds loops to thread axes: only for GPU-like targets
  // A GPU kernel whose threads a block are a parameter names it here ("threads" for
  // softmax_gpu; empty for the others): one kernel text then suits every device, its caller
  // sizing the block to the device's warp or SIMD width (BP_ATTR_WARP_SIZE: 32 on NVIDIA, 8
  // on lavapipe and PoCL here), as runner::RunCase does when `dims` lack it. small and demo
  // leave it out; make_args then takes kDefaultBlock.
  std::string block_param;
  // Warps a block on a device whose warp is a GPU's (BP_ATTR_WARP_SIZE of 32 or more): the
  // block is block_warps warps there, one warp where the warp is a CPU's SIMD width (8 or 16:
  // PoCL, lavapipe), whose extra lanes a block run one after another. matmul_tiled_gpu takes 4:
  // on an H200 under CUDA, blocks of 128 threads ran 1.28 times as fast as blocks of 32
  // (docs/performance.md); on PoCL blocks of 32 ran at 0.75 of blocks of 8.
  int64_t block_warps = 1;
  // A GPU kernel whose number of blocks is a parameter names it here ("blocks" for sum_gpu,
  // a grid-wide reduction; empty for the others). runner::RunCase gives it, when `dims` lack
  // it, 8 blocks a multiprocessor on a GPU (BP_ATTR_WARP_SIZE of 32 or more; 1056 on an H200,
  // 1024 when the count is unknown) and one a compute unit on a CPU device (PoCL: its cores;
  // 64 where the device reports none, as lavapipe), where a block is a workgroup that one core
  // runs and more of them cost more than they gain (docs/performance.md, "sum_gpu, grid-wide").
  // small gives a few blocks; demo 1024.
  std::string grid_param;
  // On the base function of a kernel with variants: every variant, the base first (named
  // "base", selecting nothing), then the others, the first whose `selects` is true chosen.
  // Empty on the other functions; `base` names the base function on a variant ("" elsewhere).
  std::vector<Variant> variants;
  std::string base;
  Dims small;  // odd sizes for tests, exercising every path of the kernel
  Dims demo;   // a size that runs ~5-50 ms on one CPU core with a decent kernel
  // The arguments for sizes `dims` (a param missing from `dims` takes its value from
  // `demo`) from a std::mt19937_64 seeded with `seed`: the same dims and seed give the same
  // values. Inputs are random and never zero; outputs are prefilled with random values (no
  // NaN) so that a kernel that writes nothing fails. Other scalars: saxpy's alpha is random
  // in [0.5, 2] or [-2, -0.5]. Per kernel: sum's input is in [0.25, 1] (a sum of positive
  // values has no cancellation, so the relative error measures the kernel); softmax's input
  // is 90 + [-4, 4] (exp overflows float32 unless the kernel subtracts the row max); every
  // other input is in [-1, 1].
  std::function<std::vector<Arg>(const Dims& dims, uint64_t seed)> make_args;
  // Computes the outputs in float64 from the inputs, in place in `args` (as make_args made
  // them; only the outputs change).
  std::function<void(std::vector<Arg>& args)> reference;
  double tolerance = 0;  // bound on RelativeError of each output, for float32 kernels
  // Floating-point operations of one run (0 for a memory-bound kernel, whose figure of merit
  // is bytes per second).
  std::function<double(const std::vector<Arg>&)> flops;
  // Bytes one run must move at least: each input read once plus each output written once.
  std::function<double(const std::vector<Arg>&)> bytes;
};

// Every kernel function of every kernel file, each exactly once, grouped by file. The
// catalog lives for the whole program.
const std::vector<Case>& Catalog();

// The case of the kernel function `func`, or nullptr if there is none. The pointer stays
// valid for the whole program.
const Case* Find(const std::string& func);

// The variant of `c` that a device with `traits` takes: c itself where c has no variants
// (and for a variant's own function: naming it chooses it), else the first of c.variants
// after the base whose `selects` is true, else the base. Never null.
const Case* ChooseVariant(const Case& c, const DeviceTraits& traits);

// The variant of `c` named `name` (a Variant::name such as "vec4", or its function name), or
// nullptr if c has none of that name. On a variant's own function it looks among its base's
// variants. Without variants only "base" or c's own name match (c itself).
const Case* FindVariant(const Case& c, const std::string& name);

// "base, vec4" (the variant names of c, or "base" without variants), for messages.
std::string VariantNames(const Case& c);

// The variant name of `c`: its Variant::name in its base's list, "base" for a function
// without variants.
std::string VariantName(const Case& c);

// max |got - ref| / max(max |ref|, 1e-30) over the elements of two buffers. An element equal
// in both (including the same infinity) counts 0, and one that is NaN in both is skipped.
// Infinity if the shapes or data sizes differ, or got has a NaN or an infinity where ref has
// none. Scalars compare their `scalar` values the same way.
double RelativeError(const Arg& got, const Arg& ref);

// The folder holding the kernel files (see the top of this header for the search order),
// without a trailing slash. Never fails: when no candidate folder exists it returns the first
// one looked at, and ReadKernelFile fails naming them all.
std::string KernelDir();

// The text of the kernel file `file` (a name such as "matmul.bpir") in KernelDir(). Throws
// std::runtime_error naming the path if it cannot be read.
std::string ReadKernelFile(const std::string& file);

}  // namespace kernels
}  // namespace backplane

#endif  // BACKPLANE_KERNELS_CATALOG_HPP_
