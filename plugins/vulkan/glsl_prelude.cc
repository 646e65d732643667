// SPDX-License-Identifier: Apache-2.0
// The GLSL dialect's shader layout (bindings, push constants, workgroup size) and prelude
// (declarations, extensions and the helper functions the kernel uses).
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
#include "glsl_emitter.h"

namespace backplane {
namespace vulkan {

namespace {

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

// bp_fmin/bp_fmax: the IR's float min and max (IEEE 754-2019's minimumNumber and
// maximumNumber: a NaN operand gives the other one, -0 is below +0), which GLSL's min and max
// leave undefined for a NaN and unordered for zeros. Equal operands give their bits ORed (min)
// or ANDed (max): the same value, or -0 (+0) from two zeros. float and double (GLSL overloads).
const char* const kFminMaxGlsl =
    "float bp_fmin(float a, float b) {\n"
    "  return isnan(a) ? b : isnan(b) ? a : a == b ? "
    "uintBitsToFloat(floatBitsToUint(a) | floatBitsToUint(b)) : min(a, b);\n"
    "}\n"
    "float bp_fmax(float a, float b) {\n"
    "  return isnan(a) ? b : isnan(b) ? a : a == b ? "
    "uintBitsToFloat(floatBitsToUint(a) & floatBitsToUint(b)) : max(a, b);\n"
    "}\n";
const char* const kFminMaxGlsl64 =
    "double bp_fmin(double a, double b) {\n"
    "  return isnan(a) ? b : isnan(b) ? a : a == b ? "
    "packDouble2x32(unpackDouble2x32(a) | unpackDouble2x32(b)) : min(a, b);\n"
    "}\n"
    "double bp_fmax(double a, double b) {\n"
    "  return isnan(a) ? b : isnan(b) ? a : a == b ? "
    "packDouble2x32(unpackDouble2x32(a) & unpackDouble2x32(b)) : max(a, b);\n"
    "}\n";
// The same on float16_t, through float (exact: min and max do not round).
const char* const kFminMaxGlsl16 =
    "float16_t bp_fmin(float16_t a, float16_t b) { return float16_t(bp_fmin(float(a), "
    "float(b))); }\n"
    "float16_t bp_fmax(float16_t a, float16_t b) { return float16_t(bp_fmax(float(a), "
    "float(b))); }\n";

// bp_f16: a value converted to float16, rounded to the nearest half (ties to even) on its bits.
// NVIDIA's Vulkan compiler folds float(float16_t(x)) to x, so a plain conversion whose result is
// read back as float32 kept float32's extra bits (the IR rounds to half: docs/vulkan.md,
// "float16"). A float is rounded by integer arithmetic here, and the conversion of the result,
// a half exactly, is exact whether or not a compiler folds it.
const char* const kFloat16RoundGlsl =
    "float bp_f16_round(float x) {\n"
    "  uint b = floatBitsToUint(x);\n"
    "  uint a = b & 0x7fffffffu, s = b & 0x80000000u;\n"
    "  if (a >= 0x7f800000u) return x;  // inf, NaN\n"
    "  if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);  // 65520 or more: inf\n"
    "  uint e = a >> 23u;\n"
    "  if (e < 102u) return uintBitsToFloat(s);  // under 2^-25: zero\n"
    "  uint m = (a & 0x7fffffu) | 0x800000u;\n"
    "  // The bits under a half's last place: 13, more for a subnormal half (steps of 2^-24).\n"
    "  uint d = e >= 113u ? 13u : 126u - e;\n"
    "  uint keep = m >> d, rem = m & ((1u << d) - 1u), tie = 1u << (d - 1u);\n"
    "  if (rem > tie || (rem == tie && (keep & 1u) != 0u)) keep += 1u;\n"
    "  return uintBitsToFloat(floatBitsToUint(ldexp(float(keep), int(e) - 150 + int(d))) | s);\n"
    "}\n"
    "float16_t bp_f16(float16_t x) { return x; }\n"
    "float16_t bp_f16(float x) { return float16_t(bp_f16_round(x)); }\n"
    "float16_t bp_f16(int x) { return bp_f16(float(x)); }\n"
    "float16_t bp_f16(uint x) { return bp_f16(float(x)); }\n"
    "float16_t bp_f16(bool x) { return x ? float16_t(1.0) : float16_t(0.0); }\n";

// bp_f16 of a double: rounded to odd at float's precision first (truncated, the last bit set
// when anything was cut off), which the rounding to half then rounds as it would round x
// (24 >= 11 + 2 bits). Built from the bits, since a compiler may fold double(float(x)) too.
const char* const kFloat16RoundGlsl64 =
    "float16_t bp_f16(double x) {\n"
    "  uvec2 w = unpackDouble2x32(x);\n"
    "  uint s = w.y & 0x80000000u, e = (w.y >> 20u) & 0x7ffu;\n"
    "  if (e == 0x7ffu) return float16_t(float(x));  // inf, NaN\n"
    "  if (e < 997u) return float16_t(uintBitsToFloat(s));  // under 2^-26: zero\n"
    "  if (e > 1039u) return float16_t(uintBitsToFloat(s | 0x7f800000u));  // 2^17 or more: inf\n"
    "  uint m = ((w.y & 0xfffffu) << 3u) | (w.x >> 29u);\n"
    "  if ((w.x & 0x1fffffffu) != 0u) m |= 1u;\n"
    "  return bp_f16(uintBitsToFloat(s | ((e - 896u) << 23u) | m));\n"
    "}\n";

// bp_f16 of a vector: lane by lane, for the lane types named by `prefixes` (GLSL's vector
// prefixes: "", "f16", "i", "u", "b", "d", "i64", "u64").
std::string Float16RoundVectors(const std::vector<std::string>& prefixes) {
  std::string out;
  for (const std::string& p : prefixes) {
    for (int n = 2; n <= 4; ++n) {
      const std::string N = std::to_string(n);
      out += "f16vec" + N + " bp_f16(" + p + "vec" + N + " v) { return f16vec" + N + "(";
      for (int l = 0; l < n; ++l) out += std::string(l ? ", " : "") + "bp_f16(v." + "xyzw"[l] + ")";
      out += "); }\n";
    }
  }
  return out;
}

// bp_fdiv on vectors, lane by lane.
const char* const kFdivVectorGlsl =
    "vec2 bp_fdiv(vec2 a, vec2 b) { return vec2(bp_fdiv(a.x, b.x), bp_fdiv(a.y, b.y)); }\n"
    "vec3 bp_fdiv(vec3 a, vec3 b) {\n"
    "  return vec3(bp_fdiv(a.x, b.x), bp_fdiv(a.y, b.y), bp_fdiv(a.z, b.z));\n"
    "}\n"
    "vec4 bp_fdiv(vec4 a, vec4 b) {\n"
    "  return vec4(bp_fdiv(a.x, b.x), bp_fdiv(a.y, b.y), bp_fdiv(a.z, b.z), bp_fdiv(a.w, b.w));\n"
    "}\n";

}  // namespace

std::string GlslEmitter::Prelude() {
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
  for (const auto& [name, view] : vector_views_) {
    decls += "layout(std430, set = 0, binding = " + std::to_string(view.first) + ") buffer " +
             name + "_block { " + view.second + " " + name + "[]; };\n";
  }
  if (!layout.push.empty()) {
    decls += "layout(push_constant) uniform bp_push_block {\n";
    for (const PushField& f : layout.push) {
      const ir::Var& v = func.params[f.param].var();
      const std::string type = v.dtype().is_bool()                            ? "int"
                               : v.dtype().is_float() && v.dtype().bits == 16 ? "float"
                                                                              : TypeName(v.dtype());
      decls += "  layout(offset = " + std::to_string(f.offset) + ") " + type + " " +
               Name(v.name()) + ";\n";
    }
    decls += "} bp_push;\n";
  }
  for (const std::string& s : shared_) decls += s + "\n";
  if (uses_floordiv_) layout.uses_int64 = true;
  // Float constants (GlslEmitter::FloatLiteral): a zero the compiler cannot prove, as a
  // dispatch has at least one workgroup.
  std::string helpers =
      "uint bp_opaque() { return uint(gl_NumWorkGroups.x == 0u); }\n"
      "float bp_k32(uint bits) { return uintBitsToFloat(bits | bp_opaque()); }\n";
  if (layout.uses_float64) {
    helpers +=
        "double bp_k64(uint lo, uint hi) { return packDouble2x32(uvec2(lo | bp_opaque(), hi)); "
        "}\n";
  }
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
  // The float-to-integer helpers first: their types (int64) decide the float16 ones.
  const std::string numeric = NumericHelpers();
  if (uses_f16_) {
    helpers += kFloat16RoundGlsl;
    std::vector<std::string> prefixes = {"f16", "", "i", "u", "b"};
    if (layout.uses_float64) {
      helpers += kFloat16RoundGlsl64;
      prefixes.push_back("d");
    }
    if (layout.uses_int64) {
      helpers +=
          "float16_t bp_f16(int64_t x) { return bp_f16(float(x)); }\n"
          "float16_t bp_f16(uint64_t x) { return bp_f16(float(x)); }\n";
      prefixes.insert(prefixes.end(), {"i64", "u64"});
    }
    helpers += Float16RoundVectors(prefixes);
  }
  if (uses_fdiv_) helpers += std::string(kFdivGlsl) + kFdivVectorGlsl;
  if (uses_fminmax_) {
    helpers += kFminMaxGlsl;
    if (layout.uses_float64) helpers += kFminMaxGlsl64;
    if (layout.uses_float16) helpers += kFminMaxGlsl16;
  }
  helpers += numeric;
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
  if (layout.atomics & kAtomicFloatAdd) head += "#extension GL_EXT_shader_atomic_float : require\n";
  return head + decls + helpers;
}

void GlslEmitter::MakeLayout(const ir::PrimFunc& func) {
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
      const std::string type = a->buffer.dtype().is_float() && shared_bits_.count(name) != 0
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
        at_launch[axis] ? 0u : static_cast<uint32_t>(std::min<int64_t>(constant[axis], UINT32_MAX));
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

}  // namespace vulkan
}  // namespace backplane
