// SPDX-License-Identifier: Apache-2.0
// Passes that rewrite a module. SplitHostDevice separates host code from the device kernels
// that the build driver hands to a target's code generator (docs/ir.md, "SplitHostDevice").
#ifndef BACKPLANE_IR_TRANSFORM_HPP_
#define BACKPLANE_IR_TRANSFORM_HPP_

#include <backplane/ir/ir.hpp>
#include <set>
#include <string>
#include <vector>

namespace backplane {
namespace ir {

// The two halves of a module: the host functions (every function of the input, by the same
// name and params) and the device kernels they launch.
struct SplitResult {
  IRModule host;
  IRModule device;
};

// Each outermost loop bound to a thread axis (with everything inside it: a "region") becomes
// a device PrimFunc named "<func>_kernel", or "<func>_kernel0", "<func>_kernel1", ... when the
// function has several, in the order they appear. Its params:
//  1. the scalar params of <func> that it uses, and those that the shapes and strides of the
//     buffers it uses mention, in the order of <func>'s params;
//  2. the other free scalar vars it uses (host loop vars, let vars), as scalar params of their
//     dtype, outermost first;
//  3. the param buffers it uses, in the order of <func>'s params;
//  4. the device workspaces it uses, outermost first: `global` allocations of host code
//     (outside every region), which stay in the host function; the scalars their shapes
//     mention are params in 1 or 2 (docs/ir.md, "Device workspaces").
// Its attrs: "kernel" = "1"; its launch_axes: the thread tags used inside it, in the order
// blockIdx.x,blockIdx.y,blockIdx.z,threadIdx.x,threadIdx.y,threadIdx.z (printed as the attr
// "launch_params", e.g. "blockIdx.x,threadIdx.x"). Its body is the region, unchanged, except for
// `local` arrays whose shape is not constant: each becomes a workspace of host code around the
// launch, of (threads of the grid) x (its elements), each thread indexing its own zero-filled slice
// (docs/ir.md, "Local arrays sized at run time").
//
// The host function keeps its params and attrs; the region is replaced by
//   Evaluate(CallPacked("<kernel>", {the kernel's params: Var exprs, then Ref(buffer)...,
//                                    then Cast(int64, extent) of each launch param in order}))
// so a launcher finds the grid in the trailing arguments (Interpreter::Run accepts them).
//
// The input must pass Verify (default options; thread-bound loops are allowed whatever
// `device_is_cpu` says). Throws Error(kVerify), naming the function and the buffer or
// statement, for:
//  * when device_is_cpu is false: a load or store of a param buffer outside every region, or
//    in the extent of a thread-bound loop, which the host computes (host code cannot touch
//    device memory);
//  * a buffer allocated outside a region and used inside one that is not a workspace (a
//    `local` allocation), a workspace with strides or whose shape loads memory, and (when
//    device_is_cpu is false) host code that loads or stores a workspace;
//  * a thread axis bound twice in one region with different extents;
//  * a runtime-sized `local` array sized by a variable of its region or a load, made outside
//    the loop of one of its kernel's axes, with strides, or accessed with a vector index;
//  * a thread extent that uses a variable defined inside its region (the host computes it);
//  * a kernel name that another function of the module already has.
// A function with no thread-bound loop stays whole in `host`. Both results pass Verify.
SplitResult SplitHostDevice(const IRModule& module, bool device_is_cpu);

// What SplitHostDevice(module, /*device_is_cpu=*/false) guarantees of its result, checked again
// on a host part and kernels that come from elsewhere: a saved module file, which anyone may
// have written (docs/security.md, "Saved modules"). `kernels` are the device functions the host
// code may launch, as the imported device modules hold them; a call_packed of another name goes
// to a global function and is not a launch. Every problem is one message, "in function 'f':
// <problem> in `<statement>`" (a kernel's: "in kernel 'k': ..."):
//  * `host` does not pass Verify (then nothing else is checked);
//  * host code binds a loop to a thread axis (it runs no grid);
//  * host code loads or stores one of its param buffers, or a buffer it passes to call_packed
//    (a workspace): they live in device memory, which host code never touches;
//  * a kernel has no "launch_params" attr, lists an axis it does not bind or leaves out one it
//    binds, lists them out of the canonical order (blockIdx.x ... threadIdx.z), or binds an axis
//    with two extents;
//  * a launch is not the one SplitHostDevice writes: the kernel's params in order (a scalar
//    expression of the param's dtype for a scalar param; a param buffer of the host function or
//    a compact `global` allocation of its host code, of the same dtype and rank, for a buffer
//    param), then for each launch param int64(extent),
//    where extent is the kernel's extent for that axis with its params replaced by the call's
//    arguments, so the grid is the one the kernel's loops assume.
std::vector<std::string> SplitErrors(const IRModule& host,
                                     const std::vector<const PrimFunc*>& kernels);

// The packed calls of host code `host` that name a function outside `callable` (the functions of
// the modules that `host`'s module imports, when it may call nothing else): one message for each
// name a function calls, "in function 'f': call_packed(\"name\") names no function of the
// imported modules in `<statement>`" (its first call there), the first 100, then a count of the
// rest. For a host part that passes SplitErrors.
std::vector<std::string> CallsOutside(const IRModule& host, const std::set<std::string>& callable);

// Loops with a step, as loops by 1 over a counter, for code generators that write loops by 1
// (the C-family emitter calls it first; a third party's code generator may too):
//   for i in kind(min, extent, step) schedule(...) { body }
// becomes
//   let i_start: T = min            (each of the three only when it is not a literal)
//   let i_count: T = extent
//   let i_step: T = step
//   for i_k in kind(0, i_count) schedule(...) {
//     let i: T = i_start + i_k * i_step
//     body
//   }
// with fresh names (no name of the function is reused): the same iterations in the same order,
// min, extent and step evaluated once in that order. Loops without a step are kept as they
// are, and so is a module without such loops (the same nodes).
IRModule LowerLoopSteps(const IRModule& module);

// The module as one that a reader of IR text `version` reads (docs/ir.md, "Versions"): the
// same functions, names, params and attrs, with TextVersion(result) <= version, computing the
// same results for every input, the faults the interpreter reports included. `module` itself
// (the same nodes) when TextVersion(module) <= version already. For version 1 (the constructs
// of version 2 that have a version-1 form):
//  * loops with a step: as LowerLoopSteps;
//  * schedules of parallel loops: dropped (the default schedule; only how the iterations are
//    shared among threads changes);
//  * an assignable variable `var s: T = v` becomes `alloc s: T[1] local` (the rest of its block),
//    a store of v to s[0], a store for each assignment and a load for each read; reads inside a
//    parallel, vectorized or thread-bound loop (its bounds included) of a variable declared
//    outside it (which the loop cannot assign), and reads in an allocation's shape, read a
//    `let` bound to s[0] right before the loop or allocation, so that a kernel of
//    SplitHostDevice takes the value as a scalar param and a workspace is sized by a value;
//  * a negation `-x`: of a literal, the negated literal (wrapping); of an integer, `0 - x`
//    (which version 1 writes `-x`); of a float, `x * -1.0` in x's type (the same value for
//    every x, zeros and infinities included; a NaN's sign bit may differ).
// Each new name (the let before a loop, LowerLoopSteps's) is one the function does not use.
// Throws Error(kUnsupported) for the first construct that has no form in `version`, in the
// order of the functions and of their text (parameters first): atomics for version 1 (which
// need version 2) and C's remainder `%` for versions 1 and 2 (which needs version 3), with the
// message "function 'F' uses CONSTRUCT (`TEXT`), which needs IR text version N", e.g.
// "function 'hist' uses atomic_add (`atomic_add(h[b], 1)`), which needs IR text version 2"
// (CONSTRUCT: "atomic_add", "atomic_min", "atomic_max" or "C's remainder %"; TEXT quoted as
// QuoteText does). Throws Error(kValue) for a version outside 1 to kTextFormatVersion, and for
// an assignment to a variable that is not an assignable variable in scope (a module that does
// not pass Verify). Runs with the stack the module's depth needs (limits.hpp).
IRModule LowerToVersion(const IRModule& module, int version);

// An index as the IR computes it (docs/ir.md, "Index arithmetic"): the integer +, - and * and
// the negations that form a scalar index of a load, store or atomic are computed in int64,
// their operands narrower than 64 bits converted by value, so `a[base + i]` with int32 `base`
// and `i` indexes the exact sum, never a wrapped one. Returns `index` itself when it is not a
// scalar integer narrower than 64 bits whose top node is one of those; else the same tree in
// int64 with a Cast at each other operand (the original nodes, shared). The interpreter and
// the code generators that index memory in 64 bits compute indices through it. Recursive over
// the arithmetic on top of the index: call it where the tree's depth is allowed for (the
// interpreter's and the code generators' walks are).
Expr WidenIndex(const Expr& index);

// The ramp of a contiguous access's last index, `ramp(base, 1, lanes)`, whose base and lanes
// are index arithmetic too (docs/ir.md, "Index arithmetic"); nullptr for any other index.
// Pass the last index of an access only.
const RampNode* ContiguousRamp(const Expr& last_index);

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_TRANSFORM_HPP_
