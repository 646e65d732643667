// SPDX-License-Identifier: Apache-2.0
// The GLSL compute-shader dialect of the C-family emitter, one shader per kernel.
#include "emitter.h"

#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "f64_math.h"

namespace backplane {
namespace vulkan {

namespace {

// Words GLSL reserves beyond C's (the base renames C's): an IR name that is one gets a suffix.
const std::set<std::string>& GlslReservedWords() {
  static const std::set<std::string> kWords = {
      "attribute", "varying", "buffer", "shared", "coherent", "readonly", "writeonly", "resource",
      "layout", "centroid", "flat", "smooth", "patch", "sample", "subroutine", "in", "out", "inout",
      "uniform", "invariant", "precise", "discard", "lowp", "mediump", "highp", "precision",
      "common", "partition", "active", "input", "output", "filter", "image", "superp",
      "noperspective", "noinline", "vec2", "vec3", "vec4", "ivec2", "ivec3", "ivec4", "uvec2",
      "uvec3", "uvec4", "bvec2", "bvec3", "bvec4", "dvec2", "dvec3", "dvec4", "mat2", "mat3",
      "mat4", "dmat2", "dmat3", "dmat4", "sampler", "texture", "atomic_uint", "dot", "cross",
      "length", "distance", "normalize", "mix", "step", "clamp", "sign", "fract", "mod", "barrier",
      "int64_t", "uint64_t", "float64_t", "double", "uint",
      // Reserved for future use (GLSL 4.60, 3.6), beyond C's.
      "fixed", "external", "interface", "hvec2", "hvec3", "hvec4", "fvec2", "fvec3", "fvec4",
      "cast", "sampler3DRect", "demote", "float16_t", "float32_t",
      // Built-in functions the emitted code calls: a variable of that name would hide them.
      "isnan", "isinf", "roundEven", "inversesqrt", "exp2", "log2", "atanh", "findMSB",
      "floatBitsToUint", "uintBitsToFloat", "floatBitsToInt", "intBitsToFloat", "packDouble2x32",
      "unpackDouble2x32", "atomicAdd", "atomicMin", "atomicMax", "atomicCompSwap", "atomicExchange",
      "groupMemoryBarrier", "memoryBarrier", "memoryBarrierShared", "memoryBarrierBuffer", "ldexp",
      "frexp"};
  return kWords;
}

// bp_fdiv(a, b): a / b in float32, correctly rounded (round to nearest even, subnormal
// results too) with integer operations only, which Vulkan computes exactly: the significands
// (23 fraction bits and the hidden one, a subnormal's normalized) are divided by 8 bits at a
// time, which keeps every partial remainder under 2^32, to 26 quotient bits and a sticky bit;
// the quotient is then rounded at the position the result's exponent gives. Zero, infinite and
// NaN operands give IEEE 754's results.
const char* const kFdivGlsl =
    "float bp_fdiv(float a, float b) {\n"
    "  uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);\n"
    "  uint sgn = (ua ^ ub) & 0x80000000u;\n"
    "  uint aa = ua & 0x7fffffffu, ab = ub & 0x7fffffffu;\n"
    "  if (aa > 0x7f800000u || ab > 0x7f800000u) return uintBitsToFloat(0x7fc00000u);\n"
    "  if (aa == 0x7f800000u) {\n"
    "    return uintBitsToFloat(ab == 0x7f800000u ? 0x7fc00000u : (sgn | 0x7f800000u));\n"
    "  }\n"
    "  if (ab == 0x7f800000u) return uintBitsToFloat(sgn);\n"
    "  if (ab == 0u) return uintBitsToFloat(aa == 0u ? 0x7fc00000u : (sgn | 0x7f800000u));\n"
    "  if (aa == 0u) return uintBitsToFloat(sgn);\n"
    "  int xa = int(aa >> 23), xb = int(ab >> 23);\n"
    "  uint ma = aa & 0x7fffffu, mb = ab & 0x7fffffu;\n"
    "  if (xa == 0) { int s = 23 - findMSB(ma); ma <<= uint(s); xa = 1 - s; } else { ma |= "
    "0x800000u; }\n"
    "  if (xb == 0) { int s = 23 - findMSB(mb); mb <<= uint(s); xb = 1 - s; } else { mb |= "
    "0x800000u; }\n"
    "  uint q = ma / mb, r = ma - q * mb;\n"
    "  for (int k = 0; k < 3; ++k) {\n"
    "    r <<= 8u;\n"
    "    uint d = r / mb;\n"
    "    r -= d * mb;\n"
    "    q = (q << 8u) | d;\n"
    "  }\n"
    "  r <<= 2u;\n"
    "  uint d2 = r / mb;\n"
    "  r -= d2 * mb;\n"
    "  q = (q << 2u) | d2;\n"
    "  int msb = findMSB(q);\n"
    "  int e = msb - 26 + xa - xb + 127;\n"
    "  if (e > 254) return uintBitsToFloat(sgn | 0x7f800000u);\n"
    "  int shift = msb - 23 + (e < 1 ? 1 - e : 0);\n"
    "  if (shift > 27) return uintBitsToFloat(sgn);\n"
    "  uint kept = q >> uint(shift), rem = q & ((1u << uint(shift)) - 1u);\n"
    "  uint hv = 1u << uint(shift - 1);\n"
    "  if (rem > hv || (rem == hv && (r != 0u || (kept & 1u) != 0u))) kept += 1u;\n"
    "  uint bits = e < 1 ? kept : (uint(e - 1) << 23) + kept;\n"
    "  return uintBitsToFloat(sgn | bits);\n"
    "}\n";

// bp_fmin/bp_fmax: the IR's float min and max (C's fmin and fmax: a NaN operand gives the
// other one), which GLSL's min and max leave undefined; float and double (GLSL overloads).
const char* const kFminMaxGlsl =
    "float bp_fmin(float a, float b) { return isnan(a) ? b : isnan(b) ? a : min(a, b); }\n"
    "float bp_fmax(float a, float b) { return isnan(a) ? b : isnan(b) ? a : max(a, b); }\n";
const char* const kFminMaxGlsl64 =
    "double bp_fmin(double a, double b) { return isnan(a) ? b : isnan(b) ? a : min(a, b); }\n"
    "double bp_fmax(double a, double b) { return isnan(a) ? b : isnan(b) ? a : max(a, b); }\n";
// The same on float16_t (exact: min and max do not round).
const char* const kFminMaxGlsl16 =
    "float16_t bp_fmin(float16_t a, float16_t b) { return isnan(a) ? b : isnan(b) ? a : min(a, b); "
    "}\n"
    "float16_t bp_fmax(float16_t a, float16_t b) { return isnan(a) ? b : isnan(b) ? a : max(a, b); "
    "}\n";

// bp_fdiv on vectors, lane by lane.
const char* const kFdivVectorGlsl =
    "vec2 bp_fdiv(vec2 a, vec2 b) { return vec2(bp_fdiv(a.x, b.x), bp_fdiv(a.y, b.y)); }\n"
    "vec3 bp_fdiv(vec3 a, vec3 b) {\n"
    "  return vec3(bp_fdiv(a.x, b.x), bp_fdiv(a.y, b.y), bp_fdiv(a.z, b.z));\n"
    "}\n"
    "vec4 bp_fdiv(vec4 a, vec4 b) {\n"
    "  return vec4(bp_fdiv(a.x, b.x), bp_fdiv(a.y, b.y), bp_fdiv(a.z, b.z), bp_fdiv(a.w, b.w));\n"
    "}\n";

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
  std::string VectorLiteral(ir::DType t, const std::vector<std::string>& lanes) override {
    std::string text = TypeName(t) + "(";
    for (size_t l = 0; l < lanes.size(); ++l) text += (l ? ", " : "") + lanes[l];
    return text + ")";
  }
  std::string StatementExpression(const std::string& statements,
                                  const std::string& value) override {
    return HoistStatements(statements, value);
  }
  std::string ContiguousVectorLoad(const ir::Buffer& buffer, ir::DType t,
                                   const std::string& flat) override {
    const std::string at = Bind(ir::Int32(), flat);
    std::string text = TypeName(t) + "(";
    for (int l = 0; l < t.lanes; ++l) {
      text += (l ? ", " : "") +
              ElementRead(buffer, Name(buffer.name()) + "[" + at +
                                      (l ? " + " + std::to_string(l) : std::string()) + "]");
    }
    return text + ")";
  }
  std::string ContiguousVectorStore(const ir::Buffer& buffer, ir::DType t, const std::string& flat,
                                    const std::string& value) override {
    const std::string at = Temp();
    std::string text = "const int " + at + " = " + flat + ";";
    for (int l = 0; l < t.lanes; ++l) {
      text += " " +
              ElementWrite(buffer,
                           Name(buffer.name()) + "[" + at +
                               (l ? " + " + std::to_string(l) : std::string()) + "]",
                           value + "[" + std::to_string(l) + "]") +
              ";";
    }
    return text;
  }

  // The fault record is the kernel's error buffer (docs/vulkan.md): the base's division
  // checks call bp_div_i32(bp_fault, site, a, b) and friends, which GLSL cannot pass a buffer
  // to; `bp_fault` is a constant 0 that the helpers ignore, writing the global bp_status.
  bool HasFaultRecord() const override { return true; }
  std::string FaultRecordType() override { return "int"; }

  std::string Name(const std::string& ir_name) const override {
    if (GlslReservedWords().count(ir_name) != 0 || ir_name.rfind("gl_", 0) == 0) {
      return ir_name + "_u";
    }
    return CFamilyEmitter::Name(ir_name);
  }

  std::string TypeName(ir::DType t) override {
    if (t.lanes != 1) {
      if (t.lanes > 4) {
        Unsupported("vector type " + ir::ToString(t) + " has " + std::to_string(t.lanes) +
                    " lanes; the vulkan target's vectors (GLSL's) have 2, 3 or 4; split it");
      }
      const std::string n = std::to_string(t.lanes);
      if (t.is_bool()) return "bvec" + n;
      const std::string scalar = TypeName(t.Element());  // refuses the types the target lacks
      if (scalar == "float") return "vec" + n;
      if (scalar == "float16_t") return "f16vec" + n;
      if (scalar == "double") return "dvec" + n;
      if (scalar == "int") return "ivec" + n;
      if (scalar == "uint") return "uvec" + n;
      if (scalar == "int64_t") return "i64vec" + n;
      if (scalar == "uint64_t") return "u64vec" + n;
      Unsupported("vector type " + ir::ToString(t) + " is not supported by the vulkan target");
    }
    if (t.is_bool()) return "bool";
    if ((t.is_int() || t.is_uint()) && t.bits == 32) return t.is_int() ? "int" : "uint";
    if ((t.is_int() || t.is_uint()) && t.bits == 64) {
      layout.uses_int64 = true;
      return t.is_int() ? "int64_t" : "uint64_t";
    }
    if (t.is_float() && t.bits == 32) return "float";
    if (t.is_float() && t.bits == 64) {
      layout.uses_float64 = true;
      return "double";
    }
    if (t.is_float() && t.bits == 16) {
      // GL_EXT_shader_explicit_arithmetic_types_float16 and GL_EXT_shader_16bit_storage: the
      // device needs shaderFloat16 and storageBuffer16BitAccess (a launch without them is
      // refused, naming them; the attribute supports_fp16 says whether it has both).
      layout.uses_float16 = true;
      return "float16_t";
    }
    Unsupported("type " + ir::ToString(t) +
                " is not supported by the vulkan target (8- and 16-bit integer types need device "
                "features it does not ask for); use int32, int64, float16, float32 or float64");
  }

  std::string ThreadIndex(ir::ThreadTag tag) override {
    switch (tag) {
      case ir::ThreadTag::kBlockIdxX:
        return "gl_WorkGroupID.x";
      case ir::ThreadTag::kBlockIdxY:
        return "gl_WorkGroupID.y";
      case ir::ThreadTag::kBlockIdxZ:
        return "gl_WorkGroupID.z";
      case ir::ThreadTag::kThreadIdxX:
        return "gl_LocalInvocationID.x";
      case ir::ThreadTag::kThreadIdxY:
        return "gl_LocalInvocationID.y";
      case ir::ThreadTag::kThreadIdxZ:
        return "gl_LocalInvocationID.z";
      default:
        Fail("unknown thread axis");
    }
  }

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
                            const std::string& name, int64_t count) override {
    Line("// shared, declared at global scope: " + name + " (" +
         (count < 0 ? std::string("sized at launch") : std::to_string(count) + " elements") + ", " +
         ir::ToString(alloc.buffer.dtype()) + ")");
  }

  // float32 division correctly rounded, as the IR says: Vulkan lets OpFDiv be 2.5 ulp off
  // (NVIDIA's driver is: on an H200 a third of `a / 3.0` differed from the interpreter's), so
  // bp_fdiv divides the significands in integers (kFdivGlsl). float64 and float16 keep `/`.
  std::string FloatDivision(const std::string& x, const std::string& y, ir::DType t) override {
    if (t.bits == 16 && t.lanes == 1) {
      // Vulkan lets a float16 OpFDiv be 2.5 ulp off: bp_fdiv in float32, then one rounding to
      // half (float32 holds a half quotient's correctly rounded value: 24 >= 2 * 11 + 2).
      uses_fdiv_ = true;
      return "float16_t(bp_fdiv(float(" + x + "), float(" + y + ")))";
    }
    if (t.bits != 32) return "(" + x + " / " + y + ")";
    uses_fdiv_ = true;
    return "bp_fdiv(" + x + ", " + y + ")";
  }

  // GLSL's min and max are undefined for a NaN operand; the IR's are C's fmin and fmax.
  std::string FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                          ir::DType) override {
    uses_fminmax_ = true;
    return std::string(is_max ? "bp_fmax(" : "bp_fmin(") + x + ", " + y + ")";
  }
  // A driver may assume `x != x` false; isnan is defined for NaN.
  std::string IsNanText(const std::string& x) override { return "isnan(" + x + ")"; }
  std::string HelperQualifier() override { return ""; }

  std::string IntrinsicName(const std::string& name, ir::DType t) override {
    // GLSL has no double exp, log, sin, ... and Vulkan's double fma need not be fused: the
    // prelude gets our own (f64_math.cc).
    if (t.bits == 64 && IsFloat64MathHelper(name)) {
      f64_math_.insert(name);
      return "bp_" + name;
    }
    if (name == "fma" && t.bits == 32) {
      // GLSL's fma need not be fused (lavapipe's is not: a*b rounds first); the IR's rounds
      // once. The product of two floats is exact in double, and their sum with c rounded to
      // odd in double and then to float is the fused result (53 >= 24 + 2 bits). Needs
      // shaderFloat64, as a launch on a device without it says.
      f64_math_.insert("fma");  // bp_d_add_odd and what it needs
      layout.uses_float64 = true;
      uses_fmaf_ = true;
      return "bp_fmaf";
    }
    if (name == "fabs") return "abs";
    if (name == "round") {
      uses_round_ = true;
      return "bp_round";  // GLSL's round picks either way at .5; the IR rounds away from 0
    }
    if (name == "erf") {
      uses_erf_ = true;
      return "bp_erf";
    }
    return name;
  }

  std::string FloatLiteral(double v, ir::DType t) override {
    std::string text;
    if (std::isnan(v)) {
      text = "uintBitsToFloat(0x7fc00000u)";
    } else if (std::isinf(v)) {
      text = v < 0 ? "uintBitsToFloat(0xff800000u)" : "uintBitsToFloat(0x7f800000u)";
    } else {
      char buf[64];
      std::snprintf(buf, sizeof(buf), t.bits == 64 ? "%.17g" : "%.9g", v);
      text = buf;
      if (text.find_first_of(".en") == std::string::npos) text += ".0";
      if (t.bits == 64) text += "lf";
      if (v < 0) text = "(" + text + ")";
      // A float16 literal: the float32 text converted (GLSL has no implicit narrowing).
      return t.bits == 16 ? "float16_t(" + text + ")" : text;
    }
    if (t.bits == 64) return "double(" + text + ")";
    if (t.bits == 16) return "float16_t(" + text + ")";
    return text;
  }

  std::string EmitIntLiteral(int64_t v, ir::DType t) override {
    if (t.is_bool()) return v != 0 ? "true" : "false";
    TypeName(t);  // refuses the types the target lacks
    if (t.is_uint()) return std::to_string(static_cast<uint64_t>(v)) + (t.bits == 64 ? "ul" : "u");
    const std::string suffix = t.bits == 64 ? "l" : "";
    if (t.bits == 64 && v == INT64_MIN) return "(-9223372036854775807l - 1l)";
    if (t.bits == 32 && v == INT32_MIN) return "(-2147483647 - 1)";
    return v < 0 ? "(" + std::to_string(v) + suffix + ")" : std::to_string(v) + suffix;
  }

  std::string CastText(const std::string& type, const std::string& operand) override {
    return type + "(" + operand + ")";
  }

  // `count` copies of the loop's body, the k-th with the loop variable `at` + k; each only when
  // `at` + k < `stop` where `stop` is given.
  void EmitCopies(const ir::ForNode& loop, const std::string& type, const std::string& var,
                  const std::string& at, int64_t count, const std::string& stop = "") {
    for (int64_t k = 0; k < count; ++k) {
      const std::string index = at + " + " + type + "(" + std::to_string(k) + ")";
      Line(stop.empty() ? "{" : "if (" + index + " < " + stop + ") {");
      ++indent_;
      Line("const " + type + " " + var + " = " + index + ";");
      EmitStmt(loop.body);
      --indent_;
      Line("}");
    }
  }

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
                const std::string& begin, const std::string& end) override {
    const auto* extent = loop.extent.As<ir::IntImmNode>();
    bool innermost = true;
    ir::ForEachStmt(loop.body,
                    [&](const ir::Stmt& st) { innermost = innermost && !st.As<ir::ForNode>(); });
    // An `unrolled` loop of a constant trip count is written out, one copy of the body an
    // iteration, as long as the copies of it and of the unrolled loops around it stay within
    // kMaxUnrolledCopies and the text they repeat within kMaxUnrolledChars (a large body stays a
    // loop: hostile IR must not multiply into gigabytes of GLSL): no back edge for the loop
    // limiter, no loop for the driver to unroll (llvmpipe left them loops, and a register tile
    // indexed by their variables in memory).
    if (loop.for_kind == ir::ForKind::kUnrolled && extent != nullptr && extent->value > 0 &&
        unrolled_copies_ * extent->value <= kMaxUnrolledCopies &&
        unrolled_copies_ * extent->value * static_cast<int64_t>(ir::Print(loop.body).size()) <=
            kMaxUnrolledChars) {
      Line("{");
      ++indent_;
      const std::string at = Temp();
      Line("const " + type + " " + at + " = " + begin + ";");
      const int64_t outer = unrolled_copies_;
      unrolled_copies_ *= extent->value;
      EmitCopies(loop, type, var, at, extent->value);
      unrolled_copies_ = outer;
      --indent_;
      Line("}");
      return;
    }
    const uint32_t site =
        Site(kStatusLoopCutShort, "loop '" + loop.var.name() + "' (" + ir::ToString(loop.for_kind) +
                                      " from " + OneLine(ir::Print(loop.min)) + ", extent " +
                                      OneLine(ir::Print(loop.extent)) + ")");
    const std::string stop = Temp(), at = Temp();
    Line("{");
    ++indent_;
    Line("const " + type + " " + stop + " = " + end + ";");
    Line(type + " " + at + " = " + begin + ";");
    // The loop variable at the check is `at` plus the buffer's zero word: Mesa's NIR knows
    // nothing of the loop limiter, so it would fold `at < stop` after a loop that only ends
    // when that is false.
    auto check = [&](const std::string& cut_short) {
      Line("if (" + cut_short + ") " + Record(site, type, at, stop) + ";");
    };
    const std::string opaque =
        "(" + at + " + " + type + "(bp_status[" + std::to_string(kStatusWords) + "]))";
    if ((extent != nullptr && extent->value <= 64) || !innermost) {
      Line("for (; " + at + " < " + stop + "; ++" + at + ") {");
      ++indent_;
      Line("const " + type + " " + var + " = " + at + ";");
      EmitStmt(loop.body);
      --indent_;
      Line("}");
      check(opaque + " < " + stop);
      --indent_;
      Line("}");
      return;
    }
    // Small bodies unroll further: the budget then covers 4x the iterations. The remainder
    // (under `unroll` iterations) runs 4 per back edge and its last 3 straight-line: llvmpipe
    // runs both sides of an `if` under a lane mask, so each straight-line copy costs a full
    // body even when it is skipped, and a loop pass then costs at most unroll / 4 - 1 more
    // back edges and 3 masked copies.
    const int unroll = ir::Print(loop.body).size() <= kSmallBody ? 32 : 8;
    for (int step : {unroll, 4}) {
      const std::string last = type + "(" + std::to_string(step - 1) + ")";
      Line("for (; " + at + " < " + stop + " - " + last + "; " + at + " += " + type + "(" +
           std::to_string(step) + ")) {");
      ++indent_;
      EmitCopies(loop, type, var, at, step);
      --indent_;
      Line("}");
      check(opaque + " < " + stop + " - " + last);
    }
    EmitCopies(loop, type, var, at, 3, stop);
    --indent_;
    Line("}");
  }

  void EmitZeroedArray(const std::string& declaration, const std::string& type,
                       const std::string& name, int64_t count) override {
    const uint32_t site =
        Site(kStatusLoopCutShort, "the loop that zero-fills local array '" + name + "' (" +
                                      std::to_string(count) + " elements)");
    Line(declaration + ";");
    Line("{");
    ++indent_;
    Line("int bp_z = 0;");
    Line("for (; bp_z < " + std::to_string(count) + "; ++bp_z) " + name + "[bp_z] = " + type +
         "(0);");
    Line("if (bp_z + int(bp_status[" + std::to_string(kStatusWords) + "]) < " +
         std::to_string(count) + ") " + Record(site, "int", "bp_z", std::to_string(count)) + ";");
    --indent_;
    Line("}");
  }

  // GLSL indexes arrays with 32-bit integers; a storage buffer holds fewer than 2^31
  // elements of 4 bytes or more under every device's maxStorageBufferRange.
  std::string FlatIndex(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices) override {
    auto int32 = [](const ir::Expr& e, const std::string& text) {
      const ir::DType t = e.dtype();
      return t.is_int() && t.bits == 32 ? "(" + text + ")" : "int(" + text + ")";
    };
    auto index = [&](const ir::Expr& e) { return int32(e, EmitExpr(e)); };
    const std::vector<std::string> texts = EmitInOrder(indices);
    std::vector<std::string> idx;
    for (size_t k = 0; k < indices.size(); ++k) idx.push_back(int32(indices[k], texts[k]));
    const ir::BufferNode& b = *buffer.get();
    if (indices.size() == 1 && b.strides.empty()) return idx[0];
    std::string flat;
    if (!b.strides.empty()) {
      for (size_t k = 0; k < indices.size(); ++k) {
        flat += (k ? " + " : "") + idx[k] + " * " + index(b.strides[k]);
      }
      return flat;
    }
    flat = idx[0];
    for (size_t k = 1; k < indices.size(); ++k) {
      flat = "(" + flat + ") * " + index(b.shape[k]) + " + " + idx[k];
    }
    return flat;
  }

  // Float temporaries (codegen::CFamilyEmitter::Bind) are `precise` unless the Target allows
  // contraction: glslang then marks what computes them NoContraction itself, as
  // ForbidContraction (codegen.cc) does for every float operation of the SPIR-V.
  std::string TempQualifier(ir::DType t) override {
    return t.is_float() && !fp_contract_ ? "precise " : "";
  }

  void EmitFunction(const ir::PrimFunc& func) override {
    MakeLayout(func);
    Line("void main() {");
    ++indent_;
    for (const PushField& f : layout.push) {
      const ir::Var& v = func.params[f.param].var();
      const std::string name = Name(v.name());
      if (v.dtype().is_bool()) {
        Line("const bool " + name + " = bp_push." + name + " != 0;");
      } else if (v.dtype().is_float() && v.dtype().bits == 16) {
        // Passed as a float32 push constant (no 16-bit push constants needed), rounded here.
        Line("const float16_t " + name + " = float16_t(bp_push." + name + ");");
      } else {
        Line("const " + TypeName(v.dtype()) + " " + name + " = bp_push." + name + ";");
      }
    }
    const size_t top = out_.str().size();
    index_temps_.clear();
    EmitStmt(func.body);
    if (!fault_sites().empty()) {
      // The invocation's first fault, noted by the check helpers, into the error buffer.
      Line("if (bp_f_code != 0u) bp_fail(bp_f_code, uint(bp_f_site), bp_f_a, bp_f_b, bp_f_c);");
    }
    --indent_;
    Line("}");
    if (!index_temps_.empty()) {
      // The bounds-checked loads' index variables, declared at the top of main (below).
      std::string text = out_.str(), decls;
      for (const std::string& d : index_temps_) decls += "  " + d + "\n";
      text.insert(top, decls);
      out_.str("");
      out_ << text;
    }
  }

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
                           const std::string& value) override {
    if (!SharedBits(buffer)) return element + " = " + value;
    return element +
           (buffer.dtype().bits == 64 ? " = doubleBitsToUint64(" : " = floatBitsToUint(") + value +
           ")";
  }
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
  std::string EmitCheckedLoad(const ir::LoadNode& load, int site) override {
    if (load.dtype.lanes > 1) return EmitCheckedVectorLoad(load, site);
    std::string assign, ok;
    std::vector<std::string> vars;
    const std::vector<std::string> texts = EmitInOrder(load.indices);
    for (size_t k = 0; k < load.indices.size(); ++k) {
      const std::string type = IndexType(load.indices[k], load.buffer->shape[k]);
      const std::string v = Temp();
      index_temps_.push_back(type + " " + v + ";");
      assign += v + " = " + type + "(" + texts[k] + "), ";
      ok += std::string(k ? " && " : "") + IndexCheck(v, type, load.buffer->shape[k], k, site);
      vars.push_back(v);
    }
    return "(" + assign + "(" + ok + ") ? " +
           ElementRead(load.buffer,
                       Name(load.buffer.name()) + "[" + CheckedFlatIndex(load.buffer, vars) + "]") +
           " : " + TypeName(load.dtype) + "(0))";
  }

  // GLSL's atomicAdd/atomicMin/atomicMax on a storage-buffer or shared element: int32 in core
  // GLSL; int64 (GL_EXT_shader_atomic_int64) and float32 add (GL_EXT_shader_atomic_float) are
  // device features the layout records. float32 min/max is a compare-and-swap loop on the
  // element's bits: on a storage buffer through a uint view of the same binding
  // (bp_bits_<name>), on shared memory on the array itself, declared uint (SharedBits). It
  // runs on every device (NVIDIA's has no VK_EXT_shader_atomic_float2) and computes the IR's
  // fmin/fmax (a NaN operand gives the other), which the extension's need not.
  std::string SignedRemainder(const std::string& x, const std::string& y, ir::DType t) override {
    const std::string w = t.bits <= 32 ? "32" : "64";
    helpers_.insert("rem_i" + w);
    return "bp_rem_i" + w + "(" + x + ", " + y + ")";
  }

  std::string AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                              const std::string& value, bool shared) override {
    if (t.is_float() && t.bits == 16) {
      Unsupported("float16 atomics are not supported by the vulkan target; accumulate in float32");
    }
    if (t.bits == 64) layout.atomics |= kAtomicInt64;
    const size_t open = element.find('[');
    // A compare-and-swap loop on the uint `bits` holding the float element: op(old, value).
    auto cas = [&](const std::string& bits) {
      uses_fminmax_ = true;
      const bool wide = t.bits == 64;  // float64: uint64_t bits (GL_EXT_shader_atomic_int64)
      if (wide) layout.uses_int64 = true;
      const std::string u = wide ? "uint64_t" : "uint";
      const std::string o = Temp(), seen = Temp(),
                        old = (wide ? "uint64BitsToDouble(" : "uintBitsToFloat(") + o + ")";
      const std::string update =
          op == ir::AtomicOp::kAdd ? "(" + old + " + " + value + ")"
                                   : std::string(op == ir::AtomicOp::kMin ? "bp_fmin" : "bp_fmax") +
                                         "(" + old + ", " + value + ")";
      return "{ " + u + " " + o + " = " + bits + "; for (;;) { const " + u + " " + seen +
             " = atomicCompSwap(" + bits + ", " + o + ", " +
             (wide ? "doubleBitsToUint64(" : "floatBitsToUint(") + update + ")); if (" + seen +
             " == " + o + ") break; " + o + " = " + seen + "; } }";
    };
    // A shared float array with float min/max (or any float64 atomic) is uint (SharedBits):
    // every float atomic on it is a compare-and-swap on the element itself.
    if (shared && t.is_float() && shared_bits_.count(element.substr(0, open)) != 0) {
      return cas(element);
    }
    if (CasAtomic(op, t) && !shared) {
      const std::string name = element.substr(0, open);
      cas_buffers_.insert(name);
      return cas("bp_bits_" + name + element.substr(open));
    }
    if (t.is_float()) layout.atomics |= kAtomicFloatAdd;  // min/max are compare-and-swap above
    const char* name = op == ir::AtomicOp::kAdd   ? "atomicAdd"
                       : op == ir::AtomicOp::kMin ? "atomicMin"
                                                  : "atomicMax";
    return std::string(name) + "(" + element + ", " + value + ");";
  }

  void EmitCheckedAtomic(const ir::AtomicNode& atomic, int site) override {
    Line("{");
    ++indent_;
    const std::string value = Temp();
    const ir::DType t = atomic.buffer.dtype();
    Line("const " + TypeName(t) + " " + value + " = " + EmitExpr(atomic.value) + ";");
    std::string flat;
    const std::string ok = CheckedIndices(atomic.buffer, atomic.indices, site, &flat);
    Line("if (" + ok + ") " +
         AtomicStatement(atomic.op, t, Name(atomic.buffer.name()) + "[" + flat + "]", value,
                         IsShared(atomic.buffer)));
    --indent_;
    Line("}");
  }

  void EmitCheckedStore(const ir::StoreNode& store, int site) override {
    if (store.value.dtype().lanes > 1 || store.indices.back().dtype().lanes > 1) {
      EmitCheckedVectorStore(store, site);
      return;
    }
    Line("{");
    ++indent_;
    const std::string value = Temp();
    Line("const " + TypeName(store.value.dtype()) + " " + value + " = " + EmitExpr(store.value) +
         ";");
    std::string flat;
    const std::string ok = CheckedIndices(store.buffer, store.indices, site, &flat);
    Line("if (" + ok + ") " +
         ElementWrite(store.buffer, Name(store.buffer.name()) + "[" + flat + "]", value) + ";");
    --indent_;
    Line("}");
  }

  // A checked vector access: each index in a variable (a vector one in a vector variable), then
  // every lane's indices checked in lane order (the first lane out of bounds is the one
  // recorded, as the interpreter reports it), and the access of every lane only when all
  // passed. Returns the condition; *lane_flat gets each lane's flat index.
  std::string CheckedVectorIndices(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                                   const std::vector<std::string>& texts, int lanes, int site,
                                   std::string* assign, std::vector<std::string>* lane_flat) {
    std::vector<std::string> vars;
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::string type = IndexType(indices[k], buffer->shape[k]);
      const int n = indices[k].dtype().lanes;
      const std::string vtype =
          n == 1 ? type : (type == "int" ? "ivec" : "i64vec") + std::to_string(n);
      const std::string v = Temp();
      index_temps_.push_back(vtype + " " + v + ";");
      *assign += v + " = " + vtype + "(" + texts[k] + "), ";
      vars.push_back(v);
    }
    std::string ok;
    for (int l = 0; l < lanes; ++l) {
      std::vector<std::string> at;
      for (size_t k = 0; k < indices.size(); ++k) {
        const std::string type = IndexType(indices[k], buffer->shape[k]);
        at.push_back(indices[k].dtype().lanes > 1 ? vars[k] + "[" + std::to_string(l) + "]"
                                                  : vars[k]);
        ok += std::string(ok.empty() ? "" : " && ") +
              IndexCheck(at.back(), type, buffer->shape[k], k, site);
      }
      lane_flat->push_back(CheckedFlatIndex(buffer, at));
    }
    return ok;
  }
  std::string EmitCheckedVectorLoad(const ir::LoadNode& load, int site) {
    const std::vector<std::string> texts = EmitInOrder(load.indices);
    std::string assign;
    std::vector<std::string> flat;
    const std::string ok = CheckedVectorIndices(load.buffer, load.indices, texts, load.dtype.lanes,
                                                site, &assign, &flat);
    std::string lanes;
    for (const std::string& f : flat) {
      lanes += (lanes.empty() ? "" : ", ") +
               ElementRead(load.buffer, Name(load.buffer.name()) + "[" + f + "]");
    }
    return "(" + assign + "(" + ok + ") ? " + TypeName(load.dtype) + "(" + lanes +
           ") : " + TypeName(load.dtype) + "(0))";
  }
  void EmitCheckedVectorStore(const ir::StoreNode& store, int site) {
    const int lanes = std::max<int>(store.value.dtype().lanes, store.indices.back().dtype().lanes);
    Line("{");
    ++indent_;
    const std::string value = Temp();
    Line("const " + TypeName(store.value.dtype()) + " " + value + " = " + EmitExpr(store.value) +
         ";");
    const std::vector<std::string> texts = EmitInOrder(store.indices);
    std::string assign;
    std::vector<std::string> flat;
    const std::string ok =
        CheckedVectorIndices(store.buffer, store.indices, texts, lanes, site, &assign, &flat);
    Line("if ((" + assign + "(" + ok + "))) {");
    for (int l = 0; l < lanes; ++l) {
      const std::string v =
          store.value.dtype().lanes > 1 ? value + "[" + std::to_string(l) + "]" : value;
      Line("  " + ElementWrite(store.buffer, Name(store.buffer.name()) + "[" + flat[l] + "]", v) +
           ";");
    }
    Line("}");
    --indent_;
    Line("}");
  }

  // Declares each index of an access to `buffer` in a variable, in order; returns the condition
  // that they all passed their check (recording the first that did not), and in *flat the flat
  // element index of the variables.
  std::string CheckedIndices(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                             int site, std::string* flat) {
    std::string ok;
    std::vector<std::string> vars;
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::string type = IndexType(indices[k], buffer->shape[k]);
      const std::string v = Temp();
      Line("const " + type + " " + v + " = " + type + "(" + EmitExpr(indices[k]) + ");");
      ok += std::string(k ? " && " : "") + IndexCheck(v, type, buffer->shape[k], k, site);
      vars.push_back(v);
    }
    *flat = CheckedFlatIndex(buffer, vars);
    return ok;
  }

  // An index is checked in 64 bits when it or its extent is 64-bit, else in 32.
  std::string IndexType(const ir::Expr& index, const ir::Expr& extent) {
    if (index.dtype().bits == 64 || extent.dtype().bits == 64) {
      layout.uses_int64 = true;
      return "int64_t";
    }
    return "int";
  }

  std::string IndexCheck(const std::string& var, const std::string& type, const ir::Expr& extent,
                         size_t dim, int site) {
    return "bp_chk(" + std::to_string(site) + ", " + std::to_string(dim) + ", " + var + ", " +
           type + "(" + EmitExpr(extent) + "))";
  }

  // The flat element index of checked index variables (row-major, or the declared strides).
  std::string CheckedFlatIndex(const ir::Buffer& buffer, const std::vector<std::string>& vars) {
    const ir::BufferNode& b = *buffer.get();
    auto i32 = [](const std::string& text) { return "int(" + text + ")"; };
    if (!b.strides.empty()) {
      std::string flat;
      for (size_t k = 0; k < vars.size(); ++k) {
        flat += (k ? " + " : "") + i32(vars[k]) + " * " + i32(EmitExpr(b.strides[k]));
      }
      return flat;
    }
    std::string flat = i32(vars[0]);
    for (size_t k = 1; k < vars.size(); ++k) {
      flat = "(" + flat + ") * " + i32(EmitExpr(b.shape[k])) + " + " + i32(vars[k]);
    }
    return flat;
  }

  std::string Prelude() override {
    const ir::PrimFunc& func = *func_prelude_;
    std::string decls;
    // An axis sized at launch takes its size from a specialization constant (its default 1).
    std::string sizes;
    for (int axis = 0; axis < 3; ++axis) {
      const std::string name = std::string("local_size_") + "xyz"[axis];
      sizes += (axis ? ", " : "") + (layout.local_size[axis] == 0
                                         ? name + "_id = " + std::to_string(kLocalSizeSpecId + axis)
                                         : name + " = " + std::to_string(layout.local_size[axis]));
    }
    decls += "layout(" + sizes + ") in;\n";
    for (size_t i = 0; i < layout.bindings.size(); ++i) {
      const ir::Buffer& b = func.params[layout.bindings[i]].buffer();
      decls += "layout(std430, set = 0, binding = " + std::to_string(i) + ") buffer bp_buffer_" +
               std::to_string(i) + " { " + TypeName(b.dtype()) + " " + Name(b.name()) + "[]; };\n";
      if (cas_buffers_.count(Name(b.name())) != 0) {  // its float min/max: AtomicStatement
        decls += "layout(std430, set = 0, binding = " + std::to_string(i) +
                 ") buffer bp_buffer_bits_" + std::to_string(i) + " { " +
                 (b.dtype().bits == 64 ? "uint64_t" : "uint") + " bp_bits_" + Name(b.name()) +
                 "[]; };\n";
      }
    }
    if (!layout.push.empty()) {
      decls += "layout(push_constant) uniform bp_push_block {\n";
      for (const PushField& f : layout.push) {
        const ir::Var& v = func.params[f.param].var();
        const std::string type = v.dtype().is_bool() ? "int"
                                 : v.dtype().is_float() && v.dtype().bits == 16
                                     ? "float"
                                     : TypeName(v.dtype());
        decls += "  layout(offset = " + std::to_string(f.offset) + ") " + type + " " +
                 Name(v.name()) + ";\n";
      }
      decls += "} bp_push;\n";
    }
    for (const std::string& s : shared_) decls += s + "\n";
    if (uses_floordiv_) layout.uses_int64 = true;
    std::string helpers;
    if (!layout.sites.empty() || !fault_sites().empty()) {
      // The error buffer (docs/vulkan.md, "Errors the shader reports"): the first error of a
      // dispatch wins the compare-and-swap on word 0 and fills in the rest.
      decls += "layout(std430, set = 0, binding = " + std::to_string(layout.bindings.size()) +
               ") buffer bp_status_block { uint bp_status[" + std::to_string(kStatusBufferWords) +
               "]; };\n";
      helpers +=
          "int bp_invocation() {\n"
          "  uvec3 n = gl_NumWorkGroups * gl_WorkGroupSize;\n"
          "  return int(gl_GlobalInvocationID.x + n.x * (gl_GlobalInvocationID.y + n.y * "
          "gl_GlobalInvocationID.z));\n"
          "}\n"
          "void bp_fail(uint code, uint site, int a, int b, int c) {\n"
          "  if (atomicCompSwap(bp_status[0], 0u, code) == 0u) {\n"
          "    bp_status[1] = site;\n"
          "    bp_status[2] = uint(a); bp_status[3] = a < 0 ? 0xffffffffu : 0u;\n"
          "    bp_status[4] = uint(b); bp_status[5] = b < 0 ? 0xffffffffu : 0u;\n"
          "    bp_status[6] = uint(c); bp_status[7] = c < 0 ? 0xffffffffu : 0u;\n"
          "  }\n"
          "}\n";
      if (layout.uses_int64) {
        helpers +=
            "void bp_fail(uint code, uint site, int64_t a, int64_t b, int64_t c) {\n"
            "  if (atomicCompSwap(bp_status[0], 0u, code) == 0u) {\n"
            "    bp_status[1] = site;\n"
            "    bp_status[2] = uint(a & 0xffffffffl); bp_status[3] = uint(a >> 32);\n"
            "    bp_status[4] = uint(b & 0xffffffffl); bp_status[5] = uint(b >> 32);\n"
            "    bp_status[6] = uint(c & 0xffffffffl); bp_status[7] = uint(c >> 32);\n"
            "  }\n"
            "}\n";
      }
      helpers += FaultHelpersGlsl();
    }
    if (uses_floordiv_) {
      // The remainder decides, not `q * b != a`: lavapipe (Mesa 22.3) gets that compare wrong
      // when b is a constant (floordiv(-5977, 7) gave -853).
      helpers +=
          "int64_t bp_floordiv(int64_t a, int64_t b) {\n"
          "  int64_t q = a / b;\n"
          "  int64_t r = a - q * b;\n"
          "  return (r != 0l && ((r < 0l) != (b < 0l))) ? q - 1l : q;\n"
          "}\n"
          "int64_t bp_floormod(int64_t a, int64_t b) {\n"
          "  int64_t r = a - (a / b) * b;\n"
          "  return (r != 0l && ((r < 0l) != (b < 0l))) ? r + b : r;\n"
          "}\n";
    }
    if (uses_round_) {
      helpers +=
          "float bp_round(float x) {\n"
          "  float t = trunc(x);\n"
          "  return abs(x - t) >= 0.5 ? t + sign(x) : t;\n"
          "}\n";
      if (layout.uses_float64) {
        helpers +=
            "double bp_round(double x) {\n"
            "  double t = trunc(x);\n"
            "  return abs(x - t) >= 0.5lf ? t + sign(x) : t;\n"
            "}\n";
      }
    }
    // C's % by a constant other than 0 and -1 (SignedRemainder): GLSL's % on a negative
    // operand is undefined (glslang writes OpSMod, the sign of the divisor), its / truncates.
    if (helpers_.count("rem_i32"))
      helpers += "int bp_rem_i32(int a, int b) { return a - (a / b) * b; }\n";
    if (helpers_.count("rem_i64"))
      helpers += "int64_t bp_rem_i64(int64_t a, int64_t b) { return a - (a / b) * b; }\n";
    if (uses_fdiv_) helpers += std::string(kFdivGlsl) + kFdivVectorGlsl;
    if (uses_fminmax_) {
      helpers += kFminMaxGlsl;
      if (layout.uses_float64) helpers += kFminMaxGlsl64;
      if (layout.uses_float16) helpers += kFminMaxGlsl16;
    }
    helpers += NumericHelpers();
    if (!f64_math_.empty()) helpers += Float64MathGlsl(f64_math_);
    if (uses_fmaf_) {
      helpers +=
          "float bp_fmaf(float a, float b, float c) {\n"
          "  precise double p = double(a) * double(b);\n"
          "  precise double dc = double(c);\n"
          "  if (isinf(p) || isnan(p) || isinf(dc) || isnan(dc)) return float(p + dc);\n"
          "  return float(bp_d_add_odd(p, dc));\n"
          "}\n";
    }
    if (uses_erf_) {
      // |x| < 1: the Taylor series to x^25 (truncation under 1e-10, a few ulp of rounding);
      // else Abramowitz & Stegun 7.1.26 (absolute error under 1.5e-7, a few ulp of erf's
      // values there). A&S alone was 144 ulp off near 0.05 (codegen.construct.erf.float32).
      helpers +=
          "float bp_erf(float x) {\n"
          "  float s = sign(x), a = abs(x);\n"
          "  if (a < 1.0) {\n"
          "    float z = x * x;\n"
          "    float p = 9.422759064650411e-11;\n"
          "    p = p * z - 1.2290555301717926e-09;\n"
          "    p = p * z + 1.4807192815879218e-08;\n"
          "    p = p * z - 1.6365844691234924e-07;\n"
          "    p = p * z + 1.6462114365889246e-06;\n"
          "    p = p * z - 1.492565035840625e-05;\n"
          "    p = p * z + 0.00012055332981789664;\n"
          "    p = p * z - 0.0008548327023450852;\n"
          "    p = p * z + 0.005223977625442188;\n"
          "    p = p * z - 0.026866170645131252;\n"
          "    p = p * z + 0.11283791670955126;\n"
          "    p = p * z - 0.37612638903183754;\n"
          "    p = p * z + 1.1283791670955126;\n"
          "    return x * p;\n"
          "  }\n"
          "  float t = 1.0 / (1.0 + 0.3275911 * a);\n"
          "  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - "
          "0.284496736) * t + 0.254829592) * t * exp(-a * a);\n"
          "  return s * y;\n"
          "}\n";
    }
    std::string head = "#version 450\n// Generated by Backplane's vulkan code generator: kernel " +
                       func.name + ".\n";
    head += fp_contract_ ? "// fast-math-contract: a*b+c may be fused into one rounding.\n"
                         : "// Every float add, subtract, multiply and divide is NoContraction in "
                           "the SPIR-V: a*b+c rounds twice (docs/ir.md).\n";
    if (layout.uses_int64) {
      head += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
    }
    if (layout.uses_float16) {
      head +=
          "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
          "#extension GL_EXT_shader_16bit_storage : require\n";
    }
    if (layout.atomics & kAtomicInt64) head += "#extension GL_EXT_shader_atomic_int64 : require\n";
    if (layout.atomics & kAtomicFloatAdd)
      head += "#extension GL_EXT_shader_atomic_float : require\n";
    return head + decls + helpers;
  }

 public:
  void SetFunction(const ir::PrimFunc& f) { func_prelude_ = &f; }

 private:
  void MakeLayout(const ir::PrimFunc& func) {
    layout = KernelLayout();
    layout.name = func.name;
    if (func.attrs.count("kernel") == 0 || !func.launch_axes) {
      Fail(
          "it is not a kernel (no launch_params attribute); build through bp_build, which "
          "splits host code from kernels");
    }
    // The axes as the launch kit reads them (it refuses an axis no launch has).
    const launch::KernelSignature sig(func, "vulkan");
    for (const launch::Axis& a : sig.axes()) {
      layout.launch_params.push_back(ir::ToString(a.tag));
    }
    uint32_t offset = 0;
    for (size_t i = 0; i < func.params.size(); ++i) {
      const ir::Param& p = func.params[i];
      if (p.is_buffer()) {
        TypeName(p.buffer().dtype());
        layout.bindings.push_back(static_cast<int32_t>(i));
        continue;
      }
      const ir::DType t = p.var().dtype();
      TypeName(t);
      PushField f;
      f.param = static_cast<int32_t>(i);
      const uint32_t size = t.bits == 64 ? 8 : 4;
      f.kind = t.is_float()  ? (t.bits == 64 ? 'd' : 'f')
               : t.is_uint() ? (t.bits == 64 ? 'L' : 'u')
                             : (t.bits == 64 ? 'l' : 'i');
      offset = (offset + size - 1) / size * size;
      f.offset = offset;
      offset += size;
      layout.push.push_back(f);
    }
    layout.push_size = offset;
    if (static_cast<int64_t>(offset) > max_push_) {
      Fail("its " + std::to_string(layout.push.size()) + " scalar parameters take " +
           std::to_string(offset) + " bytes of push constants, more than the target's " +
           "max_push_constants_size " + std::to_string(max_push_) +
           "; pass fewer scalars (or put them in a buffer)");
    }
    // Shared float arrays with float atomic min/max: uint arrays, compare-and-swapped
    // (AtomicStatement), so that no device extension is needed. (An allocation comes before
    // the statements in its body, so one pre-order walk meets it before its atomics.)
    std::set<const ir::BufferNode*> shared_allocs;
    ir::ForEachStmt(func.body, [&](const ir::Stmt& s) {
      if (const auto* a = s.As<ir::AllocateNode>()) {
        if (a->scope == ir::StorageScope::kShared) shared_allocs.insert(a->buffer.get());
      } else if (const auto* t = s.As<ir::AtomicNode>()) {
        if (CasAtomic(t->op, t->buffer.dtype()) && shared_allocs.count(t->buffer.get()) != 0) {
          shared_bits_.insert(Name(t->buffer.name()));
        }
      }
    });
    std::map<std::string, std::string> shared;
    bool at_launch[3] = {false, false, false};
    int64_t constant[3] = {1, 1, 1};
    ir::ForEachStmt(func.body, [&](const ir::Stmt& s) {
      if (const auto* f = s.As<ir::ForNode>()) {
        if (f->for_kind != ir::ForKind::kThreadBinding) return;
        const int axis = static_cast<int>(f->thread) - static_cast<int>(ir::ThreadTag::kThreadIdxX);
        if (axis < 0 || axis > 2) return;
        // A constant extent is the workgroup's size on that axis; any other is sized at
        // launch, from a specialization constant (0 here; SplitHostDevice made the extent
        // one the host computes, and the launch kit checks it against the device's limits).
        // Several loops binding one axis take the largest extent, as the launch does.
        const auto* extent = f->extent.As<ir::IntImmNode>();
        if (extent != nullptr && extent->value <= 0) {
          Fail(std::string("the extent of ") + ir::ToString(f->thread) + " is " +
               ir::Print(f->extent) + "; bind threadIdx with a positive extent");
        }
        if (extent == nullptr) {
          at_launch[axis] = true;
        } else {
          constant[axis] = std::max<int64_t>(constant[axis], extent->value);
        }
      } else if (const auto* a = s.As<ir::AllocateNode>()) {
        if (a->scope != ir::StorageScope::kShared) return;
        const int64_t count = ConstantElements(a->buffer, /*must_be_constant=*/false);
        const std::string name = Name(a->buffer.name());
        const std::string type =
            a->buffer.dtype().is_float() && shared_bits_.count(name) != 0
                ? std::string(a->buffer.dtype().bits == 64 ? "uint64_t" : "uint")
                : TypeName(a->buffer.dtype());
        std::string decl = "shared " + type + " " + name + "[" + std::to_string(count) + "];";
        if (count < 0) {
          // Sized at launch: the length is a specialization constant, id = the launch kit's
          // launch_index, which the module sets when it makes the pipeline for a size.
          const int id = sig.shared()[static_cast<size_t>(sig.SharedIndex(a))].launch_index;
          if (id >= static_cast<int>(kLocalSizeSpecId)) {
            Fail("it has more than " + std::to_string(kLocalSizeSpecId) +
                 " shared arrays sized at launch; size some with constants");
          }
          const std::string len = "bp_shared_len" + std::to_string(id);
          decl = "layout(constant_id = " + std::to_string(id) + ") const uint " + len +
                 " = 1u;\nshared " + type + " " + name + "[" + len + "];";
        }
        auto [it, added] = shared.emplace(name, decl);
        if (!added && it->second != decl) {
          Fail("two shared allocations are called '" + a->buffer.name() +
               "' with different types or sizes; GLSL declares workgroup memory at global "
               "scope, so give them different names");
        }
      }
    });
    for (const auto& [name, decl] : shared) shared_.push_back(decl);
    for (int axis = 0; axis < 3; ++axis) {
      layout.local_size[axis] =
          at_launch[axis] ? 0u
                          : static_cast<uint32_t>(std::min<int64_t>(constant[axis], UINT32_MAX));
    }
    // The constant axes are checked here, the whole workgroup again at launch.
    const int64_t threads = std::max<int64_t>(layout.local_size[0], 1) *
                            std::max<int64_t>(layout.local_size[1], 1) *
                            std::max<int64_t>(layout.local_size[2], 1);
    if (threads > max_threads_) {
      Fail("a workgroup of " + std::to_string(layout.local_size[0]) + " x " +
           std::to_string(layout.local_size[1]) + " x " + std::to_string(layout.local_size[2]) +
           " = " + std::to_string(threads) + " invocations is more than the target's " +
           "max_num_threads " + std::to_string(max_threads_) + "; bind fewer threads");
    }
  }

  // `bp_fault` and the helpers of the base's checks that the kernel used (helpers_), in GLSL:
  // the same results as FaultHelpers() in C (a zero divisor gives 0; INT_MIN / -1 wraps;
  // floormod by -1 is 0). They are branch-free: a failed check only notes the invocation's
  // first fault in private variables (bp_note, selects), and main records the note in the
  // error buffer once, at its end (EmitFunction); a division never divides by 0 or -1. One
  // atomic block per check made llvmpipe take 77 s to compile softmax_gpu with -bounds-check.
  std::string FaultHelpersGlsl() {
    const bool wide = layout.uses_int64;
    const std::string t = wide ? "int64_t" : "int";  // the details' type
    std::string p = "const int bp_fault = 0;  // the record is bp_status\n";
    if (fault_sites().empty()) return p;  // main records no note (EmitFunction)
    p += "uint bp_f_code = 0u;\nint bp_f_site = 0;\n" + t + " bp_f_a = " + t +
         "(0), bp_f_b = " + t + "(0), bp_f_c = " + t + "(0);\n";
    p += "void bp_note(bool bad, uint code, int site, " + t + " a, " + t + " b, " + t +
         " c) {\n"
         "  bool first = bad && bp_f_code == 0u;\n"
         "  bp_f_code = first ? code : bp_f_code;\n"
         "  bp_f_site = first ? site : bp_f_site;\n"
         "  bp_f_a = first ? a : bp_f_a;\n"
         "  bp_f_b = first ? b : bp_f_b;\n"
         "  bp_f_c = first ? c : bp_f_c;\n"
         "}\n";
    const std::string zero3 = t + "(0), " + t + "(0), " + t + "(0)";
    auto note = [&](const std::string& zero) {
      return "  bp_note(b == " + zero + ", 2u, site, " + zero3 + ");\n";
    };
    struct Signed {
      const char* name;
      const char* type;
      const char* zero;
      const char* one;
      const char* neg;  // -a, wrapping
    };
    for (const Signed& s : {Signed{"32", "int", "0", "1", "int(0u - uint(a))"},
                            Signed{"64", "int64_t", "0l", "1l", "int64_t(0ul - uint64_t(a))"}}) {
      const std::string w = s.name, ty = s.type, z = s.zero, one = s.one, neg = s.neg;
      if (w == "64" && !wide) continue;
      const std::string head = " f, int site, " + ty + " a, " + ty + " b) {\n";
      // d: the divisor, 1 where b is 0 or -1 (those are answered without dividing).
      const std::string d =
          "  " + ty + " d = (b == " + z + " || b == -" + one + ") ? " + one + " : b;\n";
      if (helpers_.count("div_i" + w)) {
        p += ty + " bp_div_i" + w + "(int" + head + note(z) + d + "  return b == " + z + " ? " + z +
             " : (b == -" + one + " ? " + neg + " : a / d);\n}\n";
      }
      if (helpers_.count("floordiv_chk")) {
        p += ty + " bp_floordiv_chk(int" + head + note(z) + d + "  " + ty + " q = a / d;\n  " + ty +
             " r = a - q * d;\n  q = (r != " + z + " && ((r < " + z + ") != (d < " + z +
             "))) ? q - " + one + " : q;\n  return b == " + z + " ? " + z + " : (b == -" + one +
             " ? " + neg + " : q);\n}\n";
      }
      if (helpers_.count("mod_i" + w)) {
        // C's %: a - (a / d) * d (GLSL's % on negative operands is undefined); 0 by 0 or -1.
        p += ty + " bp_mod_i" + w + "(int" + head + note(z) + d + "  return (b == " + z +
             " || b == -" + one + ") ? " + z + " : a - (a / d) * d;\n}\n";
      }
      if (helpers_.count("floormod_chk")) {
        // GLSL leaves % on negative operands undefined: a - (a / d) * d.
        p += ty + " bp_floormod_chk(int" + head + note(z) + d + "  " + ty +
             " r = a - (a / d) * d;\n  r = (r != " + z + " && ((r < " + z + ") != (d < " + z +
             "))) ? r + d : r;\n  return (b == " + z + " || b == -" + one + ") ? " + z +
             " : r;\n}\n";
      }
    }
    for (const char* w : {"32", "64"}) {
      const std::string ty = std::string(w) == "32" ? "uint" : "uint64_t";
      const std::string z = std::string(w) == "32" ? "0u" : "0ul";
      const std::string one = std::string(w) == "32" ? "1u" : "1ul";
      for (const char* op : {"div", "mod"}) {
        if (!helpers_.count(std::string(op) + "_u" + w)) continue;
        p += ty + " bp_" + op + "_u" + w + "(int f, int site, " + ty + " a, " + ty + " b) {\n" +
             note(z) + "  return b == " + z + " ? " + z + " : a " +
             (std::string(op) == "div" ? "/" : "%") + " (b == " + z + " ? " + one + " : b);\n}\n";
      }
    }
    if (helpers_.count("chk")) {
      // An index out of bounds notes code 3 with {index, extent, dimension} and gives false.
      p += "bool bp_chk(int site, int dim, int i, int n) {\n"
           "  bool ok = uint(i) < uint(n);\n"
           "  bp_note(!ok, 3u, site, " +
           t + "(i), " + t + "(n), " + t +
           "(dim));\n"
           "  return ok;\n"
           "}\n";
      if (wide) {
        p += "bool bp_chk(int site, int dim, int64_t i, int64_t n) {\n"
             "  bool ok = uint64_t(i) < uint64_t(n);\n"
             "  bp_note(!ok, 3u, site, i, n, int64_t(dim));\n"
             "  return ok;\n"
             "}\n";
      }
    }
    return p;
  }

  // A new check site of the kernel (its id is its index).
  uint32_t Site(StatusCode code, std::string what) {
    layout.sites.push_back(StatusSite{code, std::move(what)});
    return static_cast<uint32_t>(layout.sites.size() - 1);
  }

  // The statement that records error `site` with details (value, end, this invocation) of
  // GLSL type `type`.
  std::string Record(uint32_t site, const std::string& type, const std::string& value,
                     const std::string& end) {
    const bool wide = type == "int64_t" || type == "uint64_t";
    const std::string cast = wide ? "int64_t" : "int";
    return "bp_fail(" + std::to_string(layout.sites[site].code) + "u, " + std::to_string(site) +
           "u, " + cast + "(" + value + "), " + cast + "(" + end + "), " + cast +
           "(bp_invocation()))";
  }

  static std::string OneLine(std::string text) {
    for (char& c : text) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return text;
  }

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
  bool uses_fminmax_ = false;  // a float min or max: bp_fmin, bp_fmax
  bool uses_erf_ = false;
  bool uses_fmaf_ = false;  // a float32 fma: bp_fmaf
  // Storage buffers (by GLSL name) a float atomic min/max updates through a uint view.
  std::set<std::string> cas_buffers_;
  std::set<std::string> shared_bits_;  // shared float arrays kept as uint (SharedBits)
  std::set<std::string> f64_math_;     // float64 intrinsics computed by our helpers
};

}  // namespace

GlslKernel EmitGlslKernel(const ir::PrimFunc& func, const GlslOptions& options) {
  GlslEmitter emitter(options);
  codegen::CheckOptions checks;
  checks.bounds_check = options.bounds_check;
  emitter.set_checks(checks);
  ir::IRModule one;
  one.Add(func);
  emitter.SetFunction(one.functions()[0]);
  GlslKernel k;
  k.source = emitter.Emit(one);
  k.layout = emitter.layout;
  k.layout.faults = emitter.fault_sites();
  return k;
}

}  // namespace vulkan
}  // namespace backplane
