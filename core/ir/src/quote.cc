// SPDX-License-Identifier: Apache-2.0
// How messages quote the IR (quote.hpp): bounded quotes of expressions and of a statement's
// first line, printed by the printer (printer.hpp).
#include "quote.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "deep.hpp"
#include "printer.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {
namespace {

using print::Printer;

// How deep the expressions on the first line of `s` are (what Printer::Head walks); the body
// under it is not measured, so quoting each of a run of N lets costs its line, not the run.
int64_t HeadDepth(const Stmt& s) {
  if (!s) return 0;
  if (s.kind() == StmtKind::kSeq) return TreeDepth(s);
  int64_t d = 0;
  detail::ForEachChild(
      s, [&](const Expr& e) { d = std::max(d, TreeDepth(e)); }, [](const Stmt&) {});
  return d + 1;
}

}  // namespace

namespace detail {

std::string Elide(std::string_view text, size_t max) {
  constexpr std::string_view kGap = " ... ";
  if (text.size() <= max) return std::string(text);
  if (max <= kGap.size()) return std::string(kGap.substr(0, max));
  auto continuation = [&](size_t k) {
    return (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80;
  };
  size_t head = (max - kGap.size() + 1) / 2;
  size_t tail = text.size() - (max - kGap.size() - head);
  while (head > 0 && continuation(head)) --head;
  while (tail < text.size() && continuation(tail)) ++tail;
  std::string out(text.substr(0, head));
  out += kGap;
  out += text.substr(tail);
  return out;
}

std::string Quote(const Expr& e) { return Elide(Print(e)); }

std::string StmtHead(const Stmt& s) {
  return Deep(HeadDepth(s), [&] {
    Printer p;
    bool more = false;
    p.Head(s, &more);
    return Elide(p.out) + (more ? " ... }" : "");
  });
}

std::string Quoter::Line(const Stmt& s) {
  Load(s);
  return Elide(text_) + (more_ ? " ... }" : "");
}

std::string Quoter::Part(const Stmt& within, const Expr& part) {
  Load(within);
  return Slice(part);
}

std::string Quoter::Part(const Expr& within, const Expr& part) {
  Load(within);
  return Slice(part);
}

void Quoter::Load(const Stmt& s) {
  if (key_ == s.get() && stmt_) return;
  key_ = s.get();
  stmt_ = s;
  expr_ = Expr();
  spans_.clear();
  Deep(HeadDepth(s), [&] {
    Printer p;
    p.spans = &spans_;
    p.Head(s, &more_);
    text_ = std::move(p.out);
  });
}

void Quoter::Load(const Expr& e) {
  if (key_ == e.get() && expr_) return;
  key_ = e.get();
  expr_ = e;
  stmt_ = Stmt();
  spans_.clear();
  more_ = false;
  Deep(TreeDepth(e), [&] {
    Printer p;
    p.spans = &spans_;
    p.Expr_(e);
    text_ = std::move(p.out);
  });
}

std::string Quoter::Slice(const Expr& part) const {
  const auto it = spans_.find(part.get());
  if (it == spans_.end() || it->second.second > text_.size()) return Quote(part);
  return Elide(
      std::string_view(text_).substr(it->second.first, it->second.second - it->second.first));
}

}  // namespace detail

}  // namespace ir
}  // namespace backplane
