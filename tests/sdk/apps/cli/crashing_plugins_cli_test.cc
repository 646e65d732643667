// SPDX-License-Identifier: Apache-2.0
// Plugins that take their host down while loading (tests/plugins/testing/crashing: a SIGSEGV in
// a static constructor, abort() and exit(3) in bp_plugin_init, an init that never returns):
// `backplane info` loads each one in a child process first and names the culprit and how it
// failed; BACKPLANE_DEBUG=loader prints each step before it is taken, so the last line names
// the plugin that killed an in-process host; BACKPLANE_DISABLE_PLUGINS keeps plugins out.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"

namespace {

using Json = nlohmann::json;
namespace sp = backplane::subprocess;

const std::string kCrashing = std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/crashing";

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan reports a SEGV and exits instead of dying of it
#else
constexpr bool kSanitized = false;
#endif

sp::Result RunCliWith(const std::vector<std::string>& args,
                      const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_DEBUG", "BACKPLANE_DISABLE_PLUGINS"};
  options.set_env = env;
  return sp::Run(argv, options);
}

std::string Explain(const sp::Result& r) {
  return r.Describe() + "\n--- stdout ---\n" + r.out + "\n--- stderr ---\n" + r.err;
}

const Json* Plugin(const Json& report, const std::string& name) {
  for (const Json& p : report["plugins"]) {
    if (p.value("name", "") == name) return &p;
  }
  return nullptr;
}

// The last line the loader trace wrote.
std::string LastTraceLine(const std::string& err) {
  std::istringstream lines(err);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.rfind("backplane[loader]: ", 0) == 0) last = line;
  }
  return last;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliCrashingPlugins, InfoNamesEachCrashingOrHangingPluginAndGoesOn) {
  const sp::Result r =
      RunCliWith({"info", "--json", "--plugin-path", kCrashing, "--probe-timeout", "2"});
  // Before the probes, the first of them killed the command (SIGSEGV inside dlopen).
  ASSERT_EQ(r.exit_code, 0) << Explain(r);
  const Json report = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << Explain(r);
  auto reason = [&](const std::string& name) {
    const Json* p = Plugin(report, name);
    EXPECT_NE(p, nullptr) << name << " is not listed: " << report["plugins"].dump(2);
    if (p == nullptr) return std::string();
    EXPECT_EQ((*p)["state"], "skipped") << p->dump(2);
    return (*p)["reason"].is_string() ? (*p)["reason"].get<std::string>() : std::string();
  };
  const std::string segv = reason("crashing_ctor_segv");
  EXPECT_TRUE(Contains(segv, kSanitized ? "AddressSanitizer: SEGV" : "crashed with SIGSEGV"))
      << segv;
  EXPECT_TRUE(Contains(segv, "static constructor or in bp_plugin_init")) << segv;
  EXPECT_TRUE(Contains(segv, "BACKPLANE_DISABLE_PLUGINS=crashing_ctor_segv")) << segv;
  EXPECT_TRUE(Contains(reason("crashing_init_abort"), "crashed with SIGABRT"))
      << reason("crashing_init_abort");
  EXPECT_TRUE(Contains(reason("crashing_init_exit"), kSanitized ? "exit code" : "exit code 3"))
      << reason("crashing_init_exit");
  EXPECT_TRUE(Contains(reason("crashing_init_hang"), "hung for more than 2 s"))
      << reason("crashing_init_hang");
  // The rest of the report is there: the cpu plugin loaded and its device listed.
  const Json* cpu = Plugin(report, "cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ((*cpu)["state"], "loaded");
  EXPECT_FALSE(report["devices"].empty());
}

TEST(CliCrashingPlugins, TheTableNamesTheCrashingPlugin) {
  const sp::Result r = RunCliWith({"info", "--plugin-path", kCrashing, "--probe-timeout", "2"});
  ASSERT_EQ(r.exit_code, 0) << Explain(r);
  EXPECT_TRUE(Contains(r.out, "crashing_ctor_segv")) << r.out;
  EXPECT_TRUE(Contains(r.out, "hung for more than 2 s")) << r.out;
}

// In-process (--no-probe), the host dies; the trace's last line says which plugin and which
// step. Each run disables the culprit of the one before, until every plugin is disabled.
TEST(CliCrashingPlugins, TheTraceNamesTheCulpritAndDisablingItLetsTheHostGoOn) {
  struct Step {
    std::string culprit;  // the plugin the last trace line must name
    std::string step;     // and the step
  };
  const std::vector<Step> steps = {{"crashing_ctor_segv", "dlopen"},
                                   {"crashing_init_abort", "calling bp_plugin_init"},
                                   {"crashing_init_exit", "calling bp_plugin_init"}};
  std::string disabled = "crashing_init_hang";  // never loaded in-process: it would not return
  for (const Step& s : steps) {
    SCOPED_TRACE(s.culprit);
    const sp::Result r =
        RunCliWith({"info", "--no-probe", "--plugin-path", kCrashing},
                   {{"BACKPLANE_DEBUG", "loader"}, {"BACKPLANE_DISABLE_PLUGINS", disabled}});
    EXPECT_NE(r.exit_code, 0) << "the host survived " << s.culprit << "\n" << Explain(r);
    const std::string last = LastTraceLine(r.err);
    EXPECT_TRUE(Contains(last, "'" + s.culprit + "'")) << last << "\n" << Explain(r);
    EXPECT_TRUE(Contains(last, s.step)) << last;
    disabled += "," + s.culprit;
  }
  const sp::Result r = RunCliWith({"info", "--json", "--no-probe", "--plugin-path", kCrashing},
                                  {{"BACKPLANE_DISABLE_PLUGINS", disabled}});
  ASSERT_EQ(r.exit_code, 0) << Explain(r);
  const Json report = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << Explain(r);
  for (const char* name :
       {"crashing_ctor_segv", "crashing_init_abort", "crashing_init_exit", "crashing_init_hang"}) {
    const Json* p = Plugin(report, name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ((*p)["state"], "skipped") << p->dump(2);
    EXPECT_TRUE(
        Contains((*p)["reason"].get<std::string>(), "disabled by BACKPLANE_DISABLE_PLUGINS"))
        << p->dump(2);
  }
  EXPECT_TRUE(r.err.empty()) << "the trace is off without BACKPLANE_DEBUG: " << r.err;
}

// Each step is printed before it is taken: for a plugin that loads, the trace shows the
// search, the manifest, the checks, dlopen, bp_plugin_init and the result, in that order.
TEST(CliCrashingPlugins, TheTraceShowsEveryStepInOrder) {
  const sp::Result r = RunCliWith({"target", "c"}, {{"BACKPLANE_DEBUG", "loader"}});
  ASSERT_EQ(r.exit_code, 0) << Explain(r);
  size_t at = 0;
  for (const char* step :
       {"discovering plugins", "searching folder", "reading manifest", "plugin 'cpu' discovered",
        "loading plugin 'cpu': checking library", "loading plugin 'cpu': dlopen",
        "loading plugin 'cpu': calling bp_plugin_init", "plugin 'cpu' loaded"}) {
    const size_t found = r.err.find(step, at);
    ASSERT_NE(found, std::string::npos) << "'" << step << "' missing or out of order:\n" << r.err;
    at = found;
  }
}

}  // namespace
