// SPDX-License-Identifier: Apache-2.0
// What the remote benchmarks (remote_bench.cc, remote_isolation_bench.cc) share: a server child
// that ends with the benchmark, and waiting for the port it writes.
#ifndef BACKPLANE_TESTS_BENCH_BENCH_CHILD_H_
#define BACKPLANE_TESTS_BENCH_BENCH_CHILD_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <backplane/sdk/child_process.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace backplane {
namespace bench {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `argv` with its output to `log` and without BACKPLANE_REMOTE; the child gets SIGTERM
// when this process ends, so a benchmark that fails or is interrupted leaves no server behind.
inline pid_t StartChild(const std::vector<std::string>& argv, const std::string& log) {
  sdk::ChildOptions o;
  o.argv = argv;
  o.env = sdk::EnvironmentWith({}, {"BACKPLANE_REMOTE"});
  o.log_file = log;
  o.null_stdin = false;
  o.own_group = false;
  o.parent_death_signal = SIGTERM;
  sdk::ChildProcess child(o);
  if (!child.started()) {
    throw std::runtime_error("cannot start " + argv[0] + ": " + child.start_error());
  }
  return child.Detach();  // it runs until this process ends
}

// Waits for a child to write its port to `port_file`; the port, or throws with its log.
inline int WaitForPort(pid_t pid, const std::filesystem::path& port_file,
                       const std::filesystem::path& log, const char* what) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    const std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      throw std::runtime_error(std::string(what) + " ended before it listened:\n" + ReadFile(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error(std::string(what) + " wrote no port within 60 s:\n" + ReadFile(log));
}

}  // namespace bench
}  // namespace backplane

#endif  // BACKPLANE_TESTS_BENCH_BENCH_CHILD_H_
