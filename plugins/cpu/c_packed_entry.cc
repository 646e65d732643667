// SPDX-License-Identifier: Apache-2.0
// The C dialect's packed entry: the argument check of a call compiled into the kernel library,
// as TVM's compiled functions bind and check their own packed arguments.
#include <backplane/ir/analysis.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "c_emitter.h"

namespace backplane {
namespace codegen {
namespace {

using ir::DType;

// The range of an integer or bool scalar param; false for a dtype ArgCheck leaves to CheckArgs.
bool ScalarRange(DType t, int64_t* lo, int64_t* hi) {
  if (!t.is_scalar() || t.is_handle() || t.bits == 0 || t.bits > 64) return false;
  *lo = 0;
  if (t.is_bool()) {
    *hi = 1;
  } else if (t.is_uint()) {
    *hi = t.bits == 64 ? INT64_MAX : static_cast<int64_t>((uint64_t{1} << t.bits) - 1);
  } else if (t.is_int()) {
    *lo = t.bits == 64 ? INT64_MIN : -(int64_t{1} << (t.bits - 1));
    *hi = t.bits == 64 ? INT64_MAX : (int64_t{1} << (t.bits - 1)) - 1;
  } else {
    return false;
  }
  return true;
}

std::string Int(int64_t v) {
  return v == INT64_MIN ? "INT64_MIN" : "INT64_C(" + std::to_string(v) + ")";
}

// A number or a scalar param, the two kinds of extent and stride the packed entry reads: the
// same terms ir::ArgCheck's fast path reads. False for any other expression.
bool Term(const ir::PrimFunc& func, const ir::Expr& e, std::string* out) {
  if (!e) return false;
  const DType d = e.dtype();
  if (!d.is_scalar() || !(d.is_integer() || d.is_bool()) || d.bits == 0 || d.bits > 64) {
    return false;
  }
  if (const auto* c = e.As<ir::IntImmNode>()) {
    // Wrapped to its dtype, as ArgCheck reads it; a number already in range is itself.
    int64_t lo = 0, hi = 0;
    if (!ScalarRange(d, &lo, &hi) || c->value < lo || c->value > hi) return false;
    *out = Int(c->value);
    return true;
  }
  const auto* v = e.As<ir::VarNode>();
  if (v == nullptr) return false;
  // Matched by node, else by name, as the IR's checker matches a variable to its param.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < func.params.size(); ++k) {
      const ir::Param& p = func.params[k];
      if (p.is_buffer()) continue;
      if (pass == 0 ? p.var().get() == v : p.var().name() == v->name) {
        // The param's value has passed its range check by then: wrapping it to the term's
        // dtype changes it only if the two dtypes differ, which the fast path leaves alone.
        if (p.var().dtype() != v->dtype) return false;
        *out = "bp_v[" + std::to_string(k) + "].u.i";
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::string CEmitter::PackedEntryTypes() {
  // DLPack's DLTensor and Backplane's bp_value_t, spelled out: the kernel library is compiled
  // without Backplane's headers. Both layouts are fixed (DLPack's ABI; bp_value_t within ABI
  // major 1); the c plugin asserts them against the real headers.
  return "typedef struct { int32_t device_type; int32_t device_id; } bp_dl_device_t;\n"
         "typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } bp_dl_dtype_t;\n"
         "typedef struct {\n"
         "  void* data;\n"
         "  bp_dl_device_t device;\n"
         "  int32_t ndim;\n"
         "  bp_dl_dtype_t dtype;\n"
         "  const int64_t* shape;\n"
         "  const int64_t* strides;\n"
         "  uint64_t byte_offset;\n"
         "} bp_dl_tensor_t;\n"
         "typedef struct {\n"
         "  int32_t type;\n"
         "  int32_t reserved0;\n"
         "  union { int64_t i; double f; const bp_dl_tensor_t* t; } u;\n"
         "} bp_value_t;\n"
         "#define BP_REFUSED (-1)\n"
         "/* The bytes [*lo, *hi) a tensor argument spans (a negative stride reaches below data); "
         "0\n"
         "   when the span does not fit in 64 bits, which no real buffer does. */\n"
         "static inline int bp_span(const bp_dl_tensor_t* t, int32_t ndim, uintptr_t* lo,\n"
         "                          uintptr_t* hi) {\n"
         "  const uintptr_t begin = (uintptr_t)t->data + (uintptr_t)t->byte_offset;\n"
         "  int64_t low = 0, high = 0, stride = 1, step = 0;\n"
         "  for (int32_t d = ndim - 1; d >= 0; --d) {\n"
         "    if (t->shape[d] == 0) { *lo = *hi = begin; return 1; }\n"
         "    const int64_t s = t->strides != NULL ? t->strides[d] : stride;\n"
         "    if (__builtin_mul_overflow(t->shape[d] - 1, s, &step) ||\n"
         "        __builtin_add_overflow(s < 0 ? low : high, step, s < 0 ? &low : &high) ||\n"
         "        __builtin_mul_overflow(stride, t->shape[d], &stride)) {\n"
         "      return 0;\n"
         "    }\n"
         "  }\n"
         "  const int64_t bytes = ((int64_t)t->dtype.bits * t->dtype.lanes + 7) / 8;\n"
         "  if (__builtin_mul_overflow(low, bytes, &low) || __builtin_mul_overflow(high, bytes, "
         "&high) ||\n"
         "      __builtin_add_overflow(high, bytes, &high)) {\n"
         "    return 0;\n"
         "  }\n"
         "  *lo = begin + (uintptr_t)low;\n"
         "  *hi = begin + (uintptr_t)high;\n"
         "  return 1;\n"
         "}\n";
}

bool CEmitter::EmitPackedEntry(const ir::PrimFunc& func) {
  // Only what ir::ArgCheck's fast path checks with compares is compiled here; a function with
  // any other extent, rank or param dtype gets no packed entry and every call takes the
  // runtime's check. A function with call_packed needs the runtime's argument views too.
  const size_t n = func.params.size();
  std::vector<std::string> lines;
  auto line = [&lines](const std::string& s) { lines.push_back(s); };
  line("if (bp_n != " + std::to_string(n) + ") return BP_REFUSED;");
  if (n > 0) line("bp_arg_t bp_a[" + std::to_string(n) + "];");
  // Scalars first: an extent may read a later scalar, which must have passed its range check.
  for (size_t k = 0; k < n; ++k) {
    const ir::Param& p = func.params[k];
    if (p.is_buffer()) continue;
    const std::string v = "bp_v[" + std::to_string(k) + "]", a = "bp_a[" + std::to_string(k) + "]";
    const DType t = p.var().dtype();
    if (t.is_float()) {
      if (!t.is_scalar()) return false;
      line("if (" + v + ".type == 2) " + a + ".f = " + v + ".u.f; else if (" + v + ".type == 1) " +
           a + ".f = (double)" + v + ".u.i; else return BP_REFUSED;");
      continue;
    }
    int64_t lo = 0, hi = 0;
    if (!ScalarRange(t, &lo, &hi)) return false;
    std::string cond = v + ".type != 1";
    if (lo != INT64_MIN) cond += " || " + v + ".u.i < " + Int(lo);
    if (hi != INT64_MAX) cond += " || " + v + ".u.i > " + Int(hi);
    line("if (" + cond + ") return BP_REFUSED;");
    line(a + ".i = " + v + ".u.i;");
  }
  std::vector<size_t> buffers;
  for (size_t k = 0; k < n; ++k) {
    const ir::Param& p = func.params[k];
    if (!p.is_buffer()) continue;
    buffers.push_back(k);
    const ir::Buffer& b = p.buffer();
    const DType d = b.dtype();
    const size_t rank = b->shape.size();
    const bool declared = !b->strides.empty();
    if (rank > 8 || (declared && b->strides.size() != rank)) return false;
    const std::string ks = std::to_string(k), t = "bp_t" + ks;
    // A tensor object (a read-only DLPack import, a Tensor passed as itself) takes the
    // runtime's path: its flags and its DLTensor are the core's to read.
    line("const bp_dl_tensor_t* const " + t + " = bp_v[" + ks + "].type == 6 ? bp_v[" + ks +
         "].u.t : NULL;");
    line("if (" + t + " == NULL || (" + t + "->device.device_type != 1 && " + t +
         "->device.device_type != 3 && " + t + "->device.device_type != 11) || " + t +
         "->dtype.code != " + std::to_string(static_cast<int>(d.code)) + " || " + t +
         "->dtype.bits != " + std::to_string(d.bits) + " || " + t + "->dtype.lanes != " +
         std::to_string(d.lanes) + " || " + t + "->ndim != " + std::to_string(rank) +
         (rank > 0 ? " || " + t + "->shape == NULL" : "") + ") return BP_REFUSED;");
    std::vector<std::string> want(rank);
    std::string empty;
    for (size_t d2 = 0; d2 < rank; ++d2) {
      std::string term;
      if (!Term(func, b->shape[d2], &term)) return false;
      want[d2] = "bp_w" + ks + "_" + std::to_string(d2);
      line("const int64_t " + want[d2] + " = " + term + ";");
      line("if (" + want[d2] + " < 0 || " + t + "->shape[" + std::to_string(d2) +
           "] != " + want[d2] + ") return BP_REFUSED;");
      empty += (empty.empty() ? "" : " || ") + want[d2] + " == 0";
    }
    line("if (" + t + "->data == NULL" + (empty.empty() ? "" : " && !(" + empty + ")") +
         ") return BP_REFUSED;");
    // Compact strides, or the declared ones; a stride of an extent-1 dimension is free.
    if (rank > 0) {
      std::vector<std::string> expected(rank);
      for (size_t d2 = 0; d2 < rank && declared; ++d2) {
        if (!Term(func, b->strides[d2], &expected[d2])) return false;
      }
      line(std::string(declared ? "{" : "if (" + t + "->strides != NULL) {"));
      line("  uint64_t bp_c = 1;");
      for (size_t i = rank; i-- > 0;) {
        const std::string ds = std::to_string(i);
        const std::string given = declared ? "(" + t + "->strides != NULL ? " + t + "->strides[" +
                                                 ds + "] : (int64_t)bp_c)"
                                           : t + "->strides[" + ds + "]";
        const std::string expect = declared ? expected[i] : "(int64_t)bp_c";
        line("  if (" + want[i] + " != 1 && " + given + " != " + expect + ") return BP_REFUSED;");
        if (i > 0) line("  bp_c *= (uint64_t)" + want[i] + ";");
      }
      line("}");
    }
    line("bp_a[" + ks + "].p = " + t + "->data == NULL ? NULL : (char*)" + t + "->data + " + t +
         "->byte_offset;");
  }
  // Buffers are restrict pointers: a written buffer must not overlap another buffer argument.
  const std::vector<const ir::BufferNode*> written = ir::WrittenBuffers(func.body);
  bool writes = false;
  for (size_t k : buffers) {
    for (const ir::BufferNode* w : written) writes = writes || func.params[k].buffer().get() == w;
  }
  if (writes && buffers.size() > 1) {
    line("uintptr_t bp_lo[" + std::to_string(n) + "], bp_hi[" + std::to_string(n) + "];");
    for (size_t k : buffers) {
      const std::string ks = std::to_string(k);
      // The rank as a number: the loop unrolls.
      // A span past 64 bits goes to the runtime's check, whose message says what is wrong.
      line("if (!bp_span(bp_t" + ks + ", " + std::to_string(func.params[k].buffer()->shape.size()) +
           ", &bp_lo[" + ks + "], &bp_hi[" + ks + "])) return BP_REFUSED;");
    }
    for (size_t i : buffers) {
      bool w = false;
      for (const ir::BufferNode* x : written) w = w || func.params[i].buffer().get() == x;
      if (!w) continue;
      for (size_t j : buffers) {
        if (j == i) continue;
        const std::string is = std::to_string(i), js = std::to_string(j);
        line("if (bp_lo[" + is + "] < bp_hi[" + js + "] && bp_lo[" + js + "] < bp_hi[" + is +
             "]) return BP_REFUSED;");
      }
    }
  }
  line(std::string("return ") + kKernelPrefix + func.name + "(" + (n > 0 ? "bp_a" : "NULL") +
       ", bp_ctx);");

  Line("BP_EXPORT int32_t " + std::string(kPackedPrefix) + func.name +
       "(const bp_value_t* bp_v, int32_t bp_n, bp_ctx_t* bp_ctx) {");
  ++indent_;
  if (n == 0) Line("(void)bp_v;");
  for (const std::string& s : lines) Line(s);
  --indent_;
  Line("}");
  return true;
}

}  // namespace codegen
}  // namespace backplane
