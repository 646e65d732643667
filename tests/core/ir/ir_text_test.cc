// SPDX-License-Identifier: Apache-2.0
// The text form: every kernel file round-trips exactly, and every parse error says where
// (line:column, the line, a caret) and what was expected.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace bir = backplane::ir;

namespace {

std::string ReadKernel(const std::string& name) {
  std::ifstream in(std::string(BACKPLANE_IR_KERNEL_DIR) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file without its comment lines (the header line stays): what the printer writes.
std::string WithoutComments(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(' ');
    bool comment = first != std::string::npos &&
                   (line.compare(first, 2, "//") == 0 ||
                    (line[first] == '#' && line.rfind("# backplane-ir", 0) != 0));
    if (!comment) out += line + "\n";
  }
  return out;
}

class KernelRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(KernelRoundTrip, PrintsBackExactly) {
  const std::string text = ReadKernel(GetParam());
  bir::IRModule m = bir::Parse(text, GetParam());
  const std::string printed = bir::Print(m);
  EXPECT_EQ(printed, WithoutComments(text));
  bir::IRModule again = bir::Parse(printed);
  EXPECT_TRUE(bir::StructuralEqual(m, again));
  EXPECT_EQ(bir::Print(again), printed);
  EXPECT_EQ(bir::VerifyErrors(m), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelRoundTrip,
                         ::testing::Values("vector_add.bpir", "saxpy.bpir", "reduction.bpir",
                                           "softmax.bpir", "matmul.bpir", "transpose.bpir",
                                           "conv2d.bpir"));

TEST(IrText, LetAndAllocInTheMiddleOfABlockGetBraces) {
  // A let whose scope ends before its block does gets its own braces, and reads back.
  const std::string text =
      "# backplane-ir 1\n\nfunc f(a: buffer<float32>[4]) {\n  {\n    let x: float32 = a[0]\n"
      "    a[1] = x\n  }\n  a[2] = 1.0\n  {\n    alloc t: int8[2] local\n  }\n  barrier\n}\n";
  EXPECT_EQ(bir::Print(bir::Parse(text)), text);
}

TEST(IrText, LiteralsRoundTrip) {
  const std::string text =
      "# backplane-ir 1\n\nfunc f(a: buffer<float64>[4], b: buffer<int8>[2]) {\n"
      "  a[0] = 0.1f64 + 1e+300f64 - -2.5f64 * -inff64\n"
      "  b[0] = -128i8 + 127i8\n"
      "  b[1] = int8(-9223372036854775808i64 + 9223372036854775807i64)\n"
      "  a[1] = float64(18446744073709551615u64) + float64(1.5f16) + float64(nan)\n"
      "  a[2] = float64(true && !false || (1 != 2) == 3 < 4)\n"
      "  a[3] = float64(1 - (2 - 3) - 4 / (5 * 6) * floormod(7, -8))\n"
      "  call_packed(\"quote\\\"back\\\\slash\\nnl\\ttab\\x01\", a)\n"
      "}\n";
  bir::IRModule m = bir::Parse(text);
  EXPECT_EQ(bir::Print(m), text);
  EXPECT_TRUE(bir::StructuralEqual(m, bir::Parse(bir::Print(m))));
}

// A unary minus reads as 0 - x and prints back as -x (not 0 - x, which put each `-!` of a run
// inside one more parenthesis than it was written with); a run of unary operators
// prints as written, and a literal after the minus keeps its parentheses (-(1) is 0 - 1, -1 the
// literal) unless it prints with its own minus (--1 is 0 - -1).
TEST(IrText, UnaryOperatorsPrintAsWritten) {
  const std::string printed =
      "# backplane-ir 1\n\nfunc f(x: int32, y: int64, b: bool, a: buffer<int32>[4], "
      "c: buffer<float32>[4], d: buffer<int64>[1], e: buffer<bool>[1]) {\n"
      "  a[0] = -x + -(1) * --x - -1\n"
      "  a[1] = -(x + 1) * 2\n"
      "  a[2] = --1\n"
      "  a[3] = -x\n"
      "  c[0] = -(1.5) - -(2.5)\n"
      "  c[ramp(0, 1, 4)] = -broadcast(c[0], 4)\n"
      "  d[0] = -y\n"
      "  e[0] = !!b && !(x < 1)\n"
      "}\n";
  std::string written = printed;
  written.replace(written.find("a[2] = --1"), 10, "a[2] = -(-1)");
  written.replace(written.find("a[3] = -x"), 9, "a[3] = 0 - x");
  written.replace(written.find("d[0] = -y"), 9, "d[0] = 0i64 - y");
  const bir::IRModule m = bir::Parse(written);
  EXPECT_EQ(bir::Print(m), printed);
  EXPECT_EQ(bir::Print(bir::Parse(printed)), printed);
  EXPECT_TRUE(bir::StructuralEqual(bir::Parse(printed), m));
  bir::Verify(m);
  int32_t a[4] = {0, 0, 0, 0};
  float c[4] = {0, 0, 0, 0};
  int64_t d[1] = {0};
  bool e[1] = {false};
  const int64_t four[1] = {4}, one[1] = {1};
  bir::Interpreter(m).Run(
      "f", {bir::IntArg(5), bir::IntArg(7), bir::IntArg(1),
            bir::BufferArg(a, bir::Int32(), 1, four), bir::BufferArg(c, bir::Float32(), 1, four),
            bir::BufferArg(d, bir::Int64(), 1, one), bir::BufferArg(e, bir::Bool(), 1, one)});
  EXPECT_EQ(a[0], -9);
  EXPECT_EQ(a[1], -12);
  EXPECT_EQ(a[2], 1);
  EXPECT_EQ(a[3], -5);
  for (float v : c) EXPECT_EQ(v, -1.0f);
  EXPECT_EQ(d[0], -7);
  EXPECT_TRUE(e[0]);
  // Built with the builder: -x is a negation (text version 2), and 0 - x prints as it is.
  const bir::Var x("x", bir::Int32());
  const bir::Var f("f", bir::Float32());
  EXPECT_EQ(bir::Print(-x), "-x");
  EXPECT_EQ(bir::Print(0 - x), "0 - x");
  EXPECT_EQ(bir::Print(bir::Not(bir::Not(x < 1))), "!!(x < 1)");
  EXPECT_EQ(bir::Print(bir::Not(-x < 1)), "!(-x < 1)");
  EXPECT_EQ(bir::Print(bir::FloatImm(bir::Float32(), -0.0) - f), "-0.0 - f");
  EXPECT_EQ(bir::Print(-bir::FloatImm(bir::Float32(), 1.0)), "-(1.0)");
  EXPECT_EQ(bir::Print(-bir::FloatImm(bir::Float32(), -1.0)), "--1.0");
  const bir::Expr big = bir::IntImm(bir::UInt(64), -1);  // 18446744073709551615u64: no minus
  EXPECT_EQ(bir::Print(-big), "-(18446744073709551615u64)");
  const std::string u64 =
      "# backplane-ir 1\n\nfunc g(u: buffer<uint64>[1], f: buffer<float32>[1]) {\n"
      "  u[0] = -(18446744073709551615u64)\n  f[0] = --inf - -(inf)\n}\n";
  EXPECT_EQ(bir::Print(bir::Parse(u64)), u64);
}

// ---- parse errors ----

struct BadText {
  const char* name;
  const char* text;
  const char* message;  // the first line of what(), exactly
  const char* spot;     // the text under the caret
};

class ParseError : public ::testing::TestWithParam<BadText> {};

TEST_P(ParseError, SaysWhereAndWhatWasExpected) {
  const BadText& bad = GetParam();
  try {
    bir::Parse(bad.text);
    FAIL() << "parsed: " << bad.text;
  } catch (const bir::Error& e) {
    EXPECT_EQ(e.kind(), bir::ErrorKind::kParse);
    std::string what = e.what();
    size_t nl = what.find('\n');
    EXPECT_EQ(what.substr(0, nl), bad.message);
    // Then the source line at line:col, and a caret under the column.
    int line = 0, col = 0;
    ASSERT_EQ(std::sscanf(what.c_str(), "%d:%d:", &line, &col), 2) << what;
    std::istringstream in(bad.text);
    std::string source_line;
    for (int k = 0; k < line; ++k) std::getline(in, source_line);
    EXPECT_EQ(what.substr(nl + 1),
              "  " + source_line + "\n  " + std::string(static_cast<size_t>(col - 1), ' ') + "^");
    EXPECT_EQ(std::string(bad.spot),
              source_line.substr(static_cast<size_t>(col - 1), std::string(bad.spot).size()));
  }
}

const BadText kBadTexts[] = {
    {"CallPackedParen", "func f(a: buffer<float32>[1]) {\n  call_packed(\"x\", a {\n}\n",
     "2:22: expected ')' after the arguments of call_packed, got '{'", "{"},
    {"UndefinedVariable", "func f(a: buffer<float32>[1]) {\n  a[0] = k\n}\n",
     "2:10: undefined variable 'k': expected a parameter, a loop variable, a let or an alloc in "
     "scope",
     "k"},
    {"NotFunc", "fun f() {}", "1:1: expected 'func' to start a function, got 'fun'", "fun"},
    {"BadDType", "func f(n: int33) {\n}",
     "1:11: expected a dtype (int32, float32, float32x4, "
     "bool...) or 'buffer<dtype>[shape]' for the parameter 'n', got 'int33'",
     "int33"},
    {"MissingBrace", "func f() {\n  barrier\n",
     "3:1: expected '}' to close the block, got the "
     "end of the input",
     ""},
    {"LoopKind", "func f() {\n  for i in fast(0, 4) {\n  }\n}",
     "2:12: expected the loop kind (serial, parallel, vectorized, unrolled or thread), got 'fast'",
     "fast"},
    {"ThreadAxis", "func f() {\n  for i in thread(warp.x, 0, 4) {\n  }\n}",
     "2:19: expected a thread axis (blockIdx.x/y/z or threadIdx.x/y/z), got 'warp'", "warp"},
    {"Redefined", "func f(n: int32) {\n  for n in serial(0, 4) {\n  }\n}",
     "2:7: 'n' is already defined (line 1); expected a new name (names are not shadowed)", "n"},
    {"UnknownFunction", "func f(a: buffer<float32>[1]) {\n  a[0] = expo(1.0)\n}",
     "2:10: unknown function 'expo': expected a dtype cast (float32(x)), select, ramp, "
     "broadcast, call_packed, floordiv, floormod, min, max or an intrinsic (exp, log, sqrt, ...) "
     "(did you mean 'exp' or 'exp2'?)",
     "expo"},
    {"Arity", "func f(a: buffer<float32>[1]) {\n  a[0] = pow(1.0)\n}",
     "2:10: pow takes 2 arguments, got 1: write pow(x, y)", "pow"},
    {"ArityOfSelect", "func f(a: buffer<float32>[1]) {\n  a[0] = select(true, 1.0)\n}",
     "2:10: select takes 3 arguments, got 2: write select(condition, value_if_true, "
     "value_if_false)",
     "select"},
    {"UndefinedVariableWithATypo",
     "func f(alpha: float32, a: buffer<float32>[1]) {\n  a[0] = alpah\n}\n",
     "2:10: undefined variable 'alpah': expected a parameter, a loop variable, a let or an alloc "
     "in scope (did you mean 'alpha'?)",
     "alpah"},
    {"CastWithATypo", "func f(a: buffer<float32>[1]) {\n  a[0] = flaot32(1)\n}",
     "2:10: unknown function 'flaot32': expected a dtype cast (float32(x)), select, ramp, "
     "broadcast, call_packed, floordiv, floormod, min, max or an intrinsic (exp, log, sqrt, ...) "
     "(did you mean 'float32'?)",
     "flaot32"},
    {"TwoStatementsOnALine", "func f(a: buffer<float32>[1]) {\n  a[0] = 1.0 a[0] = 2.0\n}",
     "2:14: expected the end of the statement (a new line or '}'), got 'a'", "a[0]"},
    {"StoreTarget", "func f(n: int32) {\n  n + 1 = 1\n}",
     "2:3: expected a variable or a buffer element (name[indices]) on the left of '='", "n"},
    {"BufferAsValue", "func f(a: buffer<float32>[1]) {\n  a[0] = a\n}",
     "2:10: buffer 'a' used as a value: expected an element (a[i]); a whole buffer is only an "
     "argument of call_packed",
     "a"},
    {"IntRange", "func f(a: buffer<int8>[1]) {\n  a[0] = 128i8\n}",
     "2:10: integer literal 128i8 does not fit in int8: expected a value in its range (or "
     "another suffix)",
     "128i8"},
    {"NumberSuffix", "func f(a: buffer<float32>[1]) {\n  a[0] = 1.5i32\n}",
     "2:13: bad number suffix 'i32': expected f16, f32 or f64, or none", "i32"},
    {"BadCharacter", "func f() {\n  $\n}",
     "2:3: unexpected character '$': expected a name, a "
     "number, a string or an operator",
     "$"},
    {"UnterminatedString", "func f() {\n  call_packed(\"abc)\n}",
     "2:15: unterminated string: expected a closing '\"' on the same line", "\"abc"},
    {"Version", "# backplane-ir 4\nfunc f() {\n}",
     "1:16: unsupported backplane-ir version '4': this library reads versions 1 to 3; print the "
     "module again with a matching library",
     "4"},
    {"StorageScope", "func f() {\n  alloc t: float32[4] texture\n}",
     "2:23: expected the storage scope (global, shared or local) of 't', got 'texture'", "texture"},
    {"Strides", "func f(a: buffer<float32>[4, 4] strides [1]) {\n}",
     "1:33: expected 2 strides (one a dimension), got 1", "strides"},
    {"DuplicateFunction", "func f() {\n}\nfunc f() {\n}",
     "3:1: function 'f' is defined twice: give each function its own name", "func"},
    {"Lanes", "func f(a: buffer<float32>[4]) {\n  a[ramp(0, 1, 0)] = broadcast(1.0, 4)\n}",
     "2:16: expected lanes in [1, 65535], got 0", "0"},
    {"ElseWithoutIf", "func f() {\n  else {\n  }\n}",
     "2:3: expected a statement ('else' must follow the '}' of an 'if'), got 'else'", "else"},
    {"Keyword", "func for() {\n}", "1:6: 'for' is a keyword: expected the function's name", "for"},
    // A name that starts with a digit (compound assignment is part of
    // version 2 of the text form: ir_language_test.cc).
    {"FunctionNameStartsWithADigit", "func 2mm(a: buffer<float32>[1]) {\n}",
     "1:6: function name '2mm' starts with a digit: expected a name that starts with a letter "
     "or '_'; rename it, e.g. 'mm2' or '_2mm'",
     "2mm"},
    {"NameStartsWithADigit", "func f(a: buffer<float32>[1]) {\n  a[0] = 3tmp\n}",
     "2:11: bad number suffix 'tmp': expected i8-i64, u8-u64, f16, f32 or f64, or none; if "
     "'3tmp' is meant as a name, a name must start with a letter or '_' (e.g. 'tmp3')",
     "tmp"},
    // A literal without a suffix takes its type from the context, and must fit it (item 6).
    {"LiteralDoesNotFitTheStore", "func f(a: buffer<int8>[1]) {\n  a[0] = 300\n}",
     "2:10: integer literal 300 does not fit in int8, the type its context gives it: expected a "
     "value in [-128, 127]; write another value, or int8(300i64) to convert it on purpose "
     "(wrapping)",
     "300"},
    {"LiteralDoesNotFitTheOtherOperand", "func f(a: buffer<uint8>[1]) {\n  a[0] = a[0] + -1\n}",
     "2:17: integer literal -1 does not fit in uint8, the type its context gives it: expected a "
     "value in [0, 255]; write another value, or uint8(-1i64) to convert it on purpose "
     "(wrapping)",
     "-1"},
    {"LiteralWithoutContextIsInt32", "func f(a: buffer<int64>[1]) {\n  a[0] = int64(3000000000)\n}",
     "2:16: integer literal 3000000000 does not fit in int32 (the type of an integer literal "
     "without a suffix, where nothing around it gives one): expected a value in [-2147483648, "
     "2147483647], or a suffix (3000000000i64, 3000000000u64)",
     "3000000000"},
};

INSTANTIATE_TEST_SUITE_P(Errors, ParseError, ::testing::ValuesIn(kBadTexts),
                         [](const ::testing::TestParamInfo<BadText>& param_info) {
                           return std::string(param_info.param.name);
                         });

// `float64(0.2)`, `0.2 * x` and `let y: float64 = 0.2` hold the float64
// value 0.2, not the float32 value of 0.2 (6e-7 away); integer literals take int64 from their
// context. Compared exactly.
TEST(IrText, LiteralsTakeTheirTypeFromTheContext) {
  bir::IRModule m = bir::Parse(
      "func f(x: float64, i: int64, a: buffer<float64>[5], b: buffer<int64>[2]) {\n"
      "  a[0] = float64(0.2)\n"
      "  a[1] = 0.2 * x\n"
      "  a[2] = x * 0.1 + 0.7\n"
      "  a[3] = max(x, 0.3)\n"
      "  let y: float64 = 0.2\n"
      "  a[4] = select(x < 0.5, 0.2, y) + pow(x, 0.5)\n"
      "  b[0] = i + 3000000000\n"
      "  b[1] = 5000000000\n"
      "}\n");
  bir::Verify(m);
  const std::string printed = bir::Print(m);
  EXPECT_NE(printed.find("float64(0.2f64)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("0.2f64 * x"), std::string::npos) << printed;
  EXPECT_NE(printed.find("i + 3000000000i64"), std::string::npos) << printed;
  EXPECT_TRUE(bir::StructuralEqual(bir::Parse(printed), m));
  double a[5] = {0, 0, 0, 0, 0};
  int64_t b[2] = {0, 0};
  const int64_t a_shape[1] = {5}, b_shape[1] = {2};
  const double x = 0.25;
  bir::Interpreter(m).Run(
      "f", {bir::FloatArg(x), bir::IntArg(7), bir::BufferArg(a, bir::Float64(), 1, a_shape),
            bir::BufferArg(b, bir::Int64(), 1, b_shape)});
  EXPECT_EQ(a[0], 0.2);
  EXPECT_EQ(a[1], 0.2 * x);
  EXPECT_EQ(a[2], x * 0.1 + 0.7);
  EXPECT_EQ(a[3], 0.3);
  EXPECT_EQ(a[4], 0.2 + std::pow(x, 0.5));
  EXPECT_EQ(b[0], 3000000007);
  EXPECT_EQ(b[1], 5000000000);
  // A float32 context keeps float32 (the value of 0.2 rounded to float32, as before).
  bir::IRModule m32 = bir::Parse("func g(a: buffer<float32>[1]) {\n  a[0] = float32(0.2)\n}\n");
  float c[1] = {0};
  const int64_t c_shape[1] = {1};
  bir::Interpreter(m32).Run("g", {bir::BufferArg(c, bir::Float32(), 1, c_shape)});
  EXPECT_EQ(c[0], 0.2f);
  // An explicit float32 literal against a float64: the verifier says to write it as float64.
  const std::vector<std::string> errors = bir::VerifyErrors(
      bir::Parse("func h(x: float64, a: buffer<float64>[1]) {\n  a[0] = 0.2f32 * x\n}\n"));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("float32 * float64 in 0.2f32 * x: write the literal as 0.2f64 (a cast "
                           "would keep the rounding of float32)"),
            std::string::npos)
      << errors[0];
  // A float32 or int32 literal written with its suffix where the context has another type
  // (which does not verify) prints with its suffix, so the text prints back the same.
  const std::string mismatched =
      bir::Print(bir::Parse("func h(x: float64, i: int64, a: buffer<float64>[2], b: "
                            "buffer<int64>[1]) {\n  a[0] = 0.2f32 * x + select(x < 1.0, 0.5f32, "
                            "x)\n  b[0] = 5i32 + i\n  let y: float64 = 0.5f32\n  a[1] = pow(x, "
                            "2.0f32) + float64(0.1f32) + y\n}\n"));
  EXPECT_EQ(bir::Print(bir::Parse(mismatched)), mismatched);
  EXPECT_NE(mismatched.find("0.2f32 * x"), std::string::npos) << mismatched;
  EXPECT_NE(mismatched.find("5i32 + i"), std::string::npos) << mismatched;
  EXPECT_NE(mismatched.find("let y: float64 = 0.5f32"), std::string::npos) << mismatched;
  // The builder's float64(0.2f32) prints with its suffix, so the text parses back to it.
  bir::Expr cast = bir::Cast(bir::Float64(), bir::FloatImm(bir::Float32(), 0.2));
  EXPECT_EQ(bir::Print(cast), "float64(0.2f32)");
}

TEST(IrText, SourceNamePrefixesTheLocation) {
  try {
    bir::Parse("func f() {\n  x\n}", "k.bpir");
    FAIL();
  } catch (const bir::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("k.bpir:2:3: undefined variable 'x'", 0), 0u) << e.what();
  }
}

}  // namespace
