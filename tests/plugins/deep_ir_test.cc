// SPDX-License-Identifier: Apache-2.0
// Deep IR through bp_build: a generated kernel whose expression is a chain of
// thousands of terms builds on every code generator here and runs with the IR interpreter's
// result, bit for bit. The C-family emitter never nests an expression deeper than
// CFamilyEmitter::kMaxExprDepth: deeper parts become temporaries declared before the statement
// (docs/codegen-guide.md, "Long expressions"); before that, glslang's parser gave out on the
// vulkan kernel and PoCL's clang on the opencl one. Chains in other shapes: nested to the right
// (built with the C++ builder), inside a select arm that guards loads out of bounds, inside a
// loop's bound that the loop's body changes, a float dot product that must not be contracted.
// Every kind runs what it can here (c, opencl on PoCL, vulkan on lavapipe with the validation
// layer on) and cuda builds to PTX that ptxas accepts.
//
// Most chains read 64 elements over and over: NVRTC, PoCL and lavapipe (LLVM, all three) take
// time superlinear in the number of distinct loads in a kernel, whatever their nesting
// (docs/codegen-guide.md, "Long expressions": lavapipe took 45 s for a chain of 2,000 distinct
// loads and 8 s for a chain of 10,000 terms over 64), and these tests are about the nesting.
#include <stdlib.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir_run_util.h"
#include "test_util.h"

namespace {

using namespace irtest;  // NOLINT(build/namespaces)

// ---- Kernels ------------------------------------------------------------------------------

// The text of a function `name(params)` whose body is `body` (statements, one a line): on a GPU
// kind inside a one-thread loop, which SplitHostDevice makes a kernel.
std::string Func(const std::string& name, const std::string& params, const std::string& body,
                 bool gpu) {
  std::string s = "# backplane-ir 1\nfunc " + name + "(" + params + ") {\n";
  if (!gpu) return s + body + "}\n";
  return s + "  for t in thread(blockIdx.x, 0, 1) {\n" + body + "  }\n}\n";
}

// `buffer`[f(0)] + `buffer`[f(1)] + ... + `buffer`[f(n - 1)], a chain n - 1 levels deep.
template <typename Index>
std::string Sum(const std::string& buffer, int n, Index f) {
  std::string sum;
  for (int k = 0; k < n; ++k) sum += (k ? " + " : "") + buffer + "[" + f(k) + "]";
  return sum;
}

// out[0] = x[0] + x[1] + ... (n terms, indices modulo `distinct`, 0: none), n - 1 levels deep.
std::string Chain(int n, bool gpu, int distinct = 0) {
  const int size = distinct > 0 ? distinct : n;
  return Func("chain", "x: buffer<float32>[" + std::to_string(size) + "], out: buffer<float32>[1]",
              "  out[0] = " + Sum("x", n, [&](int k) { return std::to_string(k % size); }) + "\n",
              gpu);
}

// out[0] = x[0] * y[0] + x[1] * y[1] + ... (n products, indices modulo `size`): a float chain
// in which every step is a multiply-add, which a contracting compiler fuses into one rounding.
std::string DotProduct(int n, bool gpu, int size) {
  std::string sum;
  for (int k = 0; k < n; ++k) {
    const std::string i = std::to_string(k % size);
    sum += (k ? " + x[" : "x[") + i + "] * y[" + i + "]";
  }
  const std::string buf = "buffer<float32>[" + std::to_string(size) + "]";
  return Func("dot", "x: " + buf + ", y: " + buf + ", out: buffer<float32>[1]",
              "  out[0] = " + sum + "\n", gpu);
}

// One thread for each of `threads` elements: out[i] = select(i < m, x[i + 0] + x[i + 1] + ...
// (n terms, offsets modulo `span`), -1.0). x has m + span - 1 elements, so for i >= m the arm's
// last load is out of bounds: only the select keeps it from being made. With `clamped` the arm
// reads x[min(i, m - 1) + k] instead: the interpreter's twin (it evaluates both sides of a
// select, docs/ir.md), the same for i < m.
std::string SelectArm(int n, int m, int threads, bool gpu, bool clamped, int span) {
  const std::string base = clamped ? "j" : "i";
  const std::string arm =
      Sum("x", n, [&](int k) { return base + " + " + std::to_string(k % span); });
  const std::string params = "x: buffer<float32>[" + std::to_string(m + span - 1) +
                             "], out: buffer<float32>[" + std::to_string(threads) + "]";
  const std::string body = "    let j: int32 = min(i, " + std::to_string(m - 1) +
                           ")\n    out[i] = select(i < " + std::to_string(m) + ", " + arm +
                           ", -1.0)\n";
  std::string s = "# backplane-ir 1\nfunc select_arm(" + params + ") {\n";
  if (gpu) {
    return s + "  for i in thread(blockIdx.x, 0, " + std::to_string(threads) + ") {\n" + body +
           "  }\n}\n";
  }
  return s + "  for i in serial(0, " + std::to_string(threads) + ") {\n" + body + "  }\n}\n";
}

// A loop whose bound is c[0] + c[1] + ... (n terms, indices modulo `size`) and whose body
// decrements one element of c per iteration: the IR evaluates a loop's bound once, when the
// loop starts, so it runs that sum's iterations (counted in out[0]); a bound evaluated again at
// every iteration would stop about halfway.
std::string LoopBound(int n, bool gpu, int size) {
  const std::string c = std::to_string(size);
  return Func("loop_bound", "c: buffer<int32>[" + c + "], out: buffer<int32>[1]",
              "  out[0] = 0\n  for j in serial(0, " +
                  Sum("c", n, [&](int k) { return std::to_string(k % size); }) +
                  ") {\n    c[floormod(j, " + c + ")] = c[floormod(j, " + c +
                  ")] - 1\n    out[0] = out[0] + 1\n  }\n",
              gpu);
}

// One thread for each of 16 elements: a[i] = select(i < 8 && CHAIN(i, 56) > 0.0, 1, 0) and an
// if / else if chain on i >= 8, CHAIN(i, 56) > 0.0, CHAIN(i, 55) < 0.0, where CHAIN(i, k) =
// x[i + k] + 0.5 - 0.25 + ... (n terms). x has 64 elements, so for i >= 8 the load is out of
// bounds: only the && and the else-if order keep it from being made.
std::string Conditions(int n, bool gpu) {
  auto chain = [&](int k) {
    std::string c = "x[i + " + std::to_string(k) + "]";
    for (int j = 1; j < n; ++j) c += j % 2 ? " + 0.5" : " - 0.25";
    return c;
  };
  const std::string body = "    a[i] = select(i < 8 && " + chain(56) +
                           " > 0.0, 1, 0)\n"
                           "    if (i >= 8) {\n"
                           "      b[i] = 1\n"
                           "    } else if (" +
                           chain(56) +
                           " > 0.0) {\n"
                           "      b[i] = 2\n"
                           "    } else if (" +
                           chain(55) +
                           " < 0.0) {\n"
                           "      b[i] = 3\n"
                           "    } else {\n"
                           "      b[i] = 4\n"
                           "    }\n";
  return "# backplane-ir 1\nfunc conditions(x: buffer<float32>[64], a: buffer<int32>[16], "
         "b: buffer<int32>[16]) {\n  for i in " +
         std::string(gpu ? "thread(blockIdx.x, 0, 16)" : "serial(0, 16)") + " {\n" + body +
         "  }\n}\n";
}

// Chains nested to the right, built with the C++ builder (as deep as the text form lets them
// go through bp_build, docs/ir.md "Limits"): out[0] = x[0] - (x[1] - (... - x[n - 1])) and
// out[1] = max(x[0], max(x[1], ... x[n - 1])).
ir::IRModule RightNested(int n, bool gpu) {
  using ir::Expr;
  ir::Buffer x("x", ir::Float32(), {ir::IntImm(ir::Int32(), n)});
  ir::Buffer out("out", ir::Float32(), {ir::IntImm(ir::Int32(), 2)});
  auto at = [](const ir::Buffer& b, int k) { return ir::Load(b, {ir::IntImm(ir::Int32(), k)}); };
  Expr difference = at(x, n - 1), maximum = at(x, n - 1);
  for (int k = n - 2; k >= 0; --k) {
    difference = at(x, k) - difference;
    maximum = ir::Max(at(x, k), maximum);
  }
  ir::Stmt body = ir::Seq({ir::Store(out, {ir::IntImm(ir::Int32(), 0)}, difference),
                           ir::Store(out, {ir::IntImm(ir::Int32(), 1)}, maximum)});
  if (gpu) body = ir::ThreadFor(ir::Var("t"), ir::ThreadTag::kBlockIdxX, 0, 1, body);
  ir::IRModule m;
  m.Add(ir::PrimFunc("right_nested", {x, out}, body));
  return m;
}

// Random floats in [-scale, scale].
std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale) {
  std::vector<float> v = bptest::RandomFloats(n, seed);
  for (float& x : v) x *= scale / 1000.0f;
  return v;
}

// The terms of the chains that -bounds-check: deeper than the 256 brackets PoCL's clang allows
// and far deeper than kMaxExprDepth. Each checked load is a branch, and PoCL's LLVM takes time
// superlinear in them (400 took it 22 s here: JumpThreading's LazyValueInfo).
constexpr int kCheckedTerms = 300;
// The terms of each condition of LongConditionsRunOnlyWhenReached (one load, then literals).
constexpr int kConditionTerms = 300;

class DeepIr : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)kValidationOn;
    UseScratchCache();
  }
};

// ---- Tests --------------------------------------------------------------------------------

class DeepIrOnC : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { UseScratchCache(); }
};

TEST_P(DeepIrOnC, BuildsAndRunsExactly) {
  const int n = GetParam();
  Module m = backplane::Build(Chain(n, false), Target::Parse("c"));
  const std::vector<float> x = bptest::RandomFloats(static_cast<size_t>(n), 7);
  Tensor tx = Tensor::Empty({n}, kF32, Device(bptest::CpuDevice()));
  tx.CopyFrom(x);
  Tensor out = Tensor::Empty({1}, kF32, Device(bptest::CpuDevice()));
  m.GetFunction("chain")(tx.dl(), out.dl());
  // Its own build: a c module's library is native code, which loads on request.
  Module back = Module::LoadFromBytes(m.SaveToBytes(), backplane::ModuleLoadOptions{true});
  Tensor out2 = Tensor::Empty({1}, kF32, Device(bptest::CpuDevice()));
  back.GetFunction("chain")(tx.dl(), out2.dl());
  float want = x[0];  // the IR's order of float32 additions, no contraction: the same float
  for (int k = 1; k < n; ++k) want += x[static_cast<size_t>(k)];
  EXPECT_EQ(out.ToVector<float>()[0], want);
  EXPECT_EQ(out2.ToVector<float>()[0], want);
}

INSTANTIATE_TEST_SUITE_P(Terms, DeepIrOnC, ::testing::Values(10000, 30000));

// The 10,000-term chain on the GPU kinds: vulkan and opencl run it (glslang's parser stack and
// clang's bracket depth refused the fully parenthesized text before), and the modules save and
// load back (the loaders walk the saved IR again).
TEST_F(DeepIr, TheChainRunsExactlyOnEveryDevice) {
  const std::string text = Chain(10000, true, 64);
  const Case c{"chain", {Floats(RandomFloats(64, 7, 1000.0f)), Floats({0.0f})}, ""};
  for (const char* kind : {"opencl", "vulkan"}) {
    const std::optional<Module> m = ExpectTheInterpretersResults(kind, text, c);
    if (!m) continue;
    EXPECT_TRUE(static_cast<bool>(Module::LoadFromBytes(m->SaveToBytes()).GetFunction("chain")));
  }
}

// cuda builds a chain of 30,000 terms, written with temporaries, and ptxas accepts the PTX.
TEST_F(DeepIr, CudaBuildsA30000TermChainThatPtxasAccepts) {
  if (!HasKind("cuda")) GTEST_SKIP() << "the cuda plugin is not built here";
  const std::string text = Chain(30000, true, 64);
  ExpectPtxasAccepts(text, "chain30000");
  // The second build is a hit of the plugin's disk cache.
  Module m = backplane::Build(text, Target::Parse("cuda -arch=sm_90"));
  EXPECT_NE(m.Imports()[0].InspectSource("cuda").find("  float bp_t"), std::string::npos);
}

// Nested to the right, built with the C++ builder: a - (b - (c - ...)) and max(a, max(b, ...)),
// with and without -bounds-check (then a temporary holding the deeper part would run before
// the checked loads to its left unless they are bound first: the first fault stays the first).
// max writes its operands twice, which doubled the text at every level before (2^n bytes).
TEST_F(DeepIr, RightNestedChainsRunExactly) {
  // Deeper than PoCL's 256 brackets and four times the emitter's 64; deeper is slow to compile
  // on the CPU drivers (their time grows with the distinct loads), not different.
  const int n = static_cast<int>(std::min<int64_t>(ir::kMaxNesting - 16, 300));
  ASSERT_GT(n, 2 * 64);
  for (const bool bounds_check : {false, true}) {
    const std::string options = bounds_check ? " -bounds-check" : "";
    const Case c{
        "right_nested", {Floats(RandomFloats(n, 11, 1000.0f)), Floats({0.0f, 0.0f})}, options};
    ExpectTheInterpretersResults("c", ir::Print(RightNested(n, false)), c);
    for (const char* kind : {"opencl", "vulkan"}) {
      ExpectTheInterpretersResults(kind, ir::Print(RightNested(n, true)), c);
    }
    ExpectPtxasAccepts(ir::Print(RightNested(n, true)), "right_nested", options);
  }
}

// A long chain in the arm of a select that guards it, with -bounds-check: for i >= m the arm
// would load past the end of x, so nothing of it may run before the select decides; the
// generated code takes the arm as an if statement and no fault is recorded. Compared with the
// interpreter on the twin whose arm reads in bounds (it evaluates both sides of a select).
TEST_F(DeepIr, AChainInASelectArmStaysGuarded) {
  const int n = kCheckedTerms, m = 40, threads = 64;
  const Case c{"select_arm",
               {Floats(RandomFloats(m + 63, 13, 1000.0f)), Floats(std::vector<float>(threads))},
               " -bounds-check"};
  ExpectTheInterpretersResults("c", SelectArm(n, m, threads, false, false, 64), c,
                               SelectArm(n, m, threads, false, true, 64));
  for (const char* kind : {"opencl", "vulkan"}) {
    ExpectTheInterpretersResults(kind, SelectArm(n, m, threads, true, false, 64), c,
                                 SelectArm(n, m, threads, true, true, 64));
  }
  ExpectPtxasAccepts(SelectArm(n, m, threads, true, false, 64), "select_arm", " -bounds-check");
}

// Long conditions of a short-circuit && and of an else-if chain, with -bounds-check: each runs
// only when reached (the && becomes an if, the rest of the else-if chain a do-while block), so
// no load out of bounds is made.
TEST_F(DeepIr, LongConditionsRunOnlyWhenReached) {
  const Case c{"conditions",
               {Floats(RandomFloats(64, 29, 1000.0f)), Ints(std::vector<int32_t>(16)),
                Ints(std::vector<int32_t>(16))},
               " -bounds-check"};
  ExpectTheInterpretersResults("c", Conditions(kConditionTerms, false), c);
  for (const char* kind : {"opencl", "vulkan"}) {
    ExpectTheInterpretersResults(kind, Conditions(kConditionTerms, true), c);
  }
  ExpectPtxasAccepts(Conditions(kConditionTerms, true), "conditions", " -bounds-check");
}

// A long chain in a loop's bound, with -bounds-check: a `for` evaluates its condition at every
// iteration, while the IR evaluates the bound once, so the code generators compute it once
// before the loop (with the temporaries it needs); this loop's body changes what it reads.
TEST_F(DeepIr, AChainInALoopBoundIsEvaluatedOnce) {
  const int n = kCheckedTerms;
  std::vector<int32_t> counts(64);
  std::mt19937 rng(17);
  for (int32_t& v : counts) v = static_cast<int32_t>(rng() % 3);
  const Case c{"loop_bound", {Ints(counts), Ints({0})}, " -bounds-check"};
  ExpectTheInterpretersResults("c", LoopBound(n, false, 64), c);
  for (const char* kind : {"opencl", "vulkan"}) {
    ExpectTheInterpretersResults(kind, LoopBound(n, true, 64), c);
  }
  ExpectPtxasAccepts(LoopBound(n, true, 64), "loop_bound", " -bounds-check");
}

// A float chain of 10,000 multiply-adds: bit for bit the interpreter's two roundings a step, so
// no temporary opened a path to contraction. The vulkan SPIR-V has no Fma and every float
// multiply and add in it is NoContraction; its float temporaries are `precise`.
TEST_F(DeepIr, AMultiplyAddChainIsNotContracted) {
  const int n = 10000;
  const Case c{
      "dot",
      {Floats(RandomFloats(64, 19, 1000.0f)), Floats(RandomFloats(64, 23, 1.0f)), Floats({0.0f})},
      ""};
  ExpectTheInterpretersResults("c", DotProduct(n, false, 64), c);
  ExpectTheInterpretersResults("opencl", DotProduct(n, true, 64), c);
  ExpectPtxasAccepts(DotProduct(n, true, 64), "dot");
  const std::optional<Module> m =
      ExpectTheInterpretersResults("vulkan", DotProduct(n, true, 64), c);
  if (!m) return;
  EXPECT_NE(m->Imports()[0].InspectSource("glsl").find("precise float bp_t"), std::string::npos);
  const std::string saved = m->Imports()[0].SaveToBytes();
  const size_t at = saved.find("\nspirv ");
  ASSERT_NE(at, std::string::npos);
  const size_t nl = saved.find('\n', at + 1);
  std::vector<uint32_t> spirv(std::stoull(saved.substr(at + 7, nl - at - 7)) / 4);
  std::memcpy(spirv.data(), saved.data() + nl + 1, spirv.size() * 4);
  constexpr uint32_t kOpExtInst = 12, kOpDecorate = 71, kNoContraction = 42, kOpFAdd = 129,
                     kOpFMul = 133, kFma = 50;
  std::set<uint32_t> decorated, ops;
  int fma = 0;
  for (size_t i = 5; i < spirv.size();) {
    const uint32_t count = spirv[i] >> 16, op = spirv[i] & 0xffffu;
    ASSERT_GT(count, 0u);
    if (op == kOpDecorate && spirv[i + 2] == kNoContraction) decorated.insert(spirv[i + 1]);
    if (op == kOpFAdd || op == kOpFMul) ops.insert(spirv[i + 2]);
    if (op == kOpExtInst && count >= 5 && spirv[i + 4] == kFma) ++fma;
    i += count;
  }
  EXPECT_GE(ops.size(), static_cast<size_t>(n));
  size_t marked = 0;
  for (uint32_t id : ops) marked += decorated.count(id);
  EXPECT_EQ(marked, ops.size()) << "a float multiply or add the driver may fuse";
  EXPECT_EQ(fma, 0);
}

}  // namespace
