// SPDX-License-Identifier: Apache-2.0
#include "emitter.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace backplane {
namespace opencl {

namespace {

using ir::DType;
using ir::StmtKind;

// The statement with every `shared` allocation removed (its body kept), and those
// allocations in `hoisted`, outermost first: OpenCL C declares __local arrays only at the
// outermost scope of a kernel, while the IR allocates them inside the thread loops.
ir::Stmt HoistShared(const ir::Stmt& s, std::vector<const ir::AllocateNode*>* hoisted) {
  if (!s) return s;
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto& f = *s.As<ir::ForNode>();
      ir::Stmt body = HoistShared(f.body, hoisted);
      if (f.for_kind == ir::ForKind::kThreadBinding) {
        return ir::ThreadFor(f.var, f.thread, f.min, f.extent, body);
      }
      return ir::WithBody(f, body);
    }
    case StmtKind::kIfThenElse: {
      const auto& n = *s.As<ir::IfThenElseNode>();
      return ir::IfThenElse(n.cond, HoistShared(n.then_case, hoisted),
                            HoistShared(n.else_case, hoisted));
    }
    case StmtKind::kLetStmt: {
      const auto& n = *s.As<ir::LetStmtNode>();
      return ir::WithBody(n, HoistShared(n.body, hoisted));
    }
    case StmtKind::kAllocate: {
      const auto& n = *s.As<ir::AllocateNode>();
      if (n.scope == ir::StorageScope::kShared) {
        hoisted->push_back(&n);
        return HoistShared(n.body, hoisted);
      }
      return ir::Allocate(n.buffer, n.scope, HoistShared(n.body, hoisted));
    }
    case StmtKind::kSeq: {
      std::vector<ir::Stmt> seq;
      for (const ir::Stmt& x : s.As<ir::SeqNode>()->seq) seq.push_back(HoistShared(x, hoisted));
      return ir::Seq(seq);
    }
    default:
      return s;
  }
}

// The element type a buffer of `t` has in memory and in kernel signatures: OpenCL allows no
// bool in a kernel argument, so bool elements are bytes (DLPack's bool is one byte).
DType StorageType(DType t) {
  if (t.is_bool()) return DType{ir::DTypeCode::kUInt, 8, t.lanes};
  return t;
}

}  // namespace

std::vector<KernelArgSpec> KernelArgSpecs(const ir::PrimFunc& func) {
  std::vector<KernelArgSpec> specs;
  for (const ir::Param& p : func.params) {
    KernelArgSpec s;
    if (p.is_buffer()) {
      s.kind = KernelArgSpec::Kind::kBuffer;
      s.bytes = sizeof(void*);
    } else {
      const DType t = p.var().dtype();
      if (t.is_float()) {
        s.kind = KernelArgSpec::Kind::kFloat;
        s.bytes = t.bits == 64 ? 8 : 4;  // float16 is passed as float
      } else if (t.is_bool()) {
        s.kind = KernelArgSpec::Kind::kUInt;
        s.bytes = 1;
      } else {
        s.kind = t.is_uint() ? KernelArgSpec::Kind::kUInt : KernelArgSpec::Kind::kInt;
        s.bytes = t.bits / 8;
      }
    }
    specs.push_back(s);
  }
  return specs;
}

std::string KernelName(const ir::PrimFunc& func) {
  // Name() is the base's; a throwaway emitter spells it the same way as the kernel's text.
  struct Namer : OpenCLEmitter {
    std::string Of(const std::string& n) const { return Name(n); }
  };
  return Namer().Of(func.name);
}

bool KernelHasFaults(const ir::PrimFunc& func, const std::vector<codegen::FaultSite>& sites) {
  for (const codegen::FaultSite& s : sites) {
    if (s.func == func.name) return true;
  }
  return false;
}

std::string OpenCLEmitter::FaultClaim(const std::string& record, const std::string& site) {
  return "atomic_cmpxchg((volatile __global int*)&" + record + "->site, 0, " + site + ") == 0";
}

// int32: OpenCL 1.1's atomic_add/min/max (global and local); int64: the cl_khr_int64 atomics
// (atom_*); float32: a compare-and-swap loop on the element's bits with atomic_cmpxchg;
// float64: the same on 64 bits with cl_khr_int64_base_atomics' atom_cmpxchg.
std::string OpenCLEmitter::AtomicStatement(ir::AtomicOp op, ir::DType t, const std::string& element,
                                           const std::string& value, bool shared) {
  const char* name = op == ir::AtomicOp::kAdd ? "add" : op == ir::AtomicOp::kMin ? "min" : "max";
  if (t.is_float() && t.bits == 16) {
    Unsupported("float16 atomics are not supported by the opencl target; accumulate in float32");
  }
  if (t.is_integer()) {
    if (t.bits == 64) uses_int64_atomics_ = true;
    return std::string(t.bits == 64 ? "atom_" : "atomic_") + name + "(&" + element + ", " + value +
           ");";
  }
  const std::string space = shared ? "__local" : "__global";
  const std::string p = Temp(), o = Temp(), seen = Temp();
  if (t.bits == 64) {  // float64: the loop on 64 bits, cl_khr_int64_base_atomics' atom_cmpxchg
    uses_int64_atomics_ = true;
    const std::string old = "as_double(" + o + ")";
    const std::string update = op == ir::AtomicOp::kAdd
                                   ? old + " + " + value
                                   : FloatMinMax(op == ir::AtomicOp::kMax, old, value, t);
    return "{ volatile " + space + " ulong* " + p + " = (volatile " + space + " ulong*)&" +
           element + "; ulong " + o + " = *" + p + "; for (;;) { const ulong " + seen +
           " = atom_cmpxchg(" + p + ", " + o + ", as_ulong(" + update + ")); if (" + seen +
           " == " + o + ") break; " + o + " = " + seen + "; } }";
  }
  const std::string old = "as_float(" + o + ")";
  const std::string update = op == ir::AtomicOp::kAdd
                                 ? old + " + " + value
                                 : FloatMinMax(op == ir::AtomicOp::kMax, old, value, t);
  return "{ volatile " + space + " uint* " + p + " = (volatile " + space + " uint*)&" + element +
         "; uint " + o + " = *" + p + "; for (;;) { const uint " + seen + " = atomic_cmpxchg(" + p +
         ", " + o + ", as_uint(" + update + ")); if (" + seen + " == " + o + ") break; " + o +
         " = " + seen + "; } }";
}

std::string OpenCLEmitter::Prelude() {
  std::string p = std::string(kHeader) + "\n";
  // The IR rounds a*b+c twice (docs/ir.md); OpenCL C may contract it into an FMA by default.
  p +=
      options_.fp_contract ? "#pragma OPENCL FP_CONTRACT ON\n" : "#pragma OPENCL FP_CONTRACT OFF\n";
  if (uses_fp64_) p += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  if (uses_fp16_) p += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n";
  if (uses_int64_atomics_) {
    p += "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n"
         "#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable\n";
  }
  // The base spells fixed-width integer types as C does; OpenCL C has them under other names.
  p += "typedef char int8_t;\n"
       "typedef uchar uint8_t;\n"
       "typedef short int16_t;\n"
       "typedef ushort uint16_t;\n"
       "typedef int int32_t;\n"
       "typedef uint uint32_t;\n"
       "typedef long int64_t;\n"
       "typedef ulong uint64_t;\n"
       // Contiguous vector loads and stores are spelled as memcpy by the base.
       "#define memcpy __builtin_memcpy\n";
  if (uses_half_storage_) {
    // float16 without cl_khr_fp16: a float rounded to half (round to nearest even) through a
    // 16-bit temporary, as the interpreter rounds every float16 operation. A NaN is the
    // interpreter's (its sign, quiet, no payload): PoCL's vstore_half makes every NaN 0x7fff.
    p += "typedef float bp_half_t;\n"
         "static inline float __attribute__((overloadable)) bp_round_half(float x) {\n"
         "  if (isnan(x)) return as_float((as_uint(x) & 0x80000000u) | 0x7fc00000u);\n"
         "  ushort u; vstore_half_rte(x, 0, (half*)&u); return vload_half(0, (const half*)&u);\n"
         "}\n";
    if (uses_fp64_) {
      p += "static inline float __attribute__((overloadable)) bp_round_half(double x) {\n"
           "  if (isnan(x)) return as_float((uint)(as_ulong(x) >> 32 & 0x80000000u) | "
           "0x7fc00000u);\n"
           "  ushort u; vstore_half_rte(x, 0, (half*)&u); return vload_half(0, (const half*)&u);\n"
           "}\n";
      // An integer converted to float16 matches neither overload better than the other: it
      // goes through float, exactly below 2^24, and above that half is infinite either way.
      for (const char* t : {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong"}) {
        p += std::string("static inline float __attribute__((overloadable)) bp_round_half(") + t +
             " x) { return bp_round_half((float)x); }\n";
      }
    }
  }
  p += FaultHelpers();
  p += NumericHelpers();
  if (uses_floordiv_) {
    p += FloorDivHelpers("static inline");
  }
  return p;
}

void OpenCLEmitter::EmitFunction(const ir::PrimFunc& func) {
  std::string params;
  std::vector<std::string> unpack;
  for (const ir::Param& p : func.params) {
    if (!params.empty()) params += ", ";
    if (p.is_buffer()) {
      const std::string name = Name(p.buffer().name());
      std::string type = TypeName(StorageType(p.buffer().dtype()));
      if (type == "bp_half_t") {  // halves in memory, read and written through vload_half
        type = "half";
        half_buffers_.insert(p.buffer().get());
      }
      params += "__global " + type + "* restrict bp_p_" + name + ", const long bp_o_" + name;
      unpack.push_back("__global " + type + "* restrict " + name + " = (__global " + type +
                       "*)((__global char*)bp_p_" + name + " + bp_o_" + name + ");");
      continue;
    }
    const DType t = p.var().dtype();
    const std::string name = Name(p.var().name());
    if (t.is_bool() || (t.is_float() && t.bits == 16)) {
      // No bool or half kernel arguments: a byte or a float, converted here.
      params += std::string(t.is_bool() ? "const uchar" : "const float") + " bp_s_" + name;
      unpack.push_back(
          "const " + TypeName(t) + " " + name + " = " +
          (t.is_bool() ? "bp_s_" + name + " != 0;" : CastText(TypeName(t), "bp_s_" + name) + ";"));
      continue;
    }
    params += "const " + TypeName(t) + " " + name;
  }
  // The body first, into a stream of its own: whether the kernel takes the fault record is
  // known once its checks were emitted.
  const std::string before = out_.str();
  out_.str("");
  const size_t sites_before = sites_.size();
  ++indent_;
  for (const std::string& u : unpack) Line(u);
  std::vector<const ir::AllocateNode*> shared;
  const ir::Stmt body = HoistShared(func.body, &shared);
  std::map<std::string, const ir::AllocateNode*> seen;
  const launch::KernelSignature sig(func, "opencl");
  std::vector<std::string> local_params(sig.num_launch_sized());
  for (const ir::AllocateNode* a : shared) {
    shared_allocs_.insert(a->buffer.get());  // its atomics address __local memory
    const std::string name = Name(a->buffer.name());
    if (!seen.emplace(name, a).second) {
      Fail("two shared allocations are named '" + a->buffer.name() +
           "'; OpenCL declares them all at the kernel's top, so give them distinct names");
    }
    const int64_t count = ConstantElements(a->buffer, /*must_be_constant=*/false);
    std::string type = TypeName(StorageType(a->buffer.dtype()));
    if (type == "bp_half_t") {  // OpenCL C declares no half array without cl_khr_fp16
      type = "ushort";
      half_buffers_.insert(a->buffer.get());
    }
    if (count < 0) {
      // Sized at launch: a __local pointer argument after the params, in the launch kit's
      // order (SharedArray::launch_index), whose size the launch sets (clSetKernelArg).
      const int at = sig.shared()[static_cast<size_t>(sig.SharedIndex(a))].launch_index;
      local_params[static_cast<size_t>(at)] = "__local " + type + "* restrict " + name;
      continue;
    }
    Line(StorageQualifier(ir::StorageScope::kShared) + type + " " + name + "[" +
         std::to_string(count) + "];");
  }
  for (const std::string& l : local_params) params += (params.empty() ? "" : ", ") + l;
  EmitStmt(body);
  --indent_;
  const std::string text = out_.str();
  if (sites_.size() > sites_before) {
    params += std::string(params.empty() ? "" : ", ") + "__global bp_fault_t* bp_fault";
  }
  out_.str("");
  out_ << before;
  Line("__kernel void " + Name(func.name) + "(" + params + ") {");
  out_ << text;
  Line("}");
}

std::string OpenCLEmitter::TypeName(DType t) {
  std::string scalar;
  switch (t.code) {
    case ir::DTypeCode::kInt:
      scalar = t.bits == 8 ? "char" : t.bits == 16 ? "short" : t.bits == 32 ? "int" : "long";
      break;
    case ir::DTypeCode::kUInt:
      scalar = t.bits == 8 ? "uchar" : t.bits == 16 ? "ushort" : t.bits == 32 ? "uint" : "ulong";
      break;
    case ir::DTypeCode::kFloat:
      if (t.bits == 16 && !options_.float16) {
        // No cl_khr_fp16 (OpenCL C then has no half variables or arithmetic): a float16 value
        // is a float rounded to half after every operation (CastText), and float16 buffers
        // are read and written with vload_half / vstore_half_rte (ElementRead/ElementWrite).
        if (t.lanes != 1) {
          Unsupported("vector type " + ir::ToString(t) +
                      " needs cl_khr_fp16 (supports_float16 in the Target): without it float16 "
                      "is computed one element at a time; use scalar float16 or float32 vectors");
        }
        uses_half_storage_ = true;
        return "bp_half_t";
      }
      if (t.bits == 16) uses_fp16_ = true;
      if (t.bits == 64) uses_fp64_ = true;
      scalar = t.bits == 16 ? "half" : t.bits == 32 ? "float" : "double";
      break;
    case ir::DTypeCode::kBool:
      scalar = t.lanes == 1 ? "bool" : "char";  // OpenCL has no bool vectors
      break;
    case ir::DTypeCode::kHandle:
      Fail("a handle has no OpenCL C type");
  }
  if (t.lanes == 1) {
    // Scalars keep the C spelling for integers (typedefs in the prelude), so the base's
    // casts and literals read the same in both dialects.
    if (t.is_integer())
      return (t.is_uint() ? "u" : "") + std::string("int") + std::to_string(t.bits) + "_t";
    return scalar;
  }
  if (t.lanes != 2 && t.lanes != 4 && t.lanes != 8 && t.lanes != 16) {
    Fail("vector type " + ir::ToString(t) + " has " + std::to_string(t.lanes) +
         " lanes; OpenCL vectors have 2, 4, 8 or 16");
  }
  return scalar + std::to_string(t.lanes);
}

std::string OpenCLEmitter::ContiguousVectorLoad(const ir::Buffer& buffer, DType t,
                                                const std::string& flat) {
  if (t.is_bool()) return CFamilyEmitter::ContiguousVectorLoad(buffer, t, flat);
  return "vload" + std::to_string(t.lanes) + "(0, &" + Name(buffer.name()) + "[" + flat + "])";
}

std::string OpenCLEmitter::ContiguousVectorStore(const ir::Buffer& buffer, DType t,
                                                 const std::string& flat,
                                                 const std::string& value) {
  if (t.is_bool()) return CFamilyEmitter::ContiguousVectorStore(buffer, t, flat, value);
  return "vstore" + std::to_string(t.lanes) + "(" + value + ", 0, &" + Name(buffer.name()) + "[" +
         flat + "]);";
}

std::string OpenCLEmitter::ThreadIndex(ir::ThreadTag tag) {
  switch (tag) {
    case ir::ThreadTag::kBlockIdxX:
      return "get_group_id(0)";
    case ir::ThreadTag::kBlockIdxY:
      return "get_group_id(1)";
    case ir::ThreadTag::kBlockIdxZ:
      return "get_group_id(2)";
    case ir::ThreadTag::kThreadIdxX:
      return "get_local_id(0)";
    case ir::ThreadTag::kThreadIdxY:
      return "get_local_id(1)";
    case ir::ThreadTag::kThreadIdxZ:
      return "get_local_id(2)";
    default:
      Fail("a loop is bound to no thread axis");
  }
}

std::string OpenCLEmitter::BarrierStatement() { return "barrier(CLK_LOCAL_MEM_FENCE);"; }

std::string OpenCLEmitter::StorageQualifier(ir::StorageScope scope) {
  return scope == ir::StorageScope::kShared ? "__local " : "";
}

void OpenCLEmitter::EmitLoopPragma(const ir::ForNode& loop, const std::string&) {
  if (loop.for_kind != ir::ForKind::kUnrolled) return;
  const auto* extent = loop.extent.As<ir::IntImmNode>();
  if (extent != nullptr && extent->value > 0 && extent->value <= 64) {
    // The hint is left out where the program is built with -DBP_NO_UNROLL_HINTS (CPU devices,
    // see BuildOptions in program_cache.h): the source stays the same for every device.
    Line("#ifndef BP_NO_UNROLL_HINTS");
    Line("#pragma unroll " + std::to_string(extent->value));
    Line("#endif");
  }
}

std::string OpenCLEmitter::CastText(const std::string& type, const std::string& operand) {
  if (type == "bp_half_t") return "bp_round_half(" + operand + ")";
  return CFamilyEmitter::CastText(type, operand);
}

std::string OpenCLEmitter::FloatMinMax(bool is_max, const std::string& x, const std::string& y,
                                       DType t) {
  // float16 without cl_khr_fp16 is a float (bp_half_t), with it a half.
  const std::string type = TypeName(t);
  const std::string bits = type == "double" ? "ulong" : type == "half" ? "ushort" : "uint";
  const std::string as = type == "double" ? "as_double" : type == "half" ? "as_half" : "as_float";
  return "(" + x + " == " + y + " ? " + as + "(as_" + bits + "(" + x + ")" +
         (is_max ? " & " : " | ") + "as_" + bits + "(" + y +
         ")) : " + (is_max ? "fmax(" : "fmin(") + x + ", " + y + "))";
}

std::string OpenCLEmitter::FloatLiteral(double v, DType t) {
  if (t.bits == 16 && !options_.float16) {
    // The value of the half nearest v, exactly (the base's literal rounds it the same way).
    if (!std::isnan(v)) v = ir::HalfToFloat(ir::DoubleToHalf(v));
    return CastText("bp_half_t", CFamilyEmitter::FloatLiteral(v, ir::Float32()));
  }
  return CFamilyEmitter::FloatLiteral(v, t);
}

// A float16 element of a buffer held as halves (a parameter, or a shared array of ushort):
// its address as vload_half/vstore_half_rte take it.
std::string OpenCLEmitter::HalfAddress(const ir::Buffer& buffer, const std::string& element) {
  return IsShared(buffer) ? "(__local half*)&" + element : "&" + element;
}

std::string OpenCLEmitter::ElementRead(const ir::Buffer& buffer, const std::string& element) {
  if (half_buffers_.count(buffer.get()) == 0) return CFamilyEmitter::ElementRead(buffer, element);
  return "vload_half(0, " + HalfAddress(buffer, element) + ")";
}

std::string OpenCLEmitter::ElementWrite(const ir::Buffer& buffer, const std::string& element,
                                        const std::string& value) {
  if (half_buffers_.count(buffer.get()) == 0) {
    return CFamilyEmitter::ElementWrite(buffer, element, value);
  }
  return "vstore_half_rte(" + value + ", 0, " + HalfAddress(buffer, element) + ")";
}

std::string OpenCLEmitter::IntrinsicName(const std::string& name, DType) {
  return name;  // OpenCL's math builtins are overloaded on float and double
}

}  // namespace opencl
}  // namespace backplane
