// SPDX-License-Identifier: Apache-2.0
// Int32OverflowRisks (analysis.hpp, docs/ir.md "Int32 overflow check"): the forms that wrap
// for sizes near 2^31 are reported with the size past which they wrap, and their rewrites
// (tile counts as n / d + min(floormod(n, d), 1), edge tests as base <= n - d) are not.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <string>
#include <vector>

namespace ir = backplane::ir;

namespace {

std::vector<std::string> Risks(const std::string& text) {
  return ir::Int32OverflowRisks(ir::Parse(text, "test.bpir"));
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

// vector_add as the catalog had it: the tile count and the edge test wrap near 2^31.
const char* kOldVectorAdd = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for o in parallel(0, (n + 1023) / 1024) {
    let base: int32 = o * 1024
    if (base + 1024 <= n) {
      for i in vectorized(0, 1024) {
        c[base + i] = a[base + i] + b[base + i]
      }
    } else {
      for t in serial(base, n - base) {
        c[t] = a[t] + b[t]
      }
    }
  }
}
)";

const char* kNewVectorAdd = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for o in parallel(0, n / 1024 + min(floormod(n, 1024), 1)) {
    let base: int32 = o * 1024
    if (base <= n - 1024) {
      for i in vectorized(0, 1024) {
        c[base + i] = a[base + i] + b[base + i]
      }
    } else {
      for t in serial(base, n - base) {
        c[t] = a[t] + b[t]
      }
    }
  }
}
)";

TEST(Int32Overflow, TheOldTileCountIsReportedWithTheSizeWhereItWraps) {
  const std::vector<std::string> r = Risks(kOldVectorAdd);
  ASSERT_EQ(r.size(), 1u) << Join(r);
  EXPECT_EQ(r[0].rfind("int32 expression `n + 1023` in function 'vector_add' can overflow for "
                       "n > 2147482624: its exact value can reach 2147484670, past int32's "
                       "2147483647 (n in [0, 2147483647])",
                       0),
            0u)
      << r[0];
  EXPECT_NE(r[0].find("n / 1024 + min(floormod(n, 1024), 1)"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("docs/ir.md"), std::string::npos) << r[0];
}

TEST(Int32Overflow, TheOldEdgeTestIsReportedOnceTheCountIsRight) {
  // With the old count the last tile never starts past 2^31 - 2048 (the count wraps first);
  // with the right count, base + 1024 wraps for the last tile of n > 2^31 - 1024.
  std::string text = kNewVectorAdd;
  text.replace(text.find("base <= n - 1024"), 16, "base + 1024 <= n");
  const std::vector<std::string> r = Risks(text);
  ASSERT_EQ(r.size(), 1u) << Join(r);
  EXPECT_EQ(r[0].rfind("int32 expression `base + 1024` in function 'vector_add' can overflow for "
                       "n > 2147482624: its exact value can reach 2147483648",
                       0),
            0u)
      << r[0];
}

TEST(Int32Overflow, TheRewrittenFormsAreClean) { EXPECT_EQ(Join(Risks(kNewVectorAdd)), ""); }

TEST(Int32Overflow, ProductsOfDimsOutsideAnIndexAreReported) {
  // m * n as a loop extent wraps; inside an index the same product is exact (int64).
  const std::vector<std::string> r = Risks(R"(# backplane-ir 1
func flat(m: int32, n: int32, a: buffer<float32>[m, n], b: buffer<float32>[m, n]) {
  for i in parallel(0, m * n) {
    b[floordiv(i, n), floormod(i, n)] = a[floordiv(i, n), floormod(i, n)]
  }
  for r in serial(0, m) {
    for c in serial(0, n) {
      b[r, c] = a[r * n / n, c]
    }
  }
}
)");
  ASSERT_EQ(r.size(), 2u) << Join(r);
  EXPECT_EQ(r[0].rfind("int32 expression `m * n` in function 'flat' can overflow", 0), 0u) << r[0];
  // r * n under a division is no index arithmetic: it is computed in int32.
  EXPECT_EQ(r[1].rfind("int32 expression `r * n` in function 'flat' can overflow", 0), 0u) << r[1];
}

TEST(Int32Overflow, IndexArithmeticLetsAndConditionsAreUnderstood) {
  // The index a[i * 65536 + j] is exact; the let k wraps; under `if (n < 1000)` n * n does not.
  const std::vector<std::string> r = Risks(R"(# backplane-ir 1
func f(n: int32, a: buffer<float32>[n, 65536], out: buffer<int32>[1]) {
  for i in serial(0, n) {
    for j in serial(0, 65536) {
      a[i * 65536 + j - i * 65536, j] = 1.0
    }
  }
  let k: int32 = n * 2
  out[0] = k
  if (n < 1000) {
    out[0] = n * n
  }
}
)");
  ASSERT_EQ(r.size(), 1u) << Join(r);
  EXPECT_EQ(
      r[0].rfind("int32 expression `n * 2` in function 'f' can overflow for n > 1073741823", 0), 0u)
      << r[0];
}

// A contiguous last index, ramp(base, 1, lanes), is index arithmetic like a scalar one: its base
// and lanes are exact (docs/ir.md, "Index arithmetic"). A ramp of another stride, or one that is
// not the last index, is a vector of int32 lanes, still checked.
TEST(Int32Overflow, AContiguousRampIndexIsIndexArithmetic) {
  const std::vector<std::string> r = Risks(R"(# backplane-ir 2
func f(n: int32, m: int32, a: buffer<float32>[n], b: buffer<float32>[4, n]) {
  for i in serial(0, n / 8) {
    a[ramp(i * 8 + m, 1, 4)] = a[ramp(i * 8 + m + 4, 1, 4)]
    a[ramp(i * 8, 1000, 4)] = broadcast(1.0, 4)
    b[ramp(0, 1, 4), i] = broadcast(2.0, 4)
  }
}
)");
  ASSERT_EQ(r.size(), 1u) << Join(r);
  EXPECT_EQ(r[0].rfind("lanes of `ramp(i * 8, 1000, 4)`", 0), 0u) << r[0];
}

TEST(Int32Overflow, ALoopVariableThatWrapsIsReported) {
  const std::vector<std::string> r = Risks(R"(# backplane-ir 1
func f(n: int32, a: buffer<float32>[n]) {
  for i in serial(16, n) {
    a[i - 16] = 0.0
  }
}
)");
  ASSERT_EQ(r.size(), 1u) << Join(r);
  EXPECT_EQ(r[0].rfind("loop variable `i` of `for i in serial(16, n)` in function 'f' can "
                       "overflow for n > 2147483632",
                       0),
            0u)
      << r[0];
}

TEST(Int32Overflow, AGpuTileLoopOverASymbolicBlockSizeIsClean) {
  // i * threads for i below the tile count of threads in cols stays within cols.
  EXPECT_EQ(Join(Risks(R"(# backplane-ir 1
func f(cols: int32, threads: int32, x: buffer<float32>[cols]) {
  for tx in thread(threadIdx.x, 0, threads) {
    let passes: int32 = cols / threads + min(floormod(cols, threads), 1)
    for i in serial(0, passes) {
      if (tx < cols - i * threads) {
        x[i * threads + tx] = 0.0
      }
    }
  }
}
)")),
            "");
}

TEST(Int32Overflow, Int64ArithmeticAndCastsAreNotReported) {
  EXPECT_EQ(Join(Risks(R"(# backplane-ir 1
func f(n: int32, pad: int32, a: buffer<float32>[n]) {
  for i in serial(0, n) {
    let ih: int64 = int64(i) + 7i64 - int64(pad)
    if (ih >= 0i64 && ih < int64(n)) {
      a[i] = 1.0
    }
  }
}
)")),
            "");
}

TEST(Int32Overflow, LargeFunctionsAreCheckedInBoundedTime) {
  // 30,000 terms, each sum a risk: 100 messages and a count of the rest.
  std::string chain = "n";
  for (int i = 1; i < 30000; ++i) chain += " + n";
  const std::vector<std::string> r = Risks(
      "# backplane-ir 1\nfunc g(n: int32, a: buffer<int32>[1]) {\n  a[0] = " + chain + "\n}\n");
  ASSERT_EQ(r.size(), 101u);
  EXPECT_EQ(r.back(), "... and 29899 more in function 'g'");
  // Selects nested in conditions: each level evaluates the one below three times; the check
  // stops after its step budget and says so.
  std::string e = "n";
  for (int i = 0; i < 40; ++i) {
    e = "select(" + e + " < " + std::to_string(i) + ", n + " + std::to_string(i) + ", n - " +
        std::to_string(i) + ")";
  }
  const std::vector<std::string> s =
      Risks("# backplane-ir 1\nfunc f(n: int32, a: buffer<int32>[1]) {\n  a[0] = " + e + "\n}\n");
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.back().rfind("the int32 overflow check of function 'f' stopped early", 0), 0u)
      << s.back();
}

TEST(Int32Overflow, AConditionDoesNotNarrowAnAssignableVariable) {
  // i < 10 holds where the branch starts, not after i = n.
  const std::vector<std::string> r = Risks(R"(# backplane-ir 2
func f(n: int32, out: buffer<int32>[1]) {
  var i: int32 = 0
  if (i < 10) {
    i = n
    out[0] = i + 1
  }
}
)");
  ASSERT_EQ(r.size(), 1u) << Join(r);
  EXPECT_EQ(r[0].rfind("int32 expression `i + 1` in function 'f' can overflow", 0), 0u) << r[0];
}

}  // namespace

// The findings as nodes, for code generators whose language leaves a signed overflow undefined
// (docs/codegen-guide.md, "Integer arithmetic"): the expressions that may wrap, int64 ones too,
// and none that cannot (a thread index times 2 plus 1) nor the arithmetic of an index.
namespace {

// The Print of each node of `func` that SignedOverflowRiskNodes names, in the order of the text.
std::vector<std::string> RiskTexts(const ir::PrimFunc& f, bool* complete) {
  const ir::SignedOverflowNodes found = ir::SignedOverflowRiskNodes(f);
  *complete = found.complete;
  std::vector<std::string> out;
  std::vector<ir::Expr> todo;
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    if (const auto* st = s.As<ir::StoreNode>()) todo.push_back(st->value);
  });
  for (const ir::Expr& root : todo) {
    ir::AnyExpr(root, [&](const ir::Expr& e) {
      if (found.nodes.count(e.get()) != 0) out.push_back(ir::Print(e));
      return false;
    });
  }
  return out;
}

}  // namespace

TEST(SignedOverflowNodes, NameWhatMayWrapInt64IncludedAndNothingElse) {
  const ir::IRModule m = ir::Parse(R"(
func f(n: int32, w: int64, a: buffer<int32>[64], b: buffer<int64>[64], o: buffer<int32>[64]) {
  for tx in thread(threadIdx.x, 0, 64) {
    o[tx] = a[tx] + 1
    o[tx * 2 / 2] = tx * 2 + 1
    b[tx] = w * 3
    b[tx + 0] = int64(tx) + 5i64
    o[tx + 0] = a[tx * n + n - n * tx]
  }
}
)");
  bool complete = false;
  EXPECT_EQ(RiskTexts(m.functions()[0], &complete),
            (std::vector<std::string>{"a[tx] + 1", "w * 3i64"}));
  EXPECT_TRUE(complete);
}

TEST(SignedOverflowNodes, PastTheBudgetEveryArithmeticNodeIsNamed) {
  std::string e = "n";
  for (int i = 0; i < 40; ++i) {
    e = "select(" + e + " < " + std::to_string(i) + ", n + " + std::to_string(i) + ", n - " +
        std::to_string(i) + ")";
  }
  const ir::IRModule m =
      ir::Parse("func f(n: int32, a: buffer<int32>[1]) {\n  a[0] = " + e + " + 0\n}\n");
  bool complete = true;
  const std::vector<std::string> named = RiskTexts(m.functions()[0], &complete);
  EXPECT_FALSE(complete);
  // The 40 sums, 40 differences (`n - 0` included) and the outer + 0.
  EXPECT_EQ(named.size(), 81u);
}

// Bounds past every type's range saturate: the product of two uint64 maxima, and products of
// products, were past the analysis's 128 bits (undefined behaviour that UBSan reported when the
// OpenCL code generator ran the analysis on the uint64 construct clauses). Under the asan preset
// this runs with UBSan.
TEST(SignedOverflowNodes, ProductsOfTheLargestValuesAreBounded) {
  const ir::IRModule m = ir::Parse(R"(
func f(u: uint64, v: uint64, w: int64, a: buffer<uint64>[4], b: buffer<int64>[4]) {
  for i in serial(0, 4) {
    a[i] = u * v * u * v + u * v
    b[i] = w * w * w * w - w * w * w
  }
}
)");
  bool complete = false;
  const std::vector<std::string> named = RiskTexts(m.functions()[0], &complete);
  EXPECT_TRUE(complete);
  // The int64 products and the difference may wrap; uint64 arithmetic is never a signed risk.
  EXPECT_EQ(named.size(), 6u);
  EXPECT_EQ(Join(ir::Int32OverflowRisks(m.functions()[0])), "");
}
