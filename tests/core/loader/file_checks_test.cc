// SPDX-License-Identifier: Apache-2.0
// What the loader checks in the files themselves before it reads or loads them: a library
// whose segments reach past the end of the file (a truncated copy of a real plugin) is
// refused instead of killing the host with SIGBUS inside dlopen; a manifest that is a FIFO
// (which blocked every discovery) or a huge sparse file (which was read whole) is refused
// before a byte of it is read.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/elf_file.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

namespace fs = std::filesystem;
using bptest::Capture;
using bptest::ScratchDir;

// Where the last segment of the ELF64 library at `path` ends in the file (read with the
// reader the loader's check uses).
uintmax_t SegmentsEnd(const std::string& path) {
  const backplane::elf::File file(path);
  Elf64_Ehdr eh{};
  std::vector<Elf64_Phdr> headers;
  EXPECT_TRUE(file.ReadAt(&eh, sizeof(eh), 0) && file.ReadTable(&headers, eh.e_phoff, eh.e_phnum))
      << path;
  uintmax_t end = 0;
  for (const Elf64_Phdr& ph : headers) end = std::max<uintmax_t>(end, ph.p_offset + ph.p_filesz);
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

// The record of the plugin whose manifest is `manifest`.
nlohmann::json RecordOfManifest(const std::string& manifest) {
  const nlohmann::json list = bptest::PluginList();
  for (const auto& p : list["plugins"]) {
    if (p["manifest"] == manifest) return p;
  }
  return nlohmann::json();
}

// Peak resident memory of this process, in bytes.
uintmax_t PeakRss() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uintmax_t>(ru.ru_maxrss) * 1024;
}

TEST(LoaderFiles, AManifestThatIsAFifoIsRefusedWithoutBlocking) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string fifo = dir.path() + "/stuck.bpplugin.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  // Opening the FIFO for reading blocked discovery forever (no one writes it): a hang now
  // ends the test with SIGALRM instead of holding up the run.
  alarm(10);
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  // The first use of a name discovers: it must come back, with the plugin beside it intact.
  EXPECT_EQ(backplane::Registry::Get("testing.hello")("fifo").AsString(), "hello, fifo");
  alarm(0);
  const auto rec = RecordOfManifest(fifo);
  ASSERT_TRUE(rec.is_object()) << bptest::PluginList().dump(2);
  EXPECT_EQ(rec["state"], "skipped");
  EXPECT_NE(rec["reason"].get<std::string>().find("not a regular file"), std::string::npos)
      << rec.dump(2);
}

TEST(LoaderFiles, AHugeSparseManifestIsRefusedBeforeItIsRead) {
  ScratchDir dir;
  bptest::CopyTestPlugin("hello", dir.path());
  const std::string huge = dir.path() + "/huge.bpplugin.json";
  {
    const int fd = open(huge.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, off_t{1} << 30), 0);  // 1 GiB of holes: no disk space used
    close(fd);
  }
  const uintmax_t before = PeakRss();
  ASSERT_TRUE(Capture(bp_plugin_path_add(dir.path().c_str())).ok());
  ASSERT_TRUE(Capture(bp_plugins_discover()).ok());
  // Read whole, the file took 2 GB of memory (and seconds) before its size was checked.
  EXPECT_LT(PeakRss() - before, uintmax_t{64} << 20)
      << "discovery grew the process by " << ((PeakRss() - before) >> 20) << " MiB";
  const auto rec = RecordOfManifest(huge);
  ASSERT_TRUE(rec.is_object()) << bptest::PluginList().dump(2);
  EXPECT_EQ(rec["state"], "skipped");
  EXPECT_NE(rec["reason"].get<std::string>().find("1073741824 bytes, larger than the 1 MiB"),
            std::string::npos)
      << rec.dump(2);
  EXPECT_EQ(backplane::Registry::Get("testing.hello")().AsString(), "hello, world");
}

}  // namespace
