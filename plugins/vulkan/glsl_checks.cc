// SPDX-License-Identifier: Apache-2.0
// The GLSL dialect's checked accesses and atomics, and the fault helpers of its checks.
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

std::string GlslEmitter::ElementWrite(const ir::Buffer& buffer, const std::string& element,
                                      const std::string& value) {
  if (!SharedBits(buffer)) return element + " = " + value;
  return element + (buffer.dtype().bits == 64 ? " = doubleBitsToUint64(" : " = floatBitsToUint(") +
         value + ")";
}

std::string GlslEmitter::EmitCheckedLoad(const ir::LoadNode& load, int site) {
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

std::string GlslEmitter::SignedRemainder(const std::string& x, const std::string& y, ir::DType t) {
  const std::string w = t.bits <= 32 ? "32" : "64";
  helpers_.insert("rem_i" + w);
  return "bp_rem_i" + w + "(" + x + ", " + y + ")";
}

std::string GlslEmitter::AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                                         const std::string& value, bool shared) {
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
    const std::string update = op == ir::AtomicOp::kAdd
                                   ? "(" + old + " + " + value + ")"
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

void GlslEmitter::EmitCheckedAtomic(const ir::AtomicNode& atomic, int site) {
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

void GlslEmitter::EmitCheckedStore(const ir::StoreNode& store, int site) {
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

std::string GlslEmitter::CheckedVectorIndices(const ir::Buffer& buffer,
                                              const std::vector<ir::Expr>& indices,
                                              const std::vector<std::string>& texts, int lanes,
                                              int site, std::string* assign,
                                              std::vector<std::string>* lane_flat) {
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

std::string GlslEmitter::EmitCheckedVectorLoad(const ir::LoadNode& load, int site) {
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

void GlslEmitter::EmitCheckedVectorStore(const ir::StoreNode& store, int site) {
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

std::string GlslEmitter::CheckedIndices(const ir::Buffer& buffer,
                                        const std::vector<ir::Expr>& indices, int site,
                                        std::string* flat) {
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

std::string GlslEmitter::IndexType(const ir::Expr& index, const ir::Expr& extent) {
  if (index.dtype().bits == 64 || extent.dtype().bits == 64) {
    layout.uses_int64 = true;
    return "int64_t";
  }
  return "int";
}

std::string GlslEmitter::IndexCheck(const std::string& var, const std::string& type,
                                    const ir::Expr& extent, size_t dim, int site) {
  return "bp_chk(" + std::to_string(site) + ", " + std::to_string(dim) + ", " + var + ", " + type +
         "(" + EmitExpr(extent) + "))";
}

std::string GlslEmitter::CheckedFlatIndex(const ir::Buffer& buffer,
                                          const std::vector<std::string>& vars) {
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

std::string GlslEmitter::FaultHelpersGlsl() {
  const bool wide = layout.uses_int64;
  const std::string t = wide ? "int64_t" : "int";  // the details' type
  std::string p = "const int bp_fault = 0;  // the record is bp_status\n";
  if (fault_sites().empty()) return p;  // main records no note (EmitFunction)
  p += "uint bp_f_code = 0u;\nint bp_f_site = 0;\n" + t + " bp_f_a = " + t + "(0), bp_f_b = " + t +
       "(0), bp_f_c = " + t + "(0);\n";
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
           "))) ? r + d : r;\n  return (b == " + z + " || b == -" + one + ") ? " + z + " : r;\n}\n";
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

}  // namespace vulkan
}  // namespace backplane
