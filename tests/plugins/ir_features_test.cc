// SPDX-License-Identifier: Apache-2.0
// The constructs of text form version 2 (loops with a step and downward, parallel
// schedules, assignable variables with compound assignment, negation, atomics) through bp_build
// on every kind here: c, opencl on PoCL and vulkan on lavapipe run each kernel on random data
// and give the interpreter's results bit for bit; cuda builds them to PTX that ptxas accepts.
//
// The same file builds cuda_ir_features_test (BACKPLANE_IR_FEATURES_ON_GPU), which the GPU
// bundle carries (tests/plugins/cuda/gpu_checks.sh): there the cuda kernels run on cuda:0 and
// the vulkan kernels on a GPU's own Vulkan driver, against the same interpreter; without a GPU
// (CI) its tests skip, as ir_features_test covers what runs here.
#include <algorithm>
#include <backplane/ir/half.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir_run_util.h"
#include "test_util.h"

namespace {

using namespace irtest;  // NOLINT(build/namespaces)

// A kernel: its function's params, and its body for the CPU (on GPU kinds the body runs in one
// thread of one block, or, with `threads`, the body's `parallel(0, N) schedule(...)` loops are
// bound to threadIdx.x instead).
struct Kernel {
  const char* name;
  const char* params;
  const char* body;
};

const Kernel kKernels[] = {
    {"steps",
     "x: buffer<float32>[64], down: buffer<float32>[64], up: buffer<float32>[64], "
     "n: buffer<int32>[8]",
     // Downward with a running sum (the order shows in the float result), upward by 3, by a
     // step read from memory, a loop that runs none, bounds the body changes, an int64 step.
     "  var s: float32 = 0.0\n"
     "  for i in serial(63, 64, -1) {\n"
     "    s += x[i]\n"
     "    down[i] = s\n"
     "  }\n"
     "  for j in serial(1, 21, 3) {\n"
     "    up[j] = x[j] * 2.0 - s\n"
     "  }\n"
     "  let st: int32 = n[0]\n"
     "  var c: int32 = 0\n"
     "  for k in serial(n[1], n[2], st) {\n"
     "    c += k * k\n"
     "  }\n"
     "  for z in serial(0, 0 - 3, 2) {\n"
     "    c += 1000\n"
     "  }\n"
     "  n[3] = c\n"
     "  var m: int32 = 5\n"
     "  var runs: int32 = 0\n"
     "  for r in serial(0, m) {\n"
     "    m += 1\n"
     "    runs += 1\n"
     "  }\n"
     "  n[4] = runs\n"
     "  n[5] = m\n"
     "  var big: int64 = 0\n"
     "  for w: int64 in serial(0, 4, 3000000000) {\n"
     "    big += w\n"
     "  }\n"
     "  n[6] = int32(big / 1000000)\n"
     "  for d in unrolled(7, 4, -2) {\n"
     "    n[7] = n[7] * 10 + d\n"
     "  }\n"},
    {"negate",
     "x: buffer<float32>[16], y: buffer<float32>[16], k: buffer<int32>[16], "
     "o: buffer<int32>[16]",
     "  for i in serial(0, 16) {\n"
     "    y[i] = -x[i]\n"
     "    o[i] = -k[i]\n"
     "  }\n"
     "  o[14] = int32(-int8(k[14]))\n"
     "  o[15] = int32(-(0 - int16(k[15])))\n"},
    {"compound", "x: buffer<float32>[32], a: buffer<float32>[32], k: buffer<int32>[32]",
     "  for i in serial(0, 32) {\n"
     "    a[i] += x[i]\n"
     "    a[i] *= 1.5\n"
     "    a[i] -= x[i] * 0.25\n"
     "    a[i] /= 3.0\n"
     "    k[i] += i\n"
     "    k[i] *= 3\n"
     "    k[i] -= 7\n"
     "    k[i] /= 2\n"
     "    var t: float32 = a[i]\n"
     "    t -= 1.0\n"
     "    t *= t\n"
     "    a[i] = -t\n"
     "  }\n"},
    // float32 division, correctly rounded on every kind (vulkan's OpFDiv need not be: its
    // emitter divides in integers), over every exponent: subnormal, overflowing and
    // underflowing quotients, zero and infinite operands; floordiv and floormod on floats.
    {"divide",
     "x: buffer<float32>[2048], y: buffer<float32>[2048], q: buffer<float32>[2048], "
     "u: buffer<float32>[512], v: buffer<float32>[512], fd: buffer<float32>[512], "
     "fm: buffer<float32>[512]",
     "  for i in serial(0, 2048) {\n"
     "    q[i] = x[i] / y[i]\n"
     "  }\n"
     "  for j in serial(0, 512) {\n"
     "    fd[j] = floordiv(u[j], v[j])\n"
     "    fm[j] = floormod(u[j], v[j])\n"
     "  }\n"},
    // Triangular loops, each parallel loop with another schedule.
    {"triangle", "x: buffer<float32>[32], out: buffer<float32>[96]",
     "  for i in parallel(0, 32) schedule(dynamic, 4) {\n"
     "    var acc: float32 = 0.0\n"
     "    for j in serial(0, i + 1) {\n"
     "      acc += x[j]\n"
     "    }\n"
     "    out[i] = acc\n"
     "  }\n"
     "  for i2 in parallel(0, 32) schedule(guided) {\n"
     "    var acc2: float32 = 0.0\n"
     "    for j2 in serial(i2, i2 + 1, -1) {\n"
     "      acc2 += x[j2]\n"
     "    }\n"
     "    out[32 + i2] = acc2\n"
     "  }\n"
     "  for i3 in parallel(0, 32) schedule(static, 3) {\n"
     "    var acc3: float32 = 1.0\n"
     "    for j3 in serial(31, 32 - i3, -1) {\n"
     "      acc3 *= 1.0 + x[j3] * 0.125\n"
     "    }\n"
     "    out[64 + i3] = acc3\n"
     "  }\n"},
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The kernel's text for `kind`: on GPU kinds the parallel loops of "triangle" are bound to
// threads, and every other body runs in one thread.
std::string Text(const Kernel& k, const std::string& kind) {
  std::string head = std::string("func ") + k.name + "(" + k.params + ") {\n";
  const bool gpu = kind != "c";
  if (!gpu) return head + k.body + "}\n";
  if (kind == "vulkan") {  // GLSL has no int8 or int16 here: those two lines are for the others
    std::string body = k.body;
    for (const char* line :
         {"  o[14] = int32(-int8(k[14]))\n", "  o[15] = int32(-(0 - int16(k[15])))\n"})
      body = Replace(body, line, "");
    return head + "  for block in thread(blockIdx.x, 0, 1) {\n" + body + "  }\n}\n";
  }
  if (std::string(k.name) == "triangle") {
    std::string body = k.body;
    body = Replace(body, "parallel(0, 32) schedule(dynamic, 4)", "thread(threadIdx.x, 0, 32)");
    body = Replace(body, "parallel(0, 32) schedule(guided)", "thread(threadIdx.x, 0, 32)");
    body = Replace(body, "parallel(0, 32) schedule(static, 3)", "thread(threadIdx.x, 0, 32)");
    return head + body + "}\n";
  }
  return head + "  for block in thread(blockIdx.x, 0, 1) {\n" + k.body + "  }\n}\n";
}

// Random arguments for the kernel (fixed seed), with the values its loops need.
std::vector<Buf> Args(const std::string& name) {
  std::mt19937 rng(2021);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  auto floats = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  auto ints = [&](size_t n) {
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = static_cast<int32_t>(rng() % 20001) - 10000;
    return v;
  };
  if (name == "steps") {
    return {Floats(floats(64)), Floats(std::vector<float>(64, 0.5f)),
            Floats(std::vector<float>(64, -1.0f)), Ints({5, 2, 7, 0, 0, 0, 0, 0})};
  }
  if (name == "negate") {
    std::vector<float> x = floats(16);
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = INFINITY;
    x[3] = -INFINITY;
    std::vector<int32_t> k = ints(16);
    k[0] = INT32_MIN;
    k[1] = INT32_MAX;
    k[2] = 0;
    k[14] = -128;  // -int8(-128) wraps to -128
    k[15] = -32768;
    return {Floats(x), Floats(std::vector<float>(16, 0.0f)), Ints(k),
            Ints(std::vector<int32_t>(16))};
  }
  if (name == "compound") return {Floats(floats(32)), Floats(floats(32)), Ints(ints(32))};
  if (name == "divide") {
    // A float of random sign and fraction with a biased exponent in [lo, hi] (0: subnormal).
    auto bits = [&](uint32_t lo, uint32_t hi) {
      const uint32_t e = lo + static_cast<uint32_t>(rng() % (hi - lo + 1));
      uint32_t f = static_cast<uint32_t>(rng()) & 0x7fffffu;
      if (e == 0 && f == 0) f = 1;
      return (static_cast<uint32_t>(rng()) & 0x80000000u) | (e << 23) | f;
    };
    auto as_float = [](uint32_t b) {
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    };
    std::vector<float> x(2048), y(2048), u(512), v(512);
    for (size_t i = 0; i < 2048; ++i) {
      if (i % 2 == 0) {  // every exponent: quotients that overflow, underflow, are subnormal
        x[i] = as_float(bits(0, 254));
        y[i] = as_float(bits(0, 254));
      } else {  // near each other: quotients around 1, the usual case
        const uint32_t e = 20 + static_cast<uint32_t>(rng() % 215);
        x[i] = as_float(bits(e - 12, e + 12));
        y[i] = as_float(bits(e - 12, e + 12));
      }
    }
    // Exact quotients, ties that are not, the edges of the range, zero and infinite operands
    // (no NaN: its bits are the platform's).
    const float specials[][2] = {{1.0f, 3.0f},        {6.0f, 3.0f},
                                 {1.0f, 0.0f},        {-1.0f, 0.0f},
                                 {0.0f, 5.0f},        {-0.0f, 5.0f},
                                 {INFINITY, 2.0f},    {2.0f, INFINITY},
                                 {-2.0f, INFINITY},   {3.4e38f, 1e-38f},
                                 {1e-38f, 3.4e38f},   {1.4e-45f, 2.0f},
                                 {1.4e-45f, 0.5f},    {1.17549435e-38f, 1.0000001f},
                                 {16777215.0f, 2.0f}, {1.0f, 1.4e-45f},
                                 {7.0f, -7.0f}};
    for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); ++k) {
      x[2 * k] = specials[k][0];
      y[2 * k] = specials[k][1];
    }
    for (size_t j = 0; j < 512; ++j) {  // finite, nonzero: no NaN from floor(x / y) * y
      const uint32_t e = 100 + static_cast<uint32_t>(rng() % 50);
      u[j] = as_float(bits(e - 20, e + 20));
      v[j] = as_float(bits(e - 5, e + 5));
    }
    return {Floats(x),
            Floats(y),
            Floats(std::vector<float>(2048, 0.0f)),
            Floats(u),
            Floats(v),
            Floats(std::vector<float>(512, 0.0f)),
            Floats(std::vector<float>(512, 0.0f))};
  }
  return {Floats(floats(32)), Floats(std::vector<float>(96, 0.0f))};
}

#ifdef BACKPLANE_IR_FEATURES_ON_GPU
constexpr bool kOnGpu = true;
#else
constexpr bool kOnGpu = false;
#endif

// Whether this program runs the kernels of `kind` (ExpectTheInterpretersResults still skips a
// kind this build or machine lacks): ir_features_test runs every kind but cuda;
// cuda_ir_features_test runs cuda where cuda:0 exists and vulkan on a device that is not a CPU.
bool Runs(const std::string& kind) {
  if (!kOnGpu) return kind != "cuda";
  Device dev(DLDevice{kDLCPU, 0});
  if (!HasKind(kind) || !DeviceOf(kind, &dev)) return false;
  if (kind == "vulkan") {
    return backplane::DeviceAPI::Get(dev).GetProperty("device_type").AsString() != "cpu";
  }
  return true;
}

class IrFeatures : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    (void)kValidationOn;
    UseScratchCache();
    if (kOnGpu && !Runs(GetParam())) {
      GTEST_SKIP() << "no " << GetParam() << " GPU here; tests/plugins/cuda/gpu_checks.sh runs "
                   << "this on one";
    }
  }
};

TEST_P(IrFeatures, RunWithTheInterpretersResults) {
  const std::string kind = GetParam();
  for (const Kernel& k : kKernels) {
    SCOPED_TRACE(k.name);
    const std::string text = Text(k, kind);
    if (kind == "cuda") ExpectPtxasAccepts(text, k.name);
    if (Runs(kind)) ExpectTheInterpretersResults(kind, text, Case{k.name, Args(k.name), ""});
  }
}

// With bounds checking on, the same kernels give the same results (the checked loads, stores
// and atomics of the C-family emitter and of the vulkan dialect around the new statements).
TEST_P(IrFeatures, RunWithBoundsChecks) {
  const std::string kind = GetParam();
  if (!Runs(kind)) GTEST_SKIP() << kind << " kernels do not run here";
  for (const Kernel& k : kKernels) {
    SCOPED_TRACE(k.name);
    ExpectTheInterpretersResults(kind, Text(k, kind), Case{k.name, Args(k.name), " -bounds-check"});
  }
}

// Atomics: 256 iterations (CPU: a parallel loop; GPU: 4 blocks of 64
// threads) accumulate into a few elements with atomic_add, atomic_min and atomic_max on int32,
// int64 and float32, in global memory and (GPU) shared memory. The float values are multiples
// of 1/8 below 4 in magnitude, so every order of the additions gives the same sum and the
// results compare bit for bit with the interpreter's.
const char* const kAtomicBody =
    "    atomic_add(hist[floormod(k[i], 16)], 1)\n"
    "    atomic_add(stats[0], x[i])\n"
    "    atomic_min(stats[1], x[i])\n"
    "    atomic_max(stats[2], x[i])\n"
    "    atomic_min(ext[0], k[i])\n"
    "    atomic_max(ext[1], k[i])\n"
    "    atomic_add(big[0], int64(k[i]) * 3000000i64)\n"
    "    atomic_max(big[1], int64(k[i]) * 3000000i64)\n";
const char* const kAtomicParams =
    "k: buffer<int32>[256], x: buffer<float32>[256], hist: buffer<int32>[16], "
    "stats: buffer<float32>[3], ext: buffer<int32>[2], big: buffer<int64>[2], "
    "hist2: buffer<int32>[16], stats2: buffer<float32>[2]";

// The kernel for `kind`. Its float32 atomic_add and atomic_max on shared memory (`fs`) need no
// device extension on vulkan: the code generator keeps `fs` as uint and compare-and-swaps.
std::string AtomicsText(const std::string& kind) {
  const std::string head = std::string("func atomics(") + kAtomicParams + ") {\n";
  if (kind == "c") {
    return head + "  for i in parallel(0, 256) schedule(dynamic, 8) {\n" + kAtomicBody + "  }\n}\n";
  }
  return head +
         "  for b in thread(blockIdx.x, 0, 4) {\n"
         "  for t in thread(threadIdx.x, 0, 64) {\n"
         "    let i: int32 = b * 64 + t\n" +
         kAtomicBody +
         "    alloc sh: int32[16] shared\n"
         "    alloc fs: float32[2] shared\n"
         "    if (t < 16) {\n      sh[t] = 0\n    }\n"
         "    if (t < 2) {\n      fs[t] = 0.0\n    }\n"
         "    barrier\n"
         "    atomic_add(sh[floormod(k[i], 16)], 1)\n"
         "    atomic_add(fs[0], x[i])\n"
         "    atomic_max(fs[1], x[i])\n"
         "    barrier\n"
         "    if (t < 16) {\n      atomic_add(hist2[t], sh[t])\n    }\n"
         "    if (t == 0) {\n      atomic_add(stats2[0], fs[0])\n"
         "      atomic_max(stats2[1], fs[1])\n    }\n"
         "  }\n  }\n}\n";
}

std::vector<Buf> AtomicArgs() {
  std::mt19937 rng(5);
  std::vector<int32_t> k(256);
  std::vector<float> x(256);
  for (size_t i = 0; i < 256; ++i) {
    k[i] = static_cast<int32_t>(rng() % 2001) - 1000;
    x[i] = static_cast<float>((k[i] % 64 + 64) % 64) * 0.125f - 4.0f;
  }
  return {Ints(k),
          Floats(x),
          Ints(std::vector<int32_t>(16, 0)),
          Floats({0.0f, 1e30f, -1e30f}),
          Ints({INT32_MAX, INT32_MIN}),
          Longs({0, INT64_MIN}),
          Ints(std::vector<int32_t>(16, 0)),
          Floats({0.0f, 0.0f})};
}

TEST_P(IrFeatures, AtomicsAccumulateFromEveryThread) {
  const std::string kind = GetParam();
  const std::string text = AtomicsText(kind);
  if (kind == "cuda") ExpectPtxasAccepts(text, "atomics");
  if (!Runs(kind)) return;
  // Every device runs it all: float min/max on shared memory needs no extension on vulkan (an
  // H200's driver, which lacks VK_EXT_shader_atomic_float2, had refused it).
  ExpectTheInterpretersResults(kind, text, Case{"atomics", AtomicArgs(), ""});
  ExpectTheInterpretersResults(kind, text, Case{"atomics", AtomicArgs(), " -bounds-check"});
}

// The C forms of the IR (docs/ir.md): C's % (by a divisor that varies, -1 among them, of
// dividends that cover int32, INT_MIN too), a loop by its end, integer literals where a float
// is wanted, and float64 atomic_add, atomic_min and atomic_max from 65,536 iterations (CPU: a
// parallel loop big enough to start the OpenMP threads; GPU: 256 blocks of 256 threads) into
// 4 and 2 elements. The float64 addends are integers, so every order gives the same sum and
// the results compare bit for bit with the interpreter's.
std::string CFormsText(const std::string& kind) {
  const std::string body =
      "    let d: int32 = select(floormod(i, 7) == 3, -1, floormod(i, 11) - 20)\n"
      "    r[i] = k[i] % d + i % 9\n"
      "    var t: float32 = 0\n"
      "    for j in serial(i % 5 .. 9, 2) {\n"
      "      t += float32(j)\n"
      "    }\n"
      "    y[i] = 1 - t * 2 + max(float32(r[i]), 0)\n"
      "    atomic_add(s[floormod(k[i], 4)], float64(k[i] % 1000))\n"
      "    atomic_min(e[0], float64(k[i]))\n"
      "    atomic_max(e[1], float64(k[i]) * 2)\n";
  const std::string head =
      "func cforms(k: buffer<int32>[65536], r: buffer<int32>[65536], y: buffer<float32>[65536], "
      "s: buffer<float64>[4], e: buffer<float64>[2]) {\n";
  if (kind == "c") return head + "  for i in parallel(0 .. 65536) {\n" + body + "  }\n}\n";
  return head +
         "  for b in thread(blockIdx.x, 0, 256) {\n"
         "  for tx in thread(threadIdx.x, 0 .. 256) {\n"
         "    let i: int32 = b * 256 + tx\n" +
         body + "  }\n  }\n}\n";
}

TEST_P(IrFeatures, CFormsRunAsTheInterpreter) {
  const std::string kind = GetParam();
  const std::string text = CFormsText(kind);
  if (kind == "cuda") ExpectPtxasAccepts(text, "cforms");
  if (!Runs(kind)) return;
  std::mt19937 rng(40);
  std::vector<int32_t> k(65536);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = i % 3 == 0 ? static_cast<int32_t>(rng()) : static_cast<int32_t>(rng() % 20001) - 10000;
  }
  k[5] = INT32_MIN;  // by -1 at i = 3, 10, 17, ...: 5 is by floormod(5, 11) - 20 = -15
  k[3] = INT32_MIN;  // INT_MIN % -1 is 0, no trap
  const std::vector<Buf> args = {Ints(k), Ints(std::vector<int32_t>(65536, 0)),
                                 Floats(std::vector<float>(65536, 0.0f)),
                                 Doubles({0.0, 0.0, 0.0, 0.0}), Doubles({1e300, -1e300})};
  ExpectTheInterpretersResults(kind, text, Case{"cforms", args, ""});
  ExpectTheInterpretersResults(kind, text, Case{"cforms", args, " -bounds-check"});
}

// An atomic whose index is out of bounds, with -bounds-check: the call fails with the
// interpreter's message and no element is updated out of bounds.
TEST_P(IrFeatures, AnAtomicOutOfBoundsIsAnError) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const std::string loop = kind == "c" ? "serial(0, 4)" : "thread(threadIdx.x, 0, 4)";
  const std::string text = "func oob(k: buffer<int32>[4], h: buffer<int32>[4]) {\n  for i in " +
                           loop + " {\n    atomic_add(h[k[i]], 1)\n  }\n}\n";
  Module m = backplane::Build(text, Target::Parse(kind + " -bounds-check"));
  const std::vector<Buf> args = {Ints({0, 1, 7, 2}), Ints({0, 0, 0, 0})};
  std::string message;
  try {
    Call(m, "oob", dev, args);
  } catch (const backplane::Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("index 7 is out of bounds for dimension 0 of buffer 'h' (extent 4)"),
            std::string::npos)
      << message;
}

// A contiguous vector load or store that runs past a buffer's end, with -bounds-check: the call
// fails with the interpreter's message, which names the first lane out of bounds (not the
// last, `i + lanes - 1`). Starts drawn at random, before the buffer
// too.
TEST_P(IrFeatures, AVectorAccessOutOfBoundsNamesTheInterpretersLane) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const std::string loop = kind == "c" ? "serial(0, 1)" : "thread(threadIdx.x, 0, 1)";
  const std::string text =
      "func vload(k: buffer<int32>[1], a: buffer<float32>[8], o: buffer<float32>[8]) {\n"
      "  for t in " +
      loop +
      " {\n    o[ramp(t, 1, 4)] = a[ramp(k[0], 1, 4)]\n  }\n}\n"
      "func vstore(k: buffer<int32>[1], a: buffer<float32>[8], o: buffer<float32>[8]) {\n"
      "  for t in " +
      loop + " {\n    o[ramp(k[0] + t, 1, 4)] = a[ramp(0, 1, 4)]\n  }\n}\n";
  const ir::IRModule reference = ir::Parse(text);
  const Module m = backplane::Build(text, Target::Parse(kind + " -bounds-check"));
  std::mt19937 rng(38);
  for (int trial = 0; trial < 8; ++trial) {
    const int32_t start = trial < 2 ? 5 + trial : static_cast<int32_t>(rng() % 16) - 8;
    if (start >= 0 && start <= 4) continue;  // in bounds
    for (const char* func : {"vload", "vstore"}) {
      const std::vector<Buf> args = {Ints({start}), Floats(std::vector<float>(8, 1.0f)),
                                     Floats(std::vector<float>(8, 0.0f))};
      std::string want, got;
      try {
        Interpret(reference, func, args);
      } catch (const ir::Error& e) {
        want = e.what();
      }
      try {
        Call(m, func, dev, args);
      } catch (const backplane::Error& e) {
        got = e.what();
      }
      // From "index N is out of bounds ...": the device names its kernel otherwise.
      ASSERT_NE(want.find("index "), std::string::npos) << want;
      EXPECT_NE(got.find(want.substr(want.find("index "))), std::string::npos)
          << func << " from " << start << ": " << got << "\nthe interpreter: " << want;
    }
  }
}

// `args` after `func` of `reference` ran on them in the interpreter, with int scalars
// `scalars` first: what a device's run must give, bit for bit.
std::vector<Buf> InterpreterRun(const ir::IRModule& reference, const std::string& func,
                                const std::vector<int64_t>& scalars, std::vector<Buf> args) {
  std::vector<int64_t> shapes;
  shapes.reserve(args.size());
  std::vector<ir::ArgView> views;
  for (int64_t v : scalars) views.push_back(ir::IntArg(v));
  for (Buf& b : args) {
    shapes.push_back(b.Elements());
    views.push_back(ir::BufferArg(b.bits.data(), b.IrType(), 1, &shapes.back()));
  }
  ir::Interpreter(reference).Run(func, views);
  return args;
}

// Shared memory sized at launch: a block's arrays `tile` [n, 64] and `cnt`
// [m] take their sizes from the scalar arguments of each call, after a constant-sized array
// (`fixed`); the threads exchange values through them across a barrier. Run with two sizes in
// a row (vulkan: a pipeline per size; opencl: __local arguments of each call's size; cuda:
// offsets computed in the kernel as the launch kit lays them out) against the interpreter,
// from a module saved and loaded again.
const char* const kSharedAtLaunch =
    "func tiles(n: int32, m: int32, x: buffer<float32>[n * 256], y: buffer<float32>[n * 256], "
    "h: buffer<int32>[m * 4]) {\n"
    "  for b in thread(blockIdx.x, 0, 4) {\n"
    "    for t in thread(threadIdx.x, 0, 64) {\n"
    "      alloc fixed: float32[64] shared\n"
    "      alloc tile: float32[n, 64] shared\n"
    "      alloc cnt: int32[m] shared\n"
    "      fixed[t] = float32(t) * 0.5\n"
    "      for j in serial(0, n) {\n"
    "        tile[j, t] = x[(b * n + j) * 64 + t]\n"
    "      }\n"
    "      if (t < m) {\n"
    "        cnt[t] = 0\n"
    "      }\n"
    "      barrier\n"
    "      for j2 in serial(0, n) {\n"
    "        y[(b * n + j2) * 64 + t] = tile[n - 1 - j2, 63 - t] * 2.0 + fixed[63 - t]\n"
    "      }\n"
    "      atomic_add(cnt[floormod(t * 7 + b, m)], t + 1)\n"
    "      barrier\n"
    "      if (t < m) {\n"
    "        h[b * m + t] = cnt[t]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

TEST_P(IrFeatures, SharedMemorySizedAtLaunch) {
  const std::string kind = GetParam();
  if (kind == "c") GTEST_SKIP() << "CPU code has no shared memory";
  if (kind == "cuda") ExpectPtxasAccepts(kSharedAtLaunch, "tiles");
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const ir::IRModule reference = ir::Parse(kSharedAtLaunch);
  for (const char* options : {"", " -bounds-check"}) {
    SCOPED_TRACE(kind + options);
    const Module built = backplane::Build(kSharedAtLaunch, Target::Parse(kind + options));
    // Saved and loaded again: the sizes come from the kernel's IR, which the module keeps.
    const Module m = Module::LoadFromBytes(built.SaveToBytes());
    std::mt19937 rng(6);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    // Two sizes and then the first again: each launch takes its own.
    for (const auto& [n, mm] : std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {7, 64}, {3, 5}}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", m = " + std::to_string(mm));
      std::vector<float> x(static_cast<size_t>(n * 256));
      for (float& v : x) v = dist(rng);
      const std::vector<Buf> args = {Floats(x), Floats(std::vector<float>(x.size(), 0.0f)),
                                     Ints(std::vector<int32_t>(static_cast<size_t>(mm * 4), -1))};
      const std::vector<Buf> got = Call(m, "tiles", dev, args, {n, mm});
      const std::vector<Buf> want = InterpreterRun(reference, "tiles", {n, mm}, args);
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[k].bits, want[k].bits) << "buffer " << k << " differs from the interpreter's";
      }
      // The counts are the sums of t + 1 over the threads whose slot it is, in each block.
      int64_t total = 0;
      for (int64_t i = 0; i < mm * 4; ++i) total += static_cast<int32_t>(got[2].bits[i]);
      EXPECT_EQ(total, 4 * (64 * 65 / 2));
    }
  }
}

// A launch whose shared arrays do not fit a block, or whose size is negative, is refused with a
// message that names the array, its size and the device's limit; the module still runs after.
TEST_P(IrFeatures, SharedMemorySizedAtLaunchIsCheckedAgainstTheDevice) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  if (kind == "c" || !Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const std::string text =
      "func big(n: int32, y: buffer<float32>[64]) {\n"
      "  for t in thread(threadIdx.x, 0, 64) {\n"
      "    alloc s: float32[n] shared\n"
      "    s[floormod(t, n)] = float32(t)\n"
      "    barrier\n"
      "    y[t] = s[floormod(63 - t, n)]\n"
      "  }\n"
      "}\n";
  Module m = backplane::Build(text, Target::Parse(kind));
  auto message = [&](int64_t n) {
    try {
      Call(m, "big", dev, {Floats(std::vector<float>(64, 0.0f))}, {n});
    } catch (const backplane::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string huge = message(int64_t{1} << 28);
  EXPECT_NE(huge.find("shared allocation 's' (float32 with n = 268435456) takes 1073741824 "
                      "bytes at this launch"),
            std::string::npos)
      << huge;
  EXPECT_NE(huge.find("more than a block of " + kind), std::string::npos) << huge;
  const std::string negative = message(-3);
  EXPECT_NE(negative.find("shared allocation 's' has a negative extent at this launch (n = -3)"),
            std::string::npos)
      << negative;
  // And a size that fits runs: 64 slots, each thread reads what thread 63 - t wrote.
  const std::vector<Buf> got = Call(m, "big", dev, {Floats(std::vector<float>(64, 0.0f))}, {64});
  float y[64];
  std::memcpy(y, got[0].bits.data(), sizeof(y));
  for (int t = 0; t < 64; ++t) EXPECT_EQ(y[t], static_cast<float>(63 - t)) << t;
  // 70 sizes in a row, each its own specialization on vulkan (past the 64 pipelines a kernel
  // keeps, the module drops them and goes on): thread t reads what thread 63 - t wrote to
  // slot floormod(63 - t, n).
  for (int64_t n = 1; n <= 70; ++n) {
    const std::vector<Buf> out = Call(m, "big", dev, {Floats(std::vector<float>(64, 0.0f))}, {n});
    std::memcpy(y, out[0].bits.data(), sizeof(y));
    for (int t = 0; t < 64; ++t) {
      // The last writer of slot floormod(63 - t, n) is unspecified when several threads share
      // it; every one wrote a value congruent to the slot modulo n.
      ASSERT_EQ(static_cast<int64_t>(y[t]) % n, (63 - t) % n) << "n = " << n << ", t = " << t;
    }
  }
}

// A device workspace (docs/ir.md, "Device workspaces"): a `global` allocation of host code that
// two kernels share. The first sums a strided slice a thread into part, the second sums part;
// the host part allocates part on the device for the call, sized by the call's `nb`. Three
// calls of two sizes, with and without bounds checks, from a saved and reloaded module, bit
// for bit against the interpreter running the unsplit function.
constexpr const char* kWorkspace =
    "func grid_sum(n: int32, nb: int32, a: buffer<float32>[n], out: buffer<float32>[2]) {\n"
    "  alloc part: float32[nb * 4] global\n"
    "  for bx in thread(blockIdx.x, 0, nb) {\n"
    "    for tx in thread(threadIdx.x, 0, 4) {\n"
    "      let g: int32 = bx * 4 + tx\n"
    "      var s: float32 = 0.0\n"
    "      for i in serial(0, n / (nb * 4) + select(g < floormod(n, nb * 4), 1, 0)) {\n"
    "        s += a[g + i * (nb * 4)]\n"
    "      }\n"
    "      part[g] = s\n"
    "    }\n"
    "  }\n"
    "  for t in thread(threadIdx.x, 0, 1) {\n"
    "    var s: float32 = 0.0\n"
    "    for k in serial(0, nb * 4) {\n"
    "      s += part[k]\n"
    "    }\n"
    "    out[0] = s\n"
    "    out[1] = part[nb * 4 - 1]\n"
    "  }\n"
    "}\n";

TEST_P(IrFeatures, AWorkspaceOfHostCodeIsSharedByItsKernels) {
  const std::string kind = GetParam();
  if (kind == "c") GTEST_SKIP() << "CPU code is not split into kernels";
  if (kind == "cuda") ExpectPtxasAccepts(kWorkspace, "grid_sum");
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const ir::IRModule reference = ir::Parse(kWorkspace);
  for (const char* options : {"", " -bounds-check"}) {
    SCOPED_TRACE(kind + options);
    const Module built = backplane::Build(kWorkspace, Target::Parse(kind + options));
    const Module m = Module::LoadFromBytes(built.SaveToBytes());
    std::mt19937 rng(8);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    for (const auto& [n, nb] :
         std::vector<std::pair<int64_t, int64_t>>{{1000, 3}, {77, 40}, {1000, 3}}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", nb = " + std::to_string(nb));
      std::vector<float> a(static_cast<size_t>(n));
      for (float& v : a) v = dist(rng);
      const std::vector<Buf> args = {Floats(a), Floats(std::vector<float>(2, -1.0f))};
      const std::vector<Buf> got = Call(m, "grid_sum", dev, args, {n, nb});
      const std::vector<Buf> want = InterpreterRun(reference, "grid_sum", {n, nb}, args);
      EXPECT_EQ(got[1].bits, want[1].bits) << "out differs from the interpreter's";
      double sum = 0;
      for (float v : a) sum += v;
      float out0;
      std::memcpy(&out0, got[1].bits.data(), sizeof(out0));
      EXPECT_NEAR(out0, sum, 1e-3);
    }
  }
}

// A workspace sized by an argument: a negative or overflowing size is refused with a message
// that names it, a size past what the interpreter allows too, before anything is allocated; a
// function without tensors has no device for one. The module runs again afterwards.
TEST_P(IrFeatures, AWorkspaceOfABadSizeIsRefused) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  if (kind == "c" || !Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const Module m = backplane::Build(kWorkspace, Target::Parse(kind));
  auto message = [&](int64_t nb) {
    return bptest::CaptureError([&] {
             Call(m, "grid_sum", dev,
                  {Floats(std::vector<float>(10, 1.0f)), Floats(std::vector<float>(2, 0.0f))},
                  {10, nb});
           })
        .message;
  };
  std::string e = message(-3);
  EXPECT_NE(e.find("host function 'grid_sum': grid_sum: cannot allocate 'part': its extent "
                   "`nb * 4` is -12, negative; size it with a value >= 0"),
            std::string::npos)
      << e;
  e = message(int64_t{1} << 29);  // nb * 4 wraps in int32 to -2^31
  EXPECT_NE(e.find("cannot allocate 'part': its extent `nb * 4` is -2147483648, negative"),
            std::string::npos)
      << e;
  const std::string wide =
      "func wide(m: int64, a: buffer<float32>[1]) {\n"
      "  alloc w: float32[m, m] global\n"
      "  for t in thread(threadIdx.x, 0, 1) {\n    w[0, 0] = a[0]\n    a[0] = w[0, 0]\n  }\n}\n"
      "\n"
      "func none(m: int32) {\n"
      "  alloc w: float32[m] global\n"
      "  for t in thread(threadIdx.x, 0, 1) {\n    w[0] = 1.0\n  }\n}\n";
  const Module w = backplane::Build(wide, Target::Parse(kind));
  e = bptest::CaptureError([&] {
        Call(w, "wide", dev, {Floats(std::vector<float>(1, 1.0f))}, {int64_t{1} << 21});
      }).message;
  EXPECT_NE(e.find("cannot allocate 'w': it is too large (more than 1099511627776 bytes)"),
            std::string::npos)
      << e;
  e = bptest::CaptureError([&] { Call(w, "none", dev, {}, {4}); }).message;
  EXPECT_NE(e.find("host function 'none': workspace 'w' has no device to live on: the function "
                   "has no tensor argument"),
            std::string::npos)
      << e;
  // And it still runs: the wide one with m = 2, the sum with a good size.
  const std::vector<Buf> got = Call(w, "wide", dev, {Floats(std::vector<float>(1, 2.5f))}, {2});
  float y;
  std::memcpy(&y, got[0].bits.data(), sizeof(y));
  EXPECT_EQ(y, 2.5f);
  const std::vector<Buf> sum =
      Call(m, "grid_sum", dev,
           {Floats(std::vector<float>(10, 1.0f)), Floats(std::vector<float>(2, 0.0f))}, {10, 2});
  std::memcpy(&y, sum[1].bits.data(), sizeof(y));
  EXPECT_EQ(y, 10.0f);
}

// A `local` array of device code sized by a param (docs/ir.md, "Local arrays sized at run
// time"): each thread's slice of a workspace the host part allocates, zero-filled where the
// array is allocated (p[n] is never written and must read 0). Two sizes and the first again,
// with and without bounds checks, from a saved and reloaded module, bit for bit against the
// interpreter, which runs the unsplit function with a real local array a thread.
constexpr const char* kLocalAtRunTime =
    "func scratch(n: int32, m: int32, x: buffer<float32>[m * 8 * n], y: buffer<float32>[m * 8]) {\n"
    "  for b in thread(blockIdx.x, 0, m) {\n"
    "    for t in thread(threadIdx.x, 0, 8) {\n"
    "      alloc p: float32[n + 1] local\n"
    "      let base: int32 = (b * 8 + t) * n\n"
    "      for i in serial(0, n) {\n"
    "        p[i] = x[base + i] * 2.0\n"
    "      }\n"
    "      var s: float32 = p[n]\n"
    "      for i in serial(0, n) {\n"
    "        s += p[n - 1 - i] * float32(i + 1)\n"
    "      }\n"
    "      y[b * 8 + t] = s\n"
    "    }\n"
    "  }\n"
    "}\n";

TEST_P(IrFeatures, LocalArraysSizedAtRunTime) {
  const std::string kind = GetParam();
  if (kind == "c")
    GTEST_SKIP() << "CPU code has no thread-bound loops (its local arrays of any "
                    "size: cpu/codegen_test.cc)";
  if (kind == "cuda") ExpectPtxasAccepts(kLocalAtRunTime, "scratch");
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const ir::IRModule reference = ir::Parse(kLocalAtRunTime);
  for (const char* options : {"", " -bounds-check"}) {
    SCOPED_TRACE(kind + options);
    const Module built = backplane::Build(kLocalAtRunTime, Target::Parse(kind + options));
    const Module m = Module::LoadFromBytes(built.SaveToBytes());
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    for (const auto& [n, mm] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {33, 2}, {5, 3}}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", m = " + std::to_string(mm));
      std::vector<float> x(static_cast<size_t>(mm * 8 * n));
      for (float& v : x) v = dist(rng);
      const std::vector<Buf> args = {
          Floats(x), Floats(std::vector<float>(static_cast<size_t>(mm * 8), -1.0f))};
      const std::vector<Buf> got = Call(m, "scratch", dev, args, {n, mm});
      const std::vector<Buf> want = InterpreterRun(reference, "scratch", {n, mm}, args);
      EXPECT_EQ(got[1].bits, want[1].bits) << "y differs from the interpreter's";
    }
  }
  // A size a thread computes for itself cannot be allocated before the threads start.
  const std::string message = bptest::CaptureError([&] {
                                backplane::Build(
                                    "func f(a: buffer<float32>[4]) {\n"
                                    "  for t in thread(threadIdx.x, 0, 4) {\n"
                                    "    alloc p: float32[t + 1] local\n"
                                    "    p[t] = a[t]\n"
                                    "    a[t] = p[t]\n  }\n}\n",
                                    Target::Parse(kind));
                              }).message;
  EXPECT_NE(message.find("local allocation of 'p' is sized by variable 't', defined inside its "
                         "region: a runtime-sized local array of device code is a slice a thread "
                         "of a workspace the host allocates before the threads start"),
            std::string::npos)
      << message;
}

// A workgroup sized at launch: threadIdx.x's extent is a scalar argument,
// so a caller sizes the block to the device (its warp or SIMD width) with one kernel text.
// Each block sums two 32-element halves of a row, `w` threads each, through a shared array of
// [2, w] sized at the same launch; after one barrier every thread folds the w partials. Several
// widths in a row (vulkan: a pipeline each, the workgroup's size a specialization constant),
// from a saved and loaded module, bit for bit against the interpreter.
TEST_P(IrFeatures, WorkgroupSizedAtLaunch) {
  const std::string kind = GetParam();
  if (kind == "c") GTEST_SKIP() << "CPU code binds no threadIdx";
  const std::string text =
      "func rows(w: int32, n: int32, x: buffer<float32>[n * 64], y: buffer<float32>[n * 2 * w]) {\n"
      "  for b in thread(blockIdx.x, 0, n) {\n"
      "    for ty in thread(threadIdx.y, 0, 2) {\n"
      "      for t in thread(threadIdx.x, 0, w) {\n"
      "        alloc part: float32[2, w] shared\n"
      "        var acc: float32 = 0.0\n"
      "        for i in serial(0, (32 + w - 1) / w) {\n"
      "          if (i * w + t < 32) {\n"
      "            acc += x[b * 64 + ty * 32 + i * w + t]\n"
      "          }\n"
      "        }\n"
      "        part[ty, t] = acc\n"
      "        barrier\n"
      "        var s: float32 = 0.0\n"
      "        for j in serial(0, w) {\n"
      "          s += part[ty, j]\n"
      "        }\n"
      "        y[(b * 2 + ty) * w + t] = s + float32(t)\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  if (kind == "cuda") ExpectPtxasAccepts(text, "rows");
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const ir::IRModule reference = ir::Parse(text);
  for (const char* options : {"", " -bounds-check"}) {
    SCOPED_TRACE(kind + options);
    const Module built = backplane::Build(text, Target::Parse(kind + options));
    if (kind == "vulkan") {
      const std::string glsl = built.Imports().at(0).InspectSource("glsl");
      EXPECT_NE(glsl.find("local_size_x_id = 1000, local_size_y = 2, local_size_z = 1"),
                std::string::npos)
          << glsl;
    }
    const Module m = Module::LoadFromBytes(built.SaveToBytes());
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    const int64_t n = 6;
    for (int64_t w : {8, 32, 5, 1, 8, 64}) {
      SCOPED_TRACE("w = " + std::to_string(w));
      std::vector<float> x(static_cast<size_t>(n * 64));
      for (float& v : x) v = dist(rng);
      const std::vector<Buf> args = {
          Floats(x), Floats(std::vector<float>(static_cast<size_t>(n * 2 * w), -1.0f))};
      const std::vector<Buf> got = Call(m, "rows", dev, args, {w, n});
      const std::vector<Buf> want = InterpreterRun(reference, "rows", {w, n}, args);
      EXPECT_EQ(got[1].bits, want[1].bits) << "y differs from the interpreter's";
      // And from a float64 sum, within float32 rounding: the kernel read every element.
      for (int64_t r = 0; r < n; ++r) {
        for (int half = 0; half < 2; ++half) {
          double sum = 0;
          for (int k = 0; k < 32; ++k) sum += x[static_cast<size_t>(r * 64 + half * 32 + k)];
          float y0;
          std::memcpy(&y0, &got[1].bits[static_cast<size_t>((r * 2 + half) * w)], sizeof(y0));
          EXPECT_NEAR(y0, sum, 1e-4) << "row " << r << ", half " << half;
        }
      }
    }
    // A width past the device's workgroup limits is refused at launch, naming the axis.
    const std::string message = bptest::CaptureError([&] {
                                  Call(m, "rows", dev,
                                       {Floats(std::vector<float>(n * 64, 1.0f)),
                                        Floats(std::vector<float>(n * 2 * 65536, 0.0f))},
                                       {65536, n});
                                }).message;
    EXPECT_NE(message.find("threadIdx.x"), std::string::npos) << message;
    EXPECT_NE(message.find("65536"), std::string::npos) << message;
  }
}

// float16 runs on every kind: vulkan with shaderFloat16 and 16-bit storage (lavapipe has
// both); opencl with half arithmetic where the Target says cl_khr_fp16 and otherwise (the kind's
// name alone, as here; PoCL here has no cl_khr_fp16) in float rounded to half after every
// operation, halves in memory through vload_half and vstore_half_rte; cuda the second way, with
// PTX's cvt (docs/cuda.md, "float16"), which ptxas checks here and a GPU runs (gpu_checks.sh,
// where a skipped cuda or vulkan test fails).

// A float16 converted to an integer saturates and NaN gives 0, as every float does in the IR
// (docs/ir.md, "Interpreter": casts); C leaves both undefined, and the C-family emitter
// converted halves with a plain C cast (x86: int8(300.5) was 44). c and vulkan against the
// interpreter (vulkan has no 8- or 16-bit integers: int32 and uint32 there).
TEST_P(IrFeatures, Float16ToIntegerSaturates) {
  const std::string kind = GetParam();
  if (!HasKind(kind)) GTEST_SKIP() << kind << " is not here";
  const std::string body = kind == "vulkan" ? "    let h: float16 = float16(x[i])\n"
                                              "    o[i] = int32(uint32(h))\n"
                                              "    o[16 + i] = int32(h)\n"
                                              "    o[32 + i] = int32(uint32(h * float16(4)))\n"
                                              "    o[48 + i] = int32(-h)\n"
                                            : "    let h: float16 = float16(x[i])\n"
                                              "    o[i] = int32(int8(h))\n"
                                              "    o[16 + i] = int32(h)\n"
                                              "    o[32 + i] = int32(uint8(h))\n"
                                              "    o[48 + i] = int32(uint16(h))\n";
  const std::string text =
      kind == "c" ? "func halves(x: buffer<float32>[16], o: buffer<int32>[64]) {\n  for i in "
                    "serial(0, 16) {\n" +
                        body + "  }\n}\n"
                  : "func halves(x: buffer<float32>[16], o: buffer<int32>[64]) {\n  for i in "
                    "thread(threadIdx.x, 0, 16) {\n" +
                        body + "  }\n}\n";
  if (kind == "cuda") ExpectPtxasAccepts(text, "halves");
  const std::vector<float> x = {NAN,    INFINITY, -INFINITY, 65504.0f, -65504.0f, 1e6f,
                                300.5f, -129.7f,  127.9f,    -0.5f,    255.9f,    256.4f,
                                -1.0f,  70000.f,  -3.25f,    1000.0f};
  const std::vector<Buf> args = {Floats(x), Ints(std::vector<int32_t>(64, 7))};
  ExpectTheInterpretersResults(kind, text, Case{"halves", args, ""});
  // And what the interpreter says, spelled out for a few: int8(300.5) saturates to 127,
  // int8(NaN) is 0, uint8(-129.7) is 0, int32(inf) is INT32_MAX (vulkan: uint32(-0.5) is 0).
  const std::vector<Buf> want = Interpret(ir::Parse(text), "halves", args);
  int32_t o[64];
  std::memcpy(o, want[1].bits.data(), sizeof(o));
  EXPECT_EQ(o[6], kind == "vulkan" ? 300 : 127);
  EXPECT_EQ(o[0], 0);
  EXPECT_EQ(o[kind == "vulkan" ? 9 : 32 + 7], 0);
  EXPECT_EQ(o[16 + 1], INT32_MAX);
}

// float16 arithmetic rounds to half after every operation, as the interpreter computes it
// (docs/ir.md, "Interpreter"): C compilers may keep a float16 expression in float (GCC does for
// _Float16), so `h * g + h` rounded once differed from the IR's in 3,757 of 20,000 pairs; the
// C-family emitter casts each result. Also floordiv/floormod (computed in float, rounded once)
// and min/max with a NaN (the other operand). c against the interpreter, 4,096 random pairs.
TEST_P(IrFeatures, Float16RoundsEveryOperation) {
  const std::string kind = GetParam();
  if (!HasKind(kind)) GTEST_SKIP() << kind << " is not here";
  const std::string text =
      "func half_ops(x: buffer<float32>[4096], y: buffer<float32>[4096], o: "
      "buffer<float32>[20480]) {\n"
      "  for i in " +
      std::string(kind == "c" ? "serial(0, 4096)" : "thread(blockIdx.x, 0, 4096)") +
      " {\n"
      "    let h: float16 = float16(x[i])\n"
      "    let g: float16 = float16(y[i])\n"
      "    o[i] = float32(h * g + h)\n"
      "    o[4096 + i] = float32((h - g) / (g + h) * h)\n"
      "    o[8192 + i] = float32(floormod(h, g))\n"
      "    o[12288 + i] = float32(floordiv(h, g) * g)\n"
      "    o[16384 + i] = float32(min(h, g) - max(g, h))\n"
      "  }\n"
      "}\n";
  if (kind == "cuda") ExpectPtxasAccepts(text, "half_ops");
  std::mt19937 rng(1616);
  std::uniform_real_distribution<float> dist(-300.0f, 300.0f);
  std::vector<float> x(4096), y(4096);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = dist(rng);
    y[i] = i % 97 == 0 ? NAN : dist(rng) * (i % 3 == 0 ? 0.001f : 1.0f);
  }
  ExpectTheInterpretersResults(
      kind, text,
      Case{"half_ops", {Floats(x), Floats(y), Floats(std::vector<float>(20480, 0.0f))}, ""});
}

// A float64 converted to float16 rounds once, to the half nearest its value, as C converts a
// double to _Float16 and PTX's cvt.rn.f16.f64 does; so do a float16 literal and a float16
// scalar argument given a double. Through float first (the interpreter's way until 2026-12-01)
// 1 + 2^-11 + 2^-40 became the tie 1 + 2^-11 and then 1.0, where the nearest half is
// 1 + 2^-10, and the backends, which round once, disagreed with it. Values just past a tie (a
// normal half, half the smallest subnormal, the overflow threshold 65520) and random ones
// within 2^-30 of a tie, against the interpreter bit for bit and spelled out.
TEST_P(IrFeatures, Float64ToFloat16RoundsOnce) {
  const std::string kind = GetParam();
  if (!HasKind(kind)) GTEST_SKIP() << kind << " is not here";
  const auto loop = [&](int n) {
    return kind == "c" ? "serial(0, " + std::to_string(n) + ")"
                       : "thread(threadIdx.x, 0, " + std::to_string(n) + ")";
  };
  const std::string text =
      "func narrow(x: buffer<float64>[64], o: buffer<float32>[64]) {\n"
      "  for i in " +
      loop(64) +
      " {\n"
      "    o[i] = float32(float16(x[i]))\n"
      "  }\n"
      "}\n"
      "func given(s: float16, o: buffer<float32>[2]) {\n"
      "  for i in " +
      loop(1) +
      " {\n"
      "    o[0] = float32(s)\n"
      "    o[1] = float32(float16(1.0004882812509095))\n"
      "  }\n"
      "}\n";
  if (kind == "cuda") ExpectPtxasAccepts(text, "narrow");
  const double tiny = std::ldexp(1.0, -40);
  std::vector<double> x = {1 + 0x1p-11 + tiny,
                           -(1 + 0x1p-11 + tiny),
                           1 + 0x1p-11 - tiny,
                           0x1p-25 + 0x1p-60,
                           -(0x1p-25 + 0x1p-60),
                           65520 - 0x1p-30,
                           65520.0,
                           0x1p-25};
  std::mt19937_64 rng(64016);
  while (x.size() < 64) {
    // A finite half, the tie above it, and a nudge below 2^-30 of the value either way.
    const uint16_t h = static_cast<uint16_t>(rng() % 0x7bff);
    const double below = ir::HalfToFloat(h), above = ir::HalfToFloat(static_cast<uint16_t>(h + 1));
    const double tie = (below + above) / 2;
    const double nudge = std::ldexp(static_cast<double>(rng() % 1000 + 1) / 1000, -30) * tie;
    x.push_back((rng() & 1 ? -1 : 1) * (rng() & 2 ? tie + nudge : tie - nudge));
  }
  const std::vector<Buf> args = {Doubles(x), Floats(std::vector<float>(64, 7.0f))};
  ExpectTheInterpretersResults(kind, text, Case{"narrow", args, ""});
  const std::vector<Buf> want = Interpret(ir::Parse(text), "narrow", args);
  float o[64];
  std::memcpy(o, want[1].bits.data(), sizeof(o));
  const std::vector<float> spelled = {1.0009765625f, -1.0009765625f, 1.0f,     0x1p-24f,
                                      -0x1p-24f,     65504.0f,       INFINITY, 0.0f};
  for (size_t i = 0; i < spelled.size(); ++i) EXPECT_EQ(o[i], spelled[i]) << "x[" << i << "]";
  for (size_t i = spelled.size(); i < 64; ++i) {
    // Nearest: no half lies nearer x than the result (ties cannot occur: every x is off one).
    const float r = o[i];
    const uint16_t bits = ir::FloatToHalf(r);
    const double d = std::fabs(x[i] - r);
    for (const int step : {-1, 1}) {
      const float next = ir::HalfToFloat(static_cast<uint16_t>(bits + step));
      if (!std::isfinite(next)) continue;
      EXPECT_LT(d, std::fabs(x[i] - next)) << "x[" << i << "] = " << x[i];
    }
  }
  // The float16 param and literal, through each kind's launch.
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !DeviceOf(kind, &dev)) return;
  const Module m = backplane::Build(text, Target::Parse(kind));
  Tensor out = Tensor::Empty({2}, kF32, dev);
  const float seven[2] = {7.0f, 7.0f};
  out.CopyFromBytes(seven, sizeof(seven));
  m.GetFunction("given")(1 + 0x1p-11 + tiny, out.dl());
  float got[2];
  out.CopyToBytes(got, sizeof(got));
  EXPECT_EQ(got[0], 1.0009765625f) << "the float16 argument";
  EXPECT_EQ(got[1], 1.0009765625f) << "the float16 literal";
  float interp[2] = {7.0f, 7.0f};
  const int64_t two = 2;
  ir::Interpreter(ir::Parse(text))
      .Run("given",
           {ir::FloatArg(1 + 0x1p-11 + tiny), ir::BufferArg(interp, ir::Float32(), 1, &two)});
  EXPECT_EQ(interp[0], 1.0009765625f);
  EXPECT_EQ(interp[1], 1.0009765625f);
}

// Index arithmetic is exact (docs/ir.md, "Index arithmetic"): an index i * m * m + 1 of
// 2^32 + 1 is out of bounds on every kind that computes indices in int64, as in the
// interpreter, and not the element 1 that int32 arithmetic wraps it to; where the overflows of
// an index cancel, every kind reads the element the exact value names. (vulkan indexes in
// int32, which agrees for every access in bounds; its checked access of 2^32 + 1 is not
// caught: docs/vulkan.md, "Index arithmetic".)
TEST_P(IrFeatures, IndexArithmeticIsExact) {
  const std::string kind = GetParam();
  const std::string loop = kind == "c" ? "serial(0, 1)" : "thread(threadIdx.x, 0, 1)";
  const std::string text =
      "func wide(i: int32, m: int32, a: buffer<float32>[4], o: buffer<float32>[2]) {\n"
      "  for t in " +
      loop +
      " {\n"
      "    o[0] = a[i * m * m - i * m * m + 2 + t]\n"
      "    o[1] = a[i * m * m + 1]\n"
      "  }\n"
      "}\n"
      "func cancel(i: int32, m: int32, a: buffer<float32>[4], o: buffer<float32>[2]) {\n"
      "  for t in " +
      loop +
      " {\n"
      "    o[t] = a[i * m * m - i * m * m + 2 + t]\n"
      "  }\n"
      "}\n";
  if (kind == "cuda") ExpectPtxasAccepts(text, "wide", " -bounds-check");
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  const std::vector<Buf> args = {Floats({1.5f, -2.5f, 3.25f, 4.0f}), Floats({0.0f, 0.0f})};
  // Overflows that cancel: element 2 on every kind, checked or not.
  for (const char* options : {"", " -bounds-check"}) {
    SCOPED_TRACE(kind + options);
    const Module m = backplane::Build(text, Target::Parse(kind + options));
    const std::vector<Buf> got = Call(m, "cancel", dev, args, {1, 65536});
    float o[2];
    std::memcpy(o, got[1].bits.data(), sizeof(o));
    EXPECT_EQ(o[0], 3.25f);
  }
  if (kind == "vulkan") return;
  const Module checked = backplane::Build(text, Target::Parse(kind + " -bounds-check"));
  std::string message = "(no error)";
  try {
    Call(checked, "wide", dev, args, {1, 65536});
  } catch (const backplane::Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("index 4294967297 is out of bounds for dimension 0 of buffer 'a' "
                         "(extent 4)"),
            std::string::npos)
      << message;
}

// A `local` array of device code is private memory a thread: at most 512 KiB (CUDA's local
// memory a thread), a larger one refused at build with what to use instead (a 400 MB one made
// lavapipe exhaust the host's memory). The c target has no such limit: past its stack budget an
// array goes to the heap (cpu/codegen_test.cc, LargeLocalArraysGoToTheHeap).
TEST_P(IrFeatures, LargeLocalArraysOfDeviceCodeAreRefused) {
  const std::string kind = GetParam();
  if (kind == "c" || !HasKind(kind)) GTEST_SKIP() << kind;
  auto text = [](int64_t elements, const std::string& dtype = "float32") {
    const std::string n = std::to_string(elements);
    return "func big(a: buffer<" + dtype +
           ">[4]) {\n"
           "  for t in thread(threadIdx.x, 0, 4) {\n"
           "    alloc p: " +
           dtype + "[" + n +
           "] local\n"
           "    p[t] = a[t]\n"
           "    a[t] = p[t] + p[" +
           n + " - 1 - t]\n  }\n}\n";
  };
  const std::string message = bptest::CaptureError([&] {
                                backplane::Build(text(512 * 1024 / 4 + 1), Target::Parse(kind));
                              }).message;
  EXPECT_NE(message.find("allocation 'p' (float32, 131073 elements, local) takes more than "
                         "524288 bytes a thread"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("use a global buffer"), std::string::npos) << message;
  if (kind == "cuda") {
    ExpectPtxasAccepts(text(512 * 1024 / 4), "big");
  } else {
    EXPECT_NO_THROW(backplane::Build(text(512 * 1024 / 4), Target::Parse(kind)));
  }
  // float16 counts as the dialect holds it: a float (4 bytes) in cuda, and in opencl without
  // cl_khr_fp16 (the Target's supports_float16, false unless given), a float16_t (2) in vulkan.
  const std::string half_text = text(512 * 1024 / 4 + 1, "float16");
  if (kind == "vulkan") {
    EXPECT_NO_THROW(backplane::Build(half_text, Target::Parse(kind)));
  } else {
    const std::string half_message =
        bptest::CaptureError([&] { backplane::Build(half_text, Target::Parse(kind)); }).message;
    EXPECT_NE(half_message.find("allocation 'p' (float16, 131073 elements of 4 bytes, as " + kind +
                                " device code holds them, local) takes more than 524288 bytes "
                                "a thread"),
              std::string::npos)
        << half_message;
  }
  // Nested arrays add up: two of 256 KiB + 4 bytes each are refused at the inner one.
  const std::string nested =
      "func nested(a: buffer<float32>[4]) {\n"
      "  for t in thread(threadIdx.x, 0, 4) {\n"
      "    alloc p: float32[65537] local\n"
      "    alloc q: float32[65537] local\n"
      "    p[t] = a[t]\n"
      "    q[t] = p[t]\n"
      "    a[t] = q[t] + p[65536 - t]\n  }\n}\n";
  const std::string nested_message =
      bptest::CaptureError([&] { backplane::Build(nested, Target::Parse(kind)); }).message;
  EXPECT_NE(nested_message.find("allocation 'q' (float32, 65537 elements, local) takes more "
                                "than 262140 bytes a thread (with the 262148 bytes of the local "
                                "arrays it is nested in, 524288)"),
            std::string::npos)
      << nested_message;
}

// ---- Random indices of vector loads --------------------------------------------------------

// Vector loads at random indices, against the interpreter. The code generators' alignment
// analysis (docs/codegen-guide.md, "Vector accesses") decides where vulkan reads a load through
// a vec4 view and where cuda skips its test of the offset: a claim it could not prove reads the
// wrong four elements there (or faults), silently. The kernels take their indices from random
// integer expressions over the arguments (read into lets), a let and a `var` of them, a loop with
// a random start and step, the thread index and constants, through + - * negation min max select
// floormod % and casts, inside ifs that test random congruences of them (`floormod(n, 8) == 4`,
// `m % 4 == 0`, of the `var` too, which the analysis must ignore, and of sums, which it does not
// read), and read a 1-D and a 2-D buffer; each runs with arguments that make its tests true and
// false. Every kind here gives the interpreter's results bit for bit. Fixed seeds. On vulkan 83
// of the 144 loads read a view; with the analysis taking the test of a `var` as a fact, 4 runs
// read the wrong elements there (checked).
class IndexGen {
 public:
  explicit IndexGen(uint64_t seed) : rng_(seed) {}

  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  int Between(int lo, int hi) { return lo + Pick(hi - lo + 1); }

  // A variable of the kernel and the largest magnitude it takes.
  struct Var {
    std::string name;
    int64_t bound;
  };

  // A random int32 expression over `vars` of at most `depth` levels; *bound gets the largest
  // magnitude it takes, kept below 2^26 (no int32 value wraps: OpenCL C leaves signed overflow
  // undefined, and C's `%` of a wrapped value would differ).
  std::string Expr(const std::vector<Var>& vars, int depth, int64_t* bound) {
    std::string e = Unbounded(vars, depth, bound);
    if (*bound < (int64_t{1} << 26)) return e;
    return Leaf(vars, bound);
  }

  // Mostly `e * M + f` with M one of 4, 8, 12, 16 (or 1, 2) and f a leaf (a constant, a
  // variable a test or a loop may say something of) or another expression: the forms the
  // analysis can prove aligned, and what stops it (a thread index, a step of 1, a test of
  // another modulus, a `var`).
  std::string Index(const std::vector<Var>& vars, int64_t* bound) {
    if (Pick(5) < 2) return Expr(vars, 3, bound);
    static const int kM[] = {4, 8, 16, 2, 1, 12};
    int64_t b1 = 0, b2 = 0;
    const int mul = kM[Pick(6)];
    const std::string e = Expr(vars, 2, &b1);
    const std::string f = Pick(3) == 0 ? Expr(vars, 2, &b2) : Leaf(vars, &b2);
    *bound = b1 * mul + b2;
    if (*bound >= (int64_t{1} << 26)) return Leaf(vars, bound);
    return "(" + e + " * " + std::to_string(mul) + " + " + f + ")";
  }

  std::string Leaf(const std::vector<Var>& vars, int64_t* bound) {
    if (Pick(5) < 2) {
      const Var& v = vars[Pick(static_cast<int>(vars.size()))];
      *bound = v.bound;
      return v.name;
    }
    const int c = Pick(3) == 0 ? 4 * Between(-8, 16) : Between(-40, 40);
    *bound = std::abs(c);
    return Num(c);
  }

  std::string Unbounded(const std::vector<Var>& vars, int depth, int64_t* bound) {
    if (depth == 0 || Pick(4) == 0) return Leaf(vars, bound);
    int64_t b1 = 0, b2 = 0, b3 = 0, b4 = 0;
    static const int kMuls[] = {2, 3, 4, 8, 16, 5, -4, 64};
    static const int kMods[] = {2, 3, 4, 8, 12, 16, 64, -4};
    switch (Pick(11)) {
      case 0: {
        const std::string t =
            "(" + Expr(vars, depth - 1, &b1) + " + " + Expr(vars, depth - 1, &b2) + ")";
        *bound = b1 + b2;
        return t;
      }
      case 1: {
        const std::string t =
            "(" + Expr(vars, depth - 1, &b1) + " - " + Expr(vars, depth - 1, &b2) + ")";
        *bound = b1 + b2;
        return t;
      }
      case 2:
      case 3: {
        const int c = kMuls[Pick(8)];
        const std::string t = "(" + Expr(vars, depth - 1, &b1) + " * " + std::to_string(c) + ")";
        *bound = b1 * std::abs(c);
        return t;
      }
      case 4: {
        const std::string a = Expr(vars, depth - 1, &b1), b = Expr(vars, depth - 1, &b2);
        *bound = b1 * b2;
        return "(" + a + " * " + b + ")";
      }
      case 5: {
        const std::string t = "(-" + Expr(vars, depth - 1, &b1) + ")";
        *bound = b1;
        return t;
      }
      case 6: {
        const std::string t = std::string(Pick(2) ? "min(" : "max(") + Expr(vars, depth - 1, &b1) +
                              ", " + Expr(vars, depth - 1, &b2) + ")";
        *bound = std::max(b1, b2);
        return t;
      }
      case 7: {
        const std::string c = Expr(vars, depth - 1, &b1) + " < " + Expr(vars, depth - 1, &b2);
        const std::string t = "select(" + c + ", " + Expr(vars, depth - 1, &b3) + ", " +
                              Expr(vars, depth - 1, &b4) + ")";
        *bound = std::max(b3, b4);
        return t;
      }
      case 8: {
        const int c = kMods[Pick(8)];
        *bound = std::abs(c);
        return "floormod(" + Expr(vars, depth - 1, &b1) + ", " + Num(c) + ")";
      }
      case 9: {
        const int c = kMods[Pick(8)];
        *bound = std::abs(c);
        return "(" + Expr(vars, depth - 1, &b1) + " % " + Num(c) + ")";
      }
      default: {
        const int c = kMuls[Pick(8)];
        const std::string t =
            "int32(int64(" + Expr(vars, depth - 1, &b1) + ") * int64(" + Num(c) + "))";
        *bound = b1 * std::abs(c);
        return t;
      }
    }
  }

  // A test of a congruence (or, rarely, a comparison); *on_n / *on_m get the modulus and
  // residue it asks of n or m (0 when it asks of neither), so that arguments can be made that
  // pass it.
  std::string Test(int* k_out, int* r_out, std::string* of) {
    static const int kK[] = {2, 4, 8, 16, 3, 12, 32};
    static const char* kOf[] = {"n", "m", "p", "q", "(n + 4)"};
    const int k = kK[Pick(7)];
    const int r = Pick(2) == 0 ? Pick(k) / 4 * 4 : Pick(k);
    *of = kOf[Pick(5)];
    *k_out = k;
    *r_out = r;
    switch (Pick(4)) {
      case 0:
        *r_out = 0;
        return "(" + *of + " % " + std::to_string(k) + " == 0)";
      case 1:
        return "(" + std::to_string(r) + " == floormod(" + *of + ", " + std::to_string(k) + "))";
      case 2:
        if (Pick(2) == 0) {
          *k_out = 0;
          return "(n > " + std::to_string(Between(0, 100)) + ")";
        }
        [[fallthrough]];
      default:
        return "(floormod(" + *of + ", " + std::to_string(k) + ") == " + std::to_string(r) + ")";
    }
  }

  static std::string Num(int c) {
    return c < 0 ? "(0 - " + std::to_string(-c) + ")" : std::to_string(c);
  }

 private:
  std::mt19937_64 rng_;
};

struct RandomIndexKernel {
  std::string text;
  // Its first test asks `of` to be r modulo k (k = 0: it asks no congruence).
  int k = 0, r = 0;
  std::string of;
};

// Kernel `name`: o[t] (4 floats a thread, 8 threads) accumulates a[...] and g[..., ...] loads of 4
// lanes at random indices.
RandomIndexKernel MakeRandomIndexKernel(IndexGen& gen, const std::string& name,
                                        const std::string& kind, int w) {
  const std::string loop = kind == "c" ? "serial(0, 8)" : "thread(threadIdx.x, 0, 8)";
  const std::string acc = "o[t, ramp(0, 1, 4)]";
  int64_t b = 0;
  auto index = [&](const std::vector<IndexGen::Var>& vars) {
    return "floormod(" + gen.Index(vars, &b) + ", 256)";
  };
  RandomIndexKernel k;
  std::string t = "func " + name +
                  "(s: buffer<int32>[2], a: buffer<float32>[260], g: buffer<float32>[24, " +
                  std::to_string(w) + "], o: buffer<float32>[8, 4]) {\n  for t in " + loop +
                  " {\n" + "    let n: int32 = s[0]\n    let m: int32 = s[1]\n";
  // n and m below 400 (the runs below), t below 8.
  const std::vector<IndexGen::Var> outer = {{"n", 400}, {"m", 400}, {"t", 8}};
  int64_t bp = 0, bq = 0;
  t += "    let p: int32 = " + gen.Expr(outer, 2, &bp) + "\n";
  t += "    var q: int32 = " + gen.Expr(outer, 2, &bq) + "\n";
  std::string cond = gen.Test(&k.k, &k.r, &k.of);
  for (int more = gen.Pick(3); more > 0; --more) {
    int k2 = 0, r2 = 0;
    std::string of2;
    cond += " && " + gen.Test(&k2, &r2, &of2);
  }
  t += "    if (" + cond + ") {\n";
  if (gen.Pick(2) == 0) t += "      q = q + " + std::to_string(gen.Between(1, 3)) + "\n";
  static const char* kSteps[] = {"4", "8", "1", "2", "(0 - 4)", "12", "(n * 4 + 4)", "3"};
  const std::vector<IndexGen::Var> inner = {
      {"n", 400}, {"m", 400}, {"t", 8}, {"p", bp}, {"q", bq + 3}};
  int64_t bs = 32;
  const std::string start =
      gen.Pick(2) ? IndexGen::Num(4 * gen.Between(-2, 8)) : gen.Expr(inner, 1, &bs);
  t += std::string("      for j in serial(") + start + ", 3, " + kSteps[gen.Pick(8)] + ") {\n";
  std::vector<IndexGen::Var> in_loop = inner;
  in_loop.push_back({"j", bs + 2 * 1604});  // the largest step is 4 * 399 + 4
  t += "        " + acc + " = " + acc + " + a[ramp(" + index(in_loop) + ", 1, 4)]\n      }\n";
  // A row of g and 4 columns of it from a power of two that fits: flat index row * w + col.
  const int cols = w >= 20 ? 16 : w >= 12 ? 8 : w >= 8 ? 4 : 2;
  t += "      " + acc + " = " + acc + " + g[floormod(" + gen.Expr(inner, 2, &b) +
       ", 24), ramp(floormod(" + gen.Index(inner, &b) + ", " + std::to_string(cols) + "), 1, 4)]\n";
  t += "    } else {\n      " + acc + " = " + acc + " + a[ramp(" + index(inner) +
       ", 1, 4)]\n    }\n  }\n}\n";
  k.text = t;
  return k;
}

TEST_P(IrFeatures, RandomIndicesOfVectorLoadsReadTheRightElements) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  const bool runs = Runs(kind) && HasKind(kind) && DeviceOf(kind, &dev);
  if (!runs && !(kind == "cuda" && HasKind("cuda"))) GTEST_SKIP() << kind << " does not run here";
  constexpr int kKernels = 48;
  IndexGen gen(20261130);
  std::string text;
  std::vector<RandomIndexKernel> kernels;
  static const int kWidths[] = {8, 12, 20, 6, 9};
  for (int i = 0; i < kKernels; ++i) {
    kernels.push_back(MakeRandomIndexKernel(gen, "r" + std::to_string(i), kind, kWidths[i % 5]));
    text += kernels.back().text;
  }
  const Module m =
      backplane::Build(text, Target::Parse(kind == "cuda" ? "cuda -arch=sm_90" : kind));
  std::string source;
  for (const Module& imp : m.Imports()) source += imp.InspectSource("");
  if (kind == "c") source = m.InspectSource("");
  // The analysis proves some of these loads aligned and not others (else the test shows
  // nothing): vulkan reads those through a view (`bp_v4_a[...]`), cuda tells its helper that the
  // offset is (`bp_vload_float32x4(a, <index>, false, true)`).
  if (kind == "vulkan" || kind == "cuda") {
    size_t proven = 0, loads = 0;
    for (const char* buffer : {"a", "g"}) {
      const std::string call = std::string("bp_vload_float32x4(") + buffer + ", ";
      const std::string view = std::string("bp_v4_") + buffer + "[";
      const std::string scalar = std::string("vec4(") + buffer + "[";
      for (const std::string& what : kind == "cuda" ? std::vector<std::string>{call}
                                                    : std::vector<std::string>{view, scalar}) {
        for (size_t at = source.find(what); at != std::string::npos;
             at = source.find(what, at + 1)) {
          if (source.compare(at + what.size(), 1, "]") == 0) continue;  // the declaration
          ++loads;
          if (kind == "vulkan") {
            proven += what == view ? 1 : 0;
            continue;
          }
          // The call's closing parenthesis, and the flags before it.
          int depth = 0;
          size_t end = source.find('(', at);
          for (; end < source.size(); ++end) {
            depth += source[end] == '(' ? 1 : source[end] == ')' ? -1 : 0;
            if (depth == 0) break;
          }
          proven += source.compare(end - 13, 13, ", false, true") == 0 ? 1 : 0;
        }
      }
    }
    EXPECT_EQ(loads, 3u * kKernels) << proven << " proven\n" << source;
    EXPECT_GE(proven, 12u) << source;
    EXPECT_LE(proven, loads - 12) << source;
  }
  if (!runs) return;
  const ir::IRModule ir_module = ir::Parse(text);
  std::mt19937 rng(7);
  uint32_t seed = 0;
  auto floats = [&](size_t count) { return bptest::RandomFloats(count, ++seed); };
  for (int i = 0; i < kKernels; ++i) {
    const RandomIndexKernel& k = kernels[i];
    SCOPED_TRACE(k.text);
    const int w = kWidths[i % 5];
    for (int run = 0; run < 6; ++run) {
      int n = static_cast<int>(rng() % 200), mm = static_cast<int>(rng() % 200);
      // Half the runs pass the first test where it is on n or m.
      if (run % 2 == 0 && k.k > 0 && (k.of == "n" || k.of == "m")) {
        (k.of == "n" ? n : mm) = k.k * static_cast<int>(rng() % 12) + k.r;
      }
      if (run == 5) n = 16 * static_cast<int>(rng() % 12), mm = 16 * static_cast<int>(rng() % 12);
      std::vector<Buf> args = {Ints({n, mm}), Floats(floats(260)), Floats(floats(24 * w)),
                               Floats(floats(32))};
      args[2].shape = {24, w};
      args[3].shape = {8, 4};
      const std::string func = "r" + std::to_string(i);
      SCOPED_TRACE("n = " + std::to_string(n) + ", m = " + std::to_string(mm));
      ExpectSameBits(Call(m, func, dev, args), Interpret(ir_module, func, args));
    }
  }
}

// ---- Random integer expressions ------------------------------------------------------------

// Integer expressions of random shape over every integer dtype, against the interpreter bit for
// bit: + - * / % floordiv floormod min max, negation, selects on comparisons and casts through
// another integer type, nested four deep, on inputs that favour each type's edges (0, 1, -1,
// the largest and smallest values and their neighbours). Operators one at a time are the
// conformance kit's construct clauses; nested ones are where a C compiler that takes a signed
// overflow for impossible folds `a + 1 > a` to true (PoCL did, before the code generators
// computed such arithmetic unsigned: docs/codegen-guide.md, "Integer arithmetic"). A divisor is
// `select(d == 0, 1, d)`: never zero, but INT_MIN / -1 comes up. Fixed seeds.
class IntExprGen {
 public:
  IntExprGen(uint64_t seed, ir::DType t, std::vector<ir::DType> casts)
      : rng_(seed), t_(t), casts_(std::move(casts)) {}

  std::string Expr(int depth) {
    if (depth == 0 || Pick(5) == 0) {
      static const char* kLeaves[] = {"a[t]", "b[t]", "c[t]"};
      if (Pick(4) > 0) return kLeaves[Pick(3)];
      static const int kLits[] = {0, 1, 2, 3, 7, 8, 31, 100, 127};
      // Cast, as a literal among literals only would be int32.
      return ir::ToString(t_) + "(" + std::to_string(kLits[Pick(9)]) + ")";
    }
    const std::string x = Expr(depth - 1), y = Expr(depth - 1);
    switch (Pick(12)) {
      case 0:
        return "(" + x + " + " + y + ")";
      case 1:
        return "(" + x + " - " + y + ")";
      case 2:
      case 3:
        return "(" + x + " * " + y + ")";
      case 4: {
        static const char* kDiv[] = {" / ", " % "};
        return "(" + x + kDiv[Pick(2)] + Divisor(y) + ")";
      }
      case 5:
        return std::string(Pick(2) ? "floordiv(" : "floormod(") + x + ", " + Divisor(y) + ")";
      case 6:
        return std::string(Pick(2) ? "min(" : "max(") + x + ", " + y + ")";
      case 7:
        return "(-" + x + ")";
      case 8:
      case 9: {
        static const char* kCmp[] = {" < ", " <= ", " > ", " >= ", " == ", " != "};
        return "select(" + x + kCmp[Pick(6)] + y + ", " + Expr(depth - 1) + ", " + Expr(depth - 1) +
               ")";
      }
      default: {
        const ir::DType u = casts_[Pick(static_cast<int>(casts_.size()))];
        return ir::ToString(t_) + "(" + ir::ToString(u) + "(" + x + "))";
      }
    }
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  static std::string Divisor(const std::string& d) {
    return "select(" + d + " == 0, 1, " + d + ")";
  }

  std::mt19937_64 rng_;
  ir::DType t_;
  std::vector<ir::DType> casts_;
};

// `count` elements of integer dtype `t` that favour its edges, as a Buf.
Buf EdgeInts(ir::DType t, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t mask = t.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << t.bits) - 1;
  const uint64_t top = uint64_t{1} << (t.bits - 1);  // the sign bit, or half the range
  const uint64_t edges[] = {0, 1, mask, top - 1, top, top + 1, top - 2, 2, mask - 1};
  std::vector<uint64_t> v(count);
  for (uint64_t& x : v) {
    const int kind = static_cast<int>(rng() % 3);
    x = kind == 0 ? edges[rng() % 9] : kind == 1 ? rng() % 200 - 100 : rng();
    x &= mask;
  }
  Buf b{DLDataType{static_cast<uint8_t>(t.is_uint() ? kDLUInt : kDLInt),
                   static_cast<uint8_t>(t.bits), 1},
        std::vector<uint32_t>((count * t.bits + 31) / 32),
        {}};
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(reinterpret_cast<char*>(b.bits.data()) + i * t.bits / 8, &v[i], t.bits / 8);
  }
  return b;
}

TEST_P(IrFeatures, RandomIntegerExpressionsMatchTheInterpreter) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !HasKind(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind;
  // GLSL here has no 8- or 16-bit integers: vulkan takes the 32- and 64-bit ones.
  std::vector<ir::DType> types = {ir::Int(32), ir::Int(64), ir::UInt(32), ir::UInt(64)};
  if (kind != "vulkan") {
    for (ir::DType t : {ir::Int(8), ir::Int(16), ir::UInt(8), ir::UInt(16)}) types.push_back(t);
  }
  constexpr int kExprs = 16;
  constexpr int64_t kN = 256;
  const std::string loop = kind == "c" ? "serial(0, 256)" : "thread(threadIdx.x, 0, 256)";
  uint64_t seed = 0;
  for (ir::DType t : types) {
    const std::string ts = ir::ToString(t);
    SCOPED_TRACE(ts);
    IntExprGen gen(1000 + seed, t, types);
    std::string text;
    for (int k = 0; k < kExprs; ++k) {
      text += "func e" + std::to_string(k) + "(a: buffer<" + ts + ">[256], b: buffer<" + ts +
              ">[256], c: buffer<" + ts + ">[256], o: buffer<" + ts + ">[256]) {\n  for t in " +
              loop + " {\n    o[t] = " + gen.Expr(4) + "\n  }\n}\n";
    }
    const Module m = backplane::Build(text, Target::Parse(kind));
    const ir::IRModule ir_module = ir::Parse(text);
    for (int k = 0; k < kExprs; ++k) {
      const std::string func = "e" + std::to_string(k);
      SCOPED_TRACE(func);
      const std::vector<Buf> args = {EdgeInts(t, kN, ++seed), EdgeInts(t, kN, ++seed),
                                     EdgeInts(t, kN, ++seed), EdgeInts(t, kN, ++seed)};
      ExpectSameBits(Call(m, func, dev, args), Interpret(ir_module, func, args));
      if (HasFailure()) {
        ADD_FAILURE() << text;
        return;
      }
    }
  }
}

// The lanes of a ramp that is data, not an index (`ramp(a, b, 4)` stored as values), wrap at
// their type's width as the interpreter's do: the code generators compute `a + l * b` in the
// unsigned type where it may pass the range (ir::SignedOverflowRiskNodes), or a compiler that
// takes a signed overflow for impossible folds `ramp(a, 1, 4) > broadcast(a, 4)` to true.
// int32 and int64, strides and bases at the edges.
TEST_P(IrFeatures, RampLanesWrapAsTheInterpretersDo) {
  const std::string kind = GetParam();
  if (!HasKind(kind)) GTEST_SKIP() << kind;
  const std::string loop = kind == "c" ? "serial(0, 64)" : "thread(threadIdx.x, 0, 64)";
  std::string text;
  for (const char* t : {"int32", "int64"}) {
    text += std::string("func ramps_") + t + "(a: buffer<" + t + ">[64], b: buffer<" + t +
            ">[64], o: buffer<" + t + ">[256], g: buffer<int32>[256]) {\n  for t in " + loop +
            " {\n"
            "    o[ramp(t * 4, 1, 4)] = ramp(a[t], b[t], 4)\n"
            "    g[ramp(t * 4, 1, 4)] = select(ramp(a[t], 1, 4) > broadcast(a[t], 4), "
            "broadcast(1, 4), broadcast(0, 4))\n"
            "  }\n}\n";
  }
  const Module m =
      backplane::Build(text, Target::Parse(kind == "cuda" ? "cuda -arch=sm_90" : kind));
  if (kind == "opencl" || kind == "cuda") {
    // PoCL happens not to fold this comparison; the lanes' text says they wrap all the same.
    const std::string source = m.Imports()[0].InspectSource("");
    for (const char* want : {"(uint32_t)2 * (uint32_t)(b[t])", "(uint64_t)3 * (uint64_t)(b[t])"}) {
      EXPECT_NE(source.find(want), std::string::npos) << want << " in\n" << source;
    }
  }
  Device dev(DLDevice{kDLCPU, 0});
  if (!Runs(kind) || !DeviceOf(kind, &dev)) GTEST_SKIP() << kind << " does not run here";
  const ir::IRModule ir_module = ir::Parse(text);
  uint64_t seed = 40;
  for (const ir::DType t : {ir::Int(32), ir::Int(64)}) {
    const std::string func = "ramps_" + ir::ToString(t);
    SCOPED_TRACE(func);
    for (int run = 0; run < 4; ++run) {
      const std::vector<Buf> args = {EdgeInts(t, 64, ++seed), EdgeInts(t, 64, ++seed),
                                     EdgeInts(t, 256, ++seed), Ints(std::vector<int32_t>(256, 7))};
      const std::vector<Buf> want = Interpret(ir_module, func, args);
      ExpectSameBits(Call(m, func, dev, args), want);
      // The edges are there: some lanes wrapped (a lane below its base although the stride is
      // 1, in g), so the test shows what it claims.
      int32_t g[256];
      std::memcpy(g, want[3].bits.data(), sizeof(g));
      EXPECT_NE(std::count(g, g + 256, 0), 64) << "no lane wrapped";
    }
  }
}

// A float constant of a type the kernel uses nowhere else: vulkan writes float literals through
// helpers (docs/vulkan.md, "Float constants"), and a float64 one alone must declare its own
// (`bp_k64` was undefined when nothing else in the kernel was float64).
TEST_P(IrFeatures, AFloatConstantOfAnotherTypeAloneRuns) {
  const std::string kind = GetParam();
  if (!Runs(kind)) GTEST_SKIP() << kind;
  const std::string loop = kind == "c" ? "serial(0, 4)" : "thread(threadIdx.x, 0, 4)";
  const std::string text =
      "func alone(a: buffer<float32>[4], o: buffer<float32>[4]) {\n  for t in " + loop +
      " {\n    o[t] = a[t] + float32(2.5f64) * float32(-0.0f64)\n  }\n}\n";
  ExpectTheInterpretersResults(
      kind, text, Case{"alone", {Floats({1.0f, -0.0f, NAN, INFINITY}), Floats({7, 7, 7, 7})}, ""});
}

// ---- Random float expressions --------------------------------------------------------------

// Float expressions of random shape in float32, float64 and float16, against the interpreter
// bit for bit: the operations docs/ir.md defines exactly (+ - * / min max negation fabs floor
// ceil trunc round sqrt fma floordiv floormod, selects on comparisons, casts to integers, which
// saturate, and through the other float types), nested four deep, on inputs that favour the
// edges (signed zeros, infinities, NaN, subnormals, the largest finite values, halves that
// round either way). The conformance kit's construct clauses take one operator at a time;
// nested, a compiler that contracts `a * b + c` into an FMA, keeps a float16 or float32 result
// in a wider register, flushes a subnormal or takes `x - x` for 0 shows. A NaN matches any NaN.
// Fixed seeds.
class FloatExprGen {
 public:
  FloatExprGen(uint64_t seed, std::string t, std::vector<std::string> floats,
               std::vector<std::string> ints)
      : rng_(seed), t_(std::move(t)), floats_(std::move(floats)), ints_(std::move(ints)) {}

  std::string Expr(int depth) {
    if (depth == 0 || Pick(5) == 0) {
      static const char* kLeaves[] = {"a[t]", "b[t]", "c[t]"};
      static const char* kLits[] = {"0.0", "1.0", "-1.0", "0.5",  "2.5",
                                    "3.0", "0.1", "1e30", "-7.75"};
      const std::string leaf = Pick(4) > 0 ? kLeaves[Pick(3)] : kLits[Pick(9)];
      return t_ == "float32" ? leaf : t_ + "(" + leaf + ")";
    }
    const std::string x = Expr(depth - 1), y = Expr(depth - 1);
    switch (Pick(14)) {
      case 0:
        return "(" + x + " + " + y + ")";
      case 1:
        return "(" + x + " - " + y + ")";
      case 2:
        return "(" + x + " * " + y + ")";
      case 3:
        return "(" + x + " / " + y + ")";
      case 4:
        // The shapes a compiler contracts: a product added or subtracted.
        return "(" + x + " * " + y + (Pick(2) ? " + " : " - ") + Expr(depth - 1) + ")";
      case 5:
        return std::string(Pick(2) ? "floordiv(" : "floormod(") + x + ", " + y + ")";
      case 6:
        return std::string(Pick(2) ? "min(" : "max(") + x + ", " + y + ")";
      case 7:
        return "(-" + x + ")";
      case 8: {
        static const char* kFns[] = {"fabs", "floor", "ceil", "trunc", "round", "sqrt"};
        return std::string(kFns[Pick(6)]) + "(" + x + ")";
      }
      case 9:
        return "fma(" + x + ", " + y + ", " + Expr(depth - 1) + ")";
      case 10:
      case 11: {
        static const char* kCmp[] = {" < ", " <= ", " > ", " >= ", " == ", " != "};
        return "select(" + x + kCmp[Pick(6)] + y + ", " + Expr(depth - 1) + ", " + Expr(depth - 1) +
               ")";
      }
      case 12: {
        const std::string& i = ints_[Pick(static_cast<int>(ints_.size()))];
        return t_ + "(" + i + "(" + x + "))";
      }
      default: {
        const std::string& f = floats_[Pick(static_cast<int>(floats_.size()))];
        return t_ + "(" + f + "(" + x + "))";
      }
    }
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  std::mt19937_64 rng_;
  std::string t_;
  std::vector<std::string> floats_, ints_;
};

// `count` values for float dtype `bits` (16: float32 values around half's range) that favour
// the edges, as doubles.
std::vector<double> EdgeFloats(int bits, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double max = bits == 64   ? 1.7976931348623157e308
                     : bits == 32 ? 3.4028234663852886e38
                                  : 65504.0;
  const double tiny = bits == 64   ? 4.9406564584124654e-324
                      : bits == 32 ? 1.401298464324817e-45
                                   : 5.9604644775390625e-08;
  const double least_normal = bits == 64   ? 2.2250738585072014e-308
                              : bits == 32 ? 1.1754943508222875e-38
                                           : 6.103515625e-05;
  const double edges[] = {0.0, -0.0, 1.0,          -1.0,     0.5,          -0.5,
                          1.5, 2.5,  -2.5,         INFINITY, -INFINITY,    NAN,
                          max, -max, tiny,         -tiny,    least_normal, least_normal - tiny,
                          3.0, 1e9,  -2147483648.0};
  constexpr size_t kEdges = sizeof(edges) / sizeof(edges[0]);
  std::vector<double> v(count);
  for (double& x : v) {
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {
      x = edges[rng() % kEdges];
    } else if (kind == 1) {
      x = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 8.0;
    } else {
      // A random sign, exponent and mantissa over most of the range.
      const int span = bits == 64 ? 1000 : bits == 32 ? 120 : 14;
      const int e = static_cast<int>(rng() % (2 * span + 1)) - span;
      const double m = 1.0 + static_cast<double>(rng() >> 11) * 0x1p-53;
      x = std::ldexp(m, kind == 2 ? e / 4 : e) * (rng() % 2 ? -1.0 : 1.0);
    }
  }
  return v;
}

// The first few elements where `got` and `want` differ, with the inputs a, b, c there.
std::string DescribeFloatDifferences(const std::vector<Buf>& in, const Buf& got, const Buf& want) {
  auto value = [](const Buf& b, size_t i) {
    if (b.dtype.bits == 64) {
      double d;
      std::memcpy(&d, &b.bits[2 * i], 8);
      return d;
    }
    float f;
    std::memcpy(&f, &b.bits[i], 4);
    return static_cast<double>(f);
  };
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < static_cast<size_t>(want.Elements()) && shown < 4; ++i) {
    const double g = value(got, i), w = value(want, i);
    if (std::memcmp(&g, &w, 8) == 0 || (std::isnan(g) && std::isnan(w))) continue;
    char line[256];
    std::snprintf(line, sizeof(line), "t = %zu: a %.17g, b %.17g, c %.17g: got %.17g, want %.17g\n",
                  i, value(in[0], i), value(in[1], i), value(in[2], i), g, w);
    out += line;
    ++shown;
  }
  return out;
}

TEST_P(IrFeatures, RandomFloatExpressionsMatchTheInterpreter) {
  const std::string kind = GetParam();
  Device dev(DLDevice{kDLCPU, 0});
  // Without a device here, cuda's kernels are built and ptxas checks them.
  const bool runs = Runs(kind) && HasKind(kind) && DeviceOf(kind, &dev);
  if (!runs && kind != "cuda") GTEST_SKIP() << kind;
  const std::vector<std::string> floats = {"float32", "float64", "float16"};
  // GLSL here has no 8- or 16-bit integers.
  std::vector<std::string> ints = {"int32", "int64", "uint32"};
  if (kind != "vulkan") ints.push_back("uint8");
  constexpr int kExprs = 16;
  constexpr size_t kN = 256;
  const std::string loop = kind == "c" ? "serial(0, 256)" : "thread(threadIdx.x, 0, 256)";
  uint64_t seed = 0;
  for (const std::string& t : floats) {
    SCOPED_TRACE(t);
    // float16 values live in float32 buffers, converted at the leaves and at the store.
    const bool half = t == "float16";
    const std::string bt = half ? "float32" : t;
    FloatExprGen gen(2000 + seed, t, floats, ints);
    std::string text;
    for (int k = 0; k < kExprs; ++k) {
      text += "func e" + std::to_string(k) + "(a: buffer<" + bt + ">[256], b: buffer<" + bt +
              ">[256], c: buffer<" + bt + ">[256], o: buffer<" + bt + ">[256]) {\n  for t in " +
              loop + " {\n    o[t] = " + (half ? "float32(" + gen.Expr(4) + ")" : gen.Expr(4)) +
              "\n  }\n}\n";
    }
    if (!runs) {
      ExpectPtxasAccepts(text, "random_" + t);
      seed += 4 * kExprs;
      continue;
    }
    const Module m = backplane::Build(text, Target::Parse(kind));
    const ir::IRModule ir_module = ir::Parse(text);
    for (int k = 0; k < kExprs; ++k) {
      const std::string func = "e" + std::to_string(k);
      SCOPED_TRACE(func);
      std::vector<Buf> args;
      for (int b = 0; b < 4; ++b) {
        const std::vector<double> v = EdgeFloats(half ? 16 : t == "float64" ? 64 : 32, kN, ++seed);
        if (bt == "float64") {
          args.push_back(Doubles(v));
        } else {
          args.push_back(Floats(std::vector<float>(v.begin(), v.end())));
        }
      }
      const std::vector<Buf> got = Call(m, func, dev, args);
      const std::vector<Buf> want = Interpret(ir_module, func, args);
      ExpectSameBits(got, want);
      if (HasFailure()) {
        ADD_FAILURE() << DescribeFloatDifferences(args, got[3], want[3]) << text;
        return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, IrFeatures,
    ::testing::ValuesIn(kOnGpu ? std::vector<std::string>{"cuda", "vulkan"}
                               : std::vector<std::string>{"c", "opencl", "vulkan", "cuda"}),
    [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
