// SPDX-License-Identifier: Apache-2.0
// float64 math intrinsics on vulkan:0. GLSL has no double exp, exp2, log,
// log2, pow, sin, cos, tanh or erf, and Vulkan's double fma need not be fused (lavapipe's is a
// multiply and an add): the code generator writes its own in GLSL (plugins/vulkan/f64_math.cc).
// Each intrinsic runs on random inputs over its domain and on special values against the IR
// interpreter (f64_math_cases.h): within the bound docs/vulkan.md states in ulps, and bit for
// bit for the special values and for the exact functions (fabs, floor, ceil, round, trunc,
// sqrt, rsqrt's 1 / sqrt, fma). Also: the helpers are in a shader only when it uses them, a
// saved and loaded module runs the same, and -fast-math-contract changes nothing in them.
// Runs with the validation layer and fails on its errors; skips without a Vulkan device.
#include <stdlib.h>

#include <backplane/backplane.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../f64_math_cases.h"
#include "vulkan_fixture.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Target;
namespace fm = bptest::f64math;

// The largest error against the interpreter, in ulps, that the test allows for each function
// on random inputs (docs/vulkan.md, "float64 math", has the measured figures; the interpreter's
// own error, glibc's, is part of the distance).
const std::map<std::string, double>& Bounds() {
  static const std::map<std::string, double> kBounds = {
      {"exp", 2},  {"exp2", 2},  {"log", 2},     {"log2", 2},  {"pow", 4},   {"sin", 2},
      {"cos", 2},  {"tanh", 3},  {"sigmoid", 4}, {"erf", 3},   {"sqrt", 0},  {"rsqrt", 0},
      {"fabs", 0}, {"floor", 0}, {"ceil", 0},    {"round", 0}, {"trunc", 0}, {"fma", 0}};
  return kBounds;
}

// The plugin picks its cache folders once per process: one fresh folder for the whole run, so
// that every shader compiles here (the run time is the cold one) and none comes from the
// user's cache.
class VulkanF64Test : public bptest::VulkanTest {
 protected:
  void SetUp() override {
    static bptest::ScratchDir dir;
    setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
    bptest::VulkanTest::SetUp();
  }
};

class VulkanF64MathTest : public VulkanF64Test, public ::testing::WithParamInterface<std::string> {
 protected:
  static const fm::Case& CaseNamed(const std::string& name) {
    static const std::vector<fm::Case> kCases = fm::Cases(fm::Samples());
    for (const fm::Case& c : kCases) {
      if (c.name == name) return c;
    }
    throw std::runtime_error("no case " + name);
  }
  static Target VulkanTarget(const std::string& extra = "") {
    if (extra.empty()) return Target::FromDevice(Device(bptest::kDev));
    return Target::Parse("vulkan " + extra);
  }
};

std::string Describe(const fm::Case& c, const fm::Outcome& o) {
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "%-8s max %.0f ulp from the interpreter at (%.17g, %.17g, %.17g); "
                "max %.3f ulp from the true value at (%.17g, %.17g, %.17g)%s",
                c.name.c_str(), o.max_ulp, o.worst[0], o.worst[1], o.worst[2], o.max_true_ulp,
                o.worst_true[0], o.worst_true[1], o.worst_true[2],
                o.interpreter_off != 0 ? "; the interpreter is off at some inputs" : "");
  return buf;
}

TEST_P(VulkanF64MathTest, MatchesTheInterpreterWithinItsBound) {
  const fm::Case& c = CaseNamed(GetParam());
  Module m = backplane::Build(fm::KernelText(c, /*gpu=*/true), VulkanTarget());
  const double bound = Bounds().at(c.name);
  const fm::Outcome o = fm::Run(c, m, Device(bptest::kDev), /*gpu=*/true, bound);
  std::printf("%s\n", Describe(c, o).c_str());
  RecordProperty("max_ulp", std::to_string(o.max_ulp));
  RecordProperty("max_true_ulp", std::to_string(o.max_true_ulp));
  EXPECT_EQ(o.over_bound, 0) << o.over_bound << " of " << c.random.size()
                             << " random inputs are more than " << bound << " ulp off:\n"
                             << o.report;
  EXPECT_EQ(o.special_mismatches, 0) << o.report;
}

// Under -fast-math-contract the code generator leaves the module undecorated (SPIRV-Tools may
// fuse a*b+c): the helpers' `precise` variables keep their double-double steps exact, so the
// results are those of the default build, bit for bit.
class VulkanF64MathFastTest : public VulkanF64MathTest {};

TEST_P(VulkanF64MathFastTest, FastMathContractChangesNothingInTheHelpers) {
  const fm::Case& c = CaseNamed(GetParam());
  Module strict = backplane::Build(fm::KernelText(c, true), VulkanTarget());
  Module fast = backplane::Build(fm::KernelText(c, true), VulkanTarget("-fast-math-contract"));
  const Device dev(bptest::kDev);
  const fm::Outcome a = fm::Run(c, strict, dev, true, Bounds().at(c.name));
  const fm::Outcome b = fm::Run(c, fast, dev, true, Bounds().at(c.name));
  EXPECT_EQ(b.over_bound, 0) << b.report;
  EXPECT_EQ(b.special_mismatches, 0) << b.report;
  EXPECT_EQ(a.max_ulp, b.max_ulp);
  EXPECT_EQ(a.max_true_ulp, b.max_true_ulp);
}

INSTANTIATE_TEST_SUITE_P(Intrinsics, VulkanF64MathTest,
                         ::testing::Values("exp", "exp2", "log", "log2", "pow", "sin", "cos",
                                           "tanh", "sigmoid", "erf", "sqrt", "rsqrt", "fabs",
                                           "floor", "ceil", "round", "trunc", "fma"));
// The fast-math check on the helpers with double-double steps (cos shares sin's reduction,
// whose shader takes lavapipe seconds to compile).
INSTANTIATE_TEST_SUITE_P(DoubleDouble, VulkanF64MathFastTest,
                         ::testing::Values("exp2", "log2", "pow", "sin", "erf", "fma"));

}  // namespace

namespace {

class VulkanF64MathGlslTest : public VulkanF64Test {};

std::string Glsl(const std::string& expr, const std::string& dtype = "float64") {
  const std::string ir =
      "# backplane-ir 1\nfunc f(n: int32, a: buffer<" + dtype + ">[n], b: buffer<" + dtype +
      ">[n], c: buffer<" + dtype + ">[n], r: buffer<" + dtype +
      ">[n]) {\n  for i in thread(blockIdx.x, 0, n) {\n    r[i] = " + expr + "\n  }\n}\n";
  return backplane::Build(ir, Target::Parse("vulkan")).Imports()[0].InspectSource("glsl");
}

// A shader has the helpers its kernel calls and what they call, and nothing else.
TEST_F(VulkanF64MathGlslTest, AShaderHasOnlyTheHelpersItUses) {
  const std::string none = Glsl("sqrt(a[i]) + floor(b[i]) * fabs(c[i])");
  EXPECT_EQ(none.find("bp_d_"), std::string::npos) << none;
  EXPECT_EQ(none.find("bp_dd_"), std::string::npos) << none;

  const std::string exp = Glsl("exp(a[i])");
  EXPECT_NE(exp.find("double bp_exp(double x)"), std::string::npos) << exp;
  EXPECT_NE(exp.find("bp_d_exp_core"), std::string::npos);
  for (const char* absent : {"bp_log", "bp_d_log_m", "bp_pow", "bp_sin", "bp_d_rem_pio2", "bp_erf",
                             "bp_fma", "bp_tanh"}) {
    EXPECT_EQ(exp.find(absent), std::string::npos) << absent;
  }
  // sigmoid is 1 / (1 + exp(-x)) with our exp; rsqrt is 1 / sqrt(x) with GLSL's sqrt.
  EXPECT_NE(Glsl("sigmoid(a[i])").find("bp_exp("), std::string::npos);
  const std::string rsqrt = Glsl("rsqrt(a[i])");
  EXPECT_EQ(rsqrt.find("bp_d"), std::string::npos) << rsqrt;

  const std::string pow = Glsl("pow(a[i], b[i])");
  for (const char* present : {"bp_pow(", "bp_d_log_m(", "bp_d_exp_dd(", "bp_dd_two_prod("}) {
    EXPECT_NE(pow.find(present), std::string::npos) << present;
  }
  // Each helper once, even when several intrinsics need it.
  const std::string all = Glsl("pow(a[i], b[i]) + exp(a[i]) + log2(b[i]) + erf(c[i])");
  const size_t first = all.find("dvec2 bp_dd_two_prod(");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(all.find("dvec2 bp_dd_two_prod(", first + 1), std::string::npos);

  // float32 keeps GLSL's built-ins.
  const std::string f32 = Glsl("exp(a[i]) + pow(a[i], b[i]) + sin(c[i])", "float32");
  for (const char* absent : {"bp_d", "bp_exp", "bp_pow", "bp_sin"}) {
    EXPECT_EQ(f32.find(absent), std::string::npos) << absent << "\n" << f32;
  }
}

// A saved module keeps its GLSL and SPIR-V, which loading checks against what the code
// generator emits: it runs with the same results.
TEST_F(VulkanF64MathGlslTest, ASavedAndLoadedModuleGivesTheSameResults) {
  for (const char* name : {"pow", "erf", "fma"}) {
    SCOPED_TRACE(name);
    const std::vector<fm::Case> cases = fm::Cases(512);
    const fm::Case* c = nullptr;
    for (const fm::Case& k : cases) {
      if (k.name == name) c = &k;
    }
    ASSERT_NE(c, nullptr);
    Module built =
        backplane::Build(fm::KernelText(*c, true), Target::FromDevice(Device(bptest::kDev)));
    Module loaded = Module::LoadFromBytes(built.SaveToBytes());
    const fm::Outcome a = fm::Run(*c, built, Device(bptest::kDev), true, Bounds().at(name));
    const fm::Outcome b = fm::Run(*c, loaded, Device(bptest::kDev), true, Bounds().at(name));
    EXPECT_EQ(b.over_bound + b.special_mismatches, 0) << b.report;
    EXPECT_EQ(a.max_true_ulp, b.max_true_ulp);
  }
}

}  // namespace
