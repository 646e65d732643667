// SPDX-License-Identifier: Apache-2.0
// The one meaning of `select` (docs/ir.md, "Interpreter"): a scalar select
// evaluates its condition and then the chosen arm only, as C's ?: does and as every code
// generator writes it, so a guarded load or division in the arm not taken never faults; a
// vector select evaluates both arms, every lane, and picks lane by lane. The verifier refuses a
// vector condition of other lanes than the values.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir_test_util.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
using irtest::ErrorOf;
using irtest::Tensor;

namespace {

// out[i] = select(i < n, x[i], 0.0) over the m elements of `out`, with x of n: the guard
// `run --check` reported FAILED on (the interpreter loaded x[n]).
TEST(IrSelect, AScalarSelectEvaluatesOnlyTheChosenArm) {
  Interpreter in(
      Parse("func guarded(n: int32, m: int32, x: buffer<float32>[n], out: buffer<float32>[m]) {\n"
            "  for i in serial(0, m) {\n"
            "    out[i] = select(i < n, x[i], 0.0)\n"
            "  }\n"
            "}\n"));
  std::mt19937 rng(38);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = static_cast<int>(rng() % 100), m = n + 1 + static_cast<int>(rng() % 64);
    Tensor<float> x({n}), out({m}, -1.0f);
    x.Random(static_cast<unsigned>(rng()), -100, 100);
    in.Run("guarded", {IntArg(n), IntArg(m), x.View(), out.View()});
    for (int i = 0; i < m; ++i)
      ASSERT_EQ(out[static_cast<size_t>(i)], i < n ? x[static_cast<size_t>(i)] : 0.0f)
          << "n " << n << ", i " << i;
  }
}

// Either arm may be the guarded one, and the guard may protect a division or a nested load;
// the chosen arm's fault still happens.
TEST(IrSelect, TheArmNotTakenNeverFaultsAndTheChosenOneDoes) {
  Interpreter in(
      Parse("func f(n: int32, k: buffer<int32>[n], d: buffer<int32>[n], o: buffer<int32>[n]) {\n"
            "  for i in serial(0, n) {\n"
            "    o[i] = select(d[i] == 0, k[i], k[i] / d[i]) + select(k[i] < 0 || k[i] >= n, -1, "
            "k[k[i]])\n"
            "  }\n"
            "}\n"));
  std::mt19937 rng(7);
  const int n = 500;
  Tensor<int32_t> k({n}), d({n}), o({n});
  for (int i = 0; i < n; ++i) {
    k[static_cast<size_t>(i)] = static_cast<int32_t>(rng() % 1000) - 250;  // a third outside
    d[static_cast<size_t>(i)] = static_cast<int32_t>(rng() % 7) - 3;       // 0 one time in 7
  }
  in.Run("f", {IntArg(n), k.View(), d.View(), o.View()});
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const int32_t a = d[i] == 0 ? k[i] : k[i] / d[i];
    const int32_t b = k[i] < 0 || k[i] >= n ? -1 : k[static_cast<size_t>(k[i])];
    ASSERT_EQ(o[i], a + b) << "i " << i;
  }
  // The chosen arm is evaluated, with its fault.
  Interpreter chosen(
      Parse("func g(n: int32, x: buffer<float32>[n], o: buffer<float32>[1]) {\n"
            "  o[0] = select(n > 0, x[n], 0.0)\n"
            "}\n"));
  Tensor<float> x({4}), o1({1});
  EXPECT_NE(ErrorOf([&] {
              chosen.Run("g", {IntArg(4), x.View(), o1.View()});
            }).find("index 4 is out of bounds for dimension 0 of buffer 'x'"),
            std::string::npos);
}

// A vector select computes both arms, every lane (the code generators compute both vectors),
// and picks lane by lane with a vector condition or whole with a scalar one.
TEST(IrSelect, AVectorSelectEvaluatesBothArmsAndPicksLaneByLane) {
  Interpreter in(
      Parse("func v(a: buffer<float32>[64], b: buffer<float32>[64], o: buffer<float32>[64], "
            "w: buffer<float32>[64], s: int32) {\n"
            "  for q in serial(0, 16) {\n"
            "    let l: float32x4 = a[ramp(q * 4, 1, 4)]\n"
            "    let r: float32x4 = b[ramp(q * 4, 1, 4)]\n"
            "    o[ramp(q * 4, 1, 4)] = select(l < r, l * r, l - r)\n"
            "    w[ramp(q * 4, 1, 4)] = select(s > q, l, r)\n"
            "  }\n"
            "}\n"));
  Tensor<float> a({64}), b({64}), o({64}), w({64});
  a.Random(1, -4, 4);
  b.Random(2, -4, 4);
  in.Run("v", {a.View(), b.View(), o.View(), w.View(), IntArg(9)});
  for (size_t i = 0; i < 64; ++i) {
    ASSERT_EQ(o[i], a[i] < b[i] ? a[i] * b[i] : a[i] - b[i]) << i;
    ASSERT_EQ(w[i], static_cast<int>(i / 4) < 9 ? a[i] : b[i]) << i;
  }
  // Both arms of a vector select run: the lane a condition would guard is still loaded.
  Interpreter tail(
      Parse("func t(n: int32, x: buffer<float32>[n], o: buffer<float32>[8]) {\n"
            "  o[ramp(0, 1, 4)] = select(ramp(0, 1, 4) < broadcast(n, 4), x[ramp(0, 1, 4)], "
            "broadcast(0.0, 4))\n"
            "}\n"));
  Tensor<float> x3({3}), o8({8});
  EXPECT_NE(ErrorOf([&] {
              tail.Run("t", {IntArg(3), x3.View(), o8.View()});
            }).find("is out of bounds for dimension 0 of buffer 'x'"),
            std::string::npos);
}

// A buffer's shape computed from the arguments (EvalIntExpr, CheckArgs) follows the same rule.
TEST(IrSelect, AShapeEvaluatesOnlyTheChosenArm) {
  IRModule m = Parse(
      "func f(n: int32, d: int32, a: buffer<float32>[select(d != 0, n / d, 0)]) {\n"
      "  a[0] = 1.0\n"
      "}\n");
  const PrimFunc& f = *m.Find("f");
  const Expr& shape = f.params[2].buffer()->shape[0];
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = static_cast<int>(rng() % 1000), d = static_cast<int>(rng() % 5) - 2;
    EXPECT_EQ(EvalIntExpr(f, shape, {IntArg(n), IntArg(d), IntArg(0)}), d != 0 ? n / d : 0)
        << n << " / " << d;
  }
}

TEST(IrSelect, TheVerifierRefusesAConditionOfOtherLanes) {
  IRModule ok = Parse(
      "func f(a: buffer<float32>[8], b: buffer<bool>[8]) {\n"
      "  a[ramp(0, 1, 4)] = select(b[ramp(0, 1, 4)], a[ramp(4, 1, 4)], broadcast(0.0, 4))\n"
      "  a[ramp(4, 1, 4)] = select(b[0], a[ramp(0, 1, 4)], broadcast(1.0, 4))\n"
      "}\n");
  EXPECT_TRUE(VerifyErrors(ok).empty());
  IRModule bad = Parse(
      "func f(a: buffer<float32>[8], b: buffer<bool>[8]) {\n"
      "  a[ramp(0, 1, 4)] = select(b[ramp(0, 1, 2)], a[ramp(4, 1, 4)], broadcast(0.0, 4))\n"
      "}\n");
  const std::vector<std::string> errors = VerifyErrors(bad);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("the condition of select has 2 lanes and its values 4"),
            std::string::npos)
      << errors[0];
}

}  // namespace
