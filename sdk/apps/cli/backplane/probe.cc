// SPDX-License-Identifier: Apache-2.0
#include "probe.h"

#include <backplane/c_api.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/sdk/child_process.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace backplane {
namespace cli {
namespace {

constexpr int kResultFd = 3;
constexpr size_t kMaxRunning = 8;
constexpr size_t kOutputKept = 8192;
constexpr const char kReturned[] = "returned\n";

using sdk::ChildProcess;
using sdk::SelfPath;
using sdk::SignalText;

// A probe of one library: `self info --probe-one LIBRARY`, in its own process group (so a
// hang is stopped with whatever it started), results on fd 3.
struct Child {
  size_t index = 0;
  ChildProcess process;
};

Child Start(size_t index, const std::string& self, const std::string& library,
            const std::vector<std::string>& plugin_paths, double timeout_s) {
  sdk::ChildOptions o;
  o.argv = {self, "info", "--probe-one", library};
  for (const std::string& p : plugin_paths) o.argv.insert(o.argv.end(), {"--plugin-path", p});
  o.result_fd = kResultFd;
  o.parent_death_signal = SIGKILL;
  o.timeout_s = timeout_s;
  o.output_tail = kOutputKept;
  o.result_keep = kOutputKept;
  Child c{index, ChildProcess(o)};
  if (!c.process.started()) throw std::runtime_error(c.process.start_error());
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

std::string Failure(const ChildProcess& c, double timeout_s) {
  const std::string where = "while loading, in a static constructor or in bp_plugin_init";
  std::string text;
  if (c.timed_out()) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", timeout_s);
    text =
        std::string("hung for more than ") + seconds + " s " + where + " (its process was stopped)";
  } else if (WIFSIGNALED(c.status())) {
    text = "crashed with " + SignalText(WTERMSIG(c.status())) + " " + where;
  } else {
    const int code = WIFEXITED(c.status()) ? WEXITSTATUS(c.status()) : -1;
    text = code == 127 ? "could not be probed: the probe process did not start"
                       : "ended the process " + where + " (exit code " + std::to_string(code) +
                             ": it called exit() or a sanitizer stopped it)";
  }
  const std::string words = LastWords(c.output());
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
    for (const Child& c : running) c.process.AddPollFds(&fds);
    // Wake for output, an exit (checked at least every 50 ms) or the nearest deadline.
    int wait_ms = 50;
    for (const Child& c : running) wait_ms = std::min(wait_ms, c.process.PollTimeoutMs(50));
    if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      throw std::runtime_error("poll: " + std::string(std::strerror(errno)));
    }
    for (Child& c : running) {
      if (!c.process.Pump()) continue;
      ProbeResult& r = results[c.index];
      r.survived =
          !c.process.timed_out() && c.process.result().find(kReturned) != std::string::npos;
      if (!r.survived) r.failure = Failure(c.process, timeout_s);
    }
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [](const Child& c) { return c.process.done(); }),
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

}  // namespace cli
}  // namespace backplane
