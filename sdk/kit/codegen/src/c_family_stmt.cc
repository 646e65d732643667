// SPDX-License-Identifier: Apache-2.0
// The C-family emitter's statements: checked accesses, stores, atomics, loops, allocations.
#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/expf.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "c_family_internal.hpp"

namespace backplane {
namespace codegen {

// The parts of a bounds-checked access (docs/codegen-guide.md, "Run-time checks"): its
// index is computed once into `index` through bp_chk/bp_chkv, which clear the flag `ok` when
// an index is out of bounds (after recording the fault); the access then does not happen, so
// even an empty buffer with a null pointer is never touched.
struct CFamilyEmitter::CheckedAccess {
  std::string ok;     // the flag's name
  std::string index;  // the flat index's name
  std::string decls;  // "int ok = 1; " (the index is declared where it is computed)
};

CFamilyEmitter::CheckedAccess CFamilyEmitter::BeginCheckedAccess() {
  CheckedAccess a;
  a.ok = Temp();
  a.index = Temp();
  a.decls = "int " + a.ok + " = 1; ";
  return a;
}

// The checked flat index of an access: `scalar` are the index texts of every dimension (for a
// contiguous vector access the last is its base, checked for `lanes` elements).
std::string CFamilyEmitter::CheckedAccessIndex(const ir::Buffer& buffer,
                                               const std::vector<std::string>& scalar, int lanes,
                                               int site, const std::string& ok) {
  const ir::BufferNode& bn = *buffer.get();
  std::vector<std::string> texts;
  for (size_t k = 0; k < scalar.size(); ++k) {
    const std::string extent = EmitExpr(bn.shape[k]);
    if (lanes > 1 && k + 1 == scalar.size()) {
      texts.push_back("bp_chkv(bp_fault, " + std::to_string(site) + ", " + std::to_string(k) +
                      ", (int64_t)(" + scalar[k] + "), " + std::to_string(lanes) + ", (int64_t)(" +
                      extent + "), &" + ok + ")");
    } else {
      texts.push_back(CheckedIndex(scalar[k], extent, static_cast<int>(k), site) + ok + ")");
    }
  }
  return CheckedFlat(buffer, texts);
}

std::string CFamilyEmitter::EmitCheckedLoad(const ir::LoadNode& load, int site) {
  const DType t = load.dtype;
  const std::string buf = Name(load.buffer.name());
  const CheckedAccess a = BeginCheckedAccess();
  std::vector<std::string> idx;
  if (t.lanes == 1) {
    idx = EmitInOrder(AsIndexed(load.indices));
    return StatementExpression(a.decls + "const int64_t " + a.index + " = " +
                                   CheckedAccessIndex(load.buffer, idx, 1, site, a.ok) + ";",
                               a.ok + " ? " + ElementRead(load.buffer, buf + "[" + a.index + "]") +
                                   " : " + CastText(TypeName(t), "0"));
  }
  const std::string v = Temp(), l = Temp();
  const std::string zero = "for (int " + l + " = 0; " + l + " < " + std::to_string(t.lanes) +
                           "; ++" + l + ") " + v + "[" + l + "] = 0;";
  ir::Expr base;
  if (Contiguous(load.buffer, load.indices, &base)) {
    std::vector<ir::Expr> scalar = load.indices;
    scalar.back() = base;
    idx = EmitInOrder(AsIndexed(scalar));
    return StatementExpression(
        TypeName(t) + " " + v + "; " + a.decls + "const int64_t " + a.index + " = " +
            CheckedAccessIndex(load.buffer, idx, t.lanes, site, a.ok) + "; if (" + a.ok +
            ") memcpy(&" + v + ", &" + buf + "[" + a.index + "], sizeof(" + v + ")); else " + zero,
        v);
  }
  // Gather lane by lane; after a lane out of bounds the rest are 0.
  std::string decls;
  idx = EmitInOrder(AsIndexed(load.indices));
  for (size_t k = 0; k < idx.size(); ++k) {
    if (load.indices[k].dtype().lanes > 1) {
      std::string iv = Temp();
      decls += TypeName(load.indices[k].dtype()) + " " + iv + " = " + idx[k] + "; ";
      idx[k] = iv + "[" + l + "]";
    }
  }
  return StatementExpression(
      TypeName(t) + " " + v + "; " + decls + a.decls + "for (int " + l + " = 0; " + l + " < " +
          std::to_string(t.lanes) + "; ++" + l + ") { const int64_t " + a.index + " = " +
          CheckedAccessIndex(load.buffer, idx, 1, site, a.ok) + "; " + v + "[" + l + "] = " + a.ok +
          " ? " + ElementRead(load.buffer, buf + "[" + a.index + "]") + " : 0; }",
      v);
}

void CFamilyEmitter::EmitCheckedStore(const ir::StoreNode& store, int site) {
  const DType t = store.value.dtype();
  const std::string buf = Name(store.buffer.name());
  // The value first, as the interpreter: a bad load in it is the error, not the store.
  const std::string v = Temp();
  Operand value = EmitOperand(store.value);
  const CheckedAccess a = BeginCheckedAccess();
  const int lanes = store.indices.back().dtype().lanes;
  std::vector<ir::Expr> indices = store.indices;
  ir::Expr base;
  const bool scalar = lanes == 1 && t.lanes == 1;
  const bool contiguous = !scalar && Contiguous(store.buffer, store.indices, &base);
  if (contiguous) indices.back() = base;
  std::vector<std::string> idx = EmitInOrder(AsIndexed(indices));
  KeepInOrder(&value);
  const std::string decl = TypeName(t) + " " + v + " = " + value.text + "; ";
  if (scalar) {
    Line("{ " + decl + a.decls + "const int64_t " + a.index + " = " +
         CheckedAccessIndex(store.buffer, idx, 1, site, a.ok) + "; if (" + a.ok + ") " +
         ElementWrite(store.buffer, buf + "[" + a.index + "]", v) + "; }");
    return;
  }
  if (contiguous) {
    Line("{ " + decl + a.decls + "const int64_t " + a.index + " = " +
         CheckedAccessIndex(store.buffer, idx, t.lanes, site, a.ok) + "; if (" + a.ok +
         ") memcpy(&" + buf + "[" + a.index + "], &" + v + ", sizeof(" + v + ")); }");
    return;
  }
  // Scatter lane by lane; after a lane out of bounds the rest are not stored.
  const std::string l = Temp();
  std::string decls;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (store.indices[k].dtype().lanes > 1) {
      std::string iv = Temp();
      decls += TypeName(store.indices[k].dtype()) + " " + iv + " = " + idx[k] + "; ";
      idx[k] = iv + "[" + l + "]";
    }
  }
  Line("{ " + decl + decls + a.decls + "for (int " + l + " = 0; " + l + " < " +
       std::to_string(t.lanes) + "; ++" + l + ") { const int64_t " + a.index + " = " +
       CheckedAccessIndex(store.buffer, idx, 1, site, a.ok) + "; if (" + a.ok + ") " +
       ElementWrite(store.buffer, buf + "[" + a.index + "]", t.lanes > 1 ? v + "[" + l + "]" : v) +
       "; } }");
}

std::string CFamilyEmitter::AtomicStatement(ir::AtomicOp op, DType t, const std::string&,
                                            const std::string&, bool) {
  Fail(std::string(ir::ToString(op)) + " on " + ir::ToString(t) + ": the " + DialectName() +
       " code generator has no atomics");
}

void CFamilyEmitter::EmitAtomic(const ir::Stmt& s) {
  const ir::AtomicNode& a = *s.As<ir::AtomicNode>();
  const DType t = a.buffer.dtype();
  if (checks_.bounds_check) {
    std::string text = ir::Print(s, 0);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EmitCheckedAtomic(a, AccessSite(a.buffer, text));
    return;
  }
  // The value, then the indices (as a store).
  Operand value = EmitOperand(a.value);
  const std::string flat = FlatIndex(a.buffer, a.indices);
  KeepInOrder(&value);
  const std::string v = Temp();
  Line("{ " + TypeName(t) + " " + v + " = " + value.text + "; " +
       AtomicStatement(a.op, t, Name(a.buffer.name()) + "[" + flat + "]", v, IsShared(a.buffer)) +
       " }");
}

void CFamilyEmitter::EmitCheckedAtomic(const ir::AtomicNode& atomic, int site) {
  const DType t = atomic.buffer.dtype();
  const std::string v = Temp();
  Operand value = EmitOperand(atomic.value);
  const CheckedAccess a = BeginCheckedAccess();
  std::vector<std::string> idx = EmitInOrder(AsIndexed(atomic.indices));
  KeepInOrder(&value);
  Line("{ " + TypeName(t) + " " + v + " = " + value.text + "; " + a.decls + "const int64_t " +
       a.index + " = " + CheckedAccessIndex(atomic.buffer, idx, 1, site, a.ok) + "; if (" + a.ok +
       ") { " +
       AtomicStatement(atomic.op, t, Name(atomic.buffer.name()) + "[" + a.index + "]", v,
                       IsShared(atomic.buffer)) +
       " } }");
}

void CFamilyEmitter::EmitStore(const ir::Stmt& s) {
  const ir::StoreNode& store = *s.As<ir::StoreNode>();
  const DType t = store.value.dtype();
  const std::string buf = Name(store.buffer.name());
  if (checks_.bounds_check) {
    std::string text = ir::Print(s, 0);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EmitCheckedStore(store, AccessSite(store.buffer, text));
    return;
  }
  // The value, then the indices (as the checked store has them).
  Operand value = EmitOperand(store.value);
  if (t.lanes == 1) {
    const int64_t effects = effects_;
    const std::string flat = FlatIndex(store.buffer, store.indices);
    const std::string text = value.text;
    KeepInOrder(&value);
    // C leaves the order of `a[i] = v`'s operands unspecified and GLSL computes the index first;
    // the IR computes the value first (docs/ir.md), so where both note faults the value goes
    // into a temporary before the store.
    if (value.text == text && !value.simple && value.effects && effects_ != effects) {
      BindAt(&value);
    }
    Line(ElementWrite(store.buffer, buf + "[" + flat + "]", value.text) + ";");
    return;
  }
  ir::Expr base;
  const bool contiguous = Contiguous(store.buffer, store.indices, &base);
  const std::string v = Temp();
  if (contiguous) {
    std::vector<ir::Expr> idx = store.indices;
    idx.back() = base;
    const std::string flat = FlatIndex(store.buffer, idx);
    KeepInOrder(&value);
    contiguous_alignment_ = AlignmentOf(store.buffer, idx);
    const std::string access = ContiguousVectorStore(store.buffer, t, flat, v);
    contiguous_alignment_ = 1;
    Line("{ " + TypeName(t) + " " + v + " = " + value.text + "; " + access + " }");
    return;
  }
  const std::string l = Temp();
  std::string decls;
  std::vector<std::string> lane_idx = EmitInOrder(AsIndexed(store.indices));
  KeepInOrder(&value);
  const std::string flat =
      LaneFlatIndex(store.buffer, store.indices, std::move(lane_idx), l, &decls);
  Line("{ " + TypeName(t) + " " + v + " = " + value.text + "; " + decls + "for (int " + l +
       " = 0; " + l + " < " + std::to_string(t.lanes) + "; ++" + l + ") " +
       ElementWrite(store.buffer, buf + "[" + flat + "]", v + "[" + l + "]") + "; }");
}

void CFamilyEmitter::EmitStmt(const ir::Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto& f = *s.As<ir::ForNode>();
      const std::string var = Name(f.var.name());
      const std::string type = TypeName(f.var.dtype());
      // The loop variable is min + i * step: known modulo what divides the step.
      CongruenceScope scope;
      Congruence known;  // nothing
      if (f.for_kind != ir::ForKind::kThreadBinding && f.step) {
        const Congruence lo = CongruenceOf(f.min, 0), step = CongruenceOf(f.step, 0);
        known = Known(std::gcd(lo.modulus, std::gcd(step.modulus, step.residue)), lo.residue);
      }
      Bound(f.var, known, &scope);
      struct RestoreAtEnd {
        CFamilyEmitter* e;
        CongruenceScope* s;
        ~RestoreAtEnd() { e->Restore(s); }
      } restore{this, &scope};
      if (f.for_kind == ir::ForKind::kThreadBinding) {
        Line("{");
        ++indent_;
        std::string index = ThreadIndex(f.thread);
        const ir::IntImmNode* min = AsIntImm(f.min);
        Line("const " + type + " " + var + " = " +
             (min != nullptr && min->value == 0
                  ? CastText(type, index)
                  : CastText(type, "(" + EmitExpr(f.min) + " + " + index + ")")) +
             ";");
        EmitStmt(f.body);
        --indent_;
        Line("}");
        return;
      }
      // The IR evaluates min and extent once, as the loop starts. A C `for` evaluates its
      // condition at every iteration, so a bound that loads from a buffer (which the body may
      // write) or has an effect is computed once, into a const before the loop; a bound of
      // variables and literals reads the same every time and is written as it is. The
      // temporaries a deep bound needs come before the loop either way.
      const ir::IntImmNode* min = AsIntImm(f.min);
      const bool from_zero = min != nullptr && min->value == 0;
      Operand lo = EmitOperand(f.min);
      Operand extent = EmitOperand(f.extent);
      // A variable that the body may assign (`var`) changes under a C condition too.
      auto once = [&](const Operand& op) {
        return (!op.simple && (op.effects || op.reads || op.writes)) || MentionsAssignable(f.min) ||
               MentionsAssignable(f.extent);
      };
      if (once(extent)) BindAt(&extent);
      if (once(lo)) {
        BindAt(&lo);
      } else {
        KeepInOrder(&lo);
      }
      const std::string end = from_zero ? extent.text : lo.text + " + " + extent.text;
      const bool parallel = f.for_kind == ir::ForKind::kParallel;
      const std::string region = parallel ? ParallelRegionCondition(f, extent.text) : "";
      if (!region.empty()) {
        // The loop twice: in a parallel region when `region` holds, else a plain loop. (A
        // region that its `if` clause turns off still costs the runtime's team set-up, about
        // 0.3 to 0.7 us, more than a small kernel's work.)
        Line("if (" + region + ") {");
        ++indent_;
        EmitLoopPragma(f, extent.text);
        ++parallel_depth_;
        EmitLoop(f, type, var, lo.text, end);
        --indent_;
        Line("} else {");
        ++indent_;
        EmitLoop(f, type, var, lo.text, end);
        --parallel_depth_;
        --indent_;
        Line("}");
        return;
      }
      EmitLoopPragma(f, extent.text);
      if (parallel) ++parallel_depth_;
      EmitLoop(f, type, var, lo.text, end);
      if (parallel) --parallel_depth_;
      return;
    }
    case StmtKind::kIfThenElse:
      EmitIf(*s.As<ir::IfThenElseNode>());
      return;
    case StmtKind::kLetStmt: {
      const auto& n = *s.As<ir::LetStmtNode>();
      if (n.assignable) assignable_.insert(n.var.get());
      // Not `const`: clang evaluates a const local's initializer as a constant expression, in
      // time exponential in its nested conditionals (a 40-deep chain of the IR's float max
      // did not compile in minutes; docs/codegen-guide.md, "Long expressions").
      Line(TypeName(n.var.dtype()) + " " + Name(n.var.name()) + " = " + EmitExpr(n.value) + ";");
      CongruenceScope scope;
      // An assignable variable may change: nothing is known of it.
      Bound(n.var, n.assignable ? Congruence{} : CongruenceOf(n.value, 0), &scope);
      EmitStmt(n.body);
      Restore(&scope);
      return;
    }
    case StmtKind::kAssign: {
      const auto& n = *s.As<ir::AssignNode>();
      Line(Name(n.var.name()) + " = " + EmitExpr(n.value) + ";");
      return;
    }
    case StmtKind::kAtomic:
      EmitAtomic(s);
      return;
    case StmtKind::kStore:
      EmitStore(s);
      return;
    case StmtKind::kAllocate: {
      const auto& n = *s.As<ir::AllocateNode>();
      if (n.scope == ir::StorageScope::kShared) shared_allocs_.insert(n.buffer.get());
      const std::string name = Name(n.buffer.name());
      const std::string type = TypeName(n.buffer.dtype());
      const int64_t count = ConstantElements(n.buffer, /*must_be_constant=*/false);
      if (n.scope == ir::StorageScope::kShared) {  // count -1: sized at launch
        EmitSharedAllocation(n, type, name, count);
        EmitStmt(n.body);
        return;
      }
      const int64_t element_bytes = ArrayElementBytes(n.buffer.dtype());
      const int64_t bytes = count * element_bytes;
      // Device code keeps a `local` array in each thread's private memory, which no GPU has
      // more than 512 KiB of (CUDA's local memory a thread): a larger one is refused here, as
      // a 400 MB one made lavapipe exhaust the host's memory when the kernel ran. The arrays
      // it is nested in count too (stack_bytes_): they all live while its body runs.
      if (StackBudget() < 0 && n.scope == ir::StorageScope::kLocal && count >= 0 &&
          (count > kDevicePrivateBytes || bytes > kDevicePrivateBytes - stack_bytes_)) {
        const bool wider = element_bytes != CFamilyEmitter::ArrayElementBytes(n.buffer.dtype());
        Fail("allocation '" + n.buffer.name() + "' (" + ir::ToString(n.buffer.dtype()) + ", " +
             std::to_string(count) + " elements" +
             (wider ? " of " + std::to_string(element_bytes) + " bytes, as " + DialectName() +
                          " device code holds them"
                    : std::string()) +
             ", local) takes more than " + std::to_string(kDevicePrivateBytes - stack_bytes_) +
             " bytes a thread" +
             (stack_bytes_ > 0 ? " (with the " + std::to_string(stack_bytes_) +
                                     " bytes of the local arrays it is nested in, " +
                                     std::to_string(kDevicePrivateBytes) + ")"
                               : std::string()) +
             ", the most " + DialectName() +
             " device code allows (CUDA's local memory a thread); use a global buffer, or "
             "shared memory for what a block shares");
      }
      // (count is compared first: count times the element's bytes may not fit in an int64.)
      const bool within_budget =
          StackBudget() < 0 || (count <= StackBudget() && bytes <= StackBudget() - stack_bytes_);
      const bool small = count <= 64 * 1024 && bytes <= 64 * 1024;
      if (count >= 0 && (n.scope != ir::StorageScope::kGlobal || small) && within_budget) {
        stack_bytes_ += bytes;
        const std::string elements = "[" + std::to_string(count) + "]";
        if (RestrictStackArrays()) {
          // Accessed through a restrict pointer: once the compiler's induction variables turn
          // `&array[i]` into plain integers, the restrict tag is what still tells it that the
          // array aliases nothing else, so it can keep a local accumulator tile in registers
          // across a loop (store motion) instead of loading and storing it at every step.
          const std::string storage = "bp_storage_" + name;
          EmitZeroedArray(StorageQualifier(n.scope) + type + " " + storage + elements, type,
                          storage, count);
          Line(type + "* restrict " + name + " = " + storage + ";");
        } else {
          EmitZeroedArray(StorageQualifier(n.scope) + type + " " + name + elements, type, name,
                          count);
        }
        EmitStmt(n.body);
        stack_bytes_ -= bytes;
        return;
      }
      std::string size;  // for messages
      for (const ir::Expr& d : n.buffer->shape) {
        size += (size.empty() ? "" : " * ") + ir::Print(d);
      }
      EmitHeapAllocation(n, type, name, size);
      return;
    }
    case StmtKind::kEvaluate: {
      const ir::Expr& v = s.As<ir::EvaluateNode>()->value;
      Line("(void)" + EmitExpr(v) + ";");
      return;
    }
    case StmtKind::kBarrier:
      Line(BarrierStatement());
      return;
    case StmtKind::kSeq:
      for (const ir::Stmt& x : s.As<ir::SeqNode>()->seq) EmitStmt(x);
      return;
  }
  Fail("unknown statement kind");
}

int64_t CFamilyEmitter::ConstantElements(const ir::Buffer& buffer, bool must_be_constant) const {
  const int64_t elem_bytes =
      std::max<int64_t>((buffer.dtype().bits + 7) / 8 * int64_t{buffer.dtype().lanes}, 1);
  int64_t count = 1;
  for (const ir::Expr& d : buffer->shape) {
    const ir::IntImmNode* c = AsIntImm(d);
    if (c == nullptr) {
      if (!must_be_constant) return -1;
      Fail("allocation '" + buffer.name() + "' in " + DialectName() +
           " needs a constant size (its shape must be numbers)");
    }
    if (c->value < 0 || (c->value != 0 && count > INT64_MAX / elem_bytes / c->value)) {
      Fail("allocation '" + buffer.name() + "' has " + std::to_string(buffer->shape.size()) +
           " dimensions whose product in bytes passes INT64_MAX (or a negative one); give it a "
           "size that fits the device");
    }
    count *= c->value;
  }
  return count;
}

void CFamilyEmitter::EmitSharedAllocation(const ir::AllocateNode& n, const std::string& type,
                                          const std::string& name, int64_t count) {
  if (count < 0) {
    std::string shape;
    for (const ir::Expr& d : n.buffer->shape) shape += (shape.empty() ? "" : ", ") + ir::Print(d);
    Fail("shared allocation '" + n.buffer.name() + "' is sized at launch ([" + shape +
         "]), which " + DialectName() + " cannot declare; give it a constant size");
  }
  Line(StorageQualifier(n.scope) + type + " " + name + "[" + std::to_string(count) + "];");
}

void CFamilyEmitter::EmitHeapAllocation(const ir::AllocateNode& n, const std::string& type,
                                        const std::string& /*name*/, const std::string& size) {
  Fail("allocation '" + n.buffer.name() + "' (" + type + ", " + size +
       " elements) is too large or not of constant size for the " + DialectName() + " target");
}

}  // namespace codegen
}  // namespace backplane
