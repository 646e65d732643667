// SPDX-License-Identifier: Apache-2.0
// The one rule set for files that hold plugins (backplane/file_trust.hpp), applied to the
// REAL path of every search folder, manifest and library and to every folder above it:
// a symlink into a world-writable folder, a world-writable folder above the plugin folder,
// group-writable files and files of another user are refused, by discovery and by
// bp_plugin_load alike.
//
// The tests run as root in CI. The rules read owners and mode bits, not what the caller may
// access, so they mean the same as root: a file chown'ed to another (non-root) user is
// refused even though root could read and write it. Giving a file away needs root; as
// another user those tests skip, saying so.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "plugins/test_util.h"

namespace {

namespace fs = std::filesystem;
using bptest::Capture;
using bptest::ScratchDir;

// A user id that is neither root nor us: nobody.
constexpr uid_t kOtherUser = 65534;

// Discovers `folder` and loads everything; returns the hello record found there.
nlohmann::json DiscoverHello(const std::string& folder) {
  EXPECT_TRUE(Capture(bp_plugin_path_add(folder.c_str())).ok());
  EXPECT_TRUE(Capture(bp_plugins_load_all()).ok());
  const auto records = bptest::PluginRecords("hello");
  EXPECT_EQ(records.size(), 1u) << bptest::PluginList().dump(2);
  return records.empty() ? nlohmann::json() : records[0];
}

std::string Reason(const nlohmann::json& rec) {
  return rec.is_object() && rec["reason"].is_string() ? rec["reason"].get<std::string>() : "";
}

void ExpectRefused(const nlohmann::json& rec, const std::string& what, const std::string& where) {
  EXPECT_EQ(rec["state"], "skipped") << rec.dump(2);
  EXPECT_NE(Reason(rec).find(what), std::string::npos) << rec.dump(2);
  EXPECT_NE(Reason(rec).find(where), std::string::npos)
      << "the reason should name " << where << ": " << rec.dump(2);
  EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("testing.hello")))
      << "the refused plugin's code was loaded";
}

void ExpectLoadRefused(const std::string& library, const std::string& what) {
  const auto s = Capture(bp_plugin_load(library.c_str()));
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_NE(s.message.find(what), std::string::npos) << s;
  EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("testing.hello")));
}

bool Root() { return geteuid() == 0; }

TEST(Trust, ALibrarySymlinkedIntoAWorldWritableFolderIsRefused) {
  ScratchDir search, elsewhere;
  const std::string open_folder = elsewhere.path() + "/open";
  fs::create_directory(open_folder);
  bptest::CopyTestPlugin("hello", open_folder);
  ASSERT_EQ(chmod(open_folder.c_str(), 0777), 0);
  // The search folder and the manifest in it are sound; the library is a symlink.
  fs::copy_file(open_folder + "/hello.bpplugin.json", search.path() + "/hello.bpplugin.json");
  fs::create_symlink(open_folder + "/libbackplane_hello.so",
                     search.path() + "/libbackplane_hello.so");
  ExpectRefused(DiscoverHello(search.path()), "world-writable", open_folder);
  ExpectLoadRefused(search.path() + "/libbackplane_hello.so", "world-writable");
}

TEST(Trust, AManifestSymlinkedIntoAWorldWritableFolderIsRefused) {
  ScratchDir search, elsewhere;
  const std::string open_folder = elsewhere.path() + "/open";
  fs::create_directory(open_folder);
  bptest::CopyTestPlugin("hello", search.path());
  fs::rename(search.path() + "/hello.bpplugin.json", open_folder + "/hello.bpplugin.json");
  fs::create_symlink(open_folder + "/hello.bpplugin.json", search.path() + "/hello.bpplugin.json");
  ASSERT_EQ(chmod(open_folder.c_str(), 0777), 0);
  const std::string manifest = search.path() + "/hello.bpplugin.json";
  ASSERT_TRUE(Capture(bp_plugin_path_add(search.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const nlohmann::json list = bptest::PluginList();
  nlohmann::json rec;
  for (const auto& p : list["plugins"]) {
    if (p["manifest"] == manifest) rec = p;
  }
  ASSERT_TRUE(rec.is_object()) << list.dump(2);
  ExpectRefused(rec, "world-writable", open_folder);
}

TEST(Trust, AWorldWritableFolderAboveThePluginFolderIsRefused) {
  ScratchDir top;
  const std::string open_folder = top.path() + "/open";
  const std::string plugins = open_folder + "/plugins";
  fs::create_directories(plugins);
  bptest::CopyTestPlugin("hello", plugins);
  ASSERT_EQ(chmod(open_folder.c_str(), 0777), 0);  // anyone may rename plugins/ away
  const nlohmann::json rec = DiscoverHello(plugins);
  ExpectRefused(rec, "world-writable", open_folder);
  ExpectLoadRefused(plugins + "/libbackplane_hello.so", "world-writable");
  // The search path says why the folder was refused.
  const nlohmann::json list = bptest::PluginList();
  bool listed = false;
  for (const auto& f : list["search_path"]) {
    if (f["path"] != plugins) continue;
    listed = true;
    EXPECT_EQ(f["status"].get<std::string>().rfind("refused: ", 0), 0u) << f.dump();
  }
  EXPECT_TRUE(listed) << list.dump(2);
}

TEST(Trust, AGroupWritableLibraryIsRefused) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string lib = dir.path() + "/libbackplane_hello.so";
  ASSERT_EQ(chmod(lib.c_str(), 0775), 0);
  ExpectRefused(DiscoverHello(dir.path()), "group-writable", lib);
  ExpectLoadRefused(lib, "group-writable");
}

TEST(Trust, AGroupWritableManifestIsRefused) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string path = dir.path() + "/hello.bpplugin.json";
  ASSERT_EQ(chmod(path.c_str(), 0664), 0);
  ExpectRefused(DiscoverHello(dir.path()), "group-writable", path);
}

TEST(Trust, AGroupWritablePluginFolderIsRefused) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  ASSERT_EQ(chmod(dir.path().c_str(), 0770), 0);
  ExpectRefused(DiscoverHello(dir.path()), "group-writable", dir.path());
  ExpectLoadRefused(dir.path() + "/libbackplane_hello.so", "group-writable");
}

TEST(Trust, ALibraryOwnedByAnotherUserIsRefusedEvenForRoot) {
  if (!Root()) GTEST_SKIP() << "giving a file to another user needs root (CI runs as root)";
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string lib = dir.path() + "/libbackplane_hello.so";
  ASSERT_EQ(chown(lib.c_str(), kOtherUser, kOtherUser), 0);
  // Root can read and write it, but user 65534 could replace it: refused all the same.
  ExpectRefused(DiscoverHello(dir.path()), "owned by user 65534", lib);
  ExpectLoadRefused(lib, "owned by user 65534");
}

TEST(Trust, AFolderOwnedByAnotherUserIsRefusedEvenForRoot) {
  if (!Root()) GTEST_SKIP() << "giving a folder to another user needs root (CI runs as root)";
  ScratchDir top;
  const std::string theirs = top.path() + "/theirs";
  const std::string plugins = theirs + "/plugins";
  fs::create_directories(plugins);
  bptest::CopyTestPlugin("hello", plugins);
  ASSERT_EQ(chown(theirs.c_str(), kOtherUser, kOtherUser), 0);  // a folder above: mode 0755
  ExpectRefused(DiscoverHello(plugins), "owned by user 65534", theirs);
}

TEST(Trust, TheStickyTmpAboveAPrivateFolderIsAccepted) {
  // /tmp is world-writable with the sticky bit: no one can rename or remove what another
  // user owns there, so a private folder below it holds plugins safely.
  char templ[] = "/tmp/backplane-trust-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  const std::string dir = templ;
  bptest::CopyTestPlugin("hello", dir);
  const nlohmann::json rec = DiscoverHello(dir);
  EXPECT_EQ(rec["state"], "loaded") << rec.dump(2);
  EXPECT_EQ(backplane::Registry::Get("testing.hello")("tmp").AsString(), "hello, tmp");
  fs::remove_all(dir);
}

}  // namespace
