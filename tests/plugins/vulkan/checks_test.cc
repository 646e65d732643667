// SPDX-License-Identifier: Apache-2.0
// The vulkan code generator follows docs/ir.md where the IR defines a result:
// a*b+c rounds twice unless the Target says -fast-math-contract (every float add,
// subtract, multiply and divide of the SPIR-V is decorated NoContraction, so a GPU driver
// cannot fuse them); an integer division by zero is the interpreter's error, INT_MIN / -1
// wraps; with -bounds-check the first access out of bounds is the interpreter's error. Runs
// on vulkan:0 (lavapipe here) with the validation layer on, and fails on its errors; skips
// without a Vulkan device (the SPIR-V checks need none).
#include <stdlib.h>

#include <backplane/backplane.hpp>
#include <backplane/runner/runner.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "float_controls.h"
#include "plugins/test_util.h"

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

// Float controls: WithFloatControls (plugins/vulkan/float_controls.h) asks a pipeline to keep
// subnormals (NVIDIA's Vulkan driver flushed float32 subnormals without it:
// codegen.construct.*.float32 on an H200) and signed zeros, infinities and NaNs (lavapipe
// folded `0.0 * x` to 0 for an infinite x without it: IrFeatures.
// RandomFloatExpressionsMatchTheInterpreter), for the widths each kernel uses, on devices
// whose float controls allow it. Here the patched SPIR-V is checked by spirv-val and by its
// words.
TEST(VulkanFloatControls, ThePatchedSpirvAsksForEachModeAndIsValid) {
  if (std::system("command -v spirv-val >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "spirv-val is not installed (Debian: spirv-tools)";
  }
  const char* const kernels[] = {
      "func f32_gpu(a: buffer<float32>[64], b: buffer<float32>[64]) {\n"
      "  for tx in thread(threadIdx.x, 0, 64) {\n    b[tx] = a[tx] * 0.5\n  }\n}\n",
      "func f64_gpu(a: buffer<float64>[64], b: buffer<float64>[64]) {\n"
      "  for tx in thread(threadIdx.x, 0, 64) {\n    b[tx] = a[tx] * 0.5\n  }\n}\n",
      "func f16_gpu(a: buffer<float16>[64], b: buffer<float16>[64]) {\n"
      "  for tx in thread(threadIdx.x, 0, 64) {\n    b[tx] = a[tx] * float16(0.5)\n  }\n}\n"};
  using backplane::vulkan::FloatControls;
  using backplane::vulkan::WithFloatControls;
  FloatControls all;
  all.denorm32 = all.denorm64 = all.specials16 = all.specials32 = all.specials64 = true;
  FloatControls specials32;
  specials32.specials32 = true;
  bptest::ScratchDir dir;
  int n = 0;
  for (const char* text : kernels) {
    const bool f64 = std::string(text).find("float64") != std::string::npos;
    const bool f16 = std::string(text).find("float16") != std::string::npos;
    Module m = backplane::Build(text, Target::Parse("vulkan -supports_float64 -supports_float16 "
                                                    "-supports_16bit_buffer"));
    for (const auto& spirv : SpirvOf(m.Imports()[0].SaveToBytes())) {
      const std::vector<uint32_t> patched = WithFloatControls(spirv, all);
      // OpExecutionMode <entry> DenormPreserve (4459) / SignedZeroInfNanPreserve (4461)
      // <width>, for 32 bits and the kernel's other width; each capability (4464, 4466) once.
      std::map<std::pair<uint32_t, uint32_t>, int> modes;
      int denorm_caps = 0, specials_caps = 0;
      for (size_t at = 5; at < patched.size() && (patched[at] >> 16) != 0;
           at += patched[at] >> 16) {
        const uint32_t op = patched[at] & 0xffffu;
        if (op == 16 && (patched[at + 2] == 4459 || patched[at + 2] == 4461)) {
          ++modes[{patched[at + 2], patched[at + 3]}];
        }
        if (op == 17 && patched[at + 1] == 4464) ++denorm_caps;
        if (op == 17 && patched[at + 1] == 4466) ++specials_caps;
      }
      std::map<std::pair<uint32_t, uint32_t>, int> want = {{{4459, 32}, 1}, {{4461, 32}, 1}};
      if (f64) want[{4459, 64}] = want[{4461, 64}] = 1;
      if (f16) want[{4461, 16}] = 1;
      EXPECT_EQ(modes, want) << text;
      EXPECT_EQ(denorm_caps, 1);
      EXPECT_EQ(specials_caps, 1);
      // One mode, one capability; nothing asked, nothing changed.
      const std::vector<uint32_t> one = WithFloatControls(spirv, specials32);
      EXPECT_EQ(one.size(), spirv.size() + 4 + 2 + (spirv[1] < 0x10400 ? 7 : 0));
      EXPECT_EQ(WithFloatControls(spirv, FloatControls{}), spirv);
      for (const std::vector<uint32_t>* code : {&patched, &one}) {
        const std::string path = dir.path() + "/k" + std::to_string(n++) + ".spv";
        FILE* f = std::fopen(path.c_str(), "wb");
        ASSERT_NE(f, nullptr);
        std::fwrite(code->data(), 4, code->size(), f);
        std::fclose(f);
        const std::string cmd = "spirv-val --target-env vulkan1.2 " + path + " 2>&1";
        FILE* p = popen(cmd.c_str(), "r");
        ASSERT_NE(p, nullptr);
        std::string out;
        char buf[512];
        while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
        EXPECT_EQ(pclose(p), 0) << "spirv-val refused the patched SPIR-V: " << out;
      }
    }
  }
  EXPECT_EQ(n, 6);
  // Damaged SPIR-V is an error, not a crash.
  EXPECT_THROW(WithFloatControls({0x07230203u, 0x10000u, 0, 1, 0, 0}, all), backplane::Error);
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

namespace {

// One invocation an element i < n (64 a workgroup) running `body`.
std::string OneInvocationAnElement(const std::string& params, const std::string& body) {
  return "# backplane-ir 1\nfunc f(" + params +
         ") {\n  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {\n"
         "    for tx in thread(threadIdx.x, 0, 64) {\n      let i: int32 = bx * 64 + tx\n"
         "      if (i < n) {\n        " +
         body + "\n      }\n    }\n  }\n}\n";
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// CaptureError(run), where `run` launches and reads back: the vulkan runtime raises a kernel's
// error at the next sync, read-back or launch, after the interpreter's message the name of
// the call that found it ("vulkan:0 copy_data_from_to: f_kernel: ...").
using bptest::CaptureError;

Tensor Upload(const std::vector<int64_t>& v, std::vector<int64_t> shape, bool wide) {
  const DLDataType dt{kDLInt, static_cast<uint8_t>(wide ? 64 : 32), 1};
  Tensor x = Tensor::Empty(shape, dt, Device(kDev));
  if (wide) {
    x.CopyFrom(v);
  } else {
    x.CopyFrom(std::vector<int32_t>(v.begin(), v.end()));
  }
  return x;
}

std::vector<int64_t> Download(const Tensor& t, bool wide) {
  if (wide) return t.ToVector<int64_t>();
  const std::vector<int32_t> v = t.ToVector<int32_t>();
  return std::vector<int64_t>(v.begin(), v.end());
}

// Item 3: a division by zero in a kernel (/, floordiv, floormod) is the interpreter's error
// from the error buffer, not an undefined value; INT_MIN / -1 wraps; 32 and 64 bits; the
// message survives saving and loading; the record is clear after the error.
TEST_F(VulkanChecksTest, IntegerDivisionByZeroIsAnErrorAndIntMinByMinusOneWraps) {
  const int64_t n = 200;
  for (const char* dtype : {"int32", "int64"}) {
    SCOPED_TRACE(dtype);
    const std::string t = dtype;
    const bool wide = t == "int64";
    const std::string ir = OneInvocationAnElement(
        "n: int32, a: buffer<" + t + ">[n], b: buffer<" + t + ">[n], q: buffer<" + t + ">[n, 3]",
        "q[i, 0] = a[i] / b[i]\n        q[i, 1] = floordiv(a[i], b[i])\n"
        "        q[i, 2] = floormod(a[i], b[i])");
    Module built = backplane::Build(ir, Target::FromDevice(Device(kDev)));
    EXPECT_NE(built.Imports()[0].InspectSource().find("bp_div_i" + std::string(wide ? "64" : "32")),
              std::string::npos);
    Module loaded = Module::LoadFromBytes(built.SaveToBytes());
    for (Module* m : {&built, &loaded}) {
      std::mt19937_64 rng(17);
      std::vector<int64_t> a(n), b(n);
      for (int64_t i = 0; i < n; ++i) {
        a[i] = static_cast<int64_t>(rng() % 20001) - 10000;
        do b[i] = static_cast<int64_t>(rng() % 201) - 100;
        while (b[i] == 0);
      }
      a[7] = wide ? INT64_MIN : INT32_MIN;
      b[7] = -1;
      a[8] = wide ? INT64_MIN : INT32_MIN;
      b[8] = 7;
      Tensor ta = Upload(a, {n}, wide), tb = Upload(b, {n}, wide);
      Tensor tq = Upload(std::vector<int64_t>(3 * n), {n, 3}, wide);
      m->GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
      const std::vector<int64_t> q = Download(tq, wide);
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
        // a - fd * b in wrapping arithmetic: fd * b overflows for a = INT64_MIN, b = 7.
        const int64_t fm = static_cast<int64_t>(
            static_cast<uint64_t>(a[i]) - static_cast<uint64_t>(fd) * static_cast<uint64_t>(b[i]));
        ASSERT_EQ(q[3 * i + 2], fm) << a[i] << " floormod " << b[i];
      }
      b[150] = 0;
      tb = Upload(b, {n}, wide);
      bptest::Status s = CaptureError([&] {
        m->GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
        Download(tq, wide);
      });
      EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
      // Invocation 150 runs its three divisions in order: the first claims the record.
      EXPECT_TRUE(EndsWith(s.message, ": f_kernel: integer division by zero in `a[i] / b[i]`"))
          << s.message;
      // The record was cleared: a good call after a fault runs.
      b[150] = 3;
      tb = Upload(b, {n}, wide);
      m->GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
      EXPECT_EQ(Download(tq, wide)[3 * 150], a[150] / 3);
    }
  }
}

// Unsigned division and remainder by zero, and floordiv alone: each names its expression.
TEST_F(VulkanChecksTest, EveryDivisionKindNamesItsExpression) {
  const int64_t n = 64;
  for (const auto& [body, text] : std::vector<std::pair<std::string, std::string>>{
           {"q[i] = int32(uint32(a[i]) / uint32(b[i]))", "uint32(a[i]) / uint32(b[i])"},
           {"q[i] = int32(floormod(uint32(a[i]), uint32(b[i])))",
            "floormod(uint32(a[i]), uint32(b[i]))"},
           {"q[i] = floordiv(a[i], b[i])", "floordiv(a[i], b[i])"},
           {"q[i] = floormod(a[i], b[i])", "floormod(a[i], b[i])"}}) {
    SCOPED_TRACE(body);
    Module m = backplane::Build(
        OneInvocationAnElement(
            "n: int32, a: buffer<int32>[n], b: buffer<int32>[n], q: buffer<int32>[n]", body),
        Target::FromDevice(Device(kDev)));
    std::vector<int64_t> a(n, 1000), b(n, 7);
    b[33] = 0;
    Tensor ta = Upload(a, {n}, false), tb = Upload(b, {n}, false), tq = Upload(a, {n}, false);
    bptest::Status s = CaptureError([&] {
      m.GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
      Download(tq, false);
    });
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(EndsWith(s.message, ": f_kernel: integer division by zero in `" + text + "`"))
        << s.message;
    b[33] = 7;
    tb = Upload(b, {n}, false);
    m.GetFunction("f")(n, ta.dl(), tb.dl(), tq.dl());
    EXPECT_EQ(Download(tq, false)[33], body.find("mod") != std::string::npos ? 1000 % 7 : 1000 / 7);
  }
}

// Division by constants (no check site; the base emits them unchecked) of negative values,
// 32 and 64 bits: floordiv rounds down and floormod takes the divisor's sign. lavapipe got
// floordiv(-5977, 7) = -853 from a helper that tested `q * b != a`.
TEST_F(VulkanChecksTest, DivisionByAConstantRoundsAsTheIrSays) {
  const int64_t n = 256;
  for (const char* dtype : {"int32", "int64"}) {
    SCOPED_TRACE(dtype);
    const std::string t = dtype;
    const bool wide = t == "int64";
    // int32 literals are IntImm divisors; int64 ones are spelled as casts.
    auto lit = [&](const std::string& v) { return wide ? "int64(" + v + ")" : v; };
    Module m = backplane::Build(
        OneInvocationAnElement("n: int32, a: buffer<" + t + ">[n], q: buffer<" + t + ">[n, 5]",
                               "q[i, 0] = floordiv(a[i], " + lit("7") +
                                   ")\n        q[i, 1] = floormod(a[i], " + lit("7") +
                                   ")\n        q[i, 2] = floordiv(a[i], " + lit("-7") +
                                   ")\n        q[i, 3] = floormod(a[i], " + lit("-7") +
                                   ")\n        q[i, 4] = a[i] / " + lit("7")),
        Target::FromDevice(Device(kDev)));
    std::mt19937_64 rng(29);
    std::vector<int64_t> a(n);
    for (int64_t& x : a) x = static_cast<int64_t>(rng() % 20001) - 10000;
    Tensor ta = Upload(a, {n}, wide), tq = Upload(std::vector<int64_t>(5 * n), {n, 5}, wide);
    m.GetFunction("f")(n, ta.dl(), tq.dl());
    const std::vector<int64_t> q = Download(tq, wide);
    int wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t b : {7, -7}) {
        const int64_t tr = a[i] / b;
        const int64_t fd = (tr * b != a[i] && ((a[i] < 0) != (b < 0))) ? tr - 1 : tr;
        const int k = b > 0 ? 0 : 2;
        if (q[5 * i + k] != fd || q[5 * i + k + 1] != a[i] - fd * b) ++wrong;
      }
      if (q[5 * i + 4] != a[i] / 7) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "of " << 5 * n << " results";
  }
}

// A kernel without a check site (no loop, no division by a variable) has no error buffer:
// it launches exactly as before.
TEST(VulkanChecks, AKernelWithoutChecksHasNoErrorBuffer) {
  const std::string ir =
      OneInvocationAnElement("n: int32, a: buffer<int32>[n], q: buffer<int32>[n]",
                             "q[i] = a[i] / 3 + floordiv(a[i], 4) + floormod(a[i], 5)");
  Module m = backplane::Build(ir, Target::Parse("vulkan"));
  const std::string glsl = m.Imports()[0].InspectSource();
  EXPECT_EQ(glsl.find("bp_status"), std::string::npos) << glsl;
  EXPECT_EQ(glsl.find("binding = 2"), std::string::npos) << glsl;
  EXPECT_EQ(m.Imports()[0].SaveToBytes().find("\nfaults "), std::string::npos);
}

// Modules saved before the checks (version 2) are refused with the way out.
TEST(VulkanChecks, AModuleOfAnOlderVersionIsRefused) {
  backplane::Build(OneInvocationAnElement("n: int32, q: buffer<int32>[n]", "q[i] = i"),
                   Target::Parse("vulkan"));  // loads the plugin
  const std::string old = "backplane-vulkan-module 2\nir 3\nabc\n";
  bp_object_t* obj = nullptr;
  backplane::Check(bp_bytes_create(old.data(), old.size(), &obj));
  backplane::ObjectRef bytes = backplane::ObjectRef::Adopt(obj);
  try {
    backplane::Function::Get("runtime.module.load_from_bytes.vulkan")(bytes);
    FAIL() << "loaded a version 2 module";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("its version is 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("build the module again"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

const char* kWrongExtentParams =
    "n: int32, m: int32, a: buffer<float32>[m], b: buffer<float32>[m], c: buffer<float32>[m]";

std::vector<float> Random(size_t n, uint32_t seed) { return bptest::RandomFloats(n, seed); }

Tensor Floats(const std::vector<float>& v, std::vector<int64_t> shape) {
  Tensor t = Tensor::Empty(shape, kF32, Device(kDev));
  t.CopyFrom(v);
  return t;
}

// Item 4: with -bounds-check the first access out of bounds is the interpreter's error naming
// the kernel, buffer, index and extent; right extents give right results; an empty buffer is
// never touched; saved and loaded modules keep the messages; the default build has no check.
TEST_F(VulkanChecksTest, BoundsCheckTurnsAnAccessOutOfBoundsIntoAnError) {
  const std::string ir = OneInvocationAnElement(kWrongExtentParams, "c[i] = a[i] + b[i]");
  Module checked = backplane::Build(ir, Target::Parse("vulkan -bounds-check"));
  const int64_t m = 100;
  const std::vector<float> a = Random(m, 31), b = Random(m, 32);
  Tensor ta = Floats(a, {m}), tb = Floats(b, {m}), tc = Floats(std::vector<float>(m), {m});
  const std::string want =
      ": f_kernel: index 100 is out of bounds for dimension 0 of buffer 'a' (extent 100) in "
      "`a[i]`";
  // n = m + 1: invocation 100 reads a[100] of 100 elements.
  bptest::Status s = CaptureError([&] {
    checked.GetFunction("f")(m + 1, m, ta.dl(), tb.dl(), tc.dl());
    tc.ToVector<float>();
  });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(EndsWith(s.message, want)) << s.message;
  checked.GetFunction("f")(m, m, ta.dl(), tb.dl(), tc.dl());
  std::vector<float> c = tc.ToVector<float>();
  for (int64_t i = 0; i < m; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  // Saved and loaded, the module keeps its messages.
  Module loaded = Module::LoadFromBytes(checked.SaveToBytes());
  s = CaptureError([&] {
    loaded.GetFunction("f")(m + 1, m, ta.dl(), tb.dl(), tc.dl());
    tc.ToVector<float>();
  });
  EXPECT_TRUE(EndsWith(s.message, want)) << s.message;
  // A store out of bounds, after its value is read.
  Module store = backplane::Build(
      OneInvocationAnElement("n: int32, m: int32, a: buffer<float32>[n], c: buffer<float32>[m]",
                             "c[i + 1] = a[i]"),
      Target::Parse("vulkan -bounds-check"));
  s = CaptureError([&] {
    store.GetFunction("f")(m, m, ta.dl(), tc.dl());
    tc.ToVector<float>();
  });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("f_kernel: index 100 is out of bounds for dimension 0 of buffer 'c' "
                           "(extent 100) in `c[i + 1] = a[i]"),
            std::string::npos)
      << s.message;
  // The default build carries no check: no error buffer for this loop-free kernel.
  Module plain = backplane::Build(ir, Target::Parse("vulkan"));
  EXPECT_EQ(plain.Imports()[0].InspectSource().find("bp_chk("), std::string::npos);
  EXPECT_EQ(plain.Imports()[0].InspectSource().find("bp_status"), std::string::npos);
}

// Empty tensors: the access out of bounds is skipped, never made.
TEST_F(VulkanChecksTest, BoundsCheckNeverTouchesAnEmptyBuffer) {
  Module checked =
      backplane::Build(OneInvocationAnElement(kWrongExtentParams, "c[i] = a[i] + b[i]"),
                       Target::Parse("vulkan -bounds-check"));
  Tensor ta = Tensor::Empty({0}, kF32, Device(kDev)), tb = Tensor::Empty({0}, kF32, Device(kDev));
  Tensor tc = Tensor::Empty({0}, kF32, Device(kDev));
  bptest::Status s = CaptureError([&] {
    checked.GetFunction("f")(1, 0, ta.dl(), tb.dl(), tc.dl());
    backplane::DeviceAPI::Get(Device(kDev)).StreamSync(nullptr);
  });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(EndsWith(s.message,
                       "f_kernel: index 0 is out of bounds for dimension 0 of buffer 'a' (extent "
                       "0) in `a[i]`"))
      << s.message;
}

// Shared memory, two dimensions and stores are checked too: a transpose through a tile.
TEST_F(VulkanChecksTest, BoundsCheckCoversSharedMemoryAndEveryDimension) {
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
  Module tm = backplane::Build(tile, Target::Parse("vulkan -bounds-check"));
  const std::vector<float> x = Random(4 * 8, 33);
  Tensor tx = Floats(x, {4, 8}), ty = Floats(std::vector<float>(32), {8, 4});
  tm.GetFunction("t")(4, 4, tx.dl(), ty.dl());
  const std::vector<float> y = ty.ToVector<float>();
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 8; ++k) ASSERT_EQ(y[k * 4 + r], x[r * 8 + (7 - k)]);
  }
  bptest::Status s = CaptureError([&] {
    tm.GetFunction("t")(4, 5, tx.dl(), ty.dl());
    ty.ToVector<float>();
  });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(EndsWith(s.message,
                       "t_kernel: index 4 is out of bounds for dimension 0 of buffer 'x' (extent "
                       "4) in `x[bx, tx]`"))
      << s.message;
}

std::vector<std::string> GpuKernels() {
  std::vector<std::string> names;
  for (const backplane::kernels::Case& c : backplane::kernels::Catalog()) {
    if (c.needs_threads) names.push_back(c.func);
  }
  return names;
}

class VulkanBoundsCheckKernelTest : public VulkanChecksTest,
                                    public ::testing::WithParamInterface<std::string> {};

// Every catalog GPU kernel still matches its reference with -bounds-check, saved and loaded.
TEST_P(VulkanBoundsCheckKernelTest, MatchesTheReference) {
  const backplane::kernels::Case* c = backplane::kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  Module m =
      backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("vulkan -bounds-check"));
  EXPECT_NE(m.Imports()[0].InspectSource().find("bp_chk("), std::string::npos);
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Device(kDev), c->small, 1);
  EXPECT_TRUE(r.ok) << r.error;
  Module loaded = Module::LoadFromBytes(m.SaveToBytes());
  r = backplane::runner::RunCase(*c, loaded, Device(kDev), c->small, 1, 7);
  EXPECT_TRUE(r.ok) << "after save and load: " << r.error;
}

INSTANTIATE_TEST_SUITE_P(Catalog, VulkanBoundsCheckKernelTest, ::testing::ValuesIn(GpuKernels()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
