// SPDX-License-Identifier: Apache-2.0
// LowerToVersion and Print(module, version) (docs/ir.md, "Versions"): a module lowered to IR text
// version 1 or 2 computes, on the interpreter, bit for bit what the module computes (faults
// included), on the catalog's kernels (also split as bp_build splits them for a GPU Target) and
// construct by construct; the text of the version it was lowered to reads back to the same tree;
// what has no older form is refused by name.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <backplane/ir/version.hpp>
#include <backplane/kernels/catalog.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
namespace bk = backplane::kernels;

namespace {

// ---- running a module on random data ------------------------------------------------------------

// An argument of a run: a scalar as it is, or a buffer of `dtype` and `shape` whose elements are
// random (from the run's seed) in [lo, hi]; a float buffer with `specials` also holds zeros of
// both signs and infinities, and with `nans` NaNs of both signs too (whose sign a lowered
// negation may change: their runs go through isnan).
struct ArgSpec {
  ArgView scalar;
  bool is_buffer = false;
  DType dtype;
  std::vector<int64_t> shape;
  double lo = -8, hi = 8;
  bool specials = false;
  bool nans = false;
};
ArgSpec Scalar(ArgView v) {
  ArgSpec a;
  a.scalar = v;
  return a;
}
ArgSpec Buf(DType t, std::vector<int64_t> shape, double lo = -8, double hi = 8,
            bool specials = false, bool nans = false) {
  ArgSpec a;
  a.is_buffer = true;
  a.dtype = t;
  a.shape = std::move(shape);
  a.lo = lo;
  a.hi = hi;
  a.specials = specials;
  a.nans = nans;
  return a;
}

// What a run did: every buffer's bytes after it, or its fault (the message up to its quote of
// the IR, which names the statement in the module's own words).
struct Outcome {
  std::vector<std::vector<uint8_t>> buffers;
  std::string fault;
};

template <typename T>
void Put(std::vector<uint8_t>* bytes, size_t k, T v) {
  std::memcpy(bytes->data() + k * sizeof(T), &v, sizeof(T));
}

std::vector<uint8_t> Fill(const ArgSpec& a, std::mt19937_64* rng) {
  int64_t n = 1;
  for (int64_t e : a.shape) n *= e;
  const size_t size = a.dtype.is_bool() ? 1 : a.dtype.bits / 8;
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * size);
  std::uniform_real_distribution<double> real(a.lo, a.hi);
  std::uniform_int_distribution<int64_t> integer(static_cast<int64_t>(a.lo),
                                                 static_cast<int64_t>(a.hi));
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {0.0,
                             -0.0,
                             inf,
                             -inf,
                             std::numeric_limits<double>::quiet_NaN(),
                             -std::numeric_limits<double>::quiet_NaN()};
  for (size_t k = 0; k < static_cast<size_t>(n); ++k) {
    double v = a.dtype.is_float() ? real(*rng) : static_cast<double>(integer(*rng));
    if (a.specials && (*rng)() % 4 == 0) v = specials[(*rng)() % (a.nans ? 6 : 4)];
    const DType t = a.dtype;
    if (t == Float32()) {
      Put(&bytes, k, static_cast<float>(v));
    } else if (t == Float64()) {
      Put(&bytes, k, v);
    } else if (t == Float16()) {
      Put(&bytes, k, FloatToHalf(static_cast<float>(v)));
    } else if (t.is_bool()) {
      Put(&bytes, k, static_cast<uint8_t>(static_cast<int64_t>(v) & 1));
    } else {
      const int64_t i = integer(*rng);
      if (t.bits == 8) Put(&bytes, k, static_cast<uint8_t>(i));
      if (t.bits == 16) Put(&bytes, k, static_cast<uint16_t>(i));
      if (t.bits == 32) Put(&bytes, k, static_cast<uint32_t>(i));
      if (t.bits == 64) Put(&bytes, k, static_cast<uint64_t>(i));
    }
  }
  return bytes;
}

std::string FaultOf(const std::string& what) { return what.substr(0, what.find(" in `")); }

Outcome RunOn(const IRModule& m, const std::string& func, const std::vector<ArgSpec>& specs,
              uint64_t seed) {
  std::mt19937_64 rng(seed);
  Outcome out;
  std::vector<ArgView> views;
  out.buffers.reserve(specs.size());
  for (const ArgSpec& a : specs) {
    if (!a.is_buffer) {
      views.push_back(a.scalar);
      continue;
    }
    out.buffers.push_back(Fill(a, &rng));
    views.push_back(BufferArg(out.buffers.back().data(), a.dtype, static_cast<int>(a.shape.size()),
                              a.shape.data()));
  }
  try {
    Interpreter(m).Run(func, views);
  } catch (const Error& e) {
    out.fault = FaultOf(e.what());
  }
  return out;
}

// Whether `m` is one that a reader of `version` reads: TextVersion at most `version`, its text of
// that version with that header, reading back to the same tree.
void ExpectReadableAs(const IRModule& m, int version) {
  EXPECT_LE(TextVersion(m), version);
  const std::string text = Print(m, version);
  const std::string header = "# backplane-ir " + std::to_string(version) + "\n";
  EXPECT_EQ(text.substr(0, header.size()), header);
  const IRModule back = Parse(text);
  EXPECT_TRUE(StructuralEqual(back, m)) << text;
  EXPECT_EQ(Print(back, version), text);
}

// `m` (text of version 2 or 3) lowered to each of `versions` verifies (with `cpu`'s options),
// reads back from its text, and runs `func` bit for bit as `m` does for each seed.
void ExpectSameRuns(const IRModule& m, const std::string& func, const std::vector<ArgSpec>& specs,
                    std::vector<int> versions = {1, 2}, bool cpu = false) {
  VerifyOptions options;
  options.device_is_cpu = cpu;
  Verify(m, options);
  for (int v : versions) {
    SCOPED_TRACE("lowered to version " + std::to_string(v));
    const IRModule lowered = LowerToVersion(m, v);
    EXPECT_EQ(VerifyErrors(lowered, options), std::vector<std::string>{}) << Print(lowered);
    ExpectReadableAs(lowered, v);
    const IRModule back = Parse(Print(lowered, v));
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const Outcome want = RunOn(m, func, specs, seed);
      for (const IRModule* mod : {&lowered, &back}) {
        const Outcome got = RunOn(*mod, func, specs, seed);
        EXPECT_EQ(got.fault, want.fault) << "seed " << seed;
        EXPECT_TRUE(got.buffers == want.buffers) << "seed " << seed << "\n" << Print(lowered, v);
      }
    }
  }
}

// The message of the ir::Error that `fn` throws, which must be of `kind`.
template <typename F>
std::string ErrorOf(F fn, ErrorKind kind) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    return e.what();
  }
  return "no error";
}

// ---- the catalog ----------------------------------------------------------------------------

// One catalog kernel's arguments as the interpreter takes them, in host memory of their dtype.
class CatalogArgs {
 public:
  explicit CatalogArgs(const std::vector<bk::Arg>& args) : args_(args) {
    for (const bk::Arg& a : args_) {
      if (!a.is_buffer) continue;
      std::vector<uint8_t> bytes(a.data.size() * (a.dtype.bits / 8));
      for (size_t k = 0; k < a.data.size(); ++k) {
        if (a.dtype == Float32()) Put(&bytes, k, static_cast<float>(a.data[k]));
        if (a.dtype == Float64()) Put(&bytes, k, a.data[k]);
        if (a.dtype == Int32()) Put(&bytes, k, static_cast<int32_t>(a.data[k]));
      }
      memory_.push_back(std::move(bytes));
    }
    size_t b = 0;
    for (const bk::Arg& a : args_) {
      if (!a.is_buffer) {
        views_.push_back(a.dtype.is_float() ? FloatArg(a.scalar)
                                            : IntArg(static_cast<int64_t>(a.scalar)));
        continue;
      }
      views_.push_back(BufferArg(memory_[b++].data(), a.dtype, static_cast<int>(a.shape.size()),
                                 a.shape.data()));
    }
  }
  const std::vector<ArgView>& views() const { return views_; }
  const std::vector<std::vector<uint8_t>>& memory() const { return memory_; }
  // The outputs' relative errors against the reference, the largest.
  double Error(const bk::Case& c) const {
    std::vector<bk::Arg> got = args_, want = args_;
    c.reference(want);
    double worst = 0;
    size_t b = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!got[i].is_buffer) continue;
      const std::vector<uint8_t>& bytes = memory_[b++];
      for (size_t k = 0; k < got[i].data.size(); ++k) {
        float f = 0;
        if (got[i].dtype == Float32()) std::memcpy(&f, bytes.data() + 4 * k, 4);
        got[i].data[k] = f;
      }
      if (got[i].is_output) worst = std::max(worst, bk::RelativeError(got[i], want[i]));
    }
    return worst;
  }

 private:
  std::vector<bk::Arg> args_;
  std::vector<std::vector<uint8_t>> memory_;
  std::vector<ArgView> views_;
};

// Runs `func` of the split module `host`; its call_packed launches run `device`.
void RunSplit(const IRModule& host, const IRModule& device, const std::string& func,
              const std::vector<ArgView>& args) {
  const Interpreter h(host), d(device);
  h.Run(func, args, [&](const std::string& name, const std::vector<ArgView>& a) -> int64_t {
    d.Run(name, a);  // with the trailing launch extents
    return 0;
  });
}

IRModule Only(const IRModule& m, const std::string& func) {
  IRModule out;
  out.Add(*m.Find(func));
  return out;
}

std::vector<std::string> CatalogFuncs() {
  std::vector<std::string> names;
  for (const bk::Case& c : bk::Catalog()) names.push_back(c.func);
  return names;
}

class IrLowerCatalog : public ::testing::TestWithParam<std::string> {};

// Every catalog kernel lowered to version 1 and 2 runs bit for bit as it is, on random inputs of
// its `small` sizes (and within the catalog's tolerance of the float64 reference); a GPU kernel
// also split as bp_build splits it for a GPU Target, lowered after the split (the parts a code
// generator gets) and before it. A kernel of the version already is itself (the same nodes), so
// it is not run again.
TEST_P(IrLowerCatalog, RunsBitForBitAsItIs) {
  const bk::Case& c = *bk::Find(GetParam());
  const IRModule m = Only(Parse(bk::ReadKernelFile(c.file), c.file), c.func);
  const Interpreter original(m);
  for (int v : {1, 2}) {
    SCOPED_TRACE(c.func + " lowered to version " + std::to_string(v));
    const IRModule lowered = LowerToVersion(m, v);
    EXPECT_EQ(VerifyErrors(lowered), std::vector<std::string>{});
    ExpectReadableAs(lowered, v);
    if (TextVersion(m) <= v) {
      EXPECT_EQ(lowered.functions()[0].body.get(), m.functions()[0].body.get());
      continue;
    }
    // Its text reads back to the same tree (ExpectReadableAs), so runs the same: it is not run.
    const Interpreter low(lowered);
    // Split, then each part lowered: what bp_build hands a host and a device code generator.
    SplitResult parts, after;
    if (c.needs_threads) {
      const SplitResult split = SplitHostDevice(m, false);
      parts = {LowerToVersion(split.host, v), LowerToVersion(split.device, v)};
      EXPECT_EQ(VerifyErrors(parts.device), std::vector<std::string>{});
      ExpectReadableAs(parts.device, v);
      after = SplitHostDevice(lowered, false);
    }
    // One seed: conv2d at its small sizes takes seconds a run under AddressSanitizer.
    for (uint64_t seed : {1}) {
      const std::vector<bk::Arg> args = c.make_args(c.small, seed);
      CatalogArgs want(args), got(args);
      original.Run(c.func, want.views());
      low.Run(c.func, got.views());
      EXPECT_LE(want.Error(c), c.tolerance);
      EXPECT_TRUE(got.memory() == want.memory()) << "seed " << seed;
      if (!c.needs_threads) continue;
      CatalogArgs split_first(args), lowered_first(args);
      RunSplit(parts.host, parts.device, c.func, split_first.views());
      EXPECT_TRUE(split_first.memory() == want.memory()) << "split, then lowered; seed " << seed;
      RunSplit(after.host, after.device, c.func, lowered_first.views());
      EXPECT_TRUE(lowered_first.memory() == want.memory()) << "lowered, then split; seed " << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, IrLowerCatalog, ::testing::ValuesIn(CatalogFuncs()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

// ---- constructs one by one ------------------------------------------------------------------

const DType kF32 = Float32();

TEST(IrLowerVersion, LoopStepsUpAndDownAndSchedules) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, st: int32, x: buffer<float32>[64], y: buffer<float32>[64], "
      "o: buffer<int32>[64]) {\n"
      "  for i in serial(0, 16, 4) {\n"
      "    y[i] = x[i] * 2.0\n"
      "  }\n"
      "  for i in serial(63, 21, -3) {\n"
      "    y[i] += x[i]\n"
      "  }\n"
      "  for j in parallel(1, n, st) schedule(dynamic, 4) {\n"
      "    o[j] = j\n"
      "  }\n"
      "  for k in parallel(0, 8) schedule(guided) {\n"
      "    o[k + 56] = k * 3\n"
      "  }\n"
      "  for q in serial(n, 4, 0 - st) {\n"
      "    o[q] += 100\n"
      "  }\n"
      "}\n");
  // The steps of the runtime loops: down and up, and a loop that leaves its buffer (a fault).
  for (int64_t st : {1, 3, 5, -1, 0, 40}) {
    SCOPED_TRACE("st " + std::to_string(st));
    ExpectSameRuns(m, "f",
                   {Scalar(IntArg(10)), Scalar(IntArg(st)), Buf(kF32, {64}), Buf(kF32, {64}),
                    Buf(Int32(), {64}, -100, 100)},
                   {1, 2}, true);
  }
  const IRModule lowered = LowerToVersion(m, 1);
  const std::string text = Print(lowered, 1);
  EXPECT_EQ(text.find("schedule"), std::string::npos) << text;
  EXPECT_NE(text.find("for j_k in parallel(0, j_count)"), std::string::npos) << text;
}

TEST(IrLowerVersion, VariablesInLoopsOfEveryKind) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], r: buffer<float64>[2]) {\n"
      "  var total: float64 = 0.0f64\n"
      "  var count: int32 = 0\n"
      "  for i in serial(0, n) {\n"
      "    total += float64(x[i])\n"
      "    if (x[i] > 0.0) {\n"
      "      count = count + 1\n"
      "    }\n"
      "  }\n"
      "  var scale: float32 = float32(total) / 8.0\n"
      "  for i in parallel(0, n) {\n"
      "    var t: float32 = x[i] * scale\n"
      "    for k in serial(0, 3) {\n"
      "      t *= 0.5\n"
      "      t -= float32(count)\n"
      "    }\n"
      "    y[i] = t\n"
      "  }\n"
      "  for i in vectorized(0, n) {\n"
      "    var u: float32 = y[i]\n"
      "    u /= scale + float32(count)\n"
      "    y[i] = u + scale\n"
      "  }\n"
      "  r[0] = total\n"
      "  r[1] = float64(count)\n"
      "}\n");
  ExpectSameRuns(m, "f",
                 {Scalar(IntArg(37)), Buf(kF32, {37}), Buf(kF32, {37}), Buf(Float64(), {2})}, {1},
                 true);
  // A variable read inside a parallel or vectorized loop that it is declared outside of is read
  // through a let bound right before the loop.
  const std::string text = Print(LowerToVersion(m, 1), 1);
  EXPECT_NE(text.find("alloc total: float64[1] local"), std::string::npos) << text;
  EXPECT_NE(text.find("  {\n    let scale_value: float32 = scale[0]\n"
                      "    let count_value: int32 = count[0]\n    for i in parallel(0, n)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("alloc t: float32[1] local"), std::string::npos) << text;
  EXPECT_NE(text.find("t[0] = t[0] - float32(count_value)"), std::string::npos) << text;
}

// Nested variables, siblings of one name, a name the lowering would take (`s_value`) and a
// boolean variable.
TEST(IrLowerVersion, NestedVariablesAndFreshNames) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, x: buffer<int32>[n], y: buffer<int32>[n], s_value: int32) {\n"
      "  var s: int32 = s_value\n"
      "  var any: bool = false\n"
      "  for i in serial(0, n) {\n"
      "    var a: int32 = x[i]\n"
      "    for j in serial(0, 3) {\n"
      "      var b: int32 = a + j\n"
      "      b *= 3\n"
      "      a = a + b\n"
      "      any = any || b > 40\n"
      "    }\n"
      "    s += a\n"
      "  }\n"
      "  for i in serial(0, n) {\n"
      "    var a: int32 = s - x[i]\n"
      "    a -= 1\n"
      "    y[i] = a\n"
      "  }\n"
      "  for i in parallel(0, n) {\n"
      "    y[i] += select(any, s, 0 - s)\n"
      "  }\n"
      "}\n");
  ExpectSameRuns(
      m, "f",
      {Scalar(IntArg(29)), Buf(Int32(), {29}, -20, 20), Buf(Int32(), {29}), Scalar(IntArg(7))}, {1},
      true);
  const std::string text = Print(LowerToVersion(m, 1), 1);
  EXPECT_NE(text.find("let s_value1: int32 = s[0]"), std::string::npos) << text;
  EXPECT_NE(text.find("alloc any: bool[1] local"), std::string::npos) << text;
}

TEST(IrLowerVersion, CompoundAssignment) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, x: buffer<float32>[n], k: buffer<int32>[n], r: buffer<float32>[1], "
      "q: buffer<int32>[1]) {\n"
      "  var acc: float32 = 1.0\n"
      "  var ia: int32 = 7\n"
      "  for i in serial(0, n) {\n"
      "    acc += x[i]\n"
      "    acc *= 1.01\n"
      "    acc -= 0.5\n"
      "    acc /= 1.25\n"
      "    ia += k[i]\n"
      "    ia *= 3\n"
      "    ia -= i\n"
      "    ia /= 2\n"
      "    k[i] += ia\n"
      "  }\n"
      "  r[0] = acc\n"
      "  q[0] = ia\n"
      "}\n");
  ExpectSameRuns(m, "f",
                 {Scalar(IntArg(33)), Buf(kF32, {33}), Buf(Int32(), {33}, -1000, 1000),
                  Buf(kF32, {1}), Buf(Int32(), {1})},
                 {1}, true);
}

// -x on every integer type, INT_MIN included, and on floats: zeros of both signs, infinities and
// NaNs (whose sign bit only may differ: the run compares bytes, so the NaNs here go through
// isnan); literals are negated as literals.
TEST(IrLowerVersion, NegationOfIntegersAndFloats) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, a: buffer<int32>[n], b: buffer<int8>[n], c: buffer<uint32>[n], "
      "d: buffer<int64>[n], x: buffer<float32>[n], z: buffer<float64>[n], "
      "ia: buffer<int32>[n], ib: buffer<int8>[n], ic: buffer<uint32>[n], id: buffer<int64>[n], "
      "fx: buffer<float32>[n], fz: buffer<float64>[n], isn: buffer<bool>[n], "
      "lit: buffer<float64>[8], il: buffer<int64>[8]) {\n"
      "  for i in serial(0, n) {\n"
      "    ia[i] = -a[i]\n"
      "    ib[i] = -(b[i] + b[i])\n"
      "    ic[i] = -c[i]\n"
      "    id[i] = -(-d[i])\n"
      "    let nx: float32 = -x[i]\n"
      "    fx[i] = select(nx != nx, 0.0, nx)\n"
      "    isn[i] = nx != nx\n"
      "    fz[i] = select(-z[i] != -z[i], 1.0f64, -z[i] + -(z[i] * 2.0f64))\n"
      "    let nh: float32 = float32(-float16(x[i]))\n"
      "    fx[i] += select(nh != nh, 0.0, nh)\n"
      "  }\n"
      "  lit[0] = -(0.0f64)\n"
      "  lit[1] = -(-0.0f64)\n"
      "  lit[2] = -(inff64)\n"
      "  lit[3] = -(1.5f64)\n"
      "  lit[4] = float64(-(2.5))\n"
      "  lit[5] = float64(-(0.0f16))\n"
      "  lit[6] = select(-(nan) != -(nan), 3.0f64, 0.0f64)\n"
      "  lit[7] = 0.0f64 - 0.0f64\n"
      "  il[0] = int64(-(-2147483648))\n"
      "  il[1] = -(-9223372036854775808i64)\n"
      "  il[2] = int64(-(5u32))\n"
      "  il[3] = int64(-(-128i8))\n"
      "  il[4] = int64(-(0u8))\n"
      "  il[5] = -(7i64)\n"
      "  il[6] = int64(-(2147483647))\n"
      "  il[7] = int64(-(18446744073709551615u64))\n"
      "}\n");
  const int64_t n = 41;
  ExpectSameRuns(
      m, "f",
      {Scalar(IntArg(n)), Buf(Int32(), {n}, INT32_MIN, INT32_MAX), Buf(Int(8), {n}, -128, 127),
       Buf(UInt(32), {n}, 0, UINT32_MAX), Buf(Int64(), {n}, -1e18, 1e18),
       Buf(kF32, {n}, -8, 8, true, true), Buf(Float64(), {n}, -8, 8, true, true), Buf(Int32(), {n}),
       Buf(Int(8), {n}), Buf(UInt(32), {n}), Buf(Int64(), {n}), Buf(kF32, {n}), Buf(Float64(), {n}),
       Buf(Bool(), {n}), Buf(Float64(), {8}), Buf(Int64(), {8})},
      {1}, true);
  // INT_MIN exactly, and a float +0.0 whose negation is -0.0 (0 - x would be +0.0).
  const IRModule lowered = LowerToVersion(m, 1);
  std::vector<int32_t> a = {INT32_MIN, INT32_MAX, 0, -1}, ia(4);
  std::vector<float> x = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -2.5f}, fx(4);
  std::vector<uint8_t> nan(4);
  std::vector<double> lit(8);
  std::vector<int64_t> il(8);
  std::vector<int8_t> b(4), ib(4);
  std::vector<uint32_t> c = {0, 1, 5, UINT32_MAX}, ic(4);
  std::vector<int64_t> d(4), id(4);
  std::vector<double> z(4), fz(4);
  int64_t s4[] = {4}, s8[] = {8};
  Interpreter(lowered).Run(
      "f", {IntArg(4), BufferArg(a.data(), Int32(), 1, s4), BufferArg(b.data(), Int(8), 1, s4),
            BufferArg(c.data(), UInt(32), 1, s4), BufferArg(d.data(), Int64(), 1, s4),
            BufferArg(x.data(), kF32, 1, s4), BufferArg(z.data(), Float64(), 1, s4),
            BufferArg(ia.data(), Int32(), 1, s4), BufferArg(ib.data(), Int(8), 1, s4),
            BufferArg(ic.data(), UInt(32), 1, s4), BufferArg(id.data(), Int64(), 1, s4),
            BufferArg(fx.data(), kF32, 1, s4), BufferArg(fz.data(), Float64(), 1, s4),
            BufferArg(nan.data(), Bool(), 1, s4), BufferArg(lit.data(), Float64(), 1, s8),
            BufferArg(il.data(), Int64(), 1, s8)});
  EXPECT_EQ(ia, (std::vector<int32_t>{INT32_MIN, -INT32_MAX, 0, 1}));
  EXPECT_EQ(ic, (std::vector<uint32_t>{0, UINT32_MAX, UINT32_MAX - 4, 1}));
  EXPECT_TRUE(std::signbit(fx[0]) && fx[0] == 0);   // -(+0.0) + float32(-float16(+0.0))
  EXPECT_TRUE(!std::signbit(fx[1]) && fx[1] == 0);  // -(-0.0) + ...
  EXPECT_EQ(fx[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(fx[3], 5.0f);
  EXPECT_TRUE(std::signbit(lit[0]) && lit[0] == 0);
  EXPECT_TRUE(!std::signbit(lit[1]) && lit[1] == 0);
  EXPECT_EQ(lit[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(lit[3], -1.5);
  EXPECT_EQ(lit[4], -2.5);
  EXPECT_TRUE(std::signbit(lit[5]) && lit[5] == 0);
  EXPECT_EQ(lit[6], 3.0);
  EXPECT_TRUE(!std::signbit(lit[7]) && lit[7] == 0);
  EXPECT_EQ(il, (std::vector<int64_t>{INT32_MIN, INT64_MIN, int64_t{UINT32_MAX} - 4, -128, 0, -7,
                                      -INT32_MAX, 1}));
  // The lowered forms, as text of version 1 writes them.
  const std::string text = Print(lowered, 1);
  for (const char* want :
       {"ia[i] = -a[i]\n", "ib[i] = -(b[i] + b[i])\n", "let nx: float32 = x[i] * -1.0\n",
        "id[i] = --d[i]\n", "let nh: float32 = float32(float16(x[i]) * -1.0f16)\n",
        "lit[0] = -0.0f64\n", "lit[1] = 0.0f64\n", "il[0] = int64(-2147483648)\n",
        "il[2] = int64(4294967291u32)\n"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
  }
}

// Vector operands: an integer vector's 0 - x has a broadcast zero, a float vector's x * -1.0 a
// broadcast -1.0, as text of version 1 reads them.
TEST(IrLowerVersion, NegationOfVectors) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(a: buffer<int32>[8], x: buffer<float32>[8], b: buffer<int32>[8], "
      "y: buffer<float32>[8]) {\n"
      "  b[ramp(0, 1, 8)] = -a[ramp(0, 1, 8)] + -ramp(0, 2, 8)\n"
      "  y[ramp(0, 1, 8)] = -x[ramp(0, 1, 8)]\n"
      "}\n");
  ExpectSameRuns(m, "f",
                 {Buf(Int32(), {8}, -1e9, 1e9), Buf(kF32, {8}, -8, 8, true), Buf(Int32(), {8}),
                  Buf(kF32, {8})},
                 {1}, true);
}

// A variable inside thread-bound loops (declared in the block, read by the inner thread loop;
// declared per thread and assigned), and variables of host code read in kernels and sizing a
// device workspace: the lowered module verifies for a GPU, SplitHostDevice splits it, and both
// run as the module does.
TEST(IrLowerVersion, VariablesOfGpuKernelsAndHostCode) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func g(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], out: buffer<float32>[4]) {\n"
      "  var bias: float32 = 0.25\n"
      "  for k in serial(0, 4) {\n"
      "    bias *= 1.5\n"
      "  }\n"
      "  var blocks: int32 = (n + 31) / 32\n"
      "  alloc part: float32[blocks] global\n"
      "  for bx in thread(blockIdx.x, 0, blocks) {\n"
      "    var base: int32 = bx * 32\n"
      "    for tx in thread(threadIdx.x, 0, 32) {\n"
      "      var acc: float32 = bias\n"
      "      for r in serial(0, 3) {\n"
      "        if (base + tx < n) {\n"
      "          acc += x[base + tx] * float32(r)\n"
      "        }\n"
      "      }\n"
      "      if (base + tx < n) {\n"
      "        y[base + tx] = acc\n"
      "      }\n"
      "      if (tx == 0) {\n"
      "        part[bx] = acc\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  for b in thread(blockIdx.x, 0, blocks) {\n"
      "    out[b] = part[b] * bias\n"
      "  }\n"
      "}\n");
  const std::vector<ArgSpec> specs = {Scalar(IntArg(75)), Buf(kF32, {75}), Buf(kF32, {75}),
                                      Buf(kF32, {4})};
  ExpectSameRuns(m, "g", specs, {1});
  const IRModule lowered = LowerToVersion(m, 1);
  for (const IRModule* mod : {&m, &lowered}) {
    const SplitResult split = SplitHostDevice(*mod, false);
    std::vector<const PrimFunc*> kernels;
    for (const PrimFunc& f : split.device.functions()) kernels.push_back(&f);
    EXPECT_EQ(SplitErrors(split.host, kernels), std::vector<std::string>{});
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const Outcome want = RunOn(m, "g", specs, seed);
      std::mt19937_64 rng(seed);
      std::vector<std::vector<uint8_t>> mem = {Fill(specs[1], &rng), Fill(specs[2], &rng),
                                               Fill(specs[3], &rng)};
      const int64_t shape[] = {75}, four[] = {4};
      RunSplit(split.host, split.device, "g",
               {IntArg(75), BufferArg(mem[0].data(), kF32, 1, shape),
                BufferArg(mem[1].data(), kF32, 1, shape), BufferArg(mem[2].data(), kF32, 1, four)});
      EXPECT_TRUE(mem == want.buffers) << "seed " << seed;
    }
  }
  // The kernels' text of version 1 takes the host variables as scalar params; the workspace is
  // sized by a let.
  const SplitResult split = SplitHostDevice(lowered, false);
  EXPECT_EQ(TextVersion(split.device), 1);
  const std::string text = Print(split.device, 1);
  EXPECT_NE(text.find("func g_kernel0(n: int32, blocks_value: int32, blocks_value1: int32, "
                      "bias_value: float32, "),
            std::string::npos)
      << text;
  EXPECT_NE(Print(split.host, 1)
                .find("  let blocks_value: int32 = blocks[0]\n"
                      "  alloc part: float32[blocks_value] global\n"),
            std::string::npos)
      << Print(split.host, 1);
}

// Shapes are lowered too: a param's with a negation (its buffer rebuilt, every access following),
// an allocation's sized by a variable.
TEST(IrLowerVersion, ShapesOfParamsAndAllocations) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, x: buffer<int32>[-(0 - n)], y: buffer<int32>[n]) {\n"
      "  var len: int32 = n / 2\n"
      "  len += 1\n"
      "  alloc t: int32[-(-len)] local\n"
      "  for i in serial(0, len) {\n"
      "    t[i] = x[i] * 2\n"
      "  }\n"
      "  for i in serial(0, len) {\n"
      "    y[i] = t[len - 1 - i] + -x[i]\n"
      "  }\n"
      "}\n");
  ExpectSameRuns(m, "f", {Scalar(IntArg(13)), Buf(Int32(), {13}, -50, 50), Buf(Int32(), {13})}, {1},
                 true);
  const IRModule lowered = LowerToVersion(m, 1);
  EXPECT_EQ(lowered.functions()[0].params[1].buffer().name(), "x");
  EXPECT_NE(Print(lowered, 1).find("x: buffer<int32>[--n]"), std::string::npos)
      << Print(lowered, 1);
  EXPECT_NE(Print(lowered, 1)
                .find("  let len_value: int32 = len[0]\n  alloc t: int32[--len_value] local\n"),
            std::string::npos)
      << Print(lowered, 1);
}

// A fault (an index out of bounds, a division by zero) is the same fault after lowering.
TEST(IrLowerVersion, FaultsAreTheSame) {
  const IRModule m = Parse(
      "# backplane-ir 2\n"
      "func f(n: int32, d: int32, x: buffer<int32>[8], y: buffer<int32>[8]) {\n"
      "  var at: int32 = 0\n"
      "  for i in serial(0, n, 2) {\n"
      "    at += 1\n"
      "    y[at] = x[i] / -d\n"
      "  }\n"
      "}\n");
  ExpectSameRuns(m, "f",
                 {Scalar(IntArg(4)), Scalar(IntArg(-3)), Buf(Int32(), {8}), Buf(Int32(), {8})}, {1},
                 true);
  EXPECT_EQ(RunOn(m, "f",
                  {Scalar(IntArg(20)), Scalar(IntArg(3)), Buf(Int32(), {8}), Buf(Int32(), {8})}, 1)
                .fault,
            "f: index 8 is out of bounds for dimension 0 of buffer 'x' (extent 8)");
  EXPECT_EQ(
      RunOn(m, "f", {Scalar(IntArg(4)), Scalar(IntArg(0)), Buf(Int32(), {8}), Buf(Int32(), {8})}, 1)
          .fault,
      "f: integer division by zero");
  ExpectSameRuns(m, "f",
                 {Scalar(IntArg(20)), Scalar(IntArg(3)), Buf(Int32(), {8}), Buf(Int32(), {8})}, {1},
                 true);
  ExpectSameRuns(m, "f",
                 {Scalar(IntArg(4)), Scalar(IntArg(0)), Buf(Int32(), {8}), Buf(Int32(), {8})}, {1},
                 true);
}

// ---- what stays, what is refused ------------------------------------------------------------

TEST(IrLowerVersion, AModuleOfTheVersionIsItself) {
  const IRModule m = Parse(
      "# backplane-ir 1\n"
      "func f(n: int32, x: buffer<float32>[n]) {\n"
      "  for i in parallel(0, n) {\n"
      "    x[i] = -x[i]\n"
      "  }\n"
      "}\n");
  for (int v = 1; v <= kTextFormatVersion; ++v) {
    const IRModule same = LowerToVersion(m, v);
    ASSERT_EQ(same.functions().size(), 1u);
    EXPECT_EQ(same.functions()[0].body.get(), m.functions()[0].body.get());
  }
  const IRModule v2 = Parse("# backplane-ir 2\nfunc f(a: buffer<int32>[1]) {\n  a[0] = -a[0]\n}\n");
  EXPECT_EQ(LowerToVersion(v2, 2).functions()[0].body.get(), v2.functions()[0].body.get());
  EXPECT_EQ(LowerToVersion(v2, 3).functions()[0].body.get(), v2.functions()[0].body.get());
}

TEST(IrLowerVersion, AtomicsAndRemainderAreRefusedByName) {
  const IRModule hist = Parse(
      "# backplane-ir 2\n"
      "func copy(n: int32, a: buffer<int32>[n]) {\n"
      "  for i in serial(0, n, 2) {\n"
      "    a[i] = -a[i]\n"
      "  }\n"
      "}\n"
      "func hist(n: int32, x: buffer<int32>[n], h: buffer<int32>[16]) {\n"
      "  for i in parallel(0, n) {\n"
      "    atomic_add(h[floormod(x[i], 16)], 1)\n"
      "    atomic_max(h[0], x[i])\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(ErrorOf([&] { LowerToVersion(hist, 1); }, ErrorKind::kUnsupported),
            "function 'hist' uses atomic_add (`atomic_add(h[floormod(x[i], 16)], 1)`), which "
            "needs IR text version 2");
  const IRModule rem = Parse(
      "func a(n: int32, x: buffer<int32>[n]) {\n"
      "  for i in serial(0, n) {\n"
      "    x[i] = -x[i]\n"
      "  }\n"
      "}\n"
      "func b(n: int32, x: buffer<int32>[n], h: buffer<int32>[4]) {\n"
      "  for i in serial(0, n) {\n"
      "    x[i] = x[i] + (i - 1) % 4\n"
      "    atomic_min(h[0], x[i] % 3)\n"
      "  }\n"
      "}\n");
  // The first in the text: for version 1 the remainder, before the atomic.
  for (int v : {1, 2}) {
    EXPECT_EQ(ErrorOf([&] { LowerToVersion(rem, v); }, ErrorKind::kUnsupported),
              "function 'b' uses C's remainder % (`(i - 1) % 4`), which needs IR text version 3");
  }
  // A parameter's shape comes first.
  const IRModule shape = Parse(
      "func s(n: int32, h: buffer<int32>[4], x: buffer<int32>[n % 8 + 1]) {\n"
      "  atomic_add(h[0], 1)\n"
      "}\n");
  EXPECT_EQ(ErrorOf([&] { LowerToVersion(shape, 1); }, ErrorKind::kUnsupported),
            "function 's' uses C's remainder % (`n % 8`), which needs IR text version 3");
  // The stable parts bp_build's refusal repeats.
  const std::string message = ErrorOf([&] { LowerToVersion(hist, 1); }, ErrorKind::kUnsupported);
  EXPECT_NE(message.find("which needs IR text version"), std::string::npos);
  // A long construct is quoted as QuoteText quotes.
  std::string sum = "x[0]";
  for (int k = 1; k < 100; ++k) sum += " + x[" + std::to_string(k) + "]";
  const IRModule longer = Parse("func l(x: buffer<int32>[100]) {\n  x[0] = (" + sum + ") % 7\n}\n");
  EXPECT_EQ(ErrorOf([&] { LowerToVersion(longer, 2); }, ErrorKind::kUnsupported),
            "function 'l' uses C's remainder % (`" + QuoteText("(" + sum + ") % 7") +
                "`), which needs IR text version 3");
}

TEST(IrLowerVersion, VersionsOutOfRangeAreRefused) {
  const IRModule m = Parse("func f(a: buffer<int32>[1]) {\n  a[0] = -a[0] % 3\n}\n");
  for (int v : {0, -1, kTextFormatVersion + 1}) {
    EXPECT_EQ(ErrorOf([&] { LowerToVersion(m, v); }, ErrorKind::kValue),
              "LowerToVersion: there is no IR text version " + std::to_string(v) +
                  ": expected a version from 1 to 3 (those this library reads and writes)");
    EXPECT_EQ(ErrorOf([&] { Print(m, v); }, ErrorKind::kValue),
              "Print: there is no IR text version " + std::to_string(v) +
                  ": expected a version from 1 to 3 (this library writes those)");
  }
  for (int v : {1, 2}) {
    EXPECT_EQ(ErrorOf([&] { Print(m, v); }, ErrorKind::kValue),
              "Print: the module needs IR text version 3 (TextVersion), so it cannot be written "
              "as version " +
                  std::to_string(v) + ": expected a version from 3 to 3; to write version " +
                  std::to_string(v) + ", lower the module first with LowerToVersion(module, " +
                  std::to_string(v) + ")");
  }
  EXPECT_EQ(Print(m, 3), Print(m));
}

// Print(module, version) for every version a module can be written as: the header, and the text
// reads back to the same tree; version 1 writes `0 - x` as `-x`, versions 2 and 3 as it is.
TEST(IrLowerVersion, PrintOfEachVersionRoundTrips) {
  const IRModule m = Parse(
      "# backplane-ir 1\n"
      "func f(n: int32, x: buffer<float32>[n], k: buffer<int32>[n]) {\n"
      "  for i in parallel(0, n) {\n"
      "    x[i] = -x[i] + x[i] * -1.0\n"
      "    k[i] = k[i] * 2\n"
      "  }\n"
      "}\n");
  ASSERT_EQ(TextVersion(m), 1);
  EXPECT_EQ(Print(m), Print(m, 1));
  for (int v = 1; v <= kTextFormatVersion; ++v) ExpectReadableAs(m, v);
  EXPECT_NE(Print(m, 1).find("x[i] = -x[i] + x[i] * -1.0\n    k[i] = k[i] * 2\n"),
            std::string::npos);
  EXPECT_NE(Print(m, 2).find("x[i] = 0.0 - x[i] + x[i] * -1.0\n    k[i] *= 2\n"), std::string::npos)
      << Print(m, 2);
  const IRModule v2 = Parse("func g(a: buffer<float32>[2]) {\n  a[0] = -a[1]\n}\n");
  EXPECT_EQ(Print(v2, 2), Print(v2));
  EXPECT_EQ(Print(v2, 3),
            "# backplane-ir 3\n\nfunc g(a: buffer<float32>[2]) {\n  a[0] = -a[1]\n}\n");
  ExpectReadableAs(v2, 3);
}

// 50,000 nested negations (and a run of variables) lower without running out of stack, are not
// refused, and compute what they did.
TEST(IrLowerVersion, DeepTreesLower) {
  constexpr int kDepth = 50000;
  Var x("x", Float32()), k("k", Int32());
  Expr fneg = x, ineg = k;
  for (int d = 0; d < kDepth + 1; ++d) {
    fneg = Neg(fneg);
    ineg = Neg(ineg);
  }
  Buffer out("out", Float32(), {IntImm(Int32(), 1)}), iout("iout", Int32(), {IntImm(Int32(), 1)});
  Stmt body =
      Seq({Store(out, {IntImm(Int32(), 0)}, fneg), Store(iout, {IntImm(Int32(), 0)}, ineg)});
  // Ten nested variables, each read once.
  std::vector<Var> vars;
  for (int d = 0; d < 10; ++d) vars.emplace_back("v" + std::to_string(d), Int32());
  Expr total = k;
  for (const Var& v : vars) total = total + v;
  body = Seq({body, Store(iout, {IntImm(Int32(), 0)}, Load(iout, {IntImm(Int32(), 0)}) + total)});
  for (int d = 9; d >= 0; --d)
    body = DeclareVar(vars[static_cast<size_t>(d)], IntImm(Int32(), d), body);
  IRModule built;
  built.Add(PrimFunc("deep", {x, k, out, iout}, body));
  const IRModule& m = built;
  const IRModule lowered = LowerToVersion(m, 1);
  EXPECT_EQ(TextVersion(lowered), 1);
  EXPECT_LE(TreeDepth(lowered), TreeDepth(m) + 40);
  ExpectReadableAs(lowered, 1);
  for (const IRModule* mod : {&m, &lowered}) {
    float o = 0;
    int32_t io = 0;
    const int64_t one[] = {1};
    Interpreter(*mod).Run("deep",
                          {FloatArg(-0.0), IntArg(INT32_MIN + 5), BufferArg(&o, Float32(), 1, one),
                           BufferArg(&io, Int32(), 1, one)});
    EXPECT_TRUE(o == 0 && !std::signbit(o));  // an odd number of negations of -0.0
    EXPECT_EQ(io, 45);  // -(INT32_MIN + 5) + (INT32_MIN + 5) + 0 + 1 + ... + 9
  }
}

}  // namespace
