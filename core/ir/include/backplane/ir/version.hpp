// SPDX-License-Identifier: Apache-2.0
// The newest version of the IR's text form, alone in a header without the IR library's
// declarations, so that a header of the SDK (codegen.hpp) can name it without them.
#ifndef BACKPLANE_IR_VERSION_HPP_
#define BACKPLANE_IR_VERSION_HPP_

namespace backplane {
namespace ir {

// The newest version of the text form; Parse reads versions 1 to kTextFormatVersion and refuses
// a header with another. Version 2 added loop steps and schedules, assignable variables and
// negation; version 3 C's remainder `%` (docs/ir.md, "Versions").
constexpr int kTextFormatVersion = 3;

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_VERSION_HPP_
