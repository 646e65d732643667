// SPDX-License-Identifier: Apache-2.0
// Saved modules rewritten as an attacker would (issue 14, item 1): a module built here, one of its
// payloads changed, the checksum recomputed (tests/module_file.h). Loading re-checks everything
// the build established, so each change is a clean error that names the module kind and what is
// wrong, never a module that corrupts memory when it runs. Before these checks, host code that
// writes a device buffer made `backplane run` abort with "malloc(): invalid size" (OpenCL) or
// segfault (Vulkan), and a vulkan layout whose push-constant offset lay past its block wrote past
// a heap buffer at the launch.
#include <stdlib.h>

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
    if (GetParam() == "fakeacc") bptest::LoadTestPlugin("fakeacc");
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

INSTANTIATE_TEST_SUITE_P(Kinds, HostPart, ::testing::Values("fakeacc", "opencl", "vulkan", "cuda"),
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
  bptest::Status s = load("c[((bx * 256) + tx)] =", "c[((bx * 256) + tx) * 4096] =");
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

}  // namespace
