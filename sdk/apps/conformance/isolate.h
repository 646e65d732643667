// SPDX-License-Identifier: Apache-2.0
// Running tests isolated: each test runs in a fresh process (this program re-executed with
// the hidden --run-one flag), which loads the plugin afresh and writes its result as JSON to
// a pipe. The parent enforces a per-test timeout and kills the process group of a test that
// overruns; a test whose process dies without a result failed with the signal or exit code.
#ifndef BACKPLANE_SDK_CONFORMANCE_ISOLATE_H_
#define BACKPLANE_SDK_CONFORMANCE_ISOLATE_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "conformance.h"

namespace backplane {
namespace conformance {

// What one test did.
struct TestResult {
  std::string name;
  std::string status;   // "passed", "failed" or "skipped"
  std::string failure;  // when failed: "assertion", "error", "crash" or "timeout"
  std::string message;  // why it failed or was skipped
  std::vector<std::string> details;
  double seconds = 0;
  // When its process started, in seconds after the run's first test started (-1: not run in a
  // process of its own). With `seconds`, shows which tests ran beside which (--jobs).
  double started = -1;
  int signal = 0;        // the signal that ended the test's process, or 0
  std::string output;    // the tail of what the test's process printed
  nlohmann::json extra;  // data a test hands the parent (plugin.load: the plugin's info)
};

nlohmann::json ResultToJson(const TestResult& r);
TestResult ResultFromJson(const nlohmann::json& j);

// Runs `test` in this process: the child's side (or --run-one without --result-fd).
TestResult RunHere(const TestCase& test, Context& ctx);

struct IsolationOptions {
  std::string self;               // this program's path, re-executed for each test
  std::vector<std::string> args;  // arguments for each child after "--run-one NAME"
  // Variables set (or replaced) in each child's environment, e.g. BACKPLANE_PLUGIN_FILES so
  // that the child discovers the plugin under test alone.
  std::vector<std::pair<std::string, std::string>> env;
  double timeout_s = 60;
  int jobs = 1;
};

// Runs each test in a process of its own, `jobs` at a time. `done` is called as each one
// finishes; the results come back in the order of `tests`.
std::vector<TestResult> RunIsolated(const std::vector<const TestCase*>& tests,
                                    const IsolationOptions& options,
                                    const std::function<void(const TestResult&)>& done);

// "SIGSEGV (Segmentation fault)".
std::string SignalText(int sig);

}  // namespace conformance
}  // namespace backplane

#endif  // BACKPLANE_SDK_CONFORMANCE_ISOLATE_H_
