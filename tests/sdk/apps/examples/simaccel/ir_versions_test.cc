// SPDX-License-Identifier: Apache-2.0
// IR versions are negotiated (c_api.h, BP_FUNCTION_READS_IR; docs/ir.md, "Versions"): bp_build
// hands each code generator its kernels in a version it reads. The code generators here are the
// host's: each records the text it is given and builds it with the simulated accelerator's real
// code generator (which reads every version), so every kernel also runs on simaccel:0 against
// the float64 reference. simaccel_v1 declares nothing (a code generator built before ABI 1.8:
// version 1 only), simaccel_v12 reads 1 to 2, simaccel_v23 2 to 3, simaccel_v9 only a version
// this Backplane does not write.
#include <backplane/runner/runner.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Target;
namespace kernels = backplane::kernels;

std::mutex g_mu;
std::vector<std::string> g_texts;  // what the recording code generators were given, in order

// A code generator that records its input and builds it for the simaccel kind.
bp_status_t RecordAndBuild(void*, const bp_value_t* args, int32_t n, bp_value_t* out) {
  return backplane::CatchAtEdge([&] {
    if (n != 2 || args[0].type != BP_VALUE_STR) {
      throw backplane::Error(BP_ERR_INVALID_ARGUMENT, "expected the IR text and a Target");
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_texts.push_back(args[0].u.v_str);
    }
    backplane::Any m = backplane::Function::Get("target.build.simaccel")(
        std::string(args[0].u.v_str), Target::Parse("simaccel").object());
    *out = m.release();
  });
}

void RegisterKind(const std::string& kind, uint32_t flags, bool declare) {
  bp_target_attr_def_t attrs[2] = {};
  attrs[0].struct_size = sizeof(bp_target_attr_def_t);
  attrs[0].name = "max_num_threads";
  attrs[0].type = BP_TARGET_ATTR_INT;
  attrs[0].device_attr = -1;
  attrs[0].default_json = "256";
  attrs[1] = attrs[0];
  attrs[1].name = "thread_warp_size";
  attrs[1].default_json = "1";
  const char* keys[] = {kind.c_str(), "gpu"};
  bp_target_kind_def_t def{};
  def.struct_size = sizeof(def);
  def.name = kind.c_str();
  def.device_type = "simaccel";
  def.default_keys = keys;
  def.num_default_keys = 2;
  def.attrs = attrs;
  def.num_attrs = 2;
  backplane::Check(bp_target_kind_register(&def));
  bp_object_t* f = nullptr;
  backplane::Check(declare ? bp_function_create_with_flags(RecordAndBuild, nullptr, nullptr,
                                                           BP_FUNCTION_CONTAINED | flags, &f)
                           : bp_function_create(RecordAndBuild, nullptr, nullptr, &f));
  backplane::Check(bp_registry_set(("target.build." + kind).c_str(), f, 0));
  bp_object_release(f);
}

class IRVersionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bptest::LoadTestPlugin("simaccel_testing");
    RegisterKind("simaccel_v1", 0, false);
    RegisterKind("simaccel_v12", BP_FUNCTION_READS_IR(1, 2), true);
    RegisterKind("simaccel_v23", BP_FUNCTION_READS_IR(2, 3), true);
    RegisterKind("simaccel_v9", BP_FUNCTION_READS_IR(9, 9), true);
  }
  void SetUp() override {
    std::lock_guard<std::mutex> lock(g_mu);
    g_texts.clear();
  }
  static std::vector<std::string> Texts() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_texts;
  }
  // The header line of every text a recording code generator was given.
  static std::vector<std::string> Headers() {
    std::vector<std::string> out;
    for (const std::string& t : Texts()) out.push_back(t.substr(0, t.find('\n')));
    return out;
  }
};

// Every GPU kernel of the catalog uses something of version 2 (a running sum in a `var`, a
// loop with a step, a negation) or only version 1; none uses an atomic or `%`. A code generator
// that reads version 1 only gets each as version 1 text and the result is still right.
TEST_F(IRVersionsTest, EveryCatalogKernelReachesAVersion1CodeGeneratorLoweredAndRight) {
  int lowered = 0;
  for (const kernels::Case& c : kernels::Catalog()) {
    if (!c.needs_threads) continue;
    SCOPED_TRACE(c.func);
    SetUp();
    const std::string source = backplane::runner::KernelSource(c);
    Module m;
    ASSERT_NO_THROW(m = backplane::Build(source, Target::Parse("simaccel_v1")));
    ASSERT_FALSE(Texts().empty());
    for (const std::string& h : Headers()) EXPECT_EQ(h, "# backplane-ir 1");
    if (source.rfind("# backplane-ir 1\n", 0) != 0) ++lowered;
    const backplane::runner::Result r =
        backplane::runner::RunCase(c, m, Device("simaccel", 0), c.small, 1);
    EXPECT_TRUE(r.ok) << r.error;
  }
  EXPECT_GE(lowered, 4) << "the catalog's version-2 kernels should have been lowered";
}

constexpr const char* kAtomic = R"(# backplane-ir 2
func hist(n: int32, x: buffer<int32>[n], h: buffer<int32>[4]) {
  for b in thread(blockIdx.x, 0, (n + 63) / 64) {
    for t in thread(threadIdx.x, 0, 64) {
      if (b * 64 + t < n) {
        atomic_add(h[x[b * 64 + t]], 1)
      }
    }
  }
}
)";

constexpr const char* kRemainder = R"(# backplane-ir 3
func rem(n: int32, x: buffer<int32>[n], y: buffer<int32>[n]) {
  for b in thread(blockIdx.x, 0, (n + 63) / 64) {
    for t in thread(threadIdx.x, 0, 64) {
      if (b * 64 + t < n) {
        y[b * 64 + t] = x[b * 64 + t] % 7
      }
    }
  }
}
)";

std::string BuildError(const std::string& ir, const std::string& target, bp_status_t* kind) {
  try {
    backplane::Build(ir, Target::Parse(target));
  } catch (const backplane::Error& e) {
    *kind = e.kind();
    return e.what();
  }
  *kind = BP_OK;
  return "";
}

TEST_F(IRVersionsTest, WhatCannotBeLoweredIsRefusedNamingTheConstructVersionAndCodeGenerator) {
  bp_status_t kind = BP_OK;
  std::string msg = BuildError(kAtomic, "simaccel_v1", &kind);
  EXPECT_EQ(kind, BP_ERR_UNSUPPORTED) << msg;
  EXPECT_NE(msg.find("bp_build for target kind 'simaccel_v1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("function 'hist_kernel' (a kernel SplitHostDevice made of function 'hist') "
                     "uses atomic_add (`atomic_add("),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("which needs IR text version 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("target.build.simaccel_v1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reads IR text versions 1 to 1"), std::string::npos) << msg;
  EXPECT_TRUE(Texts().empty()) << "a refused kernel must not reach the code generator";

  msg = BuildError(kRemainder, "simaccel_v12", &kind);
  EXPECT_EQ(kind, BP_ERR_UNSUPPORTED) << msg;
  EXPECT_NE(msg.find("which needs IR text version 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reads IR text versions 1 to 2"), std::string::npos) << msg;

  // Version 2 has atomics: simaccel_v12 gets the kernel as it is, and it runs.
  ASSERT_NO_THROW(backplane::Build(kAtomic, Target::Parse("simaccel_v12")));
  EXPECT_EQ(Headers(), std::vector<std::string>{"# backplane-ir 2"});
}

TEST_F(IRVersionsTest, ACodeGeneratorThatReadsNoOlderVersionGetsItsOldestAndTheResultIsRight) {
  const kernels::Case* c = kernels::Find("vector_add4_gpu");
  ASSERT_NE(c, nullptr);
  Module m;
  ASSERT_NO_THROW(
      m = backplane::Build(backplane::runner::KernelSource(*c), Target::Parse("simaccel_v23")));
  EXPECT_EQ(Headers(), std::vector<std::string>{"# backplane-ir 2"});
  const backplane::runner::Result r =
      backplane::runner::RunCase(*c, m, Device("simaccel", 0), c->small, 1);
  EXPECT_TRUE(r.ok) << r.error;

  SetUp();
  ASSERT_NO_THROW(backplane::Build(kRemainder, Target::Parse("simaccel_v23")));
  EXPECT_EQ(Headers(), std::vector<std::string>{"# backplane-ir 3"});
}

TEST_F(IRVersionsTest, ACodeGeneratorThatReadsOnlyNewerVersionsIsAVersionMismatch) {
  bp_status_t kind = BP_OK;
  const std::string msg = BuildError(kAtomic, "simaccel_v9", &kind);
  EXPECT_EQ(kind, BP_ERR_VERSION_MISMATCH) << msg;
  EXPECT_NE(msg.find("reads IR text versions 9 to 9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("upgrade libbackplane"), std::string::npos) << msg;
  EXPECT_TRUE(Texts().empty());
}

TEST_F(IRVersionsTest, ARangeThatIsNotOneIsRefusedWhenTheFunctionIsMade) {
  for (uint32_t flags : {BP_FUNCTION_READS_IR(3, 1), BP_FUNCTION_READS_IR(0, 2)}) {
    bp_object_t* f = nullptr;
    const bptest::Status s =
        bptest::Capture(bp_function_create_with_flags(RecordAndBuild, nullptr, nullptr, flags, &f));
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(s.message.find("is not a range of IR text versions"), std::string::npos) << s.message;
    EXPECT_EQ(f, nullptr);
  }
  // Bits past the range are still unknown.
  bp_object_t* f = nullptr;
  const bptest::Status s = bptest::Capture(
      bp_function_create_with_flags(RecordAndBuild, nullptr, nullptr, 0x01000000u, &f));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("unknown flag bits"), std::string::npos) << s.message;
}

}  // namespace
