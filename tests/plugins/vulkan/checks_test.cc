// SPDX-License-Identifier: Apache-2.0
// The vulkan code generator follows docs/ir.md where the IR defines a result (issue 13, items
// 2 to 4): a*b+c rounds twice unless the Target says -fast-math-contract (every float add,
// subtract, multiply and divide of the SPIR-V is decorated NoContraction, so a GPU driver
// cannot fuse them); an integer division by zero is the interpreter's error, INT_MIN / -1
// wraps; with -bounds-check the first access out of bounds is the interpreter's error. Runs
// on vulkan:0 (lavapipe here) with the validation layer on, and fails on its errors; skips
// without a Vulkan device (the SPIR-V checks need none).
#include <stdlib.h>

#include <backplane/backplane.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../test_util.h"

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;

constexpr DLDevice kDev{kDLVulkan, 0};
constexpr DLDataType kF32{kDLFloat, 32, 1};

const int kValidationOn = setenv("BACKPLANE_VULKAN_VALIDATION", "1", /*overwrite=*/0);

class VulkanChecksTest : public ::testing::Test {
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
    if (errors >= 0) {
      EXPECT_EQ(errors, 0) << "the Vulkan validation layer reported errors (see stderr)";
    }
  }
};

// The SPIR-V words of every kernel in a saved vulkan module ("spirv <length>\n<bytes>\n").
std::vector<std::vector<uint32_t>> SpirvOf(const std::string& saved) {
  std::vector<std::vector<uint32_t>> out;
  for (size_t at = saved.find("\nspirv "); at != std::string::npos;
       at = saved.find("\nspirv ", at + 1)) {
    const size_t nl = saved.find('\n', at + 1);
    const size_t len = std::stoull(saved.substr(at + 7, nl - at - 7));
    std::vector<uint32_t> words(len / 4);
    std::memcpy(words.data(), saved.data() + nl + 1, len);
    out.push_back(words);
  }
  return out;
}

// How many of the float multiplies and adds of `spirv` are decorated NoContraction, and how
// many there are.
struct Contraction {
  int ops = 0;
  int no_contraction = 0;
};
Contraction CountNoContraction(const std::vector<uint32_t>& spirv) {
  constexpr uint32_t kOpDecorate = 71, kNoContraction = 42, kOpFAdd = 129, kOpFMul = 133;
  std::set<uint32_t> decorated, ops;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16, op = spirv[at] & 0xffffu;
    if (count == 0 || at + count > spirv.size()) break;
    if (op == kOpDecorate && count >= 3 && spirv[at + 2] == kNoContraction) {
      decorated.insert(spirv[at + 1]);
    }
    if ((op == kOpFAdd || op == kOpFMul) && count >= 4) ops.insert(spirv[at + 2]);
    at += count;
  }
  Contraction c;
  c.ops = static_cast<int>(ops.size());
  for (uint32_t id : ops) c.no_contraction += decorated.count(id) != 0 ? 1 : 0;
  return c;
}

// d = a * b + c, one invocation an element.
constexpr const char* kMulAdd =
    "# backplane-ir 1\n"
    "func muladd_gpu(n: int32, a: buffer<float32>[n], b: buffer<float32>[n],\n"
    "                c: buffer<float32>[n], d: buffer<float32>[n]) {\n"
    "  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
    "    for tx in thread(threadIdx.x, 0, 64) {\n"
    "      let i: int32 = bx * 64 + tx\n"
    "      if (i < n) {\n"
    "        d[i] = a[i] * b[i] + c[i]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

// Item 2: the SPIR-V forbids contraction unless the Target allows it, so the result is the
// IR's two roundings bit for bit, on inputs where a fused multiply-add rounds otherwise.
TEST(VulkanContraction, TheSpirvForbidsFusingUnlessTheTargetAllowsIt) {
  Module strict = backplane::Build(kMulAdd, Target::Parse("vulkan"));
  for (const auto& spirv : SpirvOf(strict.Imports()[0].SaveToBytes())) {
    const Contraction c = CountNoContraction(spirv);
    EXPECT_GE(c.ops, 2);
    EXPECT_EQ(c.no_contraction, c.ops) << "a float multiply or add the driver may fuse";
  }
  // With -fast-math-contract nothing is decorated, and SPIRV-Tools fuses the two into
  // GLSL.std.450 Fma (OpExtInst 12, instruction 50).
  Module fast = backplane::Build(kMulAdd, Target::Parse("vulkan -fast-math-contract"));
  for (const auto& spirv : SpirvOf(fast.Imports()[0].SaveToBytes())) {
    EXPECT_EQ(CountNoContraction(spirv).no_contraction, 0);
    bool fma = false;
    for (size_t at = 5; at < spirv.size() && (spirv[at] >> 16) != 0; at += spirv[at] >> 16) {
      fma = fma || ((spirv[at] & 0xffffu) == 12 && (spirv[at] >> 16) >= 5 && spirv[at + 4] == 50);
    }
    EXPECT_TRUE(fma) << "-fast-math-contract did not let a*b+c fuse";
  }
}

TEST_F(VulkanChecksTest, MultiplyThenAddRoundsTwiceBitForBit) {
  const int n = 4096;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(n), b(n), c(n);
  int fused_differs = 0;
  for (int i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
    volatile float p = a[i] * b[i];  // volatile: the reference itself is never fused
    c[i] = -p + dist(rng) * 1e-6f;   // cancellation: the product's rounding error shows
    if (std::fma(a[i], b[i], c[i]) != p + c[i]) ++fused_differs;
  }
  ASSERT_GT(fused_differs, n / 2) << "the inputs do not tell a fused multiply-add apart";
  Module m = backplane::Build(kMulAdd, Target::FromDevice(Device(kDev)));
  Tensor ta = Tensor::Empty({n}, kF32, Device(kDev)), tb = Tensor::Empty({n}, kF32, Device(kDev));
  Tensor tc = Tensor::Empty({n}, kF32, Device(kDev)), td = Tensor::Empty({n}, kF32, Device(kDev));
  ta.CopyFrom(a);
  tb.CopyFrom(b);
  tc.CopyFrom(c);
  m.GetFunction("muladd_gpu")(n, ta.dl(), tb.dl(), tc.dl(), td.dl());
  const std::vector<float> d = td.ToVector<float>();
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    volatile float p = a[i] * b[i];
    const float want = p + c[i];
    if (std::memcmp(&d[i], &want, sizeof(float)) != 0) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "of " << n << " results are not a*b rounded, then + c rounded";
}

}  // namespace
