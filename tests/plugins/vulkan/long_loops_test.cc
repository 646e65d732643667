// SPDX-License-Identifier: Apache-2.0
// Long-running invocations on the vulkan target. lavapipe (llvmpipe) lets
// each SIMD group of invocations take 65535 loop back edges over all its loops and then
// leaves every loop without an error. Each kernel here runs on vulkan:0 and through the IR
// interpreter on the same random inputs: the results agree, or the launch's error names the
// kernel, the loop and the driver's limit (docs/vulkan.md says which kernels get which).
// Skips without a Vulkan device; runs with the validation layer and fails on its errors.
#include <stdlib.h>

#include <backplane/backplane.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using backplane::Module;
using backplane::Target;
namespace ir = backplane::ir;

constexpr DLDevice kDev{kDLVulkan, 0};
constexpr DLDataType kF32{kDLFloat, 32, 1};

const int kValidationOn = setenv("BACKPLANE_VULKAN_VALIDATION", "1", /*overwrite=*/0);

// y = A x with one invocation (workgroup) per row: 1300 iterations per invocation.
constexpr const char* kMatvecRowPerInvocation =
    "# backplane-ir 1\n"
    "func matvec_gpu(m: int32, n: int32, a: buffer<float32>[m, n], x: buffer<float32>[n],\n"
    "                y: buffer<float32>[m]) {\n"
    "  for row in thread(blockIdx.x, 0, m) {\n"
    "    y[row] = 0.0\n"
    "    for j in serial(0, n) {\n"
    "      y[row] = y[row] + a[row, j] * x[j]\n"
    "    }\n"
    "  }\n"
    "}\n";

// y = A x with every row in one invocation: m * n iterations there. At 1300 x 1300 this is
// the kernel shape: before the fix rows 387.. came back 0 or partial (913 of 1300).
constexpr const char* kMatvecOneInvocation =
    "# backplane-ir 1\n"
    "func matvec_gpu(m: int32, n: int32, a: buffer<float32>[m, n], x: buffer<float32>[n],\n"
    "                y: buffer<float32>[m]) {\n"
    "  for tx in thread(threadIdx.x, 0, 1) {\n"
    "    for row in serial(0, m) {\n"
    "      y[row] = 0.0\n"
    "      for j in serial(0, n) {\n"
    "        y[row] = y[row] + a[row, j] * x[j]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

// y[0] = x[0], y[i] = y[i - 1] * a + x[i]: one invocation, n - 1 dependent iterations.
constexpr const char* kRecurrence =
    "# backplane-ir 1\n"
    "func recurrence_gpu(n: int32, a: float32, x: buffer<float32>[n], y: buffer<float32>[n]) {\n"
    "  for tx in thread(threadIdx.x, 0, 1) {\n"
    "    y[0] = x[0]\n"
    "    for i in serial(1, n - 1) {\n"
    "      y[i] = y[i - 1] * a + x[i]\n"
    "    }\n"
    "  }\n"
    "}\n";

// The same recurrence with a body too large for the 32-fold unrolling (three outputs): the
// code generator unrolls it 8 times, so one invocation gets about 500 thousand iterations.
constexpr const char* kWideRecurrence =
    "# backplane-ir 1\n"
    "func wide_recurrence_gpu(n: int32, a: float32, x: buffer<float32>[n],\n"
    "                         y: buffer<float32>[n], z: buffer<float32>[n],\n"
    "                         w: buffer<float32>[n]) {\n"
    "  for tx in thread(threadIdx.x, 0, 1) {\n"
    "    y[0] = x[0]\n"
    "    z[0] = x[0]\n"
    "    w[0] = x[0]\n"
    "    for i in serial(1, n - 1) {\n"
    "      y[i] = y[i - 1] * a + x[i]\n"
    "      z[i] = z[i - 1] * (a * 0.5) + x[i] * 2.0 - y[i] * 0.25\n"
    "      w[i] = w[i - 1] * (a * 0.25) + x[i] * 3.0 - z[i] * 0.125 + y[i] * 0.0625\n"
    "    }\n"
    "  }\n"
    "}\n";

class VulkanLongLoopsTest : public ::testing::Test {
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

backplane::Tensor OnDevice(const std::vector<float>& v, std::vector<int64_t> shape) {
  backplane::Tensor t = backplane::Tensor::Empty(shape, kF32, Device(kDev));
  t.CopyFromBytes(v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<float> ToHost(backplane::Tensor& t, size_t n) {
  std::vector<float> v(n);
  t.CopyToBytes(v.data(), n * sizeof(float));
  return v;
}

// The matvec on the device against the interpreter: the number of rows off by more than
// float32 rounding of the row's terms allows.
int MatvecMismatches(const char* ir_text, int m, int n, uint32_t seed) {
  const std::vector<float> a = bptest::RandomFloats(static_cast<size_t>(m) * n, seed);
  const std::vector<float> x = bptest::RandomFloats(n, seed + 1);
  backplane::Tensor ta = OnDevice(a, {m, n}), tx = OnDevice(x, {n});
  backplane::Tensor ty = OnDevice(std::vector<float>(m, 0.0f), {m});
  Module mod = backplane::Build(ir_text, Target::FromDevice(Device(kDev)));
  mod.GetFunction("matvec_gpu")(m, n, ta.dl(), tx.dl(), ty.dl());
  const std::vector<float> got = ToHost(ty, m);

  std::vector<float> want(m), xa(x), aa(a);
  const int64_t shape_a[] = {m, n}, shape_x[] = {n}, shape_y[] = {m};
  ir::Interpreter(ir::Parse(ir_text, "matvec"))
      .Run("matvec_gpu",
           {ir::IntArg(m), ir::IntArg(n), ir::BufferArg(aa.data(), ir::Float32(), 2, shape_a),
            ir::BufferArg(xa.data(), ir::Float32(), 1, shape_x),
            ir::BufferArg(want.data(), ir::Float32(), 1, shape_y)});
  int bad = 0;
  for (int r = 0; r < m; ++r) {
    double scale = 0;
    for (int j = 0; j < n; ++j) scale += std::abs(double{a[size_t{1} * r * n + j]} * x[j]);
    if (!(std::abs(double{got[r]} - want[r]) <= 1e-5 * scale)) ++bad;
  }
  return bad;
}

// Runs a recurrence kernel (`outputs` output buffers after x) on the device; returns its
// outputs, or throws the launch's (or the read-back's) error.
std::vector<std::vector<float>> RunRecurrence(const char* ir_text, const std::string& func, int n,
                                              int outputs, const std::vector<float>& x) {
  Module mod = backplane::Build(ir_text, Target::FromDevice(Device(kDev)));
  backplane::Tensor tx = OnDevice(x, {n});
  std::vector<backplane::Tensor> outs;
  for (int k = 0; k < outputs; ++k) outs.push_back(OnDevice(std::vector<float>(n, 0.0f), {n}));
  backplane::Function f = mod.GetFunction(func);
  if (outputs == 1) {
    f(n, 0.5, tx.dl(), outs[0].dl());
  } else {
    f(n, 0.5, tx.dl(), outs[0].dl(), outs[1].dl(), outs[2].dl());
  }
  std::vector<std::vector<float>> got;
  for (auto& t : outs) got.push_back(ToHost(t, n));
  return got;
}

std::vector<std::vector<float>> InterpretRecurrence(const char* ir_text, const std::string& func,
                                                    int n, int outputs, std::vector<float> x) {
  std::vector<std::vector<float>> want(outputs, std::vector<float>(n, 0.0f));
  const int64_t shape[] = {n};
  std::vector<ir::ArgView> args = {ir::IntArg(n), ir::FloatArg(0.5),
                                   ir::BufferArg(x.data(), ir::Float32(), 1, shape)};
  for (auto& w : want) args.push_back(ir::BufferArg(w.data(), ir::Float32(), 1, shape));
  ir::Interpreter(ir::Parse(ir_text, func)).Run(func, args);
  return want;
}

// Elements off by more than float32 rounding allows (|y| stays below ~4000 here: a = 0.5 and
// |x| <= 1000).
int Mismatches(const std::vector<std::vector<float>>& got,
               const std::vector<std::vector<float>>& want) {
  int bad = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    for (size_t i = 0; i < want[k].size(); ++i) {
      if (!(std::abs(got[k][i] - want[k][i]) <= 1e-3f)) ++bad;
    }
  }
  return bad;
}

// The error a cut-short loop raises, with everything it must name.
void ExpectLoopCutShort(const backplane::Error& e, const std::string& kernel,
                        const std::string& loop) {
  const std::string msg = e.what();
  EXPECT_EQ(e.kind(), BP_ERR_DEVICE) << msg;
  EXPECT_NE(msg.find("vulkan kernel '" + kernel + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("loop '" + loop + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("65535 loop back edges"), std::string::npos) << msg;
  EXPECT_NE(msg.find("results are incomplete"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bind the loop, or an outer one, to blockIdx/threadIdx"), std::string::npos)
      << msg;
}

TEST_F(VulkanLongLoopsTest, MatvecWithOneRowPerInvocationMatchesTheInterpreter) {
  EXPECT_EQ(MatvecMismatches(kMatvecRowPerInvocation, 1300, 1300, 31), 0);
}

TEST_F(VulkanLongLoopsTest, MatvecWithEveryRowInOneInvocationMatchesTheInterpreter) {
  // 1.69 million iterations in one invocation: 1300 rows x (40 back edges of the 32-fold
  // unrolled column loop + 5 of its 4-fold remainder loop + 1 of the row loop) = 59800 back
  // edges, inside lavapipe's 65535. Before the fix (8-fold, remainder loop): 217100, and 912
  // rows came back 0 or partial without an error.
  EXPECT_EQ(MatvecMismatches(kMatvecOneInvocation, 1300, 1300, 41), 0);
}

TEST_F(VulkanLongLoopsTest, RecurrencesUpToTheBudgetMatchTheInterpreter) {
  for (int n : {2000, 1000000}) {
    const std::vector<float> x = bptest::RandomFloats(n, 51 + n);
    const auto got = RunRecurrence(kRecurrence, "recurrence_gpu", n, 1, x);
    const auto want = InterpretRecurrence(kRecurrence, "recurrence_gpu", n, 1, x);
    EXPECT_EQ(Mismatches(got, want), 0) << "n = " << n;
  }
  const int n = 300000;  // 37500 back edges at 8 iterations each
  const std::vector<float> x = bptest::RandomFloats(n, 61);
  const auto got = RunRecurrence(kWideRecurrence, "wide_recurrence_gpu", n, 3, x);
  const auto want = InterpretRecurrence(kWideRecurrence, "wide_recurrence_gpu", n, 3, x);
  EXPECT_EQ(Mismatches(got, want), 0);
}

TEST_F(VulkanLongLoopsTest, ALoopPastTheBudgetIsAnErrorNamingKernelLoopAndLimit) {
  // 10^7 iterations in one invocation: 312500 back edges. Before the fix the read-back
  // returned the first ~524k outputs and garbage after them, with no error.
  const int n = 10000000;
  const std::vector<float> x = bptest::RandomFloats(n, 71);
  try {
    RunRecurrence(kRecurrence, "recurrence_gpu", n, 1, x);
    FAIL() << "a loop cut short by the driver read back without an error";
  } catch (const backplane::Error& e) {
    ExpectLoopCutShort(e, "recurrence_gpu_kernel", "i");
    EXPECT_NE(std::string(e.what()).find("(serial from 1, extent n - 1)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("before its end 10000000 in invocation 0"),
              std::string::npos)
        << e.what();
  }
  // The large body runs 8 iterations per back edge: 10^6 is past its budget.
  const int m = 1000000;
  const std::vector<float> xm = bptest::RandomFloats(m, 72);
  try {
    RunRecurrence(kWideRecurrence, "wide_recurrence_gpu", m, 3, xm);
    FAIL() << "a loop cut short by the driver read back without an error";
  } catch (const backplane::Error& e) {
    ExpectLoopCutShort(e, "wide_recurrence_gpu_kernel", "i");
  }
}

// The error surfaces at the first point the host can see it: StreamSync, a read-back, or the
// next launch; once raised, the record is clear and the kernel runs correctly again.
TEST_F(VulkanLongLoopsTest, TheErrorIsRaisedOnceAtSyncAndTheKernelRunsAgain) {
  Module mod = backplane::Build(kRecurrence, Target::FromDevice(Device(kDev)));
  backplane::Function f = mod.GetFunction("recurrence_gpu");
  const int n = 4000000, small = 5000;
  const std::vector<float> x = bptest::RandomFloats(n, 81);
  backplane::Tensor tx = OnDevice(x, {n});
  backplane::Tensor ty = OnDevice(std::vector<float>(n, 0.0f), {n});
  f(n, 0.5, tx.dl(), ty.dl());  // queued: the launch itself returns without waiting
  bptest::Status s = bptest::Capture(bp_device_stream_sync(kDev, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_DEVICE) << s;
  EXPECT_NE(s.message.find("loop 'i'"), std::string::npos) << s;
  EXPECT_TRUE(bptest::Capture(bp_device_stream_sync(kDev, nullptr)).ok()) << "raised twice";

  // A read-back waits for the kernel and raises its error.
  f(n, 0.5, tx.dl(), ty.dl());
  std::vector<float> got(n);
  try {
    ty.CopyToBytes(got.data(), got.size() * sizeof(float));
    FAIL() << "read back the output of a kernel that was cut short without an error";
  } catch (const backplane::Error& e) {
    ExpectLoopCutShort(e, "recurrence_gpu_kernel", "i");
  }

  // A short run on the same pipeline is right and raises nothing.
  const std::vector<float> xs(x.begin(), x.begin() + small);
  backplane::Tensor txs = OnDevice(xs, {small});
  backplane::Tensor tys = OnDevice(std::vector<float>(small, 0.0f), {small});
  f(small, 0.5, txs.dl(), tys.dl());
  const auto want = InterpretRecurrence(kRecurrence, "recurrence_gpu", small, 1, xs);
  EXPECT_EQ(Mismatches({ToHost(tys, small)}, want), 0);

  // The next launch raises an error found since the last one: freeing a tensor waits for
  // the queued kernel without reading its record.
  f(n, 0.5, tx.dl(), ty.dl());
  { backplane::Tensor scratch = backplane::Tensor::Empty({1}, kF32, Device(kDev)); }
  try {
    f(small, 0.5, txs.dl(), tys.dl());
    FAIL() << "launched after a kernel was cut short without raising its error";
  } catch (const backplane::Error& e) {
    ExpectLoopCutShort(e, "recurrence_gpu_kernel", "i");
  }
  f(small, 0.5, txs.dl(), tys.dl());
  EXPECT_EQ(Mismatches({ToHost(tys, small)}, want), 0);
}

// A saved module keeps the checks; a version-1 module (no checks) is refused.
TEST_F(VulkanLongLoopsTest, SavedModulesKeepTheChecks) {
  Module mod = backplane::Build(kRecurrence, Target::FromDevice(Device(kDev)));
  const std::string bytes = mod.Imports()[0].SaveToBytes();
  EXPECT_NE(bytes.find("site 1 loop 'i' (serial from 1, extent n - 1)"), std::string::npos);
  Module loaded = Module::LoadFromBytes(mod.SaveToBytes());
  const int n = 10000000;
  const std::vector<float> x = bptest::RandomFloats(n, 91);
  backplane::Tensor tx = OnDevice(x, {n});
  backplane::Tensor ty = OnDevice(std::vector<float>(n, 0.0f), {n});
  loaded.GetFunction("recurrence_gpu")(n, 0.5, tx.dl(), ty.dl());
  try {
    ToHost(ty, n);
    FAIL() << "the loaded module's kernel was cut short without an error";
  } catch (const backplane::Error& e) {
    ExpectLoopCutShort(e, "recurrence_gpu_kernel", "i");
  }
}

// The GLSL: the error buffer after the tensors' bindings, 32-fold unrolling of a small body,
// 8-fold of a large one, a check after every loop; kernels without loops have no error buffer.
TEST(VulkanLongLoopsSource, ChecksAndUnrolling) {
  auto glsl = [](const char* text) {
    return backplane::Build(text, Target::Parse("vulkan")).Imports()[0].InspectSource("glsl");
  };
  const std::string rec = glsl(kRecurrence);
  EXPECT_NE(rec.find("layout(std430, set = 0, binding = 2) buffer bp_status_block"),
            std::string::npos)
      << rec;
  EXPECT_NE(rec.find("+= int(32)"), std::string::npos) << rec;
  EXPECT_NE(rec.find("bp_fail(1u, 0u"), std::string::npos) << rec;
  const std::string wide = glsl(kWideRecurrence);
  EXPECT_NE(wide.find("+= int(8)"), std::string::npos) << wide;
  const std::string mv = glsl(kMatvecOneInvocation);
  EXPECT_NE(mv.find("bp_fail(1u, 0u"), std::string::npos) << mv;  // the row loop
  EXPECT_NE(mv.find("bp_fail(1u, 1u"), std::string::npos) << mv;  // the column loop
  const std::string add = glsl(
      "# backplane-ir 1\n"
      "func add_gpu(n: int32, x: buffer<float32>[n]) {\n"
      "  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
      "    for tx in thread(threadIdx.x, 0, 64) {\n"
      "      if (bx * 64 + tx < n) {\n"
      "        x[bx * 64 + tx] = x[bx * 64 + tx] + 1.0\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(add.find("bp_status"), std::string::npos) << add;
}

}  // namespace
