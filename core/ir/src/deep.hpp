// SPDX-License-Identifier: Apache-2.0
// The public entry points that walk a tree run the walk through Deep, which gives it the stack
// a tree that deep needs (limits.hpp).
#ifndef BACKPLANE_IR_SRC_DEEP_HPP_
#define BACKPLANE_IR_SRC_DEEP_HPP_

#include <backplane/ir/ir.hpp>
#include <backplane/ir/limits.hpp>
#include <utility>

namespace backplane {
namespace ir {
namespace detail {

// fn() run with the stack a tree `depth` deep needs; its result (or exception) returned here.
template <typename F>
auto Deep(int64_t depth, F&& fn) -> decltype(fn()) {
  using R = decltype(fn());
  // The common case, called directly (a kernel call's argument check runs through here).
  if (HasStack(StackBytesForDepth(depth))) return fn();
  if constexpr (std::is_void_v<R>) {
    RunForDepth(depth, [&] { fn(); });
  } else {
    R out{};
    RunForDepth(depth, [&] { out = fn(); });
    return out;
  }
}

// Whether `e` has a call_packed anywhere in it (iterative: any depth).
bool CallsPacked(const Expr& e);

}  // namespace detail
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_DEEP_HPP_
