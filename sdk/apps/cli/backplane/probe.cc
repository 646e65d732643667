// SPDX-License-Identifier: Apache-2.0
#include "probe.h"

#include <backplane/c_api.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace backplane::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kResultFd = 3;
constexpr size_t kMaxRunning = 8;
constexpr size_t kOutputKept = 8192;
constexpr const char kReturned[] = "returned\n";

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

std::string SignalText(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = strsignal(sig);
  return (abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) +
         (text != nullptr ? " (" + std::string(text) + ")" : "");
}

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int out_fd = -1;     // its stdout and stderr
  int result_fd = -1;  // its fd 3
  std::string out;
  std::string result;
  Clock::time_point deadline;
  bool timed_out = false;
  bool done = false;
  int status = 0;
};

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void Drain(int* fd, std::string* into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(*fd, buf, sizeof(buf));
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
      if (into->size() > 2 * kOutputKept) into->erase(0, into->size() - kOutputKept);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) CloseFd(fd);
    return;  // EAGAIN: nothing more now
  }
}

Child Start(size_t index, const std::string& self, const std::string& library,
            const std::vector<std::string>& plugin_paths, double timeout_s) {
  std::vector<std::string> args = {self, "info", "--probe-one", library};
  for (const std::string& p : plugin_paths) args.insert(args.end(), {"--plugin-path", p});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out_pipe[2];
  int res_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  }
  if (pipe2(res_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    // Its own process group, so a hang is stopped with whatever it started.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(out_pipe[1], STDERR_FILENO);
    if (res_pipe[1] == kResultFd) {
      fcntl(kResultFd, F_SETFD, 0);
    } else {
      dup2(res_pipe[1], kResultFd);
    }
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(res_pipe[1]);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(res_pipe[0], F_SETFL, O_NONBLOCK);
  Child c;
  c.index = index;
  c.pid = pid;
  c.out_fd = out_pipe[0];
  c.result_fd = res_pipe[0];
  c.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(timeout_s));
  return c;
}

// The line of a child's output that says most about its end: a sanitizer's first report
// line, else its last non-empty line.
std::string LastWords(const std::string& out) {
  const size_t sanitizer = out.find("ERROR: ");
  size_t from = std::string::npos;
  if (sanitizer != std::string::npos && out.find("Sanitizer", sanitizer) != std::string::npos) {
    from = out.rfind('\n', sanitizer);
    from = from == std::string::npos ? 0 : from + 1;
  } else {
    const size_t end = out.find_last_not_of("\n ");
    if (end == std::string::npos) return "";
    from = out.rfind('\n', end);
    from = from == std::string::npos ? 0 : from + 1;
  }
  std::string line = out.substr(from, out.find('\n', from) - from);
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

std::string Failure(const Child& c, double timeout_s) {
  const std::string where = "while loading, in a static constructor or in bp_plugin_init";
  std::string text;
  if (c.timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", timeout_s);
    text =
        std::string("hung for more than ") + seconds + " s " + where + " (its process was stopped)";
  } else if (WIFSIGNALED(c.status)) {
    text = "crashed with " + SignalText(WTERMSIG(c.status)) + " " + where;
  } else {
    const int code = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
    text = code == 127 ? "could not be probed: the probe process did not start"
                       : "ended the process " + where + " (exit code " + std::to_string(code) +
                             ": it called exit() or a sanitizer stopped it)";
  }
  const std::string words = LastWords(c.out);
  if (!words.empty()) text += "; its last output: \"" + words + "\"";
  return text;
}

}  // namespace

std::vector<ProbeResult> ProbePlugins(const std::vector<std::string>& libraries,
                                      const std::vector<std::string>& plugin_paths,
                                      double timeout_s) {
  std::vector<ProbeResult> results(libraries.size());
  for (size_t i = 0; i < libraries.size(); ++i) results[i].library = libraries[i];
  const std::string self = SelfPath();
  if (self.empty()) throw std::runtime_error("cannot find this program (/proc/self/exe)");
  std::vector<Child> running;
  size_t next = 0;
  while (next < libraries.size() || !running.empty()) {
    while (next < libraries.size() && running.size() < kMaxRunning) {
      running.push_back(Start(next, self, libraries[next], plugin_paths, timeout_s));
      ++next;
    }
    std::vector<pollfd> fds;
    for (const Child& c : running) {
      if (c.out_fd >= 0) fds.push_back(pollfd{c.out_fd, POLLIN, 0});
      if (c.result_fd >= 0) fds.push_back(pollfd{c.result_fd, POLLIN, 0});
    }
    // Wake for output, an exit (checked at least every 50 ms) or the nearest deadline.
    auto wait = std::chrono::milliseconds(50);
    for (const Child& c : running) {
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::max(c.deadline - Clock::now(), Clock::duration::zero())));
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(wait.count())) < 0 && errno != EINTR) {
      throw std::runtime_error("poll: " + std::string(std::strerror(errno)));
    }
    for (Child& c : running) {
      if (c.out_fd >= 0) Drain(&c.out_fd, &c.out);
      if (c.result_fd >= 0) Drain(&c.result_fd, &c.result);
      if (waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        c.done = true;
      } else if (Clock::now() >= c.deadline) {
        c.timed_out = true;
        kill(-c.pid, SIGKILL);
        while (waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
        }
        c.done = true;
      }
      if (!c.done) continue;
      kill(-c.pid, SIGKILL);  // whatever it started and left behind
      if (c.out_fd >= 0) Drain(&c.out_fd, &c.out);
      if (c.result_fd >= 0) Drain(&c.result_fd, &c.result);
      CloseFd(&c.out_fd);
      CloseFd(&c.result_fd);
      ProbeResult& r = results[c.index];
      r.survived = !c.timed_out && c.result.find(kReturned) != std::string::npos;
      if (!r.survived) r.failure = Failure(c, timeout_s);
    }
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const Child& c) { return c.done; }),
        running.end());
  }
  return results;
}

void ProbeOne(const std::string& library, const std::vector<std::string>& plugin_paths) {
  for (const std::string& p : plugin_paths) bp_plugin_path_add(p.c_str());
  // Loaded or refused, the load returned: that is all the parent needs to know. Its own
  // in-process load gives the reason of a refusal.
  bp_plugin_load(library.c_str());
  std::fflush(nullptr);
  ssize_t ignored = write(kResultFd, kReturned, sizeof(kReturned) - 1);
  (void)ignored;
  // The plugin stays loaded with whatever threads it started: no static destructors.
  _exit(0);
}

}  // namespace backplane::cli
