// SPDX-License-Identifier: Apache-2.0
#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace backplane::subprocess {

namespace {

// Closes both ends on scope exit unless they were handed on.
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
    }
  }
  ~Pipe() {
    for (int& fd : fds) CloseFd(fd);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  static void CloseFd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

bool IsUnset(const std::string& entry, const Options& options) {
  auto has_name = [&](const std::string& name) {
    return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
           entry[name.size()] == '=';
  };
  for (const std::string& name : options.unset_env) {
    if (has_name(name)) return true;
  }
  for (const auto& [name, value] : options.set_env) {
    if (has_name(name)) return true;
  }
  return false;
}

std::vector<std::string> ChildEnvironment(const Options& options) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    if (!IsUnset(entry, options)) env.push_back(std::move(entry));
  }
  for (const auto& [name, value] : options.set_env) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string Result::Describe() const {
  if (term_signal != 0) return "killed by signal " + std::to_string(term_signal);
  return "exit code " + std::to_string(exit_code);
}

Result Run(const std::vector<std::string>& argv, const Options& options) {
  if (argv.empty()) throw std::invalid_argument("subprocess::Run: argv is empty");
  Pipe out_pipe;
  Pipe err_pipe;

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe.fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe.fds[1], STDERR_FILENO);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());

  std::vector<std::string> args = argv;
  std::vector<std::string> env = ChildEnvironment(options);
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(env);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error("cannot start '" + argv[0] + "': " + std::strerror(rc));
  }
  Pipe::CloseFd(out_pipe.fds[1]);
  Pipe::CloseFd(err_pipe.fds[1]);

  Result result;
  std::array<pollfd, 2> fds = {pollfd{out_pipe.fds[0], POLLIN, 0},
                               pollfd{err_pipe.fds[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks = {&result.out, &result.err};
  int open_count = 2;
  char buffer[8192];
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options.timeout_s));
  while (open_count > 0) {
    int wait_ms = -1;
    if (options.timeout_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ::kill(pid, SIGKILL);  // its pipes close as it dies
        wait_ms = 100;
      } else {
        wait_ms = static_cast<int>(left.count());
      }
    }
    if (::poll(fds.data(), fds.size(), wait_ms) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // the Pipe closes it
        --open_count;
      }
    }
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw std::runtime_error("waiting for '" + argv[0] + "' failed: " + std::strerror(errno));
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace backplane::subprocess
