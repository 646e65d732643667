// SPDX-License-Identifier: Apache-2.0
// The IR interpreter as the oracle for any kernel (runner/check.hpp): a user
// kernel that is not in the catalog is checked on the c target (and OpenCL where a device is
// here); a module whose code does something other than the IR it is checked against, or a
// tampered result, is a mismatch naming function, buffer, index, got, expected and the
// tolerance; scalars of every dtype reach the kernel exactly, and a value that does not fit
// its param is refused naming the param and its dtype.
#include <gtest/gtest.h>

#include <backplane/backplane.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using backplane::Build;
using backplane::Device;
using backplane::Error;
using backplane::Module;
using backplane::Target;
namespace ir = backplane::ir;
namespace runner = backplane::runner;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Not in the catalog: a stencil with a float scalar, an int64 offset and an in-place update.
const char* kUserKernel = R"(# backplane-ir 1

func blur(n: int32, alpha: float32, bias: int64, x: buffer<float32>[n], y: buffer<float32>[n], hits: buffer<int64>[n]) {
  for i in serial(0, n) {
    let l: int32 = max(i - 1, 0)
    let r: int32 = min(i + 1, n - 1)
    y[i] = alpha * (x[l] + x[i] + x[r]) / 3.0 + y[i]
    hits[i] = hits[i] + int64(i) * bias
  }
}
)";

// The same, but the code reads the neighbour on the left twice (a wrong index).
const char* kWrongKernel = R"(# backplane-ir 1

func blur(n: int32, alpha: float32, bias: int64, x: buffer<float32>[n], y: buffer<float32>[n], hits: buffer<int64>[n]) {
  for i in serial(0, n) {
    let l: int32 = max(i - 1, 0)
    let r: int32 = min(i + 1, n - 1)
    y[i] = alpha * (x[l] + x[i] + x[l]) / 3.0 + y[i]
    hits[i] = hits[i] + int64(i) * bias
  }
}
)";

TEST(CheckAgainstInterpreter, AUserKernelMatchesOnTheCTarget) {
  const Module m = Build(kUserKernel, Target::Parse("c"));
  const runner::Oracle oracle = runner::Oracle::FromModule(m);
  const auto args =
      runner::MakeCheckArgs(oracle.Function("blur"), {{"n", "1031"}, {"bias", "5000000000"}}, 3);
  const runner::CheckResult r = runner::RunChecked(m, oracle, "blur", Device("cpu", 0), args);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_LE(r.max_ratio, 1.0);
  // The int64 scalar beyond int32 arrived whole: hits[i] grew by i * 5e9.
  const runner::CheckArg& hits = r.got[5];
  for (size_t i : {size_t{0}, size_t{1}, size_t{1030}}) {
    EXPECT_EQ(static_cast<int64_t>(hits.Element(i)) - static_cast<int64_t>(args[5].Element(i)),
              static_cast<int64_t>(i) * 5000000000LL);
  }
}

TEST(CheckAgainstInterpreter, CodeThatDiffersFromTheIRIsAMismatch) {
  // The module's code reads x[l] twice; the IR it is checked against reads x[r].
  const Module m = Build(kWrongKernel, Target::Parse("c"));
  const runner::Oracle oracle(ir::Parse(kUserKernel, "blur.bpir"));
  const auto args = runner::MakeCheckArgs(oracle.Function("blur"), {{"n", "64"}, {"bias", "1"}}, 1);
  const runner::CheckResult r = runner::RunChecked(m, oracle, "blur", Device("cpu", 0), args);
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.error, "function 'blur', buffer 'y'")) << r.error;
  // At i = 0, l = 0 and r = 1: the code adds x[0] where the IR adds x[1].
  EXPECT_TRUE(Contains(r.error, "first difference at index 0 of 64")) << r.error;
  EXPECT_TRUE(Contains(r.error, "got ")) << r.error;
  EXPECT_TRUE(Contains(r.error, "the interpreter gives ")) << r.error;
  EXPECT_TRUE(Contains(r.error, "relative tolerance 0.0001 for float32")) << r.error;
  EXPECT_FALSE(Contains(r.error, "buffer 'hits'")) << r.error;  // that one is right
}

TEST(CheckAgainstInterpreter, TamperedResultsAreFoundAtTheirIndex) {
  const Module m = Build(kUserKernel, Target::Parse("c"));
  const runner::Oracle oracle = runner::Oracle::FromModule(m);
  const auto args =
      runner::MakeCheckArgs(oracle.Function("blur"), {{"n", "300"}, {"bias", "7"}}, 9);
  runner::CheckResult r = runner::RunChecked(m, oracle, "blur", Device("cpu", 0), args);
  ASSERT_TRUE(r.ok) << r.error;
  std::vector<runner::CheckArg> want = args;
  oracle.Run("blur", &want);
  // An integer one off is a mismatch: integers are exact.
  runner::CheckArg hits = r.got[5];
  int64_t v;
  std::memcpy(&v, hits.bytes.data() + 8 * 123, 8);
  ++v;
  std::memcpy(hits.bytes.data() + 8 * 123, &v, 8);
  const std::string e = runner::CompareBuffer("blur", hits, want[5]);
  EXPECT_TRUE(Contains(e, "buffer 'hits': first difference at index 123 of 300")) << e;
  EXPECT_TRUE(Contains(e, "exact for int64")) << e;
  EXPECT_TRUE(Contains(e, "1 of 300 elements differ")) << e;
  // A float within the tolerance passes; twice the tolerance does not.
  for (const double factor : {0.5, 2.0}) {
    runner::CheckArg y = r.got[4];
    float f;
    std::memcpy(&f, y.bytes.data() + 4 * 200, 4);
    const double w = want[4].Element(200);
    f = static_cast<float>(w + factor * runner::RelativeTolerance(ir::Float32()) * std::fabs(w));
    std::memcpy(y.bytes.data() + 4 * 200, &f, 4);
    const std::string fe = runner::CompareBuffer("blur", y, want[4]);
    EXPECT_EQ(fe.empty(), factor < 1) << factor << ": " << fe;
    if (factor > 1) {
      EXPECT_TRUE(Contains(fe, "index 200 of 300")) << fe;
    }
  }
}

// Every scalar dtype, each stored into a buffer of its own dtype: the values arrive exactly.
const char* kScalars = R"(# backplane-ir 1

func scalars(a: int8, b: int16, c: int32, d: int64, e: uint8, f: uint16, g: uint32, h: uint64, k: bool, p: float16, q: float32, r: float64, oa: buffer<int8>[1], ob: buffer<int16>[1], oc: buffer<int32>[1], od: buffer<int64>[1], oe: buffer<uint8>[1], of: buffer<uint16>[1], og: buffer<uint32>[1], oh: buffer<uint64>[1], ok: buffer<bool>[1], op: buffer<float16>[1], oq: buffer<float32>[1], orr: buffer<float64>[1]) {
  oa[0] = a
  ob[0] = b
  oc[0] = c
  od[0] = d
  oe[0] = e
  of[0] = f
  og[0] = g
  oh[0] = h
  ok[0] = k
  op[0] = p
  oq[0] = q
  orr[0] = r
}
)";

TEST(CheckAgainstInterpreter, ScalarsOfEveryDtype) {
  const Module m = Build(kScalars, Target::Parse("c"));
  const runner::Oracle oracle = runner::Oracle::FromModule(m);
  const std::map<std::string, std::string> values = {
      {"a", "-128"}, {"b", "-0x12C"}, {"c", "-2147483648"}, {"d", "-9007199254740993"},
      {"e", "255"},  {"f", "065535"}, {"g", "4000000000"},  {"h", "9223372036854775807"},
      {"k", "true"}, {"p", "-1.5"},   {"q", "0.1"},         {"r", "1e300"}};
  const auto args = runner::MakeCheckArgs(oracle.Function("scalars"), values, 1);
  const runner::CheckResult r = runner::RunChecked(m, oracle, "scalars", Device("cpu", 0), args);
  ASSERT_TRUE(r.ok) << r.error;
  auto raw = [&](size_t i) {
    int64_t v = 0;
    std::memcpy(&v, r.got[i].bytes.data(), r.got[i].bytes.size());
    return v;
  };
  EXPECT_EQ(static_cast<int8_t>(raw(12)), -128);
  EXPECT_EQ(static_cast<int16_t>(raw(13)), -300);
  EXPECT_EQ(static_cast<int32_t>(raw(14)), INT32_MIN);
  EXPECT_EQ(raw(15), -9007199254740993LL);  // not a double: exact
  EXPECT_EQ(raw(16), 255);
  EXPECT_EQ(raw(17), 65535);
  EXPECT_EQ(raw(18), 4000000000LL);
  EXPECT_EQ(raw(19), INT64_MAX);
  EXPECT_EQ(raw(20), 1);
  EXPECT_EQ(r.got[21].Element(0), -1.5);
  EXPECT_EQ(static_cast<float>(r.got[22].Element(0)), 0.1f);
  EXPECT_EQ(r.got[23].Element(0), 1e300);

  // Values that do not fit their param: refused naming the param, its dtype and the range.
  struct Bad {
    const char* name;
    const char* value;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"a", "128", "is int8 (-128..127)"}, Bad{"c", "2147483648", "int32"},
        Bad{"e", "-1", "is uint8 (0..255)"}, Bad{"h", "9223372036854775808", "uint64"},
        Bad{"k", "2", "is bool"}, Bad{"p", "70000", "is float16"}, Bad{"q", "1e39", "is float32"},
        Bad{"d", "1.5", "not a whole number"}, Bad{"r", "abc", "is not a number"}}) {
    std::map<std::string, std::string> v = values;
    v[b.name] = b.value;
    try {
      runner::MakeCheckArgs(oracle.Function("scalars"), v, 1);
      ADD_FAILURE() << b.name << "=" << b.value << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
      EXPECT_TRUE(Contains(e.what(), std::string("parameter '") + b.name + "'")) << e.what();
      EXPECT_TRUE(Contains(e.what(), b.says)) << e.what();
      EXPECT_TRUE(Contains(e.what(), "give e.g. ")) << e.what();
    }
  }
  // A name that is no scalar param, and a missing integer, say which there are.
  std::map<std::string, std::string> extra = values;
  extra["zz"] = "1";
  try {
    runner::MakeCheckArgs(oracle.Function("scalars"), extra, 1);
    ADD_FAILURE() << "zz was taken";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "no scalar parameter 'zz'")) << e.what();
  }
  std::map<std::string, std::string> missing = values;
  missing.erase("c");
  try {
    runner::MakeCheckArgs(oracle.Function("scalars"), missing, 1);
    ADD_FAILURE() << "c was not needed";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "--dim c=VALUE")) << e.what();
  }
}

// A split module (host IR + device kernels): the host IR runs on the interpreter and its
// packed calls run the kernels' IR. OpenCL where a device is here.
TEST(CheckAgainstInterpreter, ASplitModuleIsCheckedThroughItsImports) {
  const char* kGpu = R"(# backplane-ir 1

func shift(n: int32, s: int32, x: buffer<int32>[n], y: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {
    for tx in thread(threadIdx.x, 0, 64) {
      if (bx * 64 + tx < n) {
        y[bx * 64 + tx] = float32(x[bx * 64 + tx] + s) * 0.5
      }
    }
  }
}
)";
  Module m;
  try {
    m = Build(kGpu, Target::Parse("opencl"));
  } catch (const Error& e) {
    GTEST_SKIP() << "no opencl code generator: " << e.what();
  }
  const runner::Oracle oracle = runner::Oracle::FromModule(m);
  const auto args =
      runner::MakeCheckArgs(oracle.Function("shift"), {{"n", "1000"}, {"s", "-3"}}, 5);
  const runner::CheckResult r = runner::RunChecked(m, oracle, "shift", Device("opencl", 0), args);
  if (!r.ok && (Contains(r.error, "no device") || Contains(r.error, "out of range"))) {
    GTEST_SKIP() << r.error;
  }
  EXPECT_TRUE(r.ok) << r.error;
}

}  // namespace
