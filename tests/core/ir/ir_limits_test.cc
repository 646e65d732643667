// SPDX-License-Identifier: Apache-2.0
// Depth and size limits (docs/ir.md, "Limits"): a generated kernel with a chain of 10,000 or
// 30,000 terms parses, verifies, prints, round-trips, splits and runs in the interpreter with
// the exact result, also from a thread with a small stack; text nested deeper than kMaxNesting
// and trees deeper than kMaxTreeDepth are parse errors that name the limit; nothing overflows
// the stack (each of these crashed before).
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ir_test_util.hpp"

namespace bir = backplane::ir;
using irtest::ErrorOf;
using irtest::Tensor;

namespace {

// out[0] = x[0] + x[1] + ... + x[n-1] (left-associative: a tree n deep), and
// out[1] = the same sum through a run of n lets.
std::string ChainKernel(int n) {
  std::string s = "func chain(x: buffer<float64>[" + std::to_string(n) +
                  "], out: buffer<float64>[2]) {\n  out[0] = x[0]";
  for (int k = 1; k < n; ++k) s += " + x[" + std::to_string(k) + "]";
  s += "\n  let s0: float64 = x[0]\n";
  for (int k = 1; k < n; ++k)
    s += "  let s" + std::to_string(k) + ": float64 = s" + std::to_string(k - 1) + " + x[" +
         std::to_string(k) + "]\n";
  s += "  out[1] = s" + std::to_string(n - 1) + "\n}\n";
  return s;
}

void CheckChain(int n) {
  const std::string text = ChainKernel(n);
  bir::IRModule m = bir::Parse(text, "chain.bpir");
  EXPECT_GE(bir::TreeDepth(m), n);
  bir::Verify(m);
  const std::string printed = bir::Print(m);
  EXPECT_EQ(bir::Print(bir::Parse(printed)), printed);
  EXPECT_TRUE(bir::StructuralEqual(bir::Parse(printed), m));
  EXPECT_EQ(bir::WrittenBuffers(m.functions()[0].body).at(0),
            m.functions()[0].params[1].buffer().get());
  bir::SplitResult split = bir::SplitHostDevice(m, /*device_is_cpu=*/true);
  EXPECT_EQ(split.host.functions().size(), 1u);

  Tensor<double> x({n});
  x.Random(13);
  Tensor<double> out({2}, -1);
  double want = x[0];  // the same order of additions: exactly the same double
  for (int k = 1; k < n; ++k) want += x[static_cast<size_t>(k)];
  bir::Interpreter interp(m);
  interp.Run("chain", {x.View(), out.View()});
  EXPECT_EQ(out[0], want);
  EXPECT_EQ(out[1], want);
}

TEST(IrLimits, TenThousandTermChainRunsExactly) { CheckChain(10000); }

// 30,000 terms, from a std::thread: it has the default thread stack, smaller than the main
// thread's may be, and every walk still gets what it needs.
TEST(IrLimits, DeepWalksFromAStdThread) {
  std::string error;
  std::thread t([&] {
    try {
      CheckChain(30000);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_EQ(error, "");
}

// A thread with a small stack (256 KiB, as some thread pools give): the walks measure what is
// left on it and move to a bigger stack, even for a tree only 3,000 deep.
TEST(IrLimits, DeepWalksFromASmallStack) {
  std::string error;
  {
    bir::StackThread t(size_t{256} << 10, [&] {
      try {
        CheckChain(3000);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  EXPECT_EQ(error, "");
}

// A tree built with the builder API, as deep as the parser allows, is measured, verified,
// printed and freed without recursion overflowing anything.
TEST(IrLimits, BuilderTreeAtTheDepthLimit) {
  bir::Var x("x", bir::Float64());
  bir::Expr e = x;
  for (int64_t k = 0; k < bir::kMaxTreeDepth - 4; ++k) e = e + x;
  bir::Buffer out("out", bir::Float64(), {1});
  bir::IRModule m;
  m.Add(bir::PrimFunc("f", {x, out}, bir::Store(out, {0}, e)));
  EXPECT_LE(bir::TreeDepth(m), bir::kMaxTreeDepth);
  bir::Verify(m);
  const std::string text = bir::Print(m);
  bir::IRModule back = bir::Parse(text);
  EXPECT_TRUE(bir::StructuralEqual(back, m));
  Tensor<double> o({1});
  double xv = 0.5;
  bir::Interpreter(m).Run("f", {bir::FloatArg(xv), o.View()});
  EXPECT_EQ(o[0], 0.5 * static_cast<double>(bir::kMaxTreeDepth - 3));
}

std::string Nested(const std::string& open, const std::string& inner, const std::string& close,
                   int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += open;
  s += inner;
  for (int k = 0; k < n; ++k) s += close;
  return s;
}

TEST(IrLimits, DeepNestingIsAParseErrorNamingTheLimit) {
  const std::string limit = std::to_string(bir::kMaxNesting);
  const std::string head = "func f(a: buffer<int32>[1]) {\n  a[0] = ";
  const int over = static_cast<int>(bir::kMaxNesting) + 1;
  // Parentheses, calls, brackets and braces one level past the limit, closed and unclosed.
  const std::vector<std::string> bad = {
      head + Nested("(", "1", ")", over) + "\n}\n",
      head + Nested("-(", "1", ")", over) + "\n}\n",
      head + Nested("int32(", "1", ")", over) + "\n}\n",
      head + "a[" + Nested("a[", "0", "]", over) + "]\n}\n",
      "func f() " + Nested("{", "", "}", over) + "\n",
      "func f(){" + Nested("{", "", "", over),  // the fuzzer's finding: unterminated
      head + Nested("(", "1", ")", static_cast<int>(bir::kMaxNesting)) + "\n}\n",
  };
  for (const std::string& text : bad) {
    const std::string msg = ErrorOf([&] { bir::Parse(text, "deep.bpir"); }, bir::ErrorKind::kParse);
    EXPECT_NE(msg.find("deep.bpir:"), std::string::npos) << msg.substr(0, 200);
    EXPECT_NE(msg.find("nested too deeply: expected at most " + limit), std::string::npos)
        << msg.substr(0, 200);
    // The line shown under the message is a window around the column, not 100,000 characters.
    EXPECT_LT(msg.size(), 600u) << msg.substr(0, 200);
    EXPECT_NE(msg.find("\n  ..."), std::string::npos) << msg.substr(0, 200);
  }
}

// Nesting up to the limit parses: the parser measures the text's nesting first and runs with the
// stack it needs, also when called from a thread with a small stack.
TEST(IrLimits, NestingUpToTheLimitParses) {
  const int n = static_cast<int>(bir::kMaxNesting) - 1;  // the function's braces are one level
  const std::string text =
      "func f(x: int32, a: buffer<int32>[1]) {\n  a[0] = " + Nested("(", "x + 1", ")", n) + "\n}\n";
  std::string error;
  {
    bir::StackThread t(size_t{256} << 10, [&] {
      try {
        bir::IRModule m = bir::Parse(text, "deep.bpir");
        bir::Verify(m);
        EXPECT_EQ(bir::Print(m), bir::Print(bir::Parse(bir::Print(m))));
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  EXPECT_EQ(error, "");
}

// An error at the innermost level of deep nesting is reported at its place, whatever the
// brackets. Under AddressSanitizer this also keeps the parser's frames small: the ASan runtime
// does not clean up after an exception thrown with more than 64 MiB of stack in use (it then
// reports a false stack-use-after-scope), so 20,000 levels pass only while a level of each kind
// takes under ~3 KiB (docs/ir.md, "Limits"; it took up to 16 KiB at -O1 before).
TEST(IrLimits, AnErrorDeepInsideNestingIsReportedAtItsPlace) {
  const int n = 20000;
  const std::string head = "func f(a: buffer<float32>[4], x: int32) {\n  ";
  std::string ifs, loops;
  for (int k = 0; k < n; ++k) {
    ifs += "if (x < " + std::to_string(k) + ") { ";
    loops += "for i" + std::to_string(k) + " in serial(0, 2) { ";
  }
  const std::vector<std::string> texts = {
      head + Nested("{ ", "\nzz = 1.0\n", "}", n) + "\n}\n",
      head + ifs + "\nzz = 1.0\n" + Nested("", "", "}", n) + "\n}\n",
      head + loops + "\nzz = 1.0\n" + Nested("", "", "}", n) + "\n}\n",
      head + "a[0] = " + Nested("(", "\nzz + 1.0", ")", n) + "\n}\n",
      head + "a[0] = " + Nested("-(", "\nzz + 1.0", ")", n) + "\n}\n",
      head + "a[0] = " + Nested("fabs(", "\nzz + 1.0", ")", n) + "\n}\n",
      head + "a[0] = " + Nested("max(1.0, ", "\nzz", ")", n) + "\n}\n",
      head + "a[0] = " + Nested("a[", "\nzz", "]", n) + "\n}\n",
  };
  for (const std::string& text : texts) {
    const std::string msg = ErrorOf([&] { bir::Parse(text, "deep.bpir"); }, bir::ErrorKind::kParse);
    EXPECT_NE(msg.find("deep.bpir:3:1: undefined variable 'zz'"), std::string::npos)
        << text.substr(0, 120) << "\n"
        << msg.substr(0, 300);
  }
}

// A run of unary operators is read in a loop: it is as deep as it is long in the tree, not in the
// text, so 20,000 of them parse, print and parse back (they counted as nesting and were refused
// past 256, and the printer could write `!-x` one level deeper than it was written).
TEST(IrLimits, UnaryRunsAreReadInALoop) {
  const std::string head = "func f(x: int32, b: bool, a: buffer<int32>[2]) {\n";
  for (const std::string& value : {Nested("!", "b", "", 20000), Nested("- ", "x", "", 20000),
                                   Nested("-!", "(x == 1)", "", 10000)}) {
    const bool is_bool = value[0] == '!' || value[1] == '!';
    const std::string text =
        head + "  a[0] = " + (is_bool ? "select(" + value + ", 1, 2)" : value) + "\n}\n";
    bir::IRModule m = bir::Parse(text, "unary.bpir");
    EXPECT_GE(bir::TreeDepth(m), 10000);
    const std::string printed = bir::Print(m);
    EXPECT_EQ(bir::Print(bir::Parse(printed)), printed);
    EXPECT_TRUE(bir::StructuralEqual(bir::Parse(printed), m));
  }
  // An even run of '-' is x itself; 20,000 '!' give b back.
  bir::IRModule m = bir::Parse(head + "  a[0] = " + Nested("- ", "x", "", 20000) +
                               "\n  a[1] = select(" + Nested("!", "b", "", 20000) + ", 7, 9)\n}\n");
  Tensor<int32_t> a({2});
  bir::Interpreter(m).Run("f", {bir::IntArg(-12345), bir::IntArg(0), a.View()});
  EXPECT_EQ(a[0], -12345);
  EXPECT_EQ(a[1], 9);
  // Longer than a tree may be deep: the tree-depth error, not a crash.
  const std::string msg = ErrorOf(
      [&] {
        bir::Parse(head + "  a[0] = select(" +
                       Nested("!", "b", "", static_cast<int>(bir::kMaxTreeDepth) + 10) +
                       ", 1, 2)\n}\n",
                   "unary.bpir");
      },
      bir::ErrorKind::kParse);
  EXPECT_NE(msg.find("makes a tree"), std::string::npos) << msg.substr(0, 200);
}

// Whatever the printer writes for a tree within kMaxTreeDepth parses back to the same tree, for
// trees of every shape that makes the printer open a bracket at each level (built with the
// builder API, as deep as the limit allows): the text form carries the IR to code generators and
// into saved modules, so a tree the library accepts must never print text it refuses.
TEST(IrLimits, EveryTreeWithinTheDepthLimitPrintsTextThatParses) {
  const int n = static_cast<int>(bir::kMaxTreeDepth) - 8;
  bir::Var x("x", bir::Int32());
  bir::Var b("b", bir::Bool());
  bir::Buffer a("a", bir::Int32(), {8});
  bir::Buffer flag("flag", bir::Bool(), {1});
  auto store = [&](bir::Expr v) { return bir::Store(a, {0}, v); };
  auto func = [&](bir::Stmt body) {
    bir::IRModule m;
    m.Add(bir::PrimFunc("f", {x, b, a, flag}, body));
    return m;
  };
  struct Shape {
    const char* name;
    std::function<bir::IRModule()> make;
  };
  const std::vector<Shape> shapes = {
      {"x - (x - (x - ...))",
       [&] {
         bir::Expr e = x;
         for (int k = 0; k < n; ++k) e = x - e;
         return func(store(e));
       }},
      {"!(!(...) && b)",
       [&] {
         bir::Expr e = b;
         for (int k = 0; k < n / 2; ++k) e = bir::And(bir::Not(e), b);
         return func(bir::Store(flag, {0}, e));
       }},
      {"((b == b) == b) == ...",
       [&] {
         bir::Expr e = b;
         for (int k = 0; k < n; ++k) e = bir::Eq(e, b);
         return func(bir::Store(flag, {0}, e));
       }},
      {"(x < x) < ... compared as int32 casts",
       [&] {
         bir::Expr e = x;
         for (int k = 0; k < n / 2; ++k) e = bir::Cast(bir::Int32(), e < x);
         return func(store(e));
       }},
      {"a[a[a[...]]]",
       [&] {
         bir::Expr e = x;
         for (int k = 0; k < n; ++k) e = bir::Load(a, {e});
         return func(store(e));
       }},
      {"min(x, min(x, ...))",
       [&] {
         bir::Expr e = x;
         for (int k = 0; k < n; ++k) e = bir::Min(x, e);
         return func(store(e));
       }},
      {"nested loops",
       [&] {
         bir::Stmt s = store(x);
         for (int k = 0; k < n / 2; ++k)
           s = bir::For(bir::Var("i" + std::to_string(k), bir::Int32()), 0, 1,
                        bir::ForKind::kSerial, s);
         return func(s);
       }},
      {"nested ifs with else",
       [&] {
         bir::Stmt s = store(x);
         for (int k = 0; k < n / 2; ++k)
           s = bir::IfThenElse(b, bir::Seq({s, store(x)}), store(x + 1));
         return func(s);
       }},
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.name);
    bir::IRModule m = shape.make();
    EXPECT_LE(bir::TreeDepth(m), bir::kMaxTreeDepth);
    EXPECT_GE(bir::TreeDepth(m), n / 2);
    const std::string printed = bir::Print(m);
    EXPECT_LT(printed.size(), size_t{64} << 20);  // indentation stops growing: not quadratic
    bir::IRModule back;
    try {
      back = bir::Parse(printed, "printed.bpir");
    } catch (const bir::Error& e) {
      ADD_FAILURE() << std::string(e.what()).substr(0, 300);
      continue;
    }
    EXPECT_TRUE(bir::StructuralEqual(back, m));
    EXPECT_EQ(bir::Print(back), printed);
  }
}

TEST(IrLimits, ATreeDeeperThanTheLimitIsAParseError) {
  const int n = static_cast<int>(bir::kMaxTreeDepth) + 10;
  std::string s = "func long(x: float32, a: buffer<float32>[1]) {\n  a[0] = x";
  for (int k = 0; k < n; ++k) s += " + x";
  s += "\n}\n";
  const std::string msg = ErrorOf([&] { bir::Parse(s, "long.bpir"); }, bir::ErrorKind::kParse);
  EXPECT_NE(msg.find("long.bpir:1:1: function 'long' makes a tree"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected at most " + std::to_string(bir::kMaxTreeDepth)), std::string::npos)
      << msg;
}

// An else-if chain is read in a loop: 5,000 arms parse and run.
TEST(IrLimits, LongElseIfChain) {
  const int n = 5000;
  std::string s = "func pick(k: int32, a: buffer<int32>[1]) {\n  if (k == 0) {\n    a[0] = 0\n  }";
  for (int k = 1; k < n; ++k)
    s += " else if (k == " + std::to_string(k) + ") {\n    a[0] = " + std::to_string(k * 3) +
         "\n  }";
  s += " else {\n    a[0] = -1\n  }\n}\n";
  bir::IRModule m = bir::Parse(s);
  EXPECT_EQ(bir::Print(m), bir::Print(bir::Parse(bir::Print(m))));
  bir::Interpreter interp(m);
  for (int k : {0, 1, 2500, n - 1, n}) {
    Tensor<int32_t> a({1});
    interp.Run("pick", {bir::IntArg(k), a.View()});
    EXPECT_EQ(a[0], k < n ? k * 3 : -1) << k;
  }
}

// ForEachStmt visits every statement in pre-order (then before else, a sequence in order)
// without recursion: the 5,000-arm else-if chain, and a small tree whose order is spelled out.
TEST(IrLimits, ForEachStmtVisitsInPreOrderAtAnyDepth) {
  const int n = 5000;
  std::string s = "func pick(k: int32, a: buffer<int32>[1]) {\n  if (k == 0) {\n    a[0] = 0\n  }";
  for (int k = 1; k < n; ++k)
    s += " else if (k == " + std::to_string(k) + ") {\n    a[0] = " + std::to_string(k) + "\n  }";
  s += " else {\n    a[0] = -1\n  }\n}\n";
  const bir::IRModule chain = bir::Parse(s);
  std::vector<int64_t> stored;
  bir::ForEachStmt(chain.functions()[0].body, [&](const bir::Stmt& x) {
    if (const auto* st = x.As<bir::StoreNode>()) {
      const auto* v = st->value.As<bir::IntImmNode>();
      stored.push_back(v != nullptr ? v->value : -1);
    }
  });
  ASSERT_EQ(stored.size(), static_cast<size_t>(n + 1));
  for (int k = 0; k < n; ++k) ASSERT_EQ(stored[static_cast<size_t>(k)], k);

  const bir::IRModule small = bir::Parse(
      "func f(n: int32, a: buffer<int32>[4]) {\n"
      "  for i in serial(0, 2) {\n"
      "    if (i < n) {\n      a[0] = 1\n    } else {\n      alloc t: int32[1] local\n"
      "      t[0] = 2\n      a[1] = t[0]\n    }\n"
      "  }\n"
      "  let m: int32 = n + 1\n"
      "  a[2] = m\n"
      "}\n");
  std::vector<std::string> kinds;
  bir::ForEachStmt(small.functions()[0].body, [&](const bir::Stmt& x) {
    if (x.As<bir::ForNode>()) kinds.push_back("for");
    if (x.As<bir::IfThenElseNode>()) kinds.push_back("if");
    if (x.As<bir::AllocateNode>()) kinds.push_back("alloc");
    if (x.As<bir::LetStmtNode>()) kinds.push_back("let");
    if (const auto* st = x.As<bir::StoreNode>()) kinds.push_back("store " + st->buffer.name());
  });
  EXPECT_EQ(kinds, (std::vector<std::string>{"for", "if", "store a", "alloc", "store t", "store a",
                                             "let", "store a"}));
}

// RunWithStack rethrows what the function threw, on the caller's thread.
TEST(IrLimits, RunWithStackRethrows) {
  EXPECT_THROW(
      bir::RunWithStack(size_t{512} << 20, [] { throw bir::Error(bir::ErrorKind::kValue, "x"); }),
      bir::Error);
  int ran = 0;
  bir::RunWithStack(size_t{512} << 20, [&] { ++ran; });
  EXPECT_EQ(ran, 1);
}

}  // namespace
