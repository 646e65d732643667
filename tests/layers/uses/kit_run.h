// SPDX-License-Identifier: Apache-2.0
// The conformance kit run as a child process under the faults layer, and the check of its JSON
// report, for faults_kit_test.cc and faults_serve_test.cc.
#ifndef BACKPLANE_TESTS_LAYERS_USES_KIT_RUN_H_
#define BACKPLANE_TESTS_LAYERS_USES_KIT_RUN_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sdk/apps/cli/subprocess.h"

namespace backplane {
namespace layers_test {

namespace fs = std::filesystem;

inline const std::string kKit = BACKPLANE_CONFORMANCE_PATH;
inline const std::string kPlugins = BACKPLANE_PLUGIN_DIR;
inline const std::string kScratch = BACKPLANE_TEST_SCRATCH_DIR;

// The clauses run under faults: allocations, copies, streams, events, syncs and launches, a
// few seconds in all.
inline const std::vector<std::string> kClauses = {
    "-t", "device.memory.*",           "-t", "device.copy.*",
    "-t", "device.stream.*",           "-t", "device.event.*",
    "-t", "codegen.kernel.vector_add", "-t", "codegen.kernel.matmul"};

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct KitRun {
  backplane::subprocess::Result process;
  nlohmann::json json;
  std::string Explain() const {
    return process.Describe() + "\n--- stdout ---\n" + process.out + "\n--- stderr ---\n" +
           process.err;
  }
};

inline KitRun RunKit(std::vector<std::string> args, const std::string& tag,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::vector<std::string>& unset) {
  fs::create_directories(kScratch);
  const std::string json_path = kScratch + "/" + tag + ".json";
  fs::remove(json_path);
  args.insert(args.begin(), kKit);
  args.insert(args.end(), kClauses.begin(), kClauses.end());
  args.insert(args.end(), {"--timeout", "60", "--json", json_path});
  backplane::subprocess::Options o;
  o.unset_env = unset;
  o.unset_env.push_back("BACKPLANE_PLUGIN_PATH");
  o.set_env = env;
  o.timeout_s = 300;
  KitRun run;
  run.process = backplane::subprocess::Run(args, o);
  run.json = nlohmann::json::parse(ReadFile(json_path), nullptr, false);
  return run;
}

// Every failed clause failed on an injected fault, by name; none crashed or timed out; some
// met a fault and some passed; no test's process printed a sanitizer's report. Returns how
// many failed.
inline int ExpectNamedFaultsOnly(const KitRun& run) {
  EXPECT_FALSE(run.json.is_discarded()) << "the JSON report does not parse\n" << run.Explain();
  if (run.json.is_discarded()) return 0;
  // The kit's exit status: 1 for a run with failures, never a signal.
  EXPECT_EQ(run.process.term_signal, 0) << run.Explain();
  int failed = 0, passed = 0;
  for (const auto& t : run.json["tests"]) {
    const std::string name = t["name"], status = t["status"];
    // Under the sanitizer presets: an error path that leaks or touches freed memory.
    EXPECT_FALSE(Has(t.value("output", ""), "Sanitizer")) << name << ": " << t;
    if (status == "passed") ++passed;
    if (status != "failed") continue;
    ++failed;
    const std::string message = t.value("message", "");
    EXPECT_TRUE(Has(message, "faults: injected")) << name << " failed on something else: " << t;
    EXPECT_NE(t.value("failure", ""), "crash") << name << ": " << t;
    EXPECT_NE(t.value("failure", ""), "timeout") << name << ": " << t;
    EXPECT_EQ(t.value("signal", 0), 0) << name << ": " << t;
  }
  EXPECT_GT(failed, 0) << "no fault was injected: the layer did not run\n" << run.Explain();
  EXPECT_GT(passed, 0) << run.Explain();
  EXPECT_EQ(run.process.exit_code, failed > 0 ? 1 : 0) << run.Explain();
  return failed;
}

}  // namespace layers_test
}  // namespace backplane

#endif  // BACKPLANE_TESTS_LAYERS_USES_KIT_RUN_H_
