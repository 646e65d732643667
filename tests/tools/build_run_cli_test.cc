// SPDX-License-Identifier: Apache-2.0
// `backplane build`, `backplane run` and `backplane demo` as a user runs them: a module saved
// by one process is loaded and run, checked against the reference, by another; errors exit
// non-zero with a message that says what to do.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
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
  sp::Result Cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    sp::Options options;
    options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
    // A private compile cache for this test.
    options.set_env = {{"XDG_CACHE_HOME", (dir_ / "cache").string()}};
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

  sp::Result r = Cli({"run", Path("mm.bpmod"), "--func", "matmul_tiled", "--device", "cpu:0",
                      "--dim", "m=67", "--dim", "n=130", "--dim", "k=45", "--repeat", "2"});
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
  sp::Result r = Cli({"run", Path("s.bpmod"), "-f", "scale", "--dim", "n=100"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_TRUE(Contains(r.out, "not checked")) << r.out;
  sp::Result missing = Cli({"run", Path("s.bpmod"), "-f", "scale"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(Contains(missing.err, "--dim n=")) << missing.err;
}

TEST_F(BuildRunCli, ErrorsSayWhatToDo) {
  sp::Result gpu_on_cpu = Cli({"build", KernelFile("matmul.bpir"), "-t", "c", "-o", Path("x")});
  EXPECT_NE(gpu_on_cpu.exit_code, 0);
  EXPECT_TRUE(Contains(gpu_on_cpu.err, "matmul_tiled_gpu")) << gpu_on_cpu.err;
  EXPECT_TRUE(Contains(gpu_on_cpu.err, "--func")) << gpu_on_cpu.err;

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
  EXPECT_EQ(corrupt.exit_code, 1) << corrupt.Describe();
  EXPECT_TRUE(Contains(corrupt.err, "module file")) << corrupt.err;

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

}  // namespace
