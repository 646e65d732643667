// SPDX-License-Identifier: Apache-2.0
// docs/cli.md, "Conventions every subcommand follows": errors on stderr; exit codes 0 success,
// 1 failure, 2 usage; bad input refused, never ignored; help that fits an 80-column terminal
// with examples and the environment; `backplane help [COMMAND]`; --json with schema_version;
// `build` on a file with CPU and GPU variants; progress and the first call in `demo`.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace {

using backplane::clitest::CliTest;
using backplane::clitest::Contains;
using backplane::clitest::KernelFile;
using backplane::clitest::LinesWiderThan;
using Json = nlohmann::json;
namespace sp = backplane::subprocess;
namespace fs = std::filesystem;

class CliConventions : public CliTest {};

std::string Show(const sp::Result& r) {
  return r.Describe() + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

TEST_F(CliConventions, RunRefusesBadInputOnStderrWithExitTwo) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {{"--device", "cpu:7"}, {"device cpu:7 does not exist here", "cpu:0"}},
      {{"--device", "nosuch:0"}, {"--device nosuch:0"}},
      {{"--dim", "n=-5"}, {"--dim n=-5", "a size is at least 0"}},
      {{"--dim", "m=5"}, {"--dim m=5", "no scalar parameter 'm'", "are: n"}},
      {{"--repeat", "-1"}, {"--repeat", "not in range"}},
      {{"--repeat", "0"}, {"--repeat"}},
      {{"--input", "q=x.npy"}, {"no buffer parameter 'q'", "a, b, c"}},
      {{"--output", "a"}, {"'a' is not NAME=FILE.npy"}},
      {{"--input", "a=" + Path("missing.npy")}, {Path("missing.npy"), "cannot read"}},
      {{"--dim", "n"}, {"--dim 'n' is not NAME=VALUE"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"run", Path("va.bpmod"), "-f", "vector_add", "--allow-native"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    sp::Result r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << c.args.back() << "\n" << Show(r);
    EXPECT_TRUE(r.out.empty()) << Show(r);
    for (const std::string& part : c.says) EXPECT_TRUE(Contains(r.err, part)) << part << Show(r);
  }
  // A function the module lacks is named with the ones it has.
  sp::Result f = Cli({"run", Path("va.bpmod"), "-f", "nosuch", "--allow-native"});
  EXPECT_EQ(f.exit_code, 2) << Show(f);
  EXPECT_TRUE(Contains(f.err, "has no function 'nosuch'; it has: vector_add")) << Show(f);
}

TEST_F(CliConventions, AFailedCheckGoesToStderrAndExitsOne) {
  {
    std::ofstream k(Path("twice.bpir"));
    k << "func twice(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * 2.0\n  }\n}\n";
  }
  {
    std::ofstream k(Path("thrice.bpir"));
    k << "func twice(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * 3.0\n  }\n}\n";
  }
  sp::Result b = Cli({"build", Path("twice.bpir"), "-t", "c", "-o", Path("t.bpmod")});
  ASSERT_EQ(b.exit_code, 0) << Show(b);
  const std::vector<std::string> run = {"run",
                                        Path("t.bpmod"),
                                        "-f",
                                        "twice",
                                        "--dim",
                                        "n=10",
                                        "-r",
                                        "1",
                                        "--check",
                                        "--ir",
                                        Path("thrice.bpir"),
                                        "--allow-native"};
  sp::Result r = Cli(run);
  EXPECT_EQ(r.exit_code, 1) << Show(r);
  EXPECT_TRUE(r.out.empty()) << Show(r);
  EXPECT_TRUE(Contains(r.err, "backplane run: twice on cpu:0: FAILED against the IR interpreter"))
      << Show(r);
  // With --json the document says so too, and the message is still on stderr.
  std::vector<std::string> json = run;
  json.push_back("--json");
  sp::Result j = Cli(json);
  EXPECT_EQ(j.exit_code, 1) << Show(j);
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["ok"], false);
  EXPECT_EQ(doc["check"], "interpreter");
  EXPECT_TRUE(Contains(doc["error"].get<std::string>(), "FAILED against the IR interpreter"));
  EXPECT_TRUE(Contains(j.err, "FAILED against the IR interpreter")) << Show(j);
}

TEST_F(CliConventions, DemoRefusesWhatItCannotDo) {
  sp::Result k = Cli({"demo", "-k", "nosuch"});
  EXPECT_EQ(k.exit_code, 2) << Show(k);
  EXPECT_TRUE(Contains(k.err, "--kernel nosuch: no reference kernel has that name")) << Show(k);
  EXPECT_TRUE(Contains(k.err, "vector_add, vector_add_gpu")) << Show(k);
  EXPECT_FALSE(Contains(k.out, "passed")) << Show(k);
  sp::Result s = Cli({"demo", "--size", "huge"});
  EXPECT_EQ(s.exit_code, 2) << Show(s);
  EXPECT_TRUE(Contains(s.err, "--size")) << Show(s);
  sp::Result r = Cli({"demo", "--repeat", "0"});
  EXPECT_EQ(r.exit_code, 2) << Show(r);
  EXPECT_TRUE(Contains(r.err, "--repeat")) << Show(r);
}

TEST_F(CliConventions, ADemoWhereNoKernelRunsFails) {
  // GPU kernels only, and every GPU plugin disabled: nothing runs, which is no success.
  sp::Result d = Cli({"demo", "--size", "small", "-r", "1", "-k", "vector_add_gpu"},
                     {{"BACKPLANE_DISABLE_PLUGINS", "opencl,vulkan,cuda"}});
  EXPECT_EQ(d.exit_code, 1) << Show(d);
  EXPECT_TRUE(Contains(d.err,
                       "backplane demo: no kernel ran: the kernels given run on GPU "
                       "devices only"))
      << Show(d);
  EXPECT_TRUE(Contains(d.out, "0 passed, 0 failed")) << Show(d);
}

TEST_F(CliConventions, DemoTableFitsEightyColumnsAndShowsTheFirstCall) {
  sp::Result d =
      Cli({"demo", "--size", "small", "-r", "1", "-k", "vector_add", "-k", "vector_add_gpu"});
  ASSERT_EQ(d.exit_code, 0) << Show(d);
  EXPECT_EQ(LinesWiderThan(d.out, 80), "") << d.out;
  EXPECT_TRUE(Contains(d.out, "1st call")) << d.out;
  // "KERNEL DEVICE ok" at the start of a row, what CI and the install test grep for.
  EXPECT_TRUE(std::regex_search(d.out, std::regex("(^|\n)vector_add +cpu:0 +ok "))) << d.out;
  // (Under LeakSanitizer stderr may hold its "Suppressions used" summary, so look for the
  // tool's own lines.)
  EXPECT_FALSE(Contains(d.err, "backplane demo:")) << "no progress when stderr is no terminal\n"
                                                   << Show(d);
  // --verbose says what is being built and run, on stderr.
  sp::Result v = Cli({"demo", "--size", "small", "-r", "1", "-k", "vector_add", "--verbose"});
  ASSERT_EQ(v.exit_code, 0) << Show(v);
  EXPECT_TRUE(Contains(v.err, "backplane demo: building vector_add for cpu:0")) << Show(v);
  EXPECT_TRUE(Contains(v.err, "backplane demo: running vector_add on cpu:0")) << Show(v);
}

TEST_F(CliConventions, TargetListFitsEightyColumns) {
  sp::Result t = Cli({"target", "--list"});
  ASSERT_EQ(t.exit_code, 0) << Show(t);
  EXPECT_EQ(LinesWiderThan(t.out, 80), "") << t.out;
  EXPECT_TRUE(Contains(t.out, "opt-level")) << t.out;
}

TEST_F(CliConventions, DemoJsonListsEveryResult) {
  sp::Result d = Cli({"demo", "--size", "small", "-r", "1", "-k", "vector_add", "--json"});
  ASSERT_EQ(d.exit_code, 0) << Show(d);
  const Json doc = Json::parse(d.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["command"], "demo");
  EXPECT_EQ(doc["size"], "small");
  ASSERT_TRUE(doc["results"].is_array()) << doc.dump(2);
  ASSERT_GE(doc["results"].size(), 1u) << doc.dump(2);
  const Json& first = doc["results"][0];
  EXPECT_EQ(first["kernel"], "vector_add");
  EXPECT_EQ(first["device"], "cpu:0");
  EXPECT_EQ(first["ok"], true);
  for (const char* key : {"build_seconds", "first_call_seconds", "seconds", "gbytes_per_s"}) {
    EXPECT_TRUE(first[key].is_number()) << key << first.dump(2);
  }
  EXPECT_GT(first["first_call_seconds"].get<double>(), 0);
  EXPECT_TRUE(doc["skipped"].is_array());
  EXPECT_GE(doc["passed"].get<int>(), 1);
  EXPECT_EQ(doc["failed"], 0);
}

TEST_F(CliConventions, BuildAndRunJsonHaveASchemaVersionAndArrays) {
  sp::Result b =
      Cli({"build", KernelFile("vector_add.bpir"), "-t", "c", "-o", Path("va.bpmod"), "--json"});
  ASSERT_EQ(b.exit_code, 0) << Show(b);
  const Json built = Json::parse(b.out);
  EXPECT_EQ(built["schema_version"], 1);
  EXPECT_EQ(built["command"], "build");
  EXPECT_EQ(built["functions"], Json::array({"vector_add"}));
  EXPECT_EQ(built["module_kinds"], Json::array({"c"}));
  EXPECT_EQ(built["target"]["kind"], "c");
  // The GPU kernel and its variant (vector_add4_gpu, docs/host-guide.md "Variants").
  ASSERT_EQ(built["left_out"].size(), 2u) << built.dump(2);
  EXPECT_EQ(built["left_out"][0]["function"], "vector_add_gpu");
  EXPECT_EQ(built["left_out"][1]["function"], "vector_add4_gpu");
  EXPECT_TRUE(Contains(built["left_out"][0]["reason"], "GPU thread axes"));
  EXPECT_GT(built["bytes"].get<int64_t>(), 0);

  sp::Result v = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=1000", "-r", "1",
                      "--allow-native", "--verbose"});
  ASSERT_EQ(v.exit_code, 0) << Show(v);
  EXPECT_TRUE(Contains(v.err, "backplane run: running vector_add on cpu:0")) << Show(v);
  sp::Result r = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=1000", "-r", "2",
                      "--allow-native", "--json"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_TRUE(r.err.empty()) << Show(r);
  const Json ran = Json::parse(r.out);
  EXPECT_EQ(ran["schema_version"], 1);
  EXPECT_EQ(ran["command"], "run");
  EXPECT_EQ(ran["function"], "vector_add");
  EXPECT_EQ(ran["device"], "cpu:0");
  EXPECT_EQ(ran["ok"], true);
  EXPECT_EQ(ran["check"], "reference");
  EXPECT_EQ(ran["repeat"], 2);
  EXPECT_LT(ran["max_error"].get<double>(), 1e-6);
  EXPECT_TRUE(ran["inputs"].is_array() && ran["outputs"].is_array()) << ran.dump(2);

  sp::Result t = Cli({"target", "--list", "--json"});
  ASSERT_EQ(t.exit_code, 0) << Show(t);
  const Json listed = Json::parse(t.out);
  EXPECT_EQ(listed["schema_version"], 1);
  EXPECT_TRUE(listed["kinds"].is_array());
}

TEST_F(CliConventions, BuildLeavesOutFunctionsThatDoNotFitAndSaysWhy) {
  sp::Result c = Cli({"build", KernelFile("saxpy.bpir"), "-t", "c", "-o", Path("s.bpmod")});
  ASSERT_EQ(c.exit_code, 0) << Show(c);
  EXPECT_TRUE(Contains(c.out, "built saxpy for c")) << Show(c);
  EXPECT_TRUE(Contains(c.err,
                       "backplane build: left out saxpy_gpu: it binds loops to GPU thread "
                       "axes, which a CPU Target ('c') cannot run"))
      << Show(c);
  sp::Result g = Cli({"build", KernelFile("saxpy.bpir"), "-t", "opencl", "-o", Path("g.bpmod")});
  if (g.exit_code == 0) {
    EXPECT_TRUE(Contains(g.out, "built saxpy_gpu for opencl")) << Show(g);
    EXPECT_TRUE(Contains(g.err, "left out saxpy: it binds no GPU thread axis")) << Show(g);
  } else {
    EXPECT_TRUE(Contains(g.err, "opencl")) << Show(g);
  }
  // None fits: refused, each function named with its reason.
  {
    std::ofstream k(Path("gpu_only.bpir"));
    k << "func one(n: int32, a: buffer<float32>[n]) {\n"
         "  for t in thread(threadIdx.x, 0, n) {\n    a[t] = 1.0\n  }\n}\n"
         "func two(n: int32, a: buffer<float32>[n]) {\n"
         "  for t in thread(threadIdx.x, 0, n) {\n    a[t] = 2.0\n  }\n}\n";
  }
  sp::Result none = Cli({"build", Path("gpu_only.bpir"), "-t", "c", "-o", Path("x.bpmod")});
  EXPECT_EQ(none.exit_code, 2) << Show(none);
  EXPECT_TRUE(
      Contains(none.err, "none of the functions of " + Path("gpu_only.bpir") + " fits Target 'c'"))
      << Show(none);
  EXPECT_TRUE(Contains(none.err, "  one: ") && Contains(none.err, "  two: ")) << Show(none);
  EXPECT_FALSE(fs::exists(Path("x.bpmod")));
  // A function with an error of its own is not left out quietly: the build fails on it.
  {
    std::ofstream k(Path("buggy.bpir"));
    k << "func good(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = 1.0\n  }\n}\n"
         "func bad(n: int32, a: buffer<float32>[n]) {\n"
         "  for i in serial(0, n) {\n    a[i] = a[i] * n\n  }\n}\n";
  }
  sp::Result bug = Cli({"build", Path("buggy.bpir"), "-t", "c", "-o", Path("y.bpmod")});
  EXPECT_EQ(bug.exit_code, 2) << Show(bug);
  EXPECT_TRUE(Contains(bug.err, "does not verify")) << Show(bug);
  EXPECT_FALSE(Contains(bug.err, "left out")) << Show(bug);
  // A bad --target is a usage error.
  sp::Result t = Cli({"build", KernelFile("saxpy.bpir"), "-t", "nosuchkind", "-o", Path("z")});
  EXPECT_EQ(t.exit_code, 2) << Show(t);
  EXPECT_TRUE(Contains(t.err, "backplane build: --target: ")) << Show(t);
  // --verbose says what is built.
  sp::Result v = Cli({"build", KernelFile("saxpy.bpir"), "-t", "c", "-f", "saxpy", "-o",
                      Path("v.bpmod"), "--verbose"});
  ASSERT_EQ(v.exit_code, 0) << Show(v);
  EXPECT_TRUE(Contains(v.err, "backplane build: building " + KernelFile("saxpy.bpir") + " for c"))
      << Show(v);
}

TEST_F(CliConventions, HelpFitsTheTerminalAndShowsExamplesAndTheEnvironment) {
  const std::vector<std::vector<std::string>> pages = {
      {"--help"},          {"help"},           {"help", "run"},      {"run", "--help"},
      {"build", "--help"}, {"demo", "--help"}, {"target", "--help"}, {"help", "build"}};
  for (const std::vector<std::string>& page : pages) {
    sp::Result h = Cli(page);
    const std::string what = page[0] + (page.size() > 1 ? " " + page[1] : "");
    ASSERT_EQ(h.exit_code, 0) << what << Show(h);
    EXPECT_EQ(LinesWiderThan(h.out, 80), "") << what;
    EXPECT_TRUE(Contains(h.out, "Examples:")) << what << h.out;
    EXPECT_TRUE(Contains(h.out, "Environment:")) << what << h.out;
    EXPECT_TRUE(Contains(h.out, "Exit codes:")) << what << h.out;
  }
  EXPECT_EQ(Cli({"help", "run"}).out, Cli({"run", "--help"}).out);
  EXPECT_TRUE(Contains(Cli({"help", "run"}).out, "Usage: backplane run [OPTIONS] MODULE"));
  sp::Result info = Cli({"info", "--help"});
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_EQ(LinesWiderThan(info.out, 80), "");
  sp::Result unknown = Cli({"help", "nosuch"});
  EXPECT_EQ(unknown.exit_code, 2) << Show(unknown);
  EXPECT_TRUE(Contains(unknown.err, "unknown command 'nosuch'")) << Show(unknown);
  sp::Result kit = Conformance({"--help"});
  EXPECT_EQ(kit.exit_code, 0) << Show(kit);
  EXPECT_EQ(LinesWiderThan(kit.out, 80), "");
  EXPECT_TRUE(Contains(kit.out, "Examples:")) << kit.out;
}

TEST_F(CliConventions, ConformanceRefusesAGlobThatMatchesNoTest) {
  sp::Result r = Conformance({"cpu", "-t", "nomatch.*"});
  EXPECT_EQ(r.exit_code, 2) << Show(r);
  EXPECT_TRUE(Contains(r.err, "--test 'nomatch.*' matches no test")) << Show(r);
  EXPECT_FALSE(Contains(r.out, "CONFORMANT")) << Show(r);
}

TEST_F(CliConventions, ConformanceJsonDashWritesTheReportToStdout) {
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  options.cwd = dir_.string();
  sp::Result r =
      sp::Run({BACKPLANE_CONFORMANCE_PATH, "cpu", "-t", "plugin.*", "--json", "-"}, options);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_TRUE(doc["tests"].is_array());
  EXPECT_TRUE(Contains(r.err, "PASSED, NO VERDICT: --test chose")) << "the console goes to stderr\n"
                                                                   << Show(r);
  EXPECT_FALSE(fs::exists(dir_ / "-")) << "a file named '-' was written";
}

}  // namespace
