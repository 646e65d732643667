// SPDX-License-Identifier: Apache-2.0
// `backplane serve` end to end: modules and calls. A native module built here loads only on a
// server started with --allow-native-modules, and runs there on random inputs checked against the
// host reference; a registered function is callable by name only when --expose names it, never
// from the host code of an uploaded module, and tensor arguments must stay inside their buffers.
#include <backplane/backplane.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "../module_file.h"
#include "server_test.h"

namespace backplane {
namespace remote {
namespace test {
namespace {

// vector_add built here for the c target (a module that carries native code), saved.
std::string NativeModule(const fs::path& dir, const kernels::Case** out_case) {
  setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);
  const kernels::Case* c = kernels::Find("vector_add");
  if (c == nullptr) throw std::runtime_error("no vector_add in the kernel catalog");
  *out_case = c;
  // The file also holds the GPU variant, which a CPU Target cannot build: only this function.
  const ir::IRModule file = ir::Parse(kernels::ReadKernelFile(c->file), c->file);
  ir::IRModule one;
  one.Add(*file.Find(c->func));
  Module m = Build(ir::Print(one), Target::Parse("c"));
  return m.SaveToBytes();
}

TEST_F(RemoteServer, NativeModulesLoadOnlyWhenAllowed) {
  const kernels::Case* kcase = nullptr;
  const std::string bytes = NativeModule(dir_, &kcase);
  ASSERT_GT(bytes.size(), 100u);
  {
    START_SERVER(server);
    auto stub = Connect(server.target());
    Session session(*stub);
    ASSERT_EQ(session.Hello().code(), 0);
    pb::Reply r = session.LoadModule(bytes, 4096);
    EXPECT_EQ(r.code(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(r.message(), "backplane serve --allow-native-modules")) << r.message();
    EXPECT_TRUE(Contains(r.message(), "does not load native code")) << r.message();
    EXPECT_TRUE(session.Finish().ok());
  }
  START_SERVER(server, {"--allow-native-modules"});
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0);
  EXPECT_TRUE(hello.info().allows_native_modules());
  pb::Reply loaded = session.LoadModule(bytes, 4096);
  ASSERT_EQ(loaded.code(), 0) << loaded.message() << "\n" << server.Log();
  ASSERT_NE(loaded.handle(), 0u);
  EXPECT_NE(std::find(loaded.names().begin(), loaded.names().end(), "vector_add"),
            loaded.names().end());
  EXPECT_EQ(GetStatus(*stub).modules(), 1u);
  // Random inputs, run remotely, compared with the host reference.
  std::vector<kernels::Arg> args = kcase->make_args(kcase->small, 42);
  std::vector<kernels::Arg> want = args;
  kcase->reference(want);
  pb::Command call;
  call.mutable_call()->set_module(loaded.handle());
  call.mutable_call()->set_function("vector_add");
  std::vector<uint64_t> handles(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    const kernels::Arg& a = args[i];
    pb::Arg* arg = call.mutable_call()->add_args();
    if (!a.is_buffer) {
      if (a.dtype.is_float()) {
        arg->set_f(a.scalar);
      } else {
        arg->set_i(static_cast<int64_t>(a.scalar));
      }
      continue;
    }
    std::vector<float> host(a.data.begin(), a.data.end());
    std::string raw(reinterpret_cast<const char*>(host.data()), host.size() * sizeof(float));
    handles[i] = session.Alloc(0, raw.size());
    ASSERT_EQ(session.Write(handles[i], 0, raw).code(), 0);
    pb::TensorArg* t = arg->mutable_tensor();
    t->set_device(0);
    t->set_buffer(handles[i]);
    *t->mutable_dtype() = DType(kDLFloat, 32);
    for (int64_t s : a.shape) t->add_shape(s);
  }
  pb::Reply result = session.Do(call);
  ASSERT_EQ(result.code(), 0) << result.message();
  EXPECT_TRUE(result.value().none());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_output) continue;
    const std::string raw = session.Read(handles[i], 0, args[i].data.size() * sizeof(float));
    ASSERT_EQ(raw.size(), args[i].data.size() * sizeof(float));
    std::vector<float> got(args[i].data.size());
    std::memcpy(got.data(), raw.data(), raw.size());
    kernels::Arg out = args[i];
    out.data.assign(got.begin(), got.end());
    EXPECT_LE(kernels::RelativeError(out, want[i]), kcase->tolerance) << args[i].name;
  }
  // A name the module lacks lists the ones it has.
  call.mutable_call()->set_function("vector_sub");
  pb::Reply missing = session.Do(call);
  EXPECT_EQ(missing.code(), BP_ERR_NOT_FOUND);
  EXPECT_TRUE(Contains(missing.message(), "vector_add")) << missing.message();
  pb::Command free;
  free.mutable_free_module()->set_module(loaded.handle());
  EXPECT_EQ(session.Do(free).code(), 0);
  EXPECT_EQ(GetStatus(*stub).modules(), 0u);
  EXPECT_TRUE(session.Finish().ok());
}

// blas.sgemm (the cpu plugin's) with row-major a [m, k], b [k, n], c [m, n] in buffers of cpu:0.
TEST_F(RemoteServer, OnlyExposedFunctionsCanBeCalledByName) {
  START_SERVER(server, {"--expose", "blas.sgemm"});
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0);
  ASSERT_EQ(hello.info().functions_size(), 1);
  EXPECT_EQ(hello.info().functions(0), "blas.sgemm");
  const int64_t m = 3, n = 4, k = 5;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (float& x : c) x = dist(rng);
  auto upload = [&](const std::vector<float>& v) {
    const std::string raw(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    const uint64_t h = session.Alloc(0, raw.size());
    EXPECT_EQ(session.Write(h, 0, raw).code(), 0);
    return h;
  };
  const uint64_t ha = upload(a), hb = upload(b), hc = upload(c);
  auto matrix = [&](pb::Arg* arg, uint64_t h, int64_t rows, int64_t cols) {
    pb::TensorArg* t = arg->mutable_tensor();
    t->set_device(0);
    t->set_buffer(h);
    *t->mutable_dtype() = DType(kDLFloat, 32);
    t->add_shape(rows);
    t->add_shape(cols);
  };
  pb::Command call;
  pb::Call* p = call.mutable_call();
  p->set_function("blas.sgemm");
  p->add_args()->set_i(m);
  p->add_args()->set_i(n);
  p->add_args()->set_i(k);
  p->add_args()->set_f(1.5);
  matrix(p->add_args(), ha, m, k);
  matrix(p->add_args(), hb, k, n);
  p->add_args()->set_f(0.5);
  matrix(p->add_args(), hc, m, n);
  pb::Reply r = session.Do(call);
  ASSERT_EQ(r.code(), 0) << r.message();
  const std::string raw = session.Read(hc, 0, c.size() * sizeof(float));
  ASSERT_EQ(raw.size(), c.size() * sizeof(float));
  std::vector<float> got(c.size());
  std::memcpy(got.data(), raw.data(), raw.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.5 * c[i * n + j];
      for (int64_t l = 0; l < k; ++l) want += 1.5 * a[i * k + l] * b[l * n + j];
      EXPECT_NEAR(got[i * n + j], want, 1e-5) << i << "," << j;
    }
  }
  // Views past the buffer, negative extents or strides, and too many dimensions are refused
  // before the function sees them.
  auto refused = [&](const std::function<void(pb::TensorArg*)>& edit, const std::string& part) {
    pb::Command bad = call;
    edit(bad.mutable_call()->mutable_args(7)->mutable_tensor());
    pb::Reply e = session.Do(bad);
    EXPECT_EQ(e.code(), BP_ERR_INVALID_ARGUMENT) << part;
    EXPECT_TRUE(Contains(e.message(), part)) << e.message();
  };
  refused([](pb::TensorArg* t) { t->set_shape(0, 4); }, "the buffer holds 48");
  refused([](pb::TensorArg* t) { t->set_byte_offset(4); }, "reaches byte 52");
  refused([](pb::TensorArg* t) { t->set_shape(1, -1); }, "extent -1");
  refused(
      [](pb::TensorArg* t) {
        t->add_strides(4);
        t->add_strides(-1);
      },
      "stride -1");
  refused(
      [](pb::TensorArg* t) {
        t->add_strides(INT64_MAX);
        t->add_strides(1);
      },
      "overflows");
  refused(
      [](pb::TensorArg* t) {
        for (int i = 0; i < 40; ++i) t->add_shape(1);
      },
      "at most 32");
  refused([](pb::TensorArg* t) { t->set_buffer(999); }, "no buffer 999");
  // Functions not exposed are refused, naming the option.
  pb::Command other;
  other.mutable_call()->set_function("device_api.cpu");
  pb::Reply no = session.Do(other);
  EXPECT_EQ(no.code(), BP_ERR_NOT_FOUND);
  EXPECT_TRUE(Contains(no.message(), "--expose device_api.cpu")) << no.message();
  EXPECT_TRUE(session.Finish().ok());
}

// The host code of an uploaded module (ir_host) calls only the module's own kernels: the server
// loads every upload with BP_MODULE_LOAD_NO_GLOBAL_CALLS, so a packed call of a registered
// function (which --expose does not govern) is refused at load, naming the function, and nothing
// runs. A module bp_build made for a GPU kind (ir_host launching opencl kernels) still loads and
// runs, where the server has an OpenCL device.
TEST_F(RemoteServer, UploadedHostCodeCallsOnlyItsOwnKernels) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0) << hello.message();
  // Written as a file directly: host code that calls blas.sgemm (registered by the cpu plugin,
  // which the server loads) on the client's buffers.
  bptest::ModuleFile file;
  file.nodes.push_back(
      {"ir_host",
       "# backplane-ir 1\n\n"
       "func gemm(m: int32, n: int32, k: int32, a: buffer<float32>[m, k], b: buffer<float32>[k, "
       "n], c: buffer<float32>[m, n]) {\n"
       "  call_packed(\"blas.sgemm\", m, n, k, 1.5f64, a, b, 0.5f64, c)\n"
       "}\n",
       {}});
  pb::Reply refused = session.LoadModule(file.Write(), 4096);
  EXPECT_EQ(refused.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(refused.message(),
                       "call_packed(\"blas.sgemm\") names no function of the "
                       "imported modules"))
      << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "BP_MODULE_LOAD_NO_GLOBAL_CALLS")) << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "--expose")) << refused.message();
  EXPECT_EQ(GetStatus(*stub).modules(), 0u);

  // A GPU-kind module: bp_build's host part and its opencl kernels, built here.
  int device = -1;
  std::string target_kind;
  for (int d = 0; d < hello.info().devices_size(); ++d) {
    if (hello.info().devices(d).type() == "opencl" && device < 0) {
      device = d;
      target_kind = hello.info().devices(d).target_kind();
    }
  }
  if (device < 0 || target_kind.empty()) {
    EXPECT_TRUE(session.Finish().ok());
    GTEST_SKIP() << "the server has no OpenCL device: the GPU-kind module is not tried";
  }
  const std::string twice =
      "func twice(n: int32, a: buffer<float32>[n], b: buffer<float32>[n]) {\n"
      "  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
      "    for tx in thread(threadIdx.x, 0, 64) {\n"
      "      if (bx * 64 + tx < n) {\n"
      "        b[bx * 64 + tx] = a[bx * 64 + tx] + a[bx * 64 + tx]\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  // The same kernels beside host code that calls a plugin's internal function: refused whole.
  const Module leaky =
      Build(twice + "\nfunc leak(n: int32) {\n  call_packed(\"device_api.cpu\", n)\n}\n",
            Target::Parse(target_kind));
  pb::Reply leak = session.LoadModule(leaky.SaveToBytes(), 4096);
  EXPECT_EQ(leak.code(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(leak.message(), "in function 'leak': call_packed(\"device_api.cpu\")"))
      << leak.message();
  EXPECT_FALSE(Contains(leak.message(), "twice")) << leak.message();  // its kernel is fine
  EXPECT_EQ(GetStatus(*stub).modules(), 0u);

  const Module built = Build(twice, Target::Parse(target_kind));
  ASSERT_EQ(built.Kind(), "ir_host");
  pb::Reply loaded = session.LoadModule(built.SaveToBytes(), 4096);
  ASSERT_EQ(loaded.code(), 0) << loaded.message() << "\n" << server.Log();
  const int64_t n = 1000;
  std::vector<float> a(n);
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(i) * 0.25f - 7;
  const std::string raw(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(float));
  const uint64_t ha = session.Alloc(static_cast<uint32_t>(device), raw.size());
  const uint64_t hb = session.Alloc(static_cast<uint32_t>(device), raw.size());
  ASSERT_EQ(session.Write(ha, 0, raw).code(), 0);
  pb::Command call;
  call.mutable_call()->set_module(loaded.handle());
  call.mutable_call()->set_function("twice");
  call.mutable_call()->add_args()->set_i(n);
  for (uint64_t h : {ha, hb}) {
    pb::TensorArg* t = call.mutable_call()->add_args()->mutable_tensor();
    t->set_device(static_cast<uint32_t>(device));
    t->set_buffer(h);
    *t->mutable_dtype() = DType(kDLFloat, 32);
    t->add_shape(n);
  }
  pb::Reply ran = session.Do(call);
  ASSERT_EQ(ran.code(), 0) << ran.message();
  pb::Reply error;
  const std::string out = session.Read(hb, 0, raw.size(), &error);
  ASSERT_EQ(out.size(), raw.size()) << error.message();
  std::vector<float> b(n);
  std::memcpy(b.data(), out.data(), out.size());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(b[i], 2 * a[i]) << i;

  // Host code with a device workspace that its two kernels share (docs/ir.md, "Device
  // workspaces"): the server's core allocates it on the server's device for the call.
  const Module shared = Build(
      "func via(n: int32, a: buffer<float32>[n], b: buffer<float32>[n]) {\n"
      "  alloc w: float32[n] global\n"
      "  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
      "    for tx in thread(threadIdx.x, 0, 64) {\n"
      "      if (bx * 64 + tx < n) {\n"
      "        w[n - 1 - (bx * 64 + tx)] = a[bx * 64 + tx] * 3.0\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  for by in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
      "    for ty in thread(threadIdx.x, 0, 64) {\n"
      "      if (by * 64 + ty < n) {\n"
      "        b[by * 64 + ty] = w[by * 64 + ty] + 1.0\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n",
      Target::Parse(target_kind));
  pb::Reply loaded_via = session.LoadModule(shared.SaveToBytes(), 4096);
  ASSERT_EQ(loaded_via.code(), 0) << loaded_via.message() << "\n" << server.Log();
  call.mutable_call()->set_module(loaded_via.handle());
  call.mutable_call()->set_function("via");
  pb::Reply ran_via = session.Do(call);
  ASSERT_EQ(ran_via.code(), 0) << ran_via.message();
  const std::string out_via = session.Read(hb, 0, raw.size(), &error);
  ASSERT_EQ(out_via.size(), raw.size()) << error.message();
  std::memcpy(b.data(), out_via.data(), out_via.size());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(b[i], a[n - 1 - i] * 3.0f + 1.0f) << i;
  EXPECT_TRUE(session.Finish().ok());
}

// A client that uploads a GPU Target's kernels without the host code that
// launches them cannot call one on a grid of its choosing (100000 x 64 threads over 64 floats
// corrupted the server's heap); the upload is refused, naming why, and the server goes on.
TEST_F(RemoteServer, KernelsAloneAreRefusedSoNoClientChoosesTheirGrid) {
  START_SERVER(server);
  auto stub = Connect(server.target());
  Session session(*stub);
  pb::Reply hello = session.Hello();
  ASSERT_EQ(hello.code(), 0) << hello.message();
  int device = -1;
  std::string target_kind;
  for (int d = 0; d < hello.info().devices_size() && device < 0; ++d) {
    const std::string type = hello.info().devices(d).type();
    if ((type == "opencl" || type == "vulkan") && !hello.info().devices(d).target_kind().empty()) {
      device = d;
      target_kind = hello.info().devices(d).target_kind();
    }
  }
  if (device < 0) {
    EXPECT_TRUE(session.Finish().ok());
    GTEST_SKIP() << "the server has no OpenCL or Vulkan device";
  }
  const Module built = Build(
      "func fill(n: int32, a: buffer<float32>[n]) {\n"
      "  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
      "    for tx in thread(threadIdx.x, 0, 64) {\n"
      "      if (bx * 64 + tx < n) { a[bx * 64 + tx] = 1.0 }\n"
      "    }\n"
      "  }\n"
      "}\n",
      Target::Parse(target_kind));
  ASSERT_EQ(built.Kind(), "ir_host");
  const std::vector<Module> kernels = built.Imports();
  ASSERT_EQ(kernels.size(), 1u);
  pb::Reply refused = session.LoadModule(kernels[0].SaveToBytes(), 4096);
  EXPECT_EQ(refused.code(), BP_ERR_INVALID_ARGUMENT) << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "kind '" + kernels[0].Kind() + "'")) << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "grid their caller chooses")) << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "ir_host")) << refused.message();
  EXPECT_EQ(GetStatus(*stub).modules(), 0u);
  // The host code bp_build made loads, and runs on the grid its loops assume.
  pb::Reply loaded = session.LoadModule(built.SaveToBytes(), 4096);
  ASSERT_EQ(loaded.code(), 0) << loaded.message();
  const uint64_t buf = session.Alloc(static_cast<uint32_t>(device), 64 * sizeof(float));
  pb::Command call;
  call.mutable_call()->set_module(loaded.handle());
  call.mutable_call()->set_function("fill");
  call.mutable_call()->add_args()->set_i(64);
  pb::TensorArg* t = call.mutable_call()->add_args()->mutable_tensor();
  t->set_device(static_cast<uint32_t>(device));
  t->set_buffer(buf);
  *t->mutable_dtype() = DType(kDLFloat, 32);
  t->add_shape(64);
  pb::Reply ran = session.Do(call);
  ASSERT_EQ(ran.code(), 0) << ran.message();
  const std::string out = session.Read(buf, 0, 64 * sizeof(float));
  ASSERT_EQ(out.size(), 64 * sizeof(float));
  std::vector<float> got(64);
  std::memcpy(got.data(), out.data(), out.size());
  EXPECT_EQ(got, std::vector<float>(64, 1.0f));
  EXPECT_EQ(session.Ping().code(), 0);
  EXPECT_TRUE(session.Finish().ok());
}

}  // namespace
}  // namespace test
}  // namespace remote
}  // namespace backplane
