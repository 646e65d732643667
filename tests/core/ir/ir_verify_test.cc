// SPDX-License-Identifier: Apache-2.0
// The verifier: each check, with its message naming the function and the statement.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <string>

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)

namespace {

std::vector<std::string> Errors(const PrimFunc& f, bool cpu = false) {
  IRModule m;
  m.Add(f);
  VerifyOptions o;
  o.device_is_cpu = cpu;
  return VerifyErrors(m, o);
}

std::vector<std::string> ErrorsOf(const std::string& text, bool cpu = false) {
  VerifyOptions o;
  o.device_is_cpu = cpu;
  return VerifyErrors(Parse(text), o);
}

using Msgs = std::vector<std::string>;

TEST(IrVerify, UndefinedVariable) {
  Var n("n"), k("k"), i("i");
  Buffer a("a", Float32(), {n});
  EXPECT_EQ(Errors(PrimFunc("f", {n, a}, For(i, 0, n, ForKind::kSerial, Store(a, {k}, 1.0)))),
            Msgs{"in function 'f': undefined variable 'k': make it a parameter or bind it with "
                 "for or let in `a[k] = 1.0`"});
}

TEST(IrVerify, UndefinedBuffer) {
  Buffer a("a", Float32(), {4}), b("b", Float32(), {4});
  EXPECT_EQ(Errors(PrimFunc("f", {a}, Store(a, {0}, b[0]))),
            Msgs{"in function 'f': undefined buffer 'b': pass it as a parameter or allocate it "
                 "in `a[0] = b[0]`"});
}

TEST(IrVerify, TypeMismatchInBinaryOp) {
  EXPECT_EQ(ErrorsOf("func f(a: buffer<float32>[4], n: int32) {\n  a[0] = a[1] + n\n}\n"),
            Msgs{"in function 'f': type mismatch: float32 + int32 in a[1] + n: cast one side "
                 "in `a[0] = a[1] + n`"});
}

TEST(IrVerify, TypeMismatchInStore) {
  EXPECT_EQ(ErrorsOf("func f(a: buffer<float32>[4]) {\n  a[0] = 1.0f64\n}\n"),
            Msgs{"in function 'f': type mismatch: storing float64 into buffer 'a' of float32: "
                 "cast the value in `a[0] = 1.0f64`"});
}

TEST(IrVerify, TypeMismatchInLetAndLoop) {
  EXPECT_EQ(ErrorsOf("func f(n: int64) {\n  for i in serial(0, n) {\n    let x: float32 = 1i32\n  "
                     "}\n}\n"),
            (Msgs{"in function 'f': type mismatch: loop variable 'i' is int32 but a bound is "
                  "int64 in `for i in serial(0, n) { ... }`",
                  "in function 'f': type mismatch: let 'x' is float32 but its value is int32 in "
                  "`let x: float32 = 1i32`"}));
}

TEST(IrVerify, ConditionsAreBool) {
  EXPECT_EQ(ErrorsOf("func f(n: int32) {\n  if (n) {\n    barrier\n  }\n}\n").front(),
            "in function 'f': the condition of if is int32: expected bool in `if (n) { ... }`");
}

TEST(IrVerify, RankMismatch) {
  EXPECT_EQ(ErrorsOf("func f(a: buffer<float32>[4, 4]) {\n  a[0] = a[1, 2]\n}\n"),
            Msgs{"in function 'f': rank mismatch: buffer 'a' has 2 dimension(s) but is indexed "
                 "with 1 in `a[0] = a[1, 2]`"});
}

TEST(IrVerify, FloatIndex) {
  EXPECT_EQ(ErrorsOf("func f(a: buffer<float32>[4]) {\n  a[0] = a[1.0]\n}\n"),
            Msgs{"in function 'f': an index of buffer 'a' is float32: expected an integer in "
                 "`a[0] = a[1.0]`"});
}

const char kGpuKernel[] =
    "func k(a: buffer<float32>[64]) {\n"
    "  for tx in thread(threadIdx.x, 0, 64) {\n"
    "    a[tx] = 1.0\n"
    "  }\n"
    "}\n";

TEST(IrVerify, ThreadBindingOnACpuTarget) {
  EXPECT_EQ(ErrorsOf(kGpuKernel), Msgs{});
  EXPECT_EQ(ErrorsOf(kGpuKernel, /*cpu=*/true),
            Msgs{"in function 'k': loop bound to threadIdx.x on a CPU target: use a parallel or "
                 "serial loop in `for tx in thread(threadIdx.x, 0, 64) { ... }`"});
}

TEST(IrVerify, ThreadAxisBoundTwice) {
  EXPECT_EQ(ErrorsOf("func k() {\n  for a in thread(threadIdx.x, 0, 4) {\n    for b in "
                     "thread(threadIdx.x, 0, 4) {\n    }\n  }\n}\n"),
            Msgs{"in function 'k': threadIdx.x is already bound by an enclosing loop: bind each "
                 "axis once in `for b in thread(threadIdx.x, 0, 4) { ... }`"});
}

TEST(IrVerify, BarrierOutsideAThreadBoundRegion) {
  EXPECT_EQ(ErrorsOf("func f() {\n  barrier\n}\n"),
            Msgs{"in function 'f': barrier outside a thread-bound region: a barrier "
                 "synchronizes the threads of a block; put it inside a loop bound to threadIdx "
                 "in `barrier`"});
}

TEST(IrVerify, SharedAllocationOutsideAThreadBoundRegion) {
  EXPECT_EQ(ErrorsOf("func f() {\n  alloc t: float32[4] shared\n}\n"),
            Msgs{"in function 'f': shared allocation of 't' outside a thread-bound region: "
                 "allocate it inside the kernel in `alloc t: float32[4] shared`"});
}

// A shared array is one per block, sized before its threads run: from scalar params or host
// values (then at launch), never from a value of one thread.
TEST(IrVerify, SharedAllocationSizedInsideItsRegion) {
  EXPECT_EQ(ErrorsOf("func f(n: int32, a: buffer<int32>[4]) {\n  for b in thread(blockIdx.x, 0, "
                     "4) {\n    for t in thread(threadIdx.x, 0, 4) {\n      alloc s: float32[t "
                     "+ n] shared\n      alloc u: float32[a[0]] shared\n    }\n  }\n}\n"),
            (Msgs{"in function 'f': shared allocation of 's' is sized by variable 't', defined "
                  "inside its region: a block's shared memory is sized before its threads run; "
                  "size it from scalar params or values computed outside the thread-bound loops "
                  "in `alloc s: float32[t + n] shared ... }`",
                  "in function 'f': shared allocation of 'u' is sized by a load of 'a': a "
                  "block's shared memory is sized before its threads run; size it from scalar "
                  "params or values computed outside the thread-bound loops in `alloc u: "
                  "float32[a[0]] shared`"}));
  // Sized by a param and by a host variable: fine.
  EXPECT_EQ(
      ErrorsOf("func g(n: int32) {\n  let k: int32 = n * 2\n  for t in thread(threadIdx.x, 0, "
               "4) {\n    alloc s: float32[n, k] shared\n  }\n}\n"),
      Msgs{});
}

TEST(IrVerify, CallPackedInsideAThreadBoundRegion) {
  EXPECT_EQ(ErrorsOf("func k(a: buffer<float32>[64]) {\n  for tx in thread(threadIdx.x, 0, 64) "
                     "{\n    call_packed(\"blas.sgemm\", a)\n  }\n}\n"),
            Msgs{"in function 'k': call_packed(\"blas.sgemm\") inside a thread-bound region: a "
                 "packed call runs on the host; move it out of the kernel in "
                 "`call_packed(\"blas.sgemm\", a)`"});
}

TEST(IrVerify, ShadowedName) {
  Var i("i"), i2("i");
  Buffer a("a", Float32(), {4});
  EXPECT_EQ(Errors(PrimFunc("f", {a},
                            For(i, 0, 4, ForKind::kSerial,
                                For(i2, 0, 4, ForKind::kSerial, Store(a, {i2}, 0.0))))),
            Msgs{"in function 'f': 'i' is defined twice in nested scopes: rename one (the text "
                 "form resolves names, so a shadowed name cannot be printed) in `for i in "
                 "serial(0, 4) { ... }`"});
}

TEST(IrVerify, LogicalOpsAndIntrinsicsTakeTheRightTypes) {
  Var n("n");
  Buffer a("a", Float32(), {4});
  EXPECT_EQ(Errors(PrimFunc("f", {n, a}, Store(a, {0}, Select(And(n, n), Call("exp", {n}), 1.0)))),
            (Msgs{"in function 'f': operator && takes bool operands, got int32 in n && n in "
                  "`a[0] = select(n && n, exp(n), 1.0)`",
                  "in function 'f': intrinsic exp takes float arguments, got int32: cast it, e.g. "
                  "float32(x) in `a[0] = select(n && n, exp(n), 1.0)`",
                  "in function 'f': type mismatch: select chooses between int32 and float32 in "
                  "select(n && n, exp(n), 1.0) in `a[0] = select(n && n, exp(n), 1.0)`",
                  "in function 'f': type mismatch: storing int32 into buffer 'a' of float32: cast "
                  "the value in `a[0] = select(n && n, exp(n), 1.0)`"}));
}

TEST(IrVerify, VerifyThrowsAllMessages) {
  try {
    Verify(Parse("func f() {\n  barrier\n  barrier\n}\n"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kVerify);
    EXPECT_EQ(std::string(e.what()).find('\n') != std::string::npos, true);
  }
}

}  // namespace
