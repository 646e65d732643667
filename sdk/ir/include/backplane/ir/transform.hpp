// SPDX-License-Identifier: Apache-2.0
// Passes that rewrite a module. SplitHostDevice separates host code from the device kernels
// that the build driver hands to a target's code generator (docs/ir.md, "SplitHostDevice").
#ifndef BACKPLANE_IR_TRANSFORM_HPP_
#define BACKPLANE_IR_TRANSFORM_HPP_

#include <backplane/ir/ir.hpp>

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
//  3. the param buffers it uses, in the order of <func>'s params.
// Its attrs: "kernel" = "1" and "launch_params" = the thread tags used inside it, comma-
// separated, in the order blockIdx.x,blockIdx.y,blockIdx.z,threadIdx.x,threadIdx.y,threadIdx.z
// (e.g. "blockIdx.x,threadIdx.x"). Its body is the region, unchanged.
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
//  * a buffer allocated outside a region and used inside one;
//  * a thread axis bound twice in one region with different extents;
//  * a thread extent that uses a variable defined inside its region (the host computes it);
//  * a kernel name that another function of the module already has.
// A function with no thread-bound loop stays whole in `host`. Both results pass Verify.
SplitResult SplitHostDevice(const IRModule& module, bool device_is_cpu);

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_TRANSFORM_HPP_
