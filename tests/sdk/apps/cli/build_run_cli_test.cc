// SPDX-License-Identifier: Apache-2.0
// `backplane build`, `backplane run` and `backplane demo` as a user runs them: a module saved
// by one process is loaded and run, checked against the reference, by another; errors exit
// non-zero with a message that says what to do.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <backplane/backplane.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_TEST_SCRATCH_DIR
#error "BACKPLANE_TEST_SCRATCH_DIR must name a scratch folder"
#endif

namespace {

namespace sp = backplane::subprocess;
namespace fs = std::filesystem;

std::string KernelFile(const std::string& name) {
  // The build tree mirrors the install: bin/backplane and share/backplane/kernels/.
  return (fs::path(BACKPLANE_CLI_PATH).parent_path().parent_path() / "share" / "backplane" /
          "kernels" / name)
      .string();
}

class BuildRunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(BACKPLANE_TEST_SCRATCH_DIR);
    dir_ = fs::path(BACKPLANE_TEST_SCRATCH_DIR) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  sp::Result Cli(const std::vector<std::string>& args,
                 const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    sp::Options options;
    options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
    // A private compile cache for this test.
    options.set_env = {{"XDG_CACHE_HOME", (dir_ / "cache").string()}};
    options.set_env.insert(options.set_env.end(), env.begin(), env.end());
    return sp::Run(argv, options);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(BuildRunCli, AModuleBuiltByOneProcessRunsCheckedInAnother) {
  sp::Result b = Cli({"build", KernelFile("matmul.bpir"), "--target", "c -num-cores=2", "--func",
                      "matmul_tiled", "-o", Path("mm.bpmod")});
  ASSERT_EQ(b.exit_code, 0) << b.Describe() << "\n" << b.err;
  EXPECT_TRUE(Contains(b.out, "built matmul_tiled for c")) << b.out;
  ASSERT_TRUE(fs::exists(Path("mm.bpmod")));

  // A c module holds a shared library: another process runs it only when told to trust it.
  sp::Result refused = Cli({"run", Path("mm.bpmod"), "--func", "matmul_tiled"});
  EXPECT_EQ(refused.exit_code, 2) << refused.Describe() << "\n" << refused.out << refused.err;
  EXPECT_TRUE(Contains(refused.err, Path("mm.bpmod") + ": module file: module 0 is of kind 'c', "
                                                       "which carries native code"))
      << refused.err;
  EXPECT_TRUE(Contains(refused.err, "backplane run --allow-native")) << refused.err;

  sp::Result r =
      Cli({"run", Path("mm.bpmod"), "--func", "matmul_tiled", "--device", "cpu:0", "--dim", "m=67",
           "--dim", "n=130", "--dim", "k=45", "--repeat", "2", "--allow-native"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "matmul_tiled on cpu:0: ok")) << r.out;
  EXPECT_TRUE(Contains(r.out, "GFLOP/s")) << r.out;
}

TEST_F(BuildRunCli, AFunctionWithoutAReferenceRunsUnchecked) {
  {
    std::ofstream k(Path("scale.bpir"));
    k << "# backplane-ir 1\n\nfunc scale(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * 2.0\n  }\n}\n";
  }
  sp::Result b = Cli({"build", Path("scale.bpir"), "-t", "c", "-o", Path("s.bpmod")});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  sp::Result r = Cli({"run", Path("s.bpmod"), "-f", "scale", "--dim", "n=100", "--allow-native"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_TRUE(Contains(r.out, "not checked; --check compares it")) << r.out;
  sp::Result missing = Cli({"run", Path("s.bpmod"), "-f", "scale", "--allow-native"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(Contains(missing.err, "--dim n=")) << missing.err;
}

TEST_F(BuildRunCli, ErrorsSayWhatToDo) {
  // A file with CPU and GPU variants builds the CPU ones for a CPU Target and names each GPU
  // one it left out, instead of refusing the whole file.
  sp::Result gpu_on_cpu = Cli({"build", KernelFile("matmul.bpir"), "-t", "c", "-o", Path("x")});
  EXPECT_EQ(gpu_on_cpu.exit_code, 0) << gpu_on_cpu.err;
  EXPECT_TRUE(Contains(gpu_on_cpu.err, "left out matmul_tiled_gpu")) << gpu_on_cpu.err;
  EXPECT_TRUE(Contains(gpu_on_cpu.out, "built matmul, matmul_tiled for c")) << gpu_on_cpu.out;

  sp::Result no_file = Cli({"build", Path("nope.bpir"), "-t", "c", "-o", Path("x")});
  EXPECT_EQ(no_file.exit_code, 2);
  EXPECT_TRUE(Contains(no_file.err, "nope.bpir")) << no_file.err;

  sp::Result no_func =
      Cli({"build", KernelFile("matmul.bpir"), "-t", "c", "-f", "mat", "-o", Path("x")});
  EXPECT_EQ(no_func.exit_code, 2);
  EXPECT_TRUE(Contains(no_func.err, "matmul_tiled")) << no_func.err;

  {
    std::ofstream bad(Path("bad.bpmod"), std::ios::binary);
    bad << "BPMODULE garbage";
  }
  sp::Result corrupt = Cli({"run", Path("bad.bpmod"), "-f", "matmul"});
  EXPECT_EQ(corrupt.exit_code, 2) << corrupt.Describe();
  EXPECT_TRUE(Contains(corrupt.err, "module file")) << corrupt.err;
  EXPECT_TRUE(Contains(corrupt.err, Path("bad.bpmod") + ": ")) << corrupt.err;

  sp::Result bad_dim = Cli({"run", Path("bad.bpmod"), "-f", "matmul", "--dim", "m"});
  EXPECT_EQ(bad_dim.exit_code, 2);
}

TEST_F(BuildRunCli, DemoRunsEveryCpuKernelAndPrintsATable) {
  sp::Result d = Cli({"demo", "--size", "small", "--repeat", "1"});
  ASSERT_EQ(d.exit_code, 0) << d.Describe() << "\n" << d.out << d.err;
  for (const char* k :
       {"vector_add", "saxpy", "sum", "softmax", "matmul", "matmul_tiled", "transpose", "conv2d"}) {
    EXPECT_TRUE(Contains(d.out, std::string(k) + " ")) << k << "\n" << d.out;
  }
  EXPECT_TRUE(Contains(d.out, "0 failed")) << d.out;
  EXPECT_FALSE(Contains(d.out, "FAILED")) << d.out;
}

// Nothing that is not a kernel file or a module builds or runs; every
// input is read under a cap (never until the memory runs out), and the message names the
// file, what was expected and what to do.
TEST_F(BuildRunCli, EmptyDirectoryDeviceAndFifoInputsAreRefused) {
  { std::ofstream empty(Path("empty.bpir")); }
  {
    std::ofstream comments(Path("comments.bpir"));
    comments << "# backplane-ir 1\n# nothing but comments\n\n";
  }
  struct Case {
    std::string file;
    std::string says;
  };
  const std::vector<Case> inputs = {
      {Path("empty.bpir"), "is empty"},
      {"/dev/null", "is empty"},
      {dir_.string(), "is a directory"},
      {"/dev/zero", "more than 16 MiB"},
      {Path("comments.bpir"), "holds no function"},
  };
  for (const Case& c : inputs) {
    sp::Result b = Cli({"build", c.file, "-t", "c", "-o", Path("x.bpmod")});
    EXPECT_EQ(b.exit_code, 2) << c.file << ": " << b.Describe() << "\n" << b.out << b.err;
    EXPECT_TRUE(Contains(b.err, c.file)) << b.err;
    EXPECT_TRUE(Contains(b.err, c.says)) << b.err;
    EXPECT_TRUE(Contains(b.err, "give a kernel file") || Contains(b.err, "give such a file"))
        << b.err;
    EXPECT_FALSE(fs::exists(Path("x.bpmod"))) << c.file;
  }
  const std::vector<Case> modules = {
      {Path("empty.bpir"), "is empty"},
      {"/dev/null", "is empty"},
      {dir_.string(), "is a directory"},
      {"/dev/zero", "more than 256 MiB"},
  };
  for (const Case& c : modules) {
    sp::Result r = Cli({"run", c.file, "-f", "scale"});
    EXPECT_EQ(r.exit_code, 2) << c.file << ": " << r.Describe() << "\n" << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, c.file)) << r.err;
    EXPECT_TRUE(Contains(r.err, c.says)) << r.err;
    EXPECT_TRUE(Contains(r.err, "give a module file")) << r.err;
  }
  // A FIFO is read as a stream, under the same cap: here its writer sends nothing.
  for (const char* command : {"build", "run"}) {
    const std::string fifo = Path(std::string(command) + ".fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << fifo;
    // The writer waits (up to 60 s) for the tool to open the FIFO, then closes it without
    // writing; it never blocks, so a tool that fails before opening cannot hang the test.
    std::thread writer([&] {
      for (int i = 0; i < 6000; ++i) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
          ::close(fd);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    sp::Result r = std::string(command) == "build"
                       ? Cli({"build", fifo, "-t", "c", "-o", Path("x.bpmod")})
                       : Cli({"run", fifo, "-f", "scale"});
    writer.join();
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.Describe() << "\n" << r.err;
    EXPECT_TRUE(Contains(r.err, fifo + "' is empty")) << r.err;
  }
}

// A parse error names the file, line and column, with one exit code,
// whether or not --func picks functions.
TEST_F(BuildRunCli, ParseErrorsNameTheFileWithOrWithoutFunc) {
  {
    std::ofstream k(Path("bad.bpir"));
    k << "# backplane-ir 1\n\nfunc f(n: int32, a: buffer<float32>[n]) {\n"
         "  a[0] = q\n}\n";
  }
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--func", "f"}}) {
    std::vector<std::string> args = {"build", Path("bad.bpir"), "-t", "c", "-o", Path("x")};
    args.insert(args.end(), extra.begin(), extra.end());
    sp::Result b = Cli(args);
    EXPECT_EQ(b.exit_code, 2) << b.Describe() << "\n" << b.err;
    EXPECT_TRUE(Contains(b.err, Path("bad.bpir") + ":4:10")) << b.err;
    EXPECT_FALSE(Contains(b.err, "bp_build input")) << b.err;
  }
  // IR that parses but does not verify is the user's error too: same exit code, file named.
  {
    std::ofstream k(Path("mixed.bpir"));
    k << "func f(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * n\n  }\n}\n";
  }
  sp::Result v = Cli({"build", Path("mixed.bpir"), "-t", "c", "-o", Path("x")});
  EXPECT_EQ(v.exit_code, 2) << v.Describe() << "\n" << v.err;
  EXPECT_TRUE(Contains(v.err, Path("mixed.bpir"))) << v.err;
  EXPECT_TRUE(Contains(v.err, "does not verify")) << v.err;
}

// `run --check` on a kernel that guards its loads with a select. The
// interpreter evaluated both arms and faulted on x[64]; every device runs only the chosen one
// (docs/ir.md, "Interpreter"), and so does the interpreter now: the check passes, on random
// inputs of several sizes, for c, and for opencl and vulkan where their devices are.
TEST_F(BuildRunCli, RunCheckPassesAKernelGuardedBySelect) {
  {
    std::ofstream k(Path("guard.bpir"));
    k << "func guard(n: int32, m: int32, x: buffer<float32>[n], out: buffer<float32>[m]) {\n"
         "  for i in serial(0, m) {\n    out[i] = select(i < n, x[i], 0.0)\n  }\n}\n"
         "func guard_gpu(n: int32, m: int32, x: buffer<float32>[n], out: buffer<float32>[m]) {\n"
         "  for bx in thread(blockIdx.x, 0, (m + 63) / 64) {\n"
         "    for tx in thread(threadIdx.x, 0, 64) {\n"
         "      let i: int32 = bx * 64 + tx\n"
         "      if (i < m) {\n        out[i] = select(i < n, x[i], 0.0)\n      }\n"
         "    }\n  }\n}\n";
  }
  for (const char* kind : {"c", "opencl", "vulkan"}) {
    const std::string func = std::string(kind) == "c" ? "guard" : "guard_gpu";
    const std::string module = Path(std::string(kind) + ".bpmod");
    sp::Result b = Cli({"build", Path("guard.bpir"), "-t", kind, "-f", func, "-o", module});
    if (b.exit_code != 0 && std::string(kind) != "c") continue;  // no such plugin here
    ASSERT_EQ(b.exit_code, 0) << b.Describe() << "\n" << b.err;
    for (const char* dims : {"n=64,m=100", "n=0,m=7", "n=300,m=301"}) {
      const std::string d(dims);
      const std::string n = d.substr(0, d.find(',')), m = d.substr(d.find(',') + 1);
      sp::Result r = Cli({"run", module, "-f", func, "--dim", n, "--dim", m, "--check", "-r", "1",
                          "--seed", std::to_string(n.size() + m.size()), "--allow-native"});
      if (r.exit_code != 0 && Contains(r.err, "does not exist")) break;  // no such device here
      EXPECT_EQ(r.exit_code, 0) << kind << " " << dims << ": " << r.Describe() << "\n"
                                << r.out << r.err;
      EXPECT_TRUE(Contains(r.out, ": ok (matches the IR interpreter")) << r.out << r.err;
    }
  }
}

// A C compiler that crashes on the generated source (gcc 12's cc1 does, with
// its default stack, on a sum of 99,000 loads, which the IR accepts) is a compiler failure:
// `backplane build` exits 1 as docs/cli.md says (it exited 2, a usage error), says the compiler
// crashed and keeps the source. A compiler that refuses what it was given (the Target's flags)
// is still exit 2. The compilers are fakes (BACKPLANE_CC) that fail as cc1 does, so the test
// does not take gcc's minute.
TEST_F(BuildRunCli, ACompilerThatCrashesIsAFailureNotAUsageError) {
  {
    std::ofstream k(Path("scale.bpir"));
    k << "func scale(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * 2.0\n  }\n}\n";
  }
  struct Fake {
    const char* name;
    const char* fails;  // what the fake does when asked to compile
    int exit_code;      // backplane build's
    const char* says;
  } fakes[] = {
      {"segv", "kill -SEGV $$", 1, "the C compiler crashed"},
      {"ice",
       "echo 'cc: internal compiler error: Segmentation fault signal terminated program cc1' "
       ">&2; exit 4",
       1, "the C compiler crashed"},
      {"refuses", "echo \"cc: error: unrecognized command-line option '-mno-such'\" >&2; exit 1", 2,
       "the C compiler failed"},
  };
  for (const Fake& f : fakes) {
    const std::string cc = Path(std::string("cc-") + f.name);
    {
      std::ofstream script(cc);
      script << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fake cc " << f.name
             << "'; exit 0; fi\n"
             << f.fails << "\n";
    }
    fs::permissions(cc, fs::perms::owner_all);
    sp::Result b = Cli({"build", Path("scale.bpir"), "-t", "c", "-o", Path("x.bpmod")},
                       {{"BACKPLANE_CC", cc}});
    EXPECT_EQ(b.exit_code, f.exit_code) << f.name << ": " << b.Describe() << "\n" << b.err;
    EXPECT_TRUE(Contains(b.err, f.says)) << f.name << ": " << b.err;
    EXPECT_TRUE(Contains(b.err, ".failed.c")) << f.name << ": " << b.err;
    EXPECT_FALSE(fs::exists(Path("x.bpmod"))) << f.name;
    if (f.exit_code == 1) {
      EXPECT_TRUE(Contains(b.err, "error (internal error)")) << b.err;
      EXPECT_TRUE(Contains(b.err, "split it in the IR")) << b.err;
    }
  }
}

// An error a code generator reports with its own name is not prefixed
// with that name a second time by the core ("target.build.c: target.build.c: ...").
TEST_F(BuildRunCli, CodeGeneratorErrorsAreNotPrefixedTwice) {
  {
    std::ofstream k(Path("scale.bpir"));
    k << "func scale(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * 2.0\n  }\n}\n";
  }
  sp::Result b = Cli({"build", Path("scale.bpir"), "-t", "c -cc=clang-999", "-o", Path("x.bpmod")});
  EXPECT_NE(b.exit_code, 0);
  EXPECT_TRUE(Contains(b.err, "target.build.c: cannot run the C compiler")) << b.err;
  EXPECT_FALSE(Contains(b.err, "target.build.c: target.build.c")) << b.err;
  // The same through cuda, whose NVRTC errors name target.build.cuda (NVRTC refuses the
  // architecture); skipped where the cuda code generator cannot run at all.
  sp::Result cu = Cli({"build", KernelFile("vector_add.bpir"), "-t", "cuda -arch=sm_1", "-f",
                       "vector_add_gpu", "-o", Path("cu.bpmod")});
  EXPECT_NE(cu.exit_code, 0) << cu.out;
  if (!Contains(cu.err, "NVRTC")) GTEST_SKIP() << "no NVRTC here: " << cu.err;
  EXPECT_TRUE(Contains(cu.err, "target.build.cuda: NVRTC")) << cu.err;
  EXPECT_FALSE(Contains(cu.err, "target.build.cuda: target.build.cuda")) << cu.err;
}

// A module for another device type runs on that type's device 0 by
// default; a --device of the wrong type says which one to give.
TEST_F(BuildRunCli, TheDeviceComesFromTheModuleKind) {
  sp::Result b = Cli({"build", KernelFile("vector_add.bpir"), "-t", "opencl", "-f",
                      "vector_add_gpu", "-o", Path("va.bpmod")});
  if (b.exit_code != 0) GTEST_SKIP() << "no opencl code generator here: " << b.err;
  sp::Result wrong = Cli({"run", Path("va.bpmod"), "-f", "vector_add_gpu", "-d", "cpu:0"});
  EXPECT_EQ(wrong.exit_code, 2) << wrong.Describe() << "\n" << wrong.out << wrong.err;
  EXPECT_TRUE(Contains(wrong.err, "--device opencl:0")) << wrong.err;
  EXPECT_FALSE(Contains(wrong.err, "device type")) << wrong.err;
  sp::Result info = Cli({"info"});
  if (!Contains(info.out, "opencl")) GTEST_SKIP() << "no opencl device here";
  sp::Result r =
      Cli({"run", Path("va.bpmod"), "-f", "vector_add_gpu", "--dim", "n=1000", "--repeat", "1"});
  if (r.exit_code != 0 && Contains(r.err, "no device")) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "vector_add_gpu on opencl:0: ok")) << r.out << r.err;
}

// A catalog kernel with variants (docs/kernels.md, "Variants") runs the one chosen for the
// device (the base on PoCL), or the one --variant or -f names; `--json` says which and why.
// A --variant the kernel lacks, or whose function the module lacks, is a usage error.
TEST_F(BuildRunCli, RunSaysWhichVariantRanAndTakesVariant) {
  sp::Result b =
      Cli({"build", KernelFile("vector_add.bpir"), "-t", "opencl", "-o", Path("all.bpmod")});
  if (b.exit_code != 0) GTEST_SKIP() << "no opencl code generator here: " << b.err;
  if (!Contains(Cli({"info"}).out, "opencl:0")) GTEST_SKIP() << "no opencl device here";
  struct Want {
    std::vector<std::string> extra;
    std::string function, variant, chosen_by;
  };
  for (const Want& w :
       {Want{{"-f", "vector_add_gpu"}, "vector_add_gpu", "base", "every other device"},
        Want{{"-f", "vector_add_gpu", "--variant", "vec4"}, "vector_add4_gpu", "vec4", "--variant"},
        Want{{"-f", "vector_add4_gpu"}, "vector_add4_gpu", "vec4", "named"},
        Want{{"-f", "vector_add4_gpu", "--variant", "base"},
             "vector_add_gpu",
             "base",
             "--variant"}}) {
    std::vector<std::string> args = {"run", Path("all.bpmod"), "--dim", "n=2093", "--repeat",
                                     "1",   "--json"};
    args.insert(args.end(), w.extra.begin(), w.extra.end());
    sp::Result r = Cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
    const nlohmann::json doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["function"], w.function) << r.out;
    EXPECT_EQ(doc["kernel"], "vector_add_gpu") << r.out;
    EXPECT_EQ(doc["variant"], w.variant) << r.out;
    EXPECT_EQ(doc["variant_chosen_by"], w.chosen_by) << r.out;
    EXPECT_EQ(doc["ok"], true) << r.out;
    EXPECT_EQ(doc["check"], "reference") << r.out;
  }
  // The text line ends with the variant.
  sp::Result t = Cli({"run", Path("all.bpmod"), "-f", "vector_add_gpu", "--variant", "vec4",
                      "--dim", "n=1000", "--repeat", "1"});
  EXPECT_EQ(t.exit_code, 0) << t.Describe() << "\n" << t.out << t.err;
  EXPECT_TRUE(Contains(t.out, "vector_add4_gpu on opencl:0: ok")) << t.out;
  EXPECT_TRUE(Contains(t.out, "; variant vec4 of vector_add_gpu, by --variant")) << t.out;
  sp::Result bad = Cli({"run", Path("all.bpmod"), "-f", "vector_add_gpu", "--variant", "smem"});
  EXPECT_EQ(bad.exit_code, 2) << bad.Describe() << "\n" << bad.out << bad.err;
  EXPECT_TRUE(Contains(bad.err,
                       "--variant smem: kernel 'vector_add_gpu' has no variant 'smem'; "
                       "its variants are: base (vector_add_gpu), vec4 "
                       "(vector_add4_gpu)"))
      << bad.err;
  ASSERT_EQ(Cli({"build", KernelFile("vector_add.bpir"), "-t", "opencl", "-f", "vector_add_gpu",
                 "-o", Path("one.bpmod")})
                .exit_code,
            0);
  sp::Result lacks = Cli({"run", Path("one.bpmod"), "-f", "vector_add_gpu", "--variant", "vec4"});
  EXPECT_EQ(lacks.exit_code, 2) << lacks.Describe() << "\n" << lacks.out << lacks.err;
  EXPECT_TRUE(Contains(lacks.err, "has no function 'vector_add4_gpu' (that variant's)"))
      << lacks.err;
}

// A catalog kernel whose threads a block are a parameter (matmul_tiled_gpu's `threads`) runs
// without it, with and without --check: the tool passes the device's warp width; --dim sets
// another.
TEST_F(BuildRunCli, ABlockSizeParamComesFromTheDevice) {
  sp::Result b = Cli({"build", KernelFile("matmul.bpir"), "-t", "opencl", "-f", "matmul_tiled_gpu",
                      "-o", Path("mt.bpmod")});
  if (b.exit_code != 0) GTEST_SKIP() << "no opencl code generator here: " << b.err;
  if (!Contains(Cli({"info"}).out, "opencl:0")) GTEST_SKIP() << "no opencl device here";
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--check"}, std::vector<std::string>{"--dim", "m=40"},
        std::vector<std::string>{"--check", "--dim", "threads=3", "--dim", "n=50"}}) {
    std::vector<std::string> args = {"run", Path("mt.bpmod"), "-f", "matmul_tiled_gpu", "--repeat",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    sp::Result r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
    EXPECT_TRUE(Contains(r.out, "matmul_tiled_gpu on opencl:0: ok")) << r.out << r.err;
  }
}

// In the core: bp_build itself refuses IR with no function (empty text,
// only comments) and IR text over its 16 MiB cap, whoever calls it.
TEST(BuildDriver, RefusesIRWithoutFunctionsAndTextOverTheCap) {
  const backplane::Target c = backplane::Target::Parse("c");
  for (const std::string& text : {std::string(), std::string("# backplane-ir 1\n# nothing\n")}) {
    try {
      backplane::Build(text, c);
      ADD_FAILURE() << "built an empty module from '" << text << "'";
    } catch (const backplane::Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
      EXPECT_TRUE(Contains(e.what(), "holds no function")) << e.what();
      EXPECT_TRUE(Contains(e.what(), "func NAME")) << e.what();
    }
  }
  const std::string huge = "# backplane-ir 1\n" + std::string((size_t{16} << 20) + 1, ' ');
  try {
    backplane::Build(huge, c);
    ADD_FAILURE() << "took IR text over the cap";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(e.what(), "16 MiB")) << e.what();
  }
}

// In the core: a C or C++ caller names its input, and parse errors say
// "NAME:LINE:COL" (ABI 1.4's bp_build_with_options); without a name they say "bp_build input".
TEST(BuildDriver, ParseErrorsNameTheCallersSource) {
  const backplane::Target c = backplane::Target::Parse("c");
  const std::string text = "# backplane-ir 1\nfunc f(a: buffer<float32>[4]) {\n  a[0] := 1.0\n}\n";
  auto error_of = [&](const bp_build_options_t* options) {
    bp_object_t* out = nullptr;
    const bp_status_t st =
        bp_build_with_options(text.data(), text.size(), c.object().get(), options, &out);
    EXPECT_EQ(out, nullptr);
    const char* msg = nullptr;
    bp_status_t kind = BP_OK;
    bp_error_last(&kind, &msg);
    EXPECT_EQ(st, kind);
    return std::make_pair(st, std::string(msg == nullptr ? "" : msg));
  };
  bp_build_options_t named{};
  named.struct_size = sizeof(named);
  named.source_name = "my_kernel.bpir";
  auto [st, msg] = error_of(&named);
  EXPECT_EQ(st, BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(msg, "my_kernel.bpir:3:8: expected the end of the statement")) << msg;
  EXPECT_FALSE(Contains(msg, "bp_build input")) << msg;
  // No options, or no name: "bp_build input".
  EXPECT_TRUE(Contains(error_of(nullptr).second, "bp_build input:3:8:"));
  named.source_name = nullptr;
  EXPECT_TRUE(Contains(error_of(&named).second, "bp_build input:3:8:"));
  // A caller built against a later minor passes a longer struct: the fields this core knows are
  // read, the rest ignored.
  struct Longer {
    bp_build_options_t known;
    uint64_t later_field;
  } longer{};
  longer.known.struct_size = sizeof(longer);
  longer.known.source_name = "later.bpir";
  longer.later_field = 0xdeadbeef;
  EXPECT_TRUE(Contains(error_of(&longer.known).second, "later.bpir:3:8:"));
  // Shorter than ABI 1.4's first version: refused, naming the sizes and what to do.
  bp_build_options_t short_struct{};
  short_struct.struct_size = sizeof(size_t);
  auto [st2, msg2] = error_of(&short_struct);
  EXPECT_EQ(st2, BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(msg2, "struct_size is " + std::to_string(sizeof(size_t)))) << msg2;
  EXPECT_TRUE(Contains(msg2, "sizeof(bp_build_options_t)")) << msg2;
  // The C++ API passes the name, and the host Target still arrives.
  try {
    backplane::Build(text, c, backplane::Target::Parse("c"), "cpp_kernel.bpir");
    ADD_FAILURE() << "built IR that does not parse";
  } catch (const backplane::Error& e) {
    EXPECT_TRUE(Contains(e.what(), "cpp_kernel.bpir:3:8:")) << e.what();
  }
  const std::string good = "# backplane-ir 1\nfunc g(a: buffer<float32>[4]) {\n  a[0] = 1.0\n}\n";
  bp_build_options_t with_host{};
  with_host.struct_size = sizeof(with_host);
  with_host.host = c.object().get();
  bp_object_t* out = nullptr;
  ASSERT_EQ(bp_build_with_options(good.data(), good.size(), c.object().get(), &with_host, &out),
            BP_OK);
  bp_object_release(out);
  // A host Target that is not a CPU kind is refused: the field is read.
  bp_object_t* not_cpu = nullptr;
  if (bp_target_parse("opencl", &not_cpu) == BP_OK) {
    with_host.host = not_cpu;
    out = nullptr;
    EXPECT_EQ(bp_build_with_options(good.data(), good.size(), c.object().get(), &with_host, &out),
              BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(out, nullptr);
    bp_object_release(not_cpu);
  }
}

// Any kernel, not only the catalog's, checked against the IR interpreter on
// the same inputs; a module whose code differs from the IR given with --ir is a mismatch
// that names function, buffer, index, got, expected and tolerance; scalars of any dtype.
TEST_F(BuildRunCli, CheckComparesAnyKernelWithTheInterpreter) {
  const std::string head =
      "# backplane-ir 1\n\nfunc affine(n: int32, alpha: float32, shift: int64, flag: bool, "
      "a: buffer<float32>[n], b: buffer<int64>[n]) {\n  for i in serial(0, n) {\n";
  {
    std::ofstream k(Path("affine.bpir"));
    k << head << "    a[i] = a[i] * alpha + 1.0\n    b[i] = select(flag, b[i] + shift, b[i])\n"
      << "  }\n}\n";
  }
  {
    std::ofstream k(Path("other.bpir"));  // the same signature, other arithmetic
    k << head << "    a[i] = a[i] * alpha + 1.0\n    b[i] = select(flag, b[i] - shift, b[i])\n"
      << "  }\n}\n";
  }
  sp::Result b = Cli({"build", Path("affine.bpir"), "-t", "c", "-o", Path("affine.bpmod")});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::vector<std::string> run = {"run",     Path("affine.bpmod"),
                                        "-f",      "affine",
                                        "--dim",   "n=777",
                                        "--arg",   "alpha=-1.5",
                                        "--arg",   "shift=-5000000000",
                                        "--arg",   "flag=true",
                                        "--check", "-r",
                                        "1",       "--allow-native"};
  sp::Result ok = Cli(run);
  EXPECT_EQ(ok.exit_code, 0) << ok.Describe() << "\n" << ok.out << ok.err;
  EXPECT_TRUE(Contains(ok.out, "affine on cpu:0: ok (matches the IR interpreter")) << ok.out;

  std::vector<std::string> wrong = run;
  wrong.insert(wrong.end(), {"--ir", Path("other.bpir")});
  sp::Result bad = Cli(wrong);
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe() << "\n" << bad.out << bad.err;
  // Errors go to stderr.
  EXPECT_TRUE(Contains(bad.err,
                       "FAILED against the IR interpreter: function 'affine', buffer "
                       "'b': first difference at index 0 of 777"))
      << bad.err;
  EXPECT_TRUE(Contains(bad.err, "exact for int64")) << bad.err;
  EXPECT_FALSE(Contains(bad.err, "buffer 'a'")) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;

  // A value that does not fit its param names the param and its dtype.
  std::vector<std::string> too_big = run;
  too_big[9] = "shift=9223372036854775808";
  sp::Result big = Cli(too_big);
  EXPECT_EQ(big.exit_code, 2) << big.Describe() << "\n" << big.out << big.err;
  EXPECT_TRUE(Contains(big.err, "parameter 'shift' of function 'affine' is int64")) << big.err;
  std::vector<std::string> not_bool = run;
  not_bool[11] = "flag=yes";
  sp::Result nb = Cli(not_bool);
  EXPECT_EQ(nb.exit_code, 2) << nb.Describe() << "\n" << nb.out << nb.err;
  EXPECT_TRUE(Contains(nb.err, "parameter 'flag' of function 'affine' is bool")) << nb.err;

  // A catalog kernel checked against the interpreter too (at its test sizes).
  sp::Result mb = Cli({"build", KernelFile("matmul.bpir"), "-t", "c", "-f", "matmul_tiled", "-o",
                       Path("mm.bpmod")});
  ASSERT_EQ(mb.exit_code, 0) << mb.err;
  sp::Result mm =
      Cli({"run", Path("mm.bpmod"), "-f", "matmul_tiled", "--check", "-r", "1", "--allow-native"});
  EXPECT_EQ(mm.exit_code, 0) << mm.Describe() << "\n" << mm.out << mm.err;
  EXPECT_TRUE(Contains(mm.out, "matches the IR interpreter")) << mm.out;
}

}  // namespace

namespace {

// vector_add with the tile count the catalog had: (n + 1023) / 1024 wraps for n > 2^31 - 1024.
const char* kWrappingKernel = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for o in parallel(0, (n + 1023) / 1024) {
    let base: int32 = o * 1024
    for t in serial(base, min(1024, n - base)) {
      c[t] = a[t] + b[t]
    }
  }
}
)";

TEST_F(BuildRunCli, BuildWarnsOfInt32ArithmeticThatCanWrap) {
  { std::ofstream(Path("wrap.bpir")) << kWrappingKernel; }
  sp::Result b = Cli({"build", Path("wrap.bpir"), "-t", "c", "-o", Path("wrap.bpmod")});
  ASSERT_EQ(b.exit_code, 0) << b.Describe() << "\n" << b.err;  // a warning, not an error
  EXPECT_TRUE(Contains(b.err,
                       "backplane build: warning: int32 expression `n + 1023` in function "
                       "'vector_add' can overflow for n > 2147482624"))
      << b.err;
  EXPECT_TRUE(Contains(b.err, "n / 1024 + min(floormod(n, 1024), 1)")) << b.err;
  sp::Result j = Cli({"build", Path("wrap.bpir"), "-t", "c", "-o", Path("wrap.bpmod"), "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.Describe() << "\n" << j.err;
  EXPECT_TRUE(Contains(j.out, "\"warnings\": [\n    \"int32 expression `n + 1023`")) << j.out;
  // run --check warns too.
  sp::Result r = Cli({"run", Path("wrap.bpmod"), "-f", "vector_add", "--allow-native", "--check",
                      "--dim", "n=100"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_TRUE(Contains(r.err, "backplane run: warning: int32 expression `n + 1023`")) << r.err;
  // The catalog's kernels are clean.
  sp::Result clean =
      Cli({"build", KernelFile("vector_add.bpir"), "-t", "c", "-o", Path("va.bpmod")});
  ASSERT_EQ(clean.exit_code, 0) << clean.Describe() << "\n" << clean.err;
  EXPECT_FALSE(Contains(clean.err, "warning")) << clean.err;
}

TEST_F(BuildRunCli, ASizePastInt32IsRefusedBeforeAnyBufferIsMade) {
  sp::Result b = Cli({"build", KernelFile("vector_add.bpir"), "-t", "c", "-f", "vector_add", "-o",
                      Path("va.bpmod")});
  ASSERT_EQ(b.exit_code, 0) << b.Describe() << "\n" << b.err;
  // 3e9 elements would be 36 GB of float32 buffers (more as the runner's float64 copies).
  sp::Result r =
      Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--allow-native", "--dim", "n=3000000000"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << "\n" << r.err;
  EXPECT_TRUE(Contains(r.err,
                       "backplane run: --dim n=3000000000: parameter 'n' of function "
                       "'vector_add' is int32, so at most 2147483647"))
      << r.err;
}

}  // namespace
