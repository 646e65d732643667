// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the plugin tests: locating and loading test plugins, capturing a C
// status with its message, random data, and the plugin list as JSON.
//
// The tests assume a fresh process per test (ctest runs each gtest case on its own through
// gtest_discover_tests): the core discovers plugins once per process and loaded plugins stay.
#ifndef BACKPLANE_TESTS_PLUGINS_TEST_UTIL_H_
#define BACKPLANE_TESTS_PLUGINS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <backplane/backplane.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

// Tests that run outside the build tree too (the cuda tests, from the GPU bundle) find their
// paths beside the program instead of using the build tree's, compiled in.
#ifdef BACKPLANE_TEST_PATHS_AT_RUN_TIME
#include "run_time_paths.h"
#endif

namespace bptest {

// A status with the message the core left in the error slot.
struct Status {
  bp_status_t kind = BP_OK;
  std::string message;
  bool ok() const { return kind == BP_OK; }
};

// Reads the error slot after a call that returned `status`.
inline Status Capture(bp_status_t status) {
  Status s;
  s.kind = status;
  if (status != BP_OK) {
    const char* msg = nullptr;
    bp_error_last(nullptr, &msg);
    s.message = msg != nullptr ? msg : "";
  }
  return s;
}

// Runs `body` (a call through the C++ host API), turning a backplane::Error it throws into a
// status and message: BP_OK when it throws nothing.
template <typename Body>
Status CaptureError(Body body) {
  Status s;
  try {
    body();
  } catch (const backplane::Error& e) {
    s.kind = e.kind();
    s.message = e.what();
  }
  return s;
}

inline std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << bp_error_kind_name(s.kind) << " (" << s.kind << "): " << s.message;
}

inline std::string TestPluginDir() { return BACKPLANE_TEST_PLUGIN_DIR; }
inline std::string TestPluginLibrary(const std::string& name) {
  return TestPluginDir() + "/libbackplane_" + name + ".so";
}
inline std::string TestPluginManifest(const std::string& name) {
  return TestPluginDir() + "/" + name + ".bpplugin.json";
}

// Loads a plugin from the test-plugin folder, failing the test if it does not load.
inline void LoadTestPlugin(const std::string& name) {
  const Status s = Capture(bp_plugin_load(TestPluginLibrary(name).c_str()));
  ASSERT_TRUE(s.ok()) << "loading test plugin " << name << ": " << s;
}

// bp_plugins_list as JSON.
inline nlohmann::json PluginList() {
  bp_object_t* out = nullptr;
  backplane::Check(bp_plugins_list(&out));
  backplane::ObjectRef ref = backplane::ObjectRef::Adopt(out);
  return nlohmann::json::parse(backplane::GetString(ref.get()));
}

// The plugin records named `name`.
inline std::vector<nlohmann::json> PluginRecords(const std::string& name) {
  std::vector<nlohmann::json> out;
  const nlohmann::json list = PluginList();
  for (const auto& p : list["plugins"]) {
    if (p["name"] == name) out.push_back(p);
  }
  return out;
}

inline std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(dist(rng));
  return v;
}

inline std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A GPU kernel for the event and native-handle tests of the GPU plugins: out = 2x + y over
// [rows, 256], one block a row (exact in float32: 2x is exact, so a fused multiply-add rounds
// as the host's 2 * x + y does).
inline constexpr const char* kScaleAddGpuIr = R"(# backplane-ir 1
func scale_add(rows: int32, x: buffer<float32>[rows, 256], y: buffer<float32>[rows, 256], out: buffer<float32>[rows, 256]) {
  for bx in thread(blockIdx.x, 0, rows) {
    for tx in thread(threadIdx.x, 0, 256) {
      out[bx, tx] = 2.0 * x[bx, tx] + y[bx, tx]
    }
  }
}
)";

// A 1-D uint8 DLTensor view of `nbytes` at `data` + `byte_offset` on `dev`; `shape` must
// outlive the view.
inline DLTensor ByteView(void* data, DLDevice dev, int64_t* shape, uint64_t byte_offset) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = backplane::UInt8();
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = byte_offset;
  return t;
}

inline DLDevice CpuDevice() { return DLDevice{kDLCPU, 0}; }

// A fresh folder under the build tree's scratch folder (never /tmp, whose mode is 1777),
// removed with the object. (Under BACKPLANE_TEST_PATHS_AT_RUN_TIME: run_time_paths.h.)
class ScratchDir {
 public:
  ScratchDir() {
    std::filesystem::create_directories(BACKPLANE_TEST_SCRATCH_DIR);
    std::string templ = std::string(BACKPLANE_TEST_SCRATCH_DIR) + "/XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + templ);
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Copies a test plugin's library and manifest into `folder`.
inline void CopyTestPlugin(const std::string& name, const std::string& folder) {
  namespace fs = std::filesystem;
  fs::copy_file(TestPluginLibrary(name), folder + "/libbackplane_" + name + ".so",
                fs::copy_options::overwrite_existing);
  fs::copy_file(TestPluginManifest(name), folder + "/" + name + ".bpplugin.json",
                fs::copy_options::overwrite_existing);
}

}  // namespace bptest

#endif  // BACKPLANE_TESTS_PLUGINS_TEST_UTIL_H_
