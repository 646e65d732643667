// SPDX-License-Identifier: Apache-2.0
// What the loader checks in the files themselves before it reads or loads them: a library
// whose segments reach past the end of the file (a truncated copy of a real plugin) is
// refused instead of killing the host with SIGBUS inside dlopen.
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "../test_util.h"

namespace {

namespace fs = std::filesystem;
using bptest::Capture;
using bptest::ScratchDir;

// Where the last segment of the ELF64 library at `path` ends in the file.
uintmax_t SegmentsEnd(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  in.read(reinterpret_cast<char*>(&eh), sizeof(eh));
  uintmax_t end = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * sizeof(ph)));
    in.read(reinterpret_cast<char*>(&ph), sizeof(ph));
    end = std::max<uintmax_t>(end, ph.p_offset + ph.p_filesz);
  }
  return end;
}

// A copy of the hello plugin in `dir`, its library cut to `size` bytes.
std::string TruncatedHello(const ScratchDir& dir, uintmax_t size) {
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string lib = dir.path() + "/libbackplane_hello.so";
  fs::resize_file(lib, size);
  return lib;
}

TEST(LoaderFiles, ATruncatedLibraryIsRefusedInsteadOfCrashingTheHost) {
  const uintmax_t end = SegmentsEnd(bptest::TestPluginLibrary("hello"));
  ASSERT_GT(end, 12288u);
  // Cut inside the segments: the headers are there, the data segment and .dynamic are not
  // (or, one byte short, only the end of the last segment is missing).
  for (const uintmax_t size : {uintmax_t{12288}, end / 2, end - 1}) {
    SCOPED_TRACE("cut to " + std::to_string(size) + " bytes; its segments end at " +
                 std::to_string(end));
    ScratchDir dir;
    const std::string lib = TruncatedHello(dir, size);
    const auto s = Capture(bp_plugin_load(lib.c_str()));
    EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
    EXPECT_NE(s.message.find("truncated or damaged"), std::string::npos) << s;
    EXPECT_NE(s.message.find("past the end of the file (" + std::to_string(size) + " bytes)"),
              std::string::npos)
        << s;
    EXPECT_FALSE(static_cast<bool>(backplane::Registry::TryGet("testing.hello")));
  }
}

TEST(LoaderFiles, ATruncatedLibraryFoundByDiscoveryIsSkippedWithItsReason) {
  ScratchDir dir;
  const std::string lib = TruncatedHello(dir, 12288);
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_load_all()).ok());
  const auto records = bptest::PluginRecords("hello");
  ASSERT_EQ(records.size(), 1u) << bptest::PluginList().dump(2);
  EXPECT_EQ(records[0]["state"], "skipped");
  EXPECT_NE(records[0]["reason"].get<std::string>().find("truncated"), std::string::npos)
      << records[0].dump(2);
  // The first use of its name says why it is not there; the host goes on.
  bp_object_t* f = nullptr;
  const auto s = Capture(bp_registry_get("testing.hello", &f));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  EXPECT_NE(s.message.find("truncated"), std::string::npos) << s;
  auto t = backplane::Tensor::Empty({4}, backplane::Float32(), backplane::Device("cpu", 0));
  t.CopyFrom(std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(t.ToVector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(LoaderFiles, AFileThatIsNotASharedLibraryIsRefusedWithWhatItIs) {
  ScratchDir dir;
  const std::string lib = dir.path() + "/libbackplane_text.so";
  {
    std::ofstream out(lib);
    out << "not an ELF file at all, but long enough to hold an ELF header's 64 bytes ....\n";
  }
  const auto s = Capture(bp_plugin_load(lib.c_str()));
  EXPECT_EQ(s.kind, BP_ERR_PLUGIN) << s;
  EXPECT_NE(s.message.find("not an ELF shared library"), std::string::npos) << s;
}

}  // namespace
