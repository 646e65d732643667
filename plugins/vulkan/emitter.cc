// SPDX-License-Identifier: Apache-2.0
// The GLSL compute-shader dialect of the C-family emitter, one shader per kernel.
#include "emitter.h"

#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/half.hpp>
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

}  // namespace

std::string GlslEmitter::VectorLiteral(ir::DType t, const std::vector<std::string>& lanes) {
  std::string text = TypeName(t) + "(";
  for (size_t l = 0; l < lanes.size(); ++l) text += (l ? ", " : "") + lanes[l];
  return text + ")";
}

std::string GlslEmitter::VectorView(const ir::Buffer& buffer, ir::DType t) {
  // vec2 and vec4 of 32-bit lanes: std430 packs their arrays as tightly as the scalars'.
  if (t.lanes != 2 && t.lanes != 4) return "";
  if (t.bits != 32 || !(t.is_float() || t.is_int() || t.is_uint())) return "";
  if (func_prelude_ == nullptr || written_.count(buffer.get()) != 0) return "";
  for (size_t i = 0; i < layout.bindings.size(); ++i) {
    const ir::Buffer& b = func_prelude_->params[layout.bindings[i]].buffer();
    if (b.get() != buffer.get()) continue;
    const std::string name = "bp_v" + std::to_string(t.lanes) + "_" + Name(b.name());
    vector_views_[name] = {i, TypeName(t)};
    return name;
  }
  return "";
}

std::string GlslEmitter::ContiguousVectorLoad(const ir::Buffer& buffer, ir::DType t,
                                              const std::string& flat) {
  const std::string at = Bind(ir::Int32(), flat);
  if (ContiguousAlignment() % t.lanes == 0) {
    const std::string view = VectorView(buffer, t);
    if (!view.empty()) return view + "[" + at + (t.lanes == 4 ? " >> 2]" : " >> 1]");
  }
  std::string text = TypeName(t) + "(";
  for (int l = 0; l < t.lanes; ++l) {
    text += (l ? ", " : "") +
            ElementRead(buffer, Name(buffer.name()) + "[" + at +
                                    (l ? " + " + std::to_string(l) : std::string()) + "]");
  }
  return text + ")";
}

std::string GlslEmitter::ContiguousVectorStore(const ir::Buffer& buffer, ir::DType t,
                                               const std::string& flat, const std::string& value) {
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

std::string GlslEmitter::Name(const std::string& ir_name) const {
  if (GlslReservedWords().count(ir_name) != 0 || ir_name.rfind("gl_", 0) == 0) {
    return ir_name + "_u";
  }
  return CFamilyEmitter::Name(ir_name);
}

std::string GlslEmitter::TypeName(ir::DType t) {
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

std::string GlslEmitter::ThreadIndex(ir::ThreadTag tag) {
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

void GlslEmitter::EmitSharedAllocation(const ir::AllocateNode& alloc, const std::string&,
                                       const std::string& name, int64_t count) {
  Line("// shared, declared at global scope: " + name + " (" +
       (count < 0 ? std::string("sized at launch") : std::to_string(count) + " elements") + ", " +
       ir::ToString(alloc.buffer.dtype()) + ")");
}

std::string GlslEmitter::FloatDivision(const std::string& x, const std::string& y, ir::DType t) {
  if (t.bits == 16 && t.lanes == 1) {
    // Vulkan lets a float16 OpFDiv be 2.5 ulp off: bp_fdiv in float32, then one rounding to
    // half (float32 holds a half quotient's correctly rounded value: 24 >= 2 * 11 + 2).
    uses_fdiv_ = true;
    return CastText("float16_t", "bp_fdiv(float(" + x + "), float(" + y + "))");
  }
  if (t.bits != 32) return "(" + x + " / " + y + ")";
  uses_fdiv_ = true;
  return "bp_fdiv(" + x + ", " + y + ")";
}

std::string GlslEmitter::FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                                     ir::DType) {
  uses_fminmax_ = true;
  return std::string(is_max ? "bp_fmax(" : "bp_fmin(") + x + ", " + y + ")";
}

std::string GlslEmitter::IntrinsicName(const std::string& name, ir::DType t) {
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

// A float constant as its bits ORed with a zero the shader compiler cannot see
// (`bp_opaque()`, glsl_prelude.cc), so that no constant reaches its optimizer: lavapipe (Mesa
// 22.3) takes `x * 0.0` for 0, `0.0 + x` for x and `0.0 - x` for -x, for every constant that
// folds to zero and even with SignedZeroInfNanPreserve, which is wrong for an infinite or NaN
// x and for signed zeros (docs/vulkan.md, "Float constants"). The value follows in a comment.
std::string GlslEmitter::FloatLiteral(double v, ir::DType t) {
  char value[64];
  std::snprintf(value, sizeof(value), t.bits == 64 ? "%.17g" : "%.9g", v);
  char buf[128];
  if (t.bits == 64) {
    TypeName(t);  // a float64 literal alone declares bp_k64 (layout.uses_float64)
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    std::snprintf(buf, sizeof(buf), "bp_k64(0x%08xu, 0x%08xu /* %s */)",
                  static_cast<unsigned>(bits & 0xffffffffu), static_cast<unsigned>(bits >> 32),
                  value);
    return buf;
  }
  // float16: the float32 value of the half nearest v (rounded once, as the interpreter rounds
  // it), converted exactly.
  const float f =
      t.bits == 16 && !std::isnan(v) ? ir::HalfToFloat(ir::DoubleToHalf(v)) : static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::snprintf(buf, sizeof(buf), "bp_k32(0x%08xu /* %s */)", static_cast<unsigned>(bits), value);
  return t.bits == 16 ? "float16_t(" + std::string(buf) + ")" : std::string(buf);
}

std::string GlslEmitter::EmitIntLiteral(int64_t v, ir::DType t) {
  if (t.is_bool()) return v != 0 ? "true" : "false";
  TypeName(t);  // refuses the types the target lacks
  if (t.is_uint()) return std::to_string(static_cast<uint64_t>(v)) + (t.bits == 64 ? "ul" : "u");
  const std::string suffix = t.bits == 64 ? "l" : "";
  if (t.bits == 64 && v == INT64_MIN) return "(-9223372036854775807l - 1l)";
  if (t.bits == 32 && v == INT32_MIN) return "(-2147483647 - 1)";
  return v < 0 ? "(" + std::to_string(v) + suffix + ")" : std::to_string(v) + suffix;
}

void GlslEmitter::EmitCopies(const ir::ForNode& loop, const std::string& type,
                             const std::string& var, const std::string& at, int64_t count,
                             const std::string& stop) {
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

void GlslEmitter::EmitLoop(const ir::ForNode& loop, const std::string& type, const std::string& var,
                           const std::string& begin, const std::string& end) {
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

void GlslEmitter::EmitZeroedArray(const std::string& declaration, const std::string& type,
                                  const std::string& name, int64_t count) {
  const uint32_t site = Site(kStatusLoopCutShort, "the loop that zero-fills local array '" + name +
                                                      "' (" + std::to_string(count) + " elements)");
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

std::string GlslEmitter::FlatIndex(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices) {
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

void GlslEmitter::EmitFunction(const ir::PrimFunc& func) {
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
      Line("const float16_t " + name + " = " + CastText("float16_t", "bp_push." + name) + ";");
    } else {
      Line("const " + TypeName(v.dtype()) + " " + name + " = bp_push." + name + ";");
    }
  }
  const size_t top = out_.str().size();
  index_temps_.clear();
  written_.clear();
  ir::ForEachStmt(func.body, [&](const ir::Stmt& s) {
    if (const auto* store = s.As<ir::StoreNode>()) written_.insert(store->buffer.get());
    if (const auto* atomic = s.As<ir::AtomicNode>()) written_.insert(atomic->buffer.get());
  });
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

std::string GlslEmitter::Record(uint32_t site, const std::string& type, const std::string& value,
                                const std::string& end) {
  const bool wide = type == "int64_t" || type == "uint64_t";
  const std::string cast = wide ? "int64_t" : "int";
  return "bp_fail(" + std::to_string(layout.sites[site].code) + "u, " + std::to_string(site) +
         "u, " + cast + "(" + value + "), " + cast + "(" + end + "), " + cast +
         "(bp_invocation()))";
}

std::string GlslEmitter::OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

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
