// SPDX-License-Identifier: Apache-2.0
// Internal: the expressions a statement holds itself, for the walkers of SplitHostDevice
// (split.cc) and of SplitErrors (split_check.cc), which must see the same ones.
#ifndef BACKPLANE_IR_SRC_OWN_EXPRS_HPP_
#define BACKPLANE_IR_SRC_OWN_EXPRS_HPP_

#include <backplane/ir/ir.hpp>
#include <functional>
#include <vector>

#include "visit.hpp"

namespace backplane {
namespace ir {
namespace detail {

// Calls `fn` on each expression that statement `s` holds itself (not those of nested
// statements).
inline void ForEachOwnExpr(const Stmt& s, const std::function<void(const Expr&)>& fn) {
  ForEachChild(
      s,
      [&](const Expr& e) {
        if (e) fn(e);
      },
      [](const Stmt&) {});
}

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_OWN_EXPRS_HPP_
