// SPDX-License-Identifier: Apache-2.0
// The printer of the text form (grammar in docs/ir.md): its entry points, over printer.hpp.
#include "printer.hpp"

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "deep.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {

using print::Printer;

std::string ToString(const std::vector<ThreadTag>& axes) {
  std::string out;
  for (ThreadTag t : axes) {
    if (!out.empty()) out += ',';
    out += ToString(t);
  }
  return out;
}

std::string QuoteText(std::string_view text) { return detail::Elide(text); }

std::string Print(const Expr& expr) {
  return detail::Deep(TreeDepth(expr), [&] {
    Printer p;
    p.Expr_(expr);
    return std::move(p.out);
  });
}

std::string Print(const Stmt& stmt, int indent) {
  return detail::Deep(TreeDepth(stmt), [&] {
    Printer p;
    p.Stmt_(stmt, indent);
    return std::move(p.out);
  });
}

std::string Print(const PrimFunc& func) {
  return detail::Deep(TreeDepth(func), [&] {
    Printer p;
    p.Func(func);
    return std::move(p.out);
  });
}

namespace {

// The module as text of `version`, which has everything the module uses.
std::string PrintVersion(const IRModule& module, int version) {
  return detail::Deep(TreeDepth(module), [&] {
    Printer p;
    p.v1 = version == 1;
    p.out = "# backplane-ir " + std::to_string(version) + "\n";
    for (const auto& f : module.functions()) {
      p.out += "\n";
      p.Func(f);
    }
    return std::move(p.out);
  });
}

}  // namespace

std::string Print(const IRModule& module) { return PrintVersion(module, TextVersion(module)); }

std::string Print(const IRModule& module, int version) {
  const std::string range = "1 to " + std::to_string(kTextFormatVersion);
  if (version < 1 || version > kTextFormatVersion)
    throw Error(ErrorKind::kValue, "Print: there is no IR text version " + std::to_string(version) +
                                       ": expected a version from " + range +
                                       " (this library writes those)");
  const int needs = TextVersion(module);
  if (version < needs)
    throw Error(ErrorKind::kValue,
                "Print: the module needs IR text version " + std::to_string(needs) +
                    " (TextVersion), so it cannot be written as version " +
                    std::to_string(version) + ": expected a version from " + std::to_string(needs) +
                    " to " + std::to_string(kTextFormatVersion) + "; to write version " +
                    std::to_string(version) +
                    ", lower the module first with LowerToVersion(module, " +
                    std::to_string(version) + ")");
  return PrintVersion(module, version);
}

}  // namespace ir
}  // namespace backplane
