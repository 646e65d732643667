// SPDX-License-Identifier: Apache-2.0
// The interpreter's semantics, against hand-computed results: integer wrapping and division,
// float32/float16 rounding, casts, vectors, intrinsics, bounds, allocations, call_packed.
#include <gtest/gtest.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ir_test_util.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
using irtest::ErrorOf;
using irtest::Tensor;

namespace {

Interpreter Of(const std::string& text) { return Interpreter(Parse(text)); }

TEST(IrInterp, VectorAdd) {
  Interpreter in = irtest::KernelInterpreter("vector_add.bpir");
  Tensor<float> a({5}), b({5}), c({5});
  for (int k = 0; k < 5; ++k) {
    a[k] = static_cast<float>(k);
    b[k] = 0.5f * static_cast<float>(k);
  }
  in.Run("vector_add", {IntArg(5), a.View(), b.View(), c.View()});
  EXPECT_EQ(c.data, (std::vector<float>{0, 1.5f, 3, 4.5f, 6}));
}

TEST(IrInterp, IntegersWrapAtTheirWidth) {
  Interpreter in =
      Of("func f(a: int8, b: uint8, c: int32, d: int64, o8: buffer<int8>[2], ou: buffer<uint8>[2], "
         "o32: buffer<int32>[2], o64: buffer<int64>[2]) {\n"
         "  o8[0] = a + a\n"
         "  o8[1] = a * 3i8\n"
         "  ou[0] = b + 10u8\n"
         "  ou[1] = 3u8 - b\n"
         "  o32[0] = c + 1\n"
         "  o32[1] = int32(d)\n"
         "  o64[0] = d * d\n"
         "  o64[1] = -9223372036854775808i64 / -1i64\n"
         "}\n");
  Tensor<int8_t> o8({2});
  Tensor<uint8_t> ou({2});
  Tensor<int32_t> o32({2});
  Tensor<int64_t> o64({2});
  in.Run("f", {IntArg(100), IntArg(250), IntArg(2147483647), IntArg(4294967298), o8.View(),
               ou.View(), o32.View(), o64.View()});
  EXPECT_EQ(o8.data, (std::vector<int8_t>{-56, 44}));
  EXPECT_EQ(ou.data, (std::vector<uint8_t>{4, 9}));
  EXPECT_EQ(o32.data, (std::vector<int32_t>{-2147483647 - 1, 2}));
  EXPECT_EQ(o64[0], 17179869188);  // (2^32 + 2)^2 = 2^64 + 2^34 + 4 wraps to 2^34 + 4
  EXPECT_EQ(o64[1], std::numeric_limits<int64_t>::min());
}

TEST(IrInterp, IntegerDivisionTruncatesAndFloorDivisionRoundsDown) {
  Interpreter in =
      Of("func f(x: int32, y: int32, u: uint32, o: buffer<int32>[6], ou: buffer<int64>[2]) {\n"
         "  o[0] = x / y\n"
         "  o[1] = floordiv(x, y)\n"
         "  o[2] = floormod(x, y)\n"
         "  o[3] = floordiv(-x, y)\n"
         "  o[4] = floormod(-x, y)\n"
         "  o[5] = floormod(x, -y)\n"
         "  ou[0] = int64(u / 2u32)\n"
         "  ou[1] = int64(floormod(u, 7u32))\n"
         "}\n");
  Tensor<int32_t> o({6});
  Tensor<int64_t> ou({2});
  in.Run("f", {IntArg(-7), IntArg(2), IntArg(4294967295), o.View(), ou.View()});
  EXPECT_EQ(o.data, (std::vector<int32_t>{-3, -4, 1, 3, 1, -1}));
  EXPECT_EQ(ou.data, (std::vector<int64_t>{2147483647, 4294967295 % 7}));
}

TEST(IrInterp, IntegerDivisionByZeroIsAnError) {
  Interpreter in =
      Of("func div0(x: int32, y: int32, o: buffer<int32>[1]) {\n  o[0] = floormod(x, y - 1)\n}\n");
  Tensor<int32_t> o({1});
  EXPECT_EQ(ErrorOf([&] {
              in.Run("div0", {IntArg(5), IntArg(1), o.View()});
            }),
            "div0: integer division by zero in `floormod(x, y - 1)`");
  in.Run("div0", {IntArg(5), IntArg(3), o.View()});
  EXPECT_EQ(o[0], 1);
}

TEST(IrInterp, Float32IsComputedInFloat) {
  // 2^24 + 1 is not a float: the sum rounds back to 2^24 in float, not in double.
  Interpreter in =
      Of("func f(x: float32, y: float64, o: buffer<float64>[3]) {\n"
         "  o[0] = float64(x + 1.0)\n"
         "  o[1] = float64(x) + 1.0f64\n"
         "  o[2] = float64(float32(y))\n"
         "}\n");
  Tensor<double> o({3});
  in.Run("f", {FloatArg(16777216.0), FloatArg(0.1), o.View()});
  EXPECT_EQ(o[0], 16777216.0);
  EXPECT_EQ(o[1], 16777217.0);
  EXPECT_EQ(o[2], static_cast<double>(0.1f));
  // A float32 param given a double is rounded to float.
  in.Run("f", {FloatArg(0.1), FloatArg(0), o.View()});
  EXPECT_EQ(o[1], static_cast<double>(0.1f) + 1.0);
}

TEST(IrInterp, Float16IsStoredAsHalf) {
  Interpreter in =
      Of("func f(h: buffer<float16>[4], o: buffer<float32>[3]) {\n"
         "  h[0] = float16(1.0 / 3.0)\n"
         "  h[1] = h[0] + h[0]\n"
         "  h[2] = float16(2048.0) + float16(1.0)\n"
         "  h[3] = float16(70000.0)\n"
         "  o[0] = float32(h[0])\n"
         "  o[1] = float32(h[2])\n"
         "  o[2] = float32(float16(0.00000006))\n"
         "}\n");
  std::vector<uint16_t> h(4);
  const int64_t hs[] = {4};
  Tensor<float> o({3});
  in.Run("f", {BufferArg(h.data(), Float16(), 1, hs), o.View()});
  EXPECT_EQ(h[0], 0x3555);  // 0.333251953125
  EXPECT_EQ(h[1], 0x3955);  // 0.66650390625
  EXPECT_EQ(h[2], 0x6800);  // 2048: 2049 is not a half
  EXPECT_EQ(h[3], 0x7c00);  // inf
  EXPECT_EQ(o[0], 0.333251953125f);
  EXPECT_EQ(o[1], 2048.0f);
  EXPECT_EQ(o[2], std::ldexp(1.0f, -24));  // the smallest subnormal
}

TEST(IrInterp, CastsAsC) {
  Interpreter in =
      Of("func f(x: float32, o: buffer<int32>[4], u: buffer<uint8>[3], b: buffer<bool>[3], "
         "d: buffer<float64>[2]) {\n"
         "  o[0] = int32(x)\n"
         "  o[1] = int32(-x)\n"
         "  o[2] = int32(x * 1e+20)\n"
         "  o[3] = int32(nan)\n"
         "  u[0] = uint8(-1)\n"
         "  u[1] = uint8(300)\n"
         "  u[2] = uint8(bool(2))\n"
         "  b[0] = bool(x)\n"
         "  b[1] = 3 < 2\n"
         "  b[2] = !b[1]\n"
         "  d[0] = float64(18446744073709551615u64)\n"
         "  d[1] = float64(-3i8)\n"
         "}\n");
  Tensor<int32_t> o({4});
  Tensor<uint8_t> u({3});
  std::vector<uint8_t> b(3, 7);
  const int64_t bs[] = {3};
  Tensor<double> d({2});
  in.Run("f", {FloatArg(2.7), o.View(), u.View(), BufferArg(b.data(), Bool(), 1, bs), d.View()});
  // Out-of-range and NaN conversions, undefined in C, saturate and give 0.
  EXPECT_EQ(o.data, (std::vector<int32_t>{2, -2, 2147483647, 0}));
  EXPECT_EQ(u.data, (std::vector<uint8_t>{255, 44, 1}));
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(d[0], 18446744073709551615.0);
  EXPECT_EQ(d[1], -3.0);
}

TEST(IrInterp, SelectEvaluatesTheChosenArmAndLogicalOpsShortCircuit) {
  Interpreter in =
      Of("func f(i: int32, a: buffer<float32>[4], o: buffer<float32>[2]) {\n"
         "  o[0] = select(i < 4 && a[i] > 0.0, 1.0, 2.0)\n"
         "  o[1] = select(i < 4, a[i], 0.0)\n"
         "  o[1] = o[1] + select(i >= 4, 0.0, a[i])\n"
         "}\n");
  Tensor<float> a({4}, 1.0f), o({2});
  in.Run("f", {IntArg(2), a.View(), o.View()});
  EXPECT_EQ(o.data, (std::vector<float>{1, 2}));
  // && stops at i < 4, and select evaluates only the arm it chooses (docs/ir.md): a[4] is
  // never loaded.
  in.Run("f", {IntArg(4), a.View(), o.View()});
  EXPECT_EQ(o.data, (std::vector<float>{2, 0}));
}

TEST(IrInterp, OutOfBoundsIsAnErrorForParamsAndAllocations) {
  Interpreter in =
      Of("func oob(n: int32, a: buffer<float32>[n, 3]) {\n"
         "  for i in serial(0, n) {\n"
         "    a[i, i] = 1.0\n"
         "  }\n"
         "  alloc t: int32[2] local\n"
         "  t[n - 5] = 1\n"
         "}\n");
  Tensor<float> a({5, 3});
  EXPECT_EQ(ErrorOf([&] {
              in.Run("oob", {IntArg(5), a.View()});
            }),
            "oob: index 3 is out of bounds for dimension 1 of buffer 'a' (extent 3) in "
            "`a[i, i] = 1.0`");
  EXPECT_EQ(a[0], 1.0f);  // the iterations before the error ran
  Tensor<float> b({2, 3});
  EXPECT_EQ(ErrorOf([&] {
              in.Run("oob", {IntArg(2), b.View()});
            }),
            "oob: index -3 is out of bounds for dimension 0 of buffer 't' (extent 2) in "
            "`t[n - 5] = 1`");
}

// Index arithmetic is exact (docs/ir.md, "Index arithmetic"): the +, -, * and negation that
// form an index are computed in int64, so an index never wraps at 32 bits. i * m * m + 1 with
// m = 65536 is 2^32 + 1, out of bounds, where int32 arithmetic would have wrapped it to 1;
// outside an index the same int32 arithmetic still wraps.
TEST(IrInterp, IndexArithmeticIsComputedInInt64) {
  Interpreter in =
      Of("func f(i: int32, m: int32, a: buffer<float32>[4], o: buffer<float32>[2], "
         "k: buffer<int32>[1]) {\n"
         "  o[0] = a[i * m * m + 1]\n"
         "  k[0] = i * m * m + 1\n"
         "  o[1] = a[-(i * m * m) + 2]\n"
         "}\n"
         "func g(i: int32, m: int32, k: buffer<int32>[1]) {\n"
         "  k[0] = i * m * m + 1\n"
         "}\n");
  Tensor<float> a({4}, 1.0f), o({2});
  Tensor<int32_t> k({1});
  EXPECT_EQ(ErrorOf([&] {
              in.Run("f", {IntArg(1), IntArg(65536), a.View(), o.View(), k.View()});
            }),
            "f: index 4294967297 is out of bounds for dimension 0 of buffer 'a' (extent 4) in "
            "`a[i * m * m + 1]`");
  a[3] = 7.0f;
  in.Run("f", {IntArg(0), IntArg(65536), a.View(), o.View(), k.View()});
  EXPECT_EQ(o.data, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(k[0], 1);
  // 2^15 * 2^8 * 2^8 = 2^31: the index is exactly 2^31 + 1; the int32 value stored wraps.
  EXPECT_EQ(ErrorOf([&] {
              in.Run("f", {IntArg(32768), IntArg(256), a.View(), o.View(), k.View()});
            }),
            "f: index 2147483649 is out of bounds for dimension 0 of buffer 'a' (extent 4) in "
            "`a[i * m * m + 1]`");
  in.Run("g", {IntArg(32768), IntArg(256), k.View()});
  EXPECT_EQ(k[0], INT32_MIN + 1);
}

// A contiguous vector index, ramp(base, 1, lanes) as the last index, is index arithmetic too:
// its base and lanes are exact, as the C-family code generators compute them (the base in
// int64, then the lanes after it). With i * m * m = 2^32 the access is out of bounds by its
// exact value, not element 1..4, which int32 lanes would wrap it to.
TEST(IrInterp, AContiguousVectorIndexIsComputedInInt64) {
  Interpreter in =
      Of("func f(i: int32, m: int32, a: buffer<float32>[8], o: buffer<float32>[4]) {\n"
         "  o[ramp(0, 1, 4)] = a[ramp(i * m * m + 1, 1, 4)]\n"
         "}\n");
  Tensor<float> a({8}), o({4});
  for (int k = 0; k < 8; ++k) a[k] = 0.5f * static_cast<float>(k) + 0.25f;
  EXPECT_EQ(ErrorOf([&] {
              in.Run("f", {IntArg(1), IntArg(65536), a.View(), o.View()});
            }),
            "f: index 4294967297 is out of bounds for dimension 0 of buffer 'a' (extent 8) in "
            "`a[ramp(i * m * m + 1, 1, 4)]`");
  in.Run("f", {IntArg(0), IntArg(65536), a.View(), o.View()});
  EXPECT_EQ(o.data, (std::vector<float>{a[1], a[2], a[3], a[4]}));
}

TEST(IrInterp, AllocationsAreZeroFilledAndScoped) {
  Interpreter in =
      Of("func f(o: buffer<int32>[3]) {\n"
         "  for k in serial(0, 3) {\n"
         "    alloc t: int32[4] global\n"
         "    o[k] = t[k] + t[3]\n"
         "    t[3] = 7\n"
         "  }\n"
         "}\n");
  Tensor<int32_t> o({3}, -1);
  in.Run("f", {o.View()});
  EXPECT_EQ(o.data, (std::vector<int32_t>{0, 0, 0}));
}

TEST(IrInterp, StridedParams) {
  // a is column-major: its strides say so, and the interpreter indexes with them.
  Interpreter in =
      Of("func f(m: int32, n: int32, a: buffer<float32>[m, n] strides [1, m], "
         "b: buffer<float32>[m, n]) {\n"
         "  for i in serial(0, m) {\n    for j in serial(0, n) {\n      b[i, j] = a[i, j]\n"
         "    }\n  }\n}\n");
  std::vector<float> a = {0, 10, 1, 11, 2, 12};  // a[i, j] = 10 i + j, m = 2, n = 3
  const int64_t shape[] = {2, 3}, strides[] = {1, 2};
  Tensor<float> b({2, 3});
  in.Run("f", {IntArg(2), IntArg(3), BufferArg(a.data(), Float32(), 2, shape, strides), b.View()});
  EXPECT_EQ(b.data, (std::vector<float>{0, 1, 2, 10, 11, 12}));
}

TEST(IrInterp, Vectors) {
  Interpreter in = irtest::KernelInterpreter("saxpy.bpir");
  Tensor<float> x({8}), y({8});
  for (int k = 0; k < 8; ++k) {
    x[k] = static_cast<float>(k);
    y[k] = 1;
  }
  in.Run("saxpy_vec", {IntArg(8), FloatArg(2), x.View(), y.View()});
  EXPECT_EQ(y.data, (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15}));
  Interpreter lanes = Of(
      "func f(o: buffer<int32>[8], b: buffer<bool>[4]) {\n"
      "  o[ramp(0, 2, 4)] = ramp(10, -3, 4) * broadcast(2, 4)\n"
      "  o[ramp(1, 2, 4)] = select(ramp(0, 1, 4) < broadcast(2, 4), broadcast(1, 4), "
      "broadcast(-1, 4))\n"
      "  b[ramp(0, 1, 4)] = ramp(0, 1, 4) == broadcast(1, 4) || ramp(0, 1, 4) == broadcast(3, 4)\n"
      "}\n");
  Tensor<int32_t> o({8});
  std::vector<uint8_t> b(4);
  const int64_t bs[] = {4};
  lanes.Run("f", {o.View(), BufferArg(b.data(), Bool(), 1, bs)});
  EXPECT_EQ(o.data, (std::vector<int32_t>{20, 1, 14, 1, 8, -1, 2, -1}));
  EXPECT_EQ(b, (std::vector<uint8_t>{0, 1, 0, 1}));
}

TEST(IrInterp, EveryIntrinsic) {
  std::string body;
  const std::vector<Intrinsic>& all = Intrinsics();
  for (size_t k = 0; k < all.size(); ++k) {
    const std::string args = all[k].arity == 1 ? "x" : all[k].arity == 2 ? "x, y" : "x, y, x";
    body += "  o[" + std::to_string(k) + "] = " + all[k].name + "(" + args + ")\n";
    body += "  d[" + std::to_string(k) + "] = " + all[k].name + "(float64(" +
            (all[k].arity == 1   ? std::string("x)")
             : all[k].arity == 2 ? std::string("x), float64(y)")
                                 : std::string("x), float64(y), float64(x)")) +
            ")\n";
  }
  const std::string n = std::to_string(all.size());
  Interpreter in = Of("func f(x: float32, y: float32, o: buffer<float32>[" + n +
                      "], d: buffer<float64>[" + n + "]) {\n" + body + "}\n");
  Tensor<float> o({static_cast<int64_t>(all.size())});
  Tensor<double> d({static_cast<int64_t>(all.size())});
  volatile float vx = 0.7f, vy = 2.5f;  // not constants: the compiler must not fold the calls
  const float x = vx, y = vy;
  in.Run("f", {FloatArg(x), FloatArg(y), o.View(), d.View()});
  const double xd = x, yd = y;
  const std::vector<float> want_f = {std::exp(x),   std::exp2(x),           std::log(x),
                                     std::log2(x),  std::sqrt(x),           1 / std::sqrt(x),
                                     std::tanh(x),  1 / (1 + std::exp(-x)), std::erf(x),
                                     std::fabs(x),  std::floor(x),          std::ceil(x),
                                     std::round(x), std::trunc(x),          std::sin(x),
                                     std::cos(x),   std::pow(x, y),         std::fma(x, y, x)};
  const std::vector<double> want_d = {
      std::exp(xd),     std::exp2(xd),       std::log(xd),   std::log2(xd),
      std::sqrt(xd),    1 / std::sqrt(xd),   std::tanh(xd),  1 / (1 + std::exp(-xd)),
      std::erf(xd),     std::fabs(xd),       std::floor(xd), std::ceil(xd),
      std::round(xd),   std::trunc(xd),      std::sin(xd),   std::cos(xd),
      std::pow(xd, yd), std::fma(xd, yd, xd)};
  ASSERT_EQ(want_f.size(), all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(o[k], want_f[k]) << all[k].name;
    EXPECT_EQ(d[k], want_d[k]) << all[k].name;
  }
}

TEST(IrInterp, CallPackedGetsTheParamsArgViews) {
  Interpreter in = irtest::KernelInterpreter("matmul.bpir");
  Tensor<float> a({2, 3}), b({3, 2}), c({2, 2});
  a.Random(1);
  b.Random(2);
  int tag_a = 0, tag_c = 0;
  std::vector<std::string> calls;
  PackedCall sgemm = [&](const std::string& name, const std::vector<ArgView>& args) -> int64_t {
    calls.push_back(name);
    EXPECT_EQ(args.size(), 8u);
    EXPECT_EQ(args[0].i, 2);
    EXPECT_EQ(args[3].kind, ArgView::Kind::kFloat);
    EXPECT_EQ(args[4].user, &tag_a);  // the caller's own ArgView
    EXPECT_EQ(args[7].user, &tag_c);
    const auto* pa = static_cast<const float*>(args[4].data);
    const auto* pb = static_cast<const float*>(args[5].data);
    auto* pc = static_cast<float*>(args[7].data);
    const int64_t m = args[0].i, n = args[1].i, k = args[2].i;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float s = 0;
        for (int64_t p = 0; p < k; ++p) s += pa[i * k + p] * pb[p * n + j];
        pc[i * n + j] = static_cast<float>(args[3].f) * s;
      }
    return 0;
  };
  in.Run("matmul_blas", {IntArg(2), IntArg(2), IntArg(3), a.View(&tag_a), b.View(), c.View(&tag_c)},
         sgemm);
  EXPECT_EQ(calls, std::vector<std::string>{"blas.sgemm"});
  Tensor<float> want({2, 2});
  in.Run("matmul", {IntArg(2), IntArg(2), IntArg(3), a.View(), b.View(), want.View()});
  EXPECT_EQ(c.data, want.data);
  EXPECT_EQ(
      ErrorOf([&] {
        in.Run("matmul_blas", {IntArg(2), IntArg(2), IntArg(3), a.View(), b.View(), c.View()});
      }),
      "matmul_blas: call_packed(\"blas.sgemm\") needs a PackedCall: pass one to "
      "Interpreter::Run");
}

TEST(IrInterp, CallPackedResultAndAllocatedBuffers) {
  Interpreter in =
      Of("func f(o: buffer<int32>[2]) {\n"
         "  alloc t: int32[2, 3] global\n"
         "  t[1, 2] = 5\n"
         "  o[0] = call_packed(\"peek\", t, 1.5f64, 3i64)\n"
         "  o[1] = t[0, 0]\n"
         "}\n");
  Tensor<int32_t> o({2});
  in.Run("f", {o.View()}, [](const std::string& name, const std::vector<ArgView>& args) {
    EXPECT_EQ(name, "peek");
    EXPECT_EQ(args[0].ndim, 2);
    EXPECT_EQ(args[0].shape[1], 3);
    EXPECT_EQ(args[0].strides[0], 3);
    EXPECT_EQ(args[0].user, nullptr);
    auto* t = static_cast<int32_t*>(args[0].data);
    t[0] = 9;
    EXPECT_EQ(args[1].f, 1.5);
    EXPECT_EQ(args[2].i, 3);
    return int64_t{t[5]} + 4294967296;  // the int32 result wraps
  });
  EXPECT_EQ(o.data, (std::vector<int32_t>{5, 9}));
}

TEST(IrInterp, Errors) {
  EXPECT_EQ(ErrorOf([] { Of("func f(a: buffer<float32>[4]) {\n  a[0] = 1i32\n}\n"); },
                    ErrorKind::kVerify),
            "in function 'f': type mismatch: storing int32 into buffer 'a' of float32: cast the "
            "value in `a[0] = 1i32`");
  Interpreter in = irtest::KernelInterpreter("vector_add.bpir");
  EXPECT_EQ(ErrorOf([&] { in.Run("vector_sub", {}); }),
            "Interpreter::Run: no function 'vector_sub' in the module (it has: vector_add, "
            "vector_add_gpu)");
  Tensor<float> a({4});
  EXPECT_EQ(ErrorOf([&] {
              in.Run("vector_add", {IntArg(4), a.View(), a.View()});
            }),
            "vector_add: expected 4 arguments (n, a, b, c), got 3; pass one argument per "
            "parameter");
  // What verifies but cannot be simulated is reported when the function runs.
  Interpreter odd =
      Of("func g(n: int32, a: buffer<float32>[n]) {\n"
         "  for b in thread(blockIdx.x, 0, n) {\n"
         "    let m: int32 = b + 1\n"
         "    for t in thread(threadIdx.x, 0, m) {\n      a[b] = 1.0\n    }\n"
         "  }\n}\n");
  EXPECT_EQ(ErrorOf([&] {
              odd.Run("g", {IntArg(4), a.View()});
            }),
            "g: the interpreter cannot run this function: the extent of the loop over "
            "threadIdx.x, `m`, uses a variable defined inside the thread-bound region: launch "
            "extents must be computable before the launch");
}

TEST(IrInterp, LoopsOfEveryKindAndTypes) {
  Interpreter in =
      Of("func f(n: int64, o: buffer<int64>[4]) {\n"
         "  for i: int64 in parallel(0i64, n) {\n"
         "    for j: int8 in unrolled(-2i8, 3i8) {\n"
         "      o[i] = o[i] + int64(j)\n"
         "    }\n"
         "  }\n"
         "  for k: int64 in vectorized(2i64, -1i64) {\n"
         "    o[0] = 99i64\n"
         "  }\n"
         "}\n");
  Tensor<int64_t> o({4}, 1);
  in.Run("f", {IntArg(4), o.View()});
  EXPECT_EQ(o.data, (std::vector<int64_t>{-2, -2, -2, -2}));
}

}  // namespace
