// SPDX-License-Identifier: Apache-2.0
// Runs a program as a child process and captures what it prints: used by the CLI test and
// by the benchmarks that need a fresh process.
#ifndef BACKPLANE_TESTS_TOOLS_SUBPROCESS_H_
#define BACKPLANE_TESTS_TOOLS_SUBPROCESS_H_

#include <string>
#include <utility>
#include <vector>

namespace backplane {
namespace subprocess {

struct Options {
  // Environment variables removed from the child's environment (e.g. BACKPLANE_PLUGIN_PATH,
  // so a test does not depend on the caller's setting).
  std::vector<std::string> unset_env;
  // Environment variables set (or replaced) in the child's environment.
  std::vector<std::pair<std::string, std::string>> set_env;
  // The child's working folder ("": this process's).
  std::string cwd;
  // Seconds after which the child is killed (SIGKILL) and reported as ended by that signal;
  // 0: wait as long as it takes.
  double timeout_s = 0;
};

struct Result {
  int exit_code = -1;   // the child's exit status, or -1 if a signal ended it
  int term_signal = 0;  // the signal that ended it, or 0
  std::string out;      // everything it wrote to stdout
  std::string err;      // everything it wrote to stderr
  // "exit code 0" / "killed by signal 11", for test messages.
  std::string Describe() const;
};

// Runs argv[0] (a path; PATH is not searched) with `argv`, waits for it and returns what it
// printed. Throws std::runtime_error naming the program if it cannot be started.
Result Run(const std::vector<std::string>& argv, const Options& options = {});

}  // namespace subprocess
}  // namespace backplane

#endif  // BACKPLANE_TESTS_TOOLS_SUBPROCESS_H_
