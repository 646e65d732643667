// SPDX-License-Identifier: Apache-2.0
// The C-family source emitter: one base that turns the kernel IR into C-like source, and a
// dialect per language, each in its plugin (C in cpu, OpenCL C in opencl, CUDA C in cuda). A
// dialect overrides the hooks where its language differs: types, function signatures, thread
// indices, barriers, storage qualifiers, loop pragmas, intrinsic names, packed calls.
//
//   MyDialectEmitter emitter;                    // derives from CFamilyEmitter
//   std::string source = emitter.Emit(module);   // module passed ir::Verify
//
// Emit throws ir::Error(kValue) for what the dialect cannot express (a thread-bound loop in
// C, a vector width it has no type for), naming the function and the construct.
#ifndef BACKPLANE_CODEGEN_C_FAMILY_HPP_
#define BACKPLANE_CODEGEN_C_FAMILY_HPP_

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/ir.hpp>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace backplane {
namespace codegen {

// ---- Run-time faults (the error channel of generated code; docs/codegen-guide.md) ----------
// A place in the generated code that can fail at run time where the IR defines an error: an
// integer division by zero (always checked), an index out of bounds (with bounds checking on)
// or a heap allocation whose size overflows or that the system refuses. Generated code never
// traps there: it records the first fault in a record and goes on with a harmless value (a
// load gives element 0 of a non-empty buffer, a division 0, an allocation's body is skipped);
// the host reads the record after the call and raises FaultMessage as the error.
struct FaultSite {
  enum class Kind { kDivisionByZero, kOutOfBounds, kAllocation };
  Kind kind = Kind::kDivisionByZero;
  std::string func;    // the PrimFunc
  std::string buffer;  // kOutOfBounds, kAllocation: the buffer's name
  std::string text;    // the IR text of the expression or statement (kAllocation: the shape)
  std::string dtype;   // kAllocation: the element type
};
// The record as generated code sees it (bp_fault_t, 32 bytes, the same in every dialect):
// `site` is 0 until the first fault claims it (an atomic compare-exchange of 0 with the
// site's index + 1), then arg[] says what happened:
//   kOutOfBounds: arg = {index, extent, dimension}
//   kAllocation:  arg = {reason, a, b}: reason 0: the size overflows (a = the size in bytes
//                 as the bits of a double); 1: a negative extent (a = dimension, b = extent);
//                 2: the allocation failed (a = bytes)
struct FaultRecord {
  int32_t site = 0;
  int32_t reserved = 0;
  int64_t arg[3] = {0, 0, 0};
};
static_assert(sizeof(FaultRecord) == 32, "bp_fault_t is 32 bytes in generated code");
// The error message of a fault, as the interpreter words it ("f: integer division by zero in
// `a / b`", "f: index 4 is out of bounds for dimension 0 of buffer 'a' (extent 4) in `a[i]`").
std::string FaultMessage(const FaultSite& site, const FaultRecord& record);
// The message of `record` against a module's `sites` (site 0: no fault, returns "").
std::string FaultMessage(const std::vector<FaultSite>& sites, const FaultRecord& record);
// Whether a fault is the system running out of memory (BP_ERR_OUT_OF_MEMORY) rather than the
// kernel's inputs (BP_ERR_INVALID_ARGUMENT).
bool FaultIsOutOfMemory(const std::vector<FaultSite>& sites, const FaultRecord& record);
// The sites as JSON text and back, for saved modules.
std::string FaultSitesToJson(const std::vector<FaultSite>& sites);
std::vector<FaultSite> FaultSitesFromJson(const std::string& json);

// Checks the generated code carries, beyond the always-on division check.
struct CheckOptions {
  bool bounds_check = false;  // every load and store checks each index against its extent
};

class CFamilyEmitter {
 public:
  virtual ~CFamilyEmitter() = default;
  // The whole translation unit for every function of `module`.
  std::string Emit(const ir::IRModule& module);
  void set_checks(CheckOptions checks) { checks_ = checks; }
  // The fault sites of the last Emit, indexed by the record's site - 1.
  const std::vector<FaultSite>& fault_sites() const { return sites_; }

 protected:
  // ---- Dialect hooks ----------------------------------------------------------------------
  // Text before the functions (includes, typedefs, helpers). Called after every function has
  // been emitted, so it can depend on what they used (vector types, helpers).
  virtual std::string Prelude() = 0;
  // Emits one function: signature, parameter unpacking, body (via EmitBody), closing brace.
  virtual void EmitFunction(const ir::PrimFunc& func) = 0;
  // The spelling of a scalar or vector type.
  virtual std::string TypeName(ir::DType t);
  // The index of a thread axis ("blockIdx.x", "get_group_id(0)"); C has none.
  virtual std::string ThreadIndex(ir::ThreadTag tag);
  // The statement that makes all threads of a block wait; C has none.
  virtual std::string BarrierStatement();
  // The declaration qualifier of an allocation in `scope` ("__local ", "__shared__ ", "").
  virtual std::string StorageQualifier(ir::StorageScope scope);
  // Lines to put before a loop of this kind (pragmas), at the current indentation; `trips`
  // is the loop's trip count as C.
  virtual void EmitLoopPragma(const ir::ForNode& loop, const std::string& trips);
  // For a parallel loop that a dialect may run as a thread region: the C condition under which
  // it does (the loop is then emitted twice, the region's copy after EmitLoopPragma and a plain
  // one), or "" for one copy (the default, and every loop a dialect never splits).
  virtual std::string ParallelRegionCondition(const ir::ForNode& loop, const std::string& trips);
  // Emits a loop that is not thread-bound, after its pragmas: `var` of `type` from `begin`
  // while below `end`, running loop.body. C: one `for` statement.
  virtual void EmitLoop(const ir::ForNode& loop, const std::string& type, const std::string& var,
                        const std::string& begin, const std::string& end);
  // A packed call as an expression; C-family device languages have none.
  virtual std::string CallPacked(const ir::CallPackedNode& call);
  // The function name of a math intrinsic for a scalar of type `t` ("expf", "exp", "native_exp").
  virtual std::string IntrinsicName(const std::string& name, ir::DType t);
  // A floating-point literal of type `t`.
  virtual std::string FloatLiteral(double v, ir::DType t);
  // The IR's min/max of floats x and y of scalar type `t` (IEEE 754-2019's minimumNumber and
  // maximumNumber: a NaN operand gives the other one, -0 is below +0). The base writes compares
  // and a select with C's `signbit` (x, y may be written several times).
  virtual std::string FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                                  ir::DType t);
  // Whether float `x` is a NaN, as an expression (`(x != x)`; GLSL: isnan).
  virtual std::string IsNanText(const std::string& x) { return "(" + x + " != " + x + ")"; }
  // The IR's conversion of float `x` (of type `from`, 32 or 64 bits) to integer type `to`: NaN
  // gives 0 and a value out of range saturates (C leaves both undefined). A call of a helper
  // that NumericHelpers() defines.
  std::string FloatToInt(const std::string& x, ir::DType from, ir::DType to);
  // The definitions of the helpers FloatToInt called, for the dialect's prelude ("" if none).
  std::string NumericHelpers();
  // The definitions of bp_floordiv and bp_floormod (int64 division and remainder rounded toward
  // negative infinity), each declared with `qualifiers` ("static inline"), for a dialect whose
  // prelude defines int64_t.
  static std::string FloorDivHelpers(const std::string& qualifiers);
  // The quotient of floats x / y of scalar type `t`, rounded as the IR says (correctly). The
  // base writes `(x / y)`; a dialect whose `/` may be less exact computes it its own way
  // (vulkan: OpFDiv may be 2.5 ulp off).
  virtual std::string FloatDivision(const std::string& x, const std::string& y, ir::DType t);
  // Whether the dialect computes indices as the IR does, in int64 (ir::WidenIndex: the +, -
  // and * that form an index never wrap at 32 bits); the base's answer, true. vulkan answers
  // false and indexes in int32, which gives the same index for every access in bounds: its
  // buffers hold fewer than 2^31 elements (docs/vulkan.md, "Index arithmetic").
  virtual bool WideIndices() { return true; }
  // `indices` as the dialect computes them (WidenIndex each, where WideIndices()).
  std::vector<ir::Expr> AsIndexed(const std::vector<ir::Expr>& indices);
  // The declaration of a `shared` allocation of `count` elements, named `name` (the body
  // follows); `count` is -1 when its shape is sized at launch (launch::SharedArray). The base
  // declares an array with StorageQualifier and refuses a launch-sized one; a dialect may place
  // it in dynamically sized shared memory instead (CUDA does).
  virtual void EmitSharedAllocation(const ir::AllocateNode& alloc, const std::string& type,
                                    const std::string& name, int64_t count);
  // An integer literal of type `t` ("5", "((int64_t)5ll)").
  virtual std::string EmitIntLiteral(int64_t v, ir::DType t);
  // `operand` (already parenthesized where it needs to be) converted to `type`: C's
  // "(type)operand"; a language without C casts spells a constructor ("type(operand)").
  virtual std::string CastText(const std::string& type, const std::string& operand);
  // Emits the declaration `declaration` ("float acc[4]", qualifier included) of a zero-filled
  // array `name` of `count` elements of `type`. C: "declaration = {0};".
  virtual void EmitZeroedArray(const std::string& declaration, const std::string& type,
                               const std::string& name, int64_t count);
  // An allocation too large for the stack or of a size known only at run time. The base
  // refuses it; C allocates it on the heap.
  virtual void EmitHeapAllocation(const ir::AllocateNode& alloc, const std::string& type,
                                  const std::string& name, const std::string& size);
  // Whether the language has vector types with lane subscripts and elementwise + - * /
  // (GNU C vector extensions, OpenCL). If not, vector expressions are an error.
  virtual bool HasVectorTypes() const { return true; }
  // ---- Vectors (docs/codegen-guide.md, "Vector accesses") ----
  // A vector value of type `t` whose lanes are the texts `lanes` (a ramp's, a broadcast's).
  // C and OpenCL: the compound literal "((T){a, b, ...})".
  virtual std::string VectorLiteral(ir::DType t, const std::vector<std::string>& lanes);
  // The value of the contiguous vector access `buffer`[flat .. flat + lanes of t), `flat` an
  // index text that may be written once only (it is bound to a temporary where it is needed
  // more often). C: a memcpy into a vector temporary, which makes no assumption on alignment;
  // a dialect writes its vector access, taking an aligned fast path only where it is provably
  // (or checked to be) aligned, and scalar accesses otherwise.
  virtual std::string ContiguousVectorLoad(const ir::Buffer& buffer, ir::DType t,
                                           const std::string& flat);
  // The statement (one line, `;` included) that stores the vector `value` (a name, of type t)
  // at `buffer`[flat .. flat + lanes of t).
  virtual std::string ContiguousVectorStore(const ir::Buffer& buffer, ir::DType t,
                                            const std::string& flat, const std::string& value);
  // The largest power of two, at most 64, that the flat index of the contiguous access being
  // emitted (inside ContiguousVectorLoad and ContiguousVectorStore) is known to be a multiple
  // of; 1 when nothing is known. What the emitter knows: constants, sums, products, min, max,
  // selects and floormod of them, the values of lets, and the conjuncts `floormod(v, c) == r`
  // and `v % c == 0` of the ifs around the access (so a kernel tests `floormod(n, 4) == 0` once
  // and its vector accesses of rows n long are aligned inside). A dialect whose aligned vector
  // access is cheaper when this is a multiple of the lanes uses it without a run-time test.
  int64_t ContiguousAlignment() const { return contiguous_alignment_; }
  // Whether a constant-size local or small global allocation is declared as an array that the
  // code reaches only through a restrict pointer (C), rather than used as the array itself.
  virtual bool RestrictStackArrays() const { return false; }
  // The bytes of constant-sized arrays a function may keep on the stack at once (the local
  // ones, and global ones of at most 64 KiB); an array that would go past it is allocated on
  // the heap (EmitHeapAllocation). -1: no budget (device code, whose arrays are registers or
  // private memory the driver places).
  virtual int64_t StackBudget() const { return -1; }
  // The largest `local` array device code may have, in bytes a thread (512 KiB, CUDA's local
  // memory a thread); a larger one is refused at build.
  static constexpr int64_t kDevicePrivateBytes = 512 * 1024;
  // The bytes an element of a `local` or stack array of dtype `t` takes as TypeName declares
  // it: its bits in whole bytes, times its lanes, unless the dialect computes the type in a
  // wider one (float16 as a float: 4).
  virtual int64_t ArrayElementBytes(ir::DType t) { return ((t.bits + 7) / 8) * t.lanes; }

  // ---- Atomics (docs/codegen-guide.md, "Atomics") ----
  // The statement (one line; a block `{ ... }` where it needs several) that makes
  // `element` = `element` op `value` indivisible against every other atomic on that element.
  // `element` is an lvalue of dtype `t` (int32, int64, float32 or float64; the verifier allows
  // no other), in shared memory when `shared` (a `shared` allocation), else in global memory (a
  // param buffer) or, on a CPU, an allocation of the function; `value` is a name, evaluated once.
  // op is + or the IR's min / max (fmin / fmax on floats). The base refuses atomics.
  virtual std::string AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                                      const std::string& value, bool shared);
  // An atomic with bounds checking on (`site` from AccessSite): the value first, then each
  // index checked, and the update only when all passed. The base spells it as EmitCheckedStore.
  virtual void EmitCheckedAtomic(const ir::AtomicNode& atomic, int site);
  // Whether `buffer` is a `shared` allocation of the function being emitted.
  bool IsShared(const ir::Buffer& buffer) const { return shared_allocs_.count(buffer.get()) != 0; }
  // A scalar element of `buffer` (`element`, e.g. "a[i]") as an operand, and the statement (no
  // `;`) that stores `value` in it: the base's unchecked scalar loads and stores go through
  // them, and so must a dialect's own checked ones. The base reads and assigns the element
  // itself; a dialect that keeps a buffer in another type converts (vulkan: a shared float
  // array with float atomic min/max is uint, compare-and-swapped, uintBitsToFloat when read).
  virtual std::string ElementRead(const ir::Buffer& buffer, const std::string& element) {
    (void)buffer;
    return element;
  }
  virtual std::string ElementWrite(const ir::Buffer& buffer, const std::string& element,
                                   const std::string& value) {
    (void)buffer;
    return element + " = " + value;
  }

  // ---- The fault record (docs/codegen-guide.md, "Run-time checks") ----
  // Whether the dialect has the record: a variable `bp_fault` of type FaultRecordType() in
  // every function, and FaultHelpers() in its prelude. The default is false: integer
  // division is then emitted unchecked (as before) and bounds checking is refused at build
  // time; a dialect (GLSL) keeps working without overriding anything below.
  virtual bool HasFaultRecord() const { return false; }
  // The type of `bp_fault` as a helper's parameter ("bp_fault_t*", "__global bp_fault_t*").
  virtual std::string FaultRecordType() { return "bp_fault_t*"; }
  // An expression, true when it claimed the record: `record->site` from 0 to `site_plus_one`,
  // atomically where threads share the record.
  virtual std::string FaultClaim(const std::string& record, const std::string& site_plus_one);
  // An expression that runs `statements` and then has the value of `value`: a GNU statement
  // expression "({ statements value; })" (gcc, clang, OpenCL C); CUDA C++ spells an
  // immediately called lambda; GLSL runs the statements before the statement being emitted
  // (HoistStatements). Used by bounds-checked scalar loads and the lane-by-lane vector code.
  virtual std::string StatementExpression(const std::string& statements, const std::string& value);
  // Adds `statements` to the statements that run before the one being emitted (in the
  // innermost conditional arm being emitted, as Bind) and returns `value`.
  std::string HoistStatements(const std::string& statements, const std::string& value);
  // The qualifiers of a helper function ("static inline", "static __device__ inline").
  virtual std::string HelperQualifier() { return "static inline"; }
  // The typedef of bp_fault_t and the helpers the functions used (call from Prelude()).
  std::string FaultHelpers();
  // Records a new fault site of the function being emitted; returns its site index + 1.
  int AddFaultSite(FaultSite::Kind kind, const std::string& buffer, const std::string& text,
                   const std::string& dtype = "");
  // A load and a store with bounds checking on (`site`: its fault site, from AccessSite). The
  // base spells them with statement expressions, C casts and bp_chk(..., &ok); a language
  // without those (GLSL) overrides both.
  virtual std::string EmitCheckedLoad(const ir::LoadNode& load, int site);
  virtual void EmitCheckedStore(const ir::StoreNode& store, int site);

  // ---- Long expressions (docs/codegen-guide.md, "Long expressions") ------------------------
  // Generated code never nests an expression deeper than about kMaxExprDepth brackets: a
  // subexpression whose text nests deeper is bound to a temporary declared just before the
  // statement that uses it (`const float bp_t7 = <subexpression>;`), in evaluation order, with
  // its exact dtype. Nothing leaves a conditionally evaluated position: an arm of a select, or
  // the right operand of a scalar && or ||, that needs temporaries becomes an if statement
  // assigning one. Line() writes the pending declarations before its own line.
  static constexpr int kMaxExprDepth = 64;
  // The qualifiers of a temporary of `t` before its type ("" by default; GLSL: "precise " for
  // float temporaries when contraction is off).
  virtual std::string TempQualifier(ir::DType t);
  // Binds `text`, an expression of dtype `t`, to a new const temporary declared before the
  // statement being emitted (in the innermost conditional arm being emitted); returns its name.
  std::string Bind(ir::DType t, const std::string& text);
  // Emits `exprs`, the operands of one construct, in evaluation order: when an operand's
  // temporaries would run before an earlier operand with a side effect (a checked load or
  // division, a packed call), that earlier operand is bound to a temporary first. With
  // `duplicated` the caller writes each operand's text more than once (min, max, a ramp's lanes),
  // so an operand with a side effect or a long text is bound to a temporary and evaluated once.
  std::vector<std::string> EmitInOrder(const std::vector<ir::Expr>& exprs, bool duplicated = false);

  // ---- Helpers for dialects ---------------------------------------------------------------
  std::string EmitExpr(const ir::Expr& e);
  void EmitStmt(const ir::Stmt& s);
  // The C identifier for an IR name (IR names that are C keywords or collide with the
  // emitter's own bp_ names get a suffix). A language with more reserved words extends it.
  virtual std::string Name(const std::string& ir_name) const;
  // The flat element offset of `indices` in `buffer` (row-major, or the declared strides), as
  // int64 arithmetic; a language that indexes with 32-bit integers overrides it.
  virtual std::string FlatIndex(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices);
  // Appends a line at the current indentation, after the declarations of the temporaries that
  // the expressions in it need (Bind).
  void Line(const std::string& text);
  // Throws ir::Error(kValue) "<dialect> code generator: in function '<f>': <what>".
  [[noreturn]] void Fail(const std::string& what) const;
  // floor(x / y) (or, with `mod`, x - floor(x / y) * y) on float operands of type `t`, as the
  // interpreter computes it (float16 in float, rounded once by the caller).
  std::string FloatFloorDivMod(bool mod, const std::string& x, const std::string& y, ir::DType t);
  // x % y (BinaryOp::kMod) on integers of type `t` where no fault record checks the divisor:
  // a divisor of -1 gives 0 (INT_MIN % -1 does not trap); y's text is written twice.
  std::string UncheckedRemainder(const std::string& x, const std::string& y, ir::DType t);
  // x % y on signed integers, y a constant other than 0 and -1: C's `(x % y)`. A dialect whose
  // `%` is not C's on negative operands (GLSL) overrides it.
  virtual std::string SignedRemainder(const std::string& x, const std::string& y, ir::DType t);
  // Whether the dialect's signed integer +, - and * and negation wrap at the type's width, as the
  // IR's do (C compiled with -fwrapv; GLSL). Where they do not (C and C++ as OpenCL C and CUDA
  // compile them: an overflow is undefined, and the compiler may assume none, folding
  // `x + 1 > x` to true), the base computes each such operation that may overflow in the
  // unsigned type of its width and converts back: those that ir::SignedOverflowRiskNodes finds
  // (an expression it proves in range stays plain signed arithmetic, which the compiler
  // optimizes as before, and the arithmetic of an index is exact). The default is false.
  virtual bool SignedArithmeticWraps() const { return false; }
  // The same message, as ir::Error(kUnsupported): valid IR the dialect cannot express (a dtype
  // its language or target lacks), BP_ERR_UNSUPPORTED to the caller of bp_build.
  [[noreturn]] void Unsupported(const std::string& what) const;
  // The element count of `buffer` when its shape is all numbers, else -1 (or Fail, naming the
  // buffer, with `must_be_constant`). Fails when the count or its bytes pass INT64_MAX.
  int64_t ConstantElements(const ir::Buffer& buffer, bool must_be_constant) const;
  // A fresh temporary name (bp_t0, bp_t1, ...).
  std::string Temp();
  // Whether the integer +, -, *, negation or ramp `e` must be computed so that it wraps (above,
  // SignedArithmeticWraps), and the text of one so computed: `x op y` (op "-" with x empty for a
  // negation) in the unsigned type `u`, converted to `t`.
  bool NeedsWrapping(const ir::Expr& e) const;
  std::string WrappingArithmetic(const std::string& op, ir::DType t, ir::DType u,
                                 const std::string& x, const std::string& y);
  // Whether `e` reads a variable declared assignable (`var`) in the function being emitted.
  bool MentionsAssignable(const ir::Expr& e) const;
  // The dialect's name for messages ("c", "opencl").
  virtual const char* DialectName() const = 0;

  const ir::PrimFunc* func_ = nullptr;  // the function being emitted
  std::ostringstream out_;              // the functions' text
  int indent_ = 0;
  std::set<std::string> vector_types_;  // vector type spellings used, for the prelude
  bool uses_floordiv_ = false;
  int64_t stack_bytes_ = 0;  // the bytes of the arrays on the stack where the emitter is
  // FloatToInt's helpers used: name -> (from, to).
  std::map<std::string, std::pair<ir::DType, ir::DType>> float_to_int_;
  int parallel_depth_ = 0;                   // > 0 inside a parallel loop
  std::set<const ir::VarNode*> assignable_;  // variables declared with `var`
  // The signed expressions of the function being emitted that may overflow, where the dialect's
  // signed arithmetic does not wrap (NeedsWrapping).
  ir::SignedOverflowNodes overflow_;
  std::set<const ir::BufferNode*> shared_allocs_;  // `shared` allocations
  CheckOptions checks_;
  std::vector<FaultSite> sites_;   // of the whole module
  std::set<std::string> helpers_;  // helpers used: "div_i32", "chk", "expf", ...

 private:
  // An operand emitted by EmitOperand, and what it did.
  struct Operand {
    std::string text;
    ir::DType dtype;
    bool simple = false;   // a literal or a variable: evaluating it has no effect
    size_t end = 0;        // the size of the pending context after it
    bool effects = false;  // it notes a fault or calls the host
    bool reads = false;    // it loads from a buffer
    bool writes = false;   // it calls the host, which may write buffers
    int64_t writes_at_end = 0;
  };
  Operand EmitOperand(const ir::Expr& e);
  // Binds `op` to a temporary declared where it was emitted when anything emitted after it
  // into the pending context would otherwise run before it and may observe or change what it
  // does (or, with `duplicated`, when its text is to be written more than once).
  void KeepInOrder(Operand* op, bool duplicated = false);
  // Binds `op` to a temporary declared right after the statements it needs.
  void BindAt(Operand* op);
  std::string EmitExprText(const ir::Expr& e);
  std::string EmitSelect(const ir::SelectNode& s, const ir::Expr& e);
  std::string EmitLogical(const ir::BinaryNode& b, const ir::Expr& e);
  // Emits `e` into a context of its own (an arm that runs only on a condition): returns its
  // text, and in *lines the statements to run before it (empty when it needs none).
  std::string EmitArm(const ir::Expr& e, std::vector<std::string>* lines);
  void EmitIf(const ir::IfThenElseNode& n);
  // The pending statements: pending_[0] goes before the statement being emitted; an inner
  // context belongs to a conditional arm being emitted.
  std::vector<std::vector<std::string>> pending_{1};
  int64_t effects_ = 0, reads_ = 0, writes_ = 0;
  std::string EmitVectorElementwise(const ir::Expr& e);
  std::string EmitLoad(const ir::Expr& e);
  void EmitStore(const ir::Stmt& s);
  void EmitAtomic(const ir::Stmt& s);
  // The flat index of lane `l` of a gather or scatter whose index texts are `lane_idx`: each
  // vector index is bound to a temporary declared in `decls` and read at lane `l`.
  std::string LaneFlatIndex(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                            std::vector<std::string> lane_idx, const std::string& l,
                            std::string* decls);
  // The flat offset of already checked int64 index texts (FlatIndex for strings).
  std::string CheckedFlat(const ir::Buffer& buffer, const std::vector<std::string>& idx);
  std::string EmitBinary(const ir::BinaryNode& b, const ir::Expr& e);
  std::string EmitCall(const ir::CallNode& call);
  // An integer division (`op` kDiv, kFloorDiv, kFloorMod or kMod) of x by y of operand type
  // `t`, checked for a zero divisor and wrapping INT_MIN / -1 (INT_MIN % -1 is 0; site: the
  // text of the expression).
  std::string CheckedIntDivision(ir::BinaryOp op, ir::DType t, const std::string& x,
                                 const std::string& y, const ir::Expr& divisor, const ir::Expr& e);
  // The start of `index` checked against `extent` (dimension `dim`): the caller appends the
  // name of the access's ok flag and ")".
  std::string CheckedIndex(const std::string& index, const std::string& extent, int dim, int site);
  struct CheckedAccess;
  CheckedAccess BeginCheckedAccess();
  std::string CheckedAccessIndex(const ir::Buffer& buffer, const std::vector<std::string>& scalar,
                                 int lanes, int site, const std::string& ok);
  // The bounds-check site of a load or store of `buffer` (0 when checking is off).
  int AccessSite(const ir::Buffer& buffer, const std::string& text);
  int temp_counter_ = 0;

  // ---- What is known of integers modulo powers of two (alignment.cc) ----
  // value == residue (mod modulus), modulus a power of two from 1 (nothing known) to 64.
  struct Congruence {
    int64_t modulus = 1, residue = 0;
  };
  // The variables changed in a scope, with what they were before (none: not known).
  struct CongruenceScope {
    std::vector<std::pair<const ir::ExprNode*, std::optional<Congruence>>> saved;
  };
  // `residue` modulo the largest power of two dividing `modulus` (0: any), at most 64.
  static Congruence Known(int64_t modulus, int64_t residue);
  // What is known of x + y, of x * y, and of a value that is either x or y.
  static Congruence Sum(Congruence x, Congruence y);
  static Congruence Product(Congruence x, Congruence y);
  static Congruence Either(Congruence x, Congruence y);
  Congruence CongruenceOf(const ir::Expr& e, int depth) const;
  Congruence FlatCongruence(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices);
  // The largest power of two (at most 64) known to divide the flat index of `indices`.
  int64_t AlignmentOf(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices);
  // Records what `cond` says of variables modulo powers of two, for the arm it guards.
  void Assume(const ir::Expr& cond, CongruenceScope* scope);
  // Records what `var` is modulo powers of two (`known`) in the scope being emitted.
  void Bound(const ir::Var& var, Congruence known, CongruenceScope* scope);
  void Set(const ir::ExprNode* var, Congruence known, CongruenceScope* scope);
  void Restore(CongruenceScope* scope);
  std::map<const ir::ExprNode*, Congruence> congruences_;
  int64_t contiguous_alignment_ = 1;
};

}  // namespace codegen
}  // namespace backplane

#endif  // BACKPLANE_CODEGEN_C_FAMILY_HPP_
