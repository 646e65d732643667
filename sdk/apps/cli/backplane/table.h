// SPDX-License-Identifier: Apache-2.0
// Plain-text tables and wrapped text for the `backplane` tool's human-readable output.
#ifndef BACKPLANE_TOOLS_TABLE_H_
#define BACKPLANE_TOOLS_TABLE_H_

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {
namespace cli {

// The number of terminal columns `text` takes: one per UTF-8 code point (the tool prints
// no wide or combining characters, so this is exact for its output).
size_t DisplayWidth(std::string_view text);

// The width to lay text out for: the terminal's when stdout is one, else $COLUMNS, else 100;
// never less than 60.
size_t OutputWidth();
// Whether that width is the terminal's or $COLUMNS (not the default for piped output).
bool OutputWidthIsKnown();

// Splits `text` into lines of at most `width` columns, breaking at spaces. A word longer
// than a line (a long path, typically) gets a line of its own and is never cut, so it can
// still be copied whole.
std::vector<std::string> WrapText(std::string_view text, size_t width);

// A table with a heading row, aligned columns and optional notes: a line of free text
// printed under a row across the table's width and wrapped to fit (used for reasons). The
// last column wraps too when a row would pass the output width, its continuation lines
// aligned under the column; when the width is known (OutputWidthIsKnown) a word too long for
// that column (a path) moves whole to a line of its own under the row.
class Table {
 public:
  explicit Table(std::vector<std::string> headings);

  // Adds a row; missing cells are empty and extra cells are an error (std::invalid_argument).
  void AddRow(std::vector<std::string> cells);
  // Adds a note under the last row, e.g. "reason: ...". Needs a row before it.
  void AddNote(std::string note);

  // Prints the table indented by `indent` spaces, wrapping notes to `width` columns.
  void Print(std::ostream& out, size_t indent, size_t width) const;

  bool empty() const { return rows_.empty(); }

 private:
  struct Row {
    std::vector<std::string> cells;
    std::vector<std::string> notes;
  };
  std::vector<std::string> headings_;
  std::vector<Row> rows_;
};

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_TABLE_H_
