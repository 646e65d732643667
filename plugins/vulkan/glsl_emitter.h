// SPDX-License-Identifier: Apache-2.0
// The GLSL compute-shader dialect of the C-family emitter (EmitGlslKernel, emitter.h): names,
// types, expressions and loops (emitter.cc), checked accesses and atomics (glsl_checks.cc), and
// the shader's layout and prelude (glsl_prelude.cc).
#ifndef BACKPLANE_PLUGINS_VULKAN_GLSL_EMITTER_H_
#define BACKPLANE_PLUGINS_VULKAN_GLSL_EMITTER_H_

#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/ir.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "emitter.h"

namespace backplane {
namespace vulkan {

class GlslEmitter : public codegen::CFamilyEmitter {
 public:
  explicit GlslEmitter(const GlslOptions& options)
      : max_threads_(options.max_threads),
        max_push_(options.max_push_constants),
        fp_contract_(options.fp_contract) {}
  KernelLayout layout;

 protected:
  const char* DialectName() const override { return "vulkan"; }

  // ---- Vectors: GLSL's vec2..vec4 (docs/vulkan.md, "Vectors") ----
  // Lanes are subscripts, + - * are GLSL's own, float32 / is bp_fdiv lane by lane (kFdivGlsl's
  // vector overloads), and the base writes every other operation lane by lane into statements
  // before the one being emitted (GLSL has no statement expressions). A contiguous access is one
  // scalar access a lane, of the element the view starts at plus the index: right for any
  // index and any view offset, and the driver's compiler merges them where it can.
  std::string VectorLiteral(ir::DType t, const std::vector<std::string>& lanes) override;
  std::string StatementExpression(const std::string& statements,
                                  const std::string& value) override {
    return HoistStatements(statements, value);
  }
  std::string ContiguousVectorLoad(const ir::Buffer& buffer, ir::DType t,
                                   const std::string& flat) override;
  std::string ContiguousVectorStore(const ir::Buffer& buffer, ir::DType t, const std::string& flat,
                                    const std::string& value) override;

  // The fault record is the kernel's error buffer (docs/vulkan.md): the base's division
  // checks call bp_div_i32(bp_fault, site, a, b) and friends, which GLSL cannot pass a buffer
  // to; `bp_fault` is a constant 0 that the helpers ignore, writing the global bp_status.
  bool HasFaultRecord() const override { return true; }
  // GLSL's (and SPIR-V's) integer +, - and * keep the low bits of the result: they wrap.
  bool SignedArithmeticWraps() const override { return true; }
  std::string FaultRecordType() override { return "int"; }

  std::string Name(const std::string& ir_name) const override;

  std::string TypeName(ir::DType t) override;

  std::string ThreadIndex(ir::ThreadTag tag) override;

  // A control barrier for the workgroup that also makes shared (and buffer) writes visible
  // to the workgroup.
  std::string BarrierStatement() override { return "groupMemoryBarrier(); barrier();"; }

  // GLSL declares workgroup memory at global scope: the Prelude declares every shared
  // allocation, and the statement where the IR allocates it becomes a comment.
  std::string StorageQualifier(ir::StorageScope scope) override {
    return scope == ir::StorageScope::kShared ? "// shared, declared at global scope: " : "";
  }
  // Indices in int32, as GLSL indexes (int64 needs shaderInt64): every index of an access in
  // bounds is under 2^31 (a binding spans at most 2^32 bytes of 2-, 4- or 8-byte elements), where
  // int32 arithmetic gives the IR's int64 result (docs/vulkan.md, "Index arithmetic").
  bool WideIndices() override { return false; }
  void EmitSharedAllocation(const ir::AllocateNode& alloc, const std::string&,
                            const std::string& name, int64_t count) override;

  // float32 division correctly rounded, as the IR says: Vulkan lets OpFDiv be 2.5 ulp off
  // (NVIDIA's driver is: on an H200 a third of `a / 3.0` differed from the interpreter's), so
  // bp_fdiv divides the significands in integers (kFdivGlsl). float64 and float16 keep `/`.
  std::string FloatDivision(const std::string& x, const std::string& y, ir::DType t) override;

  // GLSL's min and max are undefined for a NaN operand; the IR's are C's fmin and fmax.
  std::string FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                          ir::DType) override;
  // A driver may assume `x != x` false; isnan is defined for NaN.
  std::string IsNanText(const std::string& x) override { return "isnan(" + x + ")"; }
  std::string HelperQualifier() override { return ""; }

  std::string IntrinsicName(const std::string& name, ir::DType t) override;

  std::string FloatLiteral(double v, ir::DType t) override;

  std::string EmitIntLiteral(int64_t v, ir::DType t) override;

  // A conversion to float16 rounds through bp_f16 (glsl_prelude.cc says why); any other is
  // GLSL's constructor.
  std::string CastText(const std::string& type, const std::string& operand) override {
    if (type == "float16_t" || type.rfind("f16vec", 0) == 0) {
      uses_f16_ = true;
      return "bp_f16(" + operand + ")";
    }
    return type + "(" + operand + ")";
  }

  // `count` copies of the loop's body, the k-th with the loop variable `at` + k; each only when
  // `at` + k < `stop` where `stop` is given.
  void EmitCopies(const ir::ForNode& loop, const std::string& type, const std::string& var,
                  const std::string& at, int64_t count, const std::string& stop = "");

  // llvmpipe (lavapipe) gives each SIMD group of invocations (8 or 16 of a workgroup, run as
  // the lanes of one vector) a budget of 65535 loop back edges over all its loops together
  // (gallivm's loop limiter) and then leaves every loop after at most one more iteration, with
  // no error (docs/vulkan.md). So (1) an innermost loop whose trip count is not a small
  // constant runs 32 (small body) or 8 iterations per back edge, then 4 per back edge, then
  // the last 3 at most straight-line: the same iterations in the same order, on every device;
  // and (2) after every loop the shader checks that the loop variable reached the end, and
  // records an error in the kernel's error buffer when it did not, which the runtime raises
  // naming the loop.
  void EmitLoop(const ir::ForNode& loop, const std::string& type, const std::string& var,
                const std::string& begin, const std::string& end) override;

  void EmitZeroedArray(const std::string& declaration, const std::string& type,
                       const std::string& name, int64_t count) override;

  // GLSL indexes arrays with 32-bit integers; a storage buffer holds fewer than 2^31
  // elements of 4 bytes or more under every device's maxStorageBufferRange.
  std::string FlatIndex(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices) override;

  // Float temporaries (codegen::CFamilyEmitter::Bind) are `precise` unless the Target allows
  // contraction: glslang then marks what computes them NoContraction itself, as
  // ForbidContraction (codegen.cc) does for every float operation of the SPIR-V.
  std::string TempQualifier(ir::DType t) override {
    return t.is_float() && !fp_contract_ ? "precise " : "";
  }

  void EmitFunction(const ir::PrimFunc& func) override;

  // A shared float array with float atomic min/max is declared uint (shared_bits_): its
  // elements are read and written through their bits.
  bool SharedBits(const ir::Buffer& buffer) {
    return IsShared(buffer) && buffer.dtype().is_float() &&
           shared_bits_.count(Name(buffer.name())) != 0;
  }
  std::string ElementRead(const ir::Buffer& buffer, const std::string& element) override {
    if (!SharedBits(buffer)) return element;
    return (buffer.dtype().bits == 64 ? "uint64BitsToDouble(" : "uintBitsToFloat(") + element + ")";
  }
  std::string ElementWrite(const ir::Buffer& buffer, const std::string& element,
                           const std::string& value) override;
  // Float atomics done by compare-and-swap on the element's bits: min and max, and every
  // float64 atomic (64-bit integer atomics are a wider feature than float64 add).
  static bool CasAtomic(ir::AtomicOp op, ir::DType t) {
    return t.is_float() && (op != ir::AtomicOp::kAdd || t.bits == 64);
  }

  // ---- Bounds checking (-bounds-check; docs/vulkan.md) ----
  // GLSL has no statement expressions and no pointers, so a checked load is one expression
  // with the sequence operator: each index is assigned to a variable declared at the top of
  // main, bp_chk checks it (recording code 3 and giving false when it is out of bounds), and
  // the access is made only when every index passed:
  //   (bp_t1 = int(i), bp_chk(3, 0, bp_t1, int(n)) ? a[bp_t1] : float(0))
  // A checked store is a block that computes the value first (as the interpreter does), then
  // the indices, and stores only when they all passed. An access out of bounds is never made,
  // so an empty buffer is never touched.
  std::string EmitCheckedLoad(const ir::LoadNode& load, int site) override;

  // GLSL's atomicAdd/atomicMin/atomicMax on a storage-buffer or shared element: int32 in core
  // GLSL; int64 (GL_EXT_shader_atomic_int64) and float32 add (GL_EXT_shader_atomic_float) are
  // device features the layout records. float32 min/max is a compare-and-swap loop on the
  // element's bits: on a storage buffer through a uint view of the same binding
  // (bp_bits_<name>), on shared memory on the array itself, declared uint (SharedBits). It
  // runs on every device (NVIDIA's has no VK_EXT_shader_atomic_float2) and computes the IR's
  // fmin/fmax (a NaN operand gives the other), which the extension's need not.
  std::string SignedRemainder(const std::string& x, const std::string& y, ir::DType t) override;

  std::string AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                              const std::string& value, bool shared) override;

  void EmitCheckedAtomic(const ir::AtomicNode& atomic, int site) override;

  void EmitCheckedStore(const ir::StoreNode& store, int site) override;

  // A checked vector access: each index in a variable (a vector one in a vector variable), then
  // every lane's indices checked in lane order (the first lane out of bounds is the one
  // recorded, as the interpreter reports it), and the access of every lane only when all
  // passed. Returns the condition; *lane_flat gets each lane's flat index.
  std::string CheckedVectorIndices(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                                   const std::vector<std::string>& texts, int lanes, int site,
                                   std::string* assign, std::vector<std::string>* lane_flat);
  std::string EmitCheckedVectorLoad(const ir::LoadNode& load, int site);
  void EmitCheckedVectorStore(const ir::StoreNode& store, int site);

  // Declares each index of an access to `buffer` in a variable, in order; returns the condition
  // that they all passed their check (recording the first that did not), and in *flat the flat
  // element index of the variables.
  std::string CheckedIndices(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                             int site, std::string* flat);

  // An index is checked in 64 bits when it or its extent is 64-bit, else in 32.
  std::string IndexType(const ir::Expr& index, const ir::Expr& extent);

  std::string IndexCheck(const std::string& var, const std::string& type, const ir::Expr& extent,
                         size_t dim, int site);

  // The flat element index of checked index variables (row-major, or the declared strides).
  std::string CheckedFlatIndex(const ir::Buffer& buffer, const std::vector<std::string>& vars);

  std::string Prelude() override;

 public:
  void SetFunction(const ir::PrimFunc& f) { func_prelude_ = &f; }

 private:
  void MakeLayout(const ir::PrimFunc& func);

  // `bp_fault` and the helpers of the base's checks that the kernel used (helpers_), in GLSL:
  // the same results as FaultHelpers() in C (a zero divisor gives 0; INT_MIN / -1 wraps;
  // floormod by -1 is 0). They are branch-free: a failed check only notes the invocation's
  // first fault in private variables (bp_note, selects), and main records the note in the
  // error buffer once, at its end (EmitFunction); a division never divides by 0 or -1. One
  // atomic block per check made llvmpipe take 77 s to compile softmax_gpu with -bounds-check.
  std::string FaultHelpersGlsl();

  // A new check site of the kernel (its id is its index).
  uint32_t Site(StatusCode code, std::string what) {
    layout.sites.push_back(StatusSite{code, std::move(what)});
    return static_cast<uint32_t>(layout.sites.size() - 1);
  }

  // The statement that records error `site` with details (value, end, this invocation) of
  // GLSL type `type`.
  std::string Record(uint32_t site, const std::string& type, const std::string& value,
                     const std::string& end);

  static std::string OneLine(std::string text);

  // Loop bodies up to this many characters of IR text (about two short statements) unroll 32
  // times, larger ones 8 times.
  static constexpr size_t kSmallBody = 120;
  // The most copies of a body that nested `unrolled` loops write out (EmitLoop).
  static constexpr int64_t kMaxUnrolledCopies = 256;
  static constexpr int64_t kMaxUnrolledChars = 64 * 1024;  // IR text, all copies together
  int64_t unrolled_copies_ = 1;  // the copies the unrolled loops around the emitter make

  int64_t max_threads_, max_push_;
  bool fp_contract_;
  const ir::PrimFunc* func_prelude_ = nullptr;
  std::vector<std::string> shared_;
  std::vector<std::string> index_temps_;  // "int bp_t3;": checked loads' index variables
  bool uses_round_ = false;
  bool uses_fdiv_ = false;     // a float32 division: bp_fdiv
  bool uses_f16_ = false;      // a conversion to float16: bp_f16
  bool uses_fminmax_ = false;  // a float min or max: bp_fmin, bp_fmax
  bool uses_erf_ = false;
  bool uses_fmaf_ = false;  // a float32 fma: bp_fmaf
  // Storage buffers (by GLSL name) a float atomic min/max updates through a uint view.
  std::set<std::string> cas_buffers_;
  // Aligned contiguous loads of a storage buffer that the kernel does not write read a view of
  // its binding as an array of GLSL vectors (`vec4 bp_v4_a[]`, declared in the Prelude): one
  // access a lane where the scalar view takes one a lane and element. Only buffers the kernel
  // never writes: SPIR-V lets a driver assume that two variables do not alias, so a store
  // through one view and a load through the other could be reordered. Returns the view's name,
  // or "" where `t` or `buffer` has none (not 2 or 4 lanes of 32 bits; a shared or local array;
  // a buffer the kernel writes).
  std::string VectorView(const ir::Buffer& buffer, ir::DType t);
  std::map<std::string, std::pair<size_t, std::string>> vector_views_;  // name -> binding, type
  std::set<const ir::BufferNode*> written_;  // buffers the kernel stores to or updates
  std::set<std::string> shared_bits_;        // shared float arrays kept as uint (SharedBits)
  std::set<std::string> f64_math_;           // float64 intrinsics computed by our helpers
};

}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_GLSL_EMITTER_H_
