// SPDX-License-Identifier: Apache-2.0
// Help text that fits the terminal, shared by `backplane` and `backplane-conformance`.
// CLI11 2.1 prints each description on one line however long it is (lines of 400 columns);
// this formatter wraps descriptions, option docs and footers to the terminal's width and
// keeps indented footer lines (examples) as written.
#ifndef BACKPLANE_TOOLS_COMMON_CLI_HELP_HPP_
#define BACKPLANE_TOOLS_COMMON_CLI_HELP_HPP_

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace backplane {
namespace tools {

// Where the documentation page `page` (e.g. "cli.md") is: the installed copy beside the
// running program (<prefix>/share/doc/backplane/page, the real path), else "docs/page in the
// Backplane sources". No path of the machine that built the program is compiled in.
inline std::string DocsPath(const std::string& page) {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir.erase(std::min(dir.size(), dir.find_last_of('/')));
    const std::string installed = dir + "/../share/doc/backplane/" + page;
    struct stat st {};
    char real[PATH_MAX];
    if (stat(installed.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        realpath(installed.c_str(), real) != nullptr) {
      return real;
    }
  }
  return "docs/" + page + " in the Backplane sources";
}

// The terminal's width in columns: the terminal's when stdout is one, else $COLUMNS; 0 when
// neither says.
inline size_t TerminalColumns() {
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    return std::strtoul(columns, nullptr, 10);
  }
  return 0;
}

// The width help is laid out for: TerminalColumns(), else 80; never less than 50 nor more than
// 120 (long lines read badly even on a wide terminal).
inline size_t HelpWidth() {
  const size_t width = TerminalColumns();
  return std::clamp<size_t>(width == 0 ? 80 : width, 50, 120);
}

// `text` broken at spaces into lines of at most `width` columns (a longer word keeps a line
// of its own); explicit newlines are kept.
inline std::vector<std::string> WrapHelp(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream paragraphs(text);
  std::string paragraph;
  while (std::getline(paragraphs, paragraph)) {
    std::istringstream words(paragraph);
    std::string word;
    std::string line;
    while (words >> word) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        lines.push_back(line);
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    lines.push_back(line);
  }
  return lines;
}

inline std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

// CLI11's formatter with every free text wrapped to HelpWidth().
class WrappingFormatter : public CLI::Formatter {
 public:
  WrappingFormatter() { column_width(30); }

  std::string make_option_desc(const CLI::Option* opt) const override {
    return JoinLines(WrapHelp(opt->get_description(), DescWidth()));
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string desc = CLI::Formatter::make_description(app);
    return desc.empty() ? desc : JoinLines(WrapHelp(desc, HelpWidth())) + "\n";
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true),
                             JoinLines(WrapHelp(sub->get_description(), DescWidth())),
                             get_column_width());
    return out.str();
  }
  // "Usage: backplane run [OPTIONS] MODULE", not "Usage: run ...": the whole command line.
  // (CLI11 passes the full name when --help is parsed, the bare one from App::help().)
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (name != app->get_name()) return CLI::Formatter::make_usage(app, name);
    for (const CLI::App* p = app->get_parent(); p != nullptr; p = p->get_parent()) {
      if (!p->get_name().empty()) name = p->get_name() + " " + name;
    }
    return CLI::Formatter::make_usage(app, name);
  }
  // Footer lines that start with a space (examples, tables of variables) stay as written;
  // the others wrap.
  std::string make_footer(const CLI::App* app) const override {
    const std::string footer = app->get_footer();
    if (footer.empty()) return footer;
    std::istringstream in(footer);
    std::string line;
    std::string out;
    while (std::getline(in, line)) {
      if (!line.empty() && line[0] == ' ') {
        out += line + "\n";
      } else {
        out += JoinLines(WrapHelp(line, HelpWidth())) + "\n";
      }
    }
    return out;
  }

 private:
  size_t DescWidth() const {
    const size_t width = HelpWidth();
    return width > get_column_width() + 20 ? width - get_column_width() : 20;
  }
};

// Installs the wrapping formatter on `app`; call before adding subcommands, which inherit it.
inline void UseWrappingHelp(CLI::App& app) { app.formatter(std::make_shared<WrappingFormatter>()); }

}  // namespace tools
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_COMMON_CLI_HELP_HPP_
