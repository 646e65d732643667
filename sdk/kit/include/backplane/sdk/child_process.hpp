// SPDX-License-Identifier: Apache-2.0
// The one child-process runner of the project: starts a program with its stdout and stderr on
// a pipe (or in a log file), optionally a second pipe for results at a descriptor of the
// child's, its own process group, a signal when this process ends, and a deadline after which
// the whole group is killed; reads what it prints without blocking, and gives its wait status.
// It serves the conformance kit's isolation, `backplane info`'s probes, the cpu plugin's
// compiler driver and the tests that start programs, among them children that run on while
// the caller talks to them (WaitForOutput(), Signal(), WaitFor()). Header-only and POSIX-only
// (Linux).
//
//   sdk::ChildOptions o;
//   o.argv = {"/usr/bin/cc", "--version"};
//   o.timeout_s = 10;
//   sdk::ChildProcess child(o);
//   if (!child.started()) ...child.start_error()...
//   child.Wait();                       // or Pump() from a poll loop over many children
//   if (child.timed_out()) ...; else if (WIFEXITED(child.status())) ...child.output()...
//
// Without parent_death_signal the child is started with posix_spawn (no copy of this process's
// page tables, which a large host would pay on every compile); with it, with fork and exec,
// doing only async-signal-safe calls in between (everything is built before the fork).
#ifndef BACKPLANE_SDK_CHILD_PROCESS_HPP_
#define BACKPLANE_SDK_CHILD_PROCESS_HPP_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace backplane {
namespace sdk {

// What to start and how.
struct ChildOptions {
  // The program and its arguments; argv[0] is a path, or with search_path a name looked up on
  // PATH (as execvp does).
  std::vector<std::string> argv;
  bool search_path = false;
  // The child's environment ("NAME=value" entries); none: this process's.
  std::optional<std::vector<std::string>> env;
  // Where stdout and stderr go: a pipe this process reads (output()), or with log_file that
  // file, created or truncated (mode 0644).
  std::string log_file;
  // Without log_file: stderr alone to this file (created or truncated, mode 0644), and
  // output() holds stdout alone. Not with log_file, nor with result_fd STDERR_FILENO.
  std::string stderr_file;
  // A second pipe, at this descriptor in the child, read into result(); -1: none. With
  // STDERR_FILENO, stderr gets this pipe of its own and output() holds stdout alone.
  int result_fd = -1;
  // The child's working folder ("": this process's).
  std::string cwd;
  // stdin from /dev/null (else this process's).
  bool null_stdin = true;
  // Its own process group: Kill() and the deadline then end whatever it started as well.
  bool own_group = true;
  // A signal the child gets when this process's thread that started it ends (prctl
  // PR_SET_PDEATHSIG): a killed parent takes its children with it. 0: none.
  int parent_death_signal = 0;
  // Seconds after the start at which Pump() kills the child (and its group); 0: no deadline.
  double timeout_s = 0;
  // What is kept of the output: its first output_head bytes and at least its last
  // output_tail; and at least the last result_keep bytes of the results.
  size_t output_head = 1024;
  size_t output_tail = 64 * 1024;
  size_t result_keep = size_t{16} << 20;
};

// "SIGSEGV (Segmentation fault)", or "signal N" for a number without a name.
inline std::string SignalText(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = strsignal(sig);
  return (abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) +
         (text != nullptr ? " (" + std::string(text) + ")" : "");
}

// This program's path (/proc/self/exe), or "" when it cannot be read.
inline std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

// This process's environment with `set` set over it (each NAME=value replacing that name's
// entry) and the variables named in `removed` left out.
inline std::vector<std::string> EnvironmentWith(
    const std::vector<std::pair<std::string, std::string>>& set,
    const std::vector<std::string>& removed = {}) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    bool dropped = false;
    for (const auto& [name, value] : set) {
      dropped = dropped || entry.compare(0, name.size() + 1, name + "=") == 0;
    }
    for (const std::string& name : removed) {
      dropped = dropped || entry.compare(0, name.size() + 1, name + "=") == 0;
    }
    if (!dropped) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the child. When it cannot be started (no pipe, no fork, or posix_spawn's error,
  // e.g. no such program) started() is false and start_error() says why; a program that fork
  // and exec could not run exits with code 127.
  explicit ChildProcess(const ChildOptions& o) : o_(o) { Start(); }
  ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }
  ChildProcess& operator=(ChildProcess&& other) noexcept {
    if (this != &other) {
      CloseFd(&out_fd_);
      CloseFd(&result_fd_);
      o_ = std::move(other.o_);
      pid_ = std::exchange(other.pid_, -1);
      out_fd_ = std::exchange(other.out_fd_, -1);
      result_fd_ = std::exchange(other.result_fd_, -1);
      head_ = std::move(other.head_);
      out_ = std::move(other.out_);
      result_ = std::move(other.result_);
      out_total_ = other.out_total_;
      start_ = other.start_;
      deadline_ = other.deadline_;
      error_ = std::exchange(other.error_, std::string());
      errno_ = other.errno_;
      exited_ = other.exited_;
      timed_out_ = other.timed_out_;
      done_ = other.done_;
      status_ = other.status_;
    }
    return *this;
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Closes the pipes; a child still running is killed (with its group) and reaped.
  ~ChildProcess() {
    if (pid_ > 0 && !done_) {
      Kill();
      Finish();
    }
    CloseFd(&out_fd_);
    CloseFd(&result_fd_);
  }

  bool started() const { return pid_ > 0; }
  // "pipe: Too many open files", "fork: ...", "posix_spawn: No such file or directory".
  const std::string& start_error() const { return error_; }
  int start_errno() const { return errno_; }
  pid_t pid() const { return pid_; }
  Clock::time_point start_time() const { return start_; }
  // Clock::time_point::max() without a deadline.
  Clock::time_point deadline() const { return deadline_; }

  // The pipes still open, for the caller's poll() over many children.
  void AddPollFds(std::vector<pollfd>* fds) const {
    if (out_fd_ >= 0) fds->push_back(pollfd{out_fd_, POLLIN, 0});
    if (result_fd_ >= 0) fds->push_back(pollfd{result_fd_, POLLIN, 0});
  }

  // Reads what the pipes hold without blocking, notes the child's end, and kills it (with its
  // group) at the deadline. True once it is done: its pipes are read to their end (or, once
  // it has ended or been killed, closed: something it started may hold them) and it has been
  // reaped, and then whatever its group left behind is killed.
  bool Pump() {
    if (done_ || pid_ <= 0) return true;
    DrainAll();
    if (!exited_ && waitpid(pid_, &status_, WNOHANG) == pid_) {
      // It ended, but something it started may hold the pipes: take what is there.
      exited_ = true;
      DrainAll();
      CloseFd(&out_fd_);
      CloseFd(&result_fd_);
    }
    if (!exited_ && Clock::now() >= deadline_) {
      Kill();
      timed_out_ = true;
      CloseFd(&out_fd_);  // something it started may still hold the pipes open
      CloseFd(&result_fd_);
    }
    // With pipes, their end is its end (it is reaped next); with a log file, only waitpid says.
    if (exited_ || timed_out_ || (o_.log_file.empty() && out_fd_ < 0 && result_fd_ < 0)) Finish();
    return done_;
  }

  // Runs Pump() until the child is done, waiting in poll() between.
  void Wait() {
    while (!Pump()) PollOnce(1000);
  }

  // Runs Pump() until the child is done or `seconds` have passed, whichever is first; unlike
  // the deadline, the time passing does not kill it. True when it is done.
  bool WaitFor(double seconds) {
    const Clock::time_point until = After(seconds);
    while (!Pump()) {
      if (Clock::now() >= until) return false;
      PollOnce(MsUntil(until, 1000));
    }
    return true;
  }

  // Runs Pump() until output() holds `text`, the child is done, or `seconds` have passed,
  // for a child that says it is ready and then runs on. True when output() holds `text`.
  bool WaitForOutput(const std::string& text, double seconds) {
    const Clock::time_point until = After(seconds);
    for (;;) {
      const bool done = Pump();
      if (out_.find(text) != std::string::npos) return true;
      if (done || Clock::now() >= until) return false;
      PollOnce(MsUntil(until, 1000));
    }
  }

  // Milliseconds a poll() may wait for this child: to its deadline, at most `most`.
  int PollTimeoutMs(int most) const {
    if (deadline_ == Clock::time_point::max()) return most;
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, most));
  }

  // Forgets the child, which runs on: this object no longer reads its pipes (they are closed),
  // kills or reaps it. Returns its pid, for the caller's own waitpid and kill.
  pid_t Detach() {
    CloseFd(&out_fd_);
    CloseFd(&result_fd_);
    done_ = true;
    return std::exchange(pid_, -1);
  }

  // SIGKILL to its process group (with own_group) and to the child.
  void Kill() {
    if (pid_ <= 0 || exited_) return;
    if (o_.own_group) kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
  }

  // `sig` to the child alone (not its group), while it runs: e.g. SIGTERM to ask it to stop.
  void Signal(int sig) {
    if (pid_ > 0 && !exited_) kill(pid_, sig);
  }

  // Whether it is done (Pump() returned true), was killed at the deadline, and its wait status.
  bool done() const { return done_; }
  bool timed_out() const { return timed_out_; }
  int status() const { return status_; }

  // Its output (stdout and stderr together): the kept tail, the first bytes, and how many
  // bytes it printed in all.
  const std::string& output() const { return out_; }
  const std::string& output_head() const { return head_; }
  size_t output_total() const { return out_total_; }
  // What it wrote to result_fd.
  const std::string& result() const { return result_; }

 private:
  static void CloseFd(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }

  void Fail(const char* what, int err) {
    error_ = std::string(what) + ": " + std::strerror(err);
    errno_ = err;
  }

  static Clock::time_point After(double seconds) {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  // Milliseconds to `until` (rounded up), at most `most` and at most PollTimeoutMs(most).
  int MsUntil(Clock::time_point until, int most) const {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    return std::min(PollTimeoutMs(most),
                    static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, most)));
  }

  // Waits up to `ms` in poll() for the pipes, or sleeps in small steps when there are none
  // (output to a file: only waitpid tells its end).
  void PollOnce(int ms) const {
    std::vector<pollfd> fds;
    AddPollFds(&fds);
    if (fds.empty()) {
      usleep(static_cast<useconds_t>(std::min(ms, 10)) * 1000);
      return;
    }
    poll(fds.data(), fds.size(), PollTimeoutMs(ms));
  }

  void Start() {
    start_ = Clock::now();
    if (o_.argv.empty()) {
      Fail("start", EINVAL);
      return;
    }
    if (!o_.stderr_file.empty() && (!o_.log_file.empty() || o_.result_fd == STDERR_FILENO)) {
      Fail("start", EINVAL);
      error_ = "start: stderr_file \"" + o_.stderr_file + "\" cannot be given with " +
               (o_.log_file.empty() ? std::string("result_fd STDERR_FILENO") : "log_file") +
               " (stderr goes to one place): leave one of them out";
      return;
    }
    std::vector<char*> argv;
    for (std::string& a : o_.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    if (o_.env) {
      for (std::string& e : *o_.env) envp.push_back(e.data());
      envp.push_back(nullptr);
    }
    char* const* env = o_.env ? envp.data() : environ;
    int out_pipe[2] = {-1, -1};
    int res_pipe[2] = {-1, -1};
    if (o_.log_file.empty() && pipe2(out_pipe, O_CLOEXEC) != 0) {
      Fail("pipe", errno);
      return;
    }
    if (o_.result_fd >= 0 && pipe2(res_pipe, O_CLOEXEC) != 0) {
      Fail("pipe", errno);
      CloseFd(&out_pipe[0]);
      CloseFd(&out_pipe[1]);
      return;
    }
    if (o_.parent_death_signal != 0) {
      StartWithFork(argv.data(), env, out_pipe[1], res_pipe[1]);
    } else {
      StartWithSpawn(argv.data(), env, out_pipe[1], res_pipe[1]);
    }
    CloseFd(&out_pipe[1]);
    CloseFd(&res_pipe[1]);
    if (pid_ <= 0) {
      CloseFd(&out_pipe[0]);
      CloseFd(&res_pipe[0]);
      return;
    }
    if (o_.own_group) setpgid(pid_, pid_);  // also here, so the group exists before any kill
    out_fd_ = out_pipe[0];
    result_fd_ = res_pipe[0];
    if (out_fd_ >= 0) fcntl(out_fd_, F_SETFL, O_NONBLOCK);
    if (result_fd_ >= 0) fcntl(result_fd_, F_SETFL, O_NONBLOCK);
    if (o_.timeout_s > 0) {
      deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o_.timeout_s));
    }
  }

  void StartWithFork(char* const* argv, char* const* env, int out_w, int res_w) {
    const char* log = o_.log_file.empty() ? nullptr : o_.log_file.c_str();
    const char* err = o_.stderr_file.empty() ? nullptr : o_.stderr_file.c_str();
    const pid_t parent = getpid();
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      Fail("fork", errno);
      return;
    }
    if (pid == 0) {
      if (o_.own_group) setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, o_.parent_death_signal);
      if (getppid() != parent) _exit(1);  // the parent ended before the line above
      if (log != nullptr) {
        const int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
          dup2(fd, STDOUT_FILENO);
          dup2(fd, STDERR_FILENO);
        }
      } else {
        dup2(out_w, STDOUT_FILENO);
        const int err_fd =
            err == nullptr ? out_w : open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (err_fd < 0) _exit(127);  // as posix_spawn fails on a file it cannot open
        dup2(err_fd, STDERR_FILENO);
      }
      if (res_w >= 0) {
        if (res_w == o_.result_fd) {
          fcntl(res_w, F_SETFD, 0);
        } else {
          dup2(res_w, o_.result_fd);
        }
      }
      if (o_.null_stdin) {
        const int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
      }
      if (!o_.cwd.empty() && chdir(o_.cwd.c_str()) != 0) _exit(127);
      if (o_.search_path) {
        execvpe(argv[0], argv, env);
      } else {
        execve(argv[0], argv, env);
      }
      _exit(127);
    }
    pid_ = pid;
  }

  void StartWithSpawn(char* const* argv, char* const* env, int out_w, int res_w) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!o_.log_file.empty()) {
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, o_.log_file.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    } else {
      posix_spawn_file_actions_adddup2(&actions, out_w, STDOUT_FILENO);
      if (o_.stderr_file.empty()) {
        posix_spawn_file_actions_adddup2(&actions, out_w, STDERR_FILENO);
      } else {
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, o_.stderr_file.c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
      }
    }
    // dup2 onto the same descriptor clears its close-on-exec flag (glibc 2.29 and later).
    if (res_w >= 0) posix_spawn_file_actions_adddup2(&actions, res_w, o_.result_fd);
    if (o_.null_stdin) {
      posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    }
    if (!o_.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, o_.cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (o_.own_group) {
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
      posix_spawnattr_setpgroup(&attr, 0);
    }
    pid_t pid = 0;
    const int rc = o_.search_path ? posix_spawnp(&pid, argv[0], &actions, &attr, argv, env)
                                  : posix_spawn(&pid, argv[0], &actions, &attr, argv, env);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      Fail("posix_spawn", rc);
      return;
    }
    pid_ = pid;
  }

  // Reads what is there; closes the fd at end of file. With `head`, also keeps the first
  // bytes there and counts every byte in `total`.
  static void Drain(int* fd, std::string* into, size_t keep, std::string* head, size_t head_keep,
                    size_t* total) {
    char buf[16384];
    for (;;) {
      const ssize_t n = read(*fd, buf, sizeof(buf));
      if (n > 0) {
        if (head != nullptr && head->size() < head_keep) {
          head->append(buf, std::min<size_t>(static_cast<size_t>(n), head_keep - head->size()));
        }
        if (total != nullptr) *total += static_cast<size_t>(n);
        into->append(buf, static_cast<size_t>(n));
        if (into->size() > 2 * keep) into->erase(0, into->size() - keep);
        continue;
      }
      if (n == 0) CloseFd(fd);
      if (n < 0 && errno == EINTR) continue;
      return;  // EAGAIN: nothing more now
    }
  }

  void DrainAll() {
    if (out_fd_ >= 0) Drain(&out_fd_, &out_, o_.output_tail, &head_, o_.output_head, &out_total_);
    if (result_fd_ >= 0) Drain(&result_fd_, &result_, o_.result_keep, nullptr, 0, nullptr);
  }

  void Finish() {
    while (!exited_ && waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    exited_ = true;
    if (o_.own_group) kill(-pid_, SIGKILL);  // anything it started and left behind
    done_ = true;
  }

  ChildOptions o_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int result_fd_ = -1;
  std::string head_, out_, result_;
  size_t out_total_ = 0;
  Clock::time_point start_{};
  Clock::time_point deadline_ = Clock::time_point::max();
  std::string error_;
  int errno_ = 0;
  bool exited_ = false;
  bool timed_out_ = false;
  bool done_ = false;
  int status_ = 0;
};

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_CHILD_PROCESS_HPP_
