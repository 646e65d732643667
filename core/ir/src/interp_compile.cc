// SPDX-License-Identifier: Apache-2.0
// The interpreter's compiler: a PrimFunc to closures over a Frame (interp_runtime.hpp). Each
// expression node gets its own registers (lanes of them) and a closure that computes them from
// its children's registers; a Var or a constant is just a register, with no closure. The
// semantics are in docs/ir.md ("Interpreter").
#include <algorithm>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cmath>
#include <new>
#include <type_traits>

#include "interp_ops.hpp"
#include "interp_runtime.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {
namespace detail {
namespace {

using namespace interp;  // NOLINT(google-build-using-namespace)

// Allocation sizes beyond this are refused (as an error rather than an exhausted machine).
constexpr uint64_t kMaxAllocBytes = uint64_t{1} << 40;
constexpr const char* kTooLarge =
    "it is too large (more than 1099511627776 bytes); size it smaller";

// ---- the compiler -----------------------------------------------------------------------------

class Compiler {
 public:
  Compiler(const PrimFunc& f, CompiledFunc* out) : func_(f), out_(out) {}

  void Run() {
    for (size_t k = 0; k < func_.params.size(); ++k) {
      const Param& p = func_.params[k];
      if (p.is_buffer()) {
        const int slot = NewSlot(p.buffer(), static_cast<int>(k));
        buffers_.emplace_back(p.buffer().get(), slot);
        out_->param_reg.push_back(slot);
      } else {
        if (!p.var().dtype().is_scalar())
          Fail("a vector scalar parameter '" + p.var().name() + "'");
        const int reg = NewRegs(1);
        vars_.emplace_back(p.var().get(), reg);
        out_->param_reg.push_back(reg);
      }
    }
    out_->body = S(func_.body);
  }

 private:
  int NewRegs(int lanes) {
    const int r = static_cast<int>(out_->init_regs.size());
    out_->init_regs.resize(out_->init_regs.size() + static_cast<size_t>(lanes), I(0));
    return r;
  }
  int NewSlot(const Buffer& b, int param) {
    if (!b.dtype().is_scalar() || b.dtype().is_handle())
      Fail("buffer '" + b.name() + "' of " + ToString(b.dtype()) +
           ": the interpreter runs buffers of scalar dtypes");
    BufSlot s;
    s.name = b.name();
    s.dtype = b.dtype();
    s.elem = ElemOf(b.dtype());
    s.ndim = static_cast<int>(b->shape.size());
    s.dims_off = static_cast<int>(out_->ndims);
    s.param = param;
    out_->ndims += 2 * b->shape.size();
    out_->bufs.push_back(s);
    return static_cast<int>(out_->bufs.size() - 1);
  }
  int VarReg(const VarNode* v) const {
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
      if (it->first == v) return it->second;
    Fail("'" + v->name + "' is not defined here");
  }
  int BufferSlot(const Buffer& b) const {
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
      if (it->first == b.get()) return it->second;
    Fail("buffer '" + b.name() + "' is not defined here");
  }

  // ---- expressions ----

  CE E(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        const int r = NewRegs(1);
        out_->init_regs[static_cast<size_t>(r)] =
            I(WrapInt(U(e.As<IntImmNode>()->value), e.dtype()));
        return {r, 1, nullptr};
      }
      case ExprKind::kFloatImm: {
        const int r = NewRegs(1);
        out_->init_regs[static_cast<size_t>(r)] =
            F(RoundFloat(e.As<FloatImmNode>()->value, e.dtype()));
        return {r, 1, nullptr};
      }
      case ExprKind::kVar:
        return {VarReg(e.As<VarNode>()), e.dtype().lanes, nullptr};
      case ExprKind::kBinary:
        return Binary(*e.As<BinaryNode>(), e);
      case ExprKind::kNot: {
        CE a = E(e.As<NotNode>()->a);
        const int out = NewRegs(a.lanes);
        return {out, a.lanes, [fa = std::move(a.fn), ra = a.reg, out, lanes = a.lanes](Frame& f) {
                  Eval(fa, f);
                  Val* r = f.regs.data();
                  for (int l = 0; l < lanes; ++l) r[out + l].i = r[ra + l].i == 0 ? 1 : 0;
                }};
      }
      case ExprKind::kNeg: {
        CE a = E(e.As<NegNode>()->a);
        const int out = NewRegs(a.lanes);
        const DType t = e.dtype();
        if (t.is_float()) {
          return {out, a.lanes, [fa = std::move(a.fn), ra = a.reg, out, lanes = a.lanes](Frame& f) {
                    Eval(fa, f);
                    Val* r = f.regs.data();
                    for (int l = 0; l < lanes; ++l) r[out + l].f = -r[ra + l].f;
                  }};
        }
        return {out, a.lanes,
                [fa = std::move(a.fn), ra = a.reg, out, lanes = a.lanes, t](Frame& f) {
                  Eval(fa, f);
                  Val* r = f.regs.data();
                  for (int l = 0; l < lanes; ++l) r[out + l].i = WrapInt(U(0) - U(r[ra + l].i), t);
                }};
      }
      case ExprKind::kSelect:
        return Select(*e.As<SelectNode>(), e);
      case ExprKind::kCast:
        return CastExpr(*e.As<CastNode>(), e);
      case ExprKind::kLoad:
        return LoadExpr(*e.As<LoadNode>(), e);
      case ExprKind::kCall:
        return CallExpr(*e.As<CallNode>(), e);
      case ExprKind::kCallPacked:
        return CallPackedExpr(*e.As<CallPackedNode>());
      case ExprKind::kRamp:
        return RampExpr(*e.As<RampNode>(), e);
      case ExprKind::kBroadcast: {
        CE v = E(e.As<BroadcastNode>()->value);
        if (v.lanes != 1) Fail("broadcast of a vector in `" + Quote(e) + "`");
        const int lanes = e.dtype().lanes;
        const int out = NewRegs(lanes);
        return {out, lanes, [fv = std::move(v.fn), rv = v.reg, out, lanes](Frame& f) {
                  Eval(fv, f);
                  Val* r = f.regs.data();
                  for (int l = 0; l < lanes; ++l) r[out + l] = r[rv];
                }};
      }
      case ExprKind::kBufferRef:
        Fail("buffer '" + e.As<BufferRefNode>()->buffer.name() + "' used as a value");
    }
    Fail("unknown expression");
  }

  CE Binary(const BinaryNode& n, const Expr& e) {
    CE a = E(n.a);
    CE b = E(n.b);
    if (a.lanes != b.lanes) Fail("operands of different lanes in `" + Quote(e) + "`");
    const int out = NewRegs(a.lanes);
    const DType t = n.a.dtype().Element();
    if (IsLogical(n.op) && a.lanes == 1) {  // && and || short-circuit, as in C
      const bool is_and = n.op == BinaryOp::kAnd;
      return {out, 1,
              [fa = std::move(a.fn), fb = std::move(b.fn), ra = a.reg, rb = b.reg, out,
               is_and](Frame& f) {
                Eval(fa, f);
                Val* r = f.regs.data();
                if ((r[ra].i != 0) != is_and) {
                  r[out].i = is_and ? 0 : 1;
                  return;
                }
                Eval(fb, f);
                r[out].i = r[rb].i != 0 ? 1 : 0;
              }};
    }
    Fn fn;
    if (t.is_float()) {
      fn = t.bits == 16   ? FloatBinary<16>(n.op, a, b, out)
           : t.bits == 32 ? FloatBinary<32>(n.op, a, b, out)
                          : FloatBinary<64>(n.op, a, b, out);
    } else {
      fn = IntBinary(n.op, t, a, b, out, e);
    }
    return {out, a.lanes, std::move(fn)};
  }

  CE Select(const SelectNode& n, const Expr& e) {
    CE c = E(n.cond), a = E(n.a), b = E(n.b);
    const int lanes = a.lanes;
    if (b.lanes != lanes || (c.lanes != 1 && c.lanes != lanes))
      Fail("operands of different lanes in `" + Quote(e) + "`");
    const int out = NewRegs(lanes);
    if (lanes == 1) {
      // A scalar select evaluates the chosen arm only, as C's ?: (docs/ir.md): a load that
      // `select(i < n, x[i], 0.0)` guards is never made, and the arm not taken never faults.
      return {out, 1,
              [fc = std::move(c.fn), fa = std::move(a.fn), fb = std::move(b.fn), rc = c.reg,
               ra = a.reg, rb = b.reg, out](Frame& f) {
                Eval(fc, f);
                Val* r = f.regs.data();
                if (r[rc].i != 0) {
                  Eval(fa, f);
                  r[out] = r[ra];
                } else {
                  Eval(fb, f);
                  r[out] = r[rb];
                }
              }};
    }
    return {out, lanes,
            [fc = std::move(c.fn), fa = std::move(a.fn), fb = std::move(b.fn), rc = c.reg,
             sc = c.lanes == 1 ? 0 : 1, ra = a.reg, rb = b.reg, out, lanes](Frame& f) {
              // A vector select evaluates every lane of both arms, then picks lane by lane
              // (docs/ir.md): the code generators compute both vectors too.
              Eval(fc, f);
              Eval(fa, f);
              Eval(fb, f);
              Val* r = f.regs.data();
              for (int l = 0; l < lanes; ++l)
                r[out + l] = r[rc + sc * l].i != 0 ? r[ra + l] : r[rb + l];
            }};
  }

  CE CastExpr(const CastNode& n, const Expr& e) {
    CE v = E(n.value);
    const int lanes = e.dtype().lanes;
    if (v.lanes != 1 && v.lanes != lanes) Fail("a cast between lanes in `" + Quote(e) + "`");
    const int out = NewRegs(lanes);
    return {out, lanes,
            [fv = std::move(v.fn), rv = v.reg, sv = v.lanes == 1 ? 0 : 1,
             from = n.value.dtype().Element(), to = e.dtype().Element(), out, lanes](Frame& f) {
              Eval(fv, f);
              Val* r = f.regs.data();
              for (int l = 0; l < lanes; ++l) r[out + l] = CastVal(r[rv + sv * l], from, to);
            }};
  }

  Access MakeAccess(const Buffer& b, const std::vector<Expr>& indices, Site site, int* lanes) {
    Access a;
    a.slot = BufferSlot(b);
    const BufSlot& s = out_->bufs[static_cast<size_t>(a.slot)];
    if (static_cast<int>(indices.size()) != s.ndim) Fail("rank mismatch in `" + site.Text() + "`");
    a.off = s.dims_off;
    a.nd = s.ndim;
    *lanes = 1;
    for (size_t k = 0; k < indices.size(); ++k) {
      // The index as the IR computes it: its +, -, * in int64 (docs/ir.md, "Index arithmetic"),
      // and so the base and the lanes of a contiguous last index, ramp(base, 1, lanes).
      const Expr& index = indices[k];
      const RampNode* r = k + 1 == indices.size() ? ContiguousRamp(index) : nullptr;
      Expr wide = WidenIndex(index);
      if (r != nullptr && r->base.dtype().is_integer() && r->base.dtype().bits < 64) {
        Expr base = WidenIndex(r->base);
        if (base.dtype().bits != 64) base = Cast(Int64(), base);
        wide = Ramp(base, IntImm(Int64(), 1), index.dtype().lanes);
      }
      CE c = E(wide);
      a.reg.push_back(c.reg);
      a.lanes.push_back(c.lanes);
      if (c.fn) a.fns.push_back(std::move(c.fn));
      if (c.lanes != 1) {
        if (*lanes != 1 && *lanes != c.lanes)
          Fail("indices of different lanes in `" + site.Text() + "`");
        *lanes = c.lanes;
      }
    }
    site.buffer = b.name();
    a.site = std::make_shared<const Site>(std::move(site));
    return a;
  }

  CE LoadExpr(const LoadNode& n, const Expr& e) {
    int lanes = 1;
    Access a = MakeAccess(n.buffer, n.indices, Site{std::string(), e, Stmt()}, &lanes);
    const int out = NewRegs(lanes);
    Fn fn;
    switch (out_->bufs[static_cast<size_t>(a.slot)].elem) {
#define BACKPLANE_IR_LOAD(K)                          \
  case Elem::K:                                       \
    fn = MakeLoad<Elem::K>(std::move(a), out, lanes); \
    break;
      BACKPLANE_IR_LOAD(kI8)
      BACKPLANE_IR_LOAD(kI16)
      BACKPLANE_IR_LOAD(kI32)
      BACKPLANE_IR_LOAD(kI64)
      BACKPLANE_IR_LOAD(kU8)
      BACKPLANE_IR_LOAD(kU16)
      BACKPLANE_IR_LOAD(kU32)
      BACKPLANE_IR_LOAD(kU64)
      BACKPLANE_IR_LOAD(kF16)
      BACKPLANE_IR_LOAD(kF32)
      BACKPLANE_IR_LOAD(kF64)
      BACKPLANE_IR_LOAD(kBool)
#undef BACKPLANE_IR_LOAD
    }
    return {out, lanes, std::move(fn)};
  }

  CE CallExpr(const CallNode& n, const Expr& e) {
    int id = -1;
    const auto& all = Intrinsics();
    for (size_t k = 0; k < all.size(); ++k)
      if (n.name == all[k].name) id = static_cast<int>(k);
    if (id < 0 || n.args.empty()) Fail("unknown intrinsic '" + n.name + "'");
    std::vector<CE> args;
    const int lanes = e.dtype().lanes;
    for (const Expr& a : n.args) {
      args.push_back(E(a));
      if (args.back().lanes != 1 && args.back().lanes != lanes)
        Fail("arguments of different lanes in `" + Quote(e) + "`");
    }
    const DType t = n.args[0].dtype();
    for (const Expr& a : n.args)
      if (!a.dtype().is_float() || a.dtype().bits != t.bits)
        Fail("intrinsic " + n.name + " on " + ToString(a.dtype()) + " in `" + Quote(e) + "`");
    const int out = NewRegs(lanes);
    const auto which = static_cast<Intrin>(id);
    Fn fn = t.bits == 16   ? MakeIntrinsic<16>(which, args, out, lanes)
            : t.bits == 32 ? MakeIntrinsic<32>(which, args, out, lanes)
                           : MakeIntrinsic<64>(which, args, out, lanes);
    return {out, lanes, std::move(fn)};
  }

  CE CallPackedExpr(const CallPackedNode& n) {
    struct Arg {
      enum Kind { kInt, kFloat, kParam, kAlloc } kind;
      int index;  // register or buffer slot
    };
    std::vector<Arg> args;
    std::vector<Fn> fns;
    for (const Expr& a : n.args) {
      if (const auto* ref = a.As<BufferRefNode>()) {
        const int slot = BufferSlot(ref->buffer);
        const int param = out_->bufs[static_cast<size_t>(slot)].param;
        // A global allocation of host code passed to a packed call may be a device workspace
        // (verify refuses call_packed inside a region).
        if (param < 0 && !in_region_ && alloc_scope_.count(slot) != 0 &&
            alloc_scope_[slot] == StorageScope::kGlobal)
          out_->bufs[static_cast<size_t>(slot)].workspace = true;
        args.push_back({param >= 0 ? Arg::kParam : Arg::kAlloc, param >= 0 ? param : slot});
        continue;
      }
      CE c = E(a);
      if (c.lanes != 1) Fail("a vector argument of call_packed(\"" + n.name + "\")");
      if (c.fn) fns.push_back(std::move(c.fn));
      args.push_back({a.dtype().is_float() ? Arg::kFloat : Arg::kInt, c.reg});
    }
    const int out = NewRegs(1);
    const std::vector<BufSlot>& slots = out_->bufs;  // the CompiledFunc outlives its closures
    return {out, 1, [name = n.name, args, fns = std::move(fns), out, &slots](Frame& f) {
              for (const Fn& g : fns) g(f);
              std::vector<ArgView> views;
              views.reserve(args.size());
              for (const Arg& a : args) {
                switch (a.kind) {
                  case Arg::kInt:
                    views.push_back(IntArg(f.regs[static_cast<size_t>(a.index)].i));
                    break;
                  case Arg::kFloat:
                    views.push_back(FloatArg(f.regs[static_cast<size_t>(a.index)].f));
                    break;
                  case Arg::kParam:
                    views.push_back((*f.run->args)[static_cast<size_t>(a.index)]);
                    break;
                  case Arg::kAlloc: {
                    const BufSlot& s = slots[static_cast<size_t>(a.index)];
                    const int64_t* dims = f.dims.data() + s.dims_off;
                    views.push_back(BufferArg(f.data[static_cast<size_t>(a.index)], s.dtype, s.ndim,
                                              dims, dims + s.ndim));
                    views.back().user = f.user[static_cast<size_t>(a.index)];
                    break;
                  }
                }
              }
              if (f.run->call == nullptr || !*f.run->call)
                throw Error(ErrorKind::kValue,
                            f.run->func->name + ": call_packed(\"" + name +
                                "\") needs a PackedCall: pass one to Interpreter::Run");
              f.regs[static_cast<size_t>(out)].i = WrapInt(U((*f.run->call)(name, views)), Int32());
            }};
  }

  CE RampExpr(const RampNode& n, const Expr& e) {
    CE b = E(n.base), s = E(n.stride);
    if (b.lanes != 1 || s.lanes != 1) Fail("ramp of vectors in `" + Quote(e) + "`");
    const int lanes = e.dtype().lanes;
    const int out = NewRegs(lanes);
    const DType t = n.base.dtype().Element();
    return {out, lanes,
            [fb = std::move(b.fn), fs = std::move(s.fn), rb = b.reg, rs = s.reg, out, lanes,
             t](Frame& f) {
              Eval(fb, f);
              Eval(fs, f);
              Val* r = f.regs.data();
              for (int l = 0; l < lanes; ++l) {
                if (t.is_float()) {
                  r[out + l].f = RoundFloat(r[rb].f + l * r[rs].f, t);
                } else {
                  r[out + l].i = WrapInt(U(r[rb].i) + U(l) * U(r[rs].i), t);
                }
              }
            }};
  }

  // ---- statements ----

  Fn S(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq: {
        std::vector<Fn> seq;
        for (const Stmt& c : s.As<SeqNode>()->seq) seq.push_back(S(c));
        return [seq = std::move(seq)](Frame& f) {
          for (const Fn& g : seq) g(f);
        };
      }
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        if (n->for_kind != ForKind::kThreadBinding) return Loop(*n);
        return in_region_ ? ThreadLoop(*n) : Region(*n);
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        CE c = E(n->cond);
        Fn then_case = S(n->then_case);
        Fn else_case = n->else_case ? S(n->else_case) : Fn();
        return [fc = std::move(c.fn), rc = c.reg, then_case = std::move(then_case),
                else_case = std::move(else_case)](Frame& f) {
          Eval(fc, f);
          if (f.regs[static_cast<size_t>(rc)].i != 0) {
            then_case(f);
          } else {
            Eval(else_case, f);
          }
        };
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        CE v = E(n->value);
        const int lanes = n->var.dtype().lanes;
        if (v.lanes != lanes) Fail("let '" + n->var.name() + "' of different lanes");
        const int reg = NewRegs(lanes);
        vars_.emplace_back(n->var.get(), reg);
        Fn body = S(n->body);
        vars_.pop_back();
        return [fv = std::move(v.fn), rv = v.reg, reg, lanes, body = std::move(body)](Frame& f) {
          Eval(fv, f);
          Val* r = f.regs.data();
          for (int l = 0; l < lanes; ++l) r[reg + l] = r[rv + l];
          body(f);
        };
      }
      case StmtKind::kStore:
        return StoreStmt(*s.As<StoreNode>(), s);
      case StmtKind::kAllocate:
        return AllocateStmt(*s.As<AllocateNode>());
      case StmtKind::kEvaluate: {
        CE v = E(s.As<EvaluateNode>()->value);
        if (!v.fn) return [](Frame&) {};
        return v.fn;
      }
      case StmtKind::kAtomic:
        return AtomicStmt(*s.As<AtomicNode>(), s);
      case StmtKind::kAssign: {
        const auto* n = s.As<AssignNode>();
        CE v = E(n->value);
        const int reg = VarReg(n->var.get());
        return [fv = std::move(v.fn), rv = v.reg, reg](Frame& f) {
          Eval(fv, f);
          f.regs[static_cast<size_t>(reg)] = f.regs[static_cast<size_t>(rv)];
        };
      }
      case StmtKind::kBarrier:
        return [id = next_barrier_++](Frame& f) {
          if (f.block != nullptr && f.block->barrier != nullptr) f.block->barrier->Wait(id);
        };
    }
    Fail("unknown statement");
  }

  Fn StoreStmt(const StoreNode& n, const Stmt& s) {
    int lanes = 1;
    Access a = MakeAccess(n.buffer, n.indices, Site{std::string(), Expr(), s}, &lanes);
    CE v = E(n.value);
    if (v.lanes != 1 && v.lanes != lanes) Fail("a store of different lanes: `" + StmtHead(s) + "`");
    switch (out_->bufs[static_cast<size_t>(a.slot)].elem) {
#define BACKPLANE_IR_STORE(K) \
  case Elem::K:               \
    return MakeStore<Elem::K>(std::move(a), std::move(v.fn), v.reg, v.lanes, lanes);
      BACKPLANE_IR_STORE(kI8)
      BACKPLANE_IR_STORE(kI16)
      BACKPLANE_IR_STORE(kI32)
      BACKPLANE_IR_STORE(kI64)
      BACKPLANE_IR_STORE(kU8)
      BACKPLANE_IR_STORE(kU16)
      BACKPLANE_IR_STORE(kU32)
      BACKPLANE_IR_STORE(kU64)
      BACKPLANE_IR_STORE(kF16)
      BACKPLANE_IR_STORE(kF32)
      BACKPLANE_IR_STORE(kF64)
      BACKPLANE_IR_STORE(kBool)
#undef BACKPLANE_IR_STORE
    }
    Fail("unknown element type");
  }

  Fn AtomicStmt(const AtomicNode& n, const Stmt& s) {
    int lanes = 1;
    Access a = MakeAccess(n.buffer, n.indices, Site{std::string(), Expr(), s}, &lanes);
    CE v = E(n.value);
    if (lanes != 1 || v.lanes != 1) Fail("an atomic update of lanes: `" + StmtHead(s) + "`");
    switch (out_->bufs[static_cast<size_t>(a.slot)].elem) {
      case Elem::kI32:
        return MakeAtomic<Elem::kI32>(std::move(a), std::move(v.fn), v.reg, n.op);
      case Elem::kI64:
        return MakeAtomic<Elem::kI64>(std::move(a), std::move(v.fn), v.reg, n.op);
      case Elem::kF32:
        return MakeAtomic<Elem::kF32>(std::move(a), std::move(v.fn), v.reg, n.op);
      case Elem::kF64:
        return MakeAtomic<Elem::kF64>(std::move(a), std::move(v.fn), v.reg, n.op);
      default:
        Fail("an atomic update of buffer '" + n.buffer.name() + "' of " +
             ToString(n.buffer.dtype()) + " (atomics take int32, int64, float32 or float64)");
    }
  }

  Fn Loop(const ForNode& n) {
    CE mn = E(n.min), ext = E(n.extent);
    CE st = n.step ? E(n.step) : CE{-1, 1, nullptr};
    const int reg = NewRegs(1);
    vars_.emplace_back(n.var.get(), reg);
    Fn body = S(n.body);
    vars_.pop_back();
    // min, extent and step are evaluated once, in that order; the variable is min + k * step in
    // its dtype (wrapping), for k from 0 to extent - 1.
    return [fm = std::move(mn.fn), fe = std::move(ext.fn), fs = std::move(st.fn), rm = mn.reg,
            re = ext.reg, rs = st.reg, reg, t = n.var.dtype(), body = std::move(body)](Frame& f) {
      Eval(fm, f);
      Eval(fe, f);
      Eval(fs, f);
      const int64_t m = f.regs[static_cast<size_t>(rm)].i;
      const int64_t e = f.regs[static_cast<size_t>(re)].i;
      const uint64_t step = rs < 0 ? 1 : U(f.regs[static_cast<size_t>(rs)].i);
      for (int64_t k = 0; k < e; ++k) {
        f.regs[static_cast<size_t>(reg)].i = WrapInt(U(m) + U(k) * step, t);
        body(f);
      }
    };
  }

  // A loop bound to a thread axis inside a region: each simulated thread runs the body once,
  // with the variable at min + its index on the axis (if that index is below the extent).
  Fn ThreadLoop(const ForNode& n) {
    const auto it = occurrence_.find(&n);
    if (it == occurrence_.end()) Fail("a thread-bound loop outside its region");
    const int k = it->second;
    CE mn = E(n.min);
    const int reg = NewRegs(1);
    vars_.emplace_back(n.var.get(), reg);
    Fn body = S(n.body);
    vars_.pop_back();
    const int axis = static_cast<int>(n.thread) - 1;
    return [fm = std::move(mn.fn), rm = mn.reg, reg, t = n.var.dtype(), body = std::move(body), k,
            axis](Frame& f) {
      const int64_t idx = f.tidx[axis];
      if (idx >= f.occ_ext[static_cast<size_t>(k)]) return;
      Eval(fm, f);
      f.regs[static_cast<size_t>(reg)].i =
          WrapInt(U(f.regs[static_cast<size_t>(rm)].i) + U(idx), t);
      body(f);
    };
  }

  static void Walk(const Stmt& s, std::vector<const ForNode*>* loops, bool* barrier) {
    if (s.kind() == StmtKind::kFor && s.As<ForNode>()->for_kind == ForKind::kThreadBinding)
      loops->push_back(s.As<ForNode>());
    if (s.kind() == StmtKind::kBarrier) *barrier = true;
    detail::ForEachChildStmt(s, [&](const Stmt& c) { Walk(c, loops, barrier); });
  }

  // The outermost thread-bound loop: computes the grid (each axis's extent, the largest of
  // its loops'; the extents are evaluated here, before any thread runs) and runs it.
  Fn Region(const ForNode& root) {
    std::vector<const ForNode*> loops;
    bool barrier = false;
    // The root is a statement of its own; Walk starts from its body.
    loops.push_back(&root);
    Walk(root.body, &loops, &barrier);
    const int first = static_cast<int>(out_->nocc);
    std::vector<CE> exts;
    std::vector<int> axes;
    for (const ForNode* l : loops) {
      occurrence_.emplace(l, static_cast<int>(out_->nocc++));
      try {
        exts.push_back(E(l->extent));
      } catch (const CompileError&) {
        Fail(std::string("the extent of the loop over ") + ToString(l->thread) + ", `" +
             Quote(l->extent) + "`, uses a variable defined inside the thread-bound region: " +
             "launch extents must be computable before the launch");
      }
      axes.push_back(static_cast<int>(l->thread) - 1);
    }
    in_region_ = true;
    Fn body = ThreadLoop(root);
    in_region_ = false;
    std::vector<Fn> fns;
    std::vector<int> regs;
    for (CE& c : exts) {
      if (c.fn) fns.push_back(std::move(c.fn));
      regs.push_back(c.reg);
    }
    return [fns = std::move(fns), regs, axes, first, body = std::move(body), barrier](Frame& f) {
      for (const Fn& g : fns) g(f);
      int64_t ext[6] = {1, 1, 1, 1, 1, 1};
      bool used[6] = {false, false, false, false, false, false};
      for (size_t k = 0; k < regs.size(); ++k) {
        const int64_t v = std::max<int64_t>(0, f.regs[static_cast<size_t>(regs[k])].i);
        f.occ_ext[static_cast<size_t>(first) + k] = v;
        const auto a = static_cast<size_t>(axes[k]);
        ext[a] = used[a] ? std::max(ext[a], v) : v;
        used[a] = true;
      }
      if (f.run->has_launch) {
        for (int a = 0; a < 6; ++a) {
          const int64_t given = f.run->launch[a];
          if (given >= 0 && given != ext[a])
            throw Error(ErrorKind::kValue,
                        f.run->func->name + ": the launch extent of " +
                            ToString(static_cast<ThreadTag>(a + 1)) + " is " +
                            std::to_string(given) + " but the kernel's loops give " +
                            std::to_string(ext[a]) + ": pass the extents the host's call computes");
        }
      }
      RunGrid(f, body, ext, barrier, f.run->func->name);
    };
  }

  Fn AllocateStmt(const AllocateNode& n) {
    const Buffer& b = n.buffer;
    std::vector<CE> shape, strides;
    for (const Expr& e : b->shape) shape.push_back(E(e));
    for (const Expr& e : b->strides) strides.push_back(E(e));
    const int slot = NewSlot(b, -1);
    buffers_.emplace_back(b.get(), slot);
    alloc_scope_[slot] = n.scope;
    Fn body = S(n.body);
    buffers_.pop_back();
    const bool shared = n.scope == StorageScope::kShared && in_region_;
    const int sid = shared ? static_cast<int>(out_->nshared++) : -1;
    std::vector<Fn> fns;
    std::vector<int> shape_regs, stride_regs;
    for (CE& c : shape) {
      if (c.fn) fns.push_back(std::move(c.fn));
      shape_regs.push_back(c.reg);
    }
    for (CE& c : strides) {
      if (c.fn) fns.push_back(std::move(c.fn));
      stride_regs.push_back(c.reg);
    }
    const BufSlot info = out_->bufs[static_cast<size_t>(slot)];
    std::vector<std::string> shape_text;
    for (const Expr& e : b->shape) shape_text.push_back(Quote(e));
    return [fns = std::move(fns), shape_regs, stride_regs, info, slot, sid, shape_text,
            body = std::move(body)](Frame& f) {
      for (const Fn& g : fns) g(f);
      const int nd = info.ndim;
      int64_t* dims = f.dims.data() + info.dims_off;
      auto fail = [&](const std::string& why) {
        throw Error(ErrorKind::kValue,
                    f.run->func->name + ": cannot allocate '" + info.name + "': " + why);
      };
      bool empty = false;
      for (int d = 0; d < nd; ++d) {
        dims[d] = f.regs[static_cast<size_t>(shape_regs[static_cast<size_t>(d)])].i;
        if (dims[d] < 0)
          fail("its extent `" + shape_text[static_cast<size_t>(d)] + "` is " +
               std::to_string(dims[d]) + ", negative; size it with a value >= 0");
        empty = empty || dims[d] == 0;
      }
      uint64_t span = 1;  // elements from the first to one past the last
      if (stride_regs.empty()) {
        for (int d = nd - 1; d >= 0; --d) {
          dims[nd + d] = static_cast<int64_t>(span);
          if (__builtin_mul_overflow(span, U(dims[d]), &span)) fail(kTooLarge);
        }
      } else {
        for (int d = 0; d < nd; ++d) {
          const int64_t st = f.regs[static_cast<size_t>(stride_regs[static_cast<size_t>(d)])].i;
          if (st < 0) fail("stride " + std::to_string(st) + " is negative");
          dims[nd + d] = st;
          uint64_t reach;
          if (!empty && (__builtin_mul_overflow(U(dims[d] - 1), U(st), &reach) ||
                         __builtin_add_overflow(span, reach, &span)))
            fail(kTooLarge);
        }
        if (empty) span = 0;
      }
      uint64_t bytes;
      if (__builtin_mul_overflow(span, ElemSize(info.elem), &bytes) || bytes > kMaxAllocBytes)
        fail(kTooLarge);
      if (sid >= 0 && f.block != nullptr) {
        const uint32_t gen = f.shared_gen[static_cast<size_t>(sid)]++;
        f.data[static_cast<size_t>(slot)] = f.block->Shared(sid, gen, bytes, info.name);
        body(f);
        return;
      }
      if (info.workspace && f.run->workspace != nullptr) {
        // A device workspace: its memory comes from the caller and goes back when the
        // statement ends, however it ends.
        Workspace w = (*f.run->workspace)(info.name, info.dtype, nd, dims, bytes);
        struct Release {
          std::function<void()> fn;
          ~Release() {
            if (fn) fn();
          }
        } release{std::move(w.release)};
        f.data[static_cast<size_t>(slot)] = static_cast<char*>(w.data);
        f.user[static_cast<size_t>(slot)] = w.user;
        body(f);
        f.data[static_cast<size_t>(slot)] = nullptr;
        f.user[static_cast<size_t>(slot)] = nullptr;
        return;
      }
      std::unique_ptr<uint64_t[]> mem(new (std::nothrow) uint64_t[(bytes + 7) / 8]());
      if (!mem) fail("out of memory");
      f.data[static_cast<size_t>(slot)] = reinterpret_cast<char*>(mem.get());
      body(f);
      f.data[static_cast<size_t>(slot)] = nullptr;
    };
  }

  const PrimFunc& func_;
  CompiledFunc* out_;
  std::vector<std::pair<const VarNode*, int>> vars_;        // in scope
  std::vector<std::pair<const BufferNode*, int>> buffers_;  // in scope
  std::map<const ForNode*, int> occurrence_;
  bool in_region_ = false;
  std::map<int, StorageScope> alloc_scope_;  // per allocation's buffer slot
  int next_barrier_ = 0;
};

}  // namespace

std::shared_ptr<CompiledFunc> Compile(const PrimFunc& func) {
  auto out = std::make_shared<CompiledFunc>();
  out->func = &func;
  if (func.launch_axes) out->launch_params = *func.launch_axes;
  try {
    Compiler(func, out.get()).Run();
  } catch (const CompileError& e) {
    out->error = func.name + ": the interpreter cannot run this function: " + e.why;
    out->body = nullptr;
  }
  return out;
}

}  // namespace detail
}  // namespace ir
}  // namespace backplane
