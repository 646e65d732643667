// SPDX-License-Identifier: Apache-2.0
// The child-process runner (backplane/sdk/child_process.hpp) on real processes: /bin/sh
// scripts that print, exit, die by a signal, hang with a grandchild, or write to the result
// descriptor, or run on while the test talks to them; both ways of starting (posix_spawn, and
// fork and exec with a death signal).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <backplane/sdk/child_process.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace sdk = backplane::sdk;

sdk::ChildOptions Shell(const std::string& script, bool fork_and_exec) {
  sdk::ChildOptions o;
  o.argv = {"/bin/sh", "-c", script};
  if (fork_and_exec) o.parent_death_signal = SIGKILL;
  return o;
}

class ChildProcessTest : public testing::TestWithParam<bool> {};

INSTANTIATE_TEST_SUITE_P(BothStarts, ChildProcessTest, testing::Values(false, true),
                         [](const auto& param_info) {
                           return param_info.param ? "ForkExec" : "Spawn";
                         });

TEST_P(ChildProcessTest, CollectsStdoutAndStderrAndTheExitCode) {
  sdk::ChildProcess c(
      Shell("echo out; echo err >&2; read x; echo \"stdin:$x\"; exit 3", GetParam()));
  ASSERT_TRUE(c.started()) << c.start_error();
  c.Wait();
  ASSERT_TRUE(c.done());
  EXPECT_FALSE(c.timed_out());
  ASSERT_TRUE(WIFEXITED(c.status()));
  EXPECT_EQ(WEXITSTATUS(c.status()), 3);
  EXPECT_EQ(c.output(), "out\nerr\nstdin:\n");  // stdin is /dev/null
  EXPECT_EQ(c.output_total(), c.output().size());
}

TEST_P(ChildProcessTest, StderrApartAndAResultDescriptor) {
  sdk::ChildOptions o = Shell("echo out; echo err >&2", GetParam());
  o.result_fd = STDERR_FILENO;
  sdk::ChildProcess apart(o);
  apart.Wait();
  EXPECT_EQ(apart.output(), "out\n");
  EXPECT_EQ(apart.result(), "err\n");

  o = Shell("echo '{\"status\":\"passed\"}' >&3; echo printed", GetParam());
  o.result_fd = 3;
  sdk::ChildProcess results(o);
  results.Wait();
  EXPECT_EQ(results.result(), "{\"status\":\"passed\"}\n");
  EXPECT_EQ(results.output(), "printed\n");
}

TEST_P(ChildProcessTest, ASignalIsItsWaitStatus) {
  sdk::ChildProcess c(Shell("kill -SEGV $$", GetParam()));
  c.Wait();
  ASSERT_TRUE(WIFSIGNALED(c.status()));
  EXPECT_EQ(WTERMSIG(c.status()), SIGSEGV);
  EXPECT_EQ(sdk::SignalText(SIGSEGV), "SIGSEGV (Segmentation fault)");
}

// Whether process `pid` still runs (a zombie waiting for its new parent to reap it does not).
bool Runs(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// At the deadline the child and what it started (a grandchild holding the pipe) are killed.
TEST_P(ChildProcessTest, TheDeadlineKillsTheWholeGroup) {
  const fs::path pid_file =
      fs::temp_directory_path() / ("bp_child_test_pid_" + std::to_string(getpid()));
  sdk::ChildOptions o =
      Shell("sleep 600 & echo $! > " + pid_file.string() + "; echo started; wait", GetParam());
  o.timeout_s = 2;  // ample for a loaded machine to start sh and write two lines
  sdk::ChildProcess c(o);
  c.Wait();
  EXPECT_TRUE(c.timed_out());
  ASSERT_TRUE(WIFSIGNALED(c.status()));
  EXPECT_EQ(WTERMSIG(c.status()), SIGKILL);
  EXPECT_EQ(c.output(), "started\n");
  pid_t grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  fs::remove(pid_file);
  ASSERT_GT(grandchild, 0);
  for (int i = 0; i < 500 && Runs(grandchild); ++i) usleep(10000);  // SIGKILL is not instant
  EXPECT_FALSE(Runs(grandchild));
}

// What is kept of a long output: its first bytes, its last, and the count of all.
TEST_P(ChildProcessTest, KeepsTheHeadAndTheTailOfALongOutput) {
  sdk::ChildOptions o =
      Shell("i=0; while [ $i -lt 20000 ]; do echo \"line $i\"; i=$((i+1)); done", GetParam());
  o.output_head = 100;
  o.output_tail = 4096;
  sdk::ChildProcess c(o);
  c.Wait();
  std::string all;
  for (int i = 0; i < 20000; ++i) all += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(c.output_total(), all.size());
  EXPECT_EQ(c.output_head(), all.substr(0, 100));
  ASSERT_GE(c.output().size(), 4096u);
  ASSERT_LE(c.output().size(), all.size());
  EXPECT_EQ(c.output(), all.substr(all.size() - c.output().size()));
}

TEST_P(ChildProcessTest, EnvironmentAndWorkingFolder) {
  setenv("BP_CHILD_TEST_KEPT", "kept", 1);
  setenv("BP_CHILD_TEST_GONE", "gone", 1);
  setenv("BP_CHILD_TEST_SET", "old", 1);
  sdk::ChildOptions o =
      Shell("echo \"$BP_CHILD_TEST_KEPT/${BP_CHILD_TEST_GONE-unset}/$BP_CHILD_TEST_SET\"; pwd",
            GetParam());
  o.env = sdk::EnvironmentWith({{"BP_CHILD_TEST_SET", "new"}}, {"BP_CHILD_TEST_GONE"});
  o.cwd = fs::canonical(fs::temp_directory_path()).string();
  sdk::ChildProcess c(o);
  c.Wait();
  EXPECT_EQ(c.output(), "kept/unset/new\n" + o.cwd + "\n");
}

// A program that is not there: posix_spawn says so at the start; after fork, exec's failure is
// exit code 127.
TEST_P(ChildProcessTest, AMissingProgram) {
  sdk::ChildOptions o;
  o.argv = {"/nonexistent/bp_child_test_program"};
  if (GetParam()) o.parent_death_signal = SIGKILL;
  sdk::ChildProcess c(o);
  if (GetParam()) {
    ASSERT_TRUE(c.started());
    c.Wait();
    ASSERT_TRUE(WIFEXITED(c.status()));
    EXPECT_EQ(WEXITSTATUS(c.status()), 127);
  } else {
    EXPECT_FALSE(c.started());
    EXPECT_EQ(c.start_errno(), ENOENT);
    EXPECT_EQ(c.start_error(), "posix_spawn: No such file or directory");
  }
}

// search_path looks the name up on PATH, as the cpu plugin runs "cc".
TEST_P(ChildProcessTest, ANameIsLookedUpOnPath) {
  sdk::ChildOptions o;
  o.argv = {"sh", "-c", "echo found"};
  o.search_path = true;
  if (GetParam()) o.parent_death_signal = SIGKILL;
  sdk::ChildProcess c(o);
  c.Wait();
  EXPECT_EQ(c.output(), "found\n");
}

// Output to a log file, and a child left running (Detach) for the caller to end.
TEST_P(ChildProcessTest, ALogFileAndADetachedChild) {
  const fs::path log = fs::temp_directory_path() / ("bp_child_test_" + std::to_string(getpid()));
  sdk::ChildOptions o = Shell("echo to-log; echo err-to-log >&2", GetParam());
  o.log_file = log.string();
  sdk::ChildProcess c(o);
  c.Wait();
  ASSERT_TRUE(WIFEXITED(c.status()));
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_EQ(text.str(), "to-log\nerr-to-log\n");

  o = Shell("sleep 600", GetParam());
  o.log_file = log.string();
  pid_t pid = -1;
  {
    sdk::ChildProcess server(o);
    pid = server.Detach();
  }
  EXPECT_EQ(kill(pid, 0), 0);  // still running after the object is gone
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  fs::remove(log);
}

// A child that runs on while the caller talks to it, as the remote tests' servers and clients:
// stdout on the pipe and stderr alone in a file; the caller waits for its "ready", asks it to
// stop with SIGTERM and waits for its exit.
TEST_P(ChildProcessTest, AChildThatRunsOnWhileTheCallerTalksToIt) {
  const fs::path err =
      fs::temp_directory_path() / ("bp_child_test_err_" + std::to_string(getpid()));
  sdk::ChildOptions o = Shell(
      "trap 'echo stopping; exit 7' TERM; echo to-file >&2; echo ready; "
      "while :; do sleep 0.05; done",
      GetParam());
  o.stderr_file = err.string();
  sdk::ChildProcess c(o);
  ASSERT_TRUE(c.started()) << c.start_error();
  ASSERT_TRUE(c.WaitForOutput("ready", 60)) << c.output();
  EXPECT_FALSE(c.done());
  c.Signal(SIGTERM);
  ASSERT_TRUE(c.WaitFor(60));
  EXPECT_TRUE(c.done());
  EXPECT_FALSE(c.timed_out());
  ASSERT_TRUE(WIFEXITED(c.status()));
  EXPECT_EQ(WEXITSTATUS(c.status()), 7);
  EXPECT_EQ(c.output(), "ready\nstopping\n");
  std::stringstream text;
  text << std::ifstream(err).rdbuf();
  EXPECT_EQ(text.str(), "to-file\n");
  fs::remove(err);
}

// WaitFor's time passing leaves the child running (unlike the deadline); WaitForOutput answers
// false when the child ends without printing the text.
TEST_P(ChildProcessTest, WaitingWithALimitDoesNotKill) {
  sdk::ChildProcess sleeper(Shell("echo started; sleep 600", GetParam()));
  ASSERT_TRUE(sleeper.WaitForOutput("started", 60)) << sleeper.output();
  EXPECT_FALSE(sleeper.WaitFor(0.2));
  EXPECT_FALSE(sleeper.done());
  EXPECT_FALSE(sleeper.timed_out());
  sleeper.Kill();
  sleeper.Wait();
  ASSERT_TRUE(WIFSIGNALED(sleeper.status()));
  EXPECT_EQ(WTERMSIG(sleeper.status()), SIGKILL);

  sdk::ChildProcess quiet(Shell("echo something else", GetParam()));
  EXPECT_FALSE(quiet.WaitForOutput("ready", 60));
  EXPECT_TRUE(quiet.done());
  EXPECT_EQ(quiet.output(), "something else\n");
}

// stderr goes to one place: stderr_file with log_file, or with a stderr result pipe, is refused
// at the start with a message that names both.
TEST_P(ChildProcessTest, StderrFileWithAnotherPlaceForStderrIsRefused) {
  sdk::ChildOptions o = Shell("echo never", GetParam());
  o.stderr_file = "/tmp/bp_child_test_never_err";
  o.log_file = "/tmp/bp_child_test_never_log";
  sdk::ChildProcess with_log(o);
  EXPECT_FALSE(with_log.started());
  EXPECT_EQ(with_log.start_errno(), EINVAL);
  EXPECT_EQ(with_log.start_error(),
            "start: stderr_file \"/tmp/bp_child_test_never_err\" cannot be given with log_file "
            "(stderr goes to one place): leave one of them out");
  o.log_file.clear();
  o.result_fd = STDERR_FILENO;
  sdk::ChildProcess with_result(o);
  EXPECT_FALSE(with_result.started());
  EXPECT_NE(with_result.start_error().find("result_fd STDERR_FILENO"), std::string::npos)
      << with_result.start_error();
  EXPECT_FALSE(fs::exists("/tmp/bp_child_test_never_err"));
}

// Many children at once, polled together as the conformance kit and `info` do.
TEST(ChildProcess, ManyChildrenPumpedTogether) {
  std::vector<sdk::ChildProcess> children;
  for (int i = 0; i < 8; ++i) {
    children.emplace_back(
        Shell("echo " + std::to_string(i) + "; exit " + std::to_string(i), i % 2));
  }
  size_t done = 0;
  while (done < children.size()) {
    std::vector<pollfd> fds;
    for (const auto& c : children) c.AddPollFds(&fds);
    if (!fds.empty()) poll(fds.data(), fds.size(), 1000);
    done = 0;
    for (auto& c : children) done += c.Pump();
  }
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(children[i].output(), std::to_string(i) + "\n");
    EXPECT_EQ(WEXITSTATUS(children[i].status()), i);
  }
}

}  // namespace
