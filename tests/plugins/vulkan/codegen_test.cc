// SPDX-License-Identifier: Apache-2.0
// The vulkan code generator on the real loader and driver (lavapipe in CI), with the Khronos
// validation layer on: every GPU kernel of the catalog through bp_build for
// Target::FromDevice(vulkan:0) against the float64 reference, saved and loaded back; every
// generated SPIR-V module through the real spirv-val; the pipeline cache on disk; building
// without a device; the errors a user can cause. Device tests skip when no Vulkan device
// exists.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/runner.hpp>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "plugins/half_mix.h"
#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using backplane::Module;
using backplane::Target;
namespace kernels = backplane::kernels;

constexpr DLDevice kDev{kDLVulkan, 0};

// Every test runs with the validation layer and fails on any error it reports (TearDown).
const int kValidationOn = setenv("BACKPLANE_VULKAN_VALIDATION", "1", /*overwrite=*/0);

std::vector<std::string> GpuKernels() {
  std::vector<std::string> names;
  for (const kernels::Case& c : kernels::Catalog()) {
    if (c.needs_threads) names.push_back(c.func);
  }
  return names;
}

// The SPIR-V binaries in a saved vulkan module ("spirv <length>\n<bytes>\n" fields).
std::vector<std::string> SpirvOf(const std::string& saved) {
  std::vector<std::string> out;
  for (size_t at = saved.find("\nspirv "); at != std::string::npos;
       at = saved.find("\nspirv ", at + 1)) {
    const size_t nl = saved.find('\n', at + 1);
    const size_t len = std::stoull(saved.substr(at + 7, nl - at - 7));
    out.push_back(saved.substr(nl + 1, len));
  }
  return out;
}

class VulkanCodegenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DeviceAPI::Get(Device(kDev)).Exists()) {
      GTEST_SKIP() << "no Vulkan device with a compute queue (install mesa-vulkan-drivers for "
                      "lavapipe)";
    }
  }
  void TearDown() override {
    (void)kValidationOn;
    if (!DeviceAPI::Get(Device(kDev)).Exists()) return;
    const int64_t errors = backplane::Function::Get("vulkan.validation_errors")().AsInt();
    if (errors < 0) {
      RecordProperty("validation", "off: VK_LAYER_KHRONOS_validation is not installed");
    } else {
      EXPECT_EQ(errors, 0) << "the Vulkan validation layer reported errors (see stderr)";
    }
  }
  static Module BuildFor(const kernels::Case& c) {
    return backplane::Build(backplane::runner::KernelSource(c), Target::FromDevice(Device(kDev)));
  }
};

class VulkanKernelTest : public VulkanCodegenTest,
                         public ::testing::WithParamInterface<std::string> {};

TEST_P(VulkanKernelTest, RunsOnTheDeviceAndMatchesTheReference) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  Module m = BuildFor(*c);
  ASSERT_EQ(m.Imports().size(), 1u);
  EXPECT_EQ(m.Imports()[0].Kind(), "vulkan");
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Device(kDev), c->small, 1);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;
  EXPECT_GT(r.max_error, -1.0);

  // Saved and loaded back (the kernels' SPIR-V, no recompilation), with other random data.
  Module loaded = Module::LoadFromBytes(m.SaveToBytes());
  r = backplane::runner::RunCase(*c, loaded, Device(kDev), c->small, 1, 7);
  EXPECT_TRUE(r.ok) << c->func << " after save and load: " << r.error;
}

INSTANTIATE_TEST_SUITE_P(Catalog, VulkanKernelTest, ::testing::ValuesIn(GpuKernels()),
                         [](const auto& param_info) { return param_info.param; });

// spirv-val (spirv-tools) accepts every module the code generator makes, for Vulkan 1.1.
TEST(VulkanSpirv, EveryGeneratedModulePassesSpirvVal) {
  if (std::system("command -v spirv-val >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "spirv-val is not installed (Debian: spirv-tools)";
  }
  const std::string dir = std::filesystem::temp_directory_path().string() + "/bp_vulkan_spv_" +
                          std::to_string(getpid());
  std::filesystem::create_directories(dir);
  int checked = 0;
  for (const std::string& name : GpuKernels()) {
    const kernels::Case* c = kernels::Find(name);
    Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("vulkan"));
    ASSERT_EQ(m.Imports().size(), 1u);
    const std::vector<std::string> spirv = SpirvOf(m.Imports()[0].SaveToBytes());
    // One module a kernel: a grid-wide reduction (sum_gpu, sum4_gpu) is two (docs/ir.md,
    // "Device workspaces"), every other catalog kernel one.
    ASSERT_EQ(spirv.size(), !c->grid_param.empty() ? 2u : 1u) << name;
    for (size_t k = 0; k < spirv.size(); ++k) {
      const std::string path = dir + "/" + name + "_" + std::to_string(k) + ".spv";
      std::ofstream(path, std::ios::binary) << spirv[k];
      const std::string cmd = "spirv-val --target-env vulkan1.1 " + path + " 2>&1";
      FILE* p = popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string output;
      char buf[512];
      while (fgets(buf, sizeof(buf), p) != nullptr) output += buf;
      EXPECT_EQ(pclose(p), 0) << name << " module " << k << ": spirv-val: " << output << "\nGLSL:\n"
                              << m.Imports()[0].InspectSource("glsl");
    }
    ++checked;
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(checked, static_cast<int>(GpuKernels().size()));
  EXPECT_GE(checked, 7);
}

TEST(VulkanSource, TheGlslShowsTheLayout) {
  const kernels::Case* c = kernels::Find("transpose_gpu");
  Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("vulkan"));
  const std::string glsl = m.Imports()[0].InspectSource("");
  EXPECT_NE(glsl.find("local_size_x = 16, local_size_y = 16"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("layout(std430, set = 0, binding = 1) buffer"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("layout(push_constant) uniform"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("shared float tile[272];"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("barrier();"), std::string::npos) << glsl;
  EXPECT_NE(m.Imports()[0].InspectSource("ir").find("transpose_gpu"), std::string::npos);
  // A workgroup sized at launch (matmul_tiled_gpu's `threads`) is a specialization constant;
  // its `unrolled` loops are written out: the first row of the register tile is zeroed by
  // eight statements, with no loop and no loop check around them.
  const std::string mm =
      backplane::Build(backplane::runner::KernelSource(*kernels::Find("matmul_tiled_gpu")),
                       Target::Parse("vulkan"))
          .Imports()[0]
          .InspectSource("");
  EXPECT_NE(mm.find("layout(local_size_x_id = 1000, local_size_y = 1, local_size_z = 1) in;"),
            std::string::npos)
      << mm;
  size_t copies = 0;
  for (size_t at = mm.find("const int q0 = "); at != std::string::npos;
       at = mm.find("const int q0 = ", at + 1)) {
    ++copies;
  }
  EXPECT_EQ(copies, 32u) << mm;  // 4 x 8: inside the unrolled loop over the rows
  EXPECT_NE(mm.find(" + int(7);"), std::string::npos) << mm;
}

// Building reads the Target only: with no Vulkan driver at all it still works.
TEST(VulkanBuild, NeedsNoDevice) {
  // A process of its own (gtest_discover_tests): the loader reads this at the plugin's first use.
  setenv("VK_ICD_FILENAMES", "/nonexistent/backplane_no_icd.json", 1);
  setenv("VK_DRIVER_FILES", "/nonexistent/backplane_no_icd.json", 1);
  if (DeviceAPI::Get(Device(kDev)).Exists()) {
    GTEST_SKIP() << "the Vulkan plugin was loaded with its devices earlier in this process; run "
                    "this test alone (ctest does)";
  }
  for (const std::string& name : GpuKernels()) {
    const kernels::Case* c = kernels::Find(name);
    Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("vulkan"));
    Module loaded = Module::LoadFromBytes(m.SaveToBytes());
    // A grid-wide reduction is two kernels sharing a workspace (docs/ir.md).
    EXPECT_EQ(
        loaded.Imports()[0].ListFunctions(),
        (!c->grid_param.empty() ? std::vector<std::string>{name + "_kernel0", name + "_kernel1"}
                                : std::vector<std::string>{name + "_kernel"}));
  }
}

TEST(VulkanBuild, WhatTheTargetCannotExpressIsNamed) {
  // threadIdx.x bound with an extent of 0: a workgroup has at least one invocation. (A run-time
  // extent is sized at launch: ir_features_test, WorkgroupSizedAtLaunch.)
  const std::string ir =
      "# backplane-ir 1\n"
      "func scale_gpu(n: int32, x: buffer<float32>[n]) {\n"
      "  for tx in thread(threadIdx.x, 0, 0) {\n"
      "    x[tx] = x[tx] * 2.0\n"
      "  }\n"
      "}\n";
  try {
    backplane::Build(ir, Target::Parse("vulkan"));
    FAIL() << "built a kernel whose local size is 0";
  } catch (const backplane::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT) << msg;
    EXPECT_NE(msg.find("the extent of threadIdx.x is 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("positive"), std::string::npos) << msg;
  }
  // More invocations than the Target allows.
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  try {
    backplane::Build(backplane::runner::KernelSource(*c),
                     Target::Parse("vulkan -max_num_threads=64"));
    FAIL() << "built a 256-thread workgroup for max_num_threads=64";
  } catch (const backplane::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_num_threads 64"), std::string::npos) << e.what();
  }
  // An 8-bit type.
  const std::string int8 =
      "# backplane-ir 1\n"
      "func inc_gpu(n: int32, x: buffer<int8>[n]) {\n"
      "  for tx in thread(threadIdx.x, 0, 64) {\n"
      "    x[tx] = x[tx] + int8(1)\n"
      "  }\n"
      "}\n";
  try {
    backplane::Build(int8, Target::Parse("vulkan"));
    FAIL() << "built an int8 kernel";
  } catch (const backplane::Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos) << e.what();
  }
  // A shared allocation whose size in bytes passes INT64_MAX (the count once wrapped).
  const std::string huge =
      "# backplane-ir 1\n"
      "func big_gpu(x: buffer<float32>[64]) {\n"
      "  for tx in thread(threadIdx.x, 0, 64) {\n"
      "    alloc s: float32[4294967296i64, 1073741824i64] shared\n"
      "    s[0, tx] = x[tx]\n"
      "    x[tx] = s[0, tx]\n"
      "  }\n"
      "}\n";
  try {
    backplane::Build(huge, Target::Parse("vulkan"));
    FAIL() << "built a shared array of 2^64 bytes";
  } catch (const backplane::Error& e) {
    EXPECT_NE(std::string(e.what()).find("allocation 's' has 2 dimensions whose product in bytes "
                                         "passes INT64_MAX"),
              std::string::npos)
        << e.what();
  }
}

TEST(VulkanBuild, DamagedModuleBytesAreRefused) {
  backplane::Build(backplane::runner::KernelSource(*kernels::Find("saxpy_gpu")),
                   Target::Parse("vulkan"));  // loads the plugin
  auto load = backplane::Function::Get("runtime.module.load_from_bytes.vulkan");
  for (const std::string& bad :
       {std::string("hello"), std::string("backplane-vulkan-module 1\nir 500\n# backplane-ir")}) {
    bp_object_t* obj = nullptr;
    backplane::Check(bp_bytes_create(bad.data(), bad.size(), &obj));
    backplane::ObjectRef bytes = backplane::ObjectRef::Adopt(obj);
    try {
      load(bytes);
      FAIL() << "loaded damaged bytes";
    } catch (const backplane::Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("not a vulkan module"), std::string::npos) << e.what();
    }
  }
}

// A grid larger than one dispatch may be (maxComputeWorkGroupCount: 65,535 on lavapipe) runs
// as several dispatches from their base workgroups: vector_add_gpu at 2^24 + 1000 elements
// (65,540 workgroups of 256) against the float64 reference on random data. It was refused.
TEST_F(VulkanCodegenTest, AGridLargerThanOneDispatchRunsInParts) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  ASSERT_NE(c, nullptr);
  Module m = BuildFor(*c);
  const int64_t n = (int64_t{1} << 24) + 1000;
  const int64_t groups = (n + 255) / 256;
  kernels::Dims dims = c->small;
  dims["n"] = n;
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Device(kDev), dims, 1, 11);
  EXPECT_TRUE(r.ok) << "vector_add_gpu with n = " << n << " (" << groups
                    << " workgroups): " << r.error;
}

TEST_F(VulkanCodegenTest, WrongArgumentsAreRefusedBeforeAnyLaunch) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  Module m = BuildFor(*c);
  backplane::Tensor a = backplane::Tensor::Empty({100}, DLDataType{kDLFloat, 32, 1}, Device(kDev));
  backplane::Tensor b = backplane::Tensor::Empty({99}, DLDataType{kDLFloat, 32, 1}, Device(kDev));
  backplane::Tensor h = backplane::Tensor::Empty({100}, DLDataType{kDLFloat, 32, 1}, Device());
  try {
    m.GetFunction(c->func)(100, a.dl(), b.dl(), a.dl());
    FAIL() << "ran with a tensor of the wrong shape";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("[99]"), std::string::npos) << e.what();
  }
  // A host tensor passed to the kernel directly.
  Module kernel = m.Imports()[0];
  try {
    kernel.GetFunction(c->func + "_kernel")(100, a.dl(), h.dl(), a.dl(), int64_t{1}, int64_t{256});
    FAIL() << "ran with a host tensor";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("copy it to vulkan:0"), std::string::npos) << e.what();
  }
  // A launch extent other than the local size it was built with.
  backplane::Tensor out =
      backplane::Tensor::Empty({100}, DLDataType{kDLFloat, 32, 1}, Device(kDev));
  try {
    kernel.GetFunction(c->func + "_kernel")(100, a.dl(), a.dl(), out.dl(), int64_t{1},
                                            int64_t{128});
    FAIL() << "launched with another local size";
  } catch (const backplane::Error& e) {
    EXPECT_NE(std::string(e.what()).find("local size 256"), std::string::npos) << e.what();
  }
  // A written buffer that overlaps an input: the shader's buffers may not alias.
  try {
    kernel.GetFunction(c->func + "_kernel")(100, a.dl(), a.dl(), a.dl(), int64_t{1}, int64_t{256});
    FAIL() << "ran with its output aliasing an input";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("overlap in memory"), std::string::npos) << e.what();
  }
}

// lavapipe leaves every loop of a SIMD group of invocations once they have taken 65535 loop
// back edges in all of them; the code generator unrolls, so a kernel running 3 x 50000
// iterations in one invocation still does all of them, in order (vulkan_long_loops_test
// covers the budget's edges and the error past it).
// out[r] = (r + 1) * sum(x), in one invocation: 3n loop iterations.
constexpr const char* kLongSumIR =
    "# backplane-ir 1\n"
    "func long_sum_gpu(n: int32, x: buffer<float32>[n], out: buffer<float32>[3]) {\n"
    "  for tx in thread(threadIdx.x, 0, 1) {\n"
    "    for r in serial(0, 3) {\n"
    "      out[r] = 0.0\n"
    "      for i in serial(0, n) {\n"
    "        out[r] = out[r] + x[i] * float32(r + 1)\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

TEST_F(VulkanCodegenTest, LongLoopsRunEveryIteration) {
  Module m = backplane::Build(kLongSumIR, Target::FromDevice(Device(kDev)));
  const int n = 50000;
  std::vector<float> x = bptest::RandomFloats(n, 11);
  backplane::Tensor tx = backplane::Tensor::Empty({n}, DLDataType{kDLFloat, 32, 1}, Device(kDev));
  backplane::Tensor to = backplane::Tensor::Empty({3}, DLDataType{kDLFloat, 32, 1}, Device(kDev));
  tx.CopyFromBytes(x.data(), x.size() * sizeof(float));
  m.GetFunction("long_sum_gpu")(n, tx.dl(), to.dl());
  std::vector<float> got(3);
  to.CopyToBytes(got.data(), got.size() * sizeof(float));
  for (int r = 0; r < 3; ++r) {
    double want = 0, scale = 0;
    for (int i = 0; i < n; ++i) {
      want += static_cast<double>(x[i]) * (r + 1);
      scale += std::abs(static_cast<double>(x[i])) * (r + 1);
    }
    // float32 rounding of 50000 terms stays far below 1e-4 of their magnitude; one missing
    // term is ~1e-5, and the loop limiter would drop thousands.
    EXPECT_NEAR(got[r], want, 1e-4 * scale) << "row " << r;
    EXPECT_NEAR(got[r], want, 1e-6 * scale) << "row " << r;
  }
}

// Aligned vector loads (docs/vulkan.md, "Vectors"): a float32x4 load whose flat index the code
// generator can prove a multiple of 4, from a buffer the kernel does not write, reads a vec4
// view of the binding (one access a lane where the scalar view takes four); any other stays
// lane by lane. What it may prove from: `floormod(v, c) == r` in the ifs around the access (and
// nowhere after them), lets, products, loop steps. Each kernel runs on the device against the
// same computation on the host, on sizes that take every branch.
constexpr const char* kVectorViewIR = R"(# backplane-ir 2
func vcopy(m: int32, n: int32, off: int32, a: buffer<float32>[m, n], b: buffer<float32>[m, n]) {
  for i in thread(blockIdx.x, 0, m) {
    for t in thread(threadIdx.x, 0, 1) {
      for j in serial(0, (n - off) / 4) {
        if (floormod(n, 4) == 0 && floormod(off, 4) == 0) {
          b[i, ramp(j * 4, 1, 4)] = a[i, ramp(j * 4 + off, 1, 4)] * broadcast(2.0, 4)
        } else {
          b[i, ramp(j * 4, 1, 4)] = a[i, ramp(j * 4 + off, 1, 4)] * broadcast(3.0, 4)
        }
      }
    }
  }
}
func vfacts(m: int32, n: int32, a: buffer<float32>[m, n], b: buffer<float32>[m, n]) {
  for i in thread(blockIdx.x, 0, m) {
    for t in thread(threadIdx.x, 0, 1) {
      if (floormod(n, 4) == 1) {
        b[i, ramp(0, 1, 4)] = a[i, ramp(1, 1, 4)]
      }
      if (floormod(n, 8) == 0) {
        let x: int32 = t * 2 + 2
        for j in serial(0, n / 8, 8) {
          b[i, ramp(j + 4, 1, 4)] = a[i, ramp(j + x * 2, 1, 4)]
        }
      }
      b[i, ramp(n - 4, 1, 4)] = a[i, ramp(n - 8, 1, 4)]
    }
  }
}
func vwritten(m: int32, n: int32, a: buffer<float32>[m, n]) {
  for i in thread(blockIdx.x, 0, m) {
    for t in thread(threadIdx.x, 0, 1) {
      if (floormod(n, 4) == 0) {
        a[i, ramp(0, 1, 4)] = a[i, ramp(4, 1, 4)] * broadcast(2.0, 4)
      }
    }
  }
}
)";

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST_F(VulkanCodegenTest, AlignedVectorLoadsReadAVectorView) {
  Module m = backplane::Build(kVectorViewIR, Target::FromDevice(Device(kDev)));
  std::string glsl;
  for (const Module& imp : m.Imports()) glsl += imp.InspectSource("");
  // A view of `a` in vcopy's shader and vfacts', none in vwritten's (`a` is written there), and
  // none of `b`, which every kernel writes. Where a view is used wrongly (an index not a
  // multiple of 4 read through it), the runs below read the wrong elements: vcopy with an
  // offset of 2 or rows of 26, vfacts' first arm (n = 1 modulo 4) and its last store (after the
  // ifs nothing is known of n).
  EXPECT_EQ(Count(glsl, "vec4 bp_v4_a[]"), 2u) << glsl;
  EXPECT_GE(Count(glsl, "bp_v4_a["), 4u) << glsl;
  EXPECT_EQ(Count(glsl, "bp_v4_b"), 0u) << glsl;

  const DLDataType f32{kDLFloat, 32, 1};
  const int rows = 3;
  auto run = [&](const std::string& func, int n, int off, uint32_t seed) {
    const std::vector<float> a = bptest::RandomFloats(rows * n, seed);
    std::vector<float> b = bptest::RandomFloats(rows * n, seed + 1);
    backplane::Tensor ta = backplane::Tensor::Empty({rows, n}, f32, Device(kDev));
    backplane::Tensor tb = backplane::Tensor::Empty({rows, n}, f32, Device(kDev));
    ta.CopyFromBytes(a.data(), a.size() * sizeof(float));
    tb.CopyFromBytes(b.data(), b.size() * sizeof(float));
    std::vector<float> want = b;
    for (int i = 0; i < rows; ++i) {
      const float* ar = &a[i * n];
      float* br = &want[i * n];
      if (func == "vcopy") {
        const float scale = n % 4 == 0 && off % 4 == 0 ? 2.0f : 3.0f;
        for (int j = 0; j < (n - off) / 4 * 4; ++j) br[j] = ar[j + off] * scale;
      } else {
        if (n % 4 == 1) std::copy(ar + 1, ar + 5, br);
        if (n % 8 == 0) {
          for (int j = 0; j < n / 8 * 8; j += 8) std::copy(ar + j + 4, ar + j + 8, br + j + 4);
        }
        std::copy(ar + n - 8, ar + n - 4, br + n - 4);
      }
    }
    if (func == "vcopy") {
      m.GetFunction(func)(rows, n, off, ta.dl(), tb.dl());
    } else {
      m.GetFunction(func)(rows, n, ta.dl(), tb.dl());
    }
    std::vector<float> got(b.size());
    tb.CopyToBytes(got.data(), got.size() * sizeof(float));
    EXPECT_EQ(got, want) << func << " n = " << n << ", off = " << off;
  };
  run("vcopy", 24, 4, 1);  // aligned: the view
  run("vcopy", 24, 8, 2);
  run("vcopy", 24, 2, 3);  // the same rows, an offset of 2: lane by lane
  run("vcopy", 26, 4, 4);  // rows of 26: lane by lane
  run("vfacts", 24, 0, 5);
  run("vfacts", 21, 0, 6);
  run("vfacts", 22, 0, 7);

  // vwritten's result (from the scalar views) too.
  const int n = 12;
  std::vector<float> a = bptest::RandomFloats(rows * n, 8);
  backplane::Tensor ta = backplane::Tensor::Empty({rows, n}, f32, Device(kDev));
  ta.CopyFromBytes(a.data(), a.size() * sizeof(float));
  m.GetFunction("vwritten")(rows, n, ta.dl());
  for (int i = 0; i < rows; ++i) {
    for (int l = 0; l < 4; ++l) a[i * n + l] = a[i * n + 4 + l] * 2.0f;
  }
  std::vector<float> got(a.size());
  ta.CopyToBytes(got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, a);
}

// matmul_tiled4_gpu, the catalog's matmul for lavapipe, on sizes whose n and k are multiples of
// 4 (its float32x4 tiles and vec4 views) and sizes that are not (matmul_tiled_gpu's code),
// against the float64 reference.
TEST_F(VulkanCodegenTest, TheFloat32x4MatmulIsRightOnEverySize) {
  const kernels::Case* c = kernels::Find("matmul_tiled4_gpu");
  ASSERT_NE(c, nullptr);
  Module m = BuildFor(*c);
  EXPECT_NE(m.Imports()[0].InspectSource("").find("bp_v4_b["), std::string::npos);
  for (const auto& [mm, nn, kk] : std::vector<std::tuple<int, int, int>>{
           {37, 200, 20}, {8, 64, 4}, {9, 67, 20}, {9, 68, 21}, {1, 1, 1}, {5, 3, 0}}) {
    backplane::runner::Result r = backplane::runner::RunCase(
        *c, m, Device(kDev), {{"m", mm}, {"n", nn}, {"k", kk}, {"threads", 8}}, 1);
    EXPECT_TRUE(r.ok) << mm << " x " << nn << " x " << kk << ": " << r.error;
  }
}

// Kernels go to the thread's active stream and return without waiting: on stream A a long
// kernel reads x, a host -> device copy then replaces x and a second kernel reads the new x;
// stream B reads the first result only after SyncStreamFromTo(A, B). Out of order, a kernel
// would read the wrong x or B would read a result not yet written.
TEST_F(VulkanCodegenTest, KernelsRunOnTheActiveStreamInOrder) {
  Module m = backplane::Build(kLongSumIR, Target::FromDevice(Device(kDev)));
  backplane::Function f = m.GetFunction("long_sum_gpu");
  const int n = 50000;
  const std::vector<float> x1 = bptest::RandomFloats(n, 21), x2 = bptest::RandomFloats(n, 22);
  const DLDataType f32{kDLFloat, 32, 1};
  backplane::Tensor tx = backplane::Tensor::Empty({n}, f32, Device(kDev));
  backplane::Tensor out1 = backplane::Tensor::Empty({3}, f32, Device(kDev));
  backplane::Tensor out2 = backplane::Tensor::Empty({3}, f32, Device(kDev));
  const std::vector<float> junk = bptest::RandomFloats(3, 23);
  out1.CopyFromBytes(junk.data(), junk.size() * sizeof(float));
  out2.CopyFromBytes(junk.data(), junk.size() * sizeof(float));
  bp_stream_t a = nullptr, b = nullptr;
  backplane::Check(bp_device_stream_create(kDev, &a));
  backplane::Check(bp_device_stream_create(kDev, &b));
  // The host copies: byte views of host vectors on stream A or B.
  auto copy = [](const void* from, DLDevice from_dev, void* to, DLDevice to_dev, int64_t bytes,
                 const DLTensor* dev_side, bool to_device, bp_stream_t s) {
    int64_t shape = bytes;
    DLTensor host = bptest::ByteView(const_cast<void*>(to_device ? from : to),
                                     to_device ? from_dev : to_dev, &shape, 0);
    backplane::Check(to_device ? bp_device_copy_data_from_to(&host, dev_side, s)
                               : bp_device_copy_data_from_to(dev_side, &host, s));
  };
  const int64_t xbytes = n * static_cast<int64_t>(sizeof(float));
  copy(x1.data(), bptest::CpuDevice(), nullptr, {}, xbytes, tx.dl(), true, a);
  backplane::Check(bp_device_stream_set(kDev, a));
  f(n, tx.dl(), out1.dl());
  copy(x2.data(), bptest::CpuDevice(), nullptr, {}, xbytes, tx.dl(), true, a);
  f(n, tx.dl(), out2.dl());
  backplane::Check(bp_device_stream_set(kDev, nullptr));
  backplane::Check(bp_device_sync_stream_from_to(kDev, a, b));
  std::vector<float> got1(3), got2(3);
  copy(nullptr, {}, got1.data(), bptest::CpuDevice(), 3 * sizeof(float), out1.dl(), false, b);
  backplane::Check(bp_device_stream_sync(kDev, a));
  copy(nullptr, {}, got2.data(), bptest::CpuDevice(), 3 * sizeof(float), out2.dl(), false, a);
  for (int r = 0; r < 3; ++r) {
    double want1 = 0, want2 = 0, scale = 0;
    for (int i = 0; i < n; ++i) {
      want1 += static_cast<double>(x1[i]) * (r + 1);
      want2 += static_cast<double>(x2[i]) * (r + 1);
      scale +=
          (std::abs(static_cast<double>(x1[i])) + std::abs(static_cast<double>(x2[i]))) * (r + 1);
    }
    EXPECT_NEAR(got1[r], want1, 1e-6 * scale) << "row " << r << " of the first kernel";
    EXPECT_NEAR(got2[r], want2, 1e-6 * scale) << "row " << r << " of the second kernel";
  }
  // A freed stream is named.
  backplane::Check(bp_device_stream_free(kDev, b));
  auto s = bptest::Capture(bp_device_stream_set(kDev, b));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("not a live vulkan stream"), std::string::npos) << s;
  // Freeing a tensor a queued kernel writes, or the stream, waits for the kernel first
  // (ASan and the validation layer would see a use after free).
  backplane::Check(bp_device_stream_set(kDev, a));
  {
    backplane::Tensor scratch = backplane::Tensor::Empty({3}, f32, Device(kDev));
    f(n, tx.dl(), scratch.dl());
  }
  f(n, tx.dl(), out1.dl());
  backplane::Check(bp_device_stream_set(kDev, nullptr));
  backplane::Check(bp_device_stream_free(kDev, a));
}

// A plugin that keeps each thread's active stream as a bare address, when another thread
// frees that stream and its next CreateStream gets the same address (the heap hands a freed
// block straight back), runs this thread's launch on the other thread's stream. The
// streams are sdk::StreamRegistry's, so the launch is an error.
TEST_F(VulkanCodegenTest, AnActiveStreamFreedByAnotherThreadIsAnError) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  ASSERT_NE(c, nullptr);
  Module m = BuildFor(*c);
  const backplane::Function f = m.GetFunction(c->func);
  std::vector<kernels::Arg> args = c->make_args({{"n", int64_t{256}}}, 5);
  const backplane::runner::DeviceArgs dargs(args, Device(kDev));
  bp_stream_t active = nullptr;
  backplane::Check(bp_device_stream_create(kDev, &active));
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;
  bptest::Status launch;
  std::thread a([&] {
    backplane::Check(bp_device_stream_set(kDev, active));
    std::unique_lock<std::mutex> lock(mu);
    phase = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return phase == 2; });
    launch = bptest::CaptureError(
        [&] { f.CallPacked(dargs.values().data(), static_cast<int32_t>(dargs.values().size())); });
    backplane::Check(bp_device_stream_set(kDev, nullptr));
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase == 1; });
  }
  backplane::Check(bp_device_stream_free(kDev, active));
  std::vector<bp_stream_t> made;
  bool reused = false;
  for (int i = 0; i < 64 && !reused; ++i) {
    made.push_back(nullptr);
    backplane::Check(bp_device_stream_create(kDev, &made.back()));
    reused = made.back() == active;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    phase = 2;
  }
  cv.notify_all();
  a.join();
  for (bp_stream_t s : made) backplane::Check(bp_device_stream_free(kDev, s));
  RecordProperty("address_reused", reused ? "yes" : "no");
  EXPECT_EQ(launch.kind, BP_ERR_INVALID_ARGUMENT)
      << "the launch on a freed active stream " << (reused ? "(its address reused) " : "")
      << "was not refused: " << launch;
  EXPECT_NE(launch.message.find("has been freed"), std::string::npos) << launch;
}

TEST_F(VulkanCodegenTest, ThePipelineCacheIsKeptOnDisk) {
  // A process of its own: the cache folder is chosen at the first pipeline.
  const std::string root = std::filesystem::temp_directory_path().string() + "/bp_vulkan_cache_" +
                           std::to_string(getpid());
  setenv("XDG_CACHE_HOME", root.c_str(), 1);
  const kernels::Case* c = kernels::Find("saxpy_gpu");
  backplane::runner::Result r =
      backplane::runner::RunCase(*c, BuildFor(*c), Device(kDev), c->small, 1);
  EXPECT_TRUE(r.ok) << r.error;
  // The folder holds the device's pipeline cache (.bin) and the kernel's SPIR-V (.spv, the
  // code generator's cache: vulkan_spirv_cache_test), nothing else.
  int pipeline_caches = 0, spirv = 0;
  for (const auto& e : std::filesystem::directory_iterator(root + "/backplane/vulkan")) {
    const std::string ext = e.path().extension();
    EXPECT_TRUE(ext == ".bin" || ext == ".spv") << e.path();
    EXPECT_GT(std::filesystem::file_size(e.path()), 16u) << e.path();
    pipeline_caches += ext == ".bin";
    spirv += ext == ".spv";
  }
  EXPECT_EQ(pipeline_caches, 1);
  EXPECT_EQ(spirv, 1);
  std::filesystem::remove_all(root);
}

// float16 runs where the device has shaderFloat16 and 16-bit storage (lavapipe
// has both): float16 buffers, a float16 scalar, a shared float16 array across a barrier, and
// + - * / max, each rounded to half, bit for bit as the interpreter computes them on 64 random
// halves per seed; the module saved and loaded back runs too. The attribute supports_fp16 says
// whether this runs.
TEST_F(VulkanCodegenTest, Float16MatchesTheInterpreterBitForBit) {
  const int64_t fp16 = DeviceAPI::Get(Device(kDev)).GetAttr(BP_ATTR_SUPPORTS_FP16).AsInt();
  Module m = backplane::Build(bptest::kHalfMixText, Target::FromDevice(Device(kDev)));
  EXPECT_NE(m.Imports()[0].InspectSource().find("float16_t"), std::string::npos);
  if (fp16 == 0) {
    const DLDataType kF16{kDLFloat, 16, 1};
    backplane::Tensor a = backplane::Tensor::Empty({64}, kF16, Device(kDev));
    try {
      m.GetFunction("half_mix")(64, 1.25, a.dl(), a.dl(), a.dl());
      FAIL() << "a float16 kernel ran on a device whose supports_fp16 is 0";
    } catch (const backplane::Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_UNSUPPORTED) << e.what();
      EXPECT_NE(std::string(e.what()).find("shaderFloat16"), std::string::npos) << e.what();
    }
    return;
  }
  const Module loaded = Module::LoadFromBytes(m.SaveToBytes());
  for (uint32_t seed : {1u, 2u, 3u}) {
    const bptest::HalfMixInputs in(seed);
    const std::vector<uint16_t> want = bptest::HalfMixReference(in);
    EXPECT_EQ(bptest::RunHalfMix(m, Device(kDev), in), want) << "seed " << seed;
    EXPECT_EQ(bptest::RunHalfMix(loaded, Device(kDev), in), want)
        << "seed " << seed << ", the module saved and loaded back";
  }
}

}  // namespace
