// SPDX-License-Identifier: Apache-2.0
// The c code generator in a secure process: a set-user-ID program that
// builds a `c` Target must not run a compiler its caller chose through PATH, BACKPLANE_CC or
// the compiler's own environment (COMPILER_PATH picks the assembler). The test makes that
// process for real: a copy of secure_cc_helper owned by another user (nobody) with the
// set-user-ID bit, run by root, is AT_SECURE. It needs root (to give the copy away) and a
// file system that honours set-user-ID bits; elsewhere it is skipped, saying which.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/test_util.h"
#include "subprocess.h"

namespace {

namespace fs = std::filesystem;
namespace sp = backplane::subprocess;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class SecureProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to make a set-user-ID copy for another user";
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr) GTEST_SKIP() << "no user 'nobody' to own the set-user-ID copy";
    uid_ = nobody->pw_uid;
    // Everything the helper touches as nobody must be reachable by nobody.
    chmod(dir_.path().c_str(), 0755);
    fake_ = dir_.path() + "/fake";
    marks_ = dir_.path() + "/marks";
    fs::create_directories(fake_);
    fs::create_directories(marks_);
    chmod(marks_.c_str(), 0777);
    // Programs a hostile caller puts first: each leaves a mark named after itself and fails.
    for (const char* name : {"cc", "gcc", "clang-999", "as", "ld", "collect2"}) {
      const std::string path = fake_ + "/" + name;
      {
        std::ofstream out(path);
        out << "#!/bin/sh\ntouch " << marks_ << "/" << name << "\nexit 1\n";
      }
      chmod(path.c_str(), 0755);
    }
    helper_ = dir_.path() + "/secure_cc_helper";
    fs::copy_file(BACKPLANE_SECURE_CC_HELPER, helper_);
  }

  void TearDown() override {
    if (uid_ == 0) return;  // skipped before anything ran
    // The helper's compiler cache: a private folder in /tmp that nobody made (no HOME or
    // XDG_CACHE_HOME counts in a secure process).
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/tmp", ec)) {
      struct stat st;
      if (e.path().filename().string().rfind("backplane-c-", 0) == 0 &&
          stat(e.path().c_str(), &st) == 0 && st.st_uid == uid_ && st.st_mtime >= started_) {
        fs::remove_all(e.path(), ec);
      }
    }
  }

  // Runs the helper for `targets` with the hostile environment; `setuid` makes it set-user-ID
  // nobody, otherwise it runs as an ordinary program.
  sp::Result RunHelper(bool setuid, const std::vector<std::string>& targets) {
    if (setuid) {
      EXPECT_EQ(chown(helper_.c_str(), uid_, static_cast<gid_t>(-1)), 0) << std::strerror(errno);
      EXPECT_EQ(chmod(helper_.c_str(), 04755), 0) << std::strerror(errno);
    } else {
      chmod(helper_.c_str(), 0755);
    }
    std::vector<std::string> argv = {helper_, std::string(BACKPLANE_CPU_PLUGIN_LIBRARY)};
    argv.insert(argv.end(), targets.begin(), targets.end());
    sp::Options o;
    o.set_env = {{"PATH", fake_ + ":/usr/bin:/bin"},
                 {"COMPILER_PATH", fake_},
                 {"XDG_CACHE_HOME", dir_.path() + "/cache"}};
    o.unset_env = {"BACKPLANE_PLUGIN_PATH"};
    if (setuid) {
      o.set_env.push_back({"BACKPLANE_CC", fake_ + "/cc"});
    } else {
      o.unset_env.push_back("BACKPLANE_CC");
    }
    return sp::Run(argv, o);
  }

  std::vector<std::string> Marks() const {
    std::vector<std::string> marks;
    for (const auto& e : fs::directory_iterator(marks_)) marks.push_back(e.path().filename());
    return marks;
  }

  bptest::ScratchDir dir_;
  std::string fake_, marks_, helper_;
  uid_t uid_ = 0;
  const time_t started_ = time(nullptr) - 1;
};

// One test, so that no other test of this program runs its helper at the same time (TearDown
// removes the helpers' cache folders).
TEST_F(SecureProcess, TheCompilerIsNeverTheCallersChoice) {
  // The control: an ordinary process takes cc from PATH, so the fake one runs; this is what
  // the set-user-ID run must not do.
  sp::Result plain = RunHelper(false, {"c"});
  EXPECT_TRUE(Contains(plain.out, "secure 0")) << plain.out << plain.err;
  EXPECT_TRUE(Contains(plain.out, "error")) << plain.out;
  EXPECT_EQ(Marks(), std::vector<std::string>{"cc"}) << "the fake cc should have run";
  fs::remove(marks_ + "/cc");

  // Set-user-ID: the configured compiler (or /usr/bin/cc) and /usr/bin/gcc, with a clean
  // environment; PATH, BACKPLANE_CC and COMPILER_PATH (the fake `as`) are ignored. clang-999
  // exists only first on the caller's PATH, so it is not found.
  sp::Result secure = RunHelper(true, {"c", "c -cc=gcc -opt-level=1", "c -cc=clang-999"});
  if (Contains(secure.out, "secure 0")) {
    GTEST_SKIP() << "the kernel did not mark the set-user-ID run AT_SECURE (a nosuid mount?): "
                 << secure.out;
  }
  EXPECT_TRUE(Contains(secure.out, "secure 1")) << secure.out << secure.err;
  EXPECT_TRUE(Contains(secure.out, "ok c\n")) << secure.out << secure.err;
  EXPECT_TRUE(Contains(secure.out, "ok c -cc=gcc -opt-level=1\n")) << secure.out << secure.err;
  EXPECT_TRUE(
      Contains(secure.out, "error " + std::to_string(BP_ERR_NOT_FOUND) + " c -cc=clang-999: "))
      << secure.out << secure.err;
  EXPECT_TRUE(Contains(secure.out, "/usr/bin/clang-999")) << secure.out;
  EXPECT_TRUE(Contains(secure.out, "set-user-ID")) << secure.out;
  EXPECT_EQ(Marks(), std::vector<std::string>{}) << "a program of the caller's ran:\n"
                                                 << secure.out;
}

}  // namespace
