// SPDX-License-Identifier: Apache-2.0
// SplitHostDevice: the kernels and host calls it makes (as text), that the host part run by
// the interpreter, launching the device part in another interpreter, computes what the whole
// function computes, and its errors.
#include <gtest/gtest.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <string>
#include <vector>

#include "ir_test_util.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace)
using irtest::ErrorOf;
using irtest::Near;
using irtest::Tensor;

namespace {

// The functions `names` of a kernel file, as a module.
IRModule Pick(const std::string& file, const std::vector<std::string>& names) {
  const IRModule all = Parse(irtest::ReadKernel(file), file);
  IRModule m;
  for (const std::string& n : names) m.Add(*all.Find(n));
  return m;
}

// Both halves verify and round-trip through the text form.
void ExpectWellFormed(const SplitResult& r) {
  for (const IRModule* m : {&r.host, &r.device}) {
    EXPECT_EQ(VerifyErrors(*m), std::vector<std::string>{});
    const std::string text = Print(*m);
    const IRModule back = Parse(text);
    EXPECT_TRUE(StructuralEqual(*m, back)) << text;
    EXPECT_EQ(Print(back), text);
  }
}

// What SplitHostDevice(m, false) made passes the check a saved module gets (SplitErrors), as
// made and after a round trip of each half through the text form.
void ExpectPassesSplitErrors(const SplitResult& r) {
  std::vector<const PrimFunc*> kernels;
  for (const PrimFunc& f : r.device.functions()) kernels.push_back(&f);
  EXPECT_EQ(SplitErrors(r.host, kernels), std::vector<std::string>{});
  const IRModule host = Parse(Print(r.host)), device = Parse(Print(r.device));
  kernels.clear();
  for (const PrimFunc& f : device.functions()) kernels.push_back(&f);
  EXPECT_EQ(SplitErrors(host, kernels), std::vector<std::string>{});
}

// Runs `func` of the split host module; its call_packed launches run the device module.
void RunSplit(const SplitResult& r, const std::string& func, const std::vector<ArgView>& args,
              std::vector<std::string>* launches = nullptr) {
  const Interpreter host(r.host);
  const Interpreter device(r.device);
  host.Run(func, args, [&](const std::string& name, const std::vector<ArgView>& a) -> int64_t {
    if (launches != nullptr) {
      std::string s = name;
      for (const ArgView& v : a)
        s += v.kind == ArgView::Kind::kBuffer ? " buf" : " " + std::to_string(v.i);
      launches->push_back(s);
    }
    device.Run(name, a);  // with the trailing launch extents
    return 0;
  });
}

TEST(IrSplit, MatmulTiledGpu) {
  const IRModule m = Pick("matmul.bpir", {"matmul_tiled_gpu"});
  const SplitResult r = SplitHostDevice(m, false);
  EXPECT_EQ(Print(r.host),
            "# backplane-ir 1\n\n"
            "func matmul_tiled_gpu(n: int32, a: buffer<float32>[n, n], b: buffer<float32>[n, n], "
            "c: buffer<float32>[n, n]) {\n"
            "  call_packed(\"matmul_tiled_gpu_kernel\", n, a, b, c, int64(n / 16), int64(n / 16), "
            "int64(16), int64(16))\n"
            "}\n");
  const std::string device = Print(r.device);
  const std::string head =
      "# backplane-ir 1\n\n"
      "func matmul_tiled_gpu_kernel(n: int32, a: buffer<float32>[n, n], b: buffer<float32>[n, "
      "n], c: buffer<float32>[n, n]) attrs(\"kernel\": \"1\", \"launch_params\": "
      "\"blockIdx.x,blockIdx.y,threadIdx.x,threadIdx.y\") {\n"
      "  for by in thread(blockIdx.y, 0, n / 16) {\n";
  EXPECT_EQ(device.substr(0, head.size()), head);
  // The body is the region, unchanged.
  EXPECT_TRUE(StructuralEqual(r.device.functions().at(0).body, m.functions().at(0).body));
  ExpectWellFormed(r);
  ExpectPassesSplitErrors(r);

  const int64_t n = 64;
  Tensor<float> a({n, n}), b({n, n}), whole({n, n}), split({n, n});
  a.Random(1);
  b.Random(2);
  Interpreter(m).Run("matmul_tiled_gpu", {IntArg(n), a.View(), b.View(), whole.View()});
  std::vector<std::string> launches;
  RunSplit(r, "matmul_tiled_gpu", {IntArg(n), a.View(), b.View(), split.View()}, &launches);
  EXPECT_EQ(launches, std::vector<std::string>{"matmul_tiled_gpu_kernel 64 buf buf buf 4 4 16 16"});
  EXPECT_EQ(split.data, whole.data);
}

TEST(IrSplit, SumGpu) {
  const IRModule m = Pick("reduction.bpir", {"sum_gpu"});
  const SplitResult r = SplitHostDevice(m, false);
  EXPECT_EQ(Print(r.host),
            "# backplane-ir 1\n\n"
            "func sum_gpu(n: int32, a: buffer<float32>[n], out: buffer<float32>[1]) {\n"
            "  call_packed(\"sum_gpu_kernel\", n, a, out, int64(256))\n"
            "}\n");
  const std::string head =
      "# backplane-ir 1\n\n"
      "func sum_gpu_kernel(n: int32, a: buffer<float32>[n], out: buffer<float32>[1]) "
      "attrs(\"kernel\": \"1\", \"launch_params\": \"threadIdx.x\") {\n"
      "  for tx in thread(threadIdx.x, 0, 256) {\n"
      "    alloc part: float32[256] shared\n";
  EXPECT_EQ(Print(r.device).substr(0, head.size()), head);
  ExpectWellFormed(r);
  ExpectPassesSplitErrors(r);
  for (int64_t n : {5, 1000}) {
    Tensor<float> a({n}), whole({1}), split({1});
    a.Random(3);
    Interpreter(m).Run("sum_gpu", {IntArg(n), a.View(), whole.View()});
    RunSplit(r, "sum_gpu", {IntArg(n), a.View(), split.View()});
    EXPECT_EQ(split[0], whole[0]);
    double want = 0;
    for (float x : a.data) want += x;
    EXPECT_TRUE(Near(split[0], want, 1e-5));
  }
}

TEST(IrSplit, ParamsInOrderAndHostVariables) {
  const IRModule m = Parse(
      "func f(m: int32, unused: int32, n: int32, x: float32, a: buffer<float32>[m, n], "
      "b: buffer<float32>[4]) {\n"
      "  for i in serial(0, m) {\n"
      "    let s: int32 = i * 2\n"
      "    for tx in thread(threadIdx.x, 0, n) {\n"
      "      a[i, tx] = x + float32(s)\n"
      "    }\n"
      "  }\n"
      "}\n");
  const SplitResult r = SplitHostDevice(m, false);
  EXPECT_EQ(Print(r.host),
            "# backplane-ir 1\n\n"
            "func f(m: int32, unused: int32, n: int32, x: float32, a: buffer<float32>[m, n], "
            "b: buffer<float32>[4]) {\n"
            "  for i in serial(0, m) {\n"
            "    let s: int32 = i * 2\n"
            "    call_packed(\"f_kernel\", m, n, x, i, s, a, int64(n))\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(Print(r.device),
            "# backplane-ir 1\n\n"
            "func f_kernel(m: int32, n: int32, x: float32, i: int32, s: int32, "
            "a: buffer<float32>[m, n]) attrs(\"kernel\": \"1\", \"launch_params\": "
            "\"threadIdx.x\") {\n"
            "  for tx in thread(threadIdx.x, 0, n) {\n"
            "    a[i, tx] = x + float32(s)\n"
            "  }\n"
            "}\n");
  ExpectWellFormed(r);
  ExpectPassesSplitErrors(r);
  Tensor<float> a({3, 5}), b({4});
  RunSplit(r, "f", {IntArg(3), IntArg(0), IntArg(5), FloatArg(0.5), a.View(), b.View()});
  for (int i = 0; i < 3; ++i)
    for (int t = 0; t < 5; ++t) EXPECT_EQ(a[i * 5 + t], 0.5f + 2.0f * i);
}

TEST(IrSplit, SeveralKernelsAndFunctionsWithout) {
  const IRModule m = Parse(
      "func g(n: int32, a: buffer<int32>[n]) attrs(\"target\": \"cuda\") {\n"
      "  for bx in thread(blockIdx.x, 0, n) {\n"
      "    for tx in thread(threadIdx.x, 0, 1) {\n      a[bx] = bx\n    }\n"
      "  }\n"
      "  for t in thread(threadIdx.y, 0, n) {\n    a[t] = a[t] * 2\n  }\n"
      "}\n\n"
      "func h(k: int32) {\n  call_packed(\"log\", k)\n}\n");
  const SplitResult r = SplitHostDevice(m, false);
  EXPECT_EQ(Print(r.host),
            "# backplane-ir 1\n\n"
            "func g(n: int32, a: buffer<int32>[n]) attrs(\"target\": \"cuda\") {\n"
            "  call_packed(\"g_kernel0\", n, a, int64(n), int64(1))\n"
            "  call_packed(\"g_kernel1\", n, a, int64(n))\n"
            "}\n\n"
            "func h(k: int32) {\n  call_packed(\"log\", k)\n}\n");
  ASSERT_EQ(r.device.functions().size(), 2u);
  EXPECT_EQ(r.device.functions()[0].name, "g_kernel0");
  EXPECT_EQ(ToString(r.device.functions()[0].launch_axes.value()), "blockIdx.x,threadIdx.x");
  EXPECT_EQ(r.device.functions()[1].name, "g_kernel1");
  EXPECT_EQ(ToString(r.device.functions()[1].launch_axes.value()), "threadIdx.y");
  // Each kernel carries its function's attrs (a backend's hints) and "kernel": "1".
  for (const PrimFunc& k : r.device.functions()) {
    EXPECT_EQ(k.attrs, (std::map<std::string, std::string>{{"kernel", "1"}, {"target", "cuda"}}))
        << k.name;
  }
  ExpectWellFormed(r);
  ExpectPassesSplitErrors(r);
  Tensor<int32_t> a({6});
  std::vector<std::string> launches;
  RunSplit(r, "g", {IntArg(6), a.View()}, &launches);
  EXPECT_EQ(a.data, (std::vector<int32_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(launches, (std::vector<std::string>{"g_kernel0 6 buf 6 1", "g_kernel1 6 buf 6"}));
}

TEST(IrSplit, AnAxisBoundTwiceWithOneExtentIsOneLaunchParam) {
  const IRModule m = Parse(
      "func f(a: buffer<int32>[2, 8]) {\n"
      "  for b in thread(blockIdx.x, 0, 2) {\n"
      "    for t in thread(threadIdx.x, 0, 8) {\n      a[b, t] = t\n    }\n"
      "    for u in thread(threadIdx.x, 0, 8) {\n      a[b, u] = a[b, u] + 1\n    }\n"
      "  }\n"
      "}\n");
  const SplitResult r = SplitHostDevice(m, false);
  EXPECT_EQ(Print(r.host),
            "# backplane-ir 1\n\nfunc f(a: buffer<int32>[2, 8]) {\n"
            "  call_packed(\"f_kernel\", a, int64(2), int64(8))\n}\n");
  ExpectPassesSplitErrors(r);
  Tensor<int32_t> a({2, 8});
  RunSplit(r, "f", {a.View()});
  for (int k = 0; k < 16; ++k) EXPECT_EQ(a[k], k % 8 + 1);
}

TEST(IrSplit, CpuDevicesLetHostCodeTouchBuffers) {
  const IRModule m = Parse(irtest::ReadKernel("matmul.bpir"));
  EXPECT_EQ(ErrorOf([&] { SplitHostDevice(m, false); }, ErrorKind::kVerify),
            "in function 'matmul': host code accesses buffer 'c', which lives in device memory: "
            "host code cannot touch device memory; bind the loops that access it to "
            "blockIdx/threadIdx in `c[i, j] = 0.0`");
  const SplitResult r = SplitHostDevice(m, true);
  ASSERT_EQ(r.host.functions().size(), 3u);
  EXPECT_TRUE(StructuralEqual(r.host.functions()[0], m.functions()[0]));  // matmul: whole
  EXPECT_TRUE(StructuralEqual(r.host.functions()[2], m.functions()[2]));  // matmul_blas
  ASSERT_EQ(r.device.functions().size(), 1u);
  EXPECT_EQ(r.device.functions()[0].name, "matmul_tiled_gpu_kernel");
  ExpectWellFormed(r);
}

// A grid-wide sum: kernel 0 sums a strided slice per block into the workspace `part`, kernel 1
// sums the parts. The workspace is sized by a host let over a param.
const char* kGridSum =
    "func grid_sum(n: int32, nb: int32, a: buffer<float32>[n], out: buffer<float32>[1]) {\n"
    "  let parts: int32 = nb + 1\n"
    "  alloc part: float32[parts] global\n"
    "  for bx in thread(blockIdx.x, 0, parts) {\n"
    "    var s: float32 = 0.0\n"
    "    for i in serial(0, (n + parts - 1) / parts) {\n"
    "      let j: int32 = i * parts + bx\n"
    "      if (j < n) {\n"
    "        s += a[j]\n"
    "      }\n"
    "    }\n"
    "    part[bx] = s\n"
    "  }\n"
    "  for t in thread(threadIdx.x, 0, 1) {\n"
    "    var s: float32 = 0.0\n"
    "    for k in serial(0, parts) {\n"
    "      s += part[k]\n"
    "    }\n"
    "    out[0] = s\n"
    "  }\n"
    "}\n";

TEST(IrSplit, AGlobalAllocationOfHostCodeIsAWorkspaceOfItsKernels) {
  const IRModule m = Parse(kGridSum);
  const SplitResult r = SplitHostDevice(m, false);
  EXPECT_EQ(Print(r.host),
            "# backplane-ir 1\n\n"
            "func grid_sum(n: int32, nb: int32, a: buffer<float32>[n], out: buffer<float32>[1]) "
            "{\n"
            "  let parts: int32 = nb + 1\n"
            "  alloc part: float32[parts] global\n"
            "  call_packed(\"grid_sum_kernel0\", n, parts, a, part, int64(parts))\n"
            "  call_packed(\"grid_sum_kernel1\", parts, out, part, int64(1))\n"
            "}\n");
  const std::string device = Print(r.device);
  EXPECT_NE(device.find("func grid_sum_kernel0(n: int32, parts: int32, a: buffer<float32>[n], "
                        "part: buffer<float32>[parts]) attrs"),
            std::string::npos)
      << device;
  EXPECT_NE(device.find("func grid_sum_kernel1(parts: int32, out: buffer<float32>[1], "
                        "part: buffer<float32>[parts]) attrs"),
            std::string::npos)
      << device;
  ExpectWellFormed(r);
  ExpectPassesSplitErrors(r);
  for (int64_t n : {1, 7, 1000}) {
    Tensor<float> a({n}), whole({1}), split({1});
    a.Random(static_cast<unsigned>(n));
    Interpreter(m).Run("grid_sum", {IntArg(n), IntArg(3), a.View(), whole.View()});
    RunSplit(r, "grid_sum", {IntArg(n), IntArg(3), a.View(), split.View()});
    EXPECT_EQ(split[0], whole[0]);
    double want = 0;
    for (float x : a.data) want += x;
    EXPECT_TRUE(Near(split[0], want, 1e-5));
  }
}

// The host part's interpreter takes the workspace's memory from a WorkspaceAlloc (the core's
// gives device memory), passes it to each kernel with its `user`, and releases it when the
// function returns, also when a launch fails.
TEST(IrSplit, TheHostPartGetsItsWorkspacesFromTheCallerAndReleasesThem) {
  const SplitResult r = SplitHostDevice(Parse(kGridSum), false);
  const Interpreter host(r.host), device(r.device);
  int token = 0;
  std::vector<std::string> allocs;
  int live = 0;
  std::vector<float> memory;
  WorkspaceAlloc alloc = [&](const std::string& name, DType dtype, int ndim, const int64_t* shape,
                             uint64_t bytes) {
    allocs.push_back(name + " " + ToString(dtype) + " [" +
                     std::to_string(ndim == 1 ? shape[0] : -1) + "] " + std::to_string(bytes));
    memory.assign(static_cast<size_t>(bytes / 4), -1.0f);  // not zero-filled, as a device's
    ++live;
    Workspace w;
    w.data = memory.data();
    w.user = &token;
    w.release = [&] { --live; };
    return w;
  };
  std::vector<void*> users;
  PackedCall launch = [&](const std::string& name, const std::vector<ArgView>& a) -> int64_t {
    users.push_back(a[a.size() - 2].user);  // the workspace comes last among the params
    device.Run(name, a);
    return 0;
  };
  Tensor<float> a({100}), out({1});
  a.Random(1);
  host.Run("grid_sum", {IntArg(100), IntArg(4), a.View(), out.View()}, launch,
           Interpreter::Args::kCheck, alloc);
  EXPECT_EQ(allocs, std::vector<std::string>{"part float32 [5] 20"});
  EXPECT_EQ(users, (std::vector<void*>{&token, &token}));
  EXPECT_EQ(live, 0);
  double want = 0;
  for (float x : a.data) want += x;
  EXPECT_TRUE(Near(out[0], want, 1e-5));
  // A launch that fails: the workspace is released all the same.
  PackedCall failing = [&](const std::string&, const std::vector<ArgView>&) -> int64_t {
    throw Error(ErrorKind::kValue, "the device is gone");
  };
  EXPECT_EQ(ErrorOf(
                [&] {
                  host.Run("grid_sum", {IntArg(100), IntArg(4), a.View(), out.View()}, failing,
                           Interpreter::Args::kCheck, alloc);
                },
                ErrorKind::kValue),
            "the device is gone");
  EXPECT_EQ(live, 0);
  // A size the caller refuses, and sizes the interpreter refuses before asking: nothing is
  // allocated and nothing leaks.
  allocs.clear();
  WorkspaceAlloc refusing = [&](const std::string& name, DType, int, const int64_t*,
                                uint64_t bytes) -> Workspace {
    throw Error(ErrorKind::kValue, "no room for " + name + " (" + std::to_string(bytes) + ")");
  };
  EXPECT_EQ(ErrorOf(
                [&] {
                  host.Run("grid_sum", {IntArg(100), IntArg(4), a.View(), out.View()}, launch,
                           Interpreter::Args::kCheck, refusing);
                },
                ErrorKind::kValue),
            "no room for part (20)");
  EXPECT_EQ(ErrorOf(
                [&] {
                  host.Run("grid_sum", {IntArg(100), IntArg(-5), a.View(), out.View()}, launch,
                           Interpreter::Args::kCheck, alloc);
                },
                ErrorKind::kValue),
            "grid_sum: cannot allocate 'part': its extent `parts` is -4, negative; size it with "
            "a value >= 0");
  const IRModule huge =
      SplitHostDevice(Parse("func f(n: int64, a: buffer<float32>[1]) {\n"
                            "  alloc w: float32[n, n] global\n"
                            "  for t in thread(threadIdx.x, 0, 1) {\n    w[0, 0] = a[0]\n  }\n}\n"),
                      false)
          .host;
  for (int64_t n : {int64_t{1} << 20, int64_t{1} << 32}) {
    const std::string e = ErrorOf(
        [&] {
          Interpreter(huge).Run(
              "f", {IntArg(n), BufferArg(out.data.data(), Float32(), 1, out.shape.data())}, launch,
              Interpreter::Args::kCheck, alloc);
        },
        ErrorKind::kValue);
    EXPECT_NE(e.find("f: cannot allocate 'w': it is too large (more than "), std::string::npos)
        << e;
  }
  EXPECT_EQ(allocs, std::vector<std::string>{});
  EXPECT_EQ(live, 0);
}

// A `local` array sized by a param: a zero-filled slice a thread of a workspace that host code
// allocates around the launch; the split function computes what the whole one does, bit for bit.
TEST(IrSplit, RuntimeSizedLocalArraysAreASliceAThreadOfAWorkspace) {
  const IRModule m = Parse(
      "func f(n: int32, m: int32, x: buffer<float32>[m * 4 * n], y: buffer<float32>[m * 4]) {\n"
      "  for b in thread(blockIdx.x, 0, m) {\n"
      "    for t in thread(threadIdx.x, 0, 4) {\n"
      "      alloc p: float32[2, n + 1] local\n"
      "      for i in serial(0, n) {\n"
      "        p[0, i] = x[(b * 4 + t) * n + i]\n"
      "        p[1, n - i] = p[0, i] * 0.5\n"
      "      }\n"
      "      var s: float32 = p[0, n]\n"
      "      for i in serial(0, n + 1) {\n"
      "        s = s * 0.75 + p[1, i]\n"
      "      }\n"
      "      y[b * 4 + t] = s\n"
      "    }\n"
      "  }\n"
      "}\n");
  const SplitResult r = SplitHostDevice(m, false);
  const std::string host = Print(r.host), device = Print(r.device);
  EXPECT_NE(host.find("  alloc p: float32[int64(m) * 4i64 * (2i64 * int64(n + 1))] global\n"
                      "  call_packed(\"f_kernel\", n, m, x, y, p, int64(m), int64(4))\n"),
            std::string::npos)
      << host;
  EXPECT_NE(device.find("p[(int64(b) * 4i64 + int64(t)) * (2i64 * int64(n + 1)) + (0i64 * "
                        "int64(n + 1) + int64(i))] = x["),
            std::string::npos)
      << device;
  ExpectWellFormed(r);
  ExpectPassesSplitErrors(r);
  for (int64_t n : {0, 3, 17}) {
    Tensor<float> x({3 * 4 * n}), whole({3 * 4}, -1), split({3 * 4}, -1);
    x.Random(static_cast<unsigned>(n + 1));
    Interpreter(m).Run("f", {IntArg(n), IntArg(3), x.View(), whole.View()});
    RunSplit(r, "f", {IntArg(n), IntArg(3), x.View(), split.View()});
    EXPECT_EQ(split.data, whole.data) << "n = " << n;
  }
  auto error = [](const std::string& text) {
    return ErrorOf([&] { SplitHostDevice(Parse(text), false); }, ErrorKind::kVerify);
  };
  EXPECT_EQ(error("func f(a: buffer<float32>[4]) {\n"
                  "  for t in thread(threadIdx.x, 0, 4) {\n"
                  "    alloc p: float32[t + 1] local\n"
                  "    p[t] = a[t]\n"
                  "    a[t] = p[t]\n  }\n}\n"),
            "in function 'f': local allocation of 'p' is sized by variable 't', defined inside "
            "its region: a runtime-sized local array of device code is a slice a thread of a "
            "workspace the host allocates before the threads start; size it with params or "
            "variables of host code in `alloc p: float32[t + 1] local ... }`");
  EXPECT_EQ(error("func f(n: int32, a: buffer<float32>[4]) {\n"
                  "  for b in thread(blockIdx.x, 0, 2) {\n"
                  "    alloc p: float32[n] local\n"
                  "    for t in thread(threadIdx.x, 0, 4) {\n"
                  "      p[0] = a[t]\n"
                  "      a[t] = p[0]\n    }\n  }\n}\n"),
            "in function 'f': local allocation of 'p' is sized at run time and made outside the "
            "loop over threadIdx.x of its kernel: a thread's slice of the workspace is found "
            "from its index on every axis; allocate it inside every thread-bound loop in `alloc "
            "p: float32[n] local ... }`");
}

TEST(IrSplit, Errors) {
  auto error = [](const std::string& text) {
    return ErrorOf([&] { SplitHostDevice(Parse(text), false); }, ErrorKind::kVerify);
  };
  EXPECT_EQ(error("func f(a: buffer<float32>[4]) {\n"
                  "  alloc t: float32[4] local\n"
                  "  for tx in thread(threadIdx.x, 0, 4) {\n    t[tx] = 1.0\n  }\n}\n"),
            "in function 'f': buffer 't' is allocated `local` outside the kernel and used inside "
            "it: a buffer that kernels share is a `global` allocation of host code (a device "
            "workspace); allocate it `global` outside the thread-bound loops, or inside them in "
            "`t[tx] = 1.0`");
  // Host code cannot touch a workspace: it lives in device memory.
  EXPECT_EQ(error("func f(a: buffer<float32>[4]) {\n"
                  "  alloc t: float32[4] global\n"
                  "  t[0] = 2.0\n"
                  "  for tx in thread(threadIdx.x, 0, 4) {\n    a[tx] = t[tx]\n  }\n}\n"),
            "in function 'f': host code accesses buffer 't', a workspace that kernels use, which "
            "lives in device memory: host code cannot touch device memory; use it only inside "
            "the thread-bound loops (or allocate a separate buffer for the host) in `t[0] = 2.0`");
  EXPECT_EQ(error("func f(n: int32, a: buffer<float32>[4]) {\n"
                  "  alloc h: int32[1] global\n"
                  "  h[0] = n\n"
                  "  alloc t: float32[h[0]] global\n"
                  "  for tx in thread(threadIdx.x, 0, 4) {\n    a[tx] = t[tx]\n  }\n}\n"),
            "in function 'f': the shape of workspace 't' (`h[0]`) loads from memory: the kernels "
            "take the shape from scalar params; compute it into a `let` first in `a[tx] = t[tx]`");
  EXPECT_EQ(error("func f(a: buffer<float32>[8]) {\n"
                  "  for b in thread(blockIdx.x, 0, 1) {\n"
                  "    for t in thread(threadIdx.x, 0, 4) {\n      a[t] = 1.0\n    }\n"
                  "    for u in thread(threadIdx.x, 0, 8) {\n      a[u] = 2.0\n    }\n"
                  "  }\n}\n"),
            "in function 'f': threadIdx.x is bound twice in one kernel with different extents "
            "(4 and 8): bind each axis with one extent in `for u in thread(threadIdx.x, 0, 8) { "
            "... }`");
  EXPECT_EQ(error("func f(n: int32, a: buffer<float32>[n]) {\n"
                  "  for b in thread(blockIdx.x, 0, n) {\n"
                  "    let m: int32 = b + 1\n"
                  "    for t in thread(threadIdx.x, 0, m) {\n      a[b] = 1.0\n    }\n"
                  "  }\n}\n"),
            "in function 'f': the extent of the loop over threadIdx.x uses 'm', defined inside "
            "the kernel: the host computes launch extents, so they may only use variables "
            "defined outside the thread-bound loops in `for t in thread(threadIdx.x, 0, m) { ... "
            "}`");
  EXPECT_EQ(error("func f(a: buffer<float32>[1]) {\n"
                  "  for t in thread(threadIdx.x, 0, 1) {\n    a[t] = 1.0\n  }\n}\n\n"
                  "func f_kernel(a: buffer<float32>[1]) {\n"
                  "  for t in thread(threadIdx.x, 0, 1) {\n    a[t] = 2.0\n  }\n}\n"),
            "in function 'f': the kernel name 'f_kernel' is taken by another function of the "
            "module: rename that function in `for t in thread(threadIdx.x, 0, 1) { ... }`");
  // A launch extent is host code: it may not read device memory (it did: the interpreter read
  // through the buffer's device handle at the launch).
  EXPECT_EQ(error("func f(n: int32, sizes: buffer<int32>[1], a: buffer<float32>[n]) {\n"
                  "  for b in thread(blockIdx.x, 0, sizes[0]) {\n    a[b] = 1.0\n  }\n}\n"),
            "in function 'f': the extent of the loop over blockIdx.x reads buffer 'sizes', which "
            "lives in device memory: the host computes launch extents and cannot read device "
            "memory; pass the extent as a scalar param in `for b in thread(blockIdx.x, 0, "
            "sizes[0]) { ... }`");
  // The input must verify.
  EXPECT_EQ(error("func f(a: buffer<float32>[1]) {\n  a[0] = 1i32\n}\n"),
            "in function 'f': type mismatch: storing int32 into buffer 'a' of float32: cast the "
            "value in `a[0] = 1i32`");
}

// SplitErrors: what SplitHostDevice guarantees, checked on halves read back from a file. The
// halves it makes pass, as written and after a round trip through the text form each (as a
// saved module keeps them); each kind of tampering is reported.
std::vector<const PrimFunc*> Kernels(const IRModule& device) {
  std::vector<const PrimFunc*> out;
  for (const PrimFunc& f : device.functions()) out.push_back(&f);
  return out;
}

TEST(IrSplit, WhatItMakesPassesSplitErrors) {
  const std::vector<std::pair<std::string, std::string>> gpu = {
      {"matmul.bpir", "matmul_tiled_gpu"},
      {"reduction.bpir", "sum_gpu"},
      {"vector_add.bpir", "vector_add_gpu"}};
  for (const auto& [file, func] : gpu) {
    const SplitResult r = SplitHostDevice(Pick(file, {func}), false);
    EXPECT_EQ(SplitErrors(r.host, Kernels(r.device)), std::vector<std::string>{}) << func;
    const IRModule host = Parse(Print(r.host)), device = Parse(Print(r.device));
    EXPECT_EQ(SplitErrors(host, Kernels(device)), std::vector<std::string>{}) << func;
  }
}

TEST(IrSplit, SplitErrorsChecksWorkspaces) {
  const SplitResult r = SplitHostDevice(Parse(kGridSum), false);
  const std::string host = Print(r.host), device = Print(r.device);
  auto errors = [&](const std::string& h) {
    const IRModule kernels = Parse(device);
    return SplitErrors(Parse(h), Kernels(kernels));
  };
  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  EXPECT_EQ(errors(host), std::vector<std::string>{});
  // Host code reads or writes the workspace, which lives in device memory.
  EXPECT_EQ(
      errors(replace(host, "  call_packed(\"grid_sum_kernel1\"",
                     "  let x: float32 = part[0]\n  call_packed(\"grid_sum_kernel1\"")),
      std::vector<std::string>{
          "in function 'grid_sum': host code loads from buffer 'part', a workspace it "
          "passes to call_packed, which lives in device memory; host code never touches "
          "device memory (only the kernels it launches do) in `let x: float32 = part[0] ... }`"});
  // A workspace that is not a compact global allocation.
  std::vector<std::string> e =
      errors(replace(host, "float32[parts] global", "float32[parts] local"));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NE(e[0].find("argument 3 is buffer 'part', allocated `local` by host code; a workspace "
                      "for the kernel's buffer 'part' is a compact `global` allocation"),
            std::string::npos)
      << e[0];
  // A host allocation of another dtype for the kernel's buffer.
  e = errors(replace(host, "alloc part: float32[parts]", "alloc part: int32[parts]"));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NE(e[0].find("argument 3 is buffer 'part' (int32, rank 1) but the kernel's 'part' is "
                      "float32"),
            std::string::npos)
      << e[0];
}

TEST(IrSplit, SplitErrorsFindsEveryTampering) {
  const SplitResult r = SplitHostDevice(Pick("vector_add.bpir", {"vector_add_gpu"}), false);
  const std::string host = Print(r.host), device = Print(r.device);
  ASSERT_NE(host.find("int64((n + 255) / 256)"), std::string::npos) << host;
  auto errors = [&](const std::string& h, const std::string& d) {
    const IRModule kernels = Parse(d);
    return SplitErrors(Parse(h), Kernels(kernels));
  };
  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  const std::string launch = "  call_packed(";
  // Host code writes device memory ("malloc(): invalid size").
  EXPECT_EQ(errors(replace(host, launch, "  c[0] = 1.0\n" + launch), device),
            std::vector<std::string>{
                "in function 'vector_add_gpu': host code stores to buffer 'c', a parameter, which "
                "lives in device memory; host code never touches device memory (only the kernels "
                "it launches do) in `c[0] = 1.0`"});
  EXPECT_EQ(errors(replace(host, launch, "  let x: float32 = a[3]\n" + launch), device).size(), 1u);
  // Host code runs a grid of its own.
  EXPECT_EQ(errors(replace(host, launch,
                           "  for t in thread(threadIdx.x, 0, 4) {\n    let y: int32 = t\n  }\n" +
                               launch),
                   device),
            std::vector<std::string>{
                "in function 'vector_add_gpu': host code binds a loop to threadIdx.x; it runs on "
                "the CPU, and only the kernels it launches bind thread axes in `for t in "
                "thread(threadIdx.x, 0, 4) { ... }`"});
  // A grid larger than the kernel's loops assume.
  std::vector<std::string> e =
      errors(replace(host, "int64((n + 255) / 256)", "int64((n + 255) / 256 * 64)"), device);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("passes `int64((n + 255) / 256 * 64)` as the extent of blockIdx.x, but the "
                      "kernel binds blockIdx.x with extent `(n + 255) / 256` of its params"),
            std::string::npos)
      << e[0];
  // The same extent over another scalar, and an extent that is not int64.
  EXPECT_EQ(
      errors(replace(host, "int64((n + 255) / 256)", "int64((n + 256) / 256)"), device).size(), 1u);
  EXPECT_EQ(errors(replace(host, "int64(256)", "int32(256)"), device).size(), 1u);
  // Arguments: too few, a scalar for a buffer, a buffer of another dtype.
  e = errors(replace(host, ", int64(256))", ")"), device);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("passes 5 arguments; the kernel takes 4 params and 2 launch extents"),
            std::string::npos)
      << e[0];
  e = errors(replace(host, "n, a, b, c,", "n, n, b, c,"), device);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("argument 1 must be one of the host function's buffer params"),
            std::string::npos)
      << e[0];
  e = errors(replace(replace(host, "c: buffer<float32>[n]",
                             "c: buffer<float32>[n], "
                             "d: buffer<int32>[n]"),
                     "n, a, b, c,", "n, a, b, d,"),
             device);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("argument 3 is buffer 'd' (int32, rank 1) but the kernel's 'c' is float32"),
            std::string::npos)
      << e[0];
  // The kernel side: launch params that are not the axes it binds, two extents for one axis.
  e = errors(host, replace(device, "\"blockIdx.x,threadIdx.x\"", "\"threadIdx.x,blockIdx.x\""));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("in kernel 'vector_add_gpu_kernel': has launch_params "
                      "\"threadIdx.x,blockIdx.x\" but binds \"blockIdx.x,threadIdx.x\""),
            std::string::npos)
      << e[0];
  e = errors(host, replace(device, "for tx in thread(threadIdx.x, 0, 256) {",
                           "for tz in thread(threadIdx.x, 0, 512) {\n      let q: int32 = tz\n"
                           "    }\n    for tx in thread(threadIdx.x, 0, 256) {"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("binds threadIdx.x with two extents (512 and 256)"), std::string::npos)
      << e[0];
  // A call of a name no kernel has is a global function's: not a launch.
  EXPECT_EQ(errors(replace(host, "\"vector_add_gpu_kernel\"", "\"blas.sgemm\""), device),
            std::vector<std::string>{});
}

}  // namespace
