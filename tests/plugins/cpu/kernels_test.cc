// SPDX-License-Identifier: Apache-2.0
// Every CPU kernel of the catalog (sdk/apps/kernels), built by bp_build for the `c` Target and run
// on cpu:0 with random inputs at the catalog's odd test sizes and at its demo sizes, checked
// against the float64 reference within the kernel's tolerance.
#include <backplane/runner/runner.hpp>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Target;
namespace kernels = backplane::kernels;

std::vector<std::string> CpuKernels() {
  std::vector<std::string> names;
  for (const kernels::Case& c : kernels::Catalog()) {
    if (!c.needs_threads) names.push_back(c.func);
  }
  return names;
}

class CpuKernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  static Module Build(const kernels::Case& c) {
    return backplane::Build(backplane::runner::KernelSource(c), Target::Parse("c"));
  }
};

TEST_P(CpuKernelTest, MatchesTheReferenceAtTestSizes) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  Module m = Build(*c);
  for (uint64_t seed : {1u, 2u}) {
    backplane::runner::Result r =
        backplane::runner::RunCase(*c, m, Device(bptest::CpuDevice()), c->small, 1, seed);
    EXPECT_TRUE(r.ok) << c->func << " seed " << seed << ": " << r.error;
  }
}

TEST_P(CpuKernelTest, MatchesTheReferenceAtDemoSizes) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  backplane::runner::Result r =
      backplane::runner::RunCase(*c, Build(*c), Device(bptest::CpuDevice()), c->demo, 1);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;
}

// With -bounds-check every catalog kernel still matches: the checks raise nothing where every
// access is in bounds (no false alarm from vectors, strides, allocations or parallel loops).
TEST_P(CpuKernelTest, MatchesTheReferenceWithBoundsCheck) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  Module m =
      backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("c -bounds-check"));
  backplane::runner::Result r =
      backplane::runner::RunCase(*c, m, Device(bptest::CpuDevice()), c->small, 1, 3);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;
}

INSTANTIATE_TEST_SUITE_P(Catalog, CpuKernelTest, ::testing::ValuesIn(CpuKernels()),
                         [](const auto& param_info) { return param_info.param; });

// conv2d's chunks (sdk/apps/kernels/conv2d.bpir): 35 input channels are a chunk of 32 and one of 3,
// the second starting from what the first stored; 71 columns a chunk of 64 and one of 7 (a
// partial tile); 17 output channels a whole block and a partial one; three images; no input
// channel at all (one empty chunk stores zeros); and a filter of more than 64 taps (the direct
// loop). Plain and bounds-checked builds, against the float64 reference.
TEST(CpuConv2d, ChunksOfChannelsAndColumnsMatchTheReference) {
  const kernels::Case* c = kernels::Find("conv2d");
  ASSERT_NE(c, nullptr);
  const std::vector<kernels::Dims> sizes = {
      {{"batch", 3},
       {"c_in", 35},
       {"c_out", 17},
       {"h", 5},
       {"w", 71},
       {"kh", 3},
       {"kw", 5},
       {"pad", 1}},
      {{"batch", 1},
       {"c_in", 0},
       {"c_out", 3},
       {"h", 2},
       {"w", 70},
       {"kh", 3},
       {"kw", 3},
       {"pad", 1}},
      {{"batch", 1},
       {"c_in", 33},
       {"c_out", 2},
       {"h", 3},
       {"w", 130},
       {"kh", 1},
       {"kw", 1},
       {"pad", 0}},
      {{"batch", 1},
       {"c_in", 2},
       {"c_out", 3},
       {"h", 6},
       {"w", 7},
       {"kh", 9},
       {"kw", 9},
       {"pad", 4}},
  };
  for (const char* target : {"c", "c -bounds-check"}) {
    Module m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse(target));
    for (const kernels::Dims& dims : sizes) {
      backplane::runner::Result r =
          backplane::runner::RunCase(*c, m, Device(bptest::CpuDevice()), dims, 1, 4);
      EXPECT_TRUE(r.ok) << target << ", c_in " << dims.at("c_in") << ", w " << dims.at("w") << ": "
                        << r.error;
    }
  }
}

// The GPU kernels are refused for the cpu with the verifier's message naming the thread axis.
TEST(CpuKernelRefusal, ThreadBoundKernelsAreRefused) {
  const kernels::Case* c = kernels::Find("matmul_tiled_gpu");
  ASSERT_NE(c, nullptr);
  try {
    backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("c"));
    FAIL() << "built thread-bound kernels for the cpu";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("blockIdx"), std::string::npos) << e.what();
  }
}

}  // namespace
