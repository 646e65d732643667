// SPDX-License-Identifier: Apache-2.0
// The C++ builder: what it builds equals what the parser reads from the same kernel, and
// random expressions print and parse back to themselves.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <random>
#include <string>

namespace bir = backplane::ir;
using namespace backplane::ir;  // NOLINT(google-build-using-namespace): the builder reads best so

namespace {

TEST(IrBuilder, VectorAddEqualsTheParsedText) {
  Var n("n", Int32()), i("i", Int32());
  Buffer a("a", Float32(), {n}), b("b", Float32(), {n}), c("c", Float32(), {n});
  IRModule m;
  m.Add(PrimFunc("vector_add", {n, a, b, c},
                 For(i, 0, n, ForKind::kParallel, Store(c, {i}, a[i] + b[i]))));
  const std::string text =
      "# backplane-ir 1\n\n"
      "func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], "
      "c: buffer<float32>[n]) {\n"
      "  for i in parallel(0, n) {\n"
      "    c[i] = a[i] + b[i]\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(Print(m), text);
  EXPECT_TRUE(StructuralEqual(m, Parse(text)));
  Verify(m);
}

TEST(IrBuilder, TiledGpuKernelWithSharedMemory) {
  Var n("n", Int32()), bx("bx"), tx("tx"), t("t"), x("x", Float32());
  Buffer a("a", Float32(), {n}), out("out", Float32(), {n});
  Buffer tile("tile", Float32(), {16});
  Expr idx = bx * 16 + tx;
  Stmt branch = IfThenElse(And(x > 0.5, Not(Eq(tx, 0))), Store(out, {idx}, x),
                           Store(out, {idx}, Select(x < 1.0, Cast(Float32(), tx), Max(x, 2.0))));
  Stmt inner =
      Seq({Store(tile, {tx}, a[idx]), Barrier(), LetStmt(x, Call("exp", {tile[15 - tx]}), branch)});
  Stmt body = ThreadFor(
      bx, ThreadTag::kBlockIdxX, 0, n / 16,
      ThreadFor(tx, ThreadTag::kThreadIdxX, 0, 16, Allocate(tile, StorageScope::kShared, inner)));
  PrimFunc f("k", {n, a, out}, body, {{"target", "cuda"}});
  IRModule m;
  m.Add(f);
  const std::string expected =
      "func k(n: int32, a: buffer<float32>[n], out: buffer<float32>[n]) attrs(\"target\": "
      "\"cuda\") {\n"
      "  for bx in thread(blockIdx.x, 0, n / 16) {\n"
      "    for tx in thread(threadIdx.x, 0, 16) {\n"
      "      alloc tile: float32[16] shared\n"
      "      tile[tx] = a[bx * 16 + tx]\n"
      "      barrier\n"
      "      let x: float32 = exp(tile[15 - tx])\n"
      "      if (x > 0.5 && !(tx == 0)) {\n"
      "        out[bx * 16 + tx] = x\n"
      "      } else {\n"
      "        out[bx * 16 + tx] = select(x < 1.0, float32(tx), max(x, 2.0))\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(Print(f), expected);
  EXPECT_TRUE(StructuralEqual(m, Parse(Print(m))));
  Verify(m);
}

TEST(IrBuilder, StructuralEqualTellsDifferences) {
  Var i("i"), j("j");
  EXPECT_TRUE(StructuralEqual(i + 1, i + 1));
  EXPECT_FALSE(StructuralEqual(i + 1, i + 2));
  EXPECT_FALSE(StructuralEqual(i + 1, j + 1));                // names differ
  EXPECT_FALSE(StructuralEqual(i + i, Var("i") + Var("i")));  // two different vars
  EXPECT_FALSE(StructuralEqual(i + 1, Cast(Int64(), i) + 1));
  EXPECT_TRUE(StructuralEqual(Seq({Barrier(), Seq({Barrier(), Barrier()})}),
                              Seq({Barrier(), Barrier(), Barrier()})));
}

TEST(IrBuilder, BadBuilderCallsThrowValueErrors) {
  auto kind_of = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kParse;  // did not throw
  };
  EXPECT_EQ(kind_of([] { Var("2x"); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([] { Var("for"); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([] { Call("exp", {}); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([] { Call("nope", {1.0}); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([] { Buffer("a", Float32(), {4, 4}, {1}); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([] { Broadcast(1.0, 0); }), ErrorKind::kValue);
  EXPECT_EQ(kind_of([] {
              IRModule m;
              m.Add(PrimFunc("f", {}, Barrier()));
              m.Add(PrimFunc("f", {}, Barrier()));
            }),
            ErrorKind::kValue);
  try {
    Var("a b");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("variable name 'a b' is not an identifier"),
              std::string::npos);
  }
}

TEST(IrBuilder, DTypeSpellings) {
  for (const char* s : {"int8", "int16", "int32", "int64", "uint8", "uint64", "float16", "float32",
                        "float64", "bool", "float32x4", "int8x16", "boolx8"}) {
    DType t;
    ASSERT_TRUE(ParseDType(s, &t)) << s;
    EXPECT_EQ(ToString(t), s);
  }
  for (const char* s : {"int", "int7", "float8", "int32x", "int32x0", "bool8", "float032", "x"}) {
    DType t;
    EXPECT_FALSE(ParseDType(s, &t)) << s;
  }
}

// ---- random expressions ----

class RandomExpr {
 public:
  explicit RandomExpr(unsigned seed) : rng_(seed) {}

  Expr Int(int depth) {
    switch (Pick(depth > 0 ? 9 : 3)) {
      case 0:
        return IntImm(Int32(), Range(-1000, 1000));
      case 1:
        return vars_[Pick(vars_.size())];
      case 2:
        return buf_[vars_[Pick(vars_.size())]];
      case 3:
        return Binary(kIntOps[Pick(9)], Int(depth - 1), Int(depth - 1));
      case 4:
        return Select(Bool(depth - 1), Int(depth - 1), Int(depth - 1));
      case 5:
        return Cast(Int32(), Float(depth - 1));
      case 6:
        return Cast(Int32(), IntImm(Int64(), Range(-5, 5)));
      case 7:
        return Binary(kIntOps[Pick(9)], Int(depth - 1), IntImm(Int32(), Range(-3, 3)));
      default:
        return Binary(BinaryOp::kSub, Int(depth - 1), Int(depth - 1));
    }
  }
  Expr Float(int depth) {
    switch (Pick(depth > 0 ? 6 : 2)) {
      case 0:
        return FloatImm(Float32(), Range(-100000, 100000) / 64.0);
      case 1:
        return Cast(Float32(), vars_[Pick(vars_.size())]);
      case 2:
        return Binary(kFloatOps[Pick(6)], Float(depth - 1), Float(depth - 1));
      case 3:
        return Call("exp", {Float(depth - 1)});
      case 4:
        return Call("pow", {Float(depth - 1), Float(depth - 1)});
      default:
        return Cast(Float32(), FloatImm(Float64(), Range(-9, 9) * 1e-7));
    }
  }
  Expr Bool(int depth) {
    switch (Pick(depth > 0 ? 5 : 1)) {
      case 0:
        return BoolImm(Pick(2) == 1);
      case 1:
        return Binary(kCmpOps[Pick(6)], Int(depth - 1), Int(depth - 1));
      case 2:
        return And(Bool(depth - 1), Bool(depth - 1));
      case 3:
        return Or(Bool(depth - 1), Bool(depth - 1));
      default:
        return Not(Bool(depth - 1));
    }
  }

  std::vector<Var> vars_ = {Var("x"), Var("y"), Var("z")};
  Buffer buf_{"buf", Int32(), {64}};

 private:
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  int Range(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  static constexpr BinaryOp kIntOps[9] = {BinaryOp::kAdd, BinaryOp::kSub,      BinaryOp::kMul,
                                          BinaryOp::kDiv, BinaryOp::kFloorDiv, BinaryOp::kFloorMod,
                                          BinaryOp::kMin, BinaryOp::kMax,      BinaryOp::kMod};
  static constexpr BinaryOp kFloatOps[6] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul,
                                            BinaryOp::kDiv, BinaryOp::kMin, BinaryOp::kMax};
  static constexpr BinaryOp kCmpOps[6] = {BinaryOp::kEq, BinaryOp::kNe, BinaryOp::kLt,
                                          BinaryOp::kLe, BinaryOp::kGt, BinaryOp::kGe};
  std::mt19937 rng_;
};

TEST(IrBuilder, RandomExpressionsRoundTrip) {
  for (unsigned seed = 1; seed <= 300; ++seed) {
    RandomExpr gen(seed);
    Var out_i("i");
    Buffer out("out", Int32(), {64});
    Stmt body = Seq({Store(out, {0}, gen.Int(5)), IfThenElse(gen.Bool(4), Store(out, {1}, 0)),
                     Store(out, {2}, Cast(Int32(), gen.Float(4)))});
    IRModule m;
    m.Add(PrimFunc("f", {gen.vars_[0], gen.vars_[1], gen.vars_[2], gen.buf_, out}, body));
    const std::string text = Print(m);
    IRModule back = Parse(text);
    ASSERT_TRUE(StructuralEqual(m, back)) << "seed " << seed << "\n" << text;
    ASSERT_EQ(Print(back), text) << "seed " << seed;
    ASSERT_EQ(VerifyErrors(m), std::vector<std::string>{}) << text;
  }
}

}  // namespace
