// SPDX-License-Identifier: Apache-2.0
// BACKPLANE_PLUGIN_PATH: read once, at the first discovery, so this test sets it before
// anything touches the core and lives in an executable of its own.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "plugins/test_util.h"

namespace {

using bptest::Capture;

TEST(PluginPathEnv, IsSearchedAfterHostFoldersAndIgnoresRelativeEntries) {
  bptest::ScratchDir host_dir;
  const std::string value = "relative/dir:" + bptest::TestPluginDir() + ":/no/such/folder";
  ASSERT_EQ(setenv("BACKPLANE_PLUGIN_PATH", value.c_str(), 1), 0);
  ASSERT_TRUE(Capture(bp_plugin_path_add(host_dir.path().c_str())).ok());

  // First use: discovery runs and finds hello through the environment.
  EXPECT_EQ(backplane::Registry::Get("testing.hello")("env").AsString(), "hello, env");

  const auto path = bptest::PluginList()["search_path"];
  std::vector<std::string> order;
  for (const auto& entry : path) order.push_back(entry["path"].get<std::string>());
  auto pos = [&](const std::string& p) {
    return std::find(order.begin(), order.end(), p) - order.begin();
  };
  ASSERT_LT(pos(host_dir.path()), static_cast<long>(order.size())) << path.dump(2);
  ASSERT_LT(pos(bptest::TestPluginDir()), static_cast<long>(order.size())) << path.dump(2);
  ASSERT_LT(pos(BACKPLANE_PLUGIN_DIR), static_cast<long>(order.size())) << path.dump(2);
  EXPECT_LT(pos(host_dir.path()), pos(bptest::TestPluginDir()))
      << "host folders come before BACKPLANE_PLUGIN_PATH";
  EXPECT_LT(pos(bptest::TestPluginDir()), pos(BACKPLANE_PLUGIN_DIR))
      << "BACKPLANE_PLUGIN_PATH comes before the build tree";
  // The relative entry is never searched (its listed status says so, if listed at all).
  for (const auto& entry : path) {
    if (entry["path"] == "relative/dir") {
      EXPECT_EQ(entry["status"].get<std::string>().rfind("ignored", 0), 0u) << entry.dump();
    }
  }
  // The cpu plugin from the build tree still works.
  auto t = backplane::Tensor::Empty({3}, backplane::Float32(), backplane::Device("cpu", 0));
  t.CopyFrom(std::vector<float>{1.5f, -2.0f, 3.25f});
  EXPECT_EQ(t.ToVector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

}  // namespace
