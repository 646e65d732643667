// SPDX-License-Identifier: Apache-2.0
// The catalog: one Case per kernel function of sdk/apps/kernels/*.bpir.
#include <backplane/kernels/catalog.hpp>
#include <cmath>
#include <random>
#include <stdexcept>
#include <utility>

#include "reference.h"

namespace backplane {
namespace kernels {
namespace {

// Uniform in [lo, hi), the same on every platform (std::uniform_real_distribution is not).
double Uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// A value of `dtype` drawn from [lo, hi), never zero, held exactly as the kernel will see it.
double Draw(std::mt19937_64& rng, ir::DType dtype, double lo, double hi) {
  for (;;) {
    double v = Uniform(rng, lo, hi);
    if (dtype.is_float() && dtype.bits == 32) v = static_cast<float>(v);
    if (v != 0) return v;
  }
}

// What one param of a kernel is: a size (int32 from the dims), a random float32 scalar, or a
// float32 buffer with its shape (names of dims), its range and whether the kernel writes it.
struct ParamSpec {
  enum Kind { kDim, kFloatScalar, kInput, kOutput, kInOut } kind;
  std::string name;
  std::vector<std::string> shape;  // buffers: one dim name per axis ("1" for a length 1 axis)
  double lo = -1, hi = 1;          // inputs, in-outs and float scalars
};

ParamSpec Dim(std::string name) { return {ParamSpec::kDim, std::move(name), {}}; }
ParamSpec In(std::string name, std::vector<std::string> shape, double lo = -1, double hi = 1) {
  return {ParamSpec::kInput, std::move(name), std::move(shape), lo, hi};
}
ParamSpec Out(std::string name, std::vector<std::string> shape) {
  return {ParamSpec::kOutput, std::move(name), std::move(shape)};
}
ParamSpec InOut(std::string name, std::vector<std::string> shape) {
  return {ParamSpec::kInOut, std::move(name), std::move(shape)};
}

int64_t DimValue(const std::string& name, const Dims& dims, const Dims& demo) {
  if (name == "1") return 1;
  auto it = dims.find(name);
  if (it != dims.end()) return it->second;
  it = demo.find(name);
  if (it != demo.end()) return it->second;
  throw std::logic_error("kernel catalog: no value for the size '" + name + "'");
}

std::function<std::vector<Arg>(const Dims&, uint64_t)> MakeArgs(std::vector<ParamSpec> specs,
                                                                Dims demo) {
  return [specs = std::move(specs), demo = std::move(demo)](const Dims& dims, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Arg> args;
    for (const ParamSpec& p : specs) {
      Arg a;
      a.name = p.name;
      switch (p.kind) {
        case ParamSpec::kDim:
          a.dtype = ir::Int32();
          a.scalar = static_cast<double>(DimValue(p.name, dims, demo));
          break;
        case ParamSpec::kFloatScalar:
          // A magnitude in [0.5, 2) with a random sign.
          a.dtype = ir::Float32();
          a.scalar = Draw(rng, a.dtype, p.lo, p.hi) * (rng() & 1 ? -1 : 1);
          break;
        default: {
          a.is_buffer = true;
          a.dtype = ir::Float32();
          a.is_output = p.kind != ParamSpec::kInput;
          size_t count = 1;
          for (const std::string& d : p.shape) {
            int64_t v = DimValue(d, dims, demo);
            if (v < 0) throw std::invalid_argument("kernel catalog: negative size '" + d + "'");
            a.shape.push_back(v);
            count *= static_cast<size_t>(v);
          }
          a.data.resize(count);
          // Outputs start as garbage in [-1, 1), so a kernel that writes nothing fails.
          for (double& v : a.data) v = Draw(rng, a.dtype, p.lo, p.hi);
          break;
        }
      }
      args.push_back(std::move(a));
    }
    return args;
  };
}

// Bytes of the named buffers (a name twice: read and written).
std::function<double(const std::vector<Arg>&)> Bytes(std::vector<std::string> names) {
  return [names = std::move(names)](const std::vector<Arg>& args) {
    double total = 0;
    for (const std::string& n : names) {
      const Arg& a = detail::Named(args, n);
      total += static_cast<double>(a.data.size()) * (a.dtype.bits / 8);
    }
    return total;
  };
}

double MemoryBound(const std::vector<Arg>&) { return 0; }

std::vector<Case> MakeCatalog() {
  std::vector<Case> cases;
  // Adds the CPU kernel `func` and its GPU twin `func_gpu` (same params, dims and reference).
  auto add = [&](const std::string& file, const std::string& func, bool gpu,
                 std::vector<ParamSpec> specs, Dims small, Dims demo,
                 std::function<void(std::vector<Arg>&)> ref, double tol,
                 std::function<double(const std::vector<Arg>&)> flops,
                 std::function<double(const std::vector<Arg>&)> bytes) {
    Case c;
    c.file = file;
    c.func = func;
    c.needs_threads = gpu;
    c.small = std::move(small);
    c.demo = demo;
    // A block size param (Case::block_param) that neither dims nor demo give takes
    // kDefaultBlock.
    demo.emplace("threads", kDefaultBlock);
    c.make_args = MakeArgs(std::move(specs), std::move(demo));
    c.reference = std::move(ref);
    c.tolerance = tol;
    c.flops = std::move(flops);
    c.bytes = std::move(bytes);
    cases.push_back(std::move(c));
  };
  auto both = [&](const std::string& file, const std::string& func, std::vector<ParamSpec> specs,
                  Dims small, Dims demo, std::function<void(std::vector<Arg>&)> ref, double tol,
                  std::function<double(const std::vector<Arg>&)> flops,
                  std::function<double(const std::vector<Arg>&)> bytes) {
    add(file, func, false, specs, small, demo, ref, tol, flops, bytes);
    add(file, func + "_gpu", true, specs, small, demo, ref, tol, flops, bytes);
  };

  // Elementwise: 2093 = two full chunks of 1024 and a tail of 45 (CPU), 9 blocks (GPU).
  both("vector_add.bpir", "vector_add", {Dim("n"), In("a", {"n"}), In("b", {"n"}), Out("c", {"n"})},
       {{"n", 2093}}, {{"n", 1 << 22}}, detail::VectorAdd, 1e-6, MemoryBound,
       Bytes({"a", "b", "c"}));
  // 2093 = two full blocks of 1024 and a last block of 45: 11 vectors and a tail of 1.
  add("vector_add.bpir", "vector_add4_gpu", true,
      {Dim("n"), In("a", {"n"}), In("b", {"n"}), Out("c", {"n"})}, {{"n", 2093}}, {{"n", 1 << 22}},
      detail::VectorAdd, 1e-6, MemoryBound, Bytes({"a", "b", "c"}));
  both("saxpy.bpir", "saxpy",
       {Dim("n"), ParamSpec{ParamSpec::kFloatScalar, "alpha", {}, 0.5, 2.0}, In("x", {"n"}),
        InOut("y", {"n"})},
       {{"n", 2093}}, {{"n", 1 << 22}}, detail::Saxpy, 1e-6, MemoryBound, Bytes({"x", "y", "y"}));
  // 4099: chunks of 80 (CPU), a last chunk of one vector and a tail of 3, empty chunks after.
  // The tolerance covers float32 partial sums of 16M elements (the GPU kernel: ~5e-7).
  add("sum.bpir", "sum", false, {Dim("n"), In("x", {"n"}, 0.25, 1.0), Out("out", {"1"})},
      {{"n", 4099}}, {{"n", 1 << 24}}, detail::Sum, 1e-5, MemoryBound, Bytes({"x", "out"}));
  // The GPU kernel's grid: `blocks` blocks (Case::grid_param: runner::RunCase sizes it to the
  // device; the tests take 3, so the interpreter simulates few blocks with barriers), each
  // summing a strided slice into a device workspace, and one block summing those.
  add("sum.bpir", "sum_gpu", true,
      {Dim("n"), Dim("blocks"), In("x", {"n"}, 0.25, 1.0), Out("out", {"1"})},
      {{"n", 4099}, {"blocks", 3}}, {{"n", 1 << 24}, {"blocks", 1024}}, detail::Sum, 1e-5,
      MemoryBound, Bytes({"x", "out"}));
  cases.back().grid_param = "blocks";
  // 9693 with 3 blocks: chunks of 4096, two whole passes in the first two blocks, and a last
  // chunk of 1501 where threads take the vector path, both halves one by one, the first half
  // only, or nothing.
  add("sum.bpir", "sum4_gpu", true,
      {Dim("n"), Dim("blocks"), In("x", {"n"}, 0.25, 1.0), Out("out", {"1"})},
      {{"n", 9693}, {"blocks", 3}}, {{"n", 1 << 24}, {"blocks", 1024}}, detail::Sum, 1e-5,
      MemoryBound, Bytes({"x", "out"}));
  cases.back().grid_param = "blocks";
  // 301 columns: 16 vectors of 16 and a tail of 13 (CPU); with 32 threads a row (GPU), 9
  // full strides and a partial one, so some threads see only -inf and 0 partials.
  add("softmax.bpir", "softmax", false,
      {Dim("rows"), Dim("cols"), In("x", {"rows", "cols"}, 86.0, 94.0), Out("y", {"rows", "cols"})},
      {{"rows", 7}, {"cols", 301}}, {{"rows", 2048}, {"cols", 1024}}, detail::Softmax, 1e-4,
      MemoryBound, Bytes({"x", "y"}));
  // The GPU softmaxes: softmax_gpu and its variant for lavapipe, softmax_rows_gpu, whose cols
  // is a multiple of 4 (300) so that its float32x4 passes run; 7 rows, a block of 8 with one
  // invocation idle at lavapipe's 8 threads, less than one block at 32.
  for (const auto& [func, cols] : {std::pair<const char*, int64_t>{"softmax_gpu", 301},
                                   std::pair<const char*, int64_t>{"softmax_rows_gpu", 300}}) {
    add("softmax.bpir", func, true,
        {Dim("rows"), Dim("cols"), Dim("threads"), In("x", {"rows", "cols"}, 86.0, 94.0),
         Out("y", {"rows", "cols"})},
        {{"rows", 7}, {"cols", cols}}, {{"rows", 2048}, {"cols", 1024}}, detail::Softmax, 1e-4,
        MemoryBound, Bytes({"x", "y"}));
    cases.back().block_param = "threads";
  }

  // Matmul: 11 x 71 x 131 has partial 16 x 16 blocks everywhere (GPU). The CPU tiled kernel
  // gets 11 x 71 x 1027: a full 8 x 32 tile, 3 edge rows and a last sliver of 7 columns, a full
  // k step of 1024 and a partial one (so c carries partial sums between them).
  const std::vector<ParamSpec> mm = {
      Dim("m"), Dim("n"), Dim("k"), In("a", {"m", "k"}), In("b", {"k", "n"}), Out("c", {"m", "n"})};
  const Dims mm_small = {{"m", 11}, {"n", 71}, {"k", 131}};
  const Dims mm_tiled_small = {{"m", 11}, {"n", 71}, {"k", 1027}};
  auto mm_flops = [](const std::vector<Arg>& a) {
    return 2.0 * detail::Scalar(a, "m") * detail::Scalar(a, "n") * detail::Scalar(a, "k");
  };
  const Dims mm_demo = {{"m", 256}, {"n", 256}, {"k", 256}};
  const Dims mm_tiled_demo = {{"m", 512}, {"n", 512}, {"k", 512}};
  add("matmul.bpir", "matmul", false, mm, mm_small, mm_demo, detail::Matmul, 1e-4, mm_flops,
      Bytes({"a", "b", "c"}));
  add("matmul.bpir", "matmul_tiled", false, mm, mm_tiled_small, mm_tiled_demo, detail::Matmul, 1e-4,
      mm_flops, Bytes({"a", "b", "c"}));
  add("matmul.bpir", "matmul_gpu", true, mm, mm_small, mm_demo, detail::Matmul, 1e-4, mm_flops,
      Bytes({"a", "b", "c"}));
  // The GPU tiled kernel (blocks of 4 rows by 8 * threads columns) gets 11 x 301 x 131: whole
  // tiles and edge tiles in rows and in columns, at 8 threads a block and at 32.
  std::vector<ParamSpec> mm_threads = mm;
  mm_threads.insert(mm_threads.begin() + 3, Dim("threads"));
  add("matmul.bpir", "matmul_tiled_gpu", true, mm_threads, {{"m", 11}, {"n", 301}, {"k", 131}},
      mm_tiled_demo, detail::Matmul, 1e-4, mm_flops, Bytes({"a", "b", "c"}));
  cases.back().block_param = "threads";
  cases.back().block_warps = 4;
  // 11 x 268 x 132: n and k multiples of 4, so the float32x4 tiles run, beside a partial tile in
  // rows (11 = 2 * 4 + 3) and a last block of 12 columns (268 = 256 + 12 for blocks of 32
  // threads, 4 * 64 + 12 for 8), which run matmul_tiled_gpu's code.
  add("matmul.bpir", "matmul_tiled4_gpu", true, mm_threads, {{"m", 11}, {"n", 268}, {"k", 132}},
      mm_tiled_demo, detail::Matmul, 1e-4, mm_flops, Bytes({"a", "b", "c"}));
  cases.back().block_param = "threads";
  cases.back().block_warps = 4;
  // 11 x 71 x 131: one row of 64 x 64 tiles, the second partial in columns, a partial tile of
  // a in rows, and a last step of k of 3 (131 = 8 * 16 + 3), so every edge path runs.
  add("matmul.bpir", "matmul_smem_gpu", true, mm, mm_small, mm_tiled_demo, detail::Matmul, 1e-4,
      mm_flops, Bytes({"a", "b", "c"}));
  // 151 x 259 x 21: a whole and a partial row of 128 x 128 tiles, two whole and one partial
  // column (259 = 2 * 128 + 3: columns 256..258 one by one, threads whose columns are all
  // outside c), and a last step of k of 5 (21 = 2 * 8 + 5), half a float32x4 of a inside.
  add("matmul.bpir", "matmul_reg_gpu", true, mm, {{"m", 151}, {"n", 259}, {"k", 21}}, mm_tiled_demo,
      detail::Matmul, 1e-4, mm_flops, Bytes({"a", "b", "c"}));
  // The same tiles with a last step of k of 5 of 16 (37 = 2 * 16 + 5): a's second float32x4 a
  // row and b's second row a thread (br + 8) outside k.
  add("matmul.bpir", "matmul_reg16_gpu", true, mm, {{"m", 151}, {"n", 259}, {"k", 37}},
      mm_tiled_demo, detail::Matmul, 1e-4, mm_flops, Bytes({"a", "b", "c"}));

  // 37 x 45: full and edge blocks of 16 (CPU and GPU), not square.
  both("transpose.bpir", "transpose",
       {Dim("m"), Dim("n"), In("a", {"m", "n"}), Out("b", {"n", "m"})}, {{"m", 37}, {"n", 45}},
       {{"m", 2048}, {"n", 2048}}, detail::Transpose, 0, MemoryBound, Bytes({"a", "b"}));

  // A 3 x 5 filter with pad 1 is not centred: columns shift by -1..3, so the edges differ. (The
  // CPU kernel's chunks of 32 input channels and 64 columns need more than these sizes: the
  // interpreter, which the conformance kit runs twice a build, takes 4 times as long for
  // 33 x 65 under AddressSanitizer; tests/plugins/cpu/kernels_test.cc and
  // tests/sdk/apps/kernels/kernels_interp_test.cc run those sizes.)
  both(
      "conv2d.bpir", "conv2d",
      {Dim("batch"), Dim("c_in"), Dim("c_out"), Dim("h"), Dim("w"), Dim("kh"), Dim("kw"),
       Dim("pad"), In("x", {"batch", "c_in", "h", "w"}), In("f", {"c_out", "c_in", "kh", "kw"}),
       Out("y", {"batch", "c_out", "h", "w"})},
      {{"batch", 3},
       {"c_in", 3},
       {"c_out", 5},
       {"h", 19},
       {"w", 21},
       {"kh", 3},
       {"kw", 5},
       {"pad", 1}},
      {{"batch", 1},
       {"c_in", 64},
       {"c_out", 64},
       {"h", 56},
       {"w", 56},
       {"kh", 3},
       {"kw", 3},
       {"pad", 1}},
      detail::Conv2d, 1e-4,
      [](const std::vector<Arg>& a) {
        using detail::Scalar;
        return 2.0 * Scalar(a, "batch") * Scalar(a, "c_out") * Scalar(a, "h") * Scalar(a, "w") *
               Scalar(a, "c_in") * Scalar(a, "kh") * Scalar(a, "kw");
      },
      Bytes({"x", "f", "y"}));

  // Variants (catalog.hpp, "Variants"): the float32x4 vector_add and sum and the register-tiled
  // matmul on CUDA devices, where they move fewer instructions a byte and feed 64 fused
  // multiply-adds a thread from 16 values of shared memory
  // (tests/plugins/cuda/gpu_checks.sh measures them); on lavapipe, whose loads take one lane
  // at a time and whose barriers split a block's loop, matmul_tiled_gpu's float32x4 tiles and
  // a softmax of one row an invocation read as float32x4; the base kernels elsewhere, as the others
  // run 1.0-7x slower on PoCL and lavapipe (docs/performance.md).
  auto on_cuda = [](const DeviceTraits& t) { return t.type == "cuda"; };
  // Vulkan on a CPU (lavapipe), whose loads from a storage buffer take one lane at a time.
  auto on_vulkan_cpu = [](const DeviceTraits& t) { return t.type == "vulkan" && t.kind == "cpu"; };
  auto variants = [&](const std::string& base, std::vector<Variant> others) {
    Case* b = nullptr;
    for (Case& c : cases) b = c.func == base ? &c : b;
    if (b == nullptr) throw std::logic_error("kernel catalog: no function '" + base + "'");
    b->variants.push_back(Variant{"base", base, "every other device", nullptr});
    for (Variant& v : others) {
      for (Case& c : cases) {
        if (c.func == v.func) c.base = base;
      }
      b->variants.push_back(std::move(v));
    }
  };
  variants("vector_add_gpu", {Variant{"vec4", "vector_add4_gpu", "device type cuda", on_cuda}});
  variants("sum_gpu", {Variant{"vec4", "sum4_gpu", "device type cuda", on_cuda}});
  variants("softmax_gpu", {Variant{"rows", "softmax_rows_gpu",
                                   "device type vulkan, device kind cpu", on_vulkan_cpu}});
  // The register-tiled matmul is the one for CUDA devices; the one with steps of 16 along k and
  // the shared-memory one stay named variants (--variant reg16, --variant smem), measured beside
  // it by bench_cuda.
  variants("matmul_tiled_gpu", {Variant{"reg", "matmul_reg_gpu", "device type cuda", on_cuda},
                                Variant{"vec4", "matmul_tiled4_gpu",
                                        "device type vulkan, device kind cpu", on_vulkan_cpu},
                                Variant{"reg16", "matmul_reg16_gpu", "by name only", nullptr},
                                Variant{"smem", "matmul_smem_gpu", "by name only", nullptr}});
  return cases;
}

}  // namespace

const std::vector<Case>& Catalog() {
  static const std::vector<Case> cases = MakeCatalog();
  return cases;
}

const Case* Find(const std::string& func) {
  for (const Case& c : Catalog()) {
    if (c.func == func) return &c;
  }
  return nullptr;
}

const Case* ChooseVariant(const Case& c, const DeviceTraits& traits) {
  for (const Variant& v : c.variants) {
    if (v.selects && v.selects(traits)) {
      if (const Case* chosen = Find(v.func)) return chosen;
    }
  }
  return &c;
}

const Case* FindVariant(const Case& c, const std::string& name) {
  const Case* base = c.base.empty() ? &c : Find(c.base);
  if (base == nullptr) return nullptr;
  if (base->variants.empty()) return name == "base" || name == c.func ? &c : nullptr;
  for (const Variant& v : base->variants) {
    if (v.name == name || v.func == name) return Find(v.func);
  }
  return nullptr;
}

std::string VariantNames(const Case& c) {
  const Case* base = c.base.empty() ? &c : Find(c.base);
  if (base == nullptr || base->variants.empty()) return "base";
  std::string names;
  for (const Variant& v : base->variants) {
    names += (names.empty() ? "" : ", ") + v.name + " (" + v.func + ")";
  }
  return names;
}

std::string VariantName(const Case& c) {
  const Case* base = c.base.empty() ? &c : Find(c.base);
  if (base != nullptr) {
    for (const Variant& v : base->variants) {
      if (v.func == c.func) return v.name;
    }
  }
  return "base";
}

namespace {
// |got - ref| for one element; infinity where got is NaN/inf and ref is not; -1 to skip.
double ElementError(double got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? -1 : HUGE_VAL;
  if (got == ref) return 0;
  if (!std::isfinite(got) || !std::isfinite(ref)) return HUGE_VAL;
  return std::fabs(got - ref);
}
}  // namespace

double RelativeError(const Arg& got, const Arg& ref) {
  if (got.is_buffer != ref.is_buffer) return HUGE_VAL;
  const double* g = &got.scalar;
  const double* r = &ref.scalar;
  size_t count = 1;
  if (got.is_buffer) {
    if (got.shape != ref.shape || got.data.size() != ref.data.size()) return HUGE_VAL;
    g = got.data.data();
    r = ref.data.data();
    count = got.data.size();
  }
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < count; ++i) {
    double e = ElementError(g[i], r[i]);
    if (e > max_err) max_err = e;
    if (std::isfinite(r[i])) max_ref = std::fmax(max_ref, std::fabs(r[i]));
  }
  if (max_err == 0) return 0;
  return max_err / std::fmax(max_ref, 1e-30);
}

}  // namespace kernels
}  // namespace backplane
