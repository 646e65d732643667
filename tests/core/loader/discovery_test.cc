// SPDX-License-Identifier: Apache-2.0
// Discovery from folders the host passes: manifests listed without loading, lazy loading on
// first use of a name, world-writable folders and files refused, and the same library found
// twice loaded once.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "plugins/test_util.h"

namespace {

namespace fs = std::filesystem;
using bptest::Capture;
using bptest::ScratchDir;

// The plugin records whose library lies in `folder`.
std::vector<nlohmann::json> RecordsIn(const std::string& folder) {
  std::vector<nlohmann::json> out;
  const std::string canon = fs::canonical(folder).string();
  const nlohmann::json list = bptest::PluginList();
  for (const auto& p : list["plugins"]) {
    const std::string lib = p["library"].is_string() ? p["library"].get<std::string>() : "";
    const std::string manifest = p["manifest"].is_string() ? p["manifest"].get<std::string>() : "";
    if (lib.rfind(canon + "/", 0) == 0 || manifest.rfind(folder + "/", 0) == 0 ||
        manifest.rfind(canon + "/", 0) == 0) {
      out.push_back(p);
    }
  }
  return out;
}

TEST(Discovery, ListsPluginsWithoutLoadingThem) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  const auto hello = bptest::PluginRecords("hello");
  ASSERT_EQ(hello.size(), 1u) << bptest::PluginList().dump(2);
  EXPECT_EQ(hello[0]["state"], "discovered");
  EXPECT_EQ(hello[0]["provides"], nlohmann::json::array({"testing.hello"}));
  const auto fake = bptest::PluginRecords("simaccel_testing");
  ASSERT_EQ(fake.size(), 1u);
  EXPECT_EQ(fake[0]["state"], "discovered");
  EXPECT_EQ(fake[0]["device_types"], nlohmann::json::array({"simaccel", "simaccel_host"}));
  // Declared names are listed before their plugin is loaded.
  const auto names = backplane::Registry::List();
  EXPECT_NE(std::find(names.begin(), names.end(), "testing.hello"), names.end());
  // The folder heads the search path, ahead of the build tree's.
  const auto path = bptest::PluginList()["search_path"];
  ASSERT_GE(path.size(), 1u);
  EXPECT_EQ(path[0]["path"], bptest::TestPluginDir());
}

TEST(Discovery, APluginLoadsOnFirstUseOfItsName) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  ASSERT_EQ(bptest::PluginRecords("hello").at(0)["state"], "discovered");
  bp_object_t* f = nullptr;
  ASSERT_TRUE(Capture(bp_registry_get("testing.hello", &f)).ok());
  backplane::Function hello(backplane::ObjectRef::Adopt(f));
  EXPECT_EQ(hello().AsString(), "hello, world");
  EXPECT_EQ(hello("lazy").AsString(), "hello, lazy");
  EXPECT_EQ(bptest::PluginRecords("hello").at(0)["state"], "loaded");
  // Nothing else was loaded on the way, in particular no broken plugin.
  for (const char* other :
       {"simaccel_testing", "broken_no_entry", "broken_init_throws", "broken_undefined_symbol"}) {
    EXPECT_EQ(bptest::PluginRecords(other).at(0)["state"], "discovered") << other;
  }
}

TEST(Discovery, ADeviceTypeLoadsItsPluginOnFirstUse) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  // The manifest's device type is known before the plugin loads...
  const int32_t type = backplane::DeviceTypeFromName("simaccel");
  EXPECT_EQ(bptest::PluginRecords("simaccel_testing").at(0)["state"], "discovered");
  // ...and the first use of the device loads it, keeping that id.
  const auto ref = bptest::RandomFloats(64, 11);
  auto t = backplane::Tensor::Empty(
      {64}, backplane::Float32(), backplane::Device(DLDevice{static_cast<DLDeviceType>(type), 1}));
  t.CopyFrom(ref);
  EXPECT_EQ(t.ToVector<float>(), ref);
  EXPECT_EQ(bptest::PluginRecords("simaccel_testing").at(0)["state"], "loaded");
  EXPECT_EQ(backplane::DeviceTypeFromName("simaccel"), type);
}

TEST(Discovery, AMissingNameSaysWhatWasLookedAt) {
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  bp_object_t* f = nullptr;
  const auto s = Capture(bp_registry_get("testing.nobody_provides_this", &f));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_NE(s.message.find("testing.nobody_provides_this"), std::string::npos) << s;
}

TEST(Discovery, AWorldWritableFolderIsRefused) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const auto json = bptest::PluginList();
  EXPECT_NE(json.dump().find("world-writable"), std::string::npos) << json.dump(2);
  for (const auto& rec : RecordsIn(dir.path())) {
    EXPECT_NE(rec["state"], "loaded") << rec.dump(2);
    EXPECT_NE(rec["reason"].get<std::string>().find("world-writable"), std::string::npos);
  }
  EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("testing.hello")))
      << "code from a world-writable folder was loaded";
  // The explicit path is refused as well.
  const auto s = Capture(bp_plugin_load((dir.path() + "/libbackplane_hello.so").c_str()));
  EXPECT_NE(s.kind, BP_OK);
  EXPECT_NE(s.message.find("world-writable"), std::string::npos) << s;
}

TEST(Discovery, AWorldWritableLibraryIsRefused) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string lib = dir.path() + "/libbackplane_hello.so";
  ASSERT_EQ(chmod(lib.c_str(), 0757), 0);
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const auto records = RecordsIn(dir.path());
  ASSERT_EQ(records.size(), 1u) << bptest::PluginList().dump(2);
  EXPECT_EQ(records[0]["state"], "skipped");
  EXPECT_NE(records[0]["reason"].get<std::string>().find("world-writable"), std::string::npos)
      << records[0].dump(2);
  EXPECT_NE(records[0]["reason"].get<std::string>().find(lib), std::string::npos)
      << "the reason should name the file";
  EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("testing.hello")));
  const auto s = Capture(bp_plugin_load(lib.c_str()));
  EXPECT_NE(s.kind, BP_OK);
  EXPECT_NE(s.message.find("world-writable"), std::string::npos) << s;
}

TEST(Discovery, TheSameLibraryFoundTwiceLoadsOnce) {
  ScratchDir a, b;
  bptest::CopyTestPlugin("hello", a.path());
  // b holds symlinks to a's files: the same library under another path.
  fs::create_symlink(a.path() + "/libbackplane_hello.so", b.path() + "/libbackplane_hello.so");
  fs::create_symlink(a.path() + "/hello.bpplugin.json", b.path() + "/hello.bpplugin.json");
  ASSERT_TRUE(Capture(bp_plugin_path_add(a.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugin_path_add(b.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugin_path_add(a.path().c_str())).ok());  // and a twice
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const auto records = bptest::PluginRecords("hello");
  int loaded = 0;
  for (const auto& r : records) {
    if (r["state"] == "loaded") ++loaded;
    if (r["reason"].is_string()) {
      EXPECT_EQ(r["reason"].get<std::string>().find("already registered"), std::string::npos)
          << "the second copy was initialised: " << r.dump(2);
    }
  }
  EXPECT_EQ(loaded, 1) << bptest::PluginList().dump(2);
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world");
  // Loading it by either path again is a no-op, not a failure.
  EXPECT_TRUE(Capture(bp_plugin_load((b.path() + "/libbackplane_hello.so").c_str())).ok());
  EXPECT_TRUE(Capture(bp_plugin_load((a.path() + "/libbackplane_hello.so").c_str())).ok());
  EXPECT_EQ(bptest::PluginRecords("hello").size(), records.size());
}

TEST(Discovery, ARelativeLibraryPathIsRefusedNotResolvedAgainstTheCurrentDirectory) {
  // From inside the folder that holds it, the bare file name used to load the plugin.
  const fs::path saved = fs::current_path();
  fs::current_path(bptest::TestPluginDir());
  for (const char* relative : {"libbackplane_hello.so", "./libbackplane_hello.so"}) {
    const auto s = Capture(bp_plugin_load(relative));
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << relative << ": " << s;
    EXPECT_NE(s.message.find(relative), std::string::npos) << s;
    EXPECT_NE(s.message.find("current directory"), std::string::npos) << s;
  }
  fs::current_path(saved);
  EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("testing.hello")))
      << "a library was loaded from the current directory";
  EXPECT_TRUE(bptest::PluginRecords("hello").empty()) << bptest::PluginList().dump(2);
}

// BACKPLANE_DISABLE_PLUGINS keeps named plugins out of an ordinary host: bp_plugins_load_all
// and bp_plugin_load skip them, so a host survives plugins that would crash it (the crashing/
// test plugins: a SIGSEGV in a static constructor, abort(), exit(3), a hang).
TEST(Discovery, DisabledPluginsAreNeitherLoadedNorInitialised) {
  ASSERT_EQ(
      setenv("BACKPLANE_DISABLE_PLUGINS",
             "crashing_ctor_segv, crashing_init_abort,crashing_init_exit,crashing_init_hang", 1),
      0);
  const std::string folder = bptest::TestPluginDir() + "/crashing";
  ASSERT_TRUE(Capture(bp_plugin_path_add(folder.c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  for (const char* name :
       {"crashing_ctor_segv", "crashing_init_abort", "crashing_init_exit", "crashing_init_hang"}) {
    const auto records = bptest::PluginRecords(name);
    ASSERT_EQ(records.size(), 1u) << name;
    EXPECT_EQ(records[0]["state"], "skipped") << records[0].dump(2);
    EXPECT_NE(records[0]["reason"].get<std::string>().find("BACKPLANE_DISABLE_PLUGINS"),
              std::string::npos)
        << records[0].dump(2);
  }
  const std::string lib = folder + "/libbackplane_crashing_ctor_segv.so";
  const auto s = Capture(bp_plugin_load(lib.c_str()));
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_NE(s.message.find("disabled by BACKPLANE_DISABLE_PLUGINS"), std::string::npos) << s;
  EXPECT_EQ(bptest::PluginRecords("cpu").at(0)["state"], "loaded");
  unsetenv("BACKPLANE_DISABLE_PLUGINS");
}

// Writes a manifest into `folder` as `file`.
void WriteManifest(const std::string& folder, const std::string& file, const nlohmann::json& m) {
  std::ofstream(folder + "/" + file) << m.dump(2);
}

nlohmann::json ManifestOf(const std::string& name, const std::string& library,
                          const std::vector<std::string>& device_types) {
  return {{"manifest_version", 1},     {"name", name},
          {"library", library},        {"abi_version", "1.0"},
          {"provides", {"x." + name}}, {"device_types", device_types}};
}

TEST(Discovery, ABrokenManifestNamingAGoodPluginsLibraryDoesNotHideIt) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  // Read before hello's manifest, names hello's library, and is skipped for its bad type.
  WriteManifest(dir.path(), "aaa_broken.bpplugin.json",
                ManifestOf("aaa_broken", "libbackplane_hello.so", {"Not A Type Name"}));
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  const auto broken = bptest::PluginRecords("aaa_broken");
  ASSERT_EQ(broken.size(), 1u) << bptest::PluginList().dump(2);
  EXPECT_EQ(broken[0]["state"], "skipped");
  const auto hello = bptest::PluginRecords("hello");
  ASSERT_EQ(hello.size(), 1u) << "the good plugin vanished: " << bptest::PluginList().dump(2);
  EXPECT_EQ(hello[0]["state"], "discovered");
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world");
}

TEST(Discovery, ASkippedManifestLeavesNoDeviceTypeBehind) {
  ScratchDir dir;
  bptest::CopyTestPlugin("simaccel_testing", dir.path());
  fs::copy_file(bptest::TestPluginLibrary("hello"), dir.path() + "/libbackplane_many.so");
  // More device types than there are ids: skipped, and read before simaccel's manifest.
  std::vector<std::string> many;
  for (int i = 0; i < 300; ++i) many.push_back("many_t" + std::to_string(i));
  WriteManifest(dir.path(), "aaa_many.bpplugin.json",
                ManifestOf("many", "libbackplane_many.so", many));
  // A valid type, then an invalid one: skipped too.
  WriteManifest(dir.path(), "aab_mixed.bpplugin.json",
                ManifestOf("mixed", "libbackplane_many.so", {"mixed_ok", "Not Valid"}));
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  for (const char* name : {"many", "mixed"}) {
    const auto rec = bptest::PluginRecords(name);
    ASSERT_EQ(rec.size(), 1u) << name;
    EXPECT_EQ(rec[0]["state"], "skipped") << rec[0].dump(2);
  }
  EXPECT_NE(
      bptest::PluginRecords("many")[0]["reason"].get<std::string>().find("none was registered"),
      std::string::npos)
      << bptest::PluginRecords("many")[0].dump(2);
  int32_t id = 0;
  for (const char* type : {"many_t0", "many_t100", "mixed_ok"}) {
    const auto s = Capture(bp_device_type_from_name(type, &id));
    EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << type << " was left registered";
  }
  // The good plugin after them still gets its device type, and its device works.
  const auto fake = bptest::PluginRecords("simaccel_testing");
  ASSERT_EQ(fake.size(), 1u);
  EXPECT_EQ(fake[0]["state"], "discovered") << fake[0].dump(2);
  const auto ref = bptest::RandomFloats(16, 5);
  auto t = backplane::Tensor::Empty({16}, backplane::Float32(), backplane::Device("simaccel", 0));
  t.CopyFrom(ref);
  EXPECT_EQ(t.ToVector<float>(), ref);
}

// BACKPLANE_PLUGIN_FILES replaces the search: exactly these plugins (a manifest, a library),
// no folder, not even those the host adds or the install's (the conformance kit uses it).
TEST(Discovery, PluginFilesReplaceTheWholeSearch) {
  const std::string files = bptest::TestPluginManifest("hello") + ":" +
                            bptest::TestPluginLibrary("simaccel_testing") + ":relative/libx.so";
  ASSERT_EQ(setenv("BACKPLANE_PLUGIN_FILES", files.c_str(), 1), 0);
  ASSERT_TRUE(Capture(bp_plugin_path_add(bptest::TestPluginDir().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  const nlohmann::json list = bptest::PluginList();
  std::vector<std::string> names;
  for (const auto& p : list["plugins"]) names.push_back(p["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"hello", "simaccel_testing"})) << list.dump(2);
  for (const auto& f : list["search_path"]) {
    EXPECT_EQ(f["origin"], "BACKPLANE_PLUGIN_FILES") << f.dump();
  }
  EXPECT_EQ(list["search_path"].size(), 3u) << list.dump(2);
  EXPECT_EQ(list["search_path"][2]["status"].get<std::string>().rfind("ignored", 0), 0u);
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world");
  EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("device_api.cpu")))
      << "the install's cpu plugin was found although BACKPLANE_PLUGIN_FILES is set";
  unsetenv("BACKPLANE_PLUGIN_FILES");
}

TEST(Discovery, ARelativeFolderIsRefused) {
  const auto s = Capture(bp_plugin_path_add("relative/plugins"));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("relative/plugins"), std::string::npos) << s;
}

}  // namespace
