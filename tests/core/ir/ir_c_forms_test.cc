// SPDX-License-Identifier: Apache-2.0
// C forms the IR lacked (what a port of PolyBench/C needed workarounds for):
// C's remainder `%`, integer literals where a float is wanted, loops written by their end
// (`serial(begin .. end[, step])`) and float64 atomics. Each in the text form and the builder,
// round-tripped, refused with a message where it must be, and run on the interpreter against a
// C++ reference on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir_test_util.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
using irtest::ErrorOf;
using irtest::Tensor;

namespace {

// ---- % ------------------------------------------------------------------------------------

// C's remainder, with INT_MIN % -1 = 0 (C leaves it undefined; x86 traps).
template <typename T>
T CMod(T a, T b) {
  if (std::is_signed<T>::value && b == static_cast<T>(-1)) return 0;
  return static_cast<T>(a % b);
}

template <typename T>
void CheckModOn(const std::string& dtype, unsigned seed) {
  SCOPED_TRACE(dtype);
  const std::string text = "func f(a: buffer<" + dtype + ">[256], b: buffer<" + dtype +
                           ">[256], c: buffer<" + dtype +
                           ">[256]) {\n"
                           "  for i in serial(0, 256) {\n"
                           "    c[i] = a[i] % b[i]\n"
                           "  }\n"
                           "}\n";
  const IRModule m = Parse(text);
  Verify(m);
  std::mt19937_64 rng(seed);
  const T edges[] = {std::numeric_limits<T>::min(),
                     std::numeric_limits<T>::max(),
                     static_cast<T>(-1),
                     static_cast<T>(1),
                     static_cast<T>(7),
                     static_cast<T>(-7)};
  Tensor<T> a({256}), b({256}), c({256});
  for (size_t k = 0; k < 256; ++k) {
    a[k] = k % 4 == 0 ? edges[rng() % 6] : static_cast<T>(rng());
    b[k] = k % 3 == 0 ? edges[rng() % 6] : static_cast<T>(static_cast<int64_t>(rng() % 41) - 20);
    if (b[k] == 0) b[k] = 3;
  }
  a[1] = std::numeric_limits<T>::min();
  b[1] = static_cast<T>(-1);
  Interpreter(m).Run("f", {a.View(), b.View(), c.View()});
  for (size_t k = 0; k < 256; ++k)
    ASSERT_EQ(c[k], CMod<T>(a[k], b[k])) << "a = " << +a[k] << ", b = " << +b[k];
}

}  // namespace

namespace irtest {
template <>
inline bir::DType DTypeOf<uint32_t>() {
  return bir::UInt(32);
}
}  // namespace irtest

namespace {

TEST(IrCForms, ModIsCsRemainderOnEveryIntegerType) {
  CheckModOn<int32_t>("int32", 1);
  CheckModOn<int64_t>("int64", 2);
  CheckModOn<int8_t>("int8", 3);
  CheckModOn<uint8_t>("uint8", 4);
  CheckModOn<uint32_t>("uint32", 5);
  CheckModOn<uint64_t>("uint64", 6);
  // The sign of the dividend, where floormod has the divisor's.
  const IRModule m = Parse(
      "func f(c: buffer<int32>[4]) {\n  c[0] = -7 % 3\n  c[1] = 7 % -3\n"
      "  c[2] = floormod(-7, 3)\n  c[3] = floormod(7, -3)\n}\n");
  Tensor<int32_t> c({4});
  Interpreter(m).Run("f", {c.View()});
  EXPECT_EQ(c.data, (std::vector<int32_t>{-1, 1, 2, -2}));
}

TEST(IrCForms, ModByZeroIsTheDivisionError) {
  const IRModule m = Parse(
      "func f(a: buffer<int32>[2], c: buffer<int32>[1]) {\n"
      "  c[0] = a[0] % a[1]\n}\n");
  Tensor<int32_t> a({2}), c({1});
  a.data = {5, 0};
  EXPECT_NE(ErrorOf([&] {
              Interpreter(m).Run("f", {a.View(), c.View()});
            }).find("integer division by zero in `a[0] % a[1]`"),
            std::string::npos);
  // A shape's arithmetic (EvalIntExpr) too.
  const IRModule s = Parse("func g(n: int32, d: int32, x: buffer<float32>[n % d + 1]) {\n}\n");
  const PrimFunc& g = s.functions()[0];
  const Expr shape = g.params[2].buffer()->shape[0];
  EXPECT_EQ(EvalIntExpr(g, shape, {IntArg(-7), IntArg(3), IntArg(0)}), 0);
  EXPECT_EQ(EvalIntExpr(g, shape, {IntArg(INT32_MIN), IntArg(-1), IntArg(0)}), 1);
  EXPECT_NE(ErrorOf([&] {
              EvalIntExpr(g, shape, {IntArg(7), IntArg(0), IntArg(0)});
            }).find("integer division by zero"),
            std::string::npos);
}

TEST(IrCForms, ModParsesWithMulPrecedenceAndRoundTrips) {
  const std::string text =
      "# backplane-ir 3\n"
      "\n"
      "func f(a: int32, b: int32, c: int32, o: buffer<int32>[3]) {\n"
      "  o[0] = a + b % c * 2\n"
      "  o[1] = (a + b) % c\n"
      "  o[2] = a % (b % c)\n"
      "  o[2] %= 5\n"
      "}\n";
  const IRModule m = Parse(text);
  Verify(m);
  EXPECT_EQ(Print(m), text);
  EXPECT_EQ(TextVersion(m), 3);
  EXPECT_TRUE(StructuralEqual(Parse(Print(m)), m));
  // a + ((b % c) * 2): the same tree as the builder's.
  Var a("a"), b("b"), c("c");
  const auto* store = m.functions()[0].body.As<SeqNode>()->seq[0].As<StoreNode>();
  EXPECT_TRUE(StructuralEqual(store->value, a + Mod(b, c) * 2));
  EXPECT_TRUE(StructuralEqual(store->value, a + (b % c) * 2));
  // A module without % keeps its older version, so older libraries still read it.
  EXPECT_EQ(TextVersion(Parse("func g(o: buffer<int32>[1]) {\n  o[0] = 1\n}\n")), 1);
  // A library of version 2 refuses version 3 by its header, not with a confusing parse error.
  EXPECT_NE(ErrorOf([] { Parse("# backplane-ir 4\n"); }, ErrorKind::kParse)
                .find("this library reads versions 1 to 3"),
            std::string::npos);
}

TEST(IrCForms, FloatModIsRefusedWithTheAlternatives) {
  const std::string msg =
      ErrorOf([] { Verify(Parse("func f(x: buffer<float32>[2]) {\n  x[0] = x[0] % x[1]\n}\n")); },
              ErrorKind::kVerify);
  EXPECT_NE(msg.find("operator % takes integer operands, got float32 in x[0] % x[1]: "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("floormod(a, b)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a - trunc(a / b) * b"), std::string::npos) << msg;
}

// ---- integer literals where a float is wanted ---------------------------------------------

TEST(IrCForms, IntegerLiteralsTakeAFloatContextExactly) {
  const IRModule m = Parse(
      "func f(x: buffer<float32>[64], y: buffer<float32>[64], d: buffer<float64>[64]) {\n"
      "  for i in serial(0, 64) {\n"
      "    let w: float32 = 3\n"
      "    var s: float64 = 1\n"
      "    s += 4096\n"
      "    y[i] = 0\n"
      "    if (x[i] > 0) {\n"
      "      y[i] = 1 - x[i] * x[i] + max(x[i], 0) * w + pow(x[i], 2) + -16777216\n"
      "    }\n"
      "    d[i] = select(x[i] < -1, 2, float64(x[i])) + s\n"
      "  }\n"
      "}\n");
  Verify(m);
  // The printer writes them as the floats they are, and reads that back to the same tree.
  const std::string printed = Print(m);
  EXPECT_NE(printed.find("let w: float32 = 3.0"), std::string::npos) << printed;
  EXPECT_NE(printed.find("y[i] = 0.0"), std::string::npos) << printed;
  EXPECT_NE(printed.find("1.0 - x[i] * x[i] + max(x[i], 0.0) * w + pow(x[i], 2.0)"),
            std::string::npos)
      << printed;
  EXPECT_EQ(Print(Parse(printed)), printed);
  EXPECT_TRUE(StructuralEqual(Parse(printed), m));
  Tensor<float> x({64}), y({64});
  Tensor<double> d({64});
  x.Random(40, -3, 3);
  Interpreter(m).Run("f", {x.View(), y.View(), d.View()});
  for (size_t k = 0; k < 64; ++k) {
    const float v = x[k];
    const float want =
        v > 0 ? 1.0f - v * v + std::fmax(v, 0.0f) * 3.0f + std::pow(v, 2.0f) + -16777216.0f : 0.0f;
    EXPECT_EQ(y[k], want) << k;
    EXPECT_EQ(d[k], (v < -1 ? 2.0 : static_cast<double>(v)) + 4097.0) << k;
  }
}

TEST(IrCForms, AnInexactIntegerLiteralNamesItsNeighbours) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"func f(y: buffer<float32>[1]) {\n  y[0] = 16777217\n}\n",
       "integer literal 16777217, where its context wants a float32, is not exactly a float32: "
       "its neighbours in float32 are 16777216 and 16777218"},
      {"func f(y: buffer<float32>[1]) {\n  y[0] = y[0] * -16777217\n}\n",
       "are -16777218 and -16777216"},
      {"func f(y: buffer<float64>[1]) {\n  y[0] = max(y[0], 9007199254740993)\n}\n",
       "its neighbours in float64 are 9007199254740992 and 9007199254740994"},
      {"func f(y: buffer<float32>[1]) {\n  let w: float32 = 18446744073709551615\n  y[0] = w\n}\n",
       "are 18446742974197923840 and 18446744073709551616"},
      {"func f(y: buffer<float16>[1]) {\n  y[0] = 70000\n}\n",
       "is out of float16's range: expected a magnitude of at most 65504"},
      {"func f(y: buffer<float16>[1]) {\n  y[0] = 2049\n}\n", "are 2048 and 2050"},
  };
  for (const Case& c : cases) {
    const std::string msg = ErrorOf([&] { Parse(c.text); }, ErrorKind::kParse);
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
  }
  // The message says how to write it: a float, or a cast that rounds on purpose (which stays
  // an int32 converted, as before).
  const std::string msg = ErrorOf([&] { Parse(cases[0].text); }, ErrorKind::kParse);
  EXPECT_NE(msg.find("or float32(16777217) to round it on purpose"), std::string::npos) << msg;
  const IRModule m = Parse(
      "func f(y: buffer<float32>[2]) {\n  y[0] = float32(16777217)\n"
      "  y[1] = 16777216\n}\n");
  Tensor<float> y({2});
  Interpreter(m).Run("f", {y.View()});
  EXPECT_EQ(y.data, (std::vector<float>{16777216.0f, 16777216.0f}));
}

TEST(IrCForms, BuilderTypesCxxIntsWhereAFloatIsWanted) {
  Var i("i"), w("w", Float32());
  Buffer x("x", Float32(), {64}), y("y", Float32(), {64});
  const Stmt body = LetStmt(
      w, 3,
      Seq({Store(y, {i}, 0), Store(y, {i}, Select(x[i] > 0, 1 - x[i] * x[i] + Max(x[i], 0) * w, 2)),
           Store(y, {i}, Call("pow", {y[i], 2}) + Binary(BinaryOp::kSub, y[i], 1))}));
  IRModule built;
  built.Add(PrimFunc("f", {x, y}, For(i, 0, 64, ForKind::kSerial, body)));
  Verify(built);
  const IRModule parsed = Parse(
      "func f(x: buffer<float32>[64], y: buffer<float32>[64]) {\n"
      "  for i in serial(0, 64) {\n"
      "    let w: float32 = 3\n"
      "    y[i] = 0\n"
      "    y[i] = select(x[i] > 0, 1 - x[i] * x[i] + max(x[i], 0) * w, 2)\n"
      "    y[i] = pow(y[i], 2) + (y[i] - 1)\n"
      "  }\n"
      "}\n");
  EXPECT_TRUE(StructuralEqual(built, parsed)) << Print(built) << Print(parsed);
  // Indices and integer contexts keep their int32.
  EXPECT_EQ(x[1].As<LoadNode>()->indices[0].dtype(), Int32());
  const std::string msg = ErrorOf([&] { Store(y, {i}, 16777217); });
  EXPECT_NE(msg.find("integer literal 16777217 is not exactly a float32: its neighbours in "
                     "float32 are 16777216 and 16777218"),
            std::string::npos)
      << msg;
  EXPECT_NE(ErrorOf([&] { (void)(y[i] + 16777217); }).find("16777216 and 16777218"),
            std::string::npos);
}

// ---- loops by their end ---------------------------------------------------------------------

TEST(IrCForms, RangeLoopsAreCsLoopsByTheirEnd) {
  const IRModule m = Parse(
      "func f(b: int32, e: int32, order: buffer<int32>[64], down: buffer<int32>[64]) {\n"
      "  var at: int32 = 0\n"
      "  for i in serial(b .. e) {\n"
      "    order[at] = i\n"
      "    at += 1\n"
      "  }\n"
      "  var at2: int32 = 0\n"
      "  for j in serial(e .. b, -3) {\n"
      "    down[at2] = j\n"
      "    at2 += 1\n"
      "  }\n"
      "}\n");
  Verify(m);
  std::mt19937 rng(40);
  for (int trial = 0; trial < 50; ++trial) {
    const int b = static_cast<int>(rng() % 40), e = static_cast<int>(rng() % 40) + 5;
    SCOPED_TRACE("b " + std::to_string(b) + " e " + std::to_string(e));
    std::vector<int32_t> want(64, -1), want_down(64, -1);
    int at = 0;
    for (int i = b; i < e; ++i) want[static_cast<size_t>(at++)] = i;
    at = 0;
    for (int j = e; j > b; j -= 3) want_down[static_cast<size_t>(at++)] = j;
    Tensor<int32_t> order({64}, -1), down({64}, -1);
    Interpreter(m).Run("f", {IntArg(b), IntArg(e), order.View(), down.View()});
    EXPECT_EQ(order.data, want);
    EXPECT_EQ(down.data, want_down);
  }
}

TEST(IrCForms, RangeLoopsAreTheTreeForRangeBuilds) {
  const IRModule m = Parse(
      "func f(n: int32, a: buffer<float32>[n]) {\n"
      "  for i in serial(1..n, 2) {\n"
      "    a[i] = 0\n"
      "  }\n"
      "  for j: int64 in parallel(0i64 .. 10i64) schedule(dynamic, 2) {\n"
      "    a[int32(j)] = 1\n"
      "  }\n"
      "  for t in thread(threadIdx.x, 2 .. n) {\n"
      "    a[t] = 2\n"
      "  }\n"
      "}\n");
  Verify(m);
  const auto& seq = m.functions()[0].body.As<SeqNode>()->seq;
  Var n("n"), i("i"), j("j", Int64());
  Buffer a("a", Float32(), {n});
  EXPECT_TRUE(StructuralEqual(
      seq[0], ForRange(i, 1, n, 2, ForKind::kSerial, Store(a, {i}, FloatImm(Float32(), 0)))));
  // The printer writes the count: text that older libraries read.
  const std::string printed = Print(m);
  EXPECT_NE(printed.find("for i in serial(1, (n - 1 + 1) / 2, 2)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("parallel(0i64, 10i64 - 0i64) schedule(dynamic, 2)"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("thread(threadIdx.x, 2, n - 2)"), std::string::npos) << printed;
  EXPECT_TRUE(StructuralEqual(Parse(printed), m));
  EXPECT_EQ(TextVersion(m), 2);
  struct Bad {
    const char* text;
    const char* message;
  } bad[] = {
      {"func f() {\n  for i in serial(0 .. 4, 0) {\n  }\n}\n",
       "the step of a loop over a range (begin .. end, step) is a nonzero integer constant, got "
       "'0'"},
      {"func f(s: int32) {\n  for i in serial(0 .. 4, s) {\n  }\n}\n",
       "got 's': write a number (-1 counts down), or use the form (start, count, step)"},
      {"func f() {\n  for i in thread(threadIdx.x, 0 .. 4, 2) {\n  }\n}\n",
       "a thread-bound loop takes no step"},
      {"func f() {\n  for i in serial(0 .. ) {\n  }\n}\n", "expected an expression"},
      {"func f() {\n  for i in serial(0, 4 .. 8) {\n  }\n}\n",
       "after the loop's extent (its trip count)"},
  };
  for (const Bad& c : bad) {
    const std::string msg = ErrorOf([&] { Parse(c.text); }, ErrorKind::kParse);
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
  }
}

// ---- float64 atomics ------------------------------------------------------------------------

// Many threads (run at once: the region has a barrier) add integer-valued float64s into four
// elements, in global and shared memory, and take their min and max: exact in any order.
TEST(IrCForms, Float64AtomicsAccumulateExactly) {
  const std::string text =
      "# backplane-ir 2\n"
      "\n"
      "func f(k: buffer<int32>[512], s: buffer<float64>[4], lo: buffer<float64>[1], "
      "hi: buffer<float64>[1], g: buffer<float64>[4]) {\n"
      "  for b in thread(blockIdx.x, 0, 4) {\n"
      "    for t in thread(threadIdx.x, 0, 128) {\n"
      "      let i: int32 = b * 128 + t\n"
      "      alloc sh: float64[4] shared\n"
      "      if (t < 4) {\n"
      "        sh[t] = 0.0f64\n"
      "      }\n"
      "      barrier\n"
      "      atomic_add(s[floormod(k[i], 4)], float64(k[i]) * 1099511627776.0f64)\n"
      "      atomic_min(lo[0], float64(k[i]))\n"
      "      atomic_max(hi[0], float64(k[i]))\n"
      "      atomic_add(sh[floormod(k[i], 4)], float64(k[i]))\n"
      "      barrier\n"
      "      if (t < 4) {\n"
      "        atomic_add(g[t], sh[t])\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  const IRModule m = Parse(text);
  Verify(m);
  EXPECT_EQ(Print(m), text);
  Tensor<int32_t> k({512});
  std::mt19937 rng(64);
  for (int32_t& v : k.data) v = static_cast<int32_t>(rng() % 200001) - 100000;
  Tensor<double> s({4}), lo({1}, 1e300), hi({1}, -1e300), g({4});
  Interpreter(m).Run("f", {k.View(), s.View(), lo.View(), hi.View(), g.View()});
  std::vector<double> want(4, 0), want_g(4, 0);
  for (int32_t v : k.data) {
    const size_t slot = static_cast<size_t>(((v % 4) + 4) % 4);
    want[slot] += v * 1099511627776.0;
    want_g[slot] += v;
  }
  EXPECT_EQ(s.data, want);
  EXPECT_EQ(g.data, want_g);
  EXPECT_EQ(lo[0], *std::min_element(k.data.begin(), k.data.end()));
  EXPECT_EQ(hi[0], *std::max_element(k.data.begin(), k.data.end()));
}

}  // namespace
