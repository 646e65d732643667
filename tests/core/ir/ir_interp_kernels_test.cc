// SPDX-License-Identifier: Apache-2.0
// The interpreter on the kernels of tests/core/ir/kernels, on random inputs, against float64
// references computed here; and the simulated GPU grid: barriers, shared and local memory,
// and the errors that must not hang it.
#include <gtest/gtest.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "ir_test_util.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
using irtest::ErrorOf;
using irtest::KernelInterpreter;
using irtest::Near;
using irtest::Tensor;

namespace {

TEST(IrInterpKernels, VectorAddGpu) {
  Interpreter in = KernelInterpreter("vector_add.bpir");
  for (int64_t n : {1, 255, 1000}) {
    Tensor<float> a({n}), b({n}), c({n}, -1);
    a.Random(1);
    b.Random(2);
    in.Run("vector_add_gpu", {IntArg(n), a.View(), b.View(), c.View()});
    for (int64_t k = 0; k < n; ++k) EXPECT_EQ(c[k], a[k] + b[k]) << k;
  }
}

TEST(IrInterpKernels, Saxpy) {
  Interpreter in = KernelInterpreter("saxpy.bpir");
  for (const char* func : {"saxpy", "saxpy_vec"}) {
    const int64_t n = std::string(func) == "saxpy" ? 37 : 64;
    Tensor<float> x({n}), y({n});
    x.Random(3);
    y.Random(4);
    const Tensor<float> y0 = y;
    in.Run(func, {IntArg(n), FloatArg(1.5), x.View(), y.View()});
    for (int64_t k = 0; k < n; ++k) EXPECT_EQ(y[k], 1.5f * x[k] + y0.data[k]) << func << k;
  }
}

TEST(IrInterpKernels, SumAndSumGpu) {
  Interpreter in = KernelInterpreter("reduction.bpir");
  for (int64_t n : {1, 3, 256, 1000, 5000}) {
    Tensor<float> a({n});
    a.Random(static_cast<unsigned>(n));
    double want = 0;
    for (float x : a.data) want += x;
    for (const char* func : {"sum", "sum_gpu"}) {
      Tensor<float> out({1}, -7);
      in.Run(func, {IntArg(n), a.View(), out.View()});
      EXPECT_TRUE(Near(out[0], want, 1e-5)) << func << " n=" << n;
    }
  }
}

TEST(IrInterpKernels, Softmax) {
  Interpreter in = KernelInterpreter("softmax.bpir");
  const int64_t rows = 7, cols = 33;
  Tensor<float> x({rows, cols}), y({rows, cols});
  x.Random(5, -10, 10);
  in.Run("softmax", {IntArg(rows), IntArg(cols), x.View(), y.View()});
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, double{x[r * cols + c]});
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_TRUE(Near(y[r * cols + c], std::exp(x[r * cols + c] - m) / s, 1e-5));
  }
}

std::vector<double> MatmulRef(const Tensor<float>& a, const Tensor<float>& b, int64_t m, int64_t n,
                              int64_t k) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double{a.data[i * k + p]} * b.data[p * n + j];
      c[i * n + j] = s;
    }
  return c;
}

TEST(IrInterpKernels, Matmul) {
  Interpreter in = KernelInterpreter("matmul.bpir");
  const int64_t m = 16, n = 24, k = 32;
  Tensor<float> a({m, k}), b({k, n}), c({m, n});
  a.Random(6);
  b.Random(7);
  in.Run("matmul", {IntArg(m), IntArg(n), IntArg(k), a.View(), b.View(), c.View()});
  const std::vector<double> want = MatmulRef(a, b, m, n, k);
  for (size_t q = 0; q < want.size(); ++q) EXPECT_TRUE(Near(c[q], want[q])) << q;
}

TEST(IrInterpKernels, MatmulTiledGpuAndItsSpeed) {
  Interpreter in = KernelInterpreter("matmul.bpir");
  const int64_t n = 64;
  Tensor<float> a({n, n}), b({n, n}), c({n, n}), d({n, n});
  a.Random(8);
  b.Random(9);
  auto t0 = std::chrono::steady_clock::now();
  in.Run("matmul", {IntArg(n), IntArg(n), IntArg(n), a.View(), b.View(), c.View()});
  auto t1 = std::chrono::steady_clock::now();
  in.Run("matmul_tiled_gpu", {IntArg(n), a.View(), b.View(), d.View()});
  auto t2 = std::chrono::steady_clock::now();
  const std::vector<double> want = MatmulRef(a, b, n, n, n);
  for (size_t q = 0; q < want.size(); ++q) {
    EXPECT_TRUE(Near(c[q], want[q])) << q;
    EXPECT_TRUE(Near(d[q], want[q])) << q;
  }
  const double serial = std::chrono::duration<double>(t1 - t0).count();
  const double tiled = std::chrono::duration<double>(t2 - t1).count();
  std::printf("64x64x64 matmul: %.1f ms serial, %.1f ms tiled on the simulated GPU\n", serial * 1e3,
              tiled * 1e3);
#ifdef NDEBUG
  EXPECT_LT(serial, 1.0);
#else
  EXPECT_LT(serial, 10.0);  // unoptimized and sanitizer builds are many times slower
#endif
}

TEST(IrInterpKernels, Transpose) {
  Interpreter in = KernelInterpreter("transpose.bpir");
  const int64_t m = 5, n = 7;
  Tensor<float> a({m, n}), b({n, m});
  a.Random(10);
  in.Run("transpose", {IntArg(m), IntArg(n), a.View(), b.View()});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) EXPECT_EQ(b[i * m + j], a[j * n + i]);
}

TEST(IrInterpKernels, Conv2d) {
  Interpreter in = KernelInterpreter("conv2d.bpir");
  const int64_t ci = 3, co = 4, h = 8, w = 9, kh = 3, kw = 3, pad = 1;
  Tensor<float> x({ci, h, w}), f({co, ci, kh, kw}), y({co, h, w});
  x.Random(11);
  f.Random(12);
  in.Run("conv2d", {IntArg(ci), IntArg(co), IntArg(h), IntArg(w), IntArg(kh), IntArg(kw),
                    IntArg(pad), x.View(), f.View(), y.View()});
  for (int64_t o = 0; o < co; ++o)
    for (int64_t r = 0; r < h; ++r)
      for (int64_t s = 0; s < w; ++s) {
        double acc = 0;
        for (int64_t c = 0; c < ci; ++c)
          for (int64_t u = 0; u < kh; ++u)
            for (int64_t v = 0; v < kw; ++v) {
              const int64_t ih = r + u - pad, iw = s + v - pad;
              if (ih >= 0 && ih < h && iw >= 0 && iw < w)
                acc += double{x[(c * h + ih) * w + iw]} * f[((o * ci + c) * kh + u) * kw + v];
            }
        EXPECT_TRUE(Near(y[(o * h + r) * w + s], std::max(acc, 0.0))) << o << r << s;
      }
}

// ---- the simulated grid ----

Interpreter Of(const std::string& text) { return Interpreter(Parse(text)); }

TEST(IrInterpGrid, EveryThreadOfEveryBlockRunsWithItsIndices) {
  Interpreter in =
      Of("func f(o: buffer<int32>[2, 3, 4, 5]) {\n"
         "  for by in thread(blockIdx.y, 0, 2) {\n"
         "    for bx in thread(blockIdx.x, 0, 3) {\n"
         "      for ty in thread(threadIdx.y, 0, 4) {\n"
         "        for tx in thread(threadIdx.x, 1, 5) {\n"
         "          o[by, bx, ty, tx - 1] = o[by, bx, ty, tx - 1] + 1000 * by + 100 * bx + 10 * ty "
         "+ tx\n"
         "        }\n      }\n    }\n  }\n}\n");
  Tensor<int32_t> o({2, 3, 4, 5});
  in.Run("f", {o.View()});
  for (int by = 0; by < 2; ++by)
    for (int bx = 0; bx < 3; ++bx)
      for (int ty = 0; ty < 4; ++ty)
        for (int tx = 1; tx <= 5; ++tx)
          EXPECT_EQ(o[((by * 3 + bx) * 4 + ty) * 5 + tx - 1], 1000 * by + 100 * bx + 10 * ty + tx);
}

// Each block reverses its slice through shared memory: thread t reads what thread T-1-t
// wrote, which only a barrier makes visible.
const char* const kReverse =
    "func reverse(n: int32, a: buffer<float32>[n], b: buffer<float32>[n]) {\n"
    "  for bx in thread(blockIdx.x, 0, n / 64) {\n"
    "    for tx in thread(threadIdx.x, 0, 64) {\n"
    "      alloc s: float32[64] shared\n"
    "      alloc mine: float32[1] local\n"
    "      let i: int32 = bx * 64 + tx\n"
    "      mine[0] = a[i]\n"
    "      s[tx] = s[tx] + mine[0]\n"
    "      barrier\n"
    "      b[i] = s[63 - tx] + mine[0] * 0.0\n"
    "    }\n  }\n}\n";

TEST(IrInterpGrid, BarriersSharedAndLocalMemory) {
  Interpreter in = Of(kReverse);
  const int64_t n = 256;
  Tensor<float> a({n}), b({n});
  a.Random(13);
  in.Run("reverse", {IntArg(n), a.View(), b.View()});
  // s is zeroed for every block (s[tx] + ... would double otherwise); mine and i are per thread.
  for (int64_t k = 0; k < n; ++k) EXPECT_EQ(b[k], a[(k / 64) * 64 + 63 - k % 64]) << k;
}

TEST(IrInterpGrid, BarrierDivergenceIsAnErrorNotAHang) {
  Interpreter in =
      Of("func diverge(o: buffer<int32>[8]) {\n"
         "  for tx in thread(threadIdx.x, 0, 8) {\n"
         "    if (tx < 3) {\n      barrier\n    }\n"
         "    o[tx] = 1\n"
         "  }\n}\n");
  Tensor<int32_t> o({8});
  EXPECT_EQ(ErrorOf([&] { in.Run("diverge", {o.View()}); }),
            "diverge: the threads of a block reached different barriers (a barrier in a branch "
            "or loop that not every thread takes, or a thread that ends while others wait): make "
            "every thread of a block reach each barrier");
}

TEST(IrInterpGrid, AnErrorInOneThreadStopsTheBlock) {
  Interpreter in =
      Of("func oob(o: buffer<int32>[8]) {\n"
         "  for tx in thread(threadIdx.x, 0, 9) {\n"
         "    barrier\n"
         "    o[tx] = 1\n"
         "    barrier\n"
         "  }\n}\n");
  Tensor<int32_t> o({8});
  EXPECT_EQ(ErrorOf([&] { in.Run("oob", {o.View()}); }),
            "oob: index 8 is out of bounds for dimension 0 of buffer 'o' (extent 8) in "
            "`o[tx] = 1`");
}

TEST(IrInterpGrid, TooManyThreadsWithBarriers) {
  Interpreter in =
      Of("func big(n: int32) {\n"
         "  for tx in thread(threadIdx.x, 0, n) {\n    barrier\n  }\n}\n");
  in.Run("big", {IntArg(1024)});
  EXPECT_EQ(ErrorOf([&] { in.Run("big", {IntArg(1025)}); }),
            "big: a block of 1025 threads that uses barriers: the interpreter runs at most 1024");
  in.Run("big", {IntArg(0)});  // an empty grid runs nothing
}

TEST(IrInterpGrid, ConcurrentRuns) {
  // Run may be called from several threads at once: frames are per call.
  Interpreter in = Of(kReverse);
  std::vector<std::thread> threads;
  std::vector<Tensor<float>> as, bs;
  for (int t = 0; t < 4; ++t) {
    as.emplace_back(std::vector<int64_t>{128});
    bs.emplace_back(std::vector<int64_t>{128});
    as.back().Random(static_cast<unsigned>(20 + t));
  }
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { in.Run("reverse", {IntArg(128), as[t].View(), bs[t].View()}); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    for (int64_t k = 0; k < 128; ++k) EXPECT_EQ(bs[t][k], as[t][(k / 64) * 64 + 63 - k % 64]);
}

}  // namespace
