// SPDX-License-Identifier: Apache-2.0
// Runs backplane-conformance as a third party would and checks what it reports: the cpu
// plugin, simaccel_testing and the simulation (broken/ok.cc) pass with their code generators; each
// broken plugin fails on the clause it breaks, named in the JSON report; a crash and a hang
// fail their tests only; the expected-failure and unsupported lists and --verify-xfails
// behave; the JSON and JUnit files parse.
#include <backplane/c_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"

namespace {

namespace fs = std::filesystem;
using backplane::subprocess::Result;

const std::string kKit = BACKPLANE_CONFORMANCE_PATH;
const std::string kBroken = BACKPLANE_CONFORMANCE_PLUGIN_DIR;
const std::string kScratch = BACKPLANE_CONFORMANCE_SCRATCH_DIR;

std::string Lib(const std::string& dir, const std::string& name) {
  return dir + "/libbackplane_" + name + ".so";
}
std::string Broken(const std::string& name) { return Lib(kBroken, name); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string WriteScratch(const std::string& name, const std::string& text) {
  fs::create_directories(kScratch);
  const std::string path = kScratch + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// A minimal well-formedness check of XML: balanced, properly nested tags, quoted attributes,
// known entities, no bare '<' or '&' in text. Returns "" or what is wrong; counts the
// elements named `count_tag`.
std::string XmlProblem(const std::string& x, const std::string& count_tag, int* count) {
  std::vector<std::string> stack;
  *count = 0;
  size_t i = 0;
  if (x.rfind("<?xml", 0) == 0) i = x.find("?>") + 2;
  auto check_entities = [&](const std::string& text) -> std::string {
    for (size_t k = text.find('&'); k != std::string::npos; k = text.find('&', k + 1)) {
      const size_t semi = text.find(';', k);
      const std::string ent = semi == std::string::npos ? "" : text.substr(k, semi - k + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
        return "a bare or unknown entity at '" + text.substr(k, 12) + "'";
      }
    }
    return "";
  };
  bool root_seen = false;
  while (i < x.size()) {
    const size_t lt = x.find('<', i);
    const std::string text = x.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (std::string e = check_entities(text); !e.empty()) return e;
    if (text.find('>') != std::string::npos && stack.empty() &&
        text.find_first_not_of(" \n") != std::string::npos) {
      return "text outside the root element";
    }
    if (lt == std::string::npos) break;
    const size_t gt = x.find('>', lt);
    if (gt == std::string::npos) return "an unterminated tag";
    std::string tag = x.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (tag.empty()) return "an empty tag";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name)
        return "a closing </" + name + "> that closes nothing open";
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    const std::string name = tag.substr(0, tag.find_first_of(" \n"));
    if (stack.empty() && root_seen) return "a second root element <" + name + ">";
    root_seen = true;
    if (name == count_tag) ++*count;
    // Attributes: name="value" pairs.
    size_t k = name.size();
    while (k < tag.size()) {
      while (k < tag.size() && (tag[k] == ' ' || tag[k] == '\n')) ++k;
      if (k >= tag.size()) break;
      const size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') {
        return "an unquoted attribute in <" + name + ">";
      }
      const size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return "an unterminated attribute in <" + name + ">";
      const std::string value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos)
        return "a '<' inside an attribute of <" + name + ">";
      if (std::string e = check_entities(value); !e.empty()) return e;
      k = close + 1;
    }
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "<" + stack.back() + "> is never closed";
  if (!root_seen) return "no root element";
  return "";
}

struct KitRun {
  Result process;
  nlohmann::json json;
  std::string junit;

  // The report entry of test `name` (null json when absent).
  nlohmann::json Test(const std::string& name) const {
    for (const auto& t : json["tests"]) {
      if (t["name"] == name) return t;
    }
    return nlohmann::json();
  }
  std::string Status(const std::string& name) const {
    const nlohmann::json t = Test(name);
    return t.is_null() ? "(absent)" : t["status"].get<std::string>();
  }
  std::string Message(const std::string& name) const {
    const nlohmann::json t = Test(name);
    return t.is_null() ? "" : t["message"].get<std::string>();
  }
  std::string Explain() const {
    return process.Describe() + "\n--- stdout ---\n" + process.out + "\n--- stderr ---\n" +
           process.err;
  }
};

// Runs the kit with `args`, writing its JSON and JUnit reports to the scratch folder as
// <tag>.json and <tag>.xml, and checks that both parse.
KitRun RunKit(const std::vector<std::string>& args, const std::string& tag,
              const std::vector<std::pair<std::string, std::string>>& env = {}) {
  fs::create_directories(kScratch);
  const std::string json_path = kScratch + "/" + tag + ".json";
  const std::string xml_path = kScratch + "/" + tag + ".xml";
  fs::remove(json_path);
  fs::remove(xml_path);
  std::vector<std::string> argv = {kKit};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--json", json_path, "--junit", xml_path});
  backplane::subprocess::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  options.set_env = env;
  KitRun run;
  run.process = backplane::subprocess::Run(argv, options);
  run.json = nlohmann::json::parse(ReadFile(json_path), nullptr, false);
  run.junit = ReadFile(xml_path);
  EXPECT_FALSE(run.json.is_discarded()) << "the JSON report does not parse\n" << run.Explain();
  if (run.json.is_discarded())
    run.json = nlohmann::json::object({{"tests", nlohmann::json::array()}});
  int cases = 0;
  EXPECT_EQ(XmlProblem(run.junit, "testcase", &cases), "")
      << "the JUnit report is not well-formed XML";
  EXPECT_EQ(static_cast<size_t>(cases), run.json["tests"].size())
      << "JUnit and JSON list different tests";
  EXPECT_NE(run.junit.find("<testsuites"), std::string::npos);
  return run;
}

// Expects every test whose name starts with `prefix` to have `status`, and at least one.
void ExpectAll(const KitRun& run, const std::string& prefix, const std::string& status) {
  int n = 0;
  for (const auto& t : run.json["tests"]) {
    const std::string name = t["name"];
    if (name.rfind(prefix, 0) != 0) continue;
    ++n;
    EXPECT_EQ(t["status"], status) << name << ": " << t["message"];
  }
  EXPECT_GT(n, 0) << "no test starts with " << prefix;
}

// ---- the in-tree plugins pass ------------------------------------------------------------

TEST(ConformanceKit, CpuPluginPasses) {
  // An --exclude that matches no test leaves the run whole: a verdict.
  const KitRun run = RunKit({Lib(BACKPLANE_PLUGIN_DIR, "cpu"), "-x", "no.such.test"}, "cpu");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["ok"], true);
  EXPECT_EQ(run.json["summary"]["failed"], 0);
  EXPECT_EQ(run.json["plugin"]["name"], "cpu");
  EXPECT_EQ(run.json["device"], "cpu:0");
  for (const char* t :
       {"plugin.load", "plugin.entry_point", "plugin.abi.negotiation", "plugin.names",
        "target.kind.schema", "device.attr.types", "device.copy.host_reuse",
        "device.stream.sync_waits", "device.concurrency.threads", "codegen.kernel.vector_add",
        "codegen.kernel.conv2d", "codegen.module.save_load", "codegen.module.function_by_name"}) {
    EXPECT_EQ(run.Status(t), "passed") << t << ": " << run.Message(t);
  }
  // GPU kernels and the checks of opaque handles do not apply to the host.
  EXPECT_EQ(run.Status("codegen.kernel.vector_add_gpu"), "skipped");
  EXPECT_EQ(run.Status("device.memory.bad_handle"), "skipped");
  EXPECT_NE(run.process.out.find("\nCONFORMANT (every test"), std::string::npos) << run.Explain();
  EXPECT_EQ(run.json["conformant"], true);
  EXPECT_EQ(run.json["selection"]["ran"], run.json["selection"]["of"]);
  EXPECT_EQ(run.json["selection"]["ran"], run.json["tests"].size());
  EXPECT_NE(run.junit.find("<property name=\"conformant\" value=\"true\"/>"), std::string::npos);
}

// A run that --test or --exclude narrows passes (exit 0) but gives no verdict: the summary says
// how many of the kit's tests ran and how to get one, and the reports say it is no verdict. A
// failure in a subset is still NOT CONFORMANT.
TEST(ConformanceKit, ASubsetThatPassesIsNoVerdict) {
  const KitRun run = RunKit({Lib(BACKPLANE_PLUGIN_DIR, "cpu"), "--test", "device.copy.*",
                             "--exclude", "device.copy.host_reuse"},
                            "cpu_subset");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["ok"], true);
  EXPECT_EQ(run.json["conformant"], false);
  const size_t ran = run.json["tests"].size();
  const size_t of = run.json["selection"]["of"].get<size_t>();
  EXPECT_EQ(run.json["selection"]["ran"], ran);
  EXPECT_GT(ran, 2u);
  EXPECT_GT(of, ran + 100) << "the kit has hundreds of tests";
  EXPECT_EQ(run.json["selection"]["test"], nlohmann::json::array({"device.copy.*"}));
  EXPECT_EQ(run.json["selection"]["exclude"], nlohmann::json::array({"device.copy.host_reuse"}));
  EXPECT_EQ(run.Status("device.copy.host_reuse"), "(absent)");
  EXPECT_EQ(run.process.out.find("CONFORMANT"), std::string::npos) << run.Explain();
  EXPECT_NE(run.process.out.find("PASSED, NO VERDICT: --test and --exclude chose " +
                                 std::to_string(ran) + " of the kit's " + std::to_string(of) +
                                 " tests; run them all (no --test or --exclude) for a conformance "
                                 "verdict"),
            std::string::npos)
      << run.Explain();
  EXPECT_NE(run.junit.find("<property name=\"conformant\" value=\"false\"/>"), std::string::npos);
  EXPECT_NE(run.junit.find("<property name=\"selection\" value=\"" + std::to_string(ran) + " of " +
                           std::to_string(of) + "\"/>"),
            std::string::npos);
}

// With --jobs, a test that reads device-wide state (device.memory.free: the free memory) runs
// with no other test's process beside it; the others do run side by side.
TEST(ConformanceKit, ATestThatNeedsTheDeviceAloneRunsAlone) {
  const KitRun run =
      RunKit({Lib(BACKPLANE_PLUGIN_DIR, "cpu"), "--test", "device.*", "--jobs", "4"}, "cpu_alone");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  const nlohmann::json alone = run.Test("device.memory.free");
  ASSERT_TRUE(alone.is_object()) << run.Explain();
  ASSERT_TRUE(alone.contains("started")) << alone.dump();
  const double begin = alone["started"].get<double>();
  const double end = begin + alone["seconds"].get<double>();
  int ran = 0, overlapping_pairs = 0;
  std::vector<std::pair<double, double>> spans;
  for (const auto& t : run.json["tests"]) {
    if (!t.contains("started")) continue;
    ++ran;
    const double b = t["started"].get<double>(), e = b + t["seconds"].get<double>();
    if (t["name"] != "device.memory.free") {
      EXPECT_TRUE(e <= begin || b >= end)
          << t["name"] << " ran from " << b << " to " << e << " s, beside device.memory.free ("
          << begin << " to " << end << " s)";
    }
    for (const auto& [pb, pe] : spans) overlapping_pairs += (b < pe && pb < e) ? 1 : 0;
    spans.emplace_back(b, e);
  }
  EXPECT_GT(ran, 10) << run.Explain();
  // The rest is parallel: with 4 jobs, some tests overlap (else --jobs did nothing).
  EXPECT_GT(overlapping_pairs, 0) << run.Explain();
}

TEST(ConformanceKit, FindsThePluginByNameOrManifest) {
  // By name, through discovery (the build tree's plugin folder).
  KitRun run = RunKit({"cpu", "--test", "plugin.*"}, "cpu_by_name");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["plugin"]["name"], "cpu");
  // By its manifest, and by name from a folder given with --plugin-path.
  run = RunKit({std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/simaccel_testing.bpplugin.json",
                "--test", "plugin.load"},
               "simaccel_by_manifest");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["plugin"]["name"], "simaccel_testing");
  run = RunKit({"simok", "--plugin-path", kBroken, "--test", "plugin.load"}, "simok_by_name");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["plugin"]["name"], "simok");
}

// Two plugins named simok: the kit says which one a host would load and which is shadowed
// (docs/discovery.md, "When two plugins claim a name").
TEST(ConformanceKit, ShowsWhichPluginShadowsWhich) {
  const std::string first = kScratch + "/shadowing";
  fs::remove_all(first);
  fs::create_directories(first);
  fs::permissions(first,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  fs::copy_file(Broken("simok"), first + "/libbackplane_simok.so");
  fs::copy_file(kBroken + "/simok.bpplugin.json", first + "/simok.bpplugin.json");
  const std::string winner = first + "/libbackplane_simok.so";
  // By name: the first on the path is checked, and it shadows the other.
  KitRun run =
      RunKit({"simok", "--plugin-path", first, "--plugin-path", kBroken, "--test", "plugin.load"},
             "shadowing_by_name");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["plugin"]["library"], winner);
  ASSERT_TRUE(run.json["notes"].is_array()) << run.json.dump(2);
  EXPECT_NE(run.json["notes"].dump().find("it shadows " + Broken("simok")), std::string::npos)
      << run.json["notes"];
  EXPECT_NE(run.process.out.find("note: on this search path it shadows"), std::string::npos)
      << run.process.out;
  // By path, the loser: with a note that hosts load the winner instead.
  run = RunKit(
      {Broken("simok"), "--plugin-path", first, "--plugin-path", kBroken, "--test", "plugin.load"},
      "shadowing_by_path");
  EXPECT_NE(run.json["notes"].dump().find("is shadowed by " + winner), std::string::npos)
      << run.Explain();
}

// A folder of the test's own holding copies of plugins, as a user's BACKPLANE_PLUGIN_PATH might.
std::string PluginFolder(const std::string& name, const std::vector<std::string>& plugins) {
  const std::string folder = kScratch + "/" + name;
  fs::remove_all(folder);
  fs::create_directories(folder);
  fs::permissions(folder,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  for (const std::string& p : plugins) {
    fs::copy_file(Broken(p), Lib(folder, p));
    fs::copy_file(kBroken + "/" + p + ".bpplugin.json", folder + "/" + p + ".bpplugin.json");
  }
  return folder;
}

// The verdict must not depend on what else is on the plugin path: with a copy of the plugin
// under test earlier on BACKPLANE_PLUGIN_PATH (which shadows it for a host), the kit checks
// the plugin it was given, alone, and every test comes out as it does without the copy.
TEST(ConformanceKit, TheVerdictDoesNotDependOnOtherPluginsOnThePath) {
  const std::vector<std::string> args = {
      Broken("simok"),           "--test", "plugin.*", "--test", "device.copy.*", "--test",
      "codegen.kernel.saxpy_gpu"};
  const KitRun alone = RunKit(args, "verdict_alone");
  ASSERT_EQ(alone.process.exit_code, 0) << alone.Explain();
  const std::string elsewhere = PluginFolder("verdict_elsewhere", {"simok", "brokencodegen"});
  const KitRun beside = RunKit(args, "verdict_beside", {{"BACKPLANE_PLUGIN_PATH", elsewhere}});
  EXPECT_EQ(beside.process.exit_code, 0) << beside.Explain();
  EXPECT_EQ(beside.json["plugin"]["library"], Broken("simok"));
  ASSERT_EQ(beside.json["tests"].size(), alone.json["tests"].size());
  for (const auto& t : alone.json["tests"]) {
    const std::string name = t["name"];
    EXPECT_EQ(beside.Status(name), t["status"]) << name << ": " << beside.Message(name);
  }
  // It still tells the user what a host would do.
  EXPECT_NE(beside.json["notes"].dump().find("a host loads plugin 'simok' from " +
                                             Lib(elsewhere, "simok")),
            std::string::npos)
      << beside.json["notes"];
}

// A plugin that is on no folder of the search path: the kit checks it all the same, and says
// which plugin of its name a host would load.
TEST(ConformanceKit, SaysWhichPluginAHostLoadsWhenTheOneCheckedIsNotOnThePath) {
  const std::string first = PluginFolder("off_the_path", {"simok"});
  const KitRun run =
      RunKit({Broken("simok"), "--plugin-path", first, "--test", "plugin.load"}, "off_the_path");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_NE(
      run.json["notes"].dump().find("a host loads plugin 'simok' from " + Lib(first, "simok")),
      std::string::npos)
      << run.Explain();
}

// --with loads another plugin beside the one under test (one it builds on); a --with that
// names nothing is a usage error.
TEST(ConformanceKit, WithLoadsAnotherPluginBesideTheOneUnderTest) {
  KitRun run = RunKit({Broken("simok"), "--with", Broken("brokencodegen"), "--test", "plugin.load",
                       "--test", "target.kind.schema"},
                      "with");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.Status("target.kind.schema"), "passed") << run.Message("target.kind.schema");
  backplane::subprocess::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  const Result r = backplane::subprocess::Run(
      {kKit, Broken("simok"), "--with", kScratch + "/no/such/libbackplane_x.so"}, options);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--with"), std::string::npos) << r.err;
}

TEST(ConformanceKit, SimAccelPassesEverything) {
  // With no expected failures: its kernels run on the stream SetStream made active.
  const KitRun run = RunKit({Lib(BACKPLANE_TEST_PLUGIN_DIR, "simaccel_testing")}, "simaccel");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["device"], "simaccel:0");
  EXPECT_EQ(run.json["device_name"], "simaccel simulated accelerator 0");
  EXPECT_EQ(run.json["summary"]["failed"], 0);
  for (const char* t : {"device.memory.bad_handle", "device.memory.out_of_bounds",
                        "device.stream.sync_waits", "device.stream.sync_stream_from_to",
                        "device.copy.device_to_device", "codegen.kernel.matmul_tiled_gpu",
                        "codegen.kernel.softmax_gpu", "codegen.module.save_load"}) {
    EXPECT_EQ(run.Status(t), "passed") << t << ": " << run.Message(t);
  }
  EXPECT_EQ(run.Status("codegen.set_stream_routes"), "passed")
      << run.Message("codegen.set_stream_routes");
  EXPECT_EQ(run.json["summary"]["xfail"], 0);
  EXPECT_EQ(run.Status("codegen.kernel.vector_add"), "skipped");
}

TEST(ConformanceKit, TheSimulationPassesEverything) {
  // The control for the broken plugins, run two tests at a time.
  const KitRun run = RunKit({Broken("simok"), "--jobs", "2"}, "simok");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["summary"]["failed"], 0);
  // Every device test passes, except the native-handle ones: the simulation has none, so they
  // skip (the DeviceAPI has no native_handle entry).
  for (const auto& t : run.json["tests"]) {
    const std::string name = t["name"];
    if (name.rfind("device.", 0) != 0) continue;
    EXPECT_EQ(t["status"], name.rfind("device.native.", 0) == 0 ? "skipped" : "passed")
        << name << ": " << t["message"];
  }
  ExpectAll(run, "device.event.", "passed");
  ExpectAll(run, "codegen.kernel.vector_add_gpu", "passed");
  EXPECT_EQ(run.Status("codegen.set_stream_routes"), "passed");
  EXPECT_EQ(run.Status("codegen.kernel.matmul"), "skipped");
}

TEST(ConformanceKit, VulkanPluginPasses) {
#ifndef BACKPLANE_CONFORMANCE_HAS_VULKAN
  GTEST_SKIP() << "the Vulkan plugin is not built here (install libvulkan-dev, libshaderc-dev)";
#else
  // With the Khronos validation layer on: the plugin prints every validation error.
  setenv("BACKPLANE_VULKAN_VALIDATION", "1", 1);
  // lavapipe compiles each shader with LLVM when it is first used, and the result is kept
  // under $XDG_CACHE_HOME (Mesa's shader cache, the plugin's pipeline cache). With those empty,
  // as on a fresh machine, and AddressSanitizer's allocator under LLVM, the register-tiled
  // matmul clauses took 112 s (matmul_reg_gpu) and 149 s (matmul_reg16_gpu), past the kit's
  // 60 s a test; with them warm, 12 s and 19 s.
  const KitRun run =
      RunKit({Lib(BACKPLANE_PLUGIN_DIR, "vulkan"), "--jobs", "2", "--timeout", "400"}, "vulkan");
  if (!run.json["device"].is_string()) {
    GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers for lavapipe)";
  }
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["device"], "vulkan:0");
  EXPECT_EQ(run.json["summary"]["failed"], 0);
  EXPECT_EQ(run.json["summary"]["xfail"], 0);
  ExpectAll(run, "device.copy.", "passed");
  ExpectAll(run, "device.stream.", "passed");
  for (const char* k :
       {"vector_add", "saxpy", "sum", "softmax", "matmul", "matmul_tiled", "transpose", "conv2d"}) {
    const std::string t = std::string("codegen.kernel.") + k + "_gpu";
    EXPECT_EQ(run.Status(t), "passed") << t << ": " << run.Message(t);
  }
  EXPECT_EQ(run.Status("codegen.module.save_load"), "passed");
  EXPECT_EQ(run.Status("codegen.set_stream_routes"), "passed");
  EXPECT_EQ(run.process.err.find("validation error"), std::string::npos) << run.process.err;
#endif
}

// ---- each broken plugin fails on its clause ----------------------------------------------

struct BrokenCase {
  const char* plugin;
  std::vector<std::string> args;  // test selection and options
  const char* failing;            // the test that must fail
  std::string message;            // what its message must say
  const char* passing;            // a test that must still pass ("" for none)
};

// How gtest (and so ctest) shows a case.
void PrintTo(const BrokenCase& c, std::ostream* os) { *os << c.plugin << " fails " << c.failing; }

class BrokenPlugin : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPlugin, FailsOnItsClause) {
  const BrokenCase& c = GetParam();
  std::vector<std::string> args = {Broken(c.plugin)};
  args.insert(args.end(), c.args.begin(), c.args.end());
  // ctest runs the cases at once: each writes reports of its own.
  const KitRun run = RunKit(args, std::string(c.plugin) + "-" + c.failing);
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  EXPECT_EQ(run.json["ok"], false);
  EXPECT_EQ(run.Status(c.failing), "failed") << run.Explain();
  EXPECT_NE(run.Message(c.failing).find(c.message), std::string::npos)
      << c.failing << " says: " << run.Message(c.failing);
  // The console names the clause with what was seen.
  EXPECT_NE(run.process.out.find(std::string(c.failing) + ": "), std::string::npos)
      << run.process.out;
  if (*c.passing != '\0') {
    EXPECT_EQ(run.Status(c.passing), "passed") << run.Message(c.passing);
  }
  EXPECT_NE(run.junit.find("name=\"" + std::string(c.failing) + "\""), std::string::npos);
  EXPECT_NE(run.junit.find("<failure"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    ConformanceKit, BrokenPlugin,
    ::testing::Values(
        BrokenCase{"brokenabi",
                   {"--test", "plugin.*"},
                   "plugin.abi.negotiation",
                   "offered a host of ABI " + std::to_string(BP_ABI_VERSION_MAJOR + 1) + "." +
                       std::to_string(BP_ABI_VERSION_MINOR) + ", it still registered",
                   "plugin.load"},
        BrokenCase{"brokenabi",
                   {"--test", "plugin.*"},
                   "plugin.entry_point",
                   "bp_brokenabi_extra",
                   "plugin.device_api_table"},
        // The core refuses a name the manifest does not declare, so the plugin fails to load.
        BrokenCase{
            "brokennames", {"--test", "plugin.*"}, "plugin.load", "'brokennames.undeclared'", ""},
        BrokenCase{"brokenattr",
                   {"--test", "device.attr.*"},
                   "device.attr.types",
                   "answered a pointer (BP_VALUE_PTR)",
                   "device.attr.unknown_property"},
        BrokenCase{"brokenattr",
                   {"--test", "device.attr.*"},
                   "device.attr.exist_count",
                   "past the last of its",
                   ""},
        BrokenCase{"brokenoverlap",
                   {"--test", "device.memory.*"},
                   "device.memory.distinct",
                   "allocations overlap",
                   "device.memory.zero_size"},
        BrokenCase{"brokenworkspace",
                   {"--test", "device.memory.workspace", "--test", "plugin.device_api_table"},
                   "device.memory.workspace",
                   "only alloc_workspace is set",
                   ""},
        BrokenCase{"brokenoffset",
                   {"--test", "device.copy.*"},
                   "device.copy.device_to_host_offsets",
                   "-byte device-to-host copy at offset 3",
                   "device.copy.host_to_device"},
        BrokenCase{"brokenoffset",
                   {"--test", "device.copy.*"},
                   "device.copy.host_to_device_offsets",
                   "-byte host-to-device copy at offset",
                   ""},
        BrokenCase{"brokenhostreuse",
                   {"--test", "device.copy.host_reuse", "--test", "device.copy.host_to_device"},
                   "device.copy.host_reuse",
                   "after copy_data_from_to returned",
                   "device.copy.host_to_device"},
        BrokenCase{"brokensync",
                   {"--test", "device.stream.*"},
                   "device.stream.sync_waits",
                   "stream_sync returned before the work submitted earlier completed",
                   "device.stream.null"},
        BrokenCase{"brokenorder",
                   {"--test", "device.stream.*"},
                   "device.stream.sync_stream_from_to",
                   "did not wait for the work queued on stream 1",
                   "device.stream.sync_waits"},
        // A freed stream's handle comes back for another thread's stream.
        BrokenCase{"brokenstreamreuse",
                   {"--test", "codegen.active_stream_freed", "--test", "codegen.set_stream_routes"},
                   "codegen.active_stream_freed",
                   "which then got the same handle for a new stream; A's next call of",
                   "codegen.set_stream_routes"},
        BrokenCase{"brokenthreads",
                   {"--test", "device.concurrency.*", "--test", "device.memory.distinct"},
                   "device.concurrency.threads",
                   "threads at once",
                   "device.memory.distinct"},
        BrokenCase{"brokencodegen",
                   {"--test", "codegen.kernel.vector_add*", "--test", "codegen.kernel.sum_gpu"},
                   "codegen.kernel.vector_add_gpu",
                   "did not match the float64 reference",
                   ""},
        // Outputs right, an input overwritten; only the comparison with
        // the IR interpreter (every buffer) sees it.
        BrokenCase{"brokeninputs",
                   {"--test", "codegen.kernel.vector_add*"},
                   "codegen.kernel.vector_add_gpu",
                   "did not match the IR interpreter: function 'vector_add_gpu', buffer 'a': "
                   "first difference at index 0",
                   ""},
        BrokenCase{"brokenmodule",
                   {"--test", "codegen.module.*", "--test", "codegen.kernel.saxpy_gpu"},
                   "codegen.module.save_load",
                   "loading back the module",
                   "codegen.kernel.saxpy_gpu"}),
    [](const ::testing::TestParamInfo<BrokenCase>& param) {
      return std::string(param.param.plugin) + "_" + std::to_string(param.index);
    });

// A kernel that needs a newer IR text version than the code generator reads is refused by
// bp_build (BP_ERR_UNSUPPORTED, "... which needs IR text version N; ..."): the clause is
// skipped with the refusal as its reason, whichever way it builds (RunExact, RunFault). Any
// other BP_ERR_UNSUPPORTED skips only a clause a device may lack (int64 here) and fails the
// others. simoldir (broken/old_ir.cc) refuses kernels with floormod the first way and with
// min the second.
TEST(ConformanceKit, AKernelNewerThanTheCodeGeneratorReadsIsSkipped) {
  const KitRun run =
      RunKit({Broken("simoldir"), "-t", "codegen.construct.floormod.*", "-t",
              "codegen.construct.fault.store_order", "-t", "codegen.construct.add.int32", "-t",
              "codegen.construct.min.int32", "-t", "codegen.construct.min.int64"},
             "simoldir");
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  int refused = 0;
  for (const auto& t : run.json["tests"]) {
    const std::string name = t["name"];
    if (name.rfind("codegen.construct.floormod.", 0) != 0 &&
        name != "codegen.construct.fault.store_order")
      continue;
    ++refused;
    const std::string message = t["message"];
    EXPECT_EQ(t["status"], "skipped") << name << ": " << message;
    EXPECT_NE(message.find("which needs IR text version 9; the code generator "
                           "target.build.simoldir"),
              std::string::npos)
        << name << ": " << message;
  }
  EXPECT_GT(refused, 10);  // every dtype of floormod, and the fault clause
  EXPECT_EQ(run.Status("codegen.construct.add.int32"), "passed");
  EXPECT_EQ(run.Status("codegen.construct.min.int32"), "failed");
  EXPECT_NE(run.Message("codegen.construct.min.int32").find("does not support `min(`"),
            std::string::npos)
      << run.Message("codegen.construct.min.int32");
  EXPECT_EQ(run.Status("codegen.construct.min.int64"), "skipped");
  EXPECT_EQ(run.json["summary"]["failed"], 1) << run.Explain();
}

TEST(ConformanceKit, ACrashFailsOnlyItsTest) {
  const KitRun run = RunKit({Broken("brokencrash"), "--test", "device.attr.types", "--test",
                             "device.copy.host_to_device", "--test", "device.attr.repeatable"},
                            "brokencrash");
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  const nlohmann::json t = run.Test("device.copy.host_to_device");
  ASSERT_FALSE(t.is_null());
  EXPECT_EQ(t["status"], "failed");
  EXPECT_EQ(t["failure"], "crash") << t;
  // A plain build dies of the signal; under AddressSanitizer the sanitizer reports the SEGV
  // and exits instead.
  const bool sigsegv = t.value("signal_name", "").find("SIGSEGV") != std::string::npos;
  const bool asan_report = t.value("output", "").find("SEGV") != std::string::npos;
  EXPECT_TRUE(sigsegv || asan_report) << t;
  // The tests before and after it ran in processes of their own.
  EXPECT_EQ(run.Status("device.attr.types"), "passed");
  EXPECT_EQ(run.Status("device.attr.repeatable"), "passed");
  EXPECT_NE(run.junit.find("<error"), std::string::npos);
}

TEST(ConformanceKit, AHangTimesOutAndTheRunGoesOn) {
  const KitRun run = RunKit({Broken("brokenhang"), "--timeout", "2", "--test", "device.attr.types",
                             "--test", "device.stream.null", "--test", "device.attr.exist_count"},
                            "brokenhang");
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  const nlohmann::json t = run.Test("device.stream.null");
  EXPECT_EQ(t["status"], "failed");
  EXPECT_EQ(t["failure"], "timeout") << t;
  EXPECT_NE(t["message"].get<std::string>().find("no result within 2 s"), std::string::npos) << t;
  EXPECT_EQ(run.Status("device.attr.types"), "passed");
  EXPECT_EQ(run.Status("device.attr.exist_count"), "passed");
}

// ---- expected failures, unsupported features, --verify-xfails ----------------------------

TEST(ConformanceKit, ExpectedFailuresAndUnsupportedFeatures) {
  const std::vector<std::string> offsets = {Broken("brokenoffset"), "--test",
                                            "device.copy.*_offsets", "--test",
                                            "device.copy.host_to_device"};
  // Text form: globs for plugin, device (its name) and test, and a reason.
  const std::string xfail = WriteScratch(
      "offset.xfail",
      "# plugin  device  test  reason\n"
      "brokenoffset \"Backplane conformance sim*\" device.copy.*_offsets  ignores byte_offset\n");
  std::vector<std::string> args = offsets;
  args.insert(args.end(), {"--xfail", xfail});
  KitRun run = RunKit(args, "offset_xfail");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.Status("device.copy.host_to_device_offsets"), "xfail");
  EXPECT_EQ(run.Status("device.copy.device_to_host_offsets"), "xfail");
  EXPECT_NE(run.Test("device.copy.device_to_host_offsets")["expectation"].get<std::string>().find(
                "ignores byte_offset"),
            std::string::npos);
  EXPECT_EQ(run.Status("device.copy.host_to_device"), "passed");
  EXPECT_EQ(run.json["summary"]["xfail"], 2);

  // An entry for another plugin or device does not apply.
  const std::string other = WriteScratch("other.xfail",
                                         "simaccel_testing * device.copy.* not this plugin\n"
                                         "* \"another device\" device.copy.* nor this device\n");
  args = offsets;
  args.insert(args.end(), {"--xfail", other});
  run = RunKit(args, "offset_other");
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  EXPECT_EQ(run.Status("device.copy.host_to_device_offsets"), "failed");

  // Unsupported (JSON form): not run, reported as skipped in JUnit.
  const std::string unsupported = WriteScratch(
      "offset.unsupported.json",
      R"([{"plugin": "broken*", "device": "brokenoffset:0", "test": "device.copy.host_*offsets", "reason": "no offsets"},
          {"test": "device.copy.device_to_host_offsets", "reason": "no offsets either"}])");
  args = offsets;
  args.insert(args.end(), {"--unsupported", unsupported});
  run = RunKit(args, "offset_unsupported");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.Status("device.copy.host_to_device_offsets"), "unsupported");
  EXPECT_EQ(run.Status("device.copy.host_to_device"), "passed");
  EXPECT_NE(run.junit.find("<skipped message=\"unsupported: no offsets"), std::string::npos);

  // An expected failure that passes: reported, and a failure only under --verify-xfails.
  const std::string stale =
      WriteScratch("stale.xfail", "brokenoffset * device.copy.host_to_device was fixed\n");
  args = {Broken("brokenoffset"), "--test", "device.copy.host_to_device", "--xfail", stale};
  run = RunKit(args, "stale_xfail");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.Status("device.copy.host_to_device"), "xpass");
  args.push_back("--verify-xfails");
  run = RunKit(args, "stale_xfail_verified");
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  EXPECT_EQ(run.Status("device.copy.host_to_device"), "xpass");
  EXPECT_NE(run.junit.find("type=\"xpass\""), std::string::npos);

  // --verify-xfails passes when every expected failure still fails.
  args = {Broken("brokenoffset"), "--test", "device.copy.*_offsets", "--xfail", xfail,
          "--verify-xfails"};
  run = RunKit(args, "offset_verified");
  EXPECT_EQ(run.process.exit_code, 0) << run.Explain();
  EXPECT_EQ(run.json["summary"]["xfail"], 2);
}

// Runs the kit in `cwd`, stopped after 60 s (a hang is a failure, not a stuck run).
Result RunKitIn(const std::string& cwd, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kKit};
  argv.insert(argv.end(), args.begin(), args.end());
  backplane::subprocess::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  options.cwd = cwd;
  options.timeout_s = 60;
  return backplane::subprocess::Run(argv, options);
}

// Only a spec with a '/' is a path: a bare name is found by discovery, never in the current
// directory, even when an entry of that name is there; not found is a usage error (exit 2).
TEST(ConformanceKit, ABareNameIsNeverLookedUpInTheCurrentDirectory) {
  const std::string cwd = kScratch + "/bare_name_cwd";
  fs::remove_all(cwd);
  fs::create_directories(cwd + "/cpu");
  std::ofstream(cwd + "/simok") << "not a plugin\n";
  Result r = RunKitIn(cwd, {"cpu", "--test", "plugin.load"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("checking " + Lib(BACKPLANE_PLUGIN_DIR, "cpu")), std::string::npos) << r.out;
  r = RunKitIn(cwd, {"simok", "--test", "plugin.load"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << "\n" << r.out << r.err;
  EXPECT_NE(r.err.find("no plugin named 'simok'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("./simok"), std::string::npos) << "the hint for a local file: " << r.err;
  r = RunKitIn(cwd, {"./cpu", "--test", "plugin.load"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << "\n" << r.out << r.err;
  EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
}

TEST(ConformanceKit, AManifestThatIsAFifoIsRefusedWithoutBlocking) {
  const std::string cwd = kScratch + "/fifo_cwd";
  fs::remove_all(cwd);
  fs::create_directories(cwd);
  ASSERT_EQ(mkfifo((cwd + "/stuck.bpplugin.json").c_str(), 0644), 0);
  const Result r = RunKitIn(cwd, {"./stuck.bpplugin.json"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe() << "\n" << r.err;
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

// A DeviceAPI table the core refuses is not "no device present": the kit fails the table's
// test and says of each device test that the table was refused.
TEST(ConformanceKit, ARefusedDeviceApiTableIsReportedAsRefused) {
  const KitRun run = RunKit(
      {Broken("brokentable"), "--test", "plugin.*", "--test", "device.memory.*"}, "brokentable");
  EXPECT_EQ(run.process.exit_code, 1) << run.Explain();
  EXPECT_EQ(run.Status("plugin.device_api_table"), "failed");
  EXPECT_NE(run.Message("plugin.device_api_table").find("struct_size is 24"), std::string::npos)
      << run.Message("plugin.device_api_table");
  ExpectAll(run, "device.memory.", "skipped");
  const std::string why = run.Message("device.memory.alignment");
  EXPECT_NE(why.find("refused the DeviceAPI table of device type 'brokentable'"), std::string::npos)
      << why;
  EXPECT_EQ(why.find("no device present"), std::string::npos) << why;
  const Result r = RunKitIn(kScratch, {Broken("brokentable"), "--device", "brokentable:0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("refused the DeviceAPI table"), std::string::npos) << r.err;
}

TEST(ConformanceKit, UsageErrors) {
  backplane::subprocess::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  Result r = backplane::subprocess::Run({kKit, "no_such_plugin"}, options);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no plugin named 'no_such_plugin'"), std::string::npos) << r.err;
  const std::string bad = WriteScratch("bad.xfail", "only-two fields\n");
  r = backplane::subprocess::Run({kKit, Broken("simok"), "--xfail", bad}, options);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.xfail:1"), std::string::npos) << r.err;
  r = backplane::subprocess::Run({kKit, Broken("simok"), "--device", "simok:5"}, options);
  EXPECT_EQ(r.exit_code, 2);
  r = backplane::subprocess::Run({kKit, "--list"}, options);
  EXPECT_EQ(r.exit_code, 0);
  for (const char* t : {"device.copy.device_to_host_offsets", "device.stream.sync_stream_from_to",
                        "codegen.kernel.conv2d_gpu", "plugin.abi.negotiation", "[BP-PLUGIN-7]"}) {
    EXPECT_NE(r.out.find(t), std::string::npos) << t;
  }
}

}  // namespace
