// SPDX-License-Identifier: Apache-2.0
// The one exception type of the IR library. The core converts it to a bp status at its edge.
#ifndef BACKPLANE_IR_ERROR_HPP_
#define BACKPLANE_IR_ERROR_HPP_

#include <stdexcept>
#include <string>

namespace backplane {
namespace ir {

enum class ErrorKind {
  kValue,   // a builder call that cannot be represented (bad name, wrong arity, ...)
  kParse,   // the text form is malformed; what() has line:column, the line and a caret
  kVerify,  // the IR is well formed but wrong (undefined variable, type mismatch, ...)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_ERROR_HPP_
