// SPDX-License-Identifier: Apache-2.0
#include "table.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace backplane::cli {

namespace {

constexpr size_t kMinWidth = 60;
constexpr size_t kDefaultWidth = 100;
constexpr size_t kColumnGap = 2;
// Notes sit this far right of the table's left edge, so they read as part of the row above.
constexpr size_t kNoteIndent = 4;

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The byte length of the longest prefix of `text` that fits in `columns` columns.
size_t PrefixBytes(std::string_view text, size_t columns) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsContinuationByte(text[i])) continue;
    if (seen == columns) return i;
    ++seen;
  }
  return text.size();
}

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

size_t OutputWidth() {
  size_t width = 0;
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    width = ws.ws_col;
  } else if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    width = std::strtoul(columns, nullptr, 10);
  }
  if (width == 0) width = kDefaultWidth;
  return std::max(width, kMinWidth);
}

std::vector<std::string> WrapText(std::string_view text, size_t width) {
  width = std::max<size_t>(width, 1);
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
    line_width = 0;
    // A word longer than a line is cut; the rest starts the next line.
    while (word_width > width) {
      size_t cut = PrefixBytes(word, width);
      lines.emplace_back(word.substr(0, cut));
      word.remove_prefix(cut);
      word_width -= width;
    }
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
  std::vector<size_t> widths(headings_.size());
  for (size_t c = 0; c < headings_.size(); ++c) widths[c] = DisplayWidth(headings_[c]);
  for (const Row& row : rows_) {
    for (size_t c = 0; c < row.cells.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row.cells[c]));
    }
  }
  const std::string margin(indent, ' ');
  auto print_line = [&](const std::vector<std::string>& cells) {
    out << margin;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c + 1 == cells.size()) {
        out << cells[c];  // no trailing padding on the last column
      } else {
        PrintPadded(out, cells[c], widths[c] + kColumnGap);
      }
    }
    out << '\n';
  };
  print_line(headings_);
  std::vector<std::string> rules;
  for (size_t c = 0; c < headings_.size(); ++c) {
    std::string rule;
    for (size_t i = 0; i < widths[c]; ++i) rule += "\xE2\x94\x80";  // U+2500 box line
    rules.push_back(std::move(rule));
  }
  print_line(rules);
  const std::string note_margin(indent + kNoteIndent, ' ');
  const size_t note_width = width > indent + kNoteIndent + 20 ? width - indent - kNoteIndent : 20;
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

}  // namespace backplane::cli
