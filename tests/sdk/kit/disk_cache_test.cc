// SPDX-License-Identifier: Apache-2.0
// backplane/sdk/disk_cache.hpp, the cache helpers every code generator uses (c, opencl, cuda,
// vulkan): where the folder is and when it is refused, the keys, atomic writes, and
// checksummed entries that reject truncated or damaged files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <backplane/sdk/disk_cache.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

namespace fs = std::filesystem;
namespace sdk = backplane::sdk;

// A fresh folder under the test's scratch folder, and the environment restored afterwards.
class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(BACKPLANE_TEST_SCRATCH_DIR) /
           ("disk_cache_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace);
    if (const char* x = std::getenv("XDG_CACHE_HOME")) saved_xdg_ = x;
  }
  void TearDown() override {
    if (saved_xdg_.empty()) {
      unsetenv("XDG_CACHE_HOME");
    } else {
      setenv("XDG_CACHE_HOME", saved_xdg_.c_str(), 1);
    }
    fs::remove_all(dir_);
  }
  // Random bytes, every value 0-255 possible (NUL bytes included).
  static std::string RandomBytes(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xff);
    return s;
  }
  static std::string Read(const fs::path& p) {
    std::string s;
    EXPECT_TRUE(sdk::ReadWholeFile(p.string(), &s)) << p;
    return s;
  }

  fs::path dir_;
  std::string saved_xdg_;
};

TEST_F(DiskCacheTest, FolderIsUnderXdgCacheHomeAndPrivate) {
  setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  const std::string folder = sdk::CacheFolder("foo");
  EXPECT_EQ(folder, (dir_ / "backplane" / "foo").string());
  struct stat st;
  ASSERT_EQ(stat(folder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(sdk::IsPrivateFolder(folder));
}

TEST_F(DiskCacheTest, AFolderOthersCanWriteIsRefusedForAPrivateTemporaryOne) {
  setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  fs::create_directories(dir_ / "backplane" / "foo");
  fs::permissions(dir_ / "backplane" / "foo", fs::perms::all, fs::perm_options::replace);
  const std::string folder = sdk::CacheFolder("foo");
  EXPECT_NE(folder, (dir_ / "backplane" / "foo").string());
  EXPECT_EQ(folder.rfind("/tmp/backplane-foo-", 0), 0u) << folder;
  EXPECT_TRUE(sdk::IsPrivateFolder(folder));
  fs::remove_all(folder);
}

// The folder must pass the same rules as a plugin folder (backplane/file_trust.hpp), on its
// real path and every folder above it: a private folder under a world-writable one, or
// reached through a symlink into one, could be renamed away and replaced by anyone.
TEST_F(DiskCacheTest, AFolderBelowAWorldWritableOneIsRefused) {
  const fs::path open = dir_ / "open";
  fs::create_directories(open / "backplane" / "foo");
  fs::permissions(open / "backplane" / "foo", fs::perms::owner_all, fs::perm_options::replace);
  fs::permissions(open, fs::perms::all, fs::perm_options::replace);
  setenv("XDG_CACHE_HOME", open.c_str(), 1);
  EXPECT_FALSE(sdk::IsPrivateFolder((open / "backplane" / "foo").string()));
  EXPECT_NE(sdk::CacheFolderRefusal((open / "backplane" / "foo").string()).find(open.string()),
            std::string::npos)
      << sdk::CacheFolderRefusal((open / "backplane" / "foo").string());
  const std::string folder = sdk::CacheFolder("foo");
  EXPECT_EQ(folder.rfind("/tmp/backplane-foo-", 0), 0u) << folder;
  fs::remove_all(folder);
}

TEST_F(DiskCacheTest, AFolderReachedThroughASymlinkIsCheckedWhereItReallyIs) {
  const fs::path open = dir_ / "open";
  fs::create_directories(open / "real");
  fs::permissions(open / "real", fs::perms::owner_all, fs::perm_options::replace);
  fs::permissions(open, fs::perms::all, fs::perm_options::replace);
  fs::create_directories(dir_ / "xdg" / "backplane");
  fs::create_directory_symlink(open / "real", dir_ / "xdg" / "backplane" / "foo");
  setenv("XDG_CACHE_HOME", (dir_ / "xdg").c_str(), 1);
  EXPECT_FALSE(sdk::IsPrivateFolder((dir_ / "xdg" / "backplane" / "foo").string()));
  const std::string folder = sdk::CacheFolder("foo");
  EXPECT_EQ(folder.rfind("/tmp/backplane-foo-", 0), 0u) << folder;
  fs::remove_all(folder);
}

TEST_F(DiskCacheTest, AFolderOfAnotherUserIsRefusedEvenForRoot) {
  if (geteuid() != 0)
    GTEST_SKIP() << "giving a folder to another user needs root (CI runs as root)";
  fs::create_directories(dir_ / "backplane" / "foo");
  fs::permissions(dir_ / "backplane" / "foo", fs::perms::owner_all, fs::perm_options::replace);
  ASSERT_EQ(chown((dir_ / "backplane" / "foo").c_str(), 65534, 65534), 0);
  EXPECT_FALSE(sdk::IsPrivateFolder((dir_ / "backplane" / "foo").string()));
  EXPECT_NE(sdk::CacheFolderRefusal((dir_ / "backplane" / "foo").string()).find("user 65534"),
            std::string::npos);
}

TEST_F(DiskCacheTest, KeysDependOnEveryByte) {
  const std::string material = RandomBytes(4096, 1);
  const std::string key = sdk::CacheKey(material);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
  EXPECT_EQ(sdk::CacheKey(material), key);
  for (size_t i : {size_t{0}, size_t{1}, size_t{2047}, size_t{4095}}) {
    std::string changed = material;
    changed[i] = static_cast<char>(changed[i] ^ 1);
    EXPECT_NE(sdk::CacheKey(changed), key) << "byte " << i;
  }
  EXPECT_NE(sdk::CacheKey(material + "x"), key);
}

// A key names files already in users' caches: it stays FNV-1a 64 of the material from the
// standard basis, then from a second one, as 32 hex digits (so existing entries still hit).
TEST_F(DiskCacheTest, KeysAreTheTwoFnv1aHashesOfTheMaterial) {
  const std::string material = RandomBytes(1000, 4);
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : material) h = (h ^ c) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    return std::string(hex);
  };
  EXPECT_EQ(sdk::CacheKey(material), fnv(0xcbf29ce484222325ull) + fnv(0x84222325cbf29ce4ull));
  EXPECT_EQ(sdk::CacheKey(""), "cbf29ce48422232584222325cbf29ce4");
}

TEST_F(DiskCacheTest, AtomicWriteReplacesTheWholeFileAndLeavesNoTemporary) {
  const fs::path p = dir_ / "entry.so";
  const std::string first = RandomBytes(100000, 2);
  const std::string second = RandomBytes(777, 3);
  ASSERT_TRUE(sdk::WriteFileAtomic(p.string(), first));
  EXPECT_EQ(Read(p), first);
  ASSERT_TRUE(sdk::WriteFileAtomic(p.string(), second));
  EXPECT_EQ(Read(p), second);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path(), p);
  }
  EXPECT_EQ(files, 1u);
  // A folder that does not exist: false, nothing created.
  EXPECT_FALSE(sdk::WriteFileAtomic((dir_ / "missing" / "x").string(), first));
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST_F(DiskCacheTest, EntriesRoundTripAndDamageIsDetected) {
  const fs::path p = dir_ / "k.bin";
  const std::string payload = RandomBytes(5000, 4);
  ASSERT_TRUE(sdk::WriteCacheEntry(p.string(), payload));
  std::string got;
  ASSERT_TRUE(sdk::ReadCacheEntry(p.string(), &got));
  EXPECT_EQ(got, payload);

  const std::string whole = Read(p);
  // Every truncation is refused, and so is a flipped byte anywhere (header or payload).
  for (size_t len = 0; len < whole.size(); len += len < 64 ? 1 : 997) {
    ASSERT_TRUE(sdk::WriteFileAtomic(p.string(), whole.substr(0, len)));
    std::string out = "untouched";
    EXPECT_FALSE(sdk::ReadCacheEntry(p.string(), &out)) << "truncated to " << len;
    EXPECT_EQ(out, "untouched");
  }
  for (size_t i :
       {size_t{0}, size_t{5}, size_t{12}, size_t{25}, whole.size() / 2, whole.size() - 1}) {
    std::string damaged = whole;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x20);
    ASSERT_TRUE(sdk::WriteFileAtomic(p.string(), damaged));
    EXPECT_FALSE(sdk::ReadCacheEntry(p.string(), &got)) << "byte " << i << " flipped";
  }
  // A raw file that is not an entry, and a missing one.
  ASSERT_TRUE(sdk::WriteFileAtomic(p.string(), payload));
  EXPECT_FALSE(sdk::ReadCacheEntry(p.string(), &got));
  EXPECT_FALSE(sdk::ReadCacheEntry((dir_ / "none").string(), &got));
  // An empty payload is a valid entry.
  ASSERT_TRUE(sdk::WriteCacheEntry(p.string(), ""));
  got = "x";
  EXPECT_TRUE(sdk::ReadCacheEntry(p.string(), &got));
  EXPECT_EQ(got, "");
}

}  // namespace
