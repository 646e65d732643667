// SPDX-License-Identifier: Apache-2.0
// Internal: the lexer of the text form (grammar in docs/ir.md), for the parser (parser.cc): the
// tokens, the errors that name the line and column and show the line with a caret under the
// spot, and the bracket depth that bounds the parser's recursion.
#ifndef BACKPLANE_IR_SRC_LEXER_HPP_
#define BACKPLANE_IR_SRC_LEXER_HPP_

#include <algorithm>
#include <backplane/ir/error.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "literal.hpp"
#include "names.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {
namespace lex {

enum class Tok { kIdent, kInt, kFloat, kString, kPunct, kEnd };

// A name, a token or a piece of the source as a message quotes it: elided past kQuoteChars (a
// name or a number may be megabytes long, and the line is shown under the message anyway).
inline std::string Q(std::string_view text) { return detail::Elide(text); }

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;   // as written (kString: the decoded value)
  size_t offset = 0;  // into the source
  int line = 1, col = 1;
  bool bol = false;  // first token on its line
};

class SourceError {
 public:
  SourceError(std::string_view src, const std::string& source_name)
      : src_(src), name_(source_name) {}

  [[noreturn]] void Throw(size_t offset, const std::string& message) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t k = 0; k < offset && k < src_.size(); ++k) {
      if (src_[k] == '\n') {
        ++line;
        line_start = k + 1;
      }
    }
    size_t line_end = src_.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = src_.size();
    const size_t col = offset - line_start;
    // The line as written, or a window of it around the column when it is long (a generated
    // kernel may be one line of megabytes).
    size_t from = line_start, to = line_end;
    if (to - from > kShownLine) {
      from = line_start + (col > kShownLine / 2 ? col - kShownLine / 2 : 0);
      to = std::min(line_end, from + kShownLine);
    }
    std::string text = (from > line_start ? "..." : "") +
                       std::string(src_.substr(from, to - from)) + (to < line_end ? "..." : "");
    std::string caret(from > line_start ? 3 : 0, ' ');
    for (size_t k = from; k < offset && k < to; ++k) caret += src_[k] == '\t' ? '\t' : ' ';
    std::string where = name_.empty() ? "" : Q(name_) + ":";
    where += std::to_string(line) + ":" + std::to_string(col + 1) + ": ";
    // Each quote in a message is bounded; so is the whole, in case one was missed.
    throw Error(ErrorKind::kParse,
                where + detail::Elide(message, kMaxMessage) + "\n  " + text + "\n  " + caret + "^");
  }

  std::string_view Slice(size_t begin, size_t end) const {
    begin = std::min(begin, src_.size());
    return src_.substr(begin, std::min(end, src_.size()) - begin);
  }

 private:
  static constexpr size_t kShownLine = 120;
  static constexpr size_t kMaxMessage = 2000;
  std::string_view src_;
  std::string name_;
};

class Lexer {
 public:
  Lexer(std::string_view src, const SourceError& err) : src_(src), err_(err) {}

  std::vector<Token> Run() {
    std::vector<Token> out;
    bool bol = true;
    while (true) {
      // Whitespace and comments.
      while (pos_ < src_.size()) {
        char c = src_[pos_];
        if (c == '\n') {
          bol = true;
          Advance();
        } else if (c == ' ' || c == '\t' || c == '\r') {
          Advance();
        } else if (c == '#' || (c == '/' && Peek(1) == '/')) {
          SkipComment();
        } else {
          break;
        }
      }
      Token t;
      t.offset = pos_;
      t.line = line_;
      t.col = col_;
      t.bol = bol;
      bol = false;
      if (pos_ >= src_.size()) {
        t.kind = Tok::kEnd;
        out.push_back(t);
        return out;
      }
      char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        t.kind = Tok::kIdent;
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          Advance();
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        t.kind = Number(out.empty() ? nullptr : &out.back());
      } else if (c == '"') {
        t.kind = Tok::kString;
        out.push_back(String(t));
        continue;
      } else {
        t.kind = Tok::kPunct;
        static const char* const kTwo[] = {"==", "!=", "<=", ">=", "&&", "||", ".."};
        bool two = false;
        for (const char* p : kTwo)
          if (c == p[0] && Peek(1) == p[1]) two = true;
        if (two) {
          Advance();
          Advance();
        } else if (std::string("(){}[],:=+-*/%<>!.").find(c) != std::string::npos) {
          Advance();
        } else {
          std::string shown = std::isprint(static_cast<unsigned char>(c))
                                  ? std::string(1, c)
                                  : "\\x" + std::to_string(static_cast<unsigned char>(c));
          err_.Throw(pos_, "unexpected character '" + shown +
                               "': expected a name, a number, a string or an operator");
        }
      }
      t.text = std::string(src_.substr(t.offset, pos_ - t.offset));
      out.push_back(t);
    }
  }

 private:
  char Peek(size_t k) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }
  void Advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void SkipComment() {
    size_t start = pos_;
    while (pos_ < src_.size() && src_[pos_] != '\n') Advance();
    std::string_view text = src_.substr(start, pos_ - start);
    const std::string_view kHeader = "# backplane-ir ";
    if (text.substr(0, kHeader.size()) == kHeader) {
      std::string version(text.substr(kHeader.size()));
      while (!version.empty() && (version.back() == ' ' || version.back() == '\r'))
        version.pop_back();
      version_ = 0;
      for (int v = 1; v <= kTextFormatVersion; ++v)
        if (version == std::to_string(v)) version_ = v;
      if (version_ == 0)
        err_.Throw(start + kHeader.size(), "unsupported backplane-ir version '" + Q(version) +
                                               "': this library reads versions 1 to " +
                                               std::to_string(kTextFormatVersion) +
                                               "; print the module again with a matching library");
    }
  }

 public:
  // The version the header line gave (the newest without one).
  int version() const { return version_; }

 private:
  int version_ = kTextFormatVersion;

  // `prev`: the token before the number (for a better message when a name starts with a digit).
  Tok Number(const Token* prev) {
    const size_t number_start = pos_;
    auto digits = [&] {
      size_t start = pos_;
      while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) Advance();
      return pos_ > start;
    };
    digits();
    Tok kind = Tok::kInt;
    if (Peek(0) == '.' && Peek(1) != '.') {  // `0..n` is 0, `..`, n (a loop's range)
      Advance();
      if (!digits()) err_.Throw(pos_, "expected digits after '.' in a number");
      kind = Tok::kFloat;
    }
    if (Peek(0) == 'e' || Peek(0) == 'E') {
      Advance();
      if (Peek(0) == '+' || Peek(0) == '-') Advance();
      if (!digits()) err_.Throw(pos_, "expected the digits of the exponent");
      kind = Tok::kFloat;
    }
    // Suffix: i8..i64, u8..u64 on integers, f16/f32/f64 on either.
    size_t suffix = pos_;
    while (pos_ < src_.size() && std::isalnum(static_cast<unsigned char>(src_[pos_]))) Advance();
    std::string s(src_.substr(suffix, pos_ - suffix));
    if (!s.empty()) {
      bool ok = s == "f16" || s == "f32" || s == "f64";
      if (kind == Tok::kInt)
        ok = ok || s == "i8" || s == "i16" || s == "i32" || s == "i64" || s == "u8" || s == "u16" ||
             s == "u32" || s == "u64";
      if (!ok) {
        const std::string word(src_.substr(number_start, pos_ - number_start));
        const std::string lead = word.substr(0, suffix - number_start);
        // A name that starts with a digit (2mm): say so, and suggest the digits at the end.
        const bool name_like =
            kind == Tok::kInt && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
        const std::string renamed = s + lead;
        if (name_like && prev != nullptr && prev->kind == Tok::kIdent && prev->text == "func")
          err_.Throw(number_start,
                     "function name '" + Q(word) +
                         "' starts with a digit: expected a name that starts with a letter "
                         "or '_'; rename it, e.g. '" +
                         Q(renamed) + "' or '_" + Q(word) + "'");
        err_.Throw(suffix, "bad number suffix '" + Q(s) + "': expected " +
                               (kind == Tok::kInt ? "i8-i64, u8-u64, " : "") +
                               "f16, f32 or f64, or none" +
                               (name_like ? "; if '" + Q(word) +
                                                "' is meant as a name, a name must start with a "
                                                "letter or '_' (e.g. '" +
                                                Q(renamed) + "')"
                                          : std::string()));
      }
      if (s[0] == 'f') kind = Tok::kFloat;
    }
    return kind;
  }

  Token String(Token t) {
    size_t start = pos_;
    Advance();
    std::string value;
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n')
        err_.Throw(start, "unterminated string: expected a closing '\"' on the same line");
      char c = src_[pos_];
      Advance();
      if (c == '"') break;
      if (c != '\\') {
        value += c;
        continue;
      }
      char e = Peek(0);
      size_t at = pos_;
      if (pos_ < src_.size()) Advance();
      switch (e) {
        case '"':
          value += '"';
          break;
        case '\\':
          value += '\\';
          break;
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'x': {
          std::string hex;
          for (int k = 0; k < 2 && std::isxdigit(static_cast<unsigned char>(Peek(0))); ++k) {
            hex += Peek(0);
            Advance();
          }
          if (hex.size() != 2) err_.Throw(at, "expected two hex digits after '\\x'");
          value += static_cast<char>(std::strtol(hex.c_str(), nullptr, 16));
          break;
        }
        default:
          err_.Throw(at - 1, "unknown escape in a string: expected \\\" \\\\ \\n \\t or \\xHH");
      }
    }
    t.text = value;
    return t;
  }

  std::string_view src_;
  const SourceError& err_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

// How deep the parser will recurse for these tokens. It recurses once for each bracket it opens
// (a parenthesis, a call's or index's bracket, a block's brace) and a bounded number of times
// between two brackets (operator precedence; runs of unary operators, lets and else-ifs are read
// in loops), so the deepest bracket nesting bounds its stack. Refuses nesting past kMaxNesting
// at the bracket that goes past it, before anything recurses.
inline int64_t BracketDepth(const std::vector<Token>& toks, const SourceError& err) {
  int64_t depth = 0, deepest = 0;
  for (const Token& t : toks) {
    if (t.kind != Tok::kPunct || t.text.size() != 1) continue;
    const char c = t.text[0];
    if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        err.Throw(t.offset, "nested too deeply: expected at most " + std::to_string(kMaxNesting) +
                                " levels of parentheses, brackets, braces and calls inside one "
                                "another; move inner parts into lets or separate statements");
      deepest = std::max(deepest, depth);
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace lex
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_LEXER_HPP_
