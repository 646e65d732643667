// SPDX-License-Identifier: Apache-2.0
#include "isolate.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/sdk/child_process.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

extern char** environ;

namespace backplane {
namespace conformance {

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

// A test running in a child: `self --run-one NAME --result-fd 3 ARGS...`, in its own process
// group (so a timeout kills whatever it started), output to one pipe, results to fd 3, no
// stdin, killed when this process dies.
struct Child {
  size_t index = 0;  // into the tests
  sdk::ChildProcess process;
};

Child Start(size_t index, const TestCase& test, const IsolationOptions& o) {
  sdk::ChildOptions co;
  co.argv = {o.self, "--run-one", test.name, "--result-fd", std::to_string(kResultFd)};
  co.argv.insert(co.argv.end(), o.args.begin(), o.args.end());
  co.env = sdk::EnvironmentWith(o.env);  // this one's, with o.env set over it
  co.result_fd = kResultFd;
  co.parent_death_signal = SIGKILL;  // a killed parent takes its tests with it
  co.timeout_s = o.timeout_s;
  co.output_tail = kOutputKept;
  Child c{index, sdk::ChildProcess(co)};
  if (!c.process.started()) throw std::runtime_error(c.process.start_error());
  Track(c.process.pid(), true);
  return c;
}

// What a result carries of the output: all of it when short, else its head and its tail.
std::string Excerpt(const std::string& head, const std::string& tail, size_t total) {
  if (total <= kOutputReported) return tail;
  return head.substr(0, 1024) + "\n...\n" + tail.substr(tail.size() - (kOutputReported - 1024));
}

// The result of a test whose process is done (reaped, and whatever its group left killed).
TestResult Finish(const sdk::ChildProcess& c, const TestCase& test, const IsolationOptions& o) {
  const int status = c.status();
  Track(c.pid(), false);
  TestResult r;
  r.name = test.name;
  r.seconds = std::chrono::duration<double>(Clock::now() - c.start_time()).count();
  r.output = Excerpt(c.output_head(), c.output(), c.output_total());
  if (c.timed_out()) {
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
  const std::string& result = c.result();
  size_t end = result.size();
  while (end > 0 && (j.is_null() || j.is_discarded())) {
    const size_t start = result.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    j = nlohmann::json::parse(result.substr(from, end - from), nullptr, false);
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
    if (c.output().find("Sanitizer") != std::string::npos ||
        c.output_head().find("Sanitizer") != std::string::npos) {
      r.message += " (its output holds a sanitizer's report)";
    }
  }
  return r;
}

}  // namespace

std::string SignalText(int sig) { return sdk::SignalText(sig); }

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
    int timeout_ms = 1000;
    for (const Child& c : running) {
      c.process.AddPollFds(&fds);
      timeout_ms = std::min(timeout_ms, c.process.PollTimeoutMs(1000));
    }
    if (!fds.empty() && poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (size_t k = 0; k < running.size();) {
      Child& c = running[k];
      if (c.process.Pump()) {
        TestResult r = Finish(c.process, *tests[c.index], o);
        r.started = std::chrono::duration<double>(c.process.start_time() - run_start).count();
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

}  // namespace conformance
}  // namespace backplane
