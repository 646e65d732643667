// SPDX-License-Identifier: Apache-2.0
// Long inputs take time and give text linear in their size (a 2.9 KB run of unary
// operators once took 32 s in the IR fuzzer, the verifier printing the whole expression again for
// the problem at each operator). Every stage the fuzzer runs (parse, print, parse back, verify,
// split, the interpreter) runs on chains as long as the tree-depth limit allows; with the
// quadratic code each would take many minutes, and ctest's timeout fails the test. No timing is
// compared: what is checked is that it finishes, with the right result, and that the printed
// text and the messages stay small.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "ir_test_util.hpp"

namespace bir = backplane::ir;
using irtest::ErrorOf;
using irtest::Tensor;

namespace {

// Terms (or operators) in a chain: as many as the tree-depth limit allows, with room for the
// store and the leaves.
const int kTerms = static_cast<int>(bir::kMaxTreeDepth) - 10;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

// Parses `text`, prints it, and checks the print reads back to the same tree and text, and is
// not much longer than `text`.
bir::IRModule RoundTrip(const std::string& text) {
  bir::IRModule m = bir::Parse(text, "chain.bpir");
  const std::string printed = bir::Print(m);
  EXPECT_LT(printed.size(), 10 * text.size());
  const bir::IRModule back = bir::Parse(printed, "printed.bpir");
  EXPECT_EQ(bir::Print(back), printed);
  EXPECT_TRUE(bir::StructuralEqual(back, m));
  return m;
}

// The fuzzer's timeout: `-!-!...1` stored to an int32 buffer, a problem (! on an int32) at every
// '!'. The report lists the first 100 problems, each quoting at most a couple of
// hundred characters of the statement and of the expression, and counts the rest.
TEST(IrLinear, AUnaryRunWithAProblemAtEveryNot) {
  std::string ops;
  for (int k = 0; k < kTerms; ++k) ops += k % 2 ? '!' : '-';
  const std::string text = "func f(a: buffer<int32>[1]) {\n  a[0] = " + ops + "1\n}\n";
  const bir::IRModule m = RoundTrip(text);
  // Printed as written: no parenthesis per operator.
  EXPECT_NE(bir::Print(m).find("a[0] = " + ops.substr(0, 1000)), std::string::npos);
  const std::vector<std::string> errors = bir::VerifyErrors(m);
  ASSERT_EQ(errors.size(), 101u);
  for (size_t k = 0; k + 1 < errors.size(); ++k) {
    EXPECT_LT(errors[k].size(), 800u) << errors[k].substr(0, 800);
    EXPECT_EQ(errors[k].rfind("in function 'f': operator ! takes a bool operand, got int32 in ", 0),
              0u)
        << errors[k].substr(0, 800);
    EXPECT_NE(errors[k].find(" ... "), std::string::npos) << errors[k].substr(0, 800);
  }
  EXPECT_EQ(errors.back(), "... and " + std::to_string(kTerms / 2 - 100) +
                               " more problems (only the first 100 are listed)");
  const std::string msg = ErrorOf([&] { bir::Verify(m); }, bir::ErrorKind::kVerify);
  EXPECT_LT(msg.size(), size_t{100} << 10);
}

// Runs of unary operators that verify: parsed, printed, verified, split and run, exactly.
TEST(IrLinear, UnaryRunsVerifySplitAndRun) {
  const int n = kTerms / 2 * 2;  // even: the run gives its operand back
  const std::string text =
      "func f(x: int32, b: bool, a: buffer<int32>[2]) {\n  a[0] = " + Repeat("- ", n) +
      "x\n  a[1] = select(" + Repeat("!", n) + "b, 7, 9)\n}\n";
  const bir::IRModule m = RoundTrip(text);
  bir::Verify(m);
  EXPECT_EQ(bir::SplitHostDevice(m, /*device_is_cpu=*/true).host.functions().size(), 1u);
  Tensor<int32_t> a({2});
  bir::Interpreter(m).Run("f", {bir::IntArg(-12345), bir::IntArg(0), a.View()});
  EXPECT_EQ(a[0], -12345);
  EXPECT_EQ(a[1], 9);
}

struct Chain {
  const char* name;
  std::string value;  // of out[0], over x (1) and a (a[0] = 0)
  int32_t want;
};

// gtest names the parameter in listings (ctest -N) by this, not by its bytes.
void PrintTo(const Chain& c, std::ostream* os) { *os << c.name; }

class IrLinearChain : public ::testing::TestWithParam<Chain> {};

// Binary chains as long as the depth limit allows, left-associative and nested to the right,
// divisions (the interpreter printed each for its division-by-zero message), nested loads (it
// printed each for its out-of-bounds message), and unary and binary operators mixed:
// -x * -(x - -select(!!(x < 2), <the rest>, 0)) is 1 + the rest.
TEST_P(IrLinearChain, ParsesPrintsVerifiesSplitsAndRuns) {
  const Chain& c = GetParam();
  const std::string text =
      "func f(x: int32, a: buffer<int32>[1], out: buffer<int32>[1]) {\n  out[0] = " + c.value +
      "\n}\n";
  const bir::IRModule m = RoundTrip(text);
  EXPECT_GE(bir::TreeDepth(m), kTerms * 4 / 5);
  bir::Verify(m);
  EXPECT_EQ(bir::SplitHostDevice(m, /*device_is_cpu=*/true).host.functions().size(), 1u);
  Tensor<int32_t> a({1}, 0);
  Tensor<int32_t> out({1}, -1);
  bir::Interpreter(m).Run("f", {bir::IntArg(1), a.View(), out.View()});
  EXPECT_EQ(out[0], c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, IrLinearChain,
    ::testing::Values(
        Chain{"Sum", "x" + Repeat(" + x", kTerms - 1), kTerms},
        Chain{"NestedToTheRight", Repeat("x - (", kTerms - 1) + "x" + Repeat(")", kTerms - 1),
              kTerms % 2},
        Chain{"Divisions", "x" + Repeat(" / x", kTerms - 1), 1},
        Chain{"NestedLoads", Repeat("a[", kTerms - 1) + "0" + Repeat("]", kTerms - 1), 0},
        Chain{"Mixed",
              Repeat("-x * -(x - -select(!!(x < 2), ", kTerms / 6) + "x" +
                  Repeat(", 0))", kTerms / 6),
              kTerms / 6 + 1}),
    [](const ::testing::TestParamInfo<Chain>& param_info) {
      return std::string(param_info.param.name);
    });

// A parse error quotes at most a couple of hundred characters of a name, a number or the
// source, however long they are (and suggests no name for a megabyte-long one without
// measuring its distance to every other, which took time quadratic in the length).
TEST(IrLinear, ParseErrorsQuoteABoundedPartOfTheText) {
  const std::string big(size_t{1} << 20, 'n');
  const std::vector<std::string> bad = {
      // undefined variable, with a long name in scope
      "func f(" + big + "a: int32, a: buffer<int32>[1]) {\n  a[0] = " + big + "b\n}\n",
      // a number's suffix
      "func f(a: buffer<int32>[1]) {\n  a[0] = 1" + big + "\n}\n",
      // a literal too large for int32, written with a million leading zeros
      "func f(a: buffer<int64>[1]) {\n  a[0] = int64(" + std::string(size_t{1} << 20, '0') +
          "3000000000)\n}\n",
      // a long name in the context of what was expected
      "func f(" + big + " int32)\n",
      "# backplane-ir " + big + "\n",
  };
  for (const std::string& text : bad) {
    const std::string msg = ErrorOf([&] { bir::Parse(text, "long.bpir"); }, bir::ErrorKind::kParse);
    EXPECT_LT(msg.size(), 2000u) << msg.substr(0, 2000);
    EXPECT_NE(msg.find(" ... "), std::string::npos) << msg.substr(0, 2000);
  }
}

}  // namespace
