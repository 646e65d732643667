// SPDX-License-Identifier: Apache-2.0
// The build flow for a non-CPU Target, on the simulated accelerator: bp_build verifies the IR,
// splits host code from kernels (SplitHostDevice), hands the kernels to
// target.build.simaccel, and wraps the host code in an interpreted ir_host module that
// launches them. Every GPU kernel of the catalog runs on simaccel:0 (memory the host cannot
// address, asynchronous streams) against the float64 reference; saved trees load and run.
#include <stdlib.h>

#include <backplane/runner/runner.hpp>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Target;
namespace kernels = backplane::kernels;

class SimAccelBuildTest : public ::testing::Test {
 protected:
  void SetUp() override { bptest::LoadTestPlugin("simaccel_testing"); }
  static Device Acc() { return Device("simaccel", 0); }
};

std::vector<std::string> GpuKernels() {
  std::vector<std::string> names;
  for (const kernels::Case& c : kernels::Catalog()) {
    if (c.needs_threads) names.push_back(c.func);
  }
  return names;
}

class SimAccelKernelTest : public SimAccelBuildTest,
                           public ::testing::WithParamInterface<std::string> {};

TEST_P(SimAccelKernelTest, SplitBuildRunsAndMatchesTheReference) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel"));
  EXPECT_EQ(m.Kind(), "ir_host");
  ASSERT_EQ(m.Imports().size(), 1u);
  EXPECT_EQ(m.Imports()[0].Kind(), "simaccel");
  // The host function keeps its name; the kernel is <func>_kernel in the device module, or
  // <func>_kernel0, <func>_kernel1 for a function of two (the grid-wide reductions sum_gpu and
  // sum4_gpu, whose host part allocates the workspace the two share).
  EXPECT_EQ(m.ListFunctions(), std::vector<std::string>{c->func});
  const std::vector<std::string> one{c->func + "_kernel"},
      two{c->func + "_kernel0", c->func + "_kernel1"};
  EXPECT_EQ(m.Imports()[0].ListFunctions(), !c->grid_param.empty() ? two : one);
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Acc(), c->small, 1);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;

  // The whole tree saves and loads back (the core loads ir_host itself).
  Module loaded = Module::LoadFromBytes(m.SaveToBytes());
  EXPECT_EQ(loaded.Kind(), "ir_host");
  r = backplane::runner::RunCase(*c, loaded, Acc(), c->small, 1, 7);
  EXPECT_TRUE(r.ok) << c->func << " after save and load: " << r.error;
}

INSTANTIATE_TEST_SUITE_P(Catalog, SimAccelKernelTest, ::testing::ValuesIn(GpuKernels()),
                         [](const auto& param_info) { return param_info.param; });

TEST_F(SimAccelBuildTest, HostCodeThatTouchesDeviceMemoryIsRefused) {
  const kernels::Case* c = kernels::Find("matmul");  // a CPU kernel: loops, no thread axes
  ASSERT_NE(c, nullptr);
  try {
    backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel"));
    FAIL() << "built a CPU kernel for a GPU-like target";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("threadIdx"), std::string::npos) << msg;
  }
}

TEST_F(SimAccelBuildTest, HostTargetMustBeACpuKind) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  ASSERT_NE(c, nullptr);
  Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel"),
                              Target::Parse("c"));
  EXPECT_EQ(m.Kind(), "ir_host");
  try {
    backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel"),
                     Target::Parse("simaccel"));
    FAIL() << "accepted a host Target that is not a CPU kind";
  } catch (const backplane::Error& e) {
    EXPECT_NE(std::string(e.what()).find("host"), std::string::npos) << e.what();
  }
}

TEST_F(SimAccelBuildTest, WrongArgumentsAreRefusedBeforeAnyLaunch) {
  const kernels::Case* c = kernels::Find("vector_add_gpu");
  Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel"));
  backplane::Tensor a = backplane::Tensor::Empty({100}, DLDataType{kDLFloat, 32, 1}, Acc());
  backplane::Tensor b = backplane::Tensor::Empty({99}, DLDataType{kDLFloat, 32, 1}, Acc());
  try {
    m.GetFunction(c->func)(100, a.dl(), b.dl(), a.dl());
    FAIL() << "ran with a tensor of the wrong shape";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("[99]"), std::string::npos) << e.what();
  }
}

TEST(SimAccelNoDevice, ACodeGeneratorNeedsNoDevice) {
  // A process of its own (gtest_discover_tests): the plugin reads this when it loads.
  setenv("SIMACCEL_DEVICES", "0", 1);
  bptest::LoadTestPlugin("simaccel_testing");
  const Device acc("simaccel", 0);
  bp_value_t exists;
  ASSERT_EQ(bp_device_get_attr(acc.dl, BP_ATTR_EXIST, &exists), BP_OK);
  if (exists.u.v_int64 != 0) {
    GTEST_SKIP() << "simaccel was loaded with its devices earlier in this process; run this test "
                    "alone (ctest does)";
  }
  for (const std::string& name : GpuKernels()) {
    const kernels::Case* c = kernels::Find(name);
    Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel"));
    EXPECT_FALSE(m.SaveToBytes().empty()) << name;
  }
}

}  // namespace
