// SPDX-License-Identifier: Apache-2.0
// How deep an IR tree may be, and the stack its walkers get (docs/ir.md, "Limits").
//
// The parser refuses text nested deeper than kMaxNesting (parentheses, brackets, braces, calls)
// before recursing into it, and runs with the stack that the text's nesting needs. A function
// whose tree is deeper than kMaxTreeDepth is refused too. A long left-associative chain
// (x0 + x1 + ... + x29999), a run of unary operators or a run of lets is not nested in the text
// (the parser reads it in a loop) but makes a tree as deep as it is long, and every walker of the
// library (printer, verifier, equality, splitter, signature, the interpreter) and of the code
// generators recurses over the tree. So each public entry point that walks measures the tree
// (TreeDepth, without recursion) and, when it is deep, runs the walk on a thread whose stack holds
// it (RunForDepth). Freeing a tree never recurses.
//
// The text form carries the IR across the codegen ABI and inside saved modules, so whatever the
// printer writes must parse back. Every bracket the printer writes goes at least one node deeper
// into the tree, so its text is nested at most as deep as the tree: kMaxNesting is not below
// kMaxTreeDepth, and any tree within kMaxTreeDepth prints text that parses.
#ifndef BACKPLANE_IR_LIMITS_HPP_
#define BACKPLANE_IR_LIMITS_HPP_

#include <backplane/ir/ir.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace backplane {
namespace ir {

// Nodes on the longest path from a function's body (or a parameter's shape) to a leaf.
constexpr int64_t kMaxTreeDepth = 100000;
// Brackets of any kind (parentheses, a call's, an index's, a block's braces) open inside one
// another in the text.
constexpr int64_t kMaxNesting = kMaxTreeDepth;

// The number of nodes on the longest root-to-leaf path (a leaf alone: 1; empty: 0), computed
// without recursion. Shared subtrees are measured once.
int64_t TreeDepth(const Expr& e);
int64_t TreeDepth(const Stmt& s);
int64_t TreeDepth(const PrimFunc& f);
int64_t TreeDepth(const IRModule& m);

// Stack that a recursive walk of a tree `depth` deep is given: kStackBytesPerLevel a level
// (four times that under AddressSanitizer, whose frames are larger) plus 1 MiB.
size_t StackBytesForDepth(int64_t depth);

// Whether the calling thread has at least `bytes` of stack left below the caller (false when
// that is unknown).
bool HasStack(size_t bytes);

// Runs `fn` with at least `bytes` of stack: on this thread if that much is left on it, else
// on a new thread with a stack of that size (reserved, not committed: untouched pages cost no
// memory), waiting for it. An exception thrown by `fn` is rethrown here.
void RunWithStack(size_t bytes, const std::function<void()>& fn);
// RunWithStack(StackBytesForDepth(depth), fn).
void RunForDepth(int64_t depth, const std::function<void()>& fn);

// A joinable thread with a stack of at least `bytes` (std::thread cannot choose it). Used where
// the interpreter runs the threads of a simulated block.
class StackThread {
 public:
  StackThread(size_t bytes, std::function<void()> fn);
  StackThread(StackThread&& other) noexcept;
  StackThread& operator=(StackThread&&) = delete;
  StackThread(const StackThread&) = delete;
  ~StackThread();  // joins
  void Join();

 private:
  struct State;
  State* state_ = nullptr;
};

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_LIMITS_HPP_
