// SPDX-License-Identifier: Apache-2.0
// Structural equality, the verifier, which buffers a statement writes, and the int32 overflow
// check.
#ifndef BACKPLANE_IR_ANALYSIS_HPP_
#define BACKPLANE_IR_ANALYSIS_HPP_

#include <backplane/ir/ir.hpp>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace backplane {
namespace ir {

// True if the two trees have the same shape, dtypes, constants and names, and their
// variables and buffers correspond one to one (a Var of one tree always matches the same
// Var of the other).
bool StructuralEqual(const Expr& a, const Expr& b);
bool StructuralEqual(const Stmt& a, const Stmt& b);
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b);
bool StructuralEqual(const IRModule& a, const IRModule& b);

struct VerifyOptions {
  // The device target is a CPU: loops bound to thread axes are an error.
  bool device_is_cpu = false;
};

// Every problem found, one message each: "in function 'f': <problem> in `<statement>`".
// The checks are listed in docs/ir.md ("Verifier"). A message quotes at most a couple of
// hundred characters of a statement or expression (the middle elided with " ... "), and past
// the first 100 messages the rest are counted in one last message ("... and N more problems"),
// so the report on a huge tree with a problem at every node stays small.
std::vector<std::string> VerifyErrors(const IRModule& module, const VerifyOptions& options = {});
// Throws Error(kVerify) with all the messages, one a line, if there are any.
void Verify(const IRModule& module, const VerifyOptions& options = {});

// The buffers `s` may write: those it stores to, and those it passes to call_packed (the
// callee may write them), in the order met, with repeats. Code generators use it to refuse a
// written buffer that overlaps another argument. The pointers are borrowed from `s`.
std::vector<const BufferNode*> WrittenBuffers(const Stmt& s);

// Whether `pred` holds for `e` or any expression inside it (visited without recursion, so at
// any depth; shared subtrees are visited once).
bool AnyExpr(const Expr& e, const std::function<bool(const Expr&)>& pred);

// Calls `visit` on `s` and every statement nested in it (loop, let and allocation bodies, both
// branches of an if, a sequence's items), in pre-order: a statement before its children, a
// then-branch before its else-branch, a sequence's items in order. Without recursion, so at
// any depth. Expressions are not visited (AnyExpr is for those).
void ForEachStmt(const Stmt& s, const std::function<void(const Stmt&)>& visit);

// Integer expressions of `func` whose exact value can pass the range of their signed type of at
// most 32 bits (and so wrap) for some arguments, one message each: "int32 expression `n + 1023`
// in function 'vector_add' can overflow for n > 2147482624: ...", with the values it reaches
// and how to rewrite it; loop variables whose last value passes their type are reported too.
// Interval arithmetic (docs/ir.md, "Int32 overflow check"): a scalar param ranges over its
// dtype (a dimension of a buffer param over >= 0, a threadIdx extent up to 1024), a loop
// variable over its bounds, a let over its value's range, narrowed by the conditions of the
// enclosing ifs, selects, && and ||; the +, - and * that form an index are exact (int64) and
// not reported, nor is an explicit cast, int64 or an unsigned type. It may report an
// expression that cannot overflow (it knows few relations between variables), so callers show
// the messages as warnings (`backplane build`). Past 100 messages a function's rest are counted
// in one. Runs with the stack the function's depth needs (limits.hpp).
std::vector<std::string> Int32OverflowRisks(const PrimFunc& func);
std::vector<std::string> Int32OverflowRisks(const IRModule& module);

// What Int32OverflowRisks finds, as nodes, and the same for int64, for a code generator whose
// dialect leaves signed overflow undefined (OpenCL C, CUDA C++; docs/codegen-guide.md, "Integer
// arithmetic"): the signed integer expressions (and the loops, for their variables) that may
// pass their type's range for some arguments. A signed expression that is not in `nodes` stays
// within its type for every argument, so plain signed arithmetic computes it exactly; one in it
// may wrap and must be computed so that it wraps. The +, - and * of an index are exact (int64:
// docs/ir.md, "Index arithmetic") and never in it. A ramp whose lanes `base + l * stride' may
// pass the range is in it too. When the analysis stops early (its step budget), `complete` is
// false and `nodes` holds every signed +, -, *, negation and ramp of `func`.
struct SignedOverflowNodes {
  std::set<const void*> nodes;
  bool complete = true;
};
SignedOverflowNodes SignedOverflowRiskNodes(const PrimFunc& func);

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_ANALYSIS_HPP_
