// SPDX-License-Identifier: Apache-2.0
// Internal: the text form's keywords and identifier rule, shared by the builder, the printer
// and the parser.
#ifndef BACKPLANE_IR_SRC_NAMES_HPP_
#define BACKPLANE_IR_SRC_NAMES_HPP_

#include <string>
#include <vector>

namespace backplane {
namespace ir {
namespace detail {

const std::vector<std::string>& Keywords();
// A letter or '_', then letters, digits and '_'; not a keyword.
bool IsIdentifier(const std::string& name);
// Throws Error(kValue) naming `what` if `name` is not an identifier.
void CheckName(const std::string& what, const std::string& name);
// " (did you mean 'x1' or 'x2'?)" for the names of `names` close to `wanted` (a typo: a small
// edit distance, or one is a prefix of the other), nearest first; "" if none is close.
std::string DidYouMean(const std::string& wanted, const std::vector<std::string>& names);

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_NAMES_HPP_
