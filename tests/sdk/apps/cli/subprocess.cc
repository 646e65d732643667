// SPDX-License-Identifier: Apache-2.0
#include "subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <backplane/sdk/child_process.hpp>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace backplane {
namespace subprocess {

std::string Result::Describe() const {
  if (term_signal != 0) return "killed by signal " + std::to_string(term_signal);
  return "exit code " + std::to_string(exit_code);
}

Result Run(const std::vector<std::string>& argv, const Options& options) {
  if (argv.empty()) throw std::invalid_argument("subprocess::Run: argv is empty");
  sdk::ChildOptions o;
  o.argv = argv;
  o.env = sdk::EnvironmentWith(options.set_env, options.unset_env);
  o.cwd = options.cwd;
  o.result_fd = STDERR_FILENO;  // stderr apart from stdout
  o.null_stdin = false;
  o.own_group = false;
  o.timeout_s = options.timeout_s;
  o.output_head = 0;
  o.output_tail = o.result_keep = std::numeric_limits<size_t>::max() / 4;  // all of it
  sdk::ChildProcess child(o);
  if (!child.started()) {
    throw std::runtime_error("cannot start '" + argv[0] +
                             "': " + std::strerror(child.start_errno()));
  }
  child.Wait();
  Result result;
  result.out = child.output();
  result.err = child.result();
  const int status = child.status();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace subprocess
}  // namespace backplane
