// SPDX-License-Identifier: Apache-2.0
// A `c` Target is data: parsing or building one never runs a program of its
// choosing. Its cflags come from an allowlist, each refused class of flag is named with why and
// what to do; its cc is a compiler's plain name, never a path or arguments, and mtriple, mcpu,
// march and mattr cannot smuggle either; the compiler is host configuration (BACKPLANE_CC).
// Flags on the allowlist still build and run.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Function;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;

const char* kVectorAdd = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for i in parallel(0, n) {
    c[i] = a[i] + b[i]
  }
}
)";

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// An executable shell script at `path`.
void WriteScript(const std::string& path, const std::string& body) {
  {
    std::ofstream out(path);
    out << "#!/bin/sh\n" << body << "\n";
  }
  chmod(path.c_str(), 0755);
}

class TargetIsData : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("XDG_CACHE_HOME", cache_.path().c_str(), 1);
    unsetenv("BACKPLANE_CC");
  }

  // Parses `text` and, if that succeeds, builds the vector add for it, as a host that
  // received the Target from someone else would. The error either step gave, or BP_OK.
  bptest::Status ParseAndBuild(const std::string& text) {
    return bptest::CaptureError([&] {
      Target t = Target::Parse(text);
      Module(Function::Get("target.build.c")(kVectorAdd, t.object()).AsObject());
    });
  }

  // Expects `text` to be refused as invalid input naming `attr`, every one of `parts`, and the
  // way out (the host's configuration).
  void ExpectRefused(const std::string& text, const std::string& attr,
                     const std::vector<std::string>& parts) {
    SCOPED_TRACE("target: " + text);
    const bptest::Status s = ParseAndBuild(text);
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
    EXPECT_TRUE(Contains(s.message, "attribute '" + attr + "'")) << s;
    for (const std::string& p : parts) EXPECT_TRUE(Contains(s.message, p)) << p << ": " << s;
  }

  bptest::ScratchDir cache_;
  bptest::ScratchDir scratch_;
};

// The reproducer from the issue: -wrapper made the driver run a shell at build time.
TEST_F(TargetIsData, TheWrapperFromTheIssueRunsNothing) {
  const std::string marker = scratch_.path() + "/F";
  for (const std::string& text :
       {R"({"kind":"c","cflags":["-wrapper","/bin/sh,-c,touch )" + marker + R"("]})",
        "c -cflags='-wrapper,/bin/sh,-c,touch " + marker + "'"}) {
    ExpectRefused(text, "cflags",
                  {"'-wrapper'", "runs, loads or configures another program", "BACKPLANE_CC"});
    EXPECT_FALSE(Exists(marker)) << "the Target ran a shell: " << text;
  }
}

TEST_F(TargetIsData, FlagsThatRunOrConfigureProgramsAreRefused) {
  for (const char* flag :
       {"-B/tmp/evil", "-specs=/tmp/evil.specs", "-fplugin=/tmp/evil.so", "-fuse-ld=/tmp/ld",
        "-Xlinker", "-Xassembler", "-Xclang", "-mllvm", "-flto", "-no-integrated-as"}) {
    ExpectRefused(std::string(R"({"kind": "c", "cflags": [")") + flag + "\"]}", "cflags",
                  {std::string("'") + flag + "'", "another program"});
  }
  // -Wl,... names the linker's options; in the string form its commas split it, and the first
  // piece is refused as well.
  ExpectRefused(R"({"kind": "c", "cflags": ["-Wl,-plugin,/tmp/evil.so"]})", "cflags",
                {"'-Wl,-plugin,/tmp/evil.so'", "another program"});
  ExpectRefused("c -cflags=-Wl,-plugin,/tmp/evil.so", "cflags", {"'-Wl'"});
}

TEST_F(TargetIsData, FlagsThatNameFilesAreRefused) {
  for (const char* flag :
       {"@/tmp/options", "-include/etc/passwd", "-imacros", "-I/tmp", "-isystem", "--sysroot=/",
        "-L/tmp", "-lcrypt", "-o", "-T/tmp/script.ld", "-MF", "-save-temps", "-dumpdir",
        "-fdump-tree-all", "-fprofile-generate=/tmp", "-fopt-info=/tmp/x", "-fstack-usage"}) {
    ExpectRefused(std::string(R"({"kind": "c", "cflags": [")") + flag + "\"]}", "cflags",
                  {std::string("'") + flag + "'", "names a file or folder"});
  }
}

TEST_F(TargetIsData, MacrosAreRefused) {
  // The generated code reads no macro; one could redefine what its checks rely on.
  ExpectRefused("c -cflags=-Dbp_chk=0", "cflags", {"'-Dbp_chk=0'", "macro"});
  ExpectRefused("c -cflags=-UNDEBUG", "cflags", {"'-UNDEBUG'", "macro"});
}

TEST_F(TargetIsData, FlagsTheGeneratorFixesAreRefused) {
  for (const char* flag : {"-std=c89", "-xc++", "-shared", "-static", "-fno-wrapv", "-ftrapv",
                           "-fno-openmp", "-fsanitize=address", "-fvisibility=default"}) {
    ExpectRefused(std::string("c -cflags=") + flag, "cflags",
                  {std::string("'") + flag + "'", "the c code generator fixes"});
  }
}

TEST_F(TargetIsData, FlagsNotOnTheListAreRefused) {
  for (const char* flag : {"-v", "--help", "-pipe", "-fno-such-flag", "-fexec-charset=x",
                           "-fvect-cost-model=free", "-march=x y", "-m", "-W"}) {
    ExpectRefused(std::string(R"({"kind": "c", "cflags": [")") + flag + "\"]}", "cflags",
                  {std::string("'") + flag + "'", "not on the list", "docs/security.md"});
  }
}

TEST_F(TargetIsData, TheCompilerIsAPlainNameNeverAPathOrArguments) {
  for (const char* cc : {"/bin/sh", "./cc", "bin/gcc", "gcc -m64", "sh", "python3", "cc;id", "..",
                         "-wrapper", "gcc-", "-gcc", "tcc"}) {
    ExpectRefused(std::string(R"({"kind": "c", "cc": ")") + cc + "\"}", "cc",
                  {"plain name", "BACKPLANE_CC"});
  }
  for (const char* cc : {"cc", "gcc", "clang", "clang-16", "gcc-12.2", "aarch64-linux-gnu-gcc",
                         "x86_64-linux-gnu-gcc-12"}) {
    EXPECT_EQ(Target::Parse(std::string("c -cc=") + cc).GetAttr<std::string>("cc"), cc);
  }
}

// A triple other than this machine's makes the compiler "<mtriple>-gcc": a triple holding a
// path ran a program of the Target's choosing.
TEST_F(TargetIsData, ATripleCannotNameAProgram) {
  const std::string marker = scratch_.path() + "/ran";
  WriteScript(scratch_.path() + "/evil-gcc", "touch " + marker + "; exit 1");
  ExpectRefused(R"({"kind": "c", "mtriple": ")" + scratch_.path() + R"(/evil"})", "mtriple",
                {"target triple"});
  EXPECT_FALSE(Exists(marker)) << "the Target's mtriple chose the program that ran";
  ExpectRefused(R"({"kind": "c", "mtriple": "x86_64 linux"})", "mtriple", {"target triple"});
  EXPECT_EQ(Target::Parse("c -mtriple=aarch64-linux-gnu").GetAttr<std::string>("mtriple"),
            "aarch64-linux-gnu");
}

TEST_F(TargetIsData, CpuNamesAndFeaturesCannotCarryOptions) {
  ExpectRefused(R"({"kind": "c", "mcpu": "skylake -wrapper"})", "mcpu", {"CPU"});
  ExpectRefused(R"({"kind": "c", "march": "-B/tmp"})", "march", {"CPU"});
  // "+llvm" would become -mllvm, which hands the next argument to LLVM.
  ExpectRefused("c -mattr=+llvm", "mattr", {"'+llvm'"});
  ExpectRefused("c -mattr=avx2", "mattr", {"+feature or -feature"});
  ExpectRefused(R"({"kind": "c", "mattr": ["+avx2=/tmp"]})", "mattr", {"+feature"});
}

// Flags on the allowlist still reach the compiler and the kernel runs.
TEST_F(TargetIsData, AllowedFlagsBuildAndRun) {
  const std::string flags =
      "-O3,-march=native,-mtune=generic,-funroll-loops,-fno-strict-aliasing,"
      "-ffp-contract=off,-fvect-cost-model=cheap,-falign-loops=32,-g,-Wall,-Wno-unused,"
      "-fstack-protector-strong";
#if defined(__x86_64__)
  Target t = Target::Parse("c -mattr=+sse2,-avx512f -cflags=" + flags);
#else
  Target t = Target::Parse("c -cflags=" + flags);
#endif
  Module m(Function::Get("target.build.c")(kVectorAdd, t.object()).AsObject());
  const int n = 1000;
  const DLDataType f32{kDLFloat, 32, 1};
  const backplane::Device cpu(bptest::CpuDevice());
  Tensor a = Tensor::Empty({n}, f32, cpu), b = Tensor::Empty({n}, f32, cpu),
         c = Tensor::Empty({n}, f32, cpu);
  std::vector<float> av = bptest::RandomFloats(n, 1), bv = bptest::RandomFloats(n, 2);
  a.CopyFrom(av);
  b.CopyFrom(bv);
  m.GetFunction("vector_add")(n, a.dl(), b.dl(), c.dl());
  std::vector<float> cv = c.ToVector<float>();
  for (int i = 0; i < n; ++i) ASSERT_EQ(cv[i], av[i] + bv[i]) << "at " << i;
  EXPECT_TRUE(Contains(m.InspectSource("c"), "vector_add"));
}

// The compiler is host configuration: BACKPLANE_CC names the program for the default cc.
TEST_F(TargetIsData, TheHostChoosesTheCompilerWithBackplaneCC) {
  const std::string marker = scratch_.path() + "/host-cc-ran";
  const std::string wrapper = scratch_.path() + "/host-cc";
  WriteScript(wrapper, "echo \"$@\" >> " + marker + "\nexec cc \"$@\"");
  setenv("BACKPLANE_CC", wrapper.c_str(), 1);
  // A kernel of its own, so the disk cache cannot answer for it.
  const bptest::Status s = bptest::CaptureError([&] {
    Target t = Target::Parse("c -opt-level=1");
    Module(Function::Get("target.build.c")(std::string(kVectorAdd) +
                                               "\nfunc host_cc_only(a: buffer<float32>[1]) {\n"
                                               "  a[0] = 2.0\n}\n",
                                           t.object())
               .AsObject());
  });
  unsetenv("BACKPLANE_CC");
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_TRUE(Exists(marker)) << "BACKPLANE_CC was not run";
  std::ifstream in(marker);
  const std::string calls((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Contains(calls, "--version")) << calls;
  EXPECT_TRUE(Contains(calls, "-shared")) << calls;
}

}  // namespace
