// SPDX-License-Identifier: Apache-2.0
#include "table.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "cli_help.hpp"

namespace backplane {
namespace cli {

namespace {

constexpr size_t kMinWidth = 60;
constexpr size_t kDefaultWidth = 100;
constexpr size_t kColumnGap = 2;
// Notes sit this far right of the table's left edge, so they read as part of the row above.
constexpr size_t kNoteIndent = 4;
// Text is never wrapped narrower than this, however little room a table leaves.
constexpr size_t kMinWrapWidth = 20;

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

void PrintPadded(std::ostream& out, const std::string& text, size_t width) {
  out << text;
  for (size_t w = DisplayWidth(text); w < width; ++w) out << ' ';
}

}  // namespace

size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (char c : text) {
    if (!IsContinuationByte(c)) ++width;
  }
  return width;
}

bool OutputWidthIsKnown() { return tools::TerminalColumns() > 0; }

size_t OutputWidth() {
  const size_t width = tools::TerminalColumns();
  return std::max(width == 0 ? kDefaultWidth : width, kMinWidth);
}

std::vector<std::string> WrapText(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t line_width = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    size_t word_width = DisplayWidth(word);
    if (line_width > 0 && line_width + 1 + word_width <= width) {
      line += ' ';
      line += word;
      line_width += 1 + word_width;
      continue;
    }
    if (line_width > 0) lines.push_back(std::exchange(line, std::string()));
    line = std::string(word);
    line_width = word_width;
  }
  if (line_width > 0 || lines.empty()) lines.push_back(line);
  return lines;
}

Table::Table(std::vector<std::string> headings) : headings_(std::move(headings)) {}

void Table::AddRow(std::vector<std::string> cells) {
  if (cells.size() > headings_.size()) {
    throw std::invalid_argument("table row has " + std::to_string(cells.size()) +
                                " cells but the table has " + std::to_string(headings_.size()) +
                                " columns");
  }
  cells.resize(headings_.size());
  rows_.push_back(Row{std::move(cells), {}});
}

void Table::AddNote(std::string note) {
  if (rows_.empty()) throw std::logic_error("table note added before any row");
  rows_.back().notes.push_back(std::move(note));
}

void Table::Print(std::ostream& out, size_t indent, size_t width) const {
  const size_t columns = headings_.size();
  std::vector<size_t> widths(columns);
  for (size_t c = 0; c < columns; ++c) widths[c] = DisplayWidth(headings_[c]);
  for (const Row& row : rows_) {
    for (size_t c = 0; c < columns; ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row.cells[c]));
    }
  }
  // Where the last column starts, and how wide it may be before the line passes `width`.
  size_t last_start = indent;
  for (size_t c = 0; c + 1 < columns; ++c) last_start += widths[c] + kColumnGap;
  const size_t last_room = width > last_start + kMinWrapWidth ? width - last_start : kMinWrapWidth;
  widths[columns - 1] = std::min(widths[columns - 1], last_room);

  const std::string margin(indent, ' ');
  const std::string note_margin(indent + kNoteIndent, ' ');
  // On a terminal (or with COLUMNS) a last cell holding a word too long for its column (a
  // library path) moves to a line of its own under the row, so the table keeps to the
  // width; piped output with no width keeps each row on one line for grep.
  const bool move_long_words = OutputWidthIsKnown();
  auto print_line = [&](const std::vector<std::string>& cells) {
    std::vector<std::string> last = WrapText(cells[columns - 1], last_room);
    const bool too_long =
        move_long_words && std::any_of(last.begin(), last.end(), [&](const std::string& line) {
          return DisplayWidth(line) > last_room;
        });
    if (too_long) last = {""};
    out << margin;
    for (size_t c = 0; c + 1 < columns; ++c) PrintPadded(out, cells[c], widths[c] + kColumnGap);
    out << last[0] << '\n';
    for (size_t i = 1; i < last.size(); ++i) {
      out << std::string(last_start, ' ') << last[i] << '\n';
    }
    if (too_long) {
      for (const std::string& line :
           WrapText(cells[columns - 1], width - std::min(width, indent + kNoteIndent))) {
        out << note_margin << line << '\n';
      }
    }
  };
  print_line(headings_);
  std::vector<std::string> rules;
  for (size_t c = 0; c < columns; ++c) {
    std::string rule;
    for (size_t i = 0; i < widths[c]; ++i) rule += "\xE2\x94\x80";  // U+2500 box line
    rules.push_back(std::move(rule));
  }
  out << margin;
  for (size_t c = 0; c < columns; ++c) {
    out << rules[c] << (c + 1 < columns ? std::string(kColumnGap, ' ') : "\n");
  }
  const size_t note_width =
      width > indent + kNoteIndent + kMinWrapWidth ? width - indent - kNoteIndent : kMinWrapWidth;
  for (const Row& row : rows_) {
    print_line(row.cells);
    for (const std::string& note : row.notes) {
      // Continuation lines hang two columns right of the first, so each note reads as one.
      std::vector<std::string> lines = WrapText(note, note_width - 2);
      for (size_t i = 0; i < lines.size(); ++i) {
        out << note_margin << (i == 0 ? "" : "  ") << lines[i] << '\n';
      }
    }
  }
}

}  // namespace cli
}  // namespace backplane
