// SPDX-License-Identifier: Apache-2.0
// Checking runtime arguments against a PrimFunc's parameters, and evaluating the integer
// expressions (shapes, strides, launch extents) that depend on them. No C ABI types here: the
// core turns its DLTensors into ArgViews (docs/ir.md, "Argument checking").
#ifndef BACKPLANE_IR_SIGNATURE_HPP_
#define BACKPLANE_IR_SIGNATURE_HPP_

#include <backplane/ir/ir.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane {
namespace ir {

// A runtime argument as a backend sees it. It borrows everything it points to; the pointers
// must stay valid while a call that takes the ArgView runs.
struct ArgView {
  enum class Kind { kInt, kFloat, kBuffer };
  Kind kind = Kind::kInt;
  int64_t i = 0;                     // kInt
  double f = 0;                      // kFloat
  void* data = nullptr;              // kBuffer: first element (byte offset already applied)
  DType dtype;                       // kBuffer: element dtype (lanes 1)
  int ndim = 0;                      // kBuffer
  const int64_t* shape = nullptr;    // kBuffer: ndim extents
  const int64_t* strides = nullptr;  // kBuffer: in elements; null means compact row-major
  void* user = nullptr;              // opaque to the IR library (the core passes its DLTensor*)
};

// Shorthands for the three kinds of ArgView.
inline ArgView IntArg(int64_t v) {
  ArgView a;
  a.i = v;
  return a;
}
inline ArgView FloatArg(double v) {
  ArgView a;
  a.kind = ArgView::Kind::kFloat;
  a.f = v;
  return a;
}
inline ArgView BufferArg(void* data, DType dtype, int ndim, const int64_t* shape,
                         const int64_t* strides = nullptr, void* user = nullptr) {
  ArgView a;
  a.kind = ArgView::Kind::kBuffer;
  a.data = data;
  a.dtype = dtype;
  a.ndim = ndim;
  a.shape = shape;
  a.strides = strides;
  a.user = user;
  return a;
}

// Checks `args` against `func`'s params:
//  * the count;
//  * a scalar param gets kInt (int, uint and bool params: a value in the range of the dtype;
//    uint64 takes 0..INT64_MAX, bool 0 or 1) or kInt/kFloat (float params);
//  * a buffer param gets kBuffer with the same element dtype, the same rank, each extent
//    equal to the param's shape expression evaluated from the scalar args (any integer
//    expression over scalar params: [n], [m, k], [(n + 15) / 16]), data that is not null
//    unless the tensor is empty, and strides: the param's declared strides, evaluated, or
//    compact row-major when it declares none (a null strides pointer means compact
//    row-major). The stride of a dimension of extent 1 is not compared: it never moves an
//    index.
// Returns "" when everything matches, else ONE message (the first mismatch, in parameter
// order) naming the function, the parameter by name and position (counted from 0), what was
// expected and what was given, and what to do, e.g.
//   "matmul: argument 4 'b' has shape [64, 33], expected [k, n] = [64, 32] (k = 64, n = 32
//    from the scalar arguments); pass a tensor of that shape"
// Never throws for bad arguments (a shape expression that cannot be evaluated, e.g. a
// division by zero, is reported in the message).
std::string CheckArgs(const PrimFunc& func, const std::vector<ArgView>& args);
// The same with `depth` = ArgCheckDepth(func), computed once for a function called often
// (a launch path): CheckArgs alone measures the parameters' expressions on every call.
std::string CheckArgs(const PrimFunc& func, const std::vector<ArgView>& args, int64_t depth);
// How deep the expressions CheckArgs evaluates (the buffers' shapes and strides) are.
int64_t ArgCheckDepth(const PrimFunc& func);

// CheckArgs prepared once, for a function called often (a kernel's launch path). It answers
// what CheckArgs answers. When every extent and declared stride of the buffer params is a
// number or a scalar param (the common case: [n], [m, k], [16]) and ranks are at most
// kMaxRank, arguments that pass are checked with a few compares per parameter, without
// walking the IR; any mismatch, and any other function, goes to CheckArgs for its message.
class ArgCheck {
 public:
  static constexpr int kMaxRank = 8;
  // `func` must outlive the ArgCheck.
  explicit ArgCheck(const PrimFunc& func);
  std::string operator()(const std::vector<ArgView>& args) const;

 private:
  // An extent or stride the fast path reads: a number, or scalar param `param`'s value
  // wrapped to `dtype`.
  struct Term {
    int64_t value = 0;
    int param = -1;  // -1: the number `value`
    DType dtype;
  };
  struct ParamCheck {
    bool buffer = false;
    DType dtype;             // the scalar's or the buffer's element dtype
    int64_t lo = 0, hi = 0;  // an integer scalar's range
    int rank = 0;
    size_t shape = 0;    // the buffer's first Term in terms_ (rank of them)
    size_t strides = 0;  // its declared strides' first Term (rank of them)
    bool has_strides = false;
  };
  bool Passes(const std::vector<ArgView>& args) const;
  bool Read(const Term& t, const std::vector<ArgView>& args, int64_t* out) const;

  const PrimFunc* func_;
  int64_t depth_;
  bool fast_ = true;  // false: every call goes to CheckArgs
  std::vector<ParamCheck> params_;
  std::vector<Term> terms_;
};

// Evaluates an integer expression over scalar params of `func`, reading their values from
// `args` (in param order; only the scalar params' entries are read). Integer ops wrap at their
// dtype's width and divide as the interpreter does (docs/ir.md, "Interpreter"). A Var is
// matched to a param by node, else by name. Used by CheckArgs and by backends to compute
// launch extents. Throws Error(kValue) naming the variable if it is not a scalar param (or its
// argument is missing or not an integer), for a float or non-scalar subexpression, a load,
// and for a division by zero.
int64_t EvalIntExpr(const PrimFunc& func, const Expr& e, const std::vector<ArgView>& args);

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SIGNATURE_HPP_
