// SPDX-License-Identifier: Apache-2.0
// What the remote benchmarks (remote_bench.cc, remote_isolation_bench.cc) share: a server child
// that ends with the benchmark, and waiting for the port it writes.
#ifndef BACKPLANE_TESTS_BENCH_BENCH_CHILD_H_
#define BACKPLANE_TESTS_BENCH_BENCH_CHILD_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace backplane::bench {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `argv` with its output to `log`; the child gets SIGTERM when this process ends, so a
// benchmark that fails or is interrupted leaves no server behind. Only async-signal-safe calls
// between fork and exec.
inline pid_t StartChild(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "BACKPLANE_REMOTE=", 17) != 0) env.push_back(*e);
  }
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("cannot start " + argv[0] + ": fork failed");
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  execve(args[0], args.data(), envp.data());
  _exit(127);
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

}  // namespace backplane::bench

#endif  // BACKPLANE_TESTS_BENCH_BENCH_CHILD_H_
