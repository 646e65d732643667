// SPDX-License-Identifier: Apache-2.0
// The header-only helpers the core shares with the IR, the SDK and the programs: the FNV-1a
// hash (the saved module's checksum, cache keys), the edit distance behind every "did you mean",
// and the ELF reader (the loader's pre-dlopen check, the conformance kit's export check).
#include <backplane/c_api.h>
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/elf_file.hpp>
#include <backplane/hash.hpp>
#include <backplane/ir/edit_distance.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using backplane::Fnv1a64;
using backplane::ir::EditDistance;
using backplane::ir::Edits;

// ---- Fnv1a64 ---------------------------------------------------------------------------------

// The reference's test vectors (FNV-1a 64, from the FNV authors' test suite).
TEST(Fnv1a64, MatchesTheReferenceVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
  static_assert(Fnv1a64("a") == 0xaf63dc4c8601ec8cull, "usable in constant expressions");
}

// Bytes and text hash alike, a sequence hashes the same in pieces, and every byte value counts
// as unsigned (a byte >= 0x80 in a std::string is a negative char).
TEST(Fnv1a64, BytesTextAndPiecesAgreeOnRandomData) {
  std::mt19937 rng(43);
  for (int round = 0; round < 200; ++round) {
    std::string text(rng() % 300, '\0');
    for (char& c : text) c = static_cast<char>(rng() & 0xff);
    // A plain loop over unsigned bytes, as docs/abi.md states the checksum.
    uint64_t want = 14695981039346656037ull;
    for (unsigned char c : text) want = (want ^ c) * 1099511628211ull;
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    EXPECT_EQ(Fnv1a64(text), want);
    EXPECT_EQ(Fnv1a64(bytes, text.size()), want);
    const size_t cut = text.empty() ? 0 : rng() % text.size();
    EXPECT_EQ(Fnv1a64(bytes + cut, text.size() - cut, Fnv1a64(bytes, cut)), want);
  }
}

// (core_module_test checks that a saved module's checksum is this hash, against a loop of its
// own written from docs/abi.md.)

// ---- EditDistance ----------------------------------------------------------------------------

// The textbook full-matrix recurrences, as references.
size_t Reference(const std::string& a, const std::string& b, bool swaps) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (swaps && i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

TEST(EditDistance, KnownPairs) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
  // A swapped pair is two replacements, or one swap.
  EXPECT_EQ(EditDistance("alpah", "alpha"), 2u);
  EXPECT_EQ(EditDistance("alpah", "alpha", Edits::kWithSwaps), 1u);
  // Optimal string alignment: no substring is edited twice ("ca" -> "abc" is 3, not 2).
  EXPECT_EQ(EditDistance("ca", "abc", Edits::kWithSwaps), 3u);
  // The names the messages suggest today.
  EXPECT_EQ(EditDistance("cuda_arch", "cuda_archs"), 1u);
  EXPECT_EQ(EditDistance("max_threads", "max_thread_dim"), 4u);
}

TEST(EditDistance, MatchesTheFullMatrixOnRandomStrings) {
  std::mt19937 rng(7);
  const std::string alphabet = "abcd_";  // few letters, so swaps and repeats are common
  for (int round = 0; round < 2000; ++round) {
    std::string a(rng() % 12, 'a'), b(rng() % 12, 'a');
    for (char& c : a) c = alphabet[rng() % alphabet.size()];
    for (char& c : b) c = alphabet[rng() % alphabet.size()];
    ASSERT_EQ(EditDistance(a, b), Reference(a, b, false)) << a << " / " << b;
    ASSERT_EQ(EditDistance(a, b, Edits::kWithSwaps), Reference(a, b, true)) << a << " / " << b;
    ASSERT_EQ(EditDistance(a, b), EditDistance(b, a)) << a << " / " << b;
  }
}

// ---- elf::File, elf::ReadExports -------------------------------------------------------------

// libbackplane itself: a real shared library of this build.
std::string LibBackplane() {
  Dl_info info{};
  EXPECT_NE(dladdr(reinterpret_cast<void*>(&bp_plugin_load), &info), 0);
  return info.dli_fname != nullptr ? info.dli_fname : "";
}

// Its exports are exactly the C ABI (cmake/libbackplane.map exports bp_* alone, in the version
// node BACKPLANE_1), and every one of them resolves in the loaded library.
TEST(ElfReader, ReadsTheExportsOfLibbackplane) {
  const std::string lib = LibBackplane();
  const backplane::elf::Exports e = backplane::elf::ReadExports(lib);
  ASSERT_EQ(e.error, "") << lib;
  ASSERT_GT(e.functions.size(), 50u);
  EXPECT_NE(std::find(e.functions.begin(), e.functions.end(), "bp_plugin_load"), e.functions.end());
  EXPECT_NE(std::find(e.functions.begin(), e.functions.end(), "bp_module_save"), e.functions.end());
  void* self = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(self, nullptr);
  for (const std::string& name : e.names) {
    if (name == "BACKPLANE_1") continue;  // the version node's own symbol (absolute, no address)
    EXPECT_EQ(name.rfind("bp_", 0), 0u) << name;
    EXPECT_NE(dlsym(self, name.c_str()), nullptr) << name;
  }
  EXPECT_EQ(std::count(e.names.begin(), e.names.end(), "BACKPLANE_1"), 1);
  dlclose(self);
}

// The program headers it reads are the ones the dynamic loader mapped (dl_iterate_phdr's view
// of the same file), and a table that reaches past the end of a file is refused, not read.
TEST(ElfReader, ReadsTheProgramHeadersAndRefusesWhatLiesPastTheEnd) {
  const std::string lib = LibBackplane();
  const backplane::elf::File file(lib);
  ASSERT_EQ(file.open_errno(), 0);
  ASSERT_TRUE(file.examined() && file.regular());
  EXPECT_EQ(file.size(), fs::file_size(lib));
  Elf64_Ehdr eh{};
  ASSERT_TRUE(file.ReadAt(&eh, sizeof(eh), 0));
  EXPECT_EQ(eh.e_type, ET_DYN);
  std::vector<Elf64_Phdr> headers;
  ASSERT_TRUE(file.ReadTable(&headers, eh.e_phoff, eh.e_phnum));
  struct Mapped {
    std::string name;
    std::vector<Elf64_Phdr> headers;
  } mapped{lib, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* m = static_cast<Mapped*>(data);
        if (info->dlpi_name == nullptr || m->name != info->dlpi_name) return 0;
        m->headers.assign(info->dlpi_phdr, info->dlpi_phdr + info->dlpi_phnum);
        return 1;
      },
      &mapped);
  ASSERT_EQ(mapped.headers.size(), headers.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    EXPECT_EQ(headers[i].p_type, mapped.headers[i].p_type) << i;
    EXPECT_EQ(headers[i].p_offset, mapped.headers[i].p_offset) << i;
    EXPECT_EQ(headers[i].p_filesz, mapped.headers[i].p_filesz) << i;
    EXPECT_TRUE(file.InFile(headers[i].p_offset, headers[i].p_filesz)) << i;
  }
  EXPECT_FALSE(file.InFile(file.size(), 1));
  EXPECT_TRUE(file.InFile(file.size(), 0));
  EXPECT_FALSE(file.ReadTable(&headers, file.size() - 8, 1));
  EXPECT_FALSE(file.ReadTable(&headers, 0, ~uint64_t{0} / sizeof(Elf64_Phdr)));

  // A copy cut inside its section headers (at the end of the file): they are out of range.
  const fs::path cut =
      fs::temp_directory_path() / ("bp_utilities_test_" + std::to_string(getpid()));
  fs::copy_file(lib, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, eh.e_shoff + sizeof(Elf64_Shdr));
  EXPECT_EQ(backplane::elf::ReadExports(cut.string()).error,
            "its section headers are out of range");
  { std::ofstream(cut) << "#!/bin/sh\necho not an ELF file, but a script long enough\n"; }
  EXPECT_EQ(backplane::elf::ReadExports(cut.string()).error, "not an ELF file");
  fs::remove(cut);
  const backplane::elf::File missing(cut.string());
  EXPECT_EQ(missing.open_errno(), ENOENT);
  EXPECT_EQ(backplane::elf::ReadExports(cut.string()).error, "not an ELF file");
}

}  // namespace
