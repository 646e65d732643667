// SPDX-License-Identifier: Apache-2.0
// The kernel IR: dtypes, expressions, statements, buffers, PrimFuncs and IRModules, and a
// builder API for host apps. docs/ir.md describes the IR and its text form.
//
//   using namespace backplane::ir;
//   Var n("n", Int32()), i("i", Int32());
//   Buffer a("a", Float32(), {n}), b("b", Float32(), {n}), c("c", Float32(), {n});
//   PrimFunc f("vector_add", {n, a, b, c},
//              For(i, 0, n, ForKind::kParallel, Store(c, {i}, a[i] + b[i])));
//
// Nodes are immutable and shared (std::shared_ptr<const ...>): copying an Expr, Stmt or
// Buffer copies a handle, never the tree. A Var or Buffer is identified by its node, not by
// its name; the verifier (analysis.hpp) checks that names are defined once per function so
// that the text form can resolve them.
//
// Constructors do not type-check (the parser builds whatever the text says and the verifier
// reports what is wrong); they throw Error(kValue) only for what cannot be represented at all
// (an empty handle, a name that is not an identifier, zero lanes).
#ifndef BACKPLANE_IR_IR_HPP_
#define BACKPLANE_IR_IR_HPP_

#include <backplane/ir/error.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {
namespace ir {

// ---- DType ----------------------------------------------------------------------------------

// Type codes: the same numbers as DLPack's DLDataTypeCode (kDLBool is 6 in DLPack >= 0.8).
enum class DTypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kHandle = 3, kBool = 6 };

// A scalar or vector type: int8-64, uint8-64, float16/32/64, bool (bits 8), with lanes >= 1.
// kHandle (bits 64) is the type of a buffer passed to call_packed; it has no text spelling.
struct DType {
  DTypeCode code = DTypeCode::kInt;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  bool is_int() const { return code == DTypeCode::kInt; }
  bool is_uint() const { return code == DTypeCode::kUInt; }
  bool is_integer() const { return is_int() || is_uint(); }
  bool is_float() const { return code == DTypeCode::kFloat; }
  bool is_bool() const { return code == DTypeCode::kBool; }
  bool is_handle() const { return code == DTypeCode::kHandle; }
  bool is_scalar() const { return lanes == 1; }
  // The same type with `n` lanes.
  DType WithLanes(uint16_t n) const { return DType{code, bits, n}; }
  DType Element() const { return WithLanes(1); }
};
inline bool operator==(DType a, DType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
inline bool operator!=(DType a, DType b) { return !(a == b); }

inline DType Int(int bits, int lanes = 1) {
  return DType{DTypeCode::kInt, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
}
inline DType UInt(int bits, int lanes = 1) {
  return DType{DTypeCode::kUInt, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
}
inline DType Float(int bits, int lanes = 1) {
  return DType{DTypeCode::kFloat, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
}
inline DType Bool(int lanes = 1) {
  return DType{DTypeCode::kBool, 8, static_cast<uint16_t>(lanes)};
}
inline DType Handle() { return DType{DTypeCode::kHandle, 64, 1}; }
inline DType Int32() { return Int(32); }
inline DType Int64() { return Int(64); }
inline DType Float16() { return Float(16); }
inline DType Float32() { return Float(32); }
inline DType Float64() { return Float(64); }

// The text spelling: "int32", "float32x4", "bool", "handle".
std::string ToString(DType t);
// Parses a spelling made by ToString (except "handle"); false if `text` is not a dtype.
bool ParseDType(const std::string& text, DType* out);

// ---- Expressions ----------------------------------------------------------------------------

enum class ExprKind : uint8_t {
  kIntImm,      // integer or bool constant
  kFloatImm,    // floating-point constant
  kVar,         // scalar variable
  kBinary,      // a op b
  kNot,         // !a
  kSelect,      // select(cond, a, b)
  kCast,        // dtype(a)
  kLoad,        // buffer[indices]
  kCall,        // math intrinsic: exp(a), pow(a, b), ...
  kCallPacked,  // call_packed("name", args...): a registered global function (host only)
  kRamp,        // ramp(base, stride, lanes): base + [0, stride, 2*stride, ...]
  kBroadcast,   // broadcast(value, lanes)
  kBufferRef,   // a buffer passed by reference, as an argument of call_packed
  kNeg,         // -a (text form version 2)
};

enum class BinaryOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kFloorMod,
  kMin,
  kMax,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,
  kOr,
  kMod,  // a % b: C's remainder, truncated (the sign of a); integers only (text form version 3)
};
// "+", "floordiv", "==", "%", ... (the text spelling).
const char* ToString(BinaryOp op);
bool IsComparison(BinaryOp op);
bool IsLogical(BinaryOp op);

struct ExprNode;
struct VarNode;
struct BufferNode;
struct StmtNode;

// A handle to an immutable expression node; may be empty (default-constructed).
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  // C++ literals: an int32 or a float32 constant. An int where the builder wants a float
  // (Store to a float buffer, LetStmt of a float variable, Select, Min, Max, Binary and Call
  // with a float operand) becomes that float if it converts exactly, else Error(kValue) names
  // its neighbours in that type.
  Expr(int value);     // NOLINT(google-explicit-constructor)
  Expr(double value);  // NOLINT(google-explicit-constructor)

  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  ExprKind kind() const;
  DType dtype() const;
  // The node as T, or nullptr if it is another kind.
  template <typename T>
  const T* As() const;

 private:
  std::shared_ptr<const ExprNode> node_;
};

// A scalar variable: a parameter, a loop variable or a let binding.
class Var : public Expr {
 public:
  Var() = default;
  // Throws Error(kValue) if `name` is not an identifier or is a keyword of the text form.
  Var(std::string name, DType dtype = Int32());
  const VarNode* get() const;
  const VarNode* operator->() const { return get(); }
  const std::string& name() const;
};

// A multi-dimensional array: a function parameter or an allocation.
class Buffer {
 public:
  Buffer() = default;
  // `shape` and `strides` (empty: row-major, contiguous) are integer expressions over scalar
  // parameters. Throws Error(kValue) for a bad name or a strides list of the wrong rank.
  Buffer(std::string name, DType dtype, std::vector<Expr> shape, std::vector<Expr> strides = {});
  const BufferNode* get() const { return node_.get(); }
  const BufferNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  const std::string& name() const;
  DType dtype() const;
  // Loads: a[i] and a({i, j}).
  Expr operator[](Expr index) const;
  Expr operator()(std::vector<Expr> indices) const;

 private:
  std::shared_ptr<const BufferNode> node_;
};

namespace detail {
// Freeing a tree without recursion (docs/ir.md, "Limits"): the destructor of a node with
// children hands them here, and the outermost such destructor on the thread frees them one at
// a time, so dropping a chain 100,000 nodes deep uses constant stack.
void ReleaseLater(Expr& e) noexcept;
void ReleaseLater(std::vector<Expr>& v) noexcept;
}  // namespace detail

struct ExprNode {
  virtual ~ExprNode() = default;
  ExprKind kind;
  DType dtype;

 protected:
  ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
};
struct IntImmNode : ExprNode {
  IntImmNode(DType t, int64_t v) : ExprNode(ExprKind::kIntImm, t), value(v) {}
  int64_t value;
  // Made by Expr(int) from a C++ int: where the builder wants a float (a float operand on the
  // other side, a float buffer, variable or intrinsic) it becomes that float constant if it
  // converts exactly (docs/ir.md, "Literals without a suffix"). Not part of the IR's structure.
  bool from_cxx_int = false;
};
struct FloatImmNode : ExprNode {
  FloatImmNode(DType t, double v) : ExprNode(ExprKind::kFloatImm, t), value(v) {}
  double value;
};
struct VarNode : ExprNode {
  VarNode(DType t, std::string n) : ExprNode(ExprKind::kVar, t), name(std::move(n)) {}
  std::string name;
};
struct BinaryNode : ExprNode {
  BinaryNode(DType t, BinaryOp o, Expr x, Expr y)
      : ExprNode(ExprKind::kBinary, t), op(o), a(std::move(x)), b(std::move(y)) {}
  BinaryOp op;
  Expr a, b;
  ~BinaryNode() override {
    detail::ReleaseLater(a);
    detail::ReleaseLater(b);
  }
};
struct NotNode : ExprNode {
  NotNode(DType t, Expr x) : ExprNode(ExprKind::kNot, t), a(std::move(x)) {}
  Expr a;
  ~NotNode() override { detail::ReleaseLater(a); }
};
// -a: integers wrap (-INT_MIN is INT_MIN), floats flip the sign bit (-0.0 is -0.0, unlike
// 0 - 0.0). Not for bool (use Not).
struct NegNode : ExprNode {
  NegNode(DType t, Expr x) : ExprNode(ExprKind::kNeg, t), a(std::move(x)) {}
  Expr a;
  ~NegNode() override { detail::ReleaseLater(a); }
};
struct SelectNode : ExprNode {
  SelectNode(DType t, Expr c, Expr x, Expr y)
      : ExprNode(ExprKind::kSelect, t), cond(std::move(c)), a(std::move(x)), b(std::move(y)) {}
  Expr cond, a, b;
  ~SelectNode() override {
    detail::ReleaseLater(cond);
    detail::ReleaseLater(a);
    detail::ReleaseLater(b);
  }
};
struct CastNode : ExprNode {
  CastNode(DType t, Expr x) : ExprNode(ExprKind::kCast, t), value(std::move(x)) {}
  Expr value;
  ~CastNode() override { detail::ReleaseLater(value); }
};
struct LoadNode : ExprNode {
  LoadNode(DType t, Buffer b, std::vector<Expr> i)
      : ExprNode(ExprKind::kLoad, t), buffer(std::move(b)), indices(std::move(i)) {}
  Buffer buffer;
  std::vector<Expr> indices;
  ~LoadNode() override { detail::ReleaseLater(indices); }
};
struct CallNode : ExprNode {
  CallNode(DType t, std::string n, std::vector<Expr> a)
      : ExprNode(ExprKind::kCall, t), name(std::move(n)), args(std::move(a)) {}
  std::string name;  // one of Intrinsics()
  std::vector<Expr> args;
  ~CallNode() override { detail::ReleaseLater(args); }
};
struct CallPackedNode : ExprNode {
  CallPackedNode(std::string n, std::vector<Expr> a)
      : ExprNode(ExprKind::kCallPacked, Int32()), name(std::move(n)), args(std::move(a)) {}
  std::string name;  // a registered global function, e.g. "blas.sgemm"
  std::vector<Expr> args;
  ~CallPackedNode() override { detail::ReleaseLater(args); }
};
struct RampNode : ExprNode {
  RampNode(DType t, Expr b, Expr s)
      : ExprNode(ExprKind::kRamp, t), base(std::move(b)), stride(std::move(s)) {}
  Expr base, stride;  // lanes: dtype.lanes
  ~RampNode() override {
    detail::ReleaseLater(base);
    detail::ReleaseLater(stride);
  }
};
struct BroadcastNode : ExprNode {
  BroadcastNode(DType t, Expr v) : ExprNode(ExprKind::kBroadcast, t), value(std::move(v)) {}
  Expr value;  // lanes: dtype.lanes
  ~BroadcastNode() override { detail::ReleaseLater(value); }
};
struct BufferRefNode : ExprNode {
  explicit BufferRefNode(Buffer b)
      : ExprNode(ExprKind::kBufferRef, Handle()), buffer(std::move(b)) {}
  Buffer buffer;
};

struct BufferNode {
  std::string name;
  DType dtype;
  std::vector<Expr> shape;
  std::vector<Expr> strides;  // empty: contiguous, row-major
};

inline ExprKind Expr::kind() const { return node_->kind; }
inline DType Expr::dtype() const { return node_->dtype; }
template <typename T>
const T* Expr::As() const {
  return dynamic_cast<const T*>(node_.get());
}
inline const VarNode* Var::get() const { return static_cast<const VarNode*>(Expr::get()); }
inline const std::string& Var::name() const { return get()->name; }
inline const std::string& Buffer::name() const { return node_->name; }
inline DType Buffer::dtype() const { return node_->dtype; }

// A math intrinsic: its name and number of arguments.
struct Intrinsic {
  const char* name;
  int arity;
};
// exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, erf, fabs, floor, ceil, round, trunc,
// sin, cos, pow, fma. Each returns the dtype of its first argument.
const std::vector<Intrinsic>& Intrinsics();
// The intrinsic called `name`, or nullptr.
const Intrinsic* FindIntrinsic(const std::string& name);

// Expression constructors. Binary ops take the dtype of `a` (comparisons and logical ops:
// bool with a's lanes); the verifier reports operands of different dtypes.
Expr IntImm(DType t, int64_t value);
Expr FloatImm(DType t, double value);
Expr BoolImm(bool value);
// A constant of type `t` (integer, bool or float) with the value `v`.
Expr Const(DType t, double v);
Expr Binary(BinaryOp op, Expr a, Expr b);
Expr Not(Expr a);
// -a, of a's dtype.
Expr Neg(Expr a);
Expr Select(Expr cond, Expr a, Expr b);
Expr Cast(DType t, Expr value);
Expr Load(Buffer buffer, std::vector<Expr> indices);
// Throws Error(kValue) if `name` is not an intrinsic or the argument count is wrong.
Expr Call(const std::string& name, std::vector<Expr> args);
Expr CallPacked(std::string name, std::vector<Expr> args);
Expr Ramp(Expr base, Expr stride, int lanes);
Expr Broadcast(Expr value, int lanes);
Expr Ref(Buffer buffer);
Expr FloorDiv(Expr a, Expr b);
Expr FloorMod(Expr a, Expr b);
// a % b on integers: C's remainder, a - (a / b) * b with `/` truncating, so it has the sign of
// a (floormod has the sign of b); INT_MIN % -1 is 0 and a remainder by 0 is an error, as `/`'s.
Expr Mod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Eq(Expr a, Expr b);
Expr Ne(Expr a, Expr b);

// Operators. A C++ number on one side becomes a constant of the other side's dtype. `%` is Mod.
#define BACKPLANE_IR_DECLARE_OP(op)   \
  Expr operator op(Expr a, Expr b);   \
  Expr operator op(Expr a, int b);    \
  Expr operator op(int a, Expr b);    \
  Expr operator op(Expr a, double b); \
  Expr operator op(double a, Expr b);
BACKPLANE_IR_DECLARE_OP(+)
BACKPLANE_IR_DECLARE_OP(-)
BACKPLANE_IR_DECLARE_OP(*)
BACKPLANE_IR_DECLARE_OP(/)
BACKPLANE_IR_DECLARE_OP(%)
BACKPLANE_IR_DECLARE_OP(<)
BACKPLANE_IR_DECLARE_OP(<=)
BACKPLANE_IR_DECLARE_OP(>)
BACKPLANE_IR_DECLARE_OP(>=)
#undef BACKPLANE_IR_DECLARE_OP
// Logical ops are functions, not && || ! overloads: those would silently change the meaning
// of `if (a && b)` on handles.
Expr And(Expr a, Expr b);
Expr Or(Expr a, Expr b);
// Unary minus: Neg(a).
Expr operator-(Expr a);

// ---- Statements -----------------------------------------------------------------------------

enum class StmtKind : uint8_t {
  kFor,
  kIfThenElse,
  kLetStmt,
  kStore,
  kAllocate,
  kEvaluate,
  kBarrier,
  kSeq,
  kAssign,  // var = value, for a variable declared assignable (text form version 2)
  kAtomic,  // atomic_add(buffer[indices], value), atomic_min, atomic_max (version 2)
};

// The read-modify-write of an atomic statement.
enum class AtomicOp : uint8_t { kAdd, kMin, kMax };
// "atomic_add", "atomic_min", "atomic_max" (the text spelling).
const char* ToString(AtomicOp op);

enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled, kThreadBinding };
// "serial", "parallel", "vectorized", "unrolled", "thread".
const char* ToString(ForKind kind);

// The GPU thread axes a loop can be bound to.
enum class ThreadTag : uint8_t {
  kNone,
  kBlockIdxX,
  kBlockIdxY,
  kBlockIdxZ,
  kThreadIdxX,
  kThreadIdxY,
  kThreadIdxZ,
};
// "blockIdx.x", ...; "" for kNone.
const char* ToString(ThreadTag tag);
// The axis that ToString names ("blockIdx.x", ...); false for any other text, "" included.
bool ParseThreadTag(std::string_view name, ThreadTag* tag);
// A kernel's launch axes as the text form writes them: "blockIdx.x,threadIdx.x" ("" for none).
std::string ToString(const std::vector<ThreadTag>& axes);

// How a parallel loop's iterations are shared among threads (OpenMP's schedule clause):
// kDefault lets the code generator choose (static today); chunk 0 is the runtime's default.
enum class ScheduleKind : uint8_t { kDefault, kStatic, kDynamic, kGuided };
// "default", "static", "dynamic", "guided".
const char* ToString(ScheduleKind kind);

enum class StorageScope : uint8_t { kGlobal, kShared, kLocal };
const char* ToString(StorageScope scope);

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  StmtKind kind() const;
  template <typename T>
  const T* As() const {
    return dynamic_cast<const T*>(node_.get());
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

namespace detail {
void ReleaseLater(Stmt& s) noexcept;
void ReleaseLater(std::vector<Stmt>& v) noexcept;
}  // namespace detail

struct StmtNode {
  virtual ~StmtNode() = default;
  StmtKind kind;

 protected:
  explicit StmtNode(StmtKind k) : kind(k) {}
};
// The body runs `extent` times (none when extent <= 0) with var = min, min + step,
// min + 2 * step, ... in var's dtype (wrapping). min, extent and step are evaluated once,
// before the first iteration. An empty `step` is 1 (the text form writes none).
struct ForNode : StmtNode {
  ForNode() : StmtNode(StmtKind::kFor) {}
  Var var;
  Expr min, extent;
  ForKind for_kind = ForKind::kSerial;
  ThreadTag thread = ThreadTag::kNone;  // set iff for_kind == kThreadBinding
  Stmt body;
  Expr step;                                       // empty: 1 (never on a thread-bound loop)
  ScheduleKind schedule = ScheduleKind::kDefault;  // parallel loops only
  int64_t chunk = 0;                               // > 0 only with a schedule
  // Whether the loop steps by anything but 1 (a step that is not the constant 1).
  bool HasStep() const;
  ~ForNode() override {
    detail::ReleaseLater(min);
    detail::ReleaseLater(extent);
    detail::ReleaseLater(step);
    detail::ReleaseLater(body);
  }
};
struct IfThenElseNode : StmtNode {
  IfThenElseNode() : StmtNode(StmtKind::kIfThenElse) {}
  Expr cond;
  Stmt then_case;
  Stmt else_case;  // may be empty
  ~IfThenElseNode() override {
    detail::ReleaseLater(cond);
    detail::ReleaseLater(then_case);
    detail::ReleaseLater(else_case);
  }
};
// `var` is bound to `value` in `body` (in the text form: the rest of the block). An
// `assignable` variable (`var x: T = value` in the text form) may be assigned in its body.
struct LetStmtNode : StmtNode {
  LetStmtNode() : StmtNode(StmtKind::kLetStmt) {}
  Var var;
  Expr value;
  Stmt body;
  bool assignable = false;
  ~LetStmtNode() override {
    detail::ReleaseLater(value);
    detail::ReleaseLater(body);
  }
};
struct StoreNode : StmtNode {
  StoreNode() : StmtNode(StmtKind::kStore) {}
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  ~StoreNode() override {
    detail::ReleaseLater(indices);
    detail::ReleaseLater(value);
  }
};
// `buffer` exists in `body` (in the text form: the rest of the block).
struct AllocateNode : StmtNode {
  AllocateNode() : StmtNode(StmtKind::kAllocate) {}
  Buffer buffer;
  StorageScope scope = StorageScope::kGlobal;
  Stmt body;
  ~AllocateNode() override { detail::ReleaseLater(body); }
};
struct EvaluateNode : StmtNode {
  EvaluateNode() : StmtNode(StmtKind::kEvaluate) {}
  Expr value;
  ~EvaluateNode() override { detail::ReleaseLater(value); }
};
// All threads of a block wait here (__syncthreads).
struct BarrierNode : StmtNode {
  BarrierNode() : StmtNode(StmtKind::kBarrier) {}
};
// var = value, where var is an assignable variable in scope.
struct AssignNode : StmtNode {
  AssignNode() : StmtNode(StmtKind::kAssign) {}
  Var var;
  Expr value;
  ~AssignNode() override { detail::ReleaseLater(value); }
};
// buffer[indices] = buffer[indices] op value as one indivisible step with respect to every other
// atomic statement on the same element, from any thread or parallel iteration: how many threads
// accumulate into one output. op is +, or min / max as the IR's (fmin / fmax on floats). The
// element is a scalar of int32, int64, float32 or float64 in a param buffer (global memory) or
// a shared allocation; the order of the updates is unspecified (float additions may round
// differently from run to run, on a device).
struct AtomicNode : StmtNode {
  AtomicNode() : StmtNode(StmtKind::kAtomic) {}
  AtomicOp op = AtomicOp::kAdd;
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  ~AtomicNode() override {
    detail::ReleaseLater(indices);
    detail::ReleaseLater(value);
  }
};
struct SeqNode : StmtNode {
  SeqNode() : StmtNode(StmtKind::kSeq) {}
  std::vector<Stmt> seq;  // never a SeqNode inside, never exactly one element
  ~SeqNode() override { detail::ReleaseLater(seq); }
};

inline StmtKind Stmt::kind() const { return node_->kind; }

// A serial, parallel, vectorized or unrolled loop over [min, min + extent).
Stmt For(Var var, Expr min, Expr extent, ForKind kind, Stmt body);
// A loop that runs `extent` times with var = min, min + step, ... (step may be negative:
// For(i, n - 1, n, -1, ...) runs i = n - 1 down to 0).
Stmt For(Var var, Expr min, Expr extent, Expr step, ForKind kind, Stmt body);
// The loop over [begin, end) by `step` > 0 (or down from begin to just above end by a step
// < 0), as C's `for (i = begin; i < end; i += step)`: a For whose extent is the trip count,
// computed in var's dtype. `step` must be a nonzero integer.
Stmt ForRange(Var var, Expr begin, Expr end, int64_t step, ForKind kind, Stmt body);
// A parallel loop with a schedule (chunk 0: the runtime's default chunk).
Stmt ParallelFor(Var var, Expr min, Expr extent, ScheduleKind schedule, int64_t chunk, Stmt body);
// `loop` with another body (every other field kept).
Stmt WithBody(const ForNode& loop, Stmt body);
// A loop bound to a GPU thread axis.
Stmt ThreadFor(Var var, ThreadTag tag, Expr min, Expr extent, Stmt body);
Stmt IfThenElse(Expr cond, Stmt then_case, Stmt else_case = Stmt());
Stmt LetStmt(Var var, Expr value, Stmt body);
// An assignable variable: like LetStmt, and `body` may Assign it.
Stmt DeclareVar(Var var, Expr value, Stmt body);
// `let` with another body (assignable kept).
Stmt WithBody(const LetStmtNode& let, Stmt body);
Stmt Assign(Var var, Expr value);
// An atomic read-modify-write of one element (AtomicNode).
Stmt Atomic(AtomicOp op, Buffer buffer, std::vector<Expr> indices, Expr value);
Stmt Store(Buffer buffer, std::vector<Expr> indices, Expr value);
Stmt Allocate(Buffer buffer, StorageScope scope, Stmt body);
Stmt Evaluate(Expr value);
Stmt Barrier();
// Flattens nested sequences; one statement is returned as is.
Stmt Seq(std::vector<Stmt> stmts);

// ---- Functions and modules ------------------------------------------------------------------

// A parameter of a PrimFunc: a scalar Var or a Buffer.
class Param {
 public:
  Param(Var v) : var_(std::move(v)) {}        // NOLINT(google-explicit-constructor)
  Param(Buffer b) : buffer_(std::move(b)) {}  // NOLINT(google-explicit-constructor)
  bool is_buffer() const { return static_cast<bool>(buffer_); }
  const Var& var() const { return var_; }
  const Buffer& buffer() const { return buffer_; }

 private:
  Var var_;
  Buffer buffer_;
};

struct PrimFunc {
  PrimFunc() = default;
  PrimFunc(std::string n, std::vector<Param> p, Stmt b, std::map<std::string, std::string> a = {})
      : name(std::move(n)), params(std::move(p)), body(std::move(b)), attrs(std::move(a)) {}
  std::string name;
  std::vector<Param> params;
  Stmt body;
  std::map<std::string, std::string> attrs;
  // A kernel's launch axes, in the order a launch passes their extents; unset for a function
  // that is not a kernel. The text form writes them as the attribute "launch_params"
  // ("blockIdx.x,threadIdx.x"): the parser reads that attribute into this field and the printer
  // writes it back, so `attrs` never holds "launch_params" (Verify refuses it there).
  std::optional<std::vector<ThreadTag>> launch_axes;
};

// PrimFuncs by name, in the order they were added.
class IRModule {
 public:
  IRModule() = default;
  // Throws Error(kValue) if a function of that name exists.
  void Add(PrimFunc func);
  // The function called `name`, or nullptr.
  const PrimFunc* Find(const std::string& name) const;
  const std::vector<PrimFunc>& functions() const { return functions_; }

 private:
  std::vector<PrimFunc> functions_;
};

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_IR_HPP_
