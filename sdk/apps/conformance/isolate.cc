// SPDX-License-Identifier: Apache-2.0
#include "isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

extern char** environ;

namespace backplane::conformance {

namespace {

using Clock = std::chrono::steady_clock;

// What a test's process may print that the parent keeps (the tail).
constexpr size_t kOutputKept = 64 * 1024;
// What a result carries of it.
constexpr size_t kOutputReported = 4096;
constexpr int kResultFd = 3;

// The process groups of the tests running now, for the parent's signal handler: a run
// interrupted with Ctrl-C (or ended by a CI timeout's SIGTERM) takes its tests with it.
constexpr size_t kMaxChildren = 64;
volatile sig_atomic_t g_children[kMaxChildren] = {};

void KillChildrenAndDie(int sig) {
  for (size_t i = 0; i < kMaxChildren; ++i) {
    if (g_children[i] > 0) kill(-static_cast<pid_t>(g_children[i]), SIGKILL);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void Track(pid_t pid, bool running) {
  for (size_t i = 0; i < kMaxChildren; ++i) {
    if (running ? g_children[i] == 0 : g_children[i] == pid) {
      g_children[i] = running ? pid : 0;
      return;
    }
  }
}

struct Child {
  size_t index = 0;  // into the tests
  pid_t pid = -1;
  int out_fd = -1;     // the child's stdout and stderr
  int result_fd = -1;  // the child's fd 3
  std::string head;    // the first bytes the child printed (a sanitizer's report starts there)
  std::string out;     // the last ones
  size_t out_total = 0;
  std::string result;
  Clock::time_point start, deadline;
  bool timed_out = false;
  bool exited = false;  // reaped; `status` holds its wait status
  int status = 0;
};

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

Child Start(size_t index, const TestCase& test, const IsolationOptions& o) {
  std::vector<std::string> args = {o.self, "--run-one", test.name, "--result-fd",
                                   std::to_string(kResultFd)};
  args.insert(args.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child's environment: this one's, with o.env set over it (built before fork).
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : o.env) {
      replaced = replaced || entry.compare(0, name.size() + 1, name + "=") == 0;
    }
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : o.env) env.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], res_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(res_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: its own process group (so a timeout kills whatever it started), output to
    // the first pipe, results to fd 3, no stdin.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed parent takes its tests with it
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(out_pipe[1], STDERR_FILENO);
    if (res_pipe[1] == kResultFd) {
      fcntl(kResultFd, F_SETFD, 0);
    } else {
      dup2(res_pipe[1], kResultFd);
    }
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so the group exists before any kill
  Track(pid, true);
  close(out_pipe[1]);
  close(res_pipe[1]);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(res_pipe[0], F_SETFL, O_NONBLOCK);
  Child c;
  c.index = index;
  c.pid = pid;
  c.out_fd = out_pipe[0];
  c.result_fd = res_pipe[0];
  c.start = Clock::now();
  c.deadline = c.start + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(o.timeout_s));
  return c;
}

// Reads what is there; closes the fd at end of file. With `head`, also keeps the first KiB
// in it and counts every byte in `total`.
void Drain(int* fd, std::string* into, size_t keep, std::string* head = nullptr,
           size_t* total = nullptr) {
  char buf[16384];
  for (;;) {
    const ssize_t n = read(*fd, buf, sizeof(buf));
    if (n > 0) {
      if (head != nullptr && head->size() < 1024) {
        head->append(buf, std::min<size_t>(static_cast<size_t>(n), 1024 - head->size()));
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

// What a result carries of the output: all of it when short, else its head and its tail.
std::string Excerpt(const std::string& head, const std::string& tail, size_t total) {
  if (total <= kOutputReported) return tail;
  return head.substr(0, 1024) + "\n...\n" + tail.substr(tail.size() - (kOutputReported - 1024));
}

TestResult Finish(Child& c, const TestCase& test, const IsolationOptions& o) {
  while (!c.exited && waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
  }
  const int status = c.status;
  kill(-c.pid, SIGKILL);  // anything the test started and left behind
  Track(c.pid, false);
  TestResult r;
  r.name = test.name;
  r.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
  r.output = Excerpt(c.head, c.out, c.out_total);
  if (c.timed_out) {
    r.status = "failed";
    r.failure = "timeout";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", o.timeout_s);
    r.message = std::string("no result within ") + buf +
                " s: the test hung, and its process was killed (raise --timeout for a slow device)";
    return r;
  }
  // The last whole line that parses: the final result, or the failure the test reported as
  // it happened when the process died after it.
  nlohmann::json j;
  size_t end = c.result.size();
  while (end > 0 && (j.is_null() || j.is_discarded())) {
    const size_t start = c.result.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    j = nlohmann::json::parse(c.result.substr(from, end - from), nullptr, false);
    if (!j.is_object()) j = nlohmann::json();
    end = start == std::string::npos ? 0 : start;
  }
  if (j.is_object()) {
    TestResult child = ResultFromJson(j);
    child.name = test.name;
    child.seconds = r.seconds;
    child.output = r.output;
    if (WIFSIGNALED(status)) {
      child.signal = WTERMSIG(status);
      child.details.push_back("after this failure the test's process was killed by signal " +
                              SignalText(child.signal));
    }
    return child;
  }
  r.status = "failed";
  r.failure = "crash";
  if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.message = "the test's process was killed by signal " + SignalText(r.signal) +
                " before it reported a result: the plugin crashed";
  } else {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.message = "the test's process exited with code " + std::to_string(code) +
                " before it reported a result" +
                (code == 127 ? " (it could not be started)" : ": the plugin ended the process");
    if (c.out.find("Sanitizer") != std::string::npos ||
        c.head.find("Sanitizer") != std::string::npos) {
      r.message += " (its output holds a sanitizer's report)";
    }
  }
  return r;
}

}  // namespace

std::string SignalText(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = strsignal(sig);
  return (abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) +
         (text != nullptr ? " (" + std::string(text) + ")" : "");
}

nlohmann::json ResultToJson(const TestResult& r) {
  nlohmann::json j = {{"name", r.name},       {"status", r.status},   {"message", r.message},
                      {"details", r.details}, {"seconds", r.seconds}, {"signal", r.signal}};
  if (!r.failure.empty()) j["failure"] = r.failure;
  if (!r.output.empty()) j["output"] = r.output;
  if (!r.extra.is_null()) j["extra"] = r.extra;
  return j;
}

TestResult ResultFromJson(const nlohmann::json& j) {
  TestResult r;
  r.name = j.value("name", "");
  r.status = j.value("status", "failed");
  r.failure = j.value("failure", "");
  r.message = j.value("message", "");
  if (j.contains("details") && j["details"].is_array()) {
    for (const auto& d : j["details"]) {
      if (d.is_string()) r.details.push_back(d.get<std::string>());
    }
  }
  r.seconds = j.value("seconds", 0.0);
  r.signal = j.value("signal", 0);
  r.output = j.value("output", "");
  if (j.contains("extra")) r.extra = j["extra"];
  return r;
}

TestResult RunHere(const TestCase& test, Context& ctx) {
  TestResult r;
  r.name = test.name;
  const auto t0 = Clock::now();
  try {
    test.run(ctx);
    r.status = "passed";
  } catch (const TestSkip& e) {
    r.status = "skipped";
    r.message = e.what();
  } catch (const TestFailure& e) {
    r.status = "failed";
    r.failure = "assertion";
    r.message = e.what();
  } catch (const std::exception& e) {
    r.status = "failed";
    r.failure = "error";
    r.message = std::string("unexpected error: ") + e.what();
  } catch (...) {
    r.status = "failed";
    r.failure = "error";
    r.message = "unexpected error: an exception that is not a std::exception";
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.details = ctx.details;
  r.extra = ctx.extra;
  return r;
}

std::vector<TestResult> RunIsolated(const std::vector<const TestCase*>& tests,
                                    const IsolationOptions& o,
                                    const std::function<void(const TestResult&)>& done) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, KillChildrenAndDie);
  std::vector<TestResult> results(tests.size());
  std::deque<size_t> pending;
  for (size_t i = 0; i < tests.size(); ++i) pending.push_back(i);
  std::vector<Child> running;
  const size_t jobs = static_cast<size_t>(std::max(1, o.jobs));
  const Clock::time_point run_start = Clock::now();
  while (!pending.empty() || !running.empty()) {
    // A test that needs the device alone starts when nothing runs, and nothing starts beside it.
    auto alone = [&](size_t i) { return (tests[i]->needs & kNeedsDeviceAlone) != 0; };
    while (!pending.empty() && running.size() < jobs &&
           (running.empty() || (!alone(pending.front()) && !alone(running.front().index)))) {
      const size_t i = pending.front();
      pending.pop_front();
      running.push_back(Start(i, *tests[i], o));
    }
    std::vector<pollfd> fds;
    Clock::time_point next = Clock::time_point::max();
    for (const Child& c : running) {
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
      if (c.result_fd >= 0) fds.push_back({c.result_fd, POLLIN, 0});
      next = std::min(next, c.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 1000));
    if (!fds.empty() && poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (size_t k = 0; k < running.size();) {
      Child& c = running[k];
      if (c.out_fd >= 0) Drain(&c.out_fd, &c.out, kOutputKept, &c.head, &c.out_total);
      if (c.result_fd >= 0) Drain(&c.result_fd, &c.result, size_t{16} << 20);
      if (!c.exited && (c.out_fd >= 0 || c.result_fd >= 0) &&
          waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        // It ended, but something it started may hold the pipes: take what is there.
        c.exited = true;
        if (c.out_fd >= 0) Drain(&c.out_fd, &c.out, kOutputKept, &c.head, &c.out_total);
        if (c.result_fd >= 0) Drain(&c.result_fd, &c.result, size_t{16} << 20);
        CloseFd(&c.out_fd);
        CloseFd(&c.result_fd);
      }
      if ((c.out_fd >= 0 || c.result_fd >= 0) && Clock::now() >= c.deadline) {
        kill(-c.pid, SIGKILL);
        kill(c.pid, SIGKILL);
        c.timed_out = true;
        CloseFd(&c.out_fd);  // a grandchild may still hold the pipes open
        CloseFd(&c.result_fd);
      }
      if (c.out_fd < 0 && c.result_fd < 0) {
        TestResult r = Finish(c, *tests[c.index], o);
        r.started = std::chrono::duration<double>(c.start - run_start).count();
        if (done) done(r);
        results[c.index] = std::move(r);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        ++k;
      }
    }
  }
  return results;
}

}  // namespace backplane::conformance
