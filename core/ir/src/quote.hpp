// SPDX-License-Identifier: Apache-2.0
// Internal: how messages quote the IR. A message names the expression or statement it is about,
// but a quote is bounded (kQuoteChars): an expression may be megabytes of text, and a walker
// that reports a problem at every node of a long chain would otherwise write the chain once per
// node, time and text quadratic in its length.
#ifndef BACKPLANE_IR_SRC_QUOTE_HPP_
#define BACKPLANE_IR_SRC_QUOTE_HPP_

#include <backplane/ir/ir.hpp>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace backplane {
namespace ir {
namespace detail {

// The most characters a quote has.
constexpr size_t kQuoteChars = 200;

// `text` if it has at most `max` characters, else its beginning and its end around " ... ",
// `max` characters in all (never splitting a UTF-8 sequence).
std::string Elide(std::string_view text, size_t max = kQuoteChars);

// Print(e), elided. It prints the whole expression (then cuts it): for a message thrown once.
std::string Quote(const Expr& e);

// The first line of `s` as Print(s, 0) writes it, then " ... }" if more lines follow, elided.
// Prints that line only, not the body of a loop, an if or the statements a let scopes.
std::string StmtHead(const Stmt& s);

// Quotes parts of one statement's first line (or of one expression) for many messages: the
// text is printed once, with where each expression lies in it, when a message first needs it,
// and again only when the messages move to another statement. Each quote costs its own length,
// so a walker that reports a problem at each of N nodes writes O(N) text, not O(N^2).
class Quoter {
 public:
  // StmtHead(s).
  std::string Line(const Stmt& s);
  // The text of `part` as it appears in `within`'s first line (or, for an Expr, in `within`),
  // elided; Quote(part) if it is not in it.
  std::string Part(const Stmt& within, const Expr& part);
  std::string Part(const Expr& within, const Expr& part);

 private:
  void Load(const Stmt& s);
  void Load(const Expr& e);
  std::string Slice(const Expr& part) const;

  const void* key_ = nullptr;  // the statement or expression printed in text_
  Stmt stmt_;                  // keeps key_ alive
  Expr expr_;
  std::string text_;
  bool more_ = false;
  std::unordered_map<const ExprNode*, std::pair<size_t, size_t>> spans_;
};

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_QUOTE_HPP_
