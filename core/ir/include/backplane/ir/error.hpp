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
  // Valid IR that a code generator cannot express on its target (a dtype its language or
  // device lacks): BP_ERR_UNSUPPORTED at the plugin's edge, so a caller can tell "not here"
  // from "wrong".
  kUnsupported,
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
