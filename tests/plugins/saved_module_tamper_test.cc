// SPDX-License-Identifier: Apache-2.0
// Saved modules rewritten as an attacker would: a module built here, one of its
// payloads changed, the checksum recomputed (tests/module_file.h). Loading re-checks everything
// the build established, so each change is a clean error that names the module kind and what is
// wrong, never a module that corrupts memory when it runs. Before these checks, host code that
// writes a device buffer made `backplane run` abort with "malloc(): invalid size" (OpenCL) or
// segfault (Vulkan), and a vulkan layout whose push-constant offset lay past its block wrote past
// a heap buffer at the launch.
#include <stdlib.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "../module_file.h"
#include "test_util.h"

namespace {

using backplane::Function;
using backplane::Module;
using backplane::ModuleLoadOptions;
using backplane::Target;
using bptest::ModuleFile;
using bptest::ReplaceOnce;

const char* kVectorAdd = R"(# backplane-ir 1
func vector_add_gpu(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 255) / 256) {
    for tx in thread(threadIdx.x, 0, 256) {
      if (bx * 256 + tx < n) {
        c[bx * 256 + tx] = a[bx * 256 + tx] + b[bx * 256 + tx]
      }
    }
  }
}
)";

// The plugins pick their cache folders once per process: one scratch folder for all tests.
void UseScratchCache() {
  static bptest::ScratchDir dir;
  setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
}

// The saved module of vector_add_gpu built for `target`, or "" when this build has no code
// generator for its kind.
std::string Saved(const std::string& target, const char* ir = kVectorAdd) {
  UseScratchCache();
  const std::string kind = target.substr(0, target.find(' '));
  try {
    Function::Get("target.build." + kind);
  } catch (const backplane::Error&) {
    return "";
  }
  try {
    return backplane::Build(ir, Target::Parse(target)).SaveToBytes();
  } catch (const backplane::Error& e) {
    // The cuda code generator needs NVRTC, which a machine without the CUDA toolkit lacks.
    if (std::string(e.what()).find("NVRTC") != std::string::npos) return "";
    throw;
  }
}

// Loads `bytes`; the error as a status (BP_OK when it loads).
bptest::Status Load(const std::string& bytes, bool allow_native = false) {
  return bptest::CaptureError(
      [&] { Module::LoadFromBytes(bytes, ModuleLoadOptions{allow_native}); });
}

// `bytes` with the payload of its first module of `kind` replaced by edit(payload).
template <typename Edit>
std::string Tamper(const std::string& bytes, const std::string& kind, Edit edit) {
  ModuleFile f = ModuleFile::Parse(bytes);
  ModuleFile::Node& node = f.Find(kind);
  node.payload = edit(node.payload);
  return f.Write();
}

bool Has(const bptest::Status& s, const std::string& part) {
  return s.message.find(part) != std::string::npos;
}

// ---- The host part (the core's ir_host loader), on every GPU-like kind -----------------------

class HostPart : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "simaccel") bptest::LoadTestPlugin("simaccel_testing");
    bytes_ = Saved(GetParam());
    if (bytes_.empty()) GTEST_SKIP() << "no " << GetParam() << " code generator in this build";
    const bptest::Status s = Load(bytes_);
    ASSERT_TRUE(s.ok()) << "the module as built does not load: " << s;
  }
  bptest::Status LoadHost(const std::string& from, const std::string& to) {
    return Load(
        Tamper(bytes_, "ir_host", [&](const std::string& p) { return ReplaceOnce(p, from, to); }));
  }
  std::string bytes_;
};

// The issue's reproducer: host code that writes a buffer, which lives in device memory.
TEST_P(HostPart, HostCodeThatWritesDeviceMemoryIsRefused) {
  const bptest::Status s = LoadHost(
      "  call_packed(", "  for i in serial(0, n * 64) {\n    c[i] = 1.0\n  }\n  call_packed(");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s, "module file: the ir_host module is not host code bp_build makes")) << s;
  EXPECT_TRUE(Has(s,
                  "in function 'vector_add_gpu': host code stores to buffer 'c', a parameter, "
                  "which lives in device memory"))
      << s;
  EXPECT_TRUE(Has(s, "rebuild it from its IR")) << s;
  const bptest::Status read = LoadHost("  call_packed(", "  let x: float32 = a[0]\n  call_packed(");
  EXPECT_TRUE(Has(read, "host code loads from buffer 'a'")) << read;
}

// A launch on a grid larger than the kernel's loops assume: its threads index past the buffers.
TEST_P(HostPart, ALaunchOnAnotherGridIsRefused) {
  const bptest::Status s = LoadHost("int64((n + 255) / 256)", "int64((n + 255) / 256 * 64)");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s,
                  "passes `int64((n + 255) / 256 * 64)` as the extent of blockIdx.x, but the "
                  "kernel binds blockIdx.x with extent `(n + 255) / 256` of its params"))
      << s;
  const bptest::Status threads = LoadHost("int64(256)", "int64(1024)");
  EXPECT_TRUE(Has(threads, "as the extent of threadIdx.x")) << threads;
}

// Arguments that are not the kernel's params: another order, too few, a bound loop in host code.
TEST_P(HostPart, ALaunchWithOtherArgumentsIsRefused) {
  bptest::Status s = LoadHost("n, a, b, c,", "n, c, b, a, n,");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s, "passes 7 arguments; the kernel takes 4 params and 2 launch extents")) << s;
  s = LoadHost("n, a, b, c,", "n, n, b, c,");
  EXPECT_TRUE(Has(s, "argument 1 must be one of the host function's buffer params")) << s;
  s = LoadHost("  call_packed(",
               "  for t in thread(threadIdx.x, 0, 4) {\n    let y: int32 = t\n  }\n  call_packed(");
  EXPECT_TRUE(Has(s, "host code binds a loop to threadIdx.x")) << s;
}

INSTANTIATE_TEST_SUITE_P(Kinds, HostPart, ::testing::Values("simaccel", "opencl", "vulkan", "cuda"),
                         [](const auto& param_info) { return param_info.param; });

// ---- Each plugin's loader: its own payload -------------------------------------------------

TEST(OpenCLPayload, CodeThatIsNotWhatTheIRGivesIsRefused) {
  const std::string bytes = Saved("opencl");
  if (bytes.empty()) GTEST_SKIP() << "no opencl code generator in this build";
  auto load = [&](const std::string& from, const std::string& to) {
    return Load(
        Tamper(bytes, "opencl", [&](const std::string& p) { return ReplaceOnce(p, from, to); }));
  };
  // The kernel's OpenCL C writes past its buffer (PoCL runs it in this process).
  bptest::Status s = load("c[((((int64_t)(bx)) * ((int64_t)256l)) + ((int64_t)(tx)))] =",
                          "c[((((int64_t)(bx)) * ((int64_t)256l)) + ((int64_t)(tx))) * 4096] =");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s,
                  "runtime.module.load_from_bytes.opencl: the opencl module holds OpenCL C that "
                  "is not what this Backplane generates from the module's IR"))
      << s;
  // The IR changed and the OpenCL C not: the C is not the IR's either.
  s = load("c[bx * 256 + tx] = a[bx * 256 + tx]", "c[bx * 256 + tx] = b[bx * 256 + tx]");
  EXPECT_TRUE(Has(s, "holds OpenCL C that is not what this Backplane generates")) << s;
  // A kernel whose IR (and so its OpenCL C, which does not spell thread extents) assumes another
  // grid than the host launches: the ir_host check, against the kernel's IR, refuses the tree.
  s = load("for tx in thread(threadIdx.x, 0, 256)", "for tx in thread(threadIdx.x, 0, 512)");
  EXPECT_TRUE(Has(s,
                  "passes `int64(256)` as the extent of threadIdx.x, but the kernel binds "
                  "threadIdx.x with extent `512`"))
      << s;
  s = load(
      "attrs(\\\"kernel\\\": \\\"1\\\", \\\"launch_params\\\": \\\"blockIdx.x,threadIdx.x\\\")",
      "");
  EXPECT_TRUE(Has(s, "holds IR that is not a set of kernels this Backplane builds")) << s;
  s = load("\"fault_sites\":\"[]\"", "\"fault_sites\":\"[{\\\"kind\\\":\\\"division\\\"}]\"");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  s = load("BPOCLMOD2", "BPOCLMOD1");
  EXPECT_TRUE(Has(s, "was saved by an older Backplane (BPOCLMOD1)")) << s;
  s = load("\"fp_contract\":false", "\"fp_contract\":true");
  EXPECT_TRUE(Has(s, "holds OpenCL C that is not what this Backplane generates")) << s;
}

// The fields of a vulkan payload ("key length\nvalue\n" after the magic line).
struct VulkanFields {
  std::string magic;
  std::vector<std::pair<std::string, std::string>> fields;

  static VulkanFields Parse(const std::string& p) {
    VulkanFields f;
    size_t pos = p.find('\n') + 1;
    f.magic = p.substr(0, pos);
    while (pos < p.size()) {
      const size_t space = p.find(' ', pos), nl = p.find('\n', pos);
      const size_t len = std::stoull(p.substr(space + 1, nl - space - 1));
      f.fields.emplace_back(p.substr(pos, space - pos), p.substr(nl + 1, len));
      pos = nl + 1 + len + 1;
    }
    return f;
  }
  std::string Write() const {
    std::string out = magic;
    for (const auto& [k, v] : fields) out += k + " " + std::to_string(v.size()) + "\n" + v + "\n";
    return out;
  }
  std::string& Get(const std::string& key) {
    for (auto& [k, v] : fields) {
      if (k == key) return v;
    }
    throw std::runtime_error("no field " + key);
  }
};

// The SPIR-V words of the payload's kernel, edited by `edit`, written back.
template <typename Edit>
std::string EditSpirv(const std::string& bytes, Edit edit) {
  return Tamper(bytes, "vulkan", [&](const std::string& p) {
    VulkanFields f = VulkanFields::Parse(p);
    std::string& spirv = f.Get("spirv");
    std::vector<uint32_t> words(spirv.size() / 4);
    std::memcpy(words.data(), spirv.data(), spirv.size());
    edit(words);
    spirv.assign(reinterpret_cast<const char*>(words.data()), words.size() * 4);
    return f.Write();
  });
}

// The operands of the first instruction `op` whose operand `at` is `value` (SPIR-V words).
uint32_t* Instruction(std::vector<uint32_t>& w, uint32_t op, size_t at, uint32_t value) {
  for (size_t i = 5; i < w.size() && (w[i] >> 16) != 0; i += w[i] >> 16) {
    if ((w[i] & 0xffffu) == op && (w[i] >> 16) > at && w[i + at] == value) return &w[i];
  }
  return nullptr;
}

TEST(VulkanPayload, ALayoutOrShaderOtherThanTheIRsIsRefused) {
  const std::string bytes = Saved("vulkan");
  if (bytes.empty()) GTEST_SKIP() << "no vulkan code generator in this build";
  auto edit_field = [&](const std::string& key, const std::string& from, const std::string& to) {
    return Load(Tamper(bytes, "vulkan", [&](const std::string& p) {
      VulkanFields f = VulkanFields::Parse(p);
      f.Get(key) = ReplaceOnce(f.Get(key), from, to);
      return f.Write();
    }));
  };
  // A push-constant offset past the block: the launch wrote past a heap buffer of push_size.
  bptest::Status s = edit_field("layout", "push 0 0 ", "push 0 4000 ");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s,
                  "kernel 'vector_add_gpu_kernel' has a layout or GLSL that is not what this "
                  "Backplane generates from its IR"))
      << s;
  EXPECT_TRUE(Has(edit_field("layout", "bindings 1 2 3", "bindings 1 2 0"), "layout or GLSL"));
  EXPECT_TRUE(Has(edit_field("glsl", "void main()", "void main( )"), "layout or GLSL"));
  EXPECT_TRUE(Has(edit_field("options", "bounds_check 0", "bounds_check 1"), "layout or GLSL"));
  EXPECT_TRUE(Has(edit_field("ir", "thread(threadIdx.x, 0, 256)", "thread(threadIdx.x, 0, 128)"),
                  "layout or GLSL"));
  EXPECT_TRUE(
      Has(edit_field("options", "max_threads 256", "max_threads x"), "options are damaged"));

  // The SPIR-V: another workgroup size, a binding the layout lacks, words that are not SPIR-V.
  s = Load(EditSpirv(bytes, [](std::vector<uint32_t>& w) {
    uint32_t* mode = Instruction(w, 16, 2, 17);  // OpExecutionMode %main LocalSize
    ASSERT_NE(mode, nullptr);
    mode[3] = 512;
  }));
  EXPECT_TRUE(Has(s,
                  "kernel 'vector_add_gpu_kernel': its workgroup size is 512 x 1 x 1, not the "
                  "layout's 256 x 1 x 1"))
      << s;
  // The WorkgroupSize built-in, which the driver takes over LocalSize, made of another constant.
  s = Load(EditSpirv(bytes, [](std::vector<uint32_t>& w) {
    // OpDecorate %size BuiltIn WorkgroupSize; %size = OpConstantComposite %v3uint %x %y %z;
    // %x = OpConstant %uint 256.
    const uint32_t* builtin = Instruction(w, 71, 3, 25);
    ASSERT_NE(builtin, nullptr);
    const uint32_t* composite = Instruction(w, 44, 2, builtin[1]);
    ASSERT_NE(composite, nullptr);
    uint32_t* x = Instruction(w, 43, 2, composite[3]);
    ASSERT_NE(x, nullptr);
    ASSERT_EQ(x[3], 256u);
    x[3] = 512;
  }));
  EXPECT_TRUE(Has(s,
                  "kernel 'vector_add_gpu_kernel': its WorkgroupSize on axis 0 is not the "
                  "layout's 256"))
      << s;
  s = Load(EditSpirv(bytes, [](std::vector<uint32_t>& w) {
    uint32_t* binding = Instruction(w, 71, 2, 33);  // OpDecorate %x Binding
    ASSERT_NE(binding, nullptr);
    binding[3] = 7;
  }));
  EXPECT_TRUE(Has(s, "it reads a buffer outside the layout's 3 bindings of set 0")) << s;
  s = Load(EditSpirv(bytes, [](std::vector<uint32_t>& w) { w[w.size() / 2] = 0x00040001u; }));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s, "runtime.module.load_from_bytes.vulkan")) << s;

  // A field length near 2^64 wrapped the reader's bounds check (an out-of-bounds read).
  s = Load(Tamper(bytes, "vulkan", [](const std::string& p) {
    return ReplaceOnce(p, "\nkernels 1\n", "\nkernels 18446744073709551615\n");
  }));
  EXPECT_TRUE(Has(s, "the field 'kernels' is cut short")) << s;
  s = Load(Tamper(bytes, "vulkan", [](const std::string& p) {
    return ReplaceOnce(p, "backplane-vulkan-module 4", "backplane-vulkan-module 3");
  }));
  EXPECT_TRUE(Has(s, "its version is 3, an older Backplane's")) << s;
}

// A kernel whose workgroup is sized at launch takes its size from the WorkgroupSize built-in,
// made of specialization constant 1000 (x) and the layout's constants: SPIR-V that takes x from
// another constant, or sizes y otherwise, is refused (the driver would run a workgroup of
// another size than the launch kit checked).
TEST(VulkanPayload, AWorkgroupSizedAtLaunchIsTheSpecializationConstant) {
  const char* const ir =
      "func rows(w: int32, n: int32, x: buffer<float32>[n * w]) {\n"
      "  for b in thread(blockIdx.x, 0, n) {\n"
      "    for ty in thread(threadIdx.y, 0, 2) {\n"
      "      for t in thread(threadIdx.x, 0, w) {\n"
      "        if (ty == 0) {\n"
      "          x[b * w + t] = x[b * w + t] * 2.0\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  const std::string bytes = Saved("vulkan", ir);
  if (bytes.empty()) GTEST_SKIP() << "no vulkan code generator in this build";
  EXPECT_EQ(Load(bytes).kind, BP_OK) << Load(bytes);
  bptest::Status s = Load(EditSpirv(bytes, [](std::vector<uint32_t>& w) {
    uint32_t* spec_id = Instruction(w, 71, 3, 1000);  // OpDecorate %x SpecId 1000
    ASSERT_NE(spec_id, nullptr);
    spec_id[3] = 0;
  }));
  EXPECT_TRUE(Has(s,
                  "its WorkgroupSize on axis 0 is not the specialization constant 1000 that the "
                  "layout sizes at launch"))
      << s;
  s = Load(EditSpirv(bytes, [](std::vector<uint32_t>& w) {
    uint32_t* builtin = Instruction(w, 71, 3, 25);  // OpDecorate %size BuiltIn WorkgroupSize
    ASSERT_NE(builtin, nullptr);
    builtin[3] = 24;  // NumWorkgroups: no WorkgroupSize left
  }));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s, "runtime.module.load_from_bytes.vulkan")) << s;
}

TEST(CUDAPayload, ATableOrPTXOtherThanTheIRsIsRefused) {
  const std::string bytes = Saved("cuda");
  if (bytes.empty()) GTEST_SKIP() << "no cuda code generator in this build";
  auto load = [&](const std::string& from, const std::string& to, const char* seed_name = nullptr) {
    const std::string tampered = Tamper(bytes, "cuda", [&](const std::string& p) {
      // The header's section sizes follow the PTX's length.
      std::string out = ReplaceOnce(p, from, to);
      const size_t eol = out.find('\n', 24);
      nlohmann::json h = nlohmann::json::parse(out.substr(24, eol - 24));
      h["sections"]["binary"] = h["sections"]["binary"].get<size_t>() + to.size() - from.size();
      return out.substr(0, 24) + h.dump() + out.substr(eol);
    });
    // BACKPLANE_WRITE_SEEDS=DIR writes the module loader fuzzer's seed for this finding
    // (tests/fuzz/corpus/module_loader), so it follows the module format.
    const char* seeds = std::getenv("BACKPLANE_WRITE_SEEDS");
    if (seeds != nullptr && seed_name != nullptr) {
      std::ofstream(std::string(seeds) + "/" + seed_name, std::ios::binary) << tampered;
    }
    return Load(tampered);
  };
  // One more param in the PTX than the launch passes (n, a, b, c and the block offset on x):
  // cuLaunchKernel would read past the slots.
  bptest::Status s =
      load("vector_add_gpu_kernel_param_4\n)",
           "vector_add_gpu_kernel_param_4,\n\t.param .u64 extra\n)", "cuda_ptx_extra_param");
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s,
                  "its PTX declares kernel 'vector_add_gpu_kernel' with 6 params, but the "
                  "launch passes 5"))
      << s;
  s = load(".param .u32 vector_add_gpu_kernel_param_0",
           ".param .align 8 .b8 vector_add_gpu_kernel_param_0[64]");
  EXPECT_TRUE(Has(s, "a param that is not a scalar")) << s;
  // The function table: a scalar passed where the kernel takes a pointer.
  s = Load(Tamper(bytes, "cuda", [](const std::string& p) {
    return ReplaceOnce(p, "\"arg_types\":[\"int32\",\"handle\"",
                       "\"arg_types\":[\"handle\",\"handle\"");
  }));
  EXPECT_TRUE(Has(s,
                  "its CUDA C, function table or check table is not what this Backplane "
                  "generates from its IR"))
      << s;
  // The written flags: the output marked read-only would let the launch kit pass it aliased
  // with an input (its alias check covers written buffers only). Refused, and so is a flag
  // list of the wrong length.
  for (const char* written :
       {"[false,false,false,false]", "[false,false,true,true]", "[false,false,false]"}) {
    s = Load(Tamper(bytes, "cuda", [&](const std::string& p) {
      return ReplaceOnce(p, "\"written\":[false,false,false,true]",
                         std::string("\"written\":") + written);
    }));
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << written << ": " << s;
    EXPECT_FALSE(s.ok()) << written;
  }
}

TEST(SimAccelPayload, AFunctionThatIsNotAKernelIsRefused) {
  bptest::LoadTestPlugin("simaccel_testing");
  const std::string bytes = Saved("simaccel");
  const bptest::Status s = Load(Tamper(bytes, "simaccel", [](const std::string& p) {
    return ReplaceOnce(
        p, " attrs(\"kernel\": \"1\", \"launch_params\": \"blockIdx.x,threadIdx.x\")", "");
  }));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s, "function 'vector_add_gpu_kernel' is not a kernel (it has no launch_params)"))
      << s;
}

// A c module is native code, trusted once allowed; its IR, which calls are checked against before
// they reach the library, must still verify.
TEST(CPayload, IRThatDoesNotVerifyIsRefusedEvenWhenNativeCodeIsAllowed) {
  const char* ir = R"(# backplane-ir 1
func scale(n: int32, a: buffer<float32>[n]) {
  for i in serial(0, n) {
    a[i] = a[i] * 2.0
  }
}
)";
  const std::string bytes = Saved("c", ir);
  ASSERT_FALSE(bytes.empty());
  const bptest::Status s = Load(
      Tamper(bytes, "c",
             [](const std::string& p) { return ReplaceOnce(p, "a[i] = a[i] * 2.0", "a[i] = m"); }),
      /*allow_native=*/true);
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_TRUE(Has(s, "its IR does not parse or verify")) << s;
}

}  // namespace
