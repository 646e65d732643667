// SPDX-License-Identifier: Apache-2.0
// Internal: whether an integer literal is exactly a value of a float type, shared by the parser
// (a literal without a suffix in a float context) and the builder (a C++ int beside a float).
#ifndef BACKPLANE_IR_SRC_LITERAL_HPP_
#define BACKPLANE_IR_SRC_LITERAL_HPP_

#include <backplane/ir/ir.hpp>
#include <cstdint>
#include <string>

namespace backplane {
namespace ir {
namespace detail {

// Whether the integer -mag (with `negative`) or mag is exactly a value of the float type `t`;
// if not, `*why` says what it is instead: "is not exactly a float32: its neighbours in float32
// are 16777216 and 16777218", or out of float16's range.
bool ExactFloat(bool negative, uint64_t mag, DType t, std::string* why);

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_LITERAL_HPP_
