// SPDX-License-Identifier: Apache-2.0
// Catalog kernels compiled for the c target (the cpu plugin) at sizes around 2^31 (docs/ir.md,
// "Sizes of the catalog kernels"). sum runs whole on 2^31 - 1 random floats (8 GiB: skipped, saying
// why, when /proc/meminfo's MemAvailable is under 9 GiB) against a float64 sum. vector_add, saxpy
// and transpose run the last iterations of their outer loop (count and edge logic unchanged, as
// kernels_sizes_test.cc does on the interpreter) on tensors mapped without backing store, so the
// compiled tile counts, edge tests and flat indices are checked past 2^31 in a few MiB. On opencl
// (PoCL), where it is here, conv2d_gpu refuses a grid past int32.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "last_iterations.h"

namespace ir = backplane::ir;
namespace bk = backplane::kernels;
using backplane::Build;
using backplane::Device;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;
using backplane::sizes_test::Restrict;

namespace {

constexpr int64_t kTwo31 = int64_t{1} << 31;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// MemAvailable in bytes, or -1 when /proc/meminfo does not say.
int64_t MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// A float32 CPU tensor over an anonymous private mapping (pages cost memory once written),
// handed to Backplane through DLPack; the mapping goes when the tensor is freed.
struct Mapped {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

Tensor MappedTensor(const std::vector<int64_t>& shape, float** data) {
  auto* m = new Mapped;
  m->shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  m->bytes = static_cast<size_t>(n) * sizeof(float);
  void* p = mmap(nullptr, m->bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    delete m;
    throw std::runtime_error("cannot map " + std::to_string(n) + " floats");
  }
  *data = static_cast<float*>(p);
  DLTensor& t = m->managed.dl_tensor;
  t.data = p;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = m->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  m->managed.manager_ctx = m;
  m->managed.deleter = [](DLManagedTensor* self) {
    auto* owner = static_cast<Mapped*>(self->manager_ctx);
    munmap(owner->managed.dl_tensor.data, owner->bytes);
    delete owner;
  };
  return Tensor::FromDLPack(&m->managed);
}

// Function `func` of catalog file `file`, with the loops of `last` restricted, built for c.
Module BuildRestricted(const std::string& file, const std::string& func,
                       const std::map<std::string, int>& last) {
  const ir::IRModule all = ir::Parse(bk::ReadKernelFile(file), file);
  const ir::PrimFunc* f = all.Find(func);
  if (f == nullptr) throw std::runtime_error("no function " + func + " in " + file);
  ir::IRModule one;
  one.Add(ir::PrimFunc(f->name, f->params, Restrict(f->body, last), f->attrs));
  return Build(ir::Print(one), Target::Parse("c"));
}

void Fill(float* x, int64_t from, int64_t to, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = from; i < to; ++i) x[i] = u(rng);
}

TEST(SizesOnCpu, ElementwiseKernelsWriteTheirLastChunksNear2To31) {
  const Module va = BuildRestricted("vector_add.bpir", "vector_add", {{"o", 3}});
  const Module sx = BuildRestricted("saxpy.bpir", "saxpy", {{"o", 3}});
  for (const int64_t n : {kTwo31 - 1, kTwo31 - 1023, kTwo31 - 1024, kTwo31 - 1025}) {
    const int64_t from = n - 2048;  // within the last 3 chunks of 1024
    float *a = nullptr, *b = nullptr, *c = nullptr;
    Tensor ta = MappedTensor({n}, &a), tb = MappedTensor({n}, &b), tc = MappedTensor({n}, &c);
    Fill(a, from, n, 1);
    Fill(b, from, n, 2);
    for (int64_t i = from; i < n; ++i) c[i] = kNaN;
    va.GetFunction("vector_add")(n, ta.dl(), tb.dl(), tc.dl());
    int64_t right = 0;
    for (int64_t i = from; i < n; ++i) right += c[i] == a[i] + b[i];
    EXPECT_EQ(right, 2048) << "vector_add, n = " << n;
    const float alpha = -1.25f;
    const std::vector<float> y(b + from, b + n);
    sx.GetFunction("saxpy")(n, alpha, ta.dl(), tb.dl());
    right = 0;
    for (int64_t i = from; i < n; ++i)
      right += b[i] == alpha * a[i] + y[static_cast<size_t>(i - from)];
    EXPECT_EQ(right, 2048) << "saxpy, n = " << n;
  }
}

// transpose of 16 x (2^27 + 1) (2^31 + 16 elements): the compiled flat indices past 2^31.
TEST(SizesOnCpu, TransposePastTwoTo31Elements) {
  const int64_t m = 16, n = (int64_t{1} << 27) + 1;
  const Module t = BuildRestricted("transpose.bpir", "transpose", {{"ib", 2}});
  float *a = nullptr, *b = nullptr;
  Tensor ta = MappedTensor({m, n}, &a), tb = MappedTensor({n, m}, &b);
  const int64_t first = (n - 1) / 16 * 16 - 16;
  for (int64_t j = 0; j < m; ++j) Fill(a, j * n + first, j * n + n, 3 + static_cast<uint64_t>(j));
  for (int64_t i = first * m; i < n * m; ++i) b[i] = kNaN;
  t.GetFunction("transpose")(m, n, ta.dl(), tb.dl());
  int64_t wrong = 0;
  for (int64_t i = first; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) wrong += b[i * m + j] != a[j * n + i];
  }
  EXPECT_EQ(wrong, 0) << "of " << (n - first) * m;
}

// The whole of sum over the largest n an int32 takes, with real data: 2^31 - 1 floats.
TEST(SizesOnCpu, SumOf2To31Minus1RandomFloats) {
  const int64_t n = kTwo31 - 1;
  const int64_t need = n * 4 + (int64_t{1} << 30);  // the tensor and 1 GiB of headroom
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sum over 2^31 - 1 floats fills 8 GiB, several times slower and larger under "
               << "a sanitizer; the release build runs it";
#endif
  const int64_t avail = MemAvailable();
  if (avail < need) {
    GTEST_SKIP() << "sum over 2^31 - 1 floats needs " << (need >> 20) << " MiB free and "
                 << "MemAvailable is " << (avail >> 20) << " MiB (/proc/meminfo); run it alone "
                 << "on a machine with more free memory";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Module m = BuildRestricted("sum.bpir", "sum", {});
  Tensor x = Tensor::Empty({n}, DLDataType{kDLFloat, 32, 1}, Device("cpu", 0));
  Tensor out = Tensor::Empty({1}, DLDataType{kDLFloat, 32, 1}, Device("cpu", 0));
  float* xs = static_cast<float*>(x.dl()->data);
  // Values in [0.25, 1) from a hash of the index (a sum without cancellation, so the relative
  // error measures the kernel), made and summed in float64 by slices on every core.
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> partial(static_cast<size_t>(threads), 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const int64_t lo = n / threads * t, hi = t + 1 == threads ? n : n / threads * (t + 1);
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t i = lo; i < hi; ++i) {
        uint64_t z = (static_cast<uint64_t>(i) + 12345) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 31)) * 0xD6E8FEB86659FD93ULL;
        const float v = 0.25f + 0.75f * static_cast<float>(static_cast<int32_t>(z >> 40)) *
                                    (1.0f / 16777216.0f);
        xs[i] = v;
        acc[i & 7] += v;
      }
      for (double a : acc) partial[static_cast<size_t>(t)] += a;
    });
  }
  for (std::thread& th : pool) th.join();
  double want = 0;
  for (double p : partial) want += p;
  const auto t1 = std::chrono::steady_clock::now();
  m.GetFunction("sum")(n, x.dl(), out.dl());
  const auto t2 = std::chrono::steady_clock::now();
  const float got = out.ToVector<float>()[0];
  // The kernel adds in float64 and rounds once: within one float32 rounding of the sum.
  EXPECT_NEAR(got, want, want * 1.2e-7) << "n = " << n;
  std::cout << "sum of " << n << " floats: " << got << " (float64: " << want << "); build and "
            << "data " << std::chrono::duration<double>(t1 - t0).count() << " s, the kernel "
            << std::chrono::duration<double>(t2 - t1).count() << " s\n";
}

// conv2d_gpu's grid, batch x ceil(c_out / 8) blocks on blockIdx.z, past 2^31 - 1 (here
// (2^31 - 1) x 3, which int32 wraps to 2147483645): the host computes it in int64 and makes it
// -1, which the launch refuses. The images are empty (h = w = 0), so the tensors hold nothing.
TEST(SizesOnOpenCL, Conv2dGpuRefusesAGridPastInt32) {
  Module m;
  try {
    const ir::IRModule all = ir::Parse(bk::ReadKernelFile("conv2d.bpir"), "conv2d.bpir");
    ir::IRModule one;
    one.Add(*all.Find("conv2d_gpu"));
    m = Build(ir::Print(one), Target::Parse("opencl"));
  } catch (const backplane::Error& e) {
    GTEST_SKIP() << "no opencl code generator here: " << e.what();
  }
  Device dev("opencl", 0);
  const int64_t batch = kTwo31 - 1, c_out = 24;
  const DLDataType f32{kDLFloat, 32, 1};
  Tensor x, f, y;
  try {
    x = Tensor::Empty({batch, 1, 0, 0}, f32, dev);
    f = Tensor::Empty({c_out, 1, 1, 1}, f32, dev);
    y = Tensor::Empty({batch, c_out, 0, 0}, f32, dev);
  } catch (const backplane::Error& e) {
    GTEST_SKIP() << "no opencl device here: " << e.what();
  }
  try {
    m.GetFunction("conv2d_gpu")(batch, int64_t{1}, c_out, int64_t{0}, int64_t{0}, int64_t{1},
                                int64_t{1}, int64_t{0}, x.dl(), f.dl(), y.dl());
    ADD_FAILURE() << "a grid of (2^31 - 1) x 3 blocks on blockIdx.z ran";
  } catch (const backplane::Error& e) {
    EXPECT_NE(std::string(e.what()).find("blockIdx.z = -1 is negative"), std::string::npos)
        << e.what();
  }
}

}  // namespace
