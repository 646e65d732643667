// SPDX-License-Identifier: Apache-2.0
// The OpenMP settings of the c target's kernels (plugins/cpu/openmp.h,
// docs/performance.md, "OpenMP: waiting and binding"): Backplane's choice when the environment
// says nothing, the user's variables when it does, and the host's runtime left alone. Each case
// runs a real process (openmp_helper.cc) with the variables set or unset, and checks what cpu:0
// reports and what the OpenMP runtime itself says it read (libgomp's OMP_DISPLAY_ENV=verbose,
// LLVM libomp's KMP_SETTINGS), so the settings are known to take effect, not only to be shown.
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "subprocess.h"

namespace {

namespace sp = backplane::subprocess;
using Json = nlohmann::json;

// Every variable either group of openmp.h looks at: unset unless a case sets it, so the
// caller's environment does not decide the outcome.
const std::vector<std::string> kOpenMpVariables = {
    "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",    "KMP_BLOCKTIME", "KMP_LIBRARY",
    "OMP_PROC_BIND",   "GOMP_CPU_AFFINITY", "OMP_PLACES",    "KMP_AFFINITY"};

struct HelperRun {
  Json out;         // the helper's JSON
  std::string err;  // the runtime's report
  std::string raw;  // for messages
};

HelperRun RunHelper(const std::vector<std::pair<std::string, std::string>>& set,
                    const std::vector<std::string>& args = {}, bool host_openmp = false) {
  std::vector<std::string> argv = {BACKPLANE_OPENMP_HELPER};
  if (host_openmp) argv.push_back("--host-openmp");
  argv.push_back(BACKPLANE_CPU_PLUGIN_LIBRARY);
  argv.insert(argv.end(), args.begin(), args.end());
  sp::Options o;
  o.unset_env = {"BACKPLANE_PLUGIN_PATH", "OMP_NUM_THREADS"};
  for (const std::string& name : kOpenMpVariables) {
    bool given = false;
    for (const auto& kv : set) given = given || kv.first == name;
    if (!given) o.unset_env.push_back(name);
  }
  o.set_env = set;
  o.set_env.push_back({"OMP_DISPLAY_ENV", "verbose"});
  o.set_env.push_back({"KMP_SETTINGS", "1"});
  o.timeout_s = 120;
  sp::Result r = sp::Run(argv, o);
  HelperRun run;
  run.raw = r.Describe() + "\nstdout: " + r.out + "\nstderr: " + r.err;
  run.err = r.err;
  EXPECT_EQ(r.exit_code, 0) << run.raw;
  run.out = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(run.out.is_object()) << run.raw;
  if (!run.out.is_object()) run.out = Json::object();
  return run;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The properties expected of cpu:0 for a group.
Json Expect(const std::string& settings, const std::string& wait, const std::string& wait_from,
            const std::string& bind, const std::string& bind_from) {
  return Json{{"openmp_settings", settings},
              {"openmp_wait_policy", wait},
              {"openmp_wait_policy_from", wait_from},
              {"openmp_proc_bind", bind},
              {"openmp_proc_bind_from", bind_from}};
}

// The properties without the runtime's name (which depends on the compiler).
Json WithoutRuntime(Json props) {
  props.erase("openmp_runtime");
  return props;
}

// Skips a case whose checks read libgomp's report when the kernel did not load libgomp (the
// host's cc is not gcc).
#define REQUIRE_LIBGOMP(run)                                                                 \
  do {                                                                                       \
    ASSERT_FALSE((run).out.contains("error")) << (run).raw;                                  \
    if ((run).out["after"].value("openmp_runtime", "") != "libgomp.so.1") {                  \
      GTEST_SKIP() << "the kernel loaded " << (run).out["after"].value("openmp_runtime", "") \
                   << ", not libgomp.so.1 (the host's cc is not gcc)";                       \
    }                                                                                        \
  } while (0)

TEST(CpuOpenMp, BackplaneChoosesPassiveWaitingAndNoBinding) {
  HelperRun run = RunHelper({});
  REQUIRE_LIBGOMP(run);
  // Before any kernel: what will apply.
  EXPECT_EQ(run.out["before"], Expect("pending", "passive", "backplane", "false", "backplane"))
      << run.raw;
  EXPECT_EQ(WithoutRuntime(run.out["after"]),
            Expect("applied", "passive", "backplane", "false", "backplane"))
      << run.raw;
  // libgomp read them: passive is a spin count of 0 (unset would be 300000), no binding.
  EXPECT_TRUE(Contains(run.err, "GOMP_SPINCOUNT = '0'")) << run.raw;
  EXPECT_TRUE(Contains(run.err, "OMP_PROC_BIND = 'FALSE'")) << run.raw;
  // Set for the load only: the host's environment is as it was, and its thread is not pinned.
  EXPECT_EQ(run.out["env_after"], (Json{{"OMP_WAIT_POLICY", nullptr}, {"OMP_PROC_BIND", nullptr}}))
      << run.raw;
  EXPECT_EQ(run.out["affinity_after"], run.out["affinity_before"]) << run.raw;
}

TEST(CpuOpenMp, UserWaitPolicyWins) {
  HelperRun run = RunHelper({{"OMP_WAIT_POLICY", "ACTIVE"}});
  REQUIRE_LIBGOMP(run);
  EXPECT_EQ(run.out["before"], Expect("pending", "active", "environment", "false", "backplane"))
      << run.raw;
  EXPECT_EQ(WithoutRuntime(run.out["after"]),
            Expect("applied", "active", "environment", "false", "backplane"))
      << run.raw;
  EXPECT_TRUE(Contains(run.err, "GOMP_SPINCOUNT = '30000000000'")) << run.raw;
  EXPECT_EQ(run.out["env_after"], (Json{{"OMP_WAIT_POLICY", "ACTIVE"}, {"OMP_PROC_BIND", nullptr}}))
      << run.raw;
}

TEST(CpuOpenMp, UserSpinCountWins) {
  // GOMP_SPINCOUNT is a waiting setting too: Backplane then sets no OMP_WAIT_POLICY.
  HelperRun run = RunHelper({{"GOMP_SPINCOUNT", "1234"}});
  REQUIRE_LIBGOMP(run);
  EXPECT_EQ(WithoutRuntime(run.out["after"]),
            Expect("applied", "GOMP_SPINCOUNT=1234", "environment", "false", "backplane"))
      << run.raw;
  EXPECT_TRUE(Contains(run.err, "GOMP_SPINCOUNT = '1234'")) << run.raw;
}

TEST(CpuOpenMp, UserBindingWins) {
  HelperRun run = RunHelper({{"OMP_PROC_BIND", "close"}});
  REQUIRE_LIBGOMP(run);
  EXPECT_EQ(run.out["before"], Expect("pending", "passive", "backplane", "close", "environment"))
      << run.raw;
  // After: the binding the runtime answers (omp_get_proc_bind).
  EXPECT_EQ(WithoutRuntime(run.out["after"]),
            Expect("applied", "passive", "backplane", "close", "environment"))
      << run.raw;
  EXPECT_TRUE(Contains(run.err, "OMP_PROC_BIND = 'CLOSE'")) << run.raw;
  EXPECT_TRUE(Contains(run.err, "GOMP_SPINCOUNT = '0'")) << run.raw;
  EXPECT_EQ(run.out["env_after"], (Json{{"OMP_WAIT_POLICY", nullptr}, {"OMP_PROC_BIND", "close"}}))
      << run.raw;
}

TEST(CpuOpenMp, UserPlacesWin) {
  // OMP_PLACES alone turns binding on in the runtime; Backplane must not turn it off.
  HelperRun run = RunHelper({{"OMP_PLACES", "cores"}});
  REQUIRE_LIBGOMP(run);
  EXPECT_EQ(run.out["before"]["openmp_proc_bind"], "OMP_PLACES=cores") << run.raw;
  EXPECT_EQ(WithoutRuntime(run.out["after"]),
            Expect("applied", "passive", "backplane", "true", "environment"))
      << run.raw;
  EXPECT_TRUE(Contains(run.err, "OMP_PROC_BIND = 'TRUE'")) << run.raw;
}

TEST(CpuOpenMp, RuntimeLoadedByTheHostIsReportedAsTheHosts) {
  // The host loaded libgomp before any kernel: it read its (empty) environment then, so its
  // defaults hold and Backplane says so instead of claiming its own settings.
  HelperRun run = RunHelper({}, {}, /*host_openmp=*/true);
  ASSERT_FALSE(run.out.contains("error")) << run.raw;
  const Json host = {{"openmp_settings", "host"},       {"openmp_runtime", "libgomp.so.1"},
                     {"openmp_wait_policy", "default"}, {"openmp_wait_policy_from", "host"},
                     {"openmp_proc_bind", "default"},   {"openmp_proc_bind_from", "host"}};
  EXPECT_EQ(run.out["before"], host) << run.raw;
  EXPECT_EQ(run.out["after"], host) << run.raw;
  EXPECT_TRUE(Contains(run.err, "GOMP_SPINCOUNT = '300000'")) << run.raw;
}

TEST(CpuOpenMp, LlvmLibompGetsTheSettingsToo) {
  // clang's -fopenmp links LLVM's libomp, which reads its environment at its first call rather
  // than when it loads; the plugin makes that call while its settings are set.
  HelperRun run = RunHelper({}, {"c -cc=clang"});
  if (run.out.value("error_kind", 0) == BP_ERR_NOT_FOUND) {
    GTEST_SKIP() << "no clang here: " << run.out["error"];
  }
  ASSERT_FALSE(run.out.contains("error")) << run.raw;
  if (run.out["after"].value("openmp_runtime", "") != "libomp.so.5") {
    GTEST_SKIP() << "clang's -fopenmp loaded " << run.out["after"].value("openmp_runtime", "")
                 << ", not libomp.so.5";
  }
  EXPECT_EQ(WithoutRuntime(run.out["after"]),
            Expect("applied", "passive", "backplane", "false", "backplane"))
      << run.raw;
  // libomp turns passive waiting into no spinning at all.
  EXPECT_TRUE(Contains(run.err, "KMP_BLOCKTIME=0")) << run.raw;
  EXPECT_TRUE(Contains(run.err, "OMP_WAIT_POLICY=PASSIVE")) << run.raw;
  EXPECT_EQ(run.out["env_after"], (Json{{"OMP_WAIT_POLICY", nullptr}, {"OMP_PROC_BIND", nullptr}}))
      << run.raw;
}

}  // namespace
