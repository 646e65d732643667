// SPDX-License-Identifier: Apache-2.0
// The version numbers the documents give as current are the code's: the ABI version of
// core/include/backplane/c_api.h (BP_ABI_VERSION_MAJOR.MINOR) and the IR text version of the IR
// library (ir::kTextFormatVersion). A claim about the current version carries a marker right
// after its number, an HTML comment that Markdown does not show (CONTRIBUTING.md, "Version
// numbers in the documents"):
//
//   ABI 1.7<!-- abi:current -->     the current ABI version
//   1.6<!-- abi:previous -->        the minor before it (1.0 when the minor is 0: none)
//   1.8<!-- abi:next -->            the minor after it
//   versions 1 to 3<!-- ir:current -->   the newest IR text version
//   43<!-- virtuals:sdk/kit/codegen/include/backplane/codegen/c_family.hpp -->
//                                   how many virtual functions (destructors aside) a header
//                                   declares: the hooks it offers third parties
//
// History ("added in 1.4", "## 1.5", "`# backplane-ir 1`" in an example) carries no marker and
// is not checked. Phrases that only ever state the current version ("ABI 1.N today", "ships
// 1.N", "stays 1.N", "is now 1.N") must carry the marker, so a new one is not left unchecked.
// Besides: docs/abi-changelog.md's newest entry is the current version, and docs/ir.md's table
// of versions ends at the current IR version.
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <backplane/ir/version.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Versions {
  int abi_major;
  int abi_minor;
  int ir;
};

Versions Current() {
  return {BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR, backplane::ir::kTextFormatVersion};
}

std::string Abi(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Every problem in `text` (the contents of `file`), each as "file:line: what; what to do".
std::vector<std::string> CheckText(const std::string& file, const std::string& text,
                                   const Versions& v) {
  static const std::regex kMarker(R"(<!--\s*(abi|ir):(current|previous|next)\s*-->)");
  // The version number right before a marker: "1.7", "**1.7**", "`1.7`", "1.7)"; or "3".
  static const std::regex kAbiBefore(R"((\d+)\.(\d+)[*`]*\s*$)");
  static const std::regex kIrBefore(R"((\d+)[*`]*\s*$)");
  // Phrases that state the current version, and so must carry a marker.
  static const std::regex kCurrentPhrase(
      R"((ABI \**(\d+\.\d+)\** today|\b(ships|stays|is now) (ABI )?\**(\d+\.\d+)\**))");
  static const std::regex kIrCurrentPhrase(R"(reads versions? 1 to (\d+))");
  std::vector<std::string> problems;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = file + ":" + std::to_string(n) + ": ";
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kMarker);
         it != std::sregex_iterator(); ++it) {
      const std::smatch& m = *it;
      const std::string marker = m.str(0);
      const std::string before = line.substr(0, static_cast<size_t>(m.position(0)));
      if (!before.empty() && before.back() == '`') continue;  // `<!-- ... -->`: shown, not a marker
      std::smatch num;
      if (m.str(1) == "abi") {
        int minor = v.abi_minor;
        if (m.str(2) == "previous") minor -= 1;
        if (m.str(2) == "next") minor += 1;
        const std::string want = Abi(v.abi_major, minor);
        if (!std::regex_search(before, num, kAbiBefore)) {
          problems.push_back(where + "the marker " + marker +
                             " follows no ABI version (MAJOR.MINOR); put it right after the "
                             "number it marks, e.g. '" +
                             want + marker + "'");
        } else if (num.str(1) + "." + num.str(2) != want) {
          problems.push_back(where + "says ABI " + num.str(1) + "." + num.str(2) + ", but " +
                             marker + " marks it as " + want +
                             " (BP_ABI_VERSION_MAJOR.MINOR in core/include/backplane/c_api.h is " +
                             Abi(v.abi_major, v.abi_minor) + "); write " + want +
                             ", or drop the marker if the sentence is history");
        }
      } else {
        if (m.str(2) != "current") {
          problems.push_back(where + "the marker " + marker +
                             " is not one this test knows; the IR has <!-- ir:current --> only");
          continue;
        }
        const std::string want = std::to_string(v.ir);
        if (!std::regex_search(before, num, kIrBefore)) {
          problems.push_back(where + "the marker " + marker +
                             " follows no IR text version; put it right after the number, e.g. '" +
                             want + marker + "'");
        } else if (num.str(1) != want) {
          problems.push_back(
              where + "says IR text version " + num.str(1) + ", but " + marker +
              " marks it as the current one, " + want +
              " (ir::kTextFormatVersion in core/ir/include/backplane/ir/version.hpp); "
              "write " +
              want);
        }
      }
    }
    // Unmarked statements of the current version.
    auto unmarked = [&](const std::regex& phrase, const std::string& kind,
                        const std::string& marker) {
      for (auto it = std::sregex_iterator(line.begin(), line.end(), phrase);
           it != std::sregex_iterator(); ++it) {
        const size_t end = static_cast<size_t>(it->position(0) + it->length(0));
        const std::string rest = line.substr(end);
        std::smatch after;
        if (std::regex_search(rest, after, kMarker) && after.position(0) == 0) continue;
        const std::string phrase_text = it->str(0);
        problems.push_back(where + "'" + phrase_text + "' states the current " + kind +
                           " without the marker " + marker +
                           " right after the number, so no test checks it; add the marker "
                           "(CONTRIBUTING.md, \"Version numbers in the documents\")");
      }
    };
    unmarked(kCurrentPhrase, "ABI version", "<!-- abi:current -->");
    unmarked(kIrCurrentPhrase, "IR text version", "<!-- ir:current -->");
    if (line.find("on this branch") != std::string::npos) {
      problems.push_back(where +
                         "says 'on this branch': the documents describe the project as it is; "
                         "say what is there");
    }
  }
  return problems;
}

// The newest "## MAJOR.MINOR" heading of docs/abi-changelog.md is the current version.
std::vector<std::string> CheckAbiChangelog(const std::string& file, const std::string& text,
                                           const Versions& v) {
  static const std::regex kHeading(R"(^## (\d+)\.(\d+)\s*$)");
  std::istringstream in(text);
  std::string line, last;
  int last_line = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    std::smatch m;
    if (std::regex_match(line, m, kHeading)) {
      last = m.str(1) + "." + m.str(2);
      last_line = n;
    }
  }
  const std::string want = Abi(v.abi_major, v.abi_minor);
  if (last == want) return {};
  return {file + ":" + std::to_string(last_line) + ": the newest entry is '## " + last +
          "' but c_api.h is ABI " + want + "; add the entry '## " + want +
          "' (docs/abi.md, \"What a minor may add\")"};
}

// docs/ir.md's table under "### Versions" has one row per version, 1 to the current.
std::vector<std::string> CheckIrVersions(const std::string& file, const std::string& text,
                                         const Versions& v) {
  static const std::regex kRow(R"(^\| (\d+) \|)");
  std::istringstream in(text);
  std::string line;
  bool in_section = false;
  int expected = 1, table_line = 0;
  std::vector<std::string> problems;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.rfind("### Versions", 0) == 0) {
      in_section = true;
      table_line = n;
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("#", 0) == 0) break;
    std::smatch m;
    if (!std::regex_search(line, m, kRow)) continue;
    if (std::stoi(m.str(1)) != expected) {
      problems.push_back(file + ":" + std::to_string(n) + ": the table of IR versions has " +
                         m.str(1) + " where " + std::to_string(expected) + " belongs");
    }
    ++expected;
  }
  if (table_line == 0) {
    problems.push_back(file + ": has no section '### Versions' listing the IR text versions");
  } else if (expected - 1 != v.ir) {
    problems.push_back(file + ":" + std::to_string(table_line) +
                       ": the table of IR versions ends at " + std::to_string(expected - 1) +
                       " but ir::kTextFormatVersion is " + std::to_string(v.ir) +
                       "; add a row for each version up to it saying what it added");
  }
  return problems;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The virtual functions a header declares, destructors aside: lines that start with `virtual`
// (clang-format puts each declaration on its own line).
int CountVirtuals(const std::string& header_text) {
  static const std::regex kVirtual(R"(^\s*virtual\s+[^~\s])");
  std::istringstream in(header_text);
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    if (std::regex_search(line, kVirtual)) ++count;
  }
  return count;
}

// "N<!-- virtuals:PATH -->": N is how many virtual functions PATH (from the source root)
// declares.
std::vector<std::string> CheckVirtualCounts(const std::string& file, const std::string& text,
                                            const fs::path& root) {
  static const std::regex kMarker(R"(<!--\s*virtuals:(\S+)\s*-->)");
  static const std::regex kNumberBefore(R"((\d+)[*`]*\s*$)");
  std::vector<std::string> problems;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kMarker);
         it != std::sregex_iterator(); ++it) {
      const std::string where = file + ":" + std::to_string(n) + ": ";
      const std::string before = line.substr(0, static_cast<size_t>(it->position(0)));
      if (!before.empty() && before.back() == '`') continue;  // shown in a code span
      const fs::path header = root / it->str(1);
      if (!fs::exists(header)) {
        problems.push_back(where + "the marker " + it->str(0) + " names " + it->str(1) +
                           ", which does not exist; name a header by its path from the "
                           "repository root");
        continue;
      }
      const int count = CountVirtuals(ReadFile(header));
      std::smatch num;
      if (!std::regex_search(before, num, kNumberBefore)) {
        problems.push_back(where + "the marker " + it->str(0) +
                           " follows no number; put it right after the count, e.g. '" +
                           std::to_string(count) + it->str(0) + "'");
      } else if (std::stoi(num.str(1)) != count) {
        problems.push_back(where + "says " + num.str(1) + " virtual functions, but " + it->str(1) +
                           " declares " + std::to_string(count) + " (destructors aside); write " +
                           std::to_string(count));
      }
    }
  }
  return problems;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The documents the test reads: docs/*.md and the top-level ones.
std::vector<fs::path> Documents() {
  const fs::path root = BACKPLANE_SOURCE_DIR;
  std::vector<fs::path> files = {root / "README.md", root / "CHANGELOG.md",
                                 root / "CONTRIBUTING.md"};
  for (const auto& e : fs::directory_iterator(root / "docs")) {
    if (e.path().extension() == ".md") files.push_back(e.path());
  }
  return files;
}

std::string Relative(const fs::path& p) {
  return fs::relative(p, fs::path(BACKPLANE_SOURCE_DIR)).string();
}

TEST(DocsVersions, EveryMarkedClaimIsTheCodesVersion) {
  const Versions v = Current();
  std::vector<std::string> problems;
  int marked = 0;
  for (const auto& path : Documents()) {
    ASSERT_TRUE(fs::exists(path)) << path << " is missing";
    const std::string text = ReadFile(path);
    for (auto& p : CheckText(Relative(path), text, v)) problems.push_back(p);
    for (auto& p : CheckVirtualCounts(Relative(path), text, BACKPLANE_SOURCE_DIR)) {
      problems.push_back(p);
    }
    for (size_t at = text.find("<!-- abi:"); at != std::string::npos;
         at = text.find("<!-- abi:", at + 1)) {
      ++marked;
    }
  }
  EXPECT_TRUE(problems.empty()) << Join(problems);
  // The claims the documents make today (docs/abi.md, abi-changelog.md, plugin-guide.md,
  // CHANGELOG.md, CONTRIBUTING.md): a marker lost in an edit would leave its claim unchecked.
  EXPECT_GE(marked, 20) << "fewer ABI version markers than the documents had; was one dropped?";
}

TEST(DocsVersions, AbiChangelogEndsAtTheCurrentVersion) {
  const fs::path path = fs::path(BACKPLANE_SOURCE_DIR) / "docs" / "abi-changelog.md";
  auto problems = CheckAbiChangelog(Relative(path), ReadFile(path), Current());
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

TEST(DocsVersions, IrVersionTableEndsAtTheCurrentVersion) {
  const fs::path path = fs::path(BACKPLANE_SOURCE_DIR) / "docs" / "ir.md";
  auto problems = CheckIrVersions(Relative(path), ReadFile(path), Current());
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

// The checker itself, on text with known mistakes, for a made-up current version 1.7 / IR 3.
TEST(DocsVersions, CheckerFlagsWrongAndUnmarkedClaimsOnly) {
  const Versions v{1, 7, 3};
  const std::string text =
      "The first release ships **1.7**<!-- abi:current -->.\n"                        // 1: right
      "A plugin built today needs 1.5<!-- abi:current -->.\n"                         // 2: wrong
      "A 1.6<!-- abi:previous --> host refuses it; 1.8<!-- abi:next --> loads it.\n"  // 3
      "Added in 1.4, and 1.0 to 1.3 are pre-release minors.\n"                        // 4: history
      "It needs the headers' minor (ABI 1.5 today).\n"                                // 5: unmarked
      "`BP_ABI_VERSION` stays 1.5 and so on.\n"                                       // 6: unmarked
      "The first line is `# backplane-ir 1` in this example.\n"                       // 7: history
      "The library reads versions 1 to 2<!-- ir:current -->.\n"                       // 8: wrong
      "The library reads versions 1 to 3<!-- ir:current -->.\n"                       // 9: right
      "The parser reads versions 1 to 3 here.\n"                                // 10: unmarked
      "Events (in progress on this branch).\n"                                  // 11: history words
      "A stray <!-- abi:current --> marker.\n"                                  // 12: no number
      "The marker `<!-- abi:current -->` is shown, 1.2`<!-- abi:next -->`.\n";  // 13: code
  const auto problems = CheckText("doc.md", text, v);
  std::vector<std::string> lines;
  for (const auto& p : problems) lines.push_back(p.substr(0, p.find(": ")));
  const std::vector<std::string> expected = {"doc.md:2",  "doc.md:5",  "doc.md:6", "doc.md:8",
                                             "doc.md:10", "doc.md:11", "doc.md:12"};
  EXPECT_EQ(lines, expected) << Join(problems);
  ASSERT_GE(problems.size(), 1u);
  EXPECT_NE(problems[0].find("says ABI 1.5, but <!-- abi:current --> marks it as 1.7"),
            std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find("write 1.7"), std::string::npos) << problems[0];
}

TEST(DocsVersions, CheckerCountsVirtualHooks) {
  EXPECT_EQ(CountVirtuals("struct A {\n  virtual ~A() = default;\n  virtual int F() = 0;\n"
                          "  virtual std::string G(int x,\n      int y);\n  // virtual not\n"
                          "  int H();\n};\n"),
            2);
  const fs::path root = BACKPLANE_SOURCE_DIR;
  const std::string header = "sdk/kit/codegen/include/backplane/codegen/c_family.hpp";
  const int count = CountVirtuals(ReadFile(root / header));
  EXPECT_GT(count, 0);
  const std::string marker = "<!-- virtuals:" + header + " -->";
  EXPECT_TRUE(
      CheckVirtualCounts("a.md", "It has " + std::to_string(count) + marker + ".\n", root).empty());
  auto wrong =
      CheckVirtualCounts("a.md", "x\nIt has " + std::to_string(count + 1) + marker + ".\n", root);
  ASSERT_EQ(wrong.size(), 1u);
  EXPECT_EQ(wrong[0].rfind("a.md:2: says " + std::to_string(count + 1) + " virtual functions", 0),
            0u)
      << wrong[0];
  EXPECT_EQ(CheckVirtualCounts("a.md", "3<!-- virtuals:no/such.hpp -->\n", root).size(), 1u);
}

TEST(DocsVersions, CheckerFindsAStaleChangelogAndIrTable) {
  const Versions v{1, 7, 3};
  auto a = CheckAbiChangelog("abi-changelog.md", "# x\n\n## 1.5\n\ntext\n\n## 1.6\n\nmore\n", v);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_NE(a[0].find("abi-changelog.md:7: the newest entry is '## 1.6' but c_api.h is ABI 1.7"),
            std::string::npos)
      << a[0];
  EXPECT_TRUE(CheckAbiChangelog("c.md", "## 1.6\n## 1.7\n", v).empty());
  auto b = CheckIrVersions("ir.md",
                           "### Versions\n\n| version | what |\n|---|---|\n| 1 | a |\n"
                           "| 2 | b |\n\n## Next\n",
                           v);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(b[0].find("ir.md:1: the table of IR versions ends at 2 but ir::kTextFormatVersion "
                      "is 3"),
            std::string::npos)
      << b[0];
  EXPECT_TRUE(
      CheckIrVersions("ir.md", "### Versions\n| 1 | a |\n| 2 | b |\n| 3 | c |\n", v).empty());
}

}  // namespace
