// SPDX-License-Identifier: Apache-2.0
// CheckArgs: one test per kind of mismatch, each checking the whole message; EvalIntExpr.
#include <gtest/gtest.h>

#include <array>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <random>
#include <string>
#include <vector>

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)

namespace {

PrimFunc FuncOf(const std::string& text) { return Parse(text).functions().at(0); }

const char* const kMatmul =
    "func matmul(m: int32, n: int32, k: int32, a: buffer<float32>[m, k], "
    "b: buffer<float32>[k, n], c: buffer<float32>[m, n]) {\n  c[0, 0] = a[0, 0] + b[0, 0]\n}\n";

// Backing store for the tensors of one call.
struct Args {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<ArgView> v;
  static float storage[4];  // never read: CheckArgs only looks at the pointer

  void Int(int64_t x) { v.push_back(IntArg(x)); }
  void Float(double x) { v.push_back(FloatArg(x)); }
  // Shapes are kept in a list whose elements never move once the call is built.
  void Tensor(std::vector<int64_t> shape, DType t = Float32(), const int64_t* strides = nullptr) {
    shapes.reserve(16);
    shapes.push_back(std::move(shape));
    const auto& s = shapes.back();
    v.push_back(BufferArg(storage, t, static_cast<int>(s.size()), s.data(), strides));
  }
};

float Args::storage[4];

Args MatmulArgs(int64_t m, int64_t n, int64_t k) {
  Args a;
  a.Int(m);
  a.Int(n);
  a.Int(k);
  a.Tensor({m, k});
  a.Tensor({k, n});
  a.Tensor({m, n});
  return a;
}

TEST(IrSignature, AllMatch) {
  const PrimFunc f = FuncOf(kMatmul);
  Args a = MatmulArgs(16, 32, 64);
  EXPECT_EQ(CheckArgs(f, a.v), "");
}

TEST(IrSignature, Count) {
  Args a = MatmulArgs(16, 32, 64);
  a.v.pop_back();
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: expected 6 arguments (m, n, k, a, b, c), got 5; pass one argument per "
            "parameter");
}

TEST(IrSignature, ShapeMismatchNamesTheExpressionAndItsVariables) {
  Args a = MatmulArgs(16, 32, 64);
  a.shapes[1] = {64, 33};
  a.v[4].shape = a.shapes[1].data();
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 4 'b' has shape [64, 33], expected [k, n] = [64, 32] (k = 64, n = "
            "32 from the scalar arguments); pass a tensor of that shape");
}

TEST(IrSignature, ShapeOfConstantsAndOfExpressions) {
  const PrimFunc f = FuncOf(
      "func f(n: int64, a: buffer<int8>[4, 2], b: buffer<int8>[(n + 15i64) / 16i64]) {\n"
      "  a[0, 0] = b[0]\n}\n");
  Args a;
  a.Int(40);
  a.Tensor({4, 3}, Int(8));
  a.Tensor({3}, Int(8));
  EXPECT_EQ(CheckArgs(f, a.v),
            "f: argument 1 'a' has shape [4, 3], expected [4, 2]; pass a tensor of that shape");
  a.shapes[0] = {4, 2};
  a.v[1].shape = a.shapes[0].data();
  EXPECT_EQ(CheckArgs(f, a.v), "");  // (40 + 15) / 16 = 3
  a.v[0].i = 33;
  EXPECT_EQ(CheckArgs(f, a.v), "");
  a.v[0].i = 32;
  EXPECT_EQ(CheckArgs(f, a.v),
            "f: argument 2 'b' has shape [3], expected [(n + 15i64) / 16i64] = [2] (n = 32 from "
            "the scalar arguments); pass a tensor of that shape");
}

TEST(IrSignature, Rank) {
  Args a = MatmulArgs(16, 32, 64);
  a.shapes[0] = {16, 64, 1};
  a.v[3].shape = a.shapes[0].data();
  a.v[3].ndim = 3;
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 3 'a' has rank 3 (shape [16, 64, 1]), expected rank 2: [m, k] = "
            "[16, 64] (m = 16, k = 64 from the scalar arguments); pass a tensor of that shape");
}

TEST(IrSignature, DType) {
  Args a = MatmulArgs(16, 32, 64);
  a.v[5].dtype = Float64();
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 5 'c' has dtype float64, expected float32; pass a float32 tensor");
}

TEST(IrSignature, ScalarForABuffer) {
  Args a = MatmulArgs(16, 32, 64);
  a.v[3] = IntArg(7);
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 3 'a' is an integer (7), expected a buffer<float32>[m, k]; pass a "
            "tensor");
  a.v[3] = FloatArg(0.5);
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 3 'a' is a float (0.5), expected a buffer<float32>[m, k]; pass a "
            "tensor");
}

TEST(IrSignature, BufferForAScalar) {
  Args a = MatmulArgs(16, 32, 64);
  a.v[0] = a.v[3];
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 0 'm' is a buffer, expected an int32 scalar; pass an integer");
  const PrimFunc f = FuncOf("func f(x: float32, a: buffer<float32>[1]) {\n  a[0] = x\n}\n");
  EXPECT_EQ(CheckArgs(f, {a.v[3], a.v[3]}),
            "f: argument 0 'x' is a buffer, expected a float32 scalar; pass a number");
}

TEST(IrSignature, FloatForAnInteger) {
  Args a = MatmulArgs(16, 32, 64);
  a.v[1] = FloatArg(2.5);
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 1 'n' is a float (2.5), expected an int32 scalar; pass an integer");
}

TEST(IrSignature, IntegerOutOfRange) {
  const PrimFunc f = FuncOf(
      "func f(a: int32, b: uint8, c: bool, d: int8, e: uint64, g: float16, h: int64) {\n"
      "  barrier\n}\n");
  std::vector<ArgView> v = {IntArg(1),  IntArg(2), IntArg(1),        IntArg(-128),
                            IntArg(77), IntArg(3), IntArg(INT64_MIN)};
  EXPECT_EQ(CheckArgs(f, v), "");
  v[6] = IntArg(INT64_MAX);
  v[5] = FloatArg(1e300);  // a float param takes any number; the interpreter rounds it
  EXPECT_EQ(CheckArgs(f, v), "");
  v[0] = IntArg(3000000000);
  EXPECT_EQ(CheckArgs(f, v),
            "f: argument 0 'a' is 3000000000, out of the range of int32 [-2147483648, "
            "2147483647]; pass a value in that range");
  v[0] = IntArg(0);
  v[1] = IntArg(-1);
  EXPECT_EQ(CheckArgs(f, v),
            "f: argument 1 'b' is -1, out of the range of uint8 [0, 255]; pass a value in that "
            "range");
  v[1] = IntArg(255);
  v[2] = IntArg(2);
  EXPECT_EQ(CheckArgs(f, v),
            "f: argument 2 'c' is 2, out of the range of bool [0, 1]; pass 0 or 1");
  v[2] = FloatArg(1);
  EXPECT_EQ(CheckArgs(f, v),
            "f: argument 2 'c' is a float (1), expected a bool scalar; pass 0 or 1");
  v[2] = IntArg(0);
  v[3] = IntArg(-129);
  EXPECT_EQ(CheckArgs(f, v),
            "f: argument 3 'd' is -129, out of the range of int8 [-128, 127]; pass a value in that "
            "range");
  v[3] = IntArg(0);
  v[4] = IntArg(-5);
  EXPECT_EQ(CheckArgs(f, v),
            "f: argument 4 'e' is -5, out of the range of uint64 [0, 18446744073709551615]; pass "
            "a value in that range");
}

TEST(IrSignature, StridesOfAnUndeclaredLayoutMustBeCompact) {
  Args a = MatmulArgs(16, 32, 64);
  const int64_t transposed[] = {1, 16};
  a.v[3].strides = transposed;
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 3 'a' has strides [1, 16], expected compact row-major strides [64, "
            "1]; pass a contiguous tensor (or declare strides on the parameter)");
  const int64_t compact[] = {64, 1};
  a.v[3].strides = compact;
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v), "");
}

TEST(IrSignature, DeclaredStrides) {
  const PrimFunc f = FuncOf(
      "func t(m: int32, n: int32, a: buffer<float32>[m, n] strides [1, m]) {\n"
      "  a[0, 0] = 1.0\n}\n");
  Args a;
  a.Int(3);
  a.Int(5);
  const int64_t col_major[] = {1, 3};
  a.Tensor({3, 5}, Float32(), col_major);
  EXPECT_EQ(CheckArgs(f, a.v), "");
  a.v[2].strides = nullptr;  // compact row-major: [5, 1]
  EXPECT_EQ(CheckArgs(f, a.v),
            "t: argument 2 'a' has compact row-major strides [5, 1], expected [1, m] = [1, 3] (m "
            "= 3 from the scalar arguments); pass a tensor with those strides");
  const int64_t wrong[] = {1, 4};
  a.v[2].strides = wrong;
  EXPECT_EQ(CheckArgs(f, a.v),
            "t: argument 2 'a' has strides [1, 4], expected [1, m] = [1, 3] (m = 3 from the "
            "scalar arguments); pass a tensor with those strides");
}

TEST(IrSignature, StridesOfExtentOneDimensionsAreNotCompared) {
  Args a = MatmulArgs(1, 32, 64);
  const int64_t odd[] = {7, 1};  // [1, 64]: the first stride never moves an index
  a.v[3].strides = odd;
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v), "");
}

TEST(IrSignature, NullDataAndNullShape) {
  Args a = MatmulArgs(16, 32, 64);
  a.v[4].data = nullptr;
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 4 'b' has no data (a null pointer); pass an allocated tensor");
  Args empty = MatmulArgs(0, 32, 64);
  empty.v[3].data = nullptr;  // no elements: no data needed
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), empty.v), "");
  a.v[4].data = a.storage;
  a.v[4].shape = nullptr;
  EXPECT_EQ(CheckArgs(FuncOf(kMatmul), a.v),
            "matmul: argument 4 'b' has 2 dimensions and no shape (a null pointer), expected rank "
            "2; pass a tensor with its shape");
}

TEST(IrSignature, NegativeAndUnevaluableShapes) {
  const PrimFunc f = FuncOf(
      "func f(n: int32, d: int32, a: buffer<float32>[n - 4], b: buffer<float32>[n / d]) "
      "{\n  a[0] = b[0]\n}\n");
  Args a;
  a.Int(2);
  a.Int(0);
  a.Tensor({2});
  a.Tensor({2});
  EXPECT_EQ(CheckArgs(f, a.v),
            "f: argument 2 'a': its shape [n - 4] = [-2] (n = 2 from the scalar arguments) has a "
            "negative extent; pass scalar arguments that give non-negative extents");
  a.v[0].i = 6;
  EXPECT_EQ(CheckArgs(f, a.v),
            "f: argument 3 'b': cannot evaluate its shape [n / d] (f: integer division by zero in "
            "`n / d`); pass scalar arguments that give a valid shape");
  a.v[1].i = 3;
  EXPECT_EQ(CheckArgs(f, a.v), "");
}

TEST(IrSignature, EvalIntExpr) {
  const PrimFunc f = FuncOf(
      "func f(n: int32, b: int8, u: uint8, x: float32, a: buffer<float32>[n]) {\n"
      "  for i in serial(0, n) {\n    a[i] = x\n  }\n}\n");
  const std::vector<ArgView> args = {IntArg(-7), IntArg(100), IntArg(250), FloatArg(1.5)};
  const Var& n = f.params[0].var();
  const Var& b = f.params[1].var();
  const Var& u = f.params[2].var();
  EXPECT_EQ(EvalIntExpr(f, n + 1, args), -6);
  EXPECT_EQ(EvalIntExpr(f, n / 2, args), -3);
  EXPECT_EQ(EvalIntExpr(f, FloorDiv(n, 2), args), -4);
  EXPECT_EQ(EvalIntExpr(f, FloorMod(n, 2), args), 1);
  EXPECT_EQ(EvalIntExpr(f, FloorMod(n, -2), args), -1);
  EXPECT_EQ(EvalIntExpr(f, b + b, args), -56);  // int8 wraps
  EXPECT_EQ(EvalIntExpr(f, u + 10, args), 4);   // uint8 wraps
  EXPECT_EQ(EvalIntExpr(f, Select(n < 0, Max(n, -3), 9), args), -3);
  EXPECT_EQ(EvalIntExpr(f, Cast(Int64(), n) * IntImm(Int64(), 1000000000000), args),
            -7000000000000);
  // By name: an expression parsed elsewhere still finds the parameter.
  EXPECT_EQ(EvalIntExpr(f, Var("n") * 3, args), -21);
  auto error = [&](const Expr& e) {
    try {
      EvalIntExpr(f, e, args);
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::kValue);
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(Var("i") + 1),
            "f: 'i' is not a scalar parameter: an integer expression evaluated from the "
            "arguments may only use scalar parameters");
  EXPECT_EQ(error(n / (n + 7)), "f: integer division by zero in `n / (n + 7)`");
  EXPECT_EQ(error(Cast(Int32(), f.params[3].var())), "f: `x` is float32, not a scalar integer");
  EXPECT_EQ(error(f.params[4].buffer()[0] > 1.0), "f: `a[0]` is float32, not a scalar integer");
  const std::vector<ArgView> short_args = {IntArg(1)};
  try {
    EvalIntExpr(f, b + 1, short_args);
    ADD_FAILURE();
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()),
              "f: no argument for 'b' (argument 1): pass one argument per parameter");
  }
}

}  // namespace

// ArgCheck, the prepared check of a launch path, answers exactly what CheckArgs answers: random
// calls of functions whose shapes and strides it reads itself (numbers, scalar params of
// several widths, declared strides) and of one it leaves to CheckArgs (an expression), each
// call a valid one with a few random changes, fixed seed.
TEST(IrSignature, ArgCheckAnswersWhatCheckArgsAnswers) {
  const char* const kFuncs[] = {
      "func f(n: int32, m: uint16, s: int64, b: bool, x: float32, a: buffer<float32>[n, m], "
      "c: buffer<int8>[4, n] strides [s, 1], d: buffer<uint8>[m]) {\n  a[0, 0] = x\n}\n",
      "func g(n: int8, a: buffer<float64>[n], b: buffer<float64>[(n + 1) / 2]) {\n"
      "  a[0] = b[0]\n}\n",
      kMatmul,
  };
  std::mt19937_64 rng(18);
  int passed = 0, failed = 0;
  for (const char* text : kFuncs) {
    const PrimFunc f = FuncOf(text);
    const ArgCheck check(f);
    for (int round = 0; round < 4000; ++round) {
      // A valid call: scalars small and non-negative, shapes their evaluated extents.
      std::vector<int64_t> scalar(f.params.size(), 0);
      std::vector<ArgView> v(f.params.size());
      for (size_t k = 0; k < f.params.size(); ++k) {
        if (f.params[k].is_buffer()) continue;
        const DType t = f.params[k].var().dtype();
        scalar[k] = t.is_bool() ? static_cast<int64_t>(rng() % 2) : static_cast<int64_t>(rng() % 6);
        v[k] = t.is_float() ? FloatArg(0.5) : IntArg(scalar[k]);
      }
      // Room for the largest rank a change below gives, so a message may list them all.
      std::vector<std::array<int64_t, 4>> shapes(f.params.size()), strides(f.params.size());
      static float storage[4];
      for (size_t k = 0; k < f.params.size(); ++k) {
        if (!f.params[k].is_buffer()) continue;
        const Buffer& b = f.params[k].buffer();
        shapes[k].fill(1);
        strides[k].fill(1);
        for (size_t d = 0; d < b->shape.size(); ++d) shapes[k][d] = EvalIntExpr(f, b->shape[d], v);
        for (size_t d = 0; d < b->strides.size(); ++d) {
          strides[k][d] = EvalIntExpr(f, b->strides[d], v);
        }
        v[k] = BufferArg(storage, b.dtype(), static_cast<int>(b->shape.size()), shapes[k].data(),
                         b->strides.empty() ? nullptr : strides[k].data());
      }
      // A few random changes.
      const int changes = static_cast<int>(rng() % 3);
      for (int c = 0; c < changes; ++c) {
        ArgView& a = v[rng() % v.size()];
        switch (rng() % 9) {
          case 0:
            a = IntArg(static_cast<int64_t>(rng() % 7) - 1 + (rng() % 4 == 0 ? 70000 : 0));
            break;
          case 1:
            a = FloatArg(1.5);
            break;
          case 2:
            if (a.kind == ArgView::Kind::kBuffer && a.ndim > 0) {
              const_cast<int64_t*>(a.shape)[rng() % static_cast<size_t>(a.ndim)] += 1;
            }
            break;
          case 3:
            a.dtype = rng() % 2 == 0 ? Float32() : Int(8);
            break;
          case 4:
            a.data = nullptr;
            break;
          case 5:
            a.ndim = static_cast<int>(rng() % 4);
            break;
          case 6: {
            if (a.kind != ArgView::Kind::kBuffer || a.ndim <= 0) break;
            const size_t k = static_cast<size_t>(&a - v.data());
            for (int64_t& s : strides[k]) s = static_cast<int64_t>(rng() % 5);
            a.strides = strides[k].data();
            break;
          }
          case 7:
            a.strides = nullptr;
            break;
          default:
            v.pop_back();
            if (v.empty()) v.push_back(IntArg(1));
            break;
        }
      }
      const std::string want = CheckArgs(f, v);
      ASSERT_EQ(check(v), want) << f.name << " round " << round;
      (want.empty() ? passed : failed)++;
    }
  }
  // Both answers were exercised.
  EXPECT_GT(passed, 2000);
  EXPECT_GT(failed, 2000);
}
