// SPDX-License-Identifier: Apache-2.0
// target.build.opencl on the real ICD loader and driver (PoCL in CI): every GPU kernel of the
// catalog built by bp_build for Target::FromDevice(opencl:0) runs on random inputs and
// matches the float64 reference, also after save and load; the generated OpenCL C; the disk
// cache of program binaries (a second build skips the compiler, a damaged entry is rebuilt);
// a build error carries the OpenCL build log; wrong arguments are clean errors; kernels run on
// the stream SetStream made active; tensors at byte offsets. Each test is a process of its
// own (gtest_discover_tests), so each sets its own cache folder before the plugin loads.
// Skipped, with the reason, where no OpenCL device exists.
#include <stdlib.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../f64_math_cases.h"
#include "plugins/half_mix.h"
#include "plugins/test_util.h"

namespace {

namespace fs = std::filesystem;
namespace kernels = backplane::kernels;
using backplane::Device;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;

const DLDataType kF32{kDLFloat, 32, 1};

class OpenCLCodegenTest : public ::testing::Test {
 protected:
  // `shared_cache`: the kernel tests share one cache folder, so a second run of the suite
  // compiles nothing; the others get a fresh folder of their own, so what they find there is
  // what they put there.
  void SetUpCache(bool shared_cache) {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    cache_home_ = std::string(BACKPLANE_TEST_SCRATCH_DIR) + "/opencl_cache/" +
                  (shared_cache ? std::string("shared") : Sanitized(name));
    if (!shared_cache) fs::remove_all(cache_home_);
    fs::create_directories(cache_home_);
    fs::permissions(cache_home_, fs::perms::owner_all, fs::perm_options::replace);
    setenv("XDG_CACHE_HOME", cache_home_.c_str(), 1);
    ASSERT_TRUE(
        bptest::Capture(
            bp_plugin_load(
                (std::string(BACKPLANE_OPENCL_PLUGIN_DIR) + "/libbackplane_opencl.so").c_str()))
            .ok());
    if (!backplane::DeviceAPI::Get(Cl()).Exists()) {
      GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd for one on the CPU)";
    }
  }
  void SetUp() override { SetUpCache(false); }
  static std::string Sanitized(std::string s) {
    for (char& c : s) {
      if (c == '/') c = '_';
    }
    return s;
  }
  static Device Cl() { return Device("opencl", 0); }
  static Target ClTarget() { return Target::FromDevice(Cl()); }
  static Module BuildCase(const kernels::Case& c) {
    return backplane::Build(backplane::runner::KernelSource(c), ClTarget());
  }
  static std::string Stats() {
    return backplane::Function::Get("opencl.program_cache_stats")().AsString();
  }
  std::string CacheDir() const { return cache_home_ + "/backplane/opencl"; }
  std::vector<fs::path> CacheEntries() const {
    std::vector<fs::path> out;
    if (!fs::exists(CacheDir())) return out;
    for (const auto& e : fs::directory_iterator(CacheDir())) {
      if (e.path().extension() == ".bin") out.push_back(e.path());
    }
    return out;
  }
  std::string cache_home_;
};

std::vector<std::string> GpuKernels() {
  std::vector<std::string> names;
  for (const kernels::Case& c : kernels::Catalog()) {
    if (c.needs_threads) names.push_back(c.func);
  }
  return names;
}

class OpenCLKernelTest : public OpenCLCodegenTest,
                         public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override { SetUpCache(true); }
};

TEST_P(OpenCLKernelTest, BuildsRunsAndMatchesTheReference) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  Module m = BuildCase(*c);
  EXPECT_EQ(m.Kind(), "ir_host");
  ASSERT_EQ(m.Imports().size(), 1u);
  EXPECT_EQ(m.Imports()[0].Kind(), "opencl");
  // A grid-wide reduction (sum_gpu, sum4_gpu) is two kernels sharing a workspace (docs/ir.md).
  EXPECT_EQ(
      m.Imports()[0].ListFunctions(),
      (!c->grid_param.empty() ? std::vector<std::string>{c->func + "_kernel0", c->func + "_kernel1"}
                              : std::vector<std::string>{c->func + "_kernel"}));
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Cl(), c->small, 1);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;
  EXPECT_LE(r.max_error, c->tolerance);

  // The whole tree saves and loads back; the loaded module builds its program again (from
  // the disk cache) and runs on other random inputs.
  Module loaded = Module::LoadFromBytes(m.SaveToBytes());
  ASSERT_EQ(loaded.Imports().size(), 1u);
  EXPECT_EQ(loaded.Imports()[0].Kind(), "opencl");
  EXPECT_EQ(loaded.Imports()[0].InspectSource(), m.Imports()[0].InspectSource());
  r = backplane::runner::RunCase(*c, loaded, Cl(), c->small, 1, 7);
  EXPECT_TRUE(r.ok) << c->func << " after save and load: " << r.error;
  // Two programs built (one per module); the second at least came from the disk cache.
  const std::string stats = Stats();
  EXPECT_TRUE(stats == "compiled=1 loaded=1" || stats == "compiled=0 loaded=2") << stats;
}

// With -bounds-check every GPU kernel of the catalog still matches: no false alarm from
// shared memory, barriers or two-dimensional buffers.
TEST_P(OpenCLKernelTest, MatchesTheReferenceWithBoundsCheck) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  const Target target =
      Target::Parse("opencl -bounds-check -max_num_threads=" +
                    std::to_string(ClTarget().GetAttr<int64_t>("max_num_threads").value_or(256)));
  Module m = backplane::Build(backplane::runner::KernelSource(*c), target);
  EXPECT_NE(m.Imports()[0].InspectSource().find("bp_chk("), std::string::npos);
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Cl(), c->small, 1, 3);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;
  EXPECT_LE(r.max_error, c->tolerance);
}

INSTANTIATE_TEST_SUITE_P(Catalog, OpenCLKernelTest, ::testing::ValuesIn(GpuKernels()),
                         [](const auto& param_info) { return param_info.param; });

TEST_F(OpenCLCodegenTest, SourceIsOpenCLC) {
  Module m = BuildCase(*kernels::Find("transpose_gpu"));
  const std::string cl = m.Imports()[0].InspectSource();
  for (const char* want : {"__kernel void transpose_gpu_kernel(", "__global float* restrict bp_p_a",
                           "const long bp_o_a", "get_group_id(1)", "get_local_id(0)",
                           "__local float tile[272];", "barrier(CLK_LOCAL_MEM_FENCE);"}) {
    EXPECT_NE(cl.find(want), std::string::npos) << "no '" << want << "' in\n" << cl;
  }
  // __local arrays sit at the kernel's outermost scope, before any thread index is read.
  EXPECT_LT(cl.find("__local float tile[272];"), cl.find("get_group_id")) << cl;
  EXPECT_EQ(m.Imports()[0].InspectSource("ir").find("# backplane-ir "), 0u);
  // An `unrolled` loop is a hint the driver may ignore; float literals are float.
  const std::string mm = BuildCase(*kernels::Find("matmul_tiled_gpu")).Imports()[0].InspectSource();
  for (const char* want : {"#ifndef BP_NO_UNROLL_HINTS", "#pragma unroll 8", "0.0f"}) {
    EXPECT_NE(mm.find(want), std::string::npos) << "no '" << want << "' in\n" << mm;
  }
  // Math intrinsics are OpenCL's overloaded builtins, not C's expf.
  const std::string softmax = BuildCase(*kernels::Find("softmax_gpu")).Imports()[0].InspectSource();
  EXPECT_NE(softmax.find("exp("), std::string::npos) << softmax;
  EXPECT_EQ(softmax.find("expf("), std::string::npos) << softmax;
}

TEST_F(OpenCLCodegenTest, ASecondBuildSkipsTheCompiler) {
  // PoCL's own kernel cache would hide the difference: off for this process.
  setenv("POCL_KERNEL_CACHE", "0", 1);
  const kernels::Case* c = kernels::Find("matmul_tiled_gpu");
  auto first_call = [&]() {
    Module m = BuildCase(*c);
    const auto t0 = std::chrono::steady_clock::now();
    backplane::runner::Result r = backplane::runner::RunCase(*c, m, Cl(), c->small, 1);
    EXPECT_TRUE(r.ok) << r.error;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double cold = first_call();
  EXPECT_EQ(Stats(), "compiled=1 loaded=0");
  ASSERT_EQ(CacheEntries().size(), 1u) << "no program binary in " << CacheDir();
  const double warm = first_call();  // a new module: its program comes from the disk cache
  EXPECT_EQ(Stats(), "compiled=1 loaded=1");
  EXPECT_LT(warm, cold) << "cold " << cold << " s, warm " << warm << " s";
  std::printf("first call of matmul_tiled_gpu: compiled %.3f s, from the cache %.3f s\n", cold,
              warm);
}

TEST_F(OpenCLCodegenTest, ADamagedCacheEntryIsRebuilt) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  EXPECT_TRUE(backplane::runner::RunCase(*c, BuildCase(*c), Cl(), c->small, 1).ok);
  std::vector<fs::path> entries = CacheEntries();
  ASSERT_EQ(entries.size(), 1u);
  const auto size = fs::file_size(entries[0]);
  // Truncated, then flipped bytes: both are refused by the checksum and compiled again.
  fs::resize_file(entries[0], size / 2);
  backplane::runner::Result r = backplane::runner::RunCase(*c, BuildCase(*c), Cl(), c->small, 1);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(Stats(), "compiled=2 loaded=0");
  EXPECT_GT(fs::file_size(entries[0]), size / 2) << "the entry was not replaced";
  {
    std::fstream f(entries[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 100));
    f.write("garbage!", 8);
  }
  r = backplane::runner::RunCase(*c, BuildCase(*c), Cl(), c->small, 1);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(Stats(), "compiled=3 loaded=0");
  r = backplane::runner::RunCase(*c, BuildCase(*c), Cl(), c->small, 1);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(Stats(), "compiled=3 loaded=1");
}

TEST_F(OpenCLCodegenTest, ABuildErrorCarriesTheBuildLog) {
  // A module whose OpenCL C was edited by hand does not load (the loader
  // emits the C again from the IR and compares; saved_module_tamper_test has the cases).
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  const Module built = BuildCase(*c).Imports()[0];
  std::string source = built.InspectSource();
  const std::string good = "get_local_id(0)", bad = "get_lokal_id(0)";
  const size_t at = source.find(good);
  ASSERT_NE(at, std::string::npos);
  source.replace(at, good.size(), bad);
  const std::string bytes = "BPOCLMOD2\n" + nlohmann::json{{"ir", built.InspectSource("ir")},
                                                           {"source", source},
                                                           {"fault_sites", "[]"},
                                                           {"fp_contract", false},
                                                           {"bounds_check", false}}
                                                .dump();
  bp_object_t* obj = nullptr;
  backplane::Check(bp_bytes_create(bytes.data(), bytes.size(), &obj));
  backplane::ObjectRef blob = backplane::ObjectRef::Adopt(obj);
  bp_value_t arg{};
  arg.type = BP_VALUE_OBJECT;
  arg.u.v_obj = blob.get();
  const bptest::Status refused = bptest::CaptureError([&] {
    backplane::Function::Get("runtime.module.load_from_bytes.opencl").CallPacked(&arg, 1);
  });
  EXPECT_EQ(refused.kind, BP_ERR_INVALID_ARGUMENT) << refused;
  EXPECT_NE(refused.message.find("holds OpenCL C that is not what this Backplane generates"),
            std::string::npos)
      << refused;
}

// float16 with and without cl_khr_fp16: the device's own Target says
// supports_float16 as its supports_fp16 attribute (cl_khr_fp16) does. With it, float16 is
// OpenCL's half; without it (PoCL on a CPU has none) a float16 value is a float rounded to half
// after every operation and float16 memory goes through vload_half / vstore_half_rte, so the
// kernel runs either way: float16 buffers, a float16 scalar, a shared float16 array across a
// barrier and + - * / max, bit for bit as the interpreter computes them (3 seeds x 64 random
// halves), also after save and load and with -bounds-check. A module built for a Target that claims
// cl_khr_fp16 is refused by name on a device without it, before the driver compiles anything.
TEST_F(OpenCLCodegenTest, Float16RunsWithOrWithoutClKhrFp16) {
  const char* text = bptest::kHalfMixText;
  const bool has_fp16 = backplane::DeviceAPI::Get(Cl()).GetAttr(BP_ATTR_SUPPORTS_FP16).AsInt() == 1;
  EXPECT_EQ(ClTarget().GetAttr<bool>("supports_float16").value_or(!has_fp16), has_fp16);
  const DLDataType kF16{kDLFloat, 16, 1};
  // Also with -bounds-check, whose checked accesses read and write the halves the same way.
  nlohmann::json checked = nlohmann::json::parse(ClTarget().ToJson());
  checked["bounds-check"] = true;
  for (const Target& target : {ClTarget(), Target::Parse(checked.dump())}) {
    const Module m = backplane::Build(text, target);
    const std::string source = m.Imports()[0].InspectSource();
    EXPECT_NE(source.find(has_fp16 ? "cl_khr_fp16" : "vstore_half_rte("), std::string::npos)
        << source;
    const Module loaded = Module::LoadFromBytes(m.SaveToBytes());
    for (uint32_t seed : {1u, 2u, 3u}) {
      const bptest::HalfMixInputs in(seed);
      const std::vector<uint16_t> want = bptest::HalfMixReference(in);
      for (const Module* mod : std::vector<const Module*>{&m, &loaded}) {
        EXPECT_EQ(bptest::RunHalfMix(*mod, Cl(), in), want)
            << "seed " << seed << (mod == &m ? "" : ", saved and loaded back") << " for "
            << target.ToJson();
      }
    }
  }
  if (has_fp16) return;
  // Built for a Target that claims the extension: the call is refused by name, each time,
  // before the driver compiles anything.
  const Module claimed =
      backplane::Build(text, Target::Parse(R"({"kind": "opencl", "supports_float16": true})"));
  Tensor ta = Tensor::Empty({64}, kF16, Cl()), tb = Tensor::Empty({64}, kF16, Cl());
  Tensor to = Tensor::Empty({64}, kF16, Cl());
  backplane::Function f = claimed.GetFunction("half_mix");
  const std::string stats = Stats();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bptest::Status s = bptest::CaptureError([&] {
      f(64, 1.25, ta.dl(), tb.dl(), to.dl());
      backplane::Check(bp_device_stream_sync(Cl().dl, nullptr));
    });
    EXPECT_EQ(s.kind, BP_ERR_UNSUPPORTED) << s;
    EXPECT_NE(s.message.find("cl_khr_fp16"), std::string::npos) << s;
    EXPECT_NE(s.message.find("lacks it"), std::string::npos) << s;
    EXPECT_EQ(s.message.find("bug in the opencl code generator"), std::string::npos) << s;
  }
  EXPECT_EQ(Stats(), stats) << "the driver compiled a program it would refuse";
}

TEST_F(OpenCLCodegenTest, WrongArgumentsAreCleanErrors) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  Module m = BuildCase(*c);
  backplane::Function f = m.GetFunction(c->func);
  Tensor a = Tensor::Empty({100}, kF32, Cl());
  Tensor b = Tensor::Empty({99}, kF32, Cl());
  Tensor host = Tensor::Empty({100}, kF32, Device("cpu", 0));
  auto expect_error = [](auto call, const std::string& want) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning " << want;
    } catch (const backplane::Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error([&] { f(100, a.dl(), b.dl(), a.dl()); }, "[99]");
  expect_error([&] { f(100, a.dl(), host.dl(), a.dl()); }, "copy it to opencl:0");
  // The kernel itself, called without its launch extents.
  backplane::Function kernel = m.Imports()[0].GetFunction(c->func + "_kernel");
  expect_error([&] { kernel(100, a.dl(), a.dl(), a.dl()); }, "launch extent");
  // A written buffer that overlaps an input (the kernel's pointers are restrict).
  expect_error([&] { kernel(100, a.dl(), a.dl(), a.dl(), int64_t{1}, int64_t{256}); },
               "overlap in memory");
  // A block larger than the device allows.
  Tensor c_out = Tensor::Empty({100}, kF32, Cl());
  expect_error([&] { kernel(100, a.dl(), a.dl(), c_out.dl(), int64_t{1}, int64_t{1} << 20); },
               "use smaller blocks");
  // Byte offsets whose sum with the span (or with the handle's own offset) wraps around 2^64:
  // refused, never a launch on memory before the buffer.
  for (const uint64_t offset : {~uint64_t{0} - 3, ~uint64_t{0} - 399, uint64_t{1} << 63}) {
    DLTensor far = *a.dl();
    far.byte_offset = offset;
    expect_error([&] { kernel(100, &far, a.dl(), c_out.dl(), int64_t{1}, int64_t{100}); },
                 "pass a tensor inside it");
    expect_error([&] { kernel(100, a.dl(), a.dl(), &far, int64_t{1}, int64_t{100}); },
                 "pass a tensor inside it");
  }
}

// Random floats in [-1, 1].
std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST_F(OpenCLCodegenTest, TensorsAtByteOffsets) {
  // Three 1000-element views into one buffer: vector_add reads two and writes the third.
  const int64_t n = 1000;
  Tensor whole = Tensor::Empty({3 * n + 16}, kF32, Cl());
  const std::vector<float> data = Random(static_cast<size_t>(3 * n + 16), 5);
  whole.CopyFromBytes(data.data(), data.size() * sizeof(float));
  int64_t shape[1] = {n};
  auto view = [&](int64_t first) {
    DLTensor t = *whole.dl();
    t.shape = shape;
    t.byte_offset = static_cast<uint64_t>(first) * sizeof(float);
    return t;
  };
  DLTensor a = view(3), b = view(3 + n), out = view(3 + 2 * n);
  Module m = BuildCase(*kernels::Find("vector_add_gpu"));
  m.GetFunction("vector_add_gpu")(n, &a, &b, &out);
  std::vector<float> got(data.size());
  whole.CopyToBytes(got.data(), got.size() * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[static_cast<size_t>(3 + 2 * n + i)],
              data[static_cast<size_t>(3 + i)] + data[static_cast<size_t>(3 + n + i)])
        << i;
  }
  // Untouched around the output.
  EXPECT_EQ(got[2], data[2]);
  EXPECT_EQ(got[static_cast<size_t>(3 + 3 * n)], data[static_cast<size_t>(3 + 3 * n)]);
}

TEST_F(OpenCLCodegenTest, KernelsRunOnTheActiveStream) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  Module m = BuildCase(*c);
  const int64_t n = 1 << 16;
  const std::vector<float> a_host = Random(n, 1), b_host = Random(n, 2);
  Tensor a = Tensor::Empty({n}, kF32, Cl()), b = Tensor::Empty({n}, kF32, Cl()),
         out = Tensor::Empty({n}, kF32, Cl());
  a.CopyFromBytes(a_host.data(), n * sizeof(float));
  b.CopyFromBytes(b_host.data(), n * sizeof(float));
  backplane::Check(bp_device_stream_sync(Cl().dl, nullptr));
  bp_stream_t s = nullptr;
  backplane::Check(bp_device_stream_create(Cl().dl, &s));
  backplane::Check(bp_device_stream_set(Cl().dl, s));
  m.GetFunction(c->func)(n, a.dl(), b.dl(), out.dl());
  // Read on the active stream and wait for it alone: the kernel must have been ahead of it.
  std::vector<float> got(n, std::nanf(""));
  out.CopyToBytes(got.data(), n * sizeof(float), s);
  backplane::Check(bp_device_stream_sync(Cl().dl, s));
  backplane::Check(bp_device_stream_set(Cl().dl, nullptr));
  backplane::Check(bp_device_stream_free(Cl().dl, s));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a_host[i] + b_host[i]) << i;
}

// The module sets a kernel argument only when its value changed since the last launch; calls
// that change one argument at a time (the scalar, a tensor, the size, a buffer freed and
// allocated again, which may get the same cl_mem) must each see their own arguments.
TEST_F(OpenCLCodegenTest, EachCallUsesItsOwnArgumentsWhenOnlySomeChange) {
  const kernels::Case* c = kernels::Find("saxpy_gpu");
  Module m = BuildCase(*c);
  backplane::Function saxpy = m.GetFunction(c->func);
  const int64_t n = 3000;
  auto upload = [&](const std::vector<float>& v) {
    Tensor t = Tensor::Empty({static_cast<int64_t>(v.size())}, kF32, Cl());
    t.CopyFromBytes(v.data(), v.size() * sizeof(float));
    return t;
  };
  auto download = [&](const Tensor& t, size_t count) {
    std::vector<float> v(count, std::nanf(""));
    t.CopyToBytes(v.data(), count * sizeof(float));
    return v;
  };
  // y = alpha * x + y, on the host in float32, as the kernel computes it.
  auto expect = [&](const char* step, float alpha, const std::vector<float>& x,
                    std::vector<float>* y_ref, const Tensor& y, size_t count) {
    for (size_t i = 0; i < count; ++i) (*y_ref)[i] = alpha * x[i] + (*y_ref)[i];
    const std::vector<float> got = download(y, y_ref->size());
    for (size_t i = 0; i < y_ref->size(); ++i) {
      ASSERT_NEAR(got[i], (*y_ref)[i], 1e-5f) << step << ", element " << i;
    }
  };
  const std::vector<float> x1 = Random(n, 11), x2 = Random(n, 12);
  std::vector<float> y1_ref = Random(n, 13), y2_ref = Random(n, 14);
  Tensor x1_t = upload(x1), x2_t = upload(x2), y1_t = upload(y1_ref), y2_t = upload(y2_ref);

  saxpy(int32_t{n}, 0.5f, x1_t.dl(), y1_t.dl());
  expect("first call", 0.5f, x1, &y1_ref, y1_t, n);
  saxpy(int32_t{n}, 0.5f, x1_t.dl(), y1_t.dl());  // the same arguments again
  expect("same arguments", 0.5f, x1, &y1_ref, y1_t, n);
  saxpy(int32_t{n}, -2.0f, x1_t.dl(), y1_t.dl());  // only the scalar changes
  expect("new alpha", -2.0f, x1, &y1_ref, y1_t, n);
  saxpy(int32_t{n}, -2.0f, x2_t.dl(), y1_t.dl());  // only x changes
  expect("new x", -2.0f, x2, &y1_ref, y1_t, n);
  saxpy(int32_t{n}, -2.0f, x2_t.dl(), y2_t.dl());  // only y changes
  expect("new y", -2.0f, x2, &y2_ref, y2_t, n);

  // Only n changes: a view of the first 1000 elements; the rest of y is untouched.
  const int64_t part = 1000;
  int64_t shape[1] = {part};
  DLTensor x_part = *x2_t.dl(), y_part = *y2_t.dl();
  x_part.shape = shape;
  y_part.shape = shape;
  saxpy(int32_t{part}, -2.0f, &x_part, &y_part);
  expect("smaller n", -2.0f, x2, &y2_ref, y2_t, static_cast<size_t>(part));

  // A new x in place of a freed one: the driver may hand out the freed cl_mem again.
  x1_t = Tensor();
  const std::vector<float> x3 = Random(n, 15);
  Tensor x3_t = upload(x3);
  saxpy(int32_t{n}, 3.0f, x3_t.dl(), y2_t.dl());
  expect("reallocated x", 3.0f, x3, &y2_ref, y2_t, n);
}

// The same, counted: opencl.kernel_arg_stats says how many arguments were
// set with clSetKernelArg and how many were left as the last launch set them. saxpy_gpu takes
// six: n, alpha, and a cl_mem and a byte offset for each of x and y.
TEST_F(OpenCLCodegenTest, ArgumentsAreSetOnlyWhenTheyChanged) {
  const kernels::Case* c = kernels::Find("saxpy_gpu");
  Module m = BuildCase(*c);
  backplane::Function saxpy = m.GetFunction(c->func);
  const int64_t n = 1000;
  Tensor x = Tensor::Empty({n}, kF32, Cl()), x2 = Tensor::Empty({n}, kF32, Cl());
  Tensor y = Tensor::Empty({n}, kF32, Cl());
  const std::vector<float> zeros(n, 0.0f);
  for (Tensor* t : {&x, &x2, &y}) t->CopyFromBytes(zeros.data(), n * sizeof(float));
  struct Counts {
    long long set = -1, unchanged = -1;
  };
  auto counts = [] {
    Counts k;
    const std::string text = backplane::Function::Get("opencl.kernel_arg_stats")().AsString();
    std::sscanf(text.c_str(), "set=%lld unchanged=%lld", &k.set, &k.unchanged);
    return k;
  };
  // The arguments one call set and left unchanged.
  auto call = [&](const char* step, int32_t size, float alpha, const Tensor& xt, long long set,
                  long long unchanged) {
    const Counts before = counts();
    saxpy(size, alpha, xt.dl(), y.dl());
    const Counts after = counts();
    EXPECT_EQ(after.set - before.set, set) << step;
    EXPECT_EQ(after.unchanged - before.unchanged, unchanged) << step;
  };
  call("first call", int32_t{n}, 0.5f, x, 6, 0);
  call("the same arguments", int32_t{n}, 0.5f, x, 0, 6);
  call("the same arguments again", int32_t{n}, 0.5f, x, 0, 6);
  call("a new alpha", int32_t{n}, -2.0f, x, 1, 5);
  call("a new x (its cl_mem; the offset is 0 again)", int32_t{n}, -2.0f, x2, 1, 5);
  call("both back", int32_t{n}, 0.5f, x, 2, 4);
  backplane::Check(bp_device_stream_sync(Cl().dl, nullptr));
}

}  // namespace

// ---- Floating-point contraction -------------------------------------------

const char* kMulAdd = R"(# backplane-ir 1
func muladd(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n], d: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {
    for tx in thread(threadIdx.x, 0, 64) {
      if (bx * 64 + tx < n) {
        d[bx * 64 + tx] = a[bx * 64 + tx] * b[bx * 64 + tx] + c[bx * 64 + tx]
      }
    }
  }
}
)";

// a*b+c rounds twice, as docs/ir.md says and the c target and the interpreter compute it: no
// FMA unless the Target asks for fast-math-contract. The inputs are random floats where an FMA
// gives another result in about a third of the elements; the result must match a float32
// multiply-then-add reference bit for bit.
TEST_F(OpenCLCodegenTest, MultiplyAddIsNotContractedUnlessTheTargetAsks) {
  const int64_t n = 4096;
  const std::vector<float> a = Random(n, 21), b = Random(n, 22), c = Random(n, 23);
  std::vector<float> want(n);
  int64_t fma_differs = 0;
  for (int64_t i = 0; i < n; ++i) {
    volatile float p = a[i] * b[i];  // volatile: the compiler of this test must not fuse either
    volatile float r = p + c[i];
    want[i] = r;
    fma_differs += std::fma(a[i], b[i], c[i]) != want[i];
  }
  ASSERT_GT(fma_differs, n / 10) << "the inputs do not tell an FMA from a multiply and an add";
  Tensor ta = Tensor::Empty({n}, kF32, Cl()), tb = Tensor::Empty({n}, kF32, Cl());
  Tensor tc = Tensor::Empty({n}, kF32, Cl()), td = Tensor::Empty({n}, kF32, Cl());
  ta.CopyFrom(a);
  tb.CopyFrom(b);
  tc.CopyFrom(c);
  Module m = backplane::Build(kMulAdd, ClTarget());
  EXPECT_NE(m.Imports()[0].InspectSource().find("#pragma OPENCL FP_CONTRACT OFF"),
            std::string::npos);
  m.GetFunction("muladd")(n, ta.dl(), tb.dl(), tc.dl(), td.dl());
  const std::vector<float> got = td.ToVector<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && wrong++ < 5) {
      ADD_FAILURE() << "at " << i << ": " << a[i] << " * " << b[i] << " + " << c[i] << " gave "
                    << got[i] << ", expected " << want[i] << " (an FMA gives "
                    << std::fma(a[i], b[i], c[i]) << ")";
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << n << " results differ from the multiply-then-add reference";
  // Asked for, contraction is allowed (what the device then does is its own business).
  Module fused = backplane::Build(kMulAdd, Target::Parse("opencl -fast-math-contract"));
  EXPECT_NE(fused.Imports()[0].InspectSource().find("#pragma OPENCL FP_CONTRACT ON"),
            std::string::npos);
  fused.GetFunction("muladd")(n, ta.dl(), tb.dl(), tc.dl(), td.dl());
  // Read back before the test ends: a launch still queued at exit leaves PoCL compiling on its
  // worker thread while the process tears LLVM down (a crash after the test passed).
  const std::vector<float> contracted = td.ToVector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(contracted[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << "at " << i;
  }
}

// ---- Run-time checks (docs/codegen-guide.md "Run-time checks") -----

// `body` inside one thread an element: `i` is the element, below n.
std::string OneThreadAnElement(const std::string& params, const std::string& body) {
  return "# backplane-ir 1\nfunc f(" + params +
         ") {\n  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
         "    for tx in thread(threadIdx.x, 0, 64) {\n      let i: int32 = bx * 64 + tx\n"
         "      if (i < n) {\n        " +
         body + "\n      }\n    }\n  }\n}\n";
}

// A division by zero in a kernel is the interpreter's error from the fault record, not an
// undefined value; INT_MIN / -1 wraps; floordiv and floormod likewise, 32 and 64 bits.
TEST_F(OpenCLCodegenTest, IntegerDivisionByZeroIsAnErrorAndIntMinByMinusOneWraps) {
  const int64_t n = 200;
  for (const char* dtype : {"int32", "int64"}) {
    SCOPED_TRACE(dtype);
    const std::string t = dtype;
    const bool wide = t == "int64";
    Module m = backplane::Build(
        OneThreadAnElement("n: int32, a: buffer<" + t + ">[n], b: buffer<" + t +
                               ">[n], q: buffer<" + t + ">[n, 3]",
                           "q[i, 0] = a[i] / b[i]\n        q[i, 1] = floordiv(a[i], b[i])\n"
                           "        q[i, 2] = floormod(a[i], b[i])"),
        ClTarget());
    EXPECT_NE(m.Imports()[0].InspectSource().find("__global bp_fault_t* bp_fault"),
              std::string::npos);
    std::mt19937_64 rng(17);
    std::vector<int64_t> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = static_cast<int64_t>(rng() % 20001) - 10000;
      do b[i] = static_cast<int64_t>(rng() % 201) - 100;
      while (b[i] == 0);
    }
    a[7] = wide ? INT64_MIN : INT32_MIN;
    b[7] = -1;
    const DLDataType dt{kDLInt, static_cast<uint8_t>(wide ? 64 : 32), 1};
    auto upload = [&](const std::vector<int64_t>& v, std::vector<int64_t> shape) {
      Tensor x = Tensor::Empty(shape, dt, Cl());
      if (wide) {
        x.CopyFrom(v);
      } else {
        x.CopyFrom(std::vector<int32_t>(v.begin(), v.end()));
      }
      return x;
    };
    Tensor ta = upload(a, {n}), tb = upload(b, {n}),
           tq = upload(std::vector<int64_t>(3 * n), {n, 3});
    m.GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
    std::vector<int64_t> q;
    if (wide) {
      q = tq.ToVector<int64_t>();
    } else {
      std::vector<int32_t> q32 = tq.ToVector<int32_t>();
      q.assign(q32.begin(), q32.end());
    }
    for (int64_t i = 0; i < n; ++i) {
      if (b[i] == -1) {
        // -INT_MIN wraps to INT_MIN; the remainder is 0.
        EXPECT_EQ(q[3 * i], i == 7 ? a[i] : -a[i]) << i;
        EXPECT_EQ(q[3 * i + 1], i == 7 ? a[i] : -a[i]) << i;
        EXPECT_EQ(q[3 * i + 2], 0) << i;
        continue;
      }
      const int64_t tr = a[i] / b[i];
      const int64_t fd = (tr * b[i] != a[i] && ((a[i] < 0) != (b[i] < 0))) ? tr - 1 : tr;
      ASSERT_EQ(q[3 * i], tr) << a[i] << " / " << b[i];
      ASSERT_EQ(q[3 * i + 1], fd) << a[i] << " floordiv " << b[i];
      ASSERT_EQ(q[3 * i + 2], a[i] - fd * b[i]) << a[i] << " floormod " << b[i];
    }
    b[150] = 0;
    tb = upload(b, {n});
    bptest::Status s =
        bptest::CaptureError([&] { m.GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl()); });
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
    // All three divisions of thread 150 fault; the first to claim the record is reported.
    EXPECT_NE(s.message.find("'f_kernel' (called by host function 'f'): f_kernel: integer "
                             "division by zero in `"),
              std::string::npos)
        << s.message;
    // The record was cleared: a good call after a fault runs.
    b[150] = 3;
    tb = upload(b, {n});
    m.GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
  }
}

// Signed +, - and * wrap as the IR says (docs/codegen-guide.md, "Integer arithmetic"): OpenCL C
// leaves a signed overflow undefined, and PoCL's clang folded `a + 1 > a` to true and
// `a * 2 / 2 == a` to true; the code generator computes each expression that may overflow in
// the unsigned type of its width. One that cannot (`tx * 2 + 1`, tx below 1024) stays plain
// signed arithmetic, which the compiler optimizes as before. uint64: 64-bit literals are
// written `2ul` (PoCL's clang gave `2ull` a type wider than 64 bits, so `a * 2ull` did not
// wrap). The conformance clauses codegen.construct.wrap.* check the same on every plugin.
TEST_F(OpenCLCodegenTest, SignedOverflowWrapsAndArithmeticInRangeStaysPlain) {
  for (const char* dtype : {"int32", "int64", "uint64"}) {
    SCOPED_TRACE(dtype);
    const std::string t = dtype;
    const std::string text = "func f(n: int32, a: buffer<" + t +
                             ">[n], q: buffer<int32>[n, 4]) {\n"
                             "  for tx in thread(threadIdx.x, 0, n) {\n"
                             "    q[tx, 0] = select(a[tx] + 1 > a[tx], 1, 0)\n"
                             "    q[tx, 1] = select(a[tx] * 2 / 2 == a[tx], 1, 0)\n"
                             "    q[tx, 2] = select((-a[tx] < 0) == (a[tx] > 0), 1, 0)\n"
                             "    q[tx, 3] = tx * 2 + 1\n"
                             "  }\n}\n";
    Module m = backplane::Build(text, ClTarget());
    const std::string source = m.Imports()[0].InspectSource();
    if (t == "int32") {
      EXPECT_NE(source.find("((int32_t)((uint32_t)(a[tx]) + (uint32_t)(1)))"), std::string::npos)
          << source;
      EXPECT_NE(source.find("((tx * 2) + 1)"), std::string::npos) << source;
    }
    const int64_t n = 9;
    std::vector<int32_t> q(4 * n);
    Tensor tq = Tensor::Empty({n, 4}, DLDataType{kDLInt, 32, 1}, Cl());
    std::vector<int32_t> want(4 * n);
    if (t == "uint64") {
      const std::vector<uint64_t> a = {UINT64_MAX, uint64_t{1} << 63, 0,
                                       1,          UINT64_MAX - 41,   (uint64_t{1} << 63) - 1,
                                       12345,      uint64_t{1} << 62, 7};
      Tensor ta = Tensor::Empty({n}, DLDataType{kDLUInt, 64, 1}, Cl());
      ta.CopyFrom(a);
      m.GetFunction("f")(n, ta.dl(), tq.dl());
      for (int64_t i = 0; i < n; ++i) {
        want[4 * i] = a[i] + 1 > a[i];
        want[4 * i + 1] = a[i] * 2 / 2 == a[i];
        want[4 * i + 2] = a[i] == 0;  // -a < 0 is false for an unsigned a
        want[4 * i + 3] = static_cast<int32_t>(i * 2 + 1);
      }
    } else {
      const bool wide = t == "int64";
      const int64_t hi = wide ? INT64_MAX : INT32_MAX, lo = wide ? INT64_MIN : INT32_MIN;
      const std::vector<int64_t> a = {hi, lo, 0, 1, -1, hi / 2 + 1, lo / 2 - 1, 12345, -7};
      Tensor ta =
          Tensor::Empty({n}, DLDataType{kDLInt, static_cast<uint8_t>(wide ? 64 : 32), 1}, Cl());
      if (wide) {
        ta.CopyFrom(a);
      } else {
        ta.CopyFrom(std::vector<int32_t>(a.begin(), a.end()));
      }
      m.GetFunction("f")(n, ta.dl(), tq.dl());
      // The IR's results: the arithmetic wraps at the type's width.
      const uint64_t mask = wide ? UINT64_MAX : 0xffffffffu;
      auto wrap = [&](uint64_t bits) {
        bits &= mask;
        return wide ? static_cast<int64_t>(bits)
                    : static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(bits)));
      };
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t u = static_cast<uint64_t>(a[i]);
        want[4 * i] = wrap(u + 1) > a[i];
        want[4 * i + 1] = wrap(u * 2) / 2 == a[i];
        want[4 * i + 2] = (wrap(0 - u) < 0) == (a[i] > 0);
        want[4 * i + 3] = static_cast<int32_t>(i * 2 + 1);
      }
    }
    EXPECT_EQ(tq.ToVector<int32_t>(), want);
  }
}

const char* kWrongExtentParams =
    "n: int32, m: int32, a: buffer<float32>[m], b: buffer<float32>[m], c: buffer<float32>[m]";

// With -bounds-check the first access out of bounds is an error naming the kernel, buffer,
// index and extent; right extents give right results; the default build has no check.
TEST_F(OpenCLCodegenTest, BoundsCheckTurnsAnAccessOutOfBoundsIntoAnError) {
  const std::string ir = OneThreadAnElement(kWrongExtentParams, "c[i] = a[i] + b[i]");
  Target checked_target = Target::Parse("opencl -bounds-check");
  Module checked = backplane::Build(ir, checked_target);
  const int64_t m = 100;
  const std::vector<float> a = Random(m, 31), b = Random(m, 32);
  Tensor ta = Tensor::Empty({m}, kF32, Cl()), tb = Tensor::Empty({m}, kF32, Cl());
  Tensor tc = Tensor::Empty({m}, kF32, Cl());
  ta.CopyFrom(a);
  tb.CopyFrom(b);
  // n = m + 1: thread 100 reads a[100] of 100 elements.
  bptest::Status s =
      bptest::CaptureError([&] { checked.GetFunction("f")(m + 1, m, ta.dl(), tb.dl(), tc.dl()); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.message,
            "'f_kernel' (called by host function 'f'): f_kernel: index 100 is out of bounds for "
            "dimension 0 of buffer 'a' (extent 100) in `a[i]`");
  checked.GetFunction("f")(m, m, ta.dl(), tb.dl(), tc.dl());
  std::vector<float> c = tc.ToVector<float>();
  for (int64_t i = 0; i < m; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  // Empty tensors without data: the access out of bounds is skipped, never made.
  int64_t zero[1] = {0};
  DLTensor empty{nullptr, DLDevice{kDLOpenCL, 0}, 1, kF32, zero, nullptr, 0};
  DLTensor empty_b = empty, empty_c = empty;
  s = bptest::CaptureError([&] { checked.GetFunction("f")(1, 0, &empty, &empty_b, &empty_c); });
  EXPECT_EQ(s.message,
            "'f_kernel' (called by host function 'f'): f_kernel: index 0 is out of bounds for "
            "dimension 0 of buffer 'a' (extent 0) in `a[i]`");
  // Saved and loaded, the module keeps its messages.
  Module loaded = Module::LoadFromBytes(checked.SaveToBytes());
  s = bptest::CaptureError([&] { loaded.GetFunction("f")(m + 1, m, ta.dl(), tb.dl(), tc.dl()); });
  EXPECT_EQ(s.message,
            "'f_kernel' (called by host function 'f'): f_kernel: index 100 is out of bounds for "
            "dimension 0 of buffer 'a' (extent 100) in `a[i]`");
  // The default build carries no check and no fault record.
  Module plain = backplane::Build(ir, ClTarget());
  EXPECT_EQ(plain.Imports()[0].InspectSource().find("bp_fault_t* bp_fault"), std::string::npos);
  EXPECT_EQ(plain.Imports()[0].InspectSource().find("bp_chk("), std::string::npos);
  // Shared memory, two dimensions and stores are checked too: a transpose through a tile.
  const std::string tile = R"(# backplane-ir 1
func t(n: int32, m: int32, x: buffer<float32>[n, 8], y: buffer<float32>[8, n]) {
  for bx in thread(blockIdx.x, 0, m) {
    for tx in thread(threadIdx.x, 0, 8) {
      alloc s: float32[8] shared
      s[tx] = x[bx, tx]
      barrier
      y[tx, bx] = s[7 - tx]
    }
  }
}
)";
  Module tm = backplane::Build(tile, checked_target);
  const std::vector<float> x = Random(4 * 8, 33);
  Tensor tx = Tensor::Empty({4, 8}, kF32, Cl()), ty = Tensor::Empty({8, 4}, kF32, Cl());
  tx.CopyFrom(x);
  tm.GetFunction("t")(4, 4, tx.dl(), ty.dl());
  std::vector<float> y = ty.ToVector<float>();
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 8; ++k) ASSERT_EQ(y[k * 4 + r], x[r * 8 + (7 - k)]);
  }
  s = bptest::CaptureError([&] { tm.GetFunction("t")(4, 5, tx.dl(), ty.dl()); });
  EXPECT_EQ(s.message,
            "'t_kernel' (called by host function 't'): t_kernel: index 4 is out of bounds for "
            "dimension 0 of buffer 'x' (extent 4) in `x[bx, tx]`");
}

namespace {

// Every float64 intrinsic on opencl:0 against the IR interpreter (tests/plugins/f64_math_cases.h)
// within the OpenCL C specification's bound for the function (its "ULP values for double
// precision built-in math functions"), plus 1 for the interpreter's own error; exact functions,
// sqrt and fma (correctly rounded in OpenCL) and the special values bit for bit. sigmoid is
// 1 / (1 + exp(-x)) and rsqrt 1 / sqrt(x), as the interpreter computes them.
TEST_F(OpenCLCodegenTest, Float64IntrinsicsMatchTheInterpreter) {
  namespace fm = bptest::f64math;
  if (backplane::DeviceAPI::Get(Cl()).GetAttr(BP_ATTR_SUPPORTS_FP64).AsInt() == 0) {
    GTEST_SKIP() << "opencl:0 has no cl_khr_fp64";
  }
  const std::map<std::string, double> bounds = {
      {"exp", 4},  {"exp2", 4},  {"log", 4},     {"log2", 4},  {"pow", 17},  {"sin", 5},
      {"cos", 5},  {"tanh", 6},  {"sigmoid", 6}, {"erf", 17},  {"sqrt", 0},  {"rsqrt", 0},
      {"fabs", 0}, {"floor", 0}, {"ceil", 0},    {"round", 0}, {"trunc", 0}, {"fma", 0}};
  for (const fm::Case& c : fm::Cases(1024)) {
    SCOPED_TRACE(c.name);
    Module m = backplane::Build(fm::KernelText(c, /*gpu=*/true), ClTarget());
    const fm::Outcome o = fm::Run(c, m, Cl(), /*gpu=*/true, bounds.at(c.name));
    std::printf("%-8s max %.0f ulp from the interpreter, %.3f from the true value\n",
                c.name.c_str(), o.max_ulp, o.max_true_ulp);
    EXPECT_EQ(o.over_bound, 0) << o.report;
    EXPECT_EQ(o.special_mismatches, 0) << o.report;
  }
}

}  // namespace
