// SPDX-License-Identifier: Apache-2.0
// The IR interpreter as the oracle for any kernel, not only the catalog's: a function of a
// built module runs on a device and, on copies of the same inputs, on the interpreter
// (backplane/ir/interp.hpp) over the IR the module was built from; every buffer is compared
// with a tolerance by dtype (docs/host-guide.md, "Checking a kernel against the interpreter").
// Used by `backplane run --check`, the conformance kit's codegen tests and host apps:
//
//   runner::Oracle oracle = runner::Oracle::FromModule(module);     // or Oracle(ir::Parse(...))
//   const ir::PrimFunc& f = oracle.Function("scale");
//   std::vector<runner::CheckArg> args = runner::MakeCheckArgs(f, {{"n", "1000"}}, /*seed=*/1);
//   runner::CheckResult r = runner::RunChecked(module, oracle, "scale", dev, args);
//   if (!r.ok) std::cerr << r.error << "\n";   // function, buffer, index, got, expected
#ifndef BACKPLANE_RUNNER_CHECK_HPP_
#define BACKPLANE_RUNNER_CHECK_HPP_

#include <backplane/backplane.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/ir.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace backplane {
namespace runner {

// One argument of a checked call, exact in its dtype.
struct CheckArg {
  std::string name;  // the param's name
  ir::DType dtype;   // the scalar's dtype or the buffer's element dtype
  bool is_buffer = false;
  int64_t i = 0;                   // a scalar of an int, uint or bool dtype
  double f = 0;                    // a scalar of a float dtype
  std::vector<int64_t> shape;      // a buffer's extents
  std::vector<uint8_t> bytes;      // a buffer's elements, row-major, as the dtype stores them
  size_t count() const;            // elements of a buffer
  double Element(size_t k) const;  // element k of a buffer as a double (int64 exact to 2^53)
};

// The value `text` for scalar param `param` of function `func`, into `out` (name, dtype,
// i or f). Integers in the dtype's range (decimal, or 0x hex; uint64 up to INT64_MAX, what
// a call can pass), bool as true/false/1/0, floats as decimal or hex floats, inf and nan,
// finite values within the dtype's range. Throws Error(BP_ERR_INVALID_ARGUMENT) naming the
// function, the param, its dtype, the range and an example of a value that fits.
void ParseScalar(const std::string& func, const ir::Var& param, const std::string& text,
                 CheckArg* out);

// Arguments for a call of `f`: each scalar from `values` (name -> text, ParseScalar); a float
// scalar missing from `values` is random in [0.5, 2); an integer or bool one must be given
// (Error naming it and the --dim to give). Buffers get the shapes their expressions give,
// filled from a std::mt19937_64 seeded with `seed`: floats uniform in [0.1, 1) (no zero, no
// sign: sums and products of inputs do not cancel), integers in [0, 10), bools 0 or 1. A
// name in `values` that is no scalar param is an error naming the params.
std::vector<CheckArg> MakeCheckArgs(const ir::PrimFunc& f,
                                    const std::map<std::string, std::string>& values,
                                    uint64_t seed);

// The relative tolerance for elements of dtype `t`: 0 (exact) for integers and bool;
// 1e-2 for float16, 1e-4 for float32, 1e-10 for float64. An element passes when
//   |got - expected| <= rtol * max(|expected|, 1e-3 * max |expected| over the buffer)
//                      + the dtype's smallest normal value,
// or both are NaN, or both are the same infinity.
double RelativeTolerance(ir::DType t);

// The IR a module computes, run by the interpreter. A module built for a CPU Target keeps
// its whole IR; a split one (kind "ir_host") keeps the host IR and imports device modules
// that keep their kernels' IR: the host code runs on the interpreter and its packed calls
// run the kernels on the interpreter too.
class Oracle {
 public:
  // The IR as written (a kernel file); functions with thread axes run as a GPU grid.
  explicit Oracle(ir::IRModule ir);
  // The IR `m` keeps (InspectSource("ir") of it and its imports). Throws
  // Error(BP_ERR_NOT_FOUND) naming the module kind when it keeps none: pass the kernel file
  // it was built from instead (Oracle(ir::Parse(text, file)), `backplane run --ir FILE`).
  static Oracle FromModule(const Module& m);

  // The function `name`; throws Error(BP_ERR_NOT_FOUND) naming the functions there are.
  const ir::PrimFunc& Function(const std::string& name) const;
  // Runs `func` on `args` in place (buffers are read and written in args[i].bytes).
  void Run(const std::string& func, std::vector<CheckArg>* args) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

struct CheckOptions {
  // A relative tolerance for every float buffer instead of RelativeTolerance(dtype) (for a
  // kernel known to reorder long reductions); < 0: by dtype. Integers stay exact.
  double rtol = -1;
};

struct CheckResult {
  bool ok = false;            // the call ran and every buffer matches the interpreter's
  std::string error;          // why not: the mismatch, or the error of the call
  double max_ratio = 0;       // the largest |got - expected| / allowed over all elements (<= 1 ok)
  std::vector<CheckArg> got;  // the arguments after the device call (buffers downloaded)
};

// Runs `func` of `m` on `dev` with `args` (copied to tensors on the device, one call, then a
// stream sync), and `func` of `oracle` on copies of the same arguments; compares every
// buffer (inputs too: a kernel may write in place). A mismatch reports the function, the
// buffer, the first differing index (flat and per dimension), got, expected, the tolerance
// and how many elements differ. Nothing throws for a failing kernel: errors become !ok.
CheckResult RunChecked(const Module& m, const Oracle& oracle, const std::string& func, Device dev,
                       const std::vector<CheckArg>& args, const CheckOptions& options = {});

// Compares buffer `got` with `want` (same name, dtype, shape) as RunChecked does: "" when
// they match, else the message. `max_ratio` (optional) gets the largest error/allowed.
std::string CompareBuffer(const std::string& func, const CheckArg& got, const CheckArg& want,
                          const CheckOptions& options = {}, double* max_ratio = nullptr);

// A scalar argument as the value a packed call takes (float64 for a float dtype, else int64).
bp_value_t ScalarValue(const CheckArg& a);

// The values of a call for CallPacked, with tensors on `dev` holding the buffers' bytes.
class CheckDeviceArgs {
 public:
  CheckDeviceArgs(const std::vector<CheckArg>& args, Device dev);
  const std::vector<bp_value_t>& values() const { return values_; }
  // Copies every buffer back into `args` (same layout as the constructor's).
  void Download(std::vector<CheckArg>* args) const;

 private:
  std::vector<Tensor> tensors_;
  std::vector<bp_value_t> values_;
};

}  // namespace runner
}  // namespace backplane

#endif  // BACKPLANE_RUNNER_CHECK_HPP_
