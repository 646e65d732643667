// SPDX-License-Identifier: Apache-2.0
// Sizes around 2^31 (docs/ir.md, "Sizes of the catalog kernels"): every catalog kernel is free of
// int32 arithmetic that can wrap (Int32OverflowRisks finds none), and on the IR interpreter the
// kernels run right at sizes where a tile count, an edge test or a flat index passes 2^31. A run at
// those sizes would touch gigabytes, so each kernel runs the last few iterations of its outer loop
// only (the loop's count and edge logic unchanged: the loop `for o in parallel(0, E)` becomes `for
// o' in parallel(0, min(E, K))` with o = o' + max(E - K, 0)), on buffers mapped without backing
// store, where only the pages touched cost memory. The forms the catalog had are run the same way
// and shown to leave the output unwritten.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "last_iterations.h"

namespace ir = backplane::ir;
namespace bk = backplane::kernels;
using backplane::sizes_test::Restrict;

namespace {

constexpr int64_t kTwo31 = int64_t{1} << 31;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// float32 elements in an anonymous private mapping: they read as zeros, and memory is taken
// only by the pages written.
class Sparse {
 public:
  explicit Sparse(int64_t elements) : bytes_(static_cast<size_t>(elements) * sizeof(float)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw std::runtime_error("cannot map " + std::to_string(bytes_) + " bytes");
    data_ = static_cast<float*>(p);
  }
  ~Sparse() { munmap(data_, bytes_); }
  Sparse(const Sparse&) = delete;
  Sparse& operator=(const Sparse&) = delete;
  float* data() { return data_; }
  float& operator[](int64_t i) { return data_[i]; }

 private:
  size_t bytes_;
  float* data_;
};

// An interpreter for function `func` of `text` with the loops in `last` restricted.
ir::Interpreter Restricted(const std::string& text, const std::string& func,
                           const std::map<std::string, int>& last) {
  const ir::IRModule file = ir::Parse(text, func);
  const ir::PrimFunc* f = file.Find(func);
  if (f == nullptr) throw std::runtime_error("no function " + func);
  ir::IRModule one;
  one.Add(ir::PrimFunc(f->name, f->params, Restrict(f->body, last), f->attrs));
  return ir::Interpreter(one);
}

std::string Catalog(const std::string& file) { return bk::ReadKernelFile(file); }

// Random values in [lo, hi) into x[from, to).
void Fill(Sparse& x, int64_t from, int64_t to, uint64_t seed, float lo = -1, float hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = from; i < to; ++i) x[i] = u(rng);
}

// ---- The catalog is clean --------------------------------------------------------------------

TEST(Sizes, NoCatalogKernelHasInt32ArithmeticThatCanWrap) {
  for (const char* file : {"vector_add.bpir", "saxpy.bpir", "sum.bpir", "softmax.bpir",
                           "matmul.bpir", "transpose.bpir", "conv2d.bpir"}) {
    const std::vector<std::string> risks = ir::Int32OverflowRisks(ir::Parse(Catalog(file), file));
    std::string all;
    for (const std::string& r : risks) all += r + "\n";
    EXPECT_EQ(all, "") << file;
  }
}

// ---- 1-D: n up to 2^31 - 1 -------------------------------------------------------------------

// The sizes where the tile count and the edge test of a 1024-element chunk change.
const int64_t kNear[] = {kTwo31 - 1, kTwo31 - 1023, kTwo31 - 1024, kTwo31 - 1025};

// Runs an elementwise kernel (vector_add, saxpy and their GPU variants) for its last `k`
// iterations of loop `loop` at size n; returns how many of the last `check` elements are
// right (every one of them lies in the tiles that ran).
int64_t RightTail(const std::string& text, const std::string& func, const std::string& loop, int k,
                  int64_t n, int64_t check) {
  const ir::Interpreter interp = Restricted(text, func, {{loop, k}});
  const bool saxpy = func.rfind("saxpy", 0) == 0;
  Sparse a(n), b(n), c(n);
  const int64_t from = n - check;
  Fill(a, from, n, 1);
  Fill(b, from, n, 2);
  for (int64_t i = from; i < n; ++i) c[i] = kNaN;
  std::vector<ir::ArgView> args = {ir::IntArg(n)};
  const float alpha = 1.5f;
  if (saxpy) args.push_back(ir::FloatArg(alpha));
  args.push_back(ir::BufferArg(a.data(), ir::Float32(), 1, &n));
  args.push_back(ir::BufferArg(b.data(), ir::Float32(), 1, &n));
  if (!saxpy) args.push_back(ir::BufferArg(c.data(), ir::Float32(), 1, &n));
  interp.Run(func, args);
  int64_t right = 0;
  if (saxpy) {
    // y = alpha * x + y: y (in b) started as the values Fill drew with seed 2.
    std::mt19937_64 rng(2);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = from; i < n; ++i) right += b[i] == alpha * a[i] + u(rng);
  } else {
    for (int64_t i = from; i < n; ++i) right += c[i] == a[i] + b[i];
  }
  return right;
}

TEST(Sizes, ElementwiseKernelsWriteTheirLastChunksNear2To31) {
  for (const int64_t n : kNear) {
    // Three chunks of 1024 (CPU) or blocks of 256 (GPU): the last full ones and the edge.
    EXPECT_EQ(RightTail(Catalog("vector_add.bpir"), "vector_add", "o", 3, n, 2048), 2048) << n;
    EXPECT_EQ(RightTail(Catalog("saxpy.bpir"), "saxpy", "o", 3, n, 2048), 2048) << n;
    EXPECT_EQ(RightTail(Catalog("vector_add.bpir"), "vector_add_gpu", "bx", 3, n, 512), 512) << n;
    EXPECT_EQ(RightTail(Catalog("saxpy.bpir"), "saxpy_gpu", "bx", 3, n, 512), 512) << n;
  }
}

// vector_add as the catalog had it: the tile count (n + 1023) / 1024 wraps negative for
// n > 2^31 - 1024, so no chunk runs and c is left as it was, silently.
const char* kOldVectorAdd = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for o in parallel(0, (n + 1023) / 1024) {
    let base: int32 = o * 1024
    if (base + 1024 <= n) {
      for i in vectorized(0, 1024) {
        c[base + i] = a[base + i] + b[base + i]
      }
    } else {
      for t in serial(base, n - base) {
        c[t] = a[t] + b[t]
      }
    }
  }
}
)";

TEST(Sizes, TheOldTileCountLeftTheOutputUnwritten) {
  EXPECT_EQ(RightTail(kOldVectorAdd, "vector_add", "o", 3, kTwo31 - 1024, 2048), 2048);
  EXPECT_EQ(RightTail(kOldVectorAdd, "vector_add", "o", 3, kTwo31 - 1023, 2048), 0);
  EXPECT_EQ(RightTail(kOldVectorAdd, "vector_add", "o", 3, kTwo31 - 1, 2048), 0);
}

// sum's last chunk of 64 (CPU) and the last passes of sum_gpu and sum4_gpu, at n = 2^31 - 1:
// out is the sum of the elements they cover, against a float64 sum.
TEST(Sizes, SumAddsItsLastChunkNear2To31) {
  for (const int64_t n : {kTwo31 - 1, kTwo31 - 1025}) {
    // CPU: chunk 63 covers [63 * cs, n) with cs = ceil(n / 1024) * 16.
    const int64_t cs = (n + 1023) / 1024 * 16;
    {
      const ir::Interpreter interp = Restricted(Catalog("sum.bpir"), "sum", {{"ch", 1}});
      Sparse x(n);
      float out = kNaN;
      const int64_t one = 1;
      Fill(x, 63 * cs, n, 3, 0.25f, 1.0f);
      interp.Run("sum", {ir::IntArg(n), ir::BufferArg(x.data(), ir::Float32(), 1, &n),
                         ir::BufferArg(&out, ir::Float32(), 1, &one)});
      double want = 0;
      for (int64_t i = 63 * cs; i < n; ++i) want += x[i];
      EXPECT_EQ(out, static_cast<float>(want)) << n << ": " << n - 63 * cs << " elements";
    }
    // GPU: the last 2 passes of each thread's loop, in every block: 2 blocks (chunks of 2^30,
    // the largest; the last pass of the last one stops at n, past which it reads nothing) and
    // 3 (a last chunk too short to reach its last 2 passes, which then add nothing). A pass is
    // 256 elements in sum_gpu and 2048 in sum4_gpu (its float32x4 variant), whose tiles are
    // 2048 too. The chunk and the grid as each kernel computes them.
    for (const auto& [func, pass] :
         {std::pair<std::string, int64_t>{"sum_gpu", 256}, {"sum4_gpu", 2048}}) {
      const int64_t tile = std::max<int64_t>(pass, 1024);
      for (const int64_t blocks : {2, 3}) {
        const ir::Interpreter interp = Restricted(Catalog("sum.bpir"), func, {{"i", 2}});
        Sparse x(n);
        float out = kNaN;
        const int64_t one = 1;
        const int64_t tiles = (n + tile - 1) / tile;
        const int64_t chunk = (tiles + blocks - 1) / blocks * tile;
        const int64_t grid = (n + chunk - 1) / chunk;
        ASSERT_EQ(grid, blocks) << func << " " << n;
        double want = 0;
        for (int64_t b = 0; b < grid; ++b) {
          const int64_t lo = b * chunk, len = std::min(chunk, n - lo);
          const int64_t first = lo + (chunk / pass - 2) * pass;
          Fill(x, first, lo + len, static_cast<uint64_t>(4 + b), 0.25f, 1.0f);
          for (int64_t i = first; i < lo + len; ++i) want += x[i];
        }
        interp.Run(
            func, {ir::IntArg(n), ir::IntArg(blocks), ir::BufferArg(x.data(), ir::Float32(), 1, &n),
                   ir::BufferArg(&out, ir::Float32(), 1, &one)});
        EXPECT_NEAR(out, want, 1e-5 * want) << func << ": " << n << ", " << blocks << " blocks";
      }
    }
  }
}

// ---- More than 2^31 elements with int32 dims -------------------------------------------------

// transpose of a 16 x (2^27 + 1) matrix (2^31 + 16 elements): the last two blocks of 16
// columns of a, the last ones at flat index past 2^31.
TEST(Sizes, TransposePastTwoTo31Elements) {
  const int64_t m = 16, n = (int64_t{1} << 27) + 1;
  for (const auto& [func, loop] :
       {std::pair<std::string, std::string>{"transpose", "ib"}, {"transpose_gpu", "bx"}}) {
    const ir::Interpreter interp = Restricted(Catalog("transpose.bpir"), func, {{loop, 2}});
    Sparse a(m * n), b(n * m);
    const int64_t first = (n - 1) / 16 * 16 - 16;  // the first column of the last two blocks
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t j = 0; j < m; ++j) {
      for (int64_t i = first; i < n; ++i) a[j * n + i] = u(rng);
    }
    for (int64_t i = first * m; i < n * m; ++i) b[i] = kNaN;
    const int64_t sa[2] = {m, n}, sb[2] = {n, m};
    interp.Run(func, {ir::IntArg(m), ir::IntArg(n), ir::BufferArg(a.data(), ir::Float32(), 2, sa),
                      ir::BufferArg(b.data(), ir::Float32(), 2, sb)});
    int64_t wrong = 0;
    for (int64_t i = first; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) wrong += b[i * m + j] != a[j * n + i];
    }
    EXPECT_EQ(wrong, 0) << func << ": of " << (n - first) * m;
  }
}

// softmax of (2^21 + 1) x 1024 (2^31 + 1024 elements): the last row starts at flat index 2^31.
TEST(Sizes, SoftmaxPastTwoTo31Elements) {
  const int64_t rows = (int64_t{1} << 21) + 1, cols = 1024;
  for (const auto& [func, loop] :
       {std::pair<std::string, std::string>{"softmax", "r"}, {"softmax_gpu", "r"}}) {
    const ir::Interpreter interp = Restricted(Catalog("softmax.bpir"), func, {{loop, 1}});
    Sparse x(rows * cols), y(rows * cols);
    const int64_t row = (rows - 1) * cols;
    Fill(x, row, row + cols, 6, -4, 4);
    for (int64_t c = 0; c < cols; ++c) y[row + c] = kNaN;
    const int64_t shape[2] = {rows, cols};
    std::vector<ir::ArgView> args = {ir::IntArg(rows), ir::IntArg(cols)};
    if (func == "softmax_gpu") args.push_back(ir::IntArg(32));
    args.push_back(ir::BufferArg(x.data(), ir::Float32(), 2, shape));
    args.push_back(ir::BufferArg(y.data(), ir::Float32(), 2, shape));
    interp.Run(func, args);
    double mx = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(x[row + c]));
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[row + c] - mx);
    double worst = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double want = std::exp(x[row + c] - mx) / s;
      worst = std::max(worst, std::fabs(y[row + c] - want) / want);
    }
    EXPECT_LE(worst, 1e-5) << func;  // a NaN left in y fails too
  }
}

// c = a * b with m = 3, n = 2^30 + 40, k = 2: c has 3 * 2^30 + 120 elements; the last
// columns of its last row lie past flat index 2^31 + 2^30.
TEST(Sizes, MatmulPastTwoTo31Elements) {
  const int64_t m = 3, n = (int64_t{1} << 30) + 40, k = 2;
  const std::vector<std::pair<std::string, std::map<std::string, int>>> runs = {
      {"matmul", {{"i", 1}, {"j", 64}}},
      {"matmul_tiled", {{"jt", 3}}},
      {"matmul_gpu", {{"bx", 5}}},
      {"matmul_tiled_gpu", {{"bx", 2}}}};
  for (const auto& [func, last] : runs) {
    const ir::Interpreter interp = Restricted(Catalog("matmul.bpir"), func, last);
    Sparse a(m * k), b(k * n), c(m * n);
    const int64_t first = n - 64;  // each run covers at least the last 64 columns
    Fill(a, 0, m * k, 7);
    for (int64_t p = 0; p < k; ++p) Fill(b, p * n + first - 512, p * n + n, 8 + p);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = first; j < n; ++j) c[i * n + j] = kNaN;
    }
    const int64_t sa[2] = {m, k}, sb[2] = {k, n}, sc[2] = {m, n};
    std::vector<ir::ArgView> args = {ir::IntArg(m), ir::IntArg(n), ir::IntArg(k)};
    if (func == "matmul_tiled_gpu") args.push_back(ir::IntArg(32));
    args.push_back(ir::BufferArg(a.data(), ir::Float32(), 2, sa));
    args.push_back(ir::BufferArg(b.data(), ir::Float32(), 2, sb));
    args.push_back(ir::BufferArg(c.data(), ir::Float32(), 2, sc));
    interp.Run(func, args);
    double worst = 0;
    const int64_t from = func == "matmul" ? m - 1 : 0;  // matmul: the last row only
    for (int64_t i = from; i < m; ++i) {
      for (int64_t j = first; j < n; ++j) {
        const double t0 = double{a[i * k]} * b[j], t1 = double{a[i * k + 1]} * b[n + j];
        const double err =
            std::fabs(c[i * n + j] - (t0 + t1)) / (std::fabs(t0) + std::fabs(t1) + 1e-30);
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
      }
    }
    EXPECT_LE(worst, 1e-6) << func;
  }
}

// conv2d over (2^17 + 1) images of 16 x 32 x 32 outputs (y: 2^31 + 2^14 elements): the last
// image, at flat index 2^31, against a float64 convolution.
TEST(Sizes, Conv2dPastTwoTo31Elements) {
  const int64_t batch = (int64_t{1} << 17) + 1, c_in = 1, c_out = 16, h = 32, w = 32, kh = 3,
                kw = 3, pad = 1;
  for (const auto& [func, loop, k] :
       {std::tuple<std::string, std::string, int>{"conv2d", "b", 1}, {"conv2d_gpu", "bz", 2}}) {
    const ir::Interpreter interp = Restricted(Catalog("conv2d.bpir"), func, {{loop, k}});
    Sparse x(batch * c_in * h * w), f(c_out * c_in * kh * kw), y(batch * c_out * h * w);
    const int64_t xb = (batch - 1) * c_in * h * w, yb = (batch - 1) * c_out * h * w;
    Fill(x, xb, xb + c_in * h * w, 9);
    Fill(f, 0, c_out * c_in * kh * kw, 10);
    for (int64_t i = yb; i < yb + c_out * h * w; ++i) y[i] = kNaN;
    const int64_t sx[4] = {batch, c_in, h, w}, sf[4] = {c_out, c_in, kh, kw},
                  sy[4] = {batch, c_out, h, w};
    interp.Run(func, {ir::IntArg(batch), ir::IntArg(c_in), ir::IntArg(c_out), ir::IntArg(h),
                      ir::IntArg(w), ir::IntArg(kh), ir::IntArg(kw), ir::IntArg(pad),
                      ir::BufferArg(x.data(), ir::Float32(), 4, sx),
                      ir::BufferArg(f.data(), ir::Float32(), 4, sf),
                      ir::BufferArg(y.data(), ir::Float32(), 4, sy)});
    double worst = 0;
    for (int64_t co = 0; co < c_out; ++co) {
      for (int64_t oh = 0; oh < h; ++oh) {
        for (int64_t ow = 0; ow < w; ++ow) {
          double want = 0, mag = 0;
          for (int64_t r = 0; r < kh; ++r) {
            for (int64_t s = 0; s < kw; ++s) {
              const int64_t ih = oh + r - pad, iw = ow + s - pad;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              const double v = double{x[xb + ih * w + iw]} * f[(co * kh + r) * kw + s];
              want += v;
              mag += std::fabs(v);
            }
          }
          const double err = std::fabs(y[yb + (co * h + oh) * w + ow] - want) / (mag + 1e-6);
          worst = std::isnan(err) ? INFINITY : std::max(worst, err);
        }
      }
    }
    EXPECT_LE(worst, 1e-6) << func;
  }
}

// ---- Any pad -----------------------------------------------------------------------------------

// conv2d and conv2d_gpu compute their padded rows and columns without int32 wrapping for any
// pad, up to INT32_MIN and INT32_MAX, on both CPU paths (<= 64 taps and the direct loop),
// against the catalog's float64 reference.
TEST(Sizes, Conv2dIsRightForAnyPad) {
  const int64_t pads[] = {
      std::numeric_limits<int32_t>::min(), -kTwo31 + 40, -40, -3, 0, 2, 5, 40, kTwo31 - 40,
      std::numeric_limits<int32_t>::max()};
  for (const char* func : {"conv2d", "conv2d_gpu"}) {
    const bk::Case* c = bk::Find(func);
    ASSERT_NE(c, nullptr);
    const ir::Interpreter interp(ir::Parse(Catalog("conv2d.bpir"), "conv2d.bpir"));
    for (const int64_t kernel : {3, 9}) {  // 9 x 9 = 81 taps: conv2d's direct loop
      for (const int64_t pad : pads) {
        bk::Dims dims = {{"batch", 2}, {"c_in", 3},    {"c_out", 5},   {"h", 7},
                         {"w", 9},     {"kh", kernel}, {"kw", kernel}, {"pad", pad}};
        std::vector<bk::Arg> args = c->make_args(dims, 11);
        std::vector<bk::Arg> want = args;
        c->reference(want);
        std::vector<std::vector<float>> store;
        store.reserve(args.size());
        std::vector<ir::ArgView> views;
        for (const bk::Arg& a : args) {
          if (!a.is_buffer) {
            views.push_back(ir::IntArg(static_cast<int64_t>(a.scalar)));
            continue;
          }
          store.emplace_back(a.data.begin(), a.data.end());
          views.push_back(ir::BufferArg(store.back().data(), ir::Float32(),
                                        static_cast<int>(a.shape.size()), a.shape.data()));
        }
        interp.Run(func, views);
        bk::Arg& y = args.back();
        y.data.assign(store.back().begin(), store.back().end());
        EXPECT_LE(bk::RelativeError(y, want.back()), c->tolerance)
            << func << " with " << kernel << " x " << kernel << " taps, pad " << pad;
      }
    }
  }
}

// ---- Sizes past int32 are refused, naming the param and the limit ---------------------------

TEST(Sizes, A1DTensorOfMoreThan2To31ElementsIsRefused) {
  const ir::IRModule file = ir::Parse(Catalog("vector_add.bpir"), "vector_add.bpir");
  const ir::PrimFunc& f = *file.Find("vector_add");
  const int64_t big = kTwo31 + 5;
  float dummy = 0;  // CheckArgs reads shapes, never data
  const ir::ArgView t = ir::BufferArg(&dummy, ir::Float32(), 1, &big);
  // n itself past int32.
  EXPECT_EQ(ir::CheckArgs(f, {ir::IntArg(big), t, t, t}),
            "vector_add: argument 0 'n' is 2147483653, out of the range of int32 [-2147483648, "
            "2147483647]; pass a value in that range");
  // n wrapped to int32 (what a caller that truncates would pass): the tensors do not match.
  const std::string wrapped = ir::CheckArgs(f, {ir::IntArg(5), t, t, t});
  EXPECT_NE(wrapped.find("argument 1 'a' has shape [2147483653], expected [n] = [5]"),
            std::string::npos)
      << wrapped;
}

}  // namespace
