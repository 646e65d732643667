// SPDX-License-Identifier: Apache-2.0
// The language of text form version 2: loops with a step (downward
// too) and parallel schedules, assignable variables with compound assignment, and negation.
// Each construct round-trips through the text form, verifies (or is refused with a message),
// runs on the interpreter against a C++ reference on random data, and survives LowerLoopSteps,
// the rewrite the code generators run, with the same results.
#include <gtest/gtest.h>

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir_test_util.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
using irtest::ErrorOf;
using irtest::Tensor;

namespace {

// Every construct of version 2, as the printer writes it.
const char* const kVersion2 =
    "# backplane-ir 2\n"
    "\n"
    "func all(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], k: buffer<int32>[8]) {\n"
    "  var s: float32 = 0.0\n"
    "  for i in serial(n - 1, n, -1) {\n"
    "    s += x[i]\n"
    "    y[i] = -s\n"
    "  }\n"
    "  for j in parallel(0, n / 2, 2) schedule(dynamic, 4) {\n"
    "    y[j] *= 2.0\n"
    "  }\n"
    "  for q in parallel(0, n) schedule(guided) {\n"
    "    k[floormod(q, 8)] = 0 - k[floormod(q, 8)]\n"
    "  }\n"
    "  for w: int64 in unrolled(0i64, 4i64, 3000000000i64) {\n"
    "    k[0] = int32(w / 1000000000i64)\n"
    "  }\n"
    "}\n";

TEST(IrLanguage, Version2RoundTripsExactly) {
  const IRModule m = Parse(kVersion2);
  Verify(m);
  EXPECT_EQ(Print(m), kVersion2);
  EXPECT_EQ(TextVersion(m), 2);
  EXPECT_TRUE(StructuralEqual(Parse(Print(m)), m));
}

// A module that uses nothing new prints as version 1, so a library that reads only version 1
// still loads it; and text of version 1 keeps its meaning: `-x` there is 0 - x.
TEST(IrLanguage, OldModulesKeepVersion1AndItsMeaning) {
  const std::string v1 = "# backplane-ir 1\n\nfunc f(x: buffer<float32>[2]) {\n  x[0] = -x[1]\n}\n";
  const IRModule m = Parse(v1);
  EXPECT_EQ(TextVersion(m), 1);
  EXPECT_EQ(Print(m), v1);
  const auto* store = m.functions()[0].body.As<StoreNode>();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->value.kind(), ExprKind::kBinary) << "version 1 reads -x as 0 - x";
  // The same text without a header (or with header 2) is a negation, and 0 - x stays 0 - x.
  const IRModule m2 =
      Parse("func f(x: buffer<float32>[2]) {\n  x[0] = -x[1]\n  x[1] = 0.0 - x[0]\n}\n");
  const auto* seq = m2.functions()[0].body.As<SeqNode>();
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->seq[0].As<StoreNode>()->value.kind(), ExprKind::kNeg);
  EXPECT_EQ(seq->seq[1].As<StoreNode>()->value.kind(), ExprKind::kBinary);
  EXPECT_EQ(Print(m2),
            "# backplane-ir 2\n\nfunc f(x: buffer<float32>[2]) {\n  x[0] = -x[1]\n"
            "  x[1] = 0.0 - x[0]\n}\n");
  // And the two differ where they should: -(+0.0) is -0.0, 0 - (+0.0) is +0.0.
  Tensor<float> t({2}, 0.0f);
  Interpreter(m2).Run("f", {t.View()});
  EXPECT_TRUE(std::signbit(t[0]));
  EXPECT_FALSE(std::signbit(t[1]));
}

TEST(IrLanguage, UnsupportedVersionsAreRefused) {
  const std::string msg =
      ErrorOf([] { Parse("# backplane-ir 4\nfunc f() {\n}\n"); }, ErrorKind::kParse);
  EXPECT_NE(msg.find("unsupported backplane-ir version '4': this library reads versions 1 to 3"),
            std::string::npos)
      << msg;
}

// Loops with a step, up and down, from literals and from run-time values, against the same
// loops in C++.
TEST(IrLanguage, LoopStepsMatchC) {
  const std::string text =
      "func steps(start: int32, count: int32, step: int32, x: buffer<float32>[64], "
      "order: buffer<int32>[64], sum: buffer<float32>[1]) {\n"
      "  var at: int32 = 0\n"
      "  var s: float32 = 0.0\n"
      "  for i in serial(start, count, step) {\n"
      "    order[at] = i\n"
      "    at += 1\n"
      "    s += x[i]\n"
      "  }\n"
      "  sum[0] = s\n"
      "}\n";
  const IRModule m = Parse(text);
  const IRModule lowered = LowerLoopSteps(m);
  Verify(lowered);
  std::mt19937 rng(21);
  struct Loop {
    int start, count, step;
  };
  const Loop loops[] = {{0, 64, 1}, {63, 64, -1}, {1, 21, 3}, {62, 16, -4},
                        {5, 0, 2},  {5, -3, 2},   {7, 9, 0},  {60, 5, -15}};
  for (const Loop& l : loops) {
    SCOPED_TRACE("start " + std::to_string(l.start) + " count " + std::to_string(l.count) +
                 " step " + std::to_string(l.step));
    Tensor<float> x({64});
    x.Random(static_cast<unsigned>(rng()));
    std::vector<int32_t> want_order(64, -1);
    float want_sum = 0;
    int at = 0;
    for (int k = 0; k < l.count; ++k) {
      const int i = l.start + k * l.step;
      want_order[static_cast<size_t>(at++)] = i;
      want_sum += x[static_cast<size_t>(i)];
    }
    for (const IRModule* mod : {&m, &lowered}) {
      Tensor<int32_t> order({64}, -1);
      Tensor<float> sum({1});
      Interpreter(*mod).Run("steps", {IntArg(l.start), IntArg(l.count), IntArg(l.step), x.View(),
                                      order.View(), sum.View()});
      EXPECT_EQ(order.data, want_order);
      EXPECT_EQ(sum[0], want_sum);
    }
  }
}

// min, extent and step are evaluated once, before the first iteration, even when the body
// changes what they read.
TEST(IrLanguage, BoundsAndStepAreEvaluatedOnce) {
  const IRModule m = Parse(
      "func f(out: buffer<int32>[3]) {\n"
      "  var n: int32 = 5\n"
      "  var st: int32 = 2\n"
      "  var runs: int32 = 0\n"
      "  var last: int32 = 0\n"
      "  for i in serial(n, n, st) {\n"
      "    n += 1\n"
      "    st = 100\n"
      "    runs += 1\n"
      "    last = i\n"
      "  }\n"
      "  out[0] = runs\n"
      "  out[1] = n\n"
      "  out[2] = last\n"
      "}\n");
  for (const IRModule& mod : {m, LowerLoopSteps(m)}) {
    Tensor<int32_t> out({3});
    Interpreter(mod).Run("f", {out.View()});
    EXPECT_EQ(out.data, (std::vector<int32_t>{5, 10, 13}));
  }
}

TEST(IrLanguage, CompoundAssignmentMatchesC) {
  const IRModule m = Parse(
      "func f(x: buffer<float32>[32], a: buffer<float32>[32], k: buffer<int32>[32], "
      "r: buffer<float64>[1]) {\n"
      "  var acc: float64 = 1.0\n"
      "  for i in serial(0, 32) {\n"
      "    a[i] += x[i]\n"
      "    a[i] *= 1.5\n"
      "    a[i] -= x[i]\n"
      "    a[i] /= 3.0\n"
      "    k[i] += i\n"
      "    k[i] *= 3\n"
      "    k[i] -= 7\n"
      "    k[i] /= 2\n"
      "    acc *= 1.0 + float64(x[i]) * 0.001\n"
      "    acc -= 0.5\n"
      "    acc /= 0.75\n"
      "    acc += 0.25\n"
      "  }\n"
      "  r[0] = acc\n"
      "}\n");
  Tensor<float> x({32}), a({32});
  x.Random(1);
  a.Random(2);
  Tensor<int32_t> k({32});
  std::mt19937 rng(3);
  for (int32_t& v : k.data) v = static_cast<int32_t>(rng() % 2001) - 1000;
  std::vector<float> want_a = a.data;
  std::vector<int32_t> want_k = k.data;
  double acc = 1;
  for (int i = 0; i < 32; ++i) {
    float& v = want_a[static_cast<size_t>(i)];
    v = v + x[static_cast<size_t>(i)];
    v = v * 1.5f;
    v = v - x[static_cast<size_t>(i)];
    v = v / 3.0f;
    int32_t& w = want_k[static_cast<size_t>(i)];
    w = ((w + i) * 3 - 7) / 2;
    acc = acc * (1.0 + static_cast<double>(x[static_cast<size_t>(i)]) * 0.001);
    acc = ((acc - 0.5) / 0.75) + 0.25;
  }
  Tensor<double> r({1});
  Interpreter(m).Run("f", {x.View(), a.View(), k.View(), r.View()});
  EXPECT_EQ(a.data, want_a);
  EXPECT_EQ(k.data, want_k);
  EXPECT_EQ(r[0], acc);
}

// Negation: integers wrap (-INT_MIN is INT_MIN, -(-128i8) is -128), floats flip the sign bit.
TEST(IrLanguage, NegationWrapsAndFlipsTheSign) {
  const IRModule m = Parse(
      "func f(x: buffer<float32>[6], y: buffer<float32>[6], k: buffer<int32>[4], "
      "o: buffer<int32>[4], b: buffer<int8>[2], h: buffer<float16>[2], u: buffer<uint8>[2]) {\n"
      "  for i in serial(0, 6) {\n"
      "    y[i] = -x[i]\n"
      "  }\n"
      "  for j in serial(0, 4) {\n"
      "    o[j] = -k[j]\n"
      "  }\n"
      "  b[0] = -b[0]\n"
      "  b[1] = -(-b[1])\n"
      "  h[0] = -h[0]\n"
      "  h[1] = --h[1]\n"
      "  u[0] = -u[0]\n"
      "  u[1] = -(1u8)\n"
      "}\n");
  Tensor<float> x({6}), y({6});
  x.data = {0.0f, -0.0f, 1.5f, -2.25f, INFINITY, -INFINITY};
  Tensor<int32_t> k({4}), o({4});
  k.data = {INT32_MIN, INT32_MAX, 0, -17};
  Tensor<int8_t> b({2});
  b.data = {-128, 5};
  Tensor<uint16_t> h({2});
  h.data = {0x3C00, 0x0000};  // 1.0, +0.0
  Tensor<uint8_t> u({2});
  u.data = {3, 0};
  ArgView hv = BufferArg(h.data.data(), Float16(), 1, h.shape.data());
  Interpreter(m).Run("f", {x.View(), y.View(), k.View(), o.View(), b.View(), hv, u.View()});
  for (size_t i = 0; i < 6; ++i) {
    const float want = -x[i];
    EXPECT_EQ(std::memcmp(&y[i], &want, 4), 0) << i;
  }
  EXPECT_EQ(o.data, (std::vector<int32_t>{INT32_MIN, -INT32_MAX, 0, 17}));
  EXPECT_EQ(b.data, (std::vector<int8_t>{-128, 5}));
  EXPECT_EQ(h.data, (std::vector<uint16_t>{0xBC00, 0x0000}));
  EXPECT_EQ(u.data, (std::vector<uint8_t>{253, 255}));
}

// The builder: For with a step, ForRange (C's loop by its end), DeclareVar, Assign, unary minus.
TEST(IrLanguage, BuilderMakesTheSameTree) {
  Var n("n", Int32()), i("i", Int32()), j("j", Int32()), s("s", Float32());
  Buffer x("x", Float32(), {n}), y("y", Float32(), {n});
  IRModule built;
  built.Add(
      PrimFunc("f", {n, x, y},
               DeclareVar(s, FloatImm(Float32(), 0),
                          Seq({For(i, n - 1, n, IntImm(Int32(), -1), ForKind::kSerial,
                                   Seq({Assign(s, s + x[i]), Store(y, {i}, -s)})),
                               ForRange(j, 1, n, 3, ForKind::kSerial, Store(y, {j}, -y[j]))}))));
  Verify(built);
  const IRModule parsed = Parse(
      "func f(n: int32, x: buffer<float32>[n], y: buffer<float32>[n]) {\n"
      "  var s: float32 = 0.0\n"
      "  for i in serial(n - 1, n, -1) {\n"
      "    s = s + x[i]\n"
      "    y[i] = -s\n"
      "  }\n"
      "  for j in serial(1, (n - 1 + 2) / 3, 3) {\n"
      "    y[j] = -y[j]\n"
      "  }\n"
      "}\n");
  EXPECT_TRUE(StructuralEqual(built, parsed)) << Print(built) << "\n" << Print(parsed);
  // ForRange counts like C: for (j = 1; j < n; j += 3), for every n (none when n <= 1).
  for (int size : {1, 2, 3, 4, 5, 10, 31}) {
    Tensor<float> xs({size}), ys({size}, 1.0f);
    xs.Random(static_cast<unsigned>(size));
    Interpreter(built).Run("f", {IntArg(size), xs.View(), ys.View()});
    float sum = 0;
    std::vector<float> want(static_cast<size_t>(size));
    for (int k = size - 1; k >= 0; --k) {
      sum += xs[static_cast<size_t>(k)];
      want[static_cast<size_t>(k)] = -sum;
    }
    for (int k = 1; k < size; k += 3) want[static_cast<size_t>(k)] = -want[static_cast<size_t>(k)];
    EXPECT_EQ(ys.data, want) << size;
  }
}

// LowerLoopSteps picks names no one uses and keeps the schedule; a module without steps comes
// back with the same nodes.
TEST(IrLanguage, LowerLoopStepsUsesFreshNames) {
  const IRModule m = Parse(
      "func f(n: int32, i_k: int32, a: buffer<int32>[n]) {\n"
      "  let i_start: int32 = 1\n"
      "  for i in parallel(n - 1, n / 2, 0 - 2) schedule(static, 8) {\n"
      "    a[i] = i + i_k + i_start\n"
      "  }\n"
      "}\n");
  const IRModule lowered = LowerLoopSteps(m);
  Verify(lowered);
  const std::string text = Print(lowered);
  EXPECT_NE(text.find("for i_k1 in parallel(0, i_count) schedule(static, 8)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("let i_start1: int32 = n - 1"), std::string::npos) << text;
  EXPECT_NE(text.find("let i: int32 = i_start1 + i_k1 * i_step"), std::string::npos) << text;
  for (int size : {0, 1, 2, 7, 8}) {
    Tensor<int32_t> a1({size}, 7), a2({size}, 7);
    Interpreter(m).Run("f", {IntArg(size), IntArg(100), a1.View()});
    Interpreter(lowered).Run("f", {IntArg(size), IntArg(100), a2.View()});
    EXPECT_EQ(a1.data, a2.data) << size;
  }
  const IRModule plain = Parse(
      "func g(a: buffer<int32>[4]) {\n  for i in serial(0, 4) {\n"
      "    a[i] = i\n  }\n}\n");
  EXPECT_EQ(LowerLoopSteps(plain).functions()[0].body.get(), plain.functions()[0].body.get());
}

struct Refused {
  const char* name;
  const char* text;
  const char* message;  // a part of the verifier's or the parser's message
};

class IrLanguageRefused : public ::testing::TestWithParam<Refused> {};

TEST_P(IrLanguageRefused, WithAMessage) {
  const Refused& r = GetParam();
  std::string msg;
  try {
    Verify(Parse(r.text));
    msg = "no error";
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(r.message), std::string::npos) << msg;
}

const Refused kRefused[] = {
    {"AssignALet", "func f(a: buffer<int32>[1]) {\n  let x: int32 = 1\n  x = 2\n  a[0] = x\n}\n",
     "'x' cannot be assigned: parameters, loop variables and let bindings are constant; declare "
     "it with var"},
    {"AssignAParam", "func f(n: int32) {\n  n += 1\n}\n", "'n' cannot be assigned"},
    {"AssignALoopVariable", "func f() {\n  for i in serial(0, 4) {\n    i = 2\n  }\n}\n",
     "'i' cannot be assigned"},
    {"RaceInAParallelLoop",
     "func f(a: buffer<float32>[8], r: buffer<float32>[1]) {\n  var s: float32 = 0.0\n"
     "  for i in parallel(0, 8) {\n    s += a[i]\n  }\n  r[0] = s\n}\n",
     "variable 's' is declared outside the parallel loop 'i' and assigned inside it: its "
     "iterations run at once and would race"},
    {"RaceInAVectorizedLoop",
     "func f(a: buffer<float32>[8]) {\n  var s: float32 = 0.0\n"
     "  for i in vectorized(0, 8) {\n    s = a[i]\n  }\n}\n",
     "declared outside the vectorized loop 'i'"},
    {"RaceInAThreadLoop",
     "func f(a: buffer<float32>[8]) {\n  var s: float32 = 0.0\n"
     "  for i in thread(threadIdx.x, 0, 8) {\n    s = a[i]\n  }\n}\n",
     "declared outside the thread loop 'i'"},
    {"AssignWrongType", "func f() {\n  var s: float32 = 0.0\n  s = 1.0f64\n}\n",
     "type mismatch: variable 's' is float32 but the value is float64"},
    {"VectorVar", "func f() {\n  var s: float32x4 = broadcast(0.0, 4)\n}\n",
     "an assignable variable holds a scalar"},
    {"StepOnAThreadLoop",
     "func f(a: buffer<float32>[8]) {\n  for i in thread(threadIdx.x, 0, 8, 2) {\n"
     "    a[i] = 0.0\n  }\n}\n",
     "a loop bound to threadIdx.x takes no step"},
    {"StepOfAnotherType", "func f() {\n  for i in serial(0, 4, 1i64) {\n  }\n}\n",
     "loop variable 'i' is int32 but its step is int64"},
    {"ScheduleOnASerialLoop", "func f() {\n  for i in serial(0, 4) schedule(dynamic) {\n  }\n}\n",
     "a schedule on a serial loop: only parallel loops take one"},
    {"BadSchedule", "func f() {\n  for i in parallel(0, 4) schedule(auto) {\n  }\n}\n",
     "expected the schedule (static, dynamic or guided)"},
    {"BadChunk", "func f() {\n  for i in parallel(0, 4) schedule(static, 0) {\n  }\n}\n",
     "chunk size 0: expected a positive integer"},
    {"NegateABool", "func f(a: buffer<bool>[1]) {\n  a[0] = -a[0]\n}\n",
     "unary minus takes a number, got bool"},
    {"CompoundOnAPackedIndex",
     "func f(a: buffer<float32>[4]) {\n  a[call_packed(\"g\")] += 1.0\n}\n",
     "would call it twice: bind the index with let first"},
    {"AssignAnExpression", "func f(n: int32) {\n  n + 1 = 2\n}\n",
     "expected a variable or a buffer element (name[indices]) on the left of '='"},
    {"AtomicOnFloat16", "func f(a: buffer<float16>[4]) {\n  atomic_add(a[0], 1.0f16)\n}\n",
     "atomic_add on buffer 'a' of float16: atomics take int32, int64, float32 or float64 "
     "elements"},
    {"AtomicValueType", "func f(a: buffer<int32>[4]) {\n  atomic_max(a[0], 1i64)\n}\n",
     "type mismatch: atomic_max on buffer 'a' of int32 with a value of int64: cast the value"},
    {"AtomicOnAVectorIndex",
     "func f(a: buffer<int32>[8]) {\n  atomic_add(a[ramp(0, 1, 4)], broadcast(1, 4))\n}\n",
     "an atomic updates one element"},
    {"AtomicOnAPerThreadAllocation",
     "func f(a: buffer<int32>[8]) {\n  for t in thread(threadIdx.x, 0, 8) {\n"
     "    alloc l: int32[1] local\n    atomic_add(l[0], 1)\n    a[t] = l[0]\n  }\n}\n",
     "a local allocation inside a thread-bound region: each thread has its own"},
    {"AtomicOfAWholeBuffer", "func f(a: buffer<int32>[8]) {\n  atomic_add(a, 1)\n}\n",
     "buffer 'a' used as a value"},
    {"LiteralDoesNotFitTheVariable", "func f() {\n  var s: int8 = 0\n  s += 300\n}\n",
     "integer literal 300 does not fit in int8"},
};

INSTANTIATE_TEST_SUITE_P(Errors, IrLanguageRefused, ::testing::ValuesIn(kRefused),
                         [](const ::testing::TestParamInfo<Refused>& param_info) {
                           return std::string(param_info.param.name);
                         });

// Atomics: the text form, and the interpreter's result when the threads of a block run at once
// (a region with a barrier runs its threads as std::threads): a histogram, a float sum of
// values whose every order of addition is exact, min and max of int32, int64 and float32, in
// global and shared memory.
TEST(IrLanguage, AtomicsAccumulateFromThreadsThatRunAtOnce) {
  const std::string text =
      "# backplane-ir 2\n"
      "\n"
      "func f(k: buffer<int32>[256], hist: buffer<int32>[8], s: buffer<float32>[3], "
      "e: buffer<int64>[2], h2: buffer<int32>[8]) {\n"
      "  for b in thread(blockIdx.x, 0, 2) {\n"
      "    for t in thread(threadIdx.x, 0, 128) {\n"
      "      let i: int32 = b * 128 + t\n"
      "      alloc sh: int32[8] shared\n"
      "      atomic_add(hist[floormod(k[i], 8)], 1)\n"
      "      atomic_add(s[0], float32(k[i]) * 0.5)\n"
      "      atomic_min(s[1], float32(k[i]))\n"
      "      atomic_max(s[2], float32(k[i]))\n"
      "      atomic_min(e[0], int64(k[i]) * 5000000000i64)\n"
      "      atomic_max(e[1], int64(k[i]))\n"
      "      atomic_add(sh[floormod(k[i], 8)], 2)\n"
      "      barrier\n"
      "      if (t < 8) {\n"
      "        atomic_add(h2[t], sh[t])\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  const IRModule m = Parse(text);
  Verify(m);
  EXPECT_EQ(Print(m), text);
  Tensor<int32_t> k({256}), hist({8}), h2({8});
  std::mt19937 rng(8);
  for (int32_t& v : k.data) v = static_cast<int32_t>(rng() % 1999) - 999;
  Tensor<float> s({3});
  s.data = {0.0f, 1e30f, -1e30f};
  Tensor<int64_t> e({2});
  e.data = {INT64_MAX, INT64_MIN};
  Interpreter(m).Run("f", {k.View(), hist.View(), s.View(), e.View(), h2.View()});
  std::vector<int32_t> want_hist(8, 0);
  double sum = 0;
  int32_t lo = INT32_MAX, hi = INT32_MIN;
  for (int32_t v : k.data) {
    ++want_hist[static_cast<size_t>(((v % 8) + 8) % 8)];
    sum += v * 0.5;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(hist.data, want_hist);
  for (int32_t& v : want_hist) v *= 2;
  EXPECT_EQ(h2.data, want_hist);
  EXPECT_EQ(s[0], static_cast<float>(sum));
  EXPECT_EQ(s[1], static_cast<float>(lo));
  EXPECT_EQ(s[2], static_cast<float>(hi));
  EXPECT_EQ(e[0], int64_t{lo} * 5000000000);
  EXPECT_EQ(e[1], int64_t{hi});
}

// `var` is a keyword only where it declares: a buffer or a variable may still be called var.
TEST(IrLanguage, VarIsStillAName) {
  const IRModule m = Parse(
      "func f(var: buffer<int32>[2]) {\n  let v: int32 = 3\n  var[0] = v\n  var w: int32 = 1\n"
      "  w += var[0]\n  var[1] = w\n}\n");
  Verify(m);
  Tensor<int32_t> a({2});
  Interpreter(m).Run("f", {a.View()});
  EXPECT_EQ(a.data, (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(StructuralEqual(Parse(Print(m)), m));
}

}  // namespace
