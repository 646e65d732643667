// SPDX-License-Identifier: Apache-2.0
// The text form of the IR (grammar in docs/ir.md): a printer and a parser that round-trip
// exactly. Print(Parse(t)) == t for any t that Print wrote, and Parse(Print(m)) is
// structurally equal to m for any m that passes Verify. The text form is also the IR's
// serialized form; a module's text starts with the header line "# backplane-ir N".
#ifndef BACKPLANE_IR_TEXT_HPP_
#define BACKPLANE_IR_TEXT_HPP_

#include <backplane/ir/ir.hpp>
#include <backplane/ir/version.hpp>  // kTextFormatVersion
#include <string>
#include <string_view>

namespace backplane {
namespace ir {

// The version Print(module) writes: the oldest that has everything `module` uses (1 unless it
// uses a construct of a later version), so that a library that reads only older versions still
// loads it.
int TextVersion(const IRModule& module);

// The whole module, header line first, functions separated by a blank line: the text of
// version TextVersion(module), Print(module, TextVersion(module)).
std::string Print(const IRModule& module);
// The module as text of `version`, with the header line "# backplane-ir <version>", for a reader
// that reads only that version: in version 1 a subtraction from zero `0 - x` is written `-x`
// (which that version reads as `0 - x`), in versions 2 and 3 `-x` is a negation (NegNode) and
// `0 - x` is written as it is. Parse(Print(module, version)) is structurally equal to `module`
// (for a module that passes Verify). Throws Error(kValue), naming both versions, unless
// TextVersion(module) <= version <= kTextFormatVersion: a module that uses a construct of a
// later version is first lowered with LowerToVersion (transform.hpp).
std::string Print(const IRModule& module, int version);
std::string Print(const PrimFunc& func);
// A statement at the given indentation (two spaces a level), ending with a newline.
std::string Print(const Stmt& stmt, int indent = 0);
std::string Print(const Expr& expr);

// Parses a module. Throws Error(kParse) with "[source:]line:col: expected X, got 'Y'",
// then the source line and a caret under the column. The header line is optional.
IRModule Parse(std::string_view text, const std::string& source_name = "");

// `text` as the library's messages quote IR (the interpreter's faults, the verifier): whole if
// it has at most 200 characters, else its beginning and its end around " ... ", 200 characters
// in all. A code generator quotes its fault sites with it, so that its fault messages are the
// interpreter's word for word (docs/codegen-guide.md, "The error channel").
std::string QuoteText(std::string_view text);

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_TEXT_HPP_
