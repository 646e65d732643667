// SPDX-License-Identifier: Apache-2.0
// The paths a test needs, found at run time beside the test program instead of compiled in,
// so that the same binary runs from the build tree and from a copy of it elsewhere: the GPU
// bundle (tests/plugins/cuda/make_gpu_bundle.sh), which is carried to a machine with a GPU
// and must name no path of the machine it was built on. A test target opts in with the
// compile definition BACKPLANE_TEST_PATHS_AT_RUN_TIME (tests/plugins/CMakeLists.txt);
// test_util.h then includes this header, which replaces the path macros the build defines.
//
// The build tree and the bundle share one layout (the install's), so one rule serves both.
// With <root> the folder above the one the program is in:
//   BACKPLANE_PLUGIN_DIR, BACKPLANE_CUDA_PLUGIN_DIR  <root>/lib/backplane/plugins
//   BACKPLANE_TEST_PLUGIN_DIR                       <root>/lib/backplane/test-plugins
//   BACKPLANE_CLI_PATH                              <root>/bin/backplane
//   BACKPLANE_TEST_SCRATCH_DIR                      $BACKPLANE_TEST_SCRATCH_DIR, else
//                                                   <root>/tests/plugins/scratch
//   BACKPLANE_CUDA_PTXAS                            $BACKPLANE_CUDA_PTXAS, else the ptxas of
//                                                   the toolkit found at build time when it
//                                                   exists (BACKPLANE_CUDA_TOOLKIT_PTXAS),
//                                                   else `ptxas` on PATH
// Each expands to an expression of type std::string, so `std::string(MACRO) + "/x"` and
// `std::filesystem::create_directories(MACRO)` read as they did with string literals.
#ifndef BACKPLANE_TESTS_PLUGINS_RUN_TIME_PATHS_H_
#define BACKPLANE_TESTS_PLUGINS_RUN_TIME_PATHS_H_

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace bptest {

// <root>: the folder above the one this program is in (/proc/self/exe, symlinks resolved).
// Throws when /proc is not mounted, naming what it needs.
inline std::string RunTimeRoot() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw std::runtime_error("cannot read /proc/self/exe (" + ec.message() +
                             "): the test finds its plugins and tools beside itself and needs "
                             "/proc mounted");
  }
  return exe.parent_path().parent_path().string();
}

// $name when set and not empty, else `fallback`.
inline std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? std::string(value) : fallback;
}

inline std::string RunTimePluginDir() { return RunTimeRoot() + "/lib/backplane/plugins"; }
inline std::string RunTimeTestPluginDir() { return RunTimeRoot() + "/lib/backplane/test-plugins"; }
inline std::string RunTimeCliPath() { return RunTimeRoot() + "/bin/backplane"; }
inline std::string RunTimeScratchDir() {
  return EnvOr("BACKPLANE_TEST_SCRATCH_DIR", RunTimeRoot() + "/tests/plugins/scratch");
}

// The ptxas the tests run (through the shell, so a bare name is looked up on PATH).
inline std::string RunTimePtxas() {
#ifdef BACKPLANE_CUDA_TOOLKIT_PTXAS
  std::error_code ec;
  const std::string built_with = BACKPLANE_CUDA_TOOLKIT_PTXAS;
  const std::string fallback =
      std::filesystem::is_regular_file(built_with, ec) ? built_with : std::string("ptxas");
#else
  const std::string fallback = "ptxas";
#endif
  return EnvOr("BACKPLANE_CUDA_PTXAS", fallback);
}

}  // namespace bptest

#undef BACKPLANE_PLUGIN_DIR
#undef BACKPLANE_CUDA_PLUGIN_DIR
#undef BACKPLANE_TEST_PLUGIN_DIR
#undef BACKPLANE_CLI_PATH
#undef BACKPLANE_TEST_SCRATCH_DIR
#undef BACKPLANE_CUDA_PTXAS
#define BACKPLANE_PLUGIN_DIR (::bptest::RunTimePluginDir())
#define BACKPLANE_CUDA_PLUGIN_DIR (::bptest::RunTimePluginDir())
#define BACKPLANE_TEST_PLUGIN_DIR (::bptest::RunTimeTestPluginDir())
#define BACKPLANE_CLI_PATH (::bptest::RunTimeCliPath())
#define BACKPLANE_TEST_SCRATCH_DIR (::bptest::RunTimeScratchDir())
#define BACKPLANE_CUDA_PTXAS (::bptest::RunTimePtxas())

#endif  // BACKPLANE_TESTS_PLUGINS_RUN_TIME_PATHS_H_
