// SPDX-License-Identifier: Apache-2.0
// The c code generator (target.build.c) end to end: IR text in, a module of compiled C out,
// run on random data against a reference computed here; wrong calls, compiler failures, the
// disk cache, saving and loading, and call_packed from generated code.
#include <stdlib.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../f64_math_cases.h"
#include "plugins/test_util.h"

namespace {

using backplane::Any;
using backplane::Device;
using backplane::Function;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;

const DLDataType kF32{kDLFloat, 32, 1};
const DLDataType kI32{kDLInt, 32, 1};

// The plugin picks its cache folder once per process: one scratch folder for all tests.
const std::string& CacheHome() {
  static bptest::ScratchDir dir;
  return dir.path();
}

class CodegenTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("XDG_CACHE_HOME", CacheHome().c_str(), 1); }

  Module Build(const std::string& ir, const std::string& target = "c") {
    Function build = Function::Get("target.build.c");
    Target t = Target::Parse(target);
    return Module(build(ir, t.object()).AsObject());
  }
  Tensor Floats(const std::vector<float>& values, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
    Tensor t = Tensor::Empty(shape, kF32, Device(bptest::CpuDevice()));
    t.CopyFrom(values);
    return t;
  }
};

size_t CachedLibraries() {
  size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(CacheHome())) {
    files += e.path().extension() == ".so";
  }
  return files;
}

const char* kVectorAdd = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for i in parallel(0, n) {
    c[i] = a[i] + b[i]
  }
}
)";

TEST_F(CodegenTest, VectorAddMatchesTheReferenceOnRandomData) {
  Module m = Build(kVectorAdd);
  EXPECT_EQ(m.Kind(), "c");
  EXPECT_EQ(m.ListFunctions(), std::vector<std::string>{"vector_add"});
  const int n = 1037;
  std::vector<float> a = bptest::RandomFloats(n, 1), b = bptest::RandomFloats(n, 2);
  Tensor ta = Floats(a), tb = Floats(b), tc = Floats(bptest::RandomFloats(n, 3));
  m.GetFunction("vector_add")(n, ta.dl(), tb.dl(), tc.dl());
  std::vector<float> c = tc.ToVector<float>();
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "at " << i;
}

TEST_F(CodegenTest, TheSourceIsCWithRestrictPointersAndOpenMP) {
  Module m = Build(kVectorAdd, "c -num-cores=2");
  const std::string src = m.InspectSource();
  EXPECT_NE(src.find("float* restrict a"), std::string::npos) << src;
  EXPECT_NE(src.find("#pragma omp parallel for schedule(static) num_threads(2)"), std::string::npos)
      << src;
  EXPECT_EQ(m.InspectSource("c"), src);
  EXPECT_NE(m.InspectSource("ir").find("func vector_add"), std::string::npos);
  EXPECT_EQ(m.InspectSource("ptx"), "");
  // The region starts only with two iterations or more to share (a small call runs on the
  // calling thread: entering a region costs more than the work), and with one core never. The
  // loop is there twice: in the region, and plain for a call too small for one (an OpenMP
  // `if` clause that is false still pays for setting up a team).
  // A loop of one statement starts a region from kParallelMinWork iterations on.
  EXPECT_NE(src.find("if ((n) > 1 && (int64_t)(n) >= INT64_C(65536)) {"), std::string::npos) << src;
  EXPECT_EQ(src.find(" if(("), std::string::npos) << src;
  const std::string one = Build(kVectorAdd, "c -num-cores=1").InspectSource();
  EXPECT_EQ(one.find("omp parallel"), std::string::npos) << one;
  EXPECT_NE(one.find("for (int32_t i = 0;"), std::string::npos) << one;
}

// Integer semantics: truncating /, floordiv/floormod toward -inf, int8 wrap-around.
TEST_F(CodegenTest, IntegerOperationsFollowTheIR) {
  Module m = Build(R"(
func ints(n: int32, a: buffer<int32>[n], b: buffer<int32>[n], q: buffer<int32>[n, 4], w: buffer<int8>[n]) {
  for i in serial(0, n) {
    q[i, 0] = a[i] / b[i]
    q[i, 1] = floordiv(a[i], b[i])
    q[i, 2] = floormod(a[i], b[i])
    q[i, 3] = min(a[i], b[i]) - max(a[i], b[i])
    w[i] = int8(a[i]) * int8(3)
  }
}
)");
  const int n = 257;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(-1000, 1000);
  std::vector<int32_t> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = dist(rng);
    do b[i] = dist(rng) / 37;
    while (b[i] == 0);
  }
  Tensor ta = Tensor::Empty({n}, kI32, Device(bptest::CpuDevice()));
  Tensor tb = Tensor::Empty({n}, kI32, Device(bptest::CpuDevice()));
  Tensor tq = Tensor::Empty({n, 4}, kI32, Device(bptest::CpuDevice()));
  Tensor tw = Tensor::Empty({n}, DLDataType{kDLInt, 8, 1}, Device(bptest::CpuDevice()));
  ta.CopyFrom(a);
  tb.CopyFrom(b);
  m.GetFunction("ints")(n, ta.dl(), tb.dl(), tq.dl(), tw.dl());
  std::vector<int32_t> q = tq.ToVector<int32_t>();
  std::vector<int8_t> w = tw.ToVector<int8_t>();
  for (int i = 0; i < n; ++i) {
    const int32_t fd = static_cast<int32_t>(std::floor(static_cast<double>(a[i]) / b[i]));
    EXPECT_EQ(q[4 * i + 0], a[i] / b[i]);
    EXPECT_EQ(q[4 * i + 1], fd) << a[i] << " floordiv " << b[i];
    EXPECT_EQ(q[4 * i + 2], a[i] - fd * b[i]) << a[i] << " floormod " << b[i];
    EXPECT_EQ(q[4 * i + 3], std::min(a[i], b[i]) - std::max(a[i], b[i]));
    EXPECT_EQ(w[i], static_cast<int8_t>(static_cast<int8_t>(a[i]) * 3));
  }
}

// Every math intrinsic against <cmath>, in float32 and float64.
TEST_F(CodegenTest, IntrinsicsMatchTheCLibrary) {
  Module m = Build(R"(
func math(n: int32, x: buffer<float32>[n], y: buffer<float32>[n, 16], d: buffer<float64>[n]) {
  for i in serial(0, n) {
    y[i, 0] = exp(x[i])
    y[i, 1] = exp2(x[i])
    y[i, 2] = log(fabs(x[i]))
    y[i, 3] = log2(fabs(x[i]))
    y[i, 4] = sqrt(fabs(x[i]))
    y[i, 5] = rsqrt(fabs(x[i]))
    y[i, 6] = tanh(x[i])
    y[i, 7] = sigmoid(x[i])
    y[i, 8] = erf(x[i])
    y[i, 9] = floor(x[i] * 3.0) + ceil(x[i] * 3.0)
    y[i, 10] = round(x[i] * 3.0) + trunc(x[i] * 3.0)
    y[i, 11] = sin(x[i]) + cos(x[i])
    y[i, 12] = pow(fabs(x[i]), 1.5)
    y[i, 13] = fma(x[i], 2.0, 1.0)
    y[i, 14] = select(x[i] > 0.0, x[i], -x[i])
    y[i, 15] = float32(int32(x[i] * 100.0))
    d[i] = exp(float64(x[i])) / 3.0f64
  }
}
)");
  const int n = 100;
  std::vector<float> x(n);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& v : x) {
    do v = dist(rng);
    while (std::fabs(v) < 1e-3f);
  }
  Tensor tx = Floats(x), ty = Tensor::Empty({n, 16}, kF32, Device(bptest::CpuDevice()));
  Tensor td = Tensor::Empty({n}, DLDataType{kDLFloat, 64, 1}, Device(bptest::CpuDevice()));
  m.GetFunction("math")(n, tx.dl(), ty.dl(), td.dl());
  std::vector<float> y = ty.ToVector<float>();
  std::vector<double> d = td.ToVector<double>();
  for (int i = 0; i < n; ++i) {
    const float v = x[i], a = std::fabs(v);
    const float want[16] = {std::exp(v),
                            std::exp2(v),
                            std::log(a),
                            std::log2(a),
                            std::sqrt(a),
                            1.0f / std::sqrt(a),
                            std::tanh(v),
                            1.0f / (1.0f + std::exp(-v)),
                            std::erf(v),
                            std::floor(v * 3.0f) + std::ceil(v * 3.0f),
                            std::round(v * 3.0f) + std::trunc(v * 3.0f),
                            std::sin(v) + std::cos(v),
                            std::pow(a, 1.5f),
                            std::fma(v, 2.0f, 1.0f),
                            v > 0 ? v : -v,
                            static_cast<float>(static_cast<int32_t>(v * 100.0f))};
    for (int k = 0; k < 16; ++k) {
      EXPECT_NEAR(y[16 * i + k], want[k], 1e-5f * std::max(1.0f, std::fabs(want[k])))
          << "column " << k << " x = " << v;
    }
    EXPECT_NEAR(d[i], std::exp(static_cast<double>(v)) / 3.0, 1e-14);
  }
}

// Every float64 intrinsic against the IR interpreter (tests/plugins/f64_math_cases.h): the c
// target calls the C library the interpreter calls, so the results are the interpreter's, bit
// for bit, on random inputs over each domain and on the special values.
TEST_F(CodegenTest, Float64IntrinsicsMatchTheInterpreterBitForBit) {
  namespace fm = bptest::f64math;
  for (const fm::Case& c : fm::Cases(1024)) {
    SCOPED_TRACE(c.name);
    Module m = Build(fm::KernelText(c, /*gpu=*/false));
    const fm::Outcome o = fm::Run(c, m, Device(bptest::CpuDevice()), /*gpu=*/false, 0);
    EXPECT_EQ(o.over_bound, 0) << o.report;
    EXPECT_EQ(o.special_mismatches, 0) << o.report;
  }
}

// float32 exp is the IR's own bp_expf (backplane/ir/expf.hpp), written into the C source: the
// c target's results are the interpreter's bit for bit, in vectorized loops (AVX-512 and AVX2
// here, or plain x86-64) and in scalar ones, for exp and for sigmoid, which calls it, over a
// sweep of every float32 class and the special values; and the vectorized loop is vector code.
TEST_F(CodegenTest, Float32ExpIsTheInterpretersBitForBit) {
  namespace ir = backplane::ir;
  const char* text = R"(# backplane-ir 2
func f(n: int32, x: buffer<float32>[n], e: buffer<float32>[n], s: buffer<float32>[n], t: buffer<float32>[n]) {
  for i in vectorized(0, n) {
    e[i] = exp(x[i])
    s[i] = sigmoid(x[i])
  }
  for j in serial(0, n) {
    t[j] = exp(x[j])
  }
}
)";
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
    const uint32_t u = static_cast<uint32_t>(b);
    float v;
    std::memcpy(&v, &u, sizeof v);
    x.push_back(v);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  0x1.62e42ep+6f, 0x1.62e430p+6f, -103.9f, -104.0f, -87.5f, 0x1p-24f}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t shape[] = {n};
  std::vector<float> want_e(x.size()), want_s(x.size()), want_t(x.size()), xi(x);
  ir::Interpreter(ir::Parse(text))
      .Run("f", {ir::IntArg(n), ir::BufferArg(xi.data(), ir::Float32(), 1, shape),
                 ir::BufferArg(want_e.data(), ir::Float32(), 1, shape),
                 ir::BufferArg(want_s.data(), ir::Float32(), 1, shape),
                 ir::BufferArg(want_t.data(), ir::Float32(), 1, shape)});
  for (const std::string target : {"c", "c -march=x86-64-v3", "c -march=native"}) {
    SCOPED_TRACE(target);
    Module m = Build(text, target);
    const std::string source = m.InspectSource();
    EXPECT_NE(source.find("static inline float bp_expf(float xf) {"), std::string::npos);
    Tensor tx = Floats(x), te = Floats(x), ts = Floats(x), tt = Floats(x);
    m.GetFunction("f")(static_cast<int32_t>(n), tx.dl(), te.dl(), ts.dl(), tt.dl());
    const std::vector<float> e = te.ToVector<float>(), s = ts.ToVector<float>(),
                             t = tt.ToVector<float>();
    int reported = 0;
    auto same = [](float a, float b) {
      return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
    };
    for (size_t i = 0; i < x.size() && reported < 8; ++i) {
      if (same(e[i], want_e[i]) && same(s[i], want_s[i]) && same(t[i], want_t[i])) continue;
      ++reported;
      ADD_FAILURE() << std::hexfloat << "x = " << x[i] << ": exp " << e[i] << " (serial " << t[i]
                    << "), interpreter " << want_e[i] << "; sigmoid " << s[i] << ", interpreter "
                    << want_s[i];
    }
  }
#if defined(__x86_64__)
  // The vectorized loop is vector code: gcc's report on the generated file, compiled as the
  // plugin compiles it, names that loop vectorized (with -march=x86-64-v4's 64-byte vectors).
  if (std::system("cc -v 2>&1 | grep -q 'gcc version'") != 0) {
    GTEST_SKIP() << "the vectorization report needs gcc as cc";
  }
  const std::string source = Build(text, "c -march=x86-64-v4").InspectSource();
  bptest::ScratchDir dir;
  const std::string c_file = dir.path() + "/f.c";
  {
    std::ofstream out(c_file);
    out << source;
  }
  const std::string report = dir.path() + "/report.txt";
  const std::string cmd =
      "cc -O3 -march=x86-64-v4 -std=gnu99 -fopenmp -fwrapv -fno-math-errno "
      "-fno-trapping-math -ffp-contract=off -fopt-info-vec-optimized -c " +
      c_file + " -o " + dir.path() + "/f.o 2> " + report;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(report);
  const std::string opt((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(opt.find("loop vectorized using 64 byte vectors"), std::string::npos) << opt;
#endif
}

// A function keeps at most 512 KiB of arrays on the stack at once; a larger `local` array, or
// one past that budget, is allocated on the heap (and freed), so no IR overflows the stack of
// the thread that runs it: a 400 MB local array crashed the host process with SIGSEGV.
TEST_F(CodegenTest, LargeLocalArraysGoToTheHeap) {
  const char* text = R"(# backplane-ir 2
func f(n: int32, a: buffer<float32>[n], c: buffer<float32>[n]) {
  for i in parallel(0, n) {
    alloc huge: float32[100000000] local
    alloc p: float32[80000] local
    alloc q: float32[80000] local
    huge[99999999 - i] = a[i]
    p[i] = a[i] * 2.0
    q[79999 - i] = p[i] + 1.0
    c[i] = huge[99999999 - i] + q[79999 - i] + huge[i + 7]
  }
}
)";
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.5f, 7.0f};
  for (const std::string target : {"c", "c -num-cores=1"}) {
    SCOPED_TRACE(target);
    Module m = Build(text, target);
    const std::string source = m.InspectSource();
    size_t callocs = 0;
    for (size_t at = source.find("calloc("); at != std::string::npos;
         at = source.find("calloc(", at + 1)) {
      ++callocs;
    }
    // huge (400 MB) and q (the 320 KB past the budget that p's 320 KB leaves) are on the heap;
    // on every core, in each of the loop's two copies (in a region, and plain for a small n).
    EXPECT_EQ(callocs, target == "c" ? 4u : 2u) << source;
    EXPECT_NE(source.find("bp_storage_p[80000]"), std::string::npos) << source;
    Tensor ta = Floats(a), tc = Floats(std::vector<float>(a.size(), -1.0f));
    m.GetFunction("f")(static_cast<int32_t>(a.size()), ta.dl(), tc.dl());
    const std::vector<float> c = tc.ToVector<float>();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(c[i], a[i] + (a[i] * 2.0f + 1.0f)) << i;
    }
  }
}

// Explicit vectors: ramp loads and stores, broadcast, elementwise ops and a gather.
TEST_F(CodegenTest, VectorExpressionsMatchScalarCode) {
  Module m = Build(R"(
func vec(n: int32, alpha: float32, x: buffer<float32>[n], y: buffer<float32>[n], g: buffer<float32>[n]) {
  for o in parallel(0, n / 4) {
    y[ramp(o * 4, 1, 4)] = max(broadcast(alpha, 4) * x[ramp(o * 4, 1, 4)], broadcast(0.25, 4)) + y[ramp(o * 4, 1, 4)]
    g[ramp(o * 4, 1, 4)] = x[ramp(n - 1 - o * 4, -1, 4)]
  }
}
)");
  const int n = 64;
  const float alpha = 1.75f;
  std::vector<float> x = bptest::RandomFloats(n, 5), y = bptest::RandomFloats(n, 6);
  Tensor tx = Floats(x), ty = Floats(y), tg = Floats(bptest::RandomFloats(n, 8));
  m.GetFunction("vec")(n, alpha, tx.dl(), ty.dl(), tg.dl());
  std::vector<float> got = ty.ToVector<float>(), g = tg.ToVector<float>();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i], std::max(alpha * x[i], 0.25f) + y[i]) << i;
    EXPECT_EQ(g[i], x[n - 1 - i]) << i;
  }
}

// float16 storage (IEEE half, math in float32), bool and uint8 buffers.
TEST_F(CodegenTest, HalfBoolAndUnsignedTypes) {
  Module m = Build(R"(
func types(n: int32, x: buffer<float32>[n], h: buffer<float16>[n], b: buffer<bool>[n], u: buffer<uint8>[n]) {
  for i in serial(0, n) {
    h[i] = float16(x[i]) * float16(2.0)
    b[i] = x[i] > 0.0
    u[i] = uint8(int32(x[i] * 100.0)) + uint8(250)
  }
}
)");
  const int n = 64;
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (float& v : x) v = dist(rng);
  Tensor tx = Floats(x);
  Tensor th = Tensor::Empty({n}, DLDataType{kDLFloat, 16, 1}, Device(bptest::CpuDevice()));
  Tensor tb = Tensor::Empty({n}, DLDataType{6 /* bool, DLPack >= 0.8 */, 8, 1},
                            Device(bptest::CpuDevice()));
  Tensor tu = Tensor::Empty({n}, DLDataType{kDLUInt, 8, 1}, Device(bptest::CpuDevice()));
  m.GetFunction("types")(n, tx.dl(), th.dl(), tb.dl(), tu.dl());
  std::vector<_Float16> h = th.ToVector<_Float16>();
  std::vector<uint8_t> b = tb.ToVector<uint8_t>(), u = tu.ToVector<uint8_t>();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(static_cast<float>(h[i]),
              static_cast<float>(static_cast<_Float16>(static_cast<_Float16>(x[i]) * 2)))
        << i;
    EXPECT_EQ(b[i], x[i] > 0 ? 1 : 0) << i;
    EXPECT_EQ(u[i], static_cast<uint8_t>(static_cast<uint8_t>(static_cast<int32_t>(x[i] * 100)) +
                                         static_cast<uint8_t>(250)))
        << i;
  }
}

TEST_F(CodegenTest, WrongCallsAreRefusedWithAMessage) {
  Module m = Build(kVectorAdd);
  Function f = m.GetFunction("vector_add");
  Tensor a = Floats(bptest::RandomFloats(16, 1)), b = Floats(bptest::RandomFloats(16, 2));
  Tensor c = Floats(bptest::RandomFloats(15, 3));
  auto status = bptest::CaptureError([&] { f(16, a.dl(), b.dl(), c.dl()); });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("'c'"), std::string::npos) << status.message;
  EXPECT_NE(status.message.find("[15]"), std::string::npos) << status.message;

  status = bptest::CaptureError([&] { f(16, a.dl(), b.dl()); });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT) << status.message;

  Tensor ints = Tensor::Empty({16}, kI32, Device(bptest::CpuDevice()));
  status = bptest::CaptureError([&] { f(16, a.dl(), ints.dl(), a.dl()); });
  EXPECT_NE(status.message.find("int32"), std::string::npos) << status.message;

  // Output aliasing an input breaks restrict: refused, naming both.
  Tensor c16 = Floats(bptest::RandomFloats(16, 4));
  status = bptest::CaptureError([&] { f(16, a.dl(), b.dl(), a.dl()); });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("overlap"), std::string::npos) << status.message;
  // Reading one tensor twice is fine.
  f(16, a.dl(), a.dl(), c16.dl());
  EXPECT_EQ(c16.ToVector<float>()[3], 2 * bptest::RandomFloats(16, 1)[3]);

  status = bptest::CaptureError([&] { f("sixteen", a.dl(), b.dl(), c16.dl()); });
  EXPECT_NE(status.kind, BP_OK);
}

TEST_F(CodegenTest, ThreadBoundLoopsAreRefusedForTheCpu) {
  auto status = bptest::CaptureError([&] {
    Build(R"(
func k(n: int32, a: buffer<float32>[n]) {
  for t in thread(threadIdx.x, 0, n) {
    a[t] = 1.0
  }
}
)");
  });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("threadIdx.x"), std::string::npos) << status.message;
}

TEST_F(CodegenTest, BadIRIsAnErrorWithLineAndColumn) {
  auto status =
      bptest::CaptureError([&] { Build("func f(n: int32) {\n  for i in serial(0, ) {}\n}\n"); });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("2:"), std::string::npos) << status.message;
}

TEST_F(CodegenTest, CompilerFailureReportsTheCompilersMessage) {
  auto status = bptest::CaptureError([&] { Build(kVectorAdd, "c -cflags=-mno-such-flag-here"); });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("-mno-such-flag-here"), std::string::npos) << status.message;
  EXPECT_NE(status.message.find("the C compiler failed"), std::string::npos) << status.message;

  // A compiler's plain name that this machine lacks.
  status = bptest::CaptureError([&] { Build(kVectorAdd, "c -cc=gcc-999"); });
  EXPECT_EQ(status.kind, BP_ERR_NOT_FOUND);
  EXPECT_NE(status.message.find("gcc-999"), std::string::npos) << status.message;
}

// The cached build's budget: 5 ms, or 25 ms in a sanitizer build, where every
// allocation and copy is several times slower and ctest runs two tests at once on 2 cores.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kCachedBuildBudgetMs = 25.0;
#else
constexpr double kCachedBuildBudgetMs = 5.0;
#endif

TEST_F(CodegenTest, ASecondBuildComesFromTheDiskCache) {
  const std::string kernel =
      std::string(kVectorAdd) +
      "\nfunc only_in_the_cache_test(a: buffer<float32>[1]) {\n  a[0] = 1.0\n}\n";
  const size_t before = CachedLibraries();
  auto c0 = std::chrono::steady_clock::now();
  Build(kernel);
  const double cold_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
  EXPECT_EQ(CachedLibraries(), before + 1) << "the library is cached under XDG_CACHE_HOME";
  EXPECT_TRUE(std::filesystem::is_directory(CacheHome() + "/backplane/c"));
  double best_ms = 1e9;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Module m = Build(kernel);
    m.GetFunction("vector_add");
    auto t1 = std::chrono::steady_clock::now();
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  EXPECT_EQ(CachedLibraries(), before + 1) << "a cached build adds no library";
  // Far below the compile (which runs the C compiler), whatever the machine's load.
  EXPECT_LT(best_ms, cold_ms / 5) << "cold build " << cold_ms << " ms";
  EXPECT_LT(best_ms, kCachedBuildBudgetMs);
  // Different flags are a different entry.
  Build(kernel, "c -opt-level=1");
  EXPECT_EQ(CachedLibraries(), before + 2);
}

TEST_F(CodegenTest, SavedModulesLoadAndRun) {
  Module m = Build(kVectorAdd);
  std::string bytes = m.SaveToBytes();
  // A c module holds a shared library: it loads when native code is allowed (saved_module_test).
  Module loaded = Module::LoadFromBytes(bytes, backplane::ModuleLoadOptions{true});
  EXPECT_EQ(loaded.Kind(), "c");
  EXPECT_EQ(loaded.InspectSource(), m.InspectSource());
  const int n = 100;
  std::vector<float> a = bptest::RandomFloats(n, 1), b = bptest::RandomFloats(n, 2);
  Tensor ta = Floats(a), tb = Floats(b), tc = Floats(bptest::RandomFloats(n, 3));
  loaded.GetFunction("vector_add")(n, ta.dl(), tb.dl(), tc.dl());
  EXPECT_EQ(tc.ToVector<float>()[n - 1], a[n - 1] + b[n - 1]);

  // Damage anywhere is an error, never a crash.
  for (size_t cut : {size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    auto status = bptest::CaptureError(
        [&] { Module::LoadFromBytes(bytes.substr(0, cut), backplane::ModuleLoadOptions{true}); });
    EXPECT_NE(status.kind, BP_OK) << "cut at " << cut;
  }
}

TEST_F(CodegenTest, GeneratedCodeCallsPackedFunctions) {
  // A global function the kernel calls: scales its tensor in place.
  backplane::Registry::Set("test.codegen.scale",
                           Function::FromCallable([](backplane::PackedArgs args) {
                             DLTensor* t = args[0].u.v_tensor;
                             const double k = args.Float(1);
                             if (k < 0)
                               throw backplane::Error(BP_ERR_INVALID_ARGUMENT, "negative scale");
                             float* p = static_cast<float*>(t->data);
                             for (int64_t i = 0; i < t->shape[0]; ++i)
                               p[i] = static_cast<float>(p[i] * k);
                             return Any();
                           }));
  Module m = Build(R"(
func f(n: int32, k: float32, a: buffer<float32>[n]) {
  for i in serial(0, n) {
    a[i] = a[i] + 1.0
  }
  call_packed("test.codegen.scale", a, k)
}
)");
  std::vector<float> a = bptest::RandomFloats(10, 9);
  Tensor t = Floats(a);
  m.GetFunction("f")(10, 3.0, t.dl());
  EXPECT_FLOAT_EQ(t.ToVector<float>()[4], (a[4] + 1.0f) * 3.0f);
  auto status = bptest::CaptureError([&] { m.GetFunction("f")(10, -1.0, t.dl()); });
  EXPECT_EQ(status.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("negative scale"), std::string::npos) << status.message;
  EXPECT_NE(status.message.find("test.codegen.scale"), std::string::npos) << status.message;
  backplane::Registry::Remove("test.codegen.scale");
}

// A vendor library function (the cpu plugin's blas.sgemm, OpenBLAS) and generated code in one
// function: c = relu(a @ b).
TEST_F(CodegenTest, VendorBlasAndGeneratedCodeMixInOneFunction) {
  Module m = Build(R"(
func matmul_relu(m: int32, n: int32, k: int32, a: buffer<float32>[m, k], b: buffer<float32>[k, n], c: buffer<float32>[m, n]) {
  call_packed("blas.sgemm", m, n, k, 1.0, a, b, 0.0, c)
  for i in parallel(0, m) {
    for j in serial(0, n) {
      c[i, j] = max(c[i, j], 0.0)
    }
  }
}
)");
  const int M = 37, N = 29, K = 41;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  Tensor ta = Floats(a, {M, K}), tb = Floats(b, {K, N});
  Tensor tc = Floats(bptest::RandomFloats(M * N, 4), {M, N});
  m.GetFunction("matmul_relu")(M, N, K, ta.dl(), tb.dl(), tc.dl());
  std::vector<float> c = tc.ToVector<float>();
  int positive = 0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int p = 0; p < K; ++p) ref += static_cast<double>(a[i * K + p]) * b[p * N + j];
      ref = std::max(ref, 0.0);
      positive += ref > 0;
      ASSERT_NEAR(c[i * N + j], ref, 1e-4) << i << ", " << j;
    }
  }
  EXPECT_GT(positive, M * N / 4);  // the data exercises both sides of the relu
}

}  // namespace

// ---- Run-time checks (docs/codegen-guide.md "Run-time checks") -----

// Every integer division of the IR (/, floordiv, floormod, signed and unsigned, 8 to 64 bits)
// by zero is the interpreter's error, never SIGFPE; INT_MIN / -1 wraps.
TEST_F(CodegenTest, IntegerDivisionByZeroIsAnErrorAndIntMinByMinusOneWraps) {
  struct Case {
    const char* dtype;
    const char* expr;
  };
  const Case cases[] = {{"int32", "a[i] / b[i]"},          {"int32", "floordiv(a[i], b[i])"},
                        {"int32", "floormod(a[i], b[i])"}, {"int64", "a[i] / b[i]"},
                        {"int64", "floordiv(a[i], b[i])"}, {"int64", "floormod(a[i], b[i])"},
                        {"uint32", "a[i] / b[i]"},         {"uint32", "floormod(a[i], b[i])"},
                        {"int8", "a[i] / b[i]"},           {"uint64", "floordiv(a[i], b[i])"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.dtype) + " " + c.expr);
    const std::string t = c.dtype;
    Module m =
        Build("func divide(n: int32, a: buffer<" + t + ">[n], b: buffer<" + t + ">[n], q: buffer<" +
              t + ">[n]) {\n  for i in serial(0, n) {\n    q[i] = " + c.expr + "\n  }\n}\n");
    const int64_t n = 64;
    const DLDataType dt{static_cast<uint8_t>(t[0] == 'u' ? kDLUInt : kDLInt),
                        static_cast<uint8_t>(std::stoi(t.substr(t[0] == 'u' ? 4 : 3))), 1};
    const int bits = dt.bits;
    const bool is_signed = dt.code == kDLInt;
    const int64_t lo = is_signed ? static_cast<int64_t>(~uint64_t{0} << (bits - 1)) : 0;
    std::mt19937_64 rng(11);
    std::vector<int64_t> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t range = bits == 8 ? 100 : 1000;  // values of the type
      a[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * range + 1)) -
             (is_signed ? range : 0);
      do b[i] = static_cast<int64_t>(rng() % 41) - (is_signed ? 20 : 0);
      while (b[i] == 0);
    }
    if (is_signed) {
      a[5] = lo;  // INT_MIN / -1 wraps to INT_MIN; floormod gives 0
      b[5] = -1;
    }
    auto tensor = [&](const std::vector<int64_t>& v) {
      Tensor x = Tensor::Empty({n}, dt, Device(bptest::CpuDevice()));
      std::vector<uint8_t> bytes(static_cast<size_t>(n) * bits / 8);
      for (int64_t i = 0; i < n; ++i) std::memcpy(&bytes[i * bits / 8], &v[i], bits / 8);
      x.CopyFromBytes(bytes.data(), bytes.size());
      return x;
    };
    auto values = [&](const Tensor& x) {
      std::vector<uint8_t> bytes(static_cast<size_t>(n) * bits / 8);
      x.CopyToBytes(bytes.data(), bytes.size());
      std::vector<int64_t> v(n);
      for (int64_t i = 0; i < n; ++i) {
        uint64_t u = 0;
        std::memcpy(&u, &bytes[i * bits / 8], bits / 8);
        if (is_signed && bits < 64 && (u >> (bits - 1)) != 0) u |= ~uint64_t{0} << bits;
        v[i] = static_cast<int64_t>(u);
      }
      return v;
    };
    Tensor ta = tensor(a), tb = tensor(b), tq = tensor(std::vector<int64_t>(n, 0));
    m.GetFunction("divide")(n, ta.dl(), tb.dl(), tq.dl());
    const std::vector<int64_t> q = values(tq);
    const std::string e = c.expr;
    for (int64_t i = 0; i < n; ++i) {
      int64_t want;
      if (is_signed && b[i] == -1) {
        // Wraps at the type's width: -INT_MIN is INT_MIN.
        const uint64_t neg = uint64_t{0} - static_cast<uint64_t>(a[i]);
        const int64_t wrapped = bits == 64 ? static_cast<int64_t>(neg) : (a[i] == lo ? lo : -a[i]);
        want = e.find("floormod") != std::string::npos ? 0 : wrapped;
      } else {
        const int64_t tq0 = a[i] / b[i];
        const int64_t fd = (tq0 * b[i] != a[i] && ((a[i] < 0) != (b[i] < 0))) ? tq0 - 1 : tq0;
        want = e.find("floordiv") != std::string::npos   ? fd
               : e.find("floormod") != std::string::npos ? a[i] - fd * b[i]
                                                         : tq0;
      }
      ASSERT_EQ(q[i], want) << a[i] << " and " << b[i] << " at " << i;
    }
    b[37] = 0;
    tb = tensor(b);
    bptest::Status s =
        bptest::CaptureError([&] { m.GetFunction("divide")(n, ta.dl(), tb.dl(), tq.dl()); });
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(s.message, "divide: integer division by zero in `" + e + "`");
  }
}

// A vector division by zero, and a scalar whose divisor comes from a parameter.
TEST_F(CodegenTest, VectorAndScalarDivisionByZeroAreErrors) {
  Module m = Build(R"(
func vdiv(d: int32, a: buffer<int32>[8], q: buffer<int32>[8]) {
  for i in serial(0, 2) {
    q[ramp(i * 4, 1, 4)] = a[ramp(i * 4, 1, 4)] / broadcast(d, 4)
  }
}
)");
  Tensor ta = Tensor::Empty({8}, kI32, Device(bptest::CpuDevice()));
  Tensor tq = Tensor::Empty({8}, kI32, Device(bptest::CpuDevice()));
  ta.CopyFrom(std::vector<int32_t>{7, -7, 9, 100, INT32_MIN, 5, 6, 12});
  m.GetFunction("vdiv")(-1, ta.dl(), tq.dl());
  EXPECT_EQ(tq.ToVector<int32_t>(),
            (std::vector<int32_t>{-7, 7, -9, -100, INT32_MIN, -5, -6, -12}));
  bptest::Status s = bptest::CaptureError([&] { m.GetFunction("vdiv")(0, ta.dl(), tq.dl()); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.message,
            "vdiv: integer division by zero in `a[ramp(i * 4, 1, 4)] / broadcast(d, 4)`");
}

// An allocation's size is computed with overflow checks: n = 2^32 makes n * n * 4 bytes wrap
// to 0 in 64 bits, which must be an error naming it rather than a tiny buffer written past.
TEST_F(CodegenTest, AnAllocationWhoseSizeOverflowsIsAnError) {
  Module m = Build(R"(
func big(n: int64, out: buffer<float32>[1]) {
  alloc t: float32[n, n] global
  t[0, 0] = 1.5f32
  out[0] = t[0, 0]
}
)");
  Tensor out = Floats({0.0f});
  m.GetFunction("big")(int64_t{3}, out.dl());
  EXPECT_EQ(out.ToVector<float>()[0], 1.5f);
  bptest::Status s =
      bptest::CaptureError([&] { m.GetFunction("big")(int64_t{1} << 32, out.dl()); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.message,
            "big: allocation 't' (float32, shape [n, n]) needs 7.3787e+19 bytes, more than the "
            "address space holds (its size overflows); make it smaller");
  s = bptest::CaptureError([&] { m.GetFunction("big")(int64_t{-2}, out.dl()); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("big: allocation 't' (float32, shape [n, n]) has extent -2 in "
                           "dimension 0; an extent must be >= 0"),
            std::string::npos)
      << s.message;
}

// An allocation the system refuses (2^50 bytes: more than x86-64's or AArch64's 47/48-bit
// address space, so calloc fails whatever the overcommit setting) is BP_ERR_OUT_OF_MEMORY
// naming it. Not under AddressSanitizer, whose allocator aborts on such a size by default.
TEST_F(CodegenTest, AnAllocationTheSystemRefusesIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on a 1 PiB calloc instead of returning NULL";
#else
  Module m = Build(R"(
func big(n: int64, out: buffer<float32>[1]) {
  alloc t: float32[n, n] global
  t[0, 0] = 1.5f32
  out[0] = t[0, 0]
}
)");
  Tensor out = Floats({0.0f});
  bptest::Status s =
      bptest::CaptureError([&] { m.GetFunction("big")(int64_t{1} << 24, out.dl()); });
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(s.message,
            "big: out of host memory for allocation 't' (float32, shape [n, n]) of "
            "1125899906842624 bytes; free memory or make it smaller");
#endif
}

const char* kWrongExtent = R"(# backplane-ir 1
func vector_add(n: int32, m: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for i in parallel(0, m) {
    c[i] = a[i] + b[i]
  }
}
)";

// With -bounds-check, the first access out of bounds is the interpreter's error; the same
// kernel with a right extent gives the right result; the default build has no checks.
TEST_F(CodegenTest, BoundsCheckTurnsAnAccessOutOfBoundsIntoAnError) {
  Module checked = Build(kWrongExtent, "c -bounds-check");
  const int n = 4;
  std::vector<float> a = bptest::RandomFloats(n, 4), b = bptest::RandomFloats(n, 5);
  Tensor ta = Floats(a), tb = Floats(b), tc = Floats(std::vector<float>(n, 0.0f));
  bptest::Status s = bptest::CaptureError(
      [&] { checked.GetFunction("vector_add")(n, n + 1, ta.dl(), tb.dl(), tc.dl()); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.message,
            "vector_add: index 4 is out of bounds for dimension 0 of buffer 'a' (extent 4) in "
            "`a[i]`");
  checked.GetFunction("vector_add")(n, n, ta.dl(), tb.dl(), tc.dl());
  std::vector<float> c = tc.ToVector<float>();
  for (int i = 0; i < n; ++i) EXPECT_EQ(c[i], a[i] + b[i]);
  // Stores, several dimensions, vectors, and allocations are checked too.
  Module two = Build(R"(
func t2(n: int32, m: int32, a: buffer<float32>[n, 8], o: buffer<float32>[n, 8]) {
  alloc s: float32[8] local
  for i in serial(0, m) {
    s[ramp(0, 1, 8)] = a[i, ramp(0, 1, 8)]
    for j in serial(0, 8) {
      o[i, j] = s[j] * 2.0f32
    }
  }
}
)",
                     "c -bounds-check");
  std::vector<float> x = bptest::RandomFloats(3 * 8, 6);
  Tensor tx = Floats(x, {3, 8}), to = Floats(std::vector<float>(24, 0.0f), {3, 8});
  two.GetFunction("t2")(3, 3, tx.dl(), to.dl());
  std::vector<float> o = to.ToVector<float>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(o[i], x[i] * 2.0f);
  s = bptest::CaptureError([&] { two.GetFunction("t2")(3, 4, tx.dl(), to.dl()); });
  EXPECT_EQ(s.message,
            "t2: index 3 is out of bounds for dimension 0 of buffer 'a' (extent 3) in "
            "`a[i, ramp(0, 1, 8)]`");
  // Empty tensors without data (a null pointer): the access out of bounds is skipped, never
  // made, so the error comes back instead of a crash.
  int64_t zero[1] = {0};
  DLTensor empty{nullptr, DLDevice{kDLCPU, 0}, 1, kF32, zero, nullptr, 0};
  DLTensor empty_b = empty, empty_c = empty;
  s = bptest::CaptureError(
      [&] { checked.GetFunction("vector_add")(0, 1, &empty, &empty_b, &empty_c); });
  EXPECT_EQ(s.message,
            "vector_add: index 0 is out of bounds for dimension 0 of buffer 'a' (extent 0) in "
            "`a[i]`");
  // The default build carries no bounds checks.
  EXPECT_EQ(Build(kWrongExtent).InspectSource().find("bp_chk("), std::string::npos);
  EXPECT_NE(checked.InspectSource().find("bp_chk("), std::string::npos);
}

// The check survives saving and loading (the message table travels with the module).
TEST_F(CodegenTest, ASavedModuleKeepsItsChecksMessages) {
  Module checked = Build(kWrongExtent, "c -bounds-check");
  Module loaded = Module::LoadFromBytes(checked.SaveToBytes(), backplane::ModuleLoadOptions{true});
  Tensor ta = Floats({1, 2}), tb = Floats({3, 4}), tc = Floats({0, 0});
  bptest::Status s = bptest::CaptureError(
      [&] { loaded.GetFunction("vector_add")(2, 3, ta.dl(), tb.dl(), tc.dl()); });
  EXPECT_EQ(s.message,
            "vector_add: index 2 is out of bounds for dimension 0 of buffer 'a' (extent 2) in "
            "`a[i]`");
}
