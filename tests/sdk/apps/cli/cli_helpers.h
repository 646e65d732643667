// SPDX-License-Identifier: Apache-2.0
// What the CLI tests share: running `backplane` and `backplane-conformance` with
// a private compile cache and an 80-column "terminal", a scratch folder per test, and the
// reference kernel files of the build tree.
#ifndef BACKPLANE_TESTS_TOOLS_CLI_HELPERS_H_
#define BACKPLANE_TESTS_TOOLS_CLI_HELPERS_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_CONFORMANCE_PATH
#error "BACKPLANE_CONFORMANCE_PATH must name the built backplane-conformance executable"
#endif
#ifndef BACKPLANE_TEST_SCRATCH_DIR
#error "BACKPLANE_TEST_SCRATCH_DIR must name a scratch folder"
#endif

namespace backplane {
namespace clitest {

namespace sp = backplane::subprocess;
namespace fs = std::filesystem;

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The reference kernel file `name` of the build tree (it mirrors the install).
inline std::string KernelFile(const std::string& name) {
  return (fs::path(BACKPLANE_CLI_PATH).parent_path().parent_path() / "share" / "backplane" /
          "kernels" / name)
      .string();
}

// The lines of `text` longer than `width` columns (UTF-8 code points), for messages.
inline std::string LinesWiderThan(const std::string& text, size_t width) {
  std::string wide;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    size_t columns = 0;
    for (size_t i = start; i < end; ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++columns;
    }
    if (columns > width) wide += text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return wide;
}

// A test with a scratch folder of its own; runs the tools with COLUMNS=80, no
// BACKPLANE_PLUGIN_PATH, and a compile cache in the scratch folder.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(BACKPLANE_TEST_SCRATCH_DIR);
    dir_ =
        fs::path(BACKPLANE_TEST_SCRATCH_DIR) /
        (std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
         "." + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  sp::Result Run(const std::string& program, const std::vector<std::string>& args,
                 const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<std::string> argv = {program};
    argv.insert(argv.end(), args.begin(), args.end());
    sp::Options options;
    options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
    options.set_env = {{"XDG_CACHE_HOME", (dir_ / "cache").string()}, {"COLUMNS", "80"}};
    options.set_env.insert(options.set_env.end(), env.begin(), env.end());
    options.timeout_s = 600;
    return sp::Run(argv, options);
  }
  sp::Result Cli(const std::vector<std::string>& args,
                 const std::vector<std::pair<std::string, std::string>>& env = {}) {
    return Run(BACKPLANE_CLI_PATH, args, env);
  }
  sp::Result Conformance(const std::vector<std::string>& args) {
    return Run(BACKPLANE_CONFORMANCE_PATH, args);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Builds `func` of kernel file `file` for `target` into `module` (a path in the scratch
  // folder); false (with the tool's output in the failure) when it cannot.
  bool BuildModule(const std::string& file, const std::string& target, const std::string& func,
                   const std::string& module, std::string* why = nullptr) {
    sp::Result b = Cli({"build", KernelFile(file), "-t", target, "-f", func, "-o", Path(module)});
    if (why != nullptr) *why = b.err;
    return b.exit_code == 0;
  }

  fs::path dir_;
};

}  // namespace clitest
}  // namespace backplane

#endif  // BACKPLANE_TESTS_TOOLS_CLI_HELPERS_H_
