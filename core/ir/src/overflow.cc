// SPDX-License-Identifier: Apache-2.0
// Int32OverflowRisks (analysis.hpp): interval arithmetic over a PrimFunc's integer
// expressions, to find those whose exact value can pass their signed type's range (and so
// wrap) for some arguments. docs/ir.md, "Int32 overflow check".
// About 820 lines in one file: the interval domain, its transfer function per operator and
// the walk that applies them read as one analysis, and none of them is used alone.
#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "visit.hpp"

namespace backplane {
namespace ir {

namespace {

// Exact for every sum and product of two int64 values (__extension__: -Wpedantic accepts it).
__extension__ typedef __int128 I128;

// Bounds saturate at +-2^120 (Add, Sub, Mul): every value of an IR type is within 2^64, so a
// bound past 2^120 is past every type's range whatever its exact value, and a sum or product
// of two saturated bounds never overflows the 128 bits (two uint64 maxima multiplied do:
// undefined behaviour that UBSan reported).
constexpr I128 kSaturated = static_cast<I128>(1) << 120;
I128 Sat(I128 v) { return v > kSaturated ? kSaturated : v < -kSaturated ? -kSaturated : v; }
I128 Add(I128 a, I128 b) { return Sat(Sat(a) + Sat(b)); }
I128 Sub(I128 a, I128 b) { return Sat(Sat(a) - Sat(b)); }
I128 Mul(I128 a, I128 b) {
  a = Sat(a);
  b = Sat(b);
  if (a == 0 || b == 0) return 0;
  const I128 ma = a < 0 ? -a : a, mb = b < 0 ? -b : b;
  if (ma > kSaturated / mb) return (a < 0) != (b < 0) ? -kSaturated : kSaturated;
  return a * b;
}

// Inclusive bounds of an integer value; lo > hi means no value (unreachable code).
struct Range {
  I128 lo = 0, hi = 0;
};

// The most threads of one block on any GPU backend (BP_ATTR_MAX_THREADS_PER_BLOCK is at most
// this on CUDA, OpenCL and Vulkan devices): a scalar param that is the extent of a threadIdx
// loop is taken to be at most this.
constexpr int64_t kMaxBlockThreads = 1024;

Range TypeRange(DType t) {
  if (t.is_bool()) return {0, 1};
  if (t.is_int()) {
    const I128 half = static_cast<I128>(1) << (t.bits - 1);
    return {-half, half - 1};
  }
  if (t.is_uint()) return {0, (static_cast<I128>(1) << t.bits) - 1};
  return {0, 0};  // floats and handles carry no integer range
}

Range Clamp(Range r, DType t) {
  const Range full = TypeRange(t);
  if (r.lo < full.lo || r.hi > full.hi) return full;
  return r;
}

std::string ToText(I128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  std::string s;
  while (v != 0) {
    const int d = static_cast<int>(v % 10);
    s.push_back(static_cast<char>('0' + (d < 0 ? -d : d)));
    v /= 10;
  }
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}

std::string Short(const std::string& text) {
  if (text.size() <= 160) return text;
  return text.substr(0, 76) + " ... " + text.substr(text.size() - 76);
}

I128 FloorDivI(I128 a, I128 b) {
  I128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// A possible overflow found: the node, and how far its exact value can go.
struct Risk {
  const void* node = nullptr;
  std::string what;  // "int32 expression `n + 1023`" or "loop variable `i` of `...`"
  Range exact;
  DType type;
};

// One run of the analysis over a function, with optional bounds on some params.
class Analyzer {
 public:
  // `int64`: int64 expressions are checked too (SignedOverflowRiskNodes), their index
  // arithmetic excepted as int32's is.
  Analyzer(const PrimFunc& func, const std::map<const VarNode*, Range>& param_bounds, bool describe,
           bool int64 = false)
      : func_(func), describe_(describe), int64_(int64) {
    // Params: their dtype's range; a dimension of a buffer param is >= 0 (CheckArgs refuses a
    // negative extent); a threadIdx extent is at most kMaxBlockThreads.
    for (const Param& p : func.params) {
      if (!p.is_buffer()) ranges_[p.var().get()] = TypeRange(p.var().dtype());
    }
    for (const Param& p : func.params) {
      if (!p.is_buffer()) continue;
      for (const Expr& d : p.buffer()->shape) {
        if (d && d.kind() == ExprKind::kVar) {
          auto it = ranges_.find(d.As<VarNode>());
          if (it != ranges_.end()) it->second.lo = std::max<I128>(it->second.lo, 0);
        }
      }
    }
    if (func.body) {
      ForEachStmt(func.body, [&](const Stmt& s) {
        const ForNode* f = s.As<ForNode>();
        if (f == nullptr || f->for_kind != ForKind::kThreadBinding || !f->extent ||
            f->extent.kind() != ExprKind::kVar) {
          return;
        }
        if (f->thread != ThreadTag::kThreadIdxX && f->thread != ThreadTag::kThreadIdxY &&
            f->thread != ThreadTag::kThreadIdxZ) {
          return;
        }
        auto it = ranges_.find(f->extent.As<VarNode>());
        if (it != ranges_.end()) {
          it->second.lo = std::max<I128>(it->second.lo, 0);
          it->second.hi = std::min<I128>(it->second.hi, kMaxBlockThreads);
        }
      });
    }
    for (const auto& [var, r] : param_bounds) {
      auto it = ranges_.find(var);
      if (it != ranges_.end()) {
        it->second.lo = std::max(it->second.lo, r.lo);
        it->second.hi = std::min(it->second.hi, r.hi);
      }
    }
  }

  void Run() {
    for (const Param& p : func_.params) {
      if (!p.is_buffer()) continue;
      for (const Expr& d : p.buffer()->shape) Eval(d);
      for (const Expr& d : p.buffer()->strides) Eval(d);
    }
    if (func_.body) Visit(func_.body);
  }

  const std::vector<Risk>& risks() const { return risks_; }
  // Whether the step budget ran out (the rest of the function was walked without evaluating
  // its expressions).
  bool gave_up() const { return budget_ < 0; }
  Range ParamRange(const VarNode* v) const { return ranges_.at(v); }

 private:
  // A change to the facts that Undo takes back.
  struct Saved {
    const VarNode* var;
    bool had;
    Range range;
  };
  struct Mark {
    size_t saved, facts;
  };

  Mark Save() const { return {saved_.size(), facts_.size()}; }
  void Undo(Mark m) {
    while (saved_.size() > m.saved) {
      const Saved& s = saved_.back();
      if (s.had) {
        ranges_[s.var] = s.range;
      } else {
        ranges_.erase(s.var);
      }
      saved_.pop_back();
    }
    facts_.resize(m.facts);
  }
  void Set(const VarNode* v, Range r) {
    auto it = ranges_.find(v);
    saved_.push_back({v, it != ranges_.end(), it != ranges_.end() ? it->second : Range{}});
    ranges_[v] = r;
  }
  Range Get(const Expr& v) const {
    auto it = ranges_.find(v.As<VarNode>());
    return it != ranges_.end() ? it->second : TypeRange(v.dtype());
  }

  // `what` describes the node; called only when the messages are wanted (not while Threshold
  // bisects).
  template <typename What>
  void Report(const void* node, const What& what, Range exact, DType t) {
    if (reported_.insert(node).second) {
      // Past the 100 that RisksOf words, only counted: printing a node costs its size.
      const bool worded = describe_ && risks_.size() < 100;
      risks_.push_back({node, worded ? what() : std::string(), exact, t});
    }
  }

  // The value of a let (not assignable) that `e` names, followed through lets; else `e`.
  Expr Resolve(Expr e) const {
    for (int i = 0; i < 8 && e && e.kind() == ExprKind::kVar; ++i) {
      auto it = lets_.find(e.As<VarNode>());
      if (it == lets_.end()) break;
      e = it->second;
    }
    return e;
  }

  // Whether `e` is the count of the tiles of `d` in some X >= 0: X / d or
  // X / d + min(floormod(X, d), 1). Sets *x to X.
  bool IsTileCount(const Expr& count, const Expr& d, Expr* x) const {
    const Expr e = Resolve(count);
    const BinaryNode* b = e.As<BinaryNode>();
    if (b == nullptr) return false;
    if (b->op == BinaryOp::kDiv && StructuralEqual(b->b, d)) {
      *x = b->a;
      return true;
    }
    if (b->op != BinaryOp::kAdd) return false;
    const BinaryNode* div = b->a.As<BinaryNode>();
    // X / d + select(X / d * d < X, 1, 0): the form without floormod, which the C-family
    // generators compute in int64 for a constant d (GPU code keeps to int32).
    if (const SelectNode* sel = b->b.As<SelectNode>(); sel != nullptr) {
      const IntImmNode* one = sel->a.As<IntImmNode>();
      const IntImmNode* zero = sel->b.As<IntImmNode>();
      const BinaryNode* lt = sel->cond.As<BinaryNode>();
      if (div == nullptr || div->op != BinaryOp::kDiv || !StructuralEqual(div->b, d) ||
          one == nullptr || one->value != 1 || zero == nullptr || zero->value != 0 ||
          lt == nullptr || lt->op != BinaryOp::kLt || !StructuralEqual(lt->b, div->a)) {
        return false;
      }
      const BinaryNode* mul = lt->a.As<BinaryNode>();
      if (mul == nullptr || mul->op != BinaryOp::kMul || !StructuralEqual(mul->a, b->a) ||
          !StructuralEqual(mul->b, d)) {
        return false;
      }
      *x = div->a;
      return true;
    }
    const BinaryNode* mn = b->b.As<BinaryNode>();
    if (div == nullptr || mn == nullptr || div->op != BinaryOp::kDiv || mn->op != BinaryOp::kMin ||
        !StructuralEqual(div->b, d)) {
      return false;
    }
    const BinaryNode* mod = mn->a.As<BinaryNode>();
    const IntImmNode* one = mn->b.As<IntImmNode>();
    if (mod == nullptr || one == nullptr || one->value != 1 || mod->op != BinaryOp::kFloorMod ||
        !StructuralEqual(mod->a, div->a) || !StructuralEqual(mod->b, d)) {
      return false;
    }
    *x = div->a;
    return true;
  }

  // v * d where v runs over [0, count) and count is a tile count of d in X: in [0, X - 1]
  // (the loop runs only when X >= 1).
  bool TileProduct(const Expr& v, const Expr& d, Range* out) {
    if (v.kind() != ExprKind::kVar) return false;
    auto it = loops_.find(v.As<VarNode>());
    if (it == loops_.end()) return false;
    Expr x;
    if (!IsTileCount(it->second, d, &x)) return false;
    const Range rx = Eval(x), rd = Eval(d);
    if (rx.lo < 0 || rd.lo < 1) return false;
    *out = {0, rx.hi - 1};
    return true;
  }

  // X / d + min(floormod(X, d), 1) with X >= 0 and d >= 1 is ceil(X / d): in
  // [X.lo / d.hi, ceil(X.hi / d.lo)].
  bool CeilCount(const Expr& e, Range* out) {
    const BinaryNode* div = e.As<BinaryNode>();
    if (div == nullptr || div->op != BinaryOp::kAdd) return false;
    div = div->a.As<BinaryNode>();
    if (div == nullptr || div->op != BinaryOp::kDiv) return false;
    Expr x;
    if (!IsTileCount(e, div->b, &x)) return false;
    const Range rx = Eval(x);
    Range rd = Eval(div->b);
    if (rd.lo == 0) rd.lo = 1;  // a division by zero is an error, not a value
    if (rx.lo < 0 || rd.lo < 1 || rd.hi < rd.lo) return false;
    *out = {rx.lo / rd.hi, (rx.hi + rd.lo - 1) / rd.lo};
    return true;
  }

  // Whether the facts say a < b (strict) or a <= b.
  bool Known(const VarNode* a, const VarNode* b, bool strict) const {
    for (const auto& f : facts_) {
      if (f.a == a && f.b == b && (f.strict || !strict)) return true;
    }
    return false;
  }

  Range Binary2(const BinaryNode& b, const Expr& self, bool wide) {
    const DType t = self.dtype();
    if (b.op == BinaryOp::kAnd || b.op == BinaryOp::kOr) {
      Eval(b.a);
      const bool outer = unreachable_;
      const Mark m = Save();
      unreachable_ = false;
      Refine(b.a, b.op == BinaryOp::kAnd);
      if (!unreachable_) Eval(b.b);
      unreachable_ = outer;
      Undo(m);
      return {0, 1};
    }
    const Range x = wide ? EvalWide(b.a) : Eval(b.a);
    const Range y = wide ? EvalWide(b.b) : Eval(b.b);
    if (IsComparison(b.op)) return {0, 1};
    if (!t.is_integer()) return {0, 0};
    Range r;
    switch (b.op) {
      case BinaryOp::kAdd:
        r = {Add(x.lo, y.lo), Add(x.hi, y.hi)};
        if (Range c; CeilCount(self, &c)) r = {std::max(r.lo, c.lo), std::min(r.hi, c.hi)};
        break;
      case BinaryOp::kSub:
        r = {Sub(x.lo, y.hi), Sub(x.hi, y.lo)};
        if (b.a.kind() == ExprKind::kVar && b.b.kind() == ExprKind::kVar) {
          if (Known(b.b.As<VarNode>(), b.a.As<VarNode>(), true)) {
            r.lo = std::max<I128>(r.lo, 1);
          } else if (Known(b.b.As<VarNode>(), b.a.As<VarNode>(), false)) {
            r.lo = std::max<I128>(r.lo, 0);
          }
        }
        break;
      case BinaryOp::kMul: {
        const I128 c[4] = {Mul(x.lo, y.lo), Mul(x.lo, y.hi), Mul(x.hi, y.lo), Mul(x.hi, y.hi)};
        r = {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
        Range tile;
        if (TileProduct(b.a, b.b, &tile) || TileProduct(b.b, b.a, &tile)) {
          r = {std::max(r.lo, tile.lo), std::min(r.hi, tile.hi)};
        }
        break;
      }
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv: {
        // The divisor's values other than 0 (a division by zero is an error, not a wrap).
        std::vector<I128> ds;
        if (y.lo <= -1) ds.insert(ds.end(), {y.lo, std::min<I128>(y.hi, -1)});
        if (y.hi >= 1) ds.insert(ds.end(), {std::max<I128>(y.lo, 1), y.hi});
        if (ds.empty()) return TypeRange(t);
        bool first = true;
        for (I128 d : ds) {
          for (I128 n : {x.lo, x.hi}) {
            const I128 q = b.op == BinaryOp::kDiv ? n / d : FloorDivI(n, d);
            if (first || q < r.lo) r.lo = q;
            if (first || q > r.hi) r.hi = q;
            first = false;
          }
        }
        // Dividing by a divisor nearer zero than the interval's ends gives larger quotients.
        for (I128 d : {static_cast<I128>(-1), static_cast<I128>(1)}) {
          if (d >= y.lo && d <= y.hi) {
            for (I128 n : {x.lo, x.hi}) {
              r.lo = std::min(r.lo, n / d);
              r.hi = std::max(r.hi, n / d);
            }
          }
        }
        break;
      }
      case BinaryOp::kFloorMod: {
        const I128 m = std::max(y.hi > 0 ? y.hi : 0, y.lo < 0 ? -y.lo : 0);
        if (m == 0) return TypeRange(t);
        if (y.lo > 0 && x.lo >= 0 && x.hi < y.lo) return x;
        r = {y.lo > 0 ? 0 : -(m - 1), y.hi < 0 ? 0 : m - 1};
        return r;  // never wraps in exact arithmetic
      }
      case BinaryOp::kMin:
        return {std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
      case BinaryOp::kMax:
        return {std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
      default:
        return TypeRange(t);
    }
    if (wide) return r;
    if (IsChecked(t.Element())) {
      const Range full = TypeRange(t.Element());
      if (r.lo < full.lo || r.hi > full.hi) {
        Report(
            self.get(),
            [&] { return ToString(t.Element()) + " expression `" + Short(Print(self)) + "`"; }, r,
            t.Element());
      }
    }
    return Clamp(r, t.Element());
  }

  // An index: +, -, * and negation on top are exact (int64), docs/ir.md "Index arithmetic".
  Range EvalIndex(const Expr& e) {
    const DType t = e.dtype();
    if (t.lanes == 1 && t.is_integer() && t.bits < 64) return EvalWide(e);
    if (int64_ && t.lanes == 1 && t.is_int() && t.bits == 64) return EvalIndex64(e);
    return Eval(e);
  }
  // The +, -, * and negation on top of an int64 index, not reported: an index past int64 is out
  // of bounds whatever it wraps to. Clamped to int64, so no product passes the 128 bits.
  Range EvalIndex64(const Expr& e) {
    const DType t = e.dtype();
    if (e.kind() == ExprKind::kNeg) {
      const Range x = EvalIndex64(e.As<NegNode>()->a);
      return Clamp({-x.hi, -x.lo}, t);
    }
    const BinaryNode* b = e.As<BinaryNode>();
    if (b == nullptr ||
        (b->op != BinaryOp::kAdd && b->op != BinaryOp::kSub && b->op != BinaryOp::kMul)) {
      return Eval(e);
    }
    const Range x = EvalIndex64(b->a), y = EvalIndex64(b->b);
    if (b->op == BinaryOp::kAdd) return Clamp({Add(x.lo, y.lo), Add(x.hi, y.hi)}, t);
    if (b->op == BinaryOp::kSub) return Clamp({Sub(x.lo, y.hi), Sub(x.hi, y.lo)}, t);
    const I128 c[4] = {Mul(x.lo, y.lo), Mul(x.lo, y.hi), Mul(x.hi, y.lo), Mul(x.hi, y.hi)};
    return Clamp({*std::min_element(c, c + 4), *std::max_element(c, c + 4)}, t);
  }
  // The indices of an access. A contiguous last index, ramp(base, 1, lanes), is the scalar index
  // `base` and the lanes after it: its base is index arithmetic and its lanes are exact too.
  void EvalIndices(const std::vector<Expr>& indices) {
    for (size_t k = 0; k < indices.size(); ++k) {
      const RampNode* r = k + 1 == indices.size() ? ContiguousRamp(indices[k]) : nullptr;
      EvalIndex(r != nullptr ? r->base : indices[k]);
    }
  }
  Range EvalWide(const Expr& e) {
    if (e.kind() == ExprKind::kNeg) {
      const Range x = EvalWide(e.As<NegNode>()->a);
      return {-x.hi, -x.lo};
    }
    if (e.kind() == ExprKind::kBinary) {
      const BinaryOp op = e.As<BinaryNode>()->op;
      if (op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul) {
        return Binary2(*e.As<BinaryNode>(), e, /*wide=*/true);
      }
    }
    return Eval(e);
  }

  Range Eval(const Expr& e) {
    if (!e) return {0, 0};
    const DType t = e.dtype();
    if (--budget_ < 0) return TypeRange(t.Element());
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        const I128 v = e.As<IntImmNode>()->value;
        return {v, v};
      }
      case ExprKind::kFloatImm:
        return {0, 0};
      case ExprKind::kVar:
        return Get(e);
      case ExprKind::kBinary:
        return Binary2(*e.As<BinaryNode>(), e, /*wide=*/false);
      case ExprKind::kNot:
        Eval(e.As<NotNode>()->a);
        return {0, 1};
      case ExprKind::kNeg: {
        const Range x = Eval(e.As<NegNode>()->a);
        if (!t.is_integer()) return {0, 0};
        const Range r{-x.hi, -x.lo};
        if (IsChecked(t.Element())) {
          const Range full = TypeRange(t.Element());
          if (r.lo < full.lo || r.hi > full.hi) {
            Report(
                e.get(),
                [&] { return ToString(t.Element()) + " expression `" + Short(Print(e)) + "`"; }, r,
                t.Element());
          }
        }
        return Clamp(r, t.Element());
      }
      case ExprKind::kSelect: {
        const auto& s = *e.As<SelectNode>();
        Eval(s.cond);
        Range out{1, 0};
        const bool outer = unreachable_;
        for (bool arm : {true, false}) {
          const Mark m = Save();
          unreachable_ = false;
          Refine(s.cond, arm);
          if (!unreachable_) {
            const Range r = Eval(arm ? s.a : s.b);
            out = out.lo > out.hi ? r : Range{std::min(out.lo, r.lo), std::max(out.hi, r.hi)};
          }
          Undo(m);
        }
        unreachable_ = outer;
        return out.lo > out.hi ? TypeRange(t) : out;
      }
      case ExprKind::kCast: {
        const Range x = Eval(e.As<CastNode>()->value);
        const DType from = e.As<CastNode>()->value.dtype();
        if (!t.is_integer() && !t.is_bool()) return {0, 0};
        if (!from.is_integer() && !from.is_bool()) return TypeRange(t);
        return Clamp(x, t.Element());  // an explicit cast wraps by definition: not reported
      }
      case ExprKind::kLoad:
        EvalIndices(e.As<LoadNode>()->indices);
        return TypeRange(t.Element());
      case ExprKind::kCall:
        for (const Expr& a : e.As<CallNode>()->args) Eval(a);
        return TypeRange(t.Element());
      case ExprKind::kCallPacked:
        for (const Expr& a : e.As<CallPackedNode>()->args) Eval(a);
        return TypeRange(t);
      case ExprKind::kRamp: {
        const auto& r = *e.As<RampNode>();
        const Range b = Eval(r.base), s = Eval(r.stride);
        if (!t.is_integer()) return {0, 0};
        const I128 k = t.lanes - 1;
        const Range out{Add(b.lo, std::min<I128>(0, Mul(k, s.lo))),
                        Add(b.hi, std::max<I128>(0, Mul(k, s.hi)))};
        if (IsChecked(t.Element())) {
          const Range full = TypeRange(t.Element());
          if (out.lo < full.lo || out.hi > full.hi) {
            Report(
                e.get(), [&] { return "lanes of `" + Short(Print(e)) + "`"; }, out, t.Element());
          }
        }
        return Clamp(out, t.Element());
      }
      case ExprKind::kBroadcast:
        return Eval(e.As<BroadcastNode>()->value);
      case ExprKind::kBufferRef:
        return {0, 0};
    }
    return TypeRange(t);
  }

  // Narrows the facts to those under which `cond` is `truth`. Sets unreachable_ when no value
  // is left.
  void Refine(const Expr& cond, bool truth) {
    if (const NotNode* n = cond.As<NotNode>()) {
      Refine(n->a, !truth);
      return;
    }
    const BinaryNode* b = cond.As<BinaryNode>();
    if (b == nullptr) return;
    if ((b->op == BinaryOp::kAnd && truth) || (b->op == BinaryOp::kOr && !truth)) {
      Refine(b->a, truth);
      Refine(b->b, truth);
      return;
    }
    if (!IsComparison(b->op) || !b->a.dtype().is_integer() || !b->a.dtype().is_scalar()) return;
    BinaryOp op = b->op;
    if (!truth) {
      switch (op) {
        case BinaryOp::kLt:
          op = BinaryOp::kGe;
          break;
        case BinaryOp::kLe:
          op = BinaryOp::kGt;
          break;
        case BinaryOp::kGt:
          op = BinaryOp::kLe;
          break;
        case BinaryOp::kGe:
          op = BinaryOp::kLt;
          break;
        case BinaryOp::kEq:
          op = BinaryOp::kNe;
          break;
        case BinaryOp::kNe:
          op = BinaryOp::kEq;
          break;
        default:
          return;
      }
    }
    // As a < b, a <= b or a == b.
    Expr lhs = b->a, rhs = b->b;
    if (op == BinaryOp::kGt || op == BinaryOp::kGe) {
      std::swap(lhs, rhs);
      op = op == BinaryOp::kGt ? BinaryOp::kLt : BinaryOp::kLe;
    }
    if (op == BinaryOp::kNe) return;
    const Range l = Eval(lhs), r = Eval(rhs);
    const I128 gap = op == BinaryOp::kLt ? 1 : 0;
    // An assignable variable may change inside the branch: its range is not narrowed.
    if (lhs.kind() == ExprKind::kVar && assignable_.count(lhs.As<VarNode>())) lhs = Expr();
    if (rhs.kind() == ExprKind::kVar && assignable_.count(rhs.As<VarNode>())) rhs = Expr();
    if (lhs && lhs.kind() == ExprKind::kVar) {
      Range v = Get(lhs);
      v.hi = std::min(v.hi, r.hi - gap);
      if (op == BinaryOp::kEq) v.lo = std::max(v.lo, r.lo);
      Set(lhs.As<VarNode>(), v);
      if (v.lo > v.hi) unreachable_ = true;
    }
    if (rhs && rhs.kind() == ExprKind::kVar) {
      Range v = Get(rhs);
      v.lo = std::max(v.lo, l.lo + gap);
      if (op == BinaryOp::kEq) v.hi = std::min(v.hi, l.hi);
      Set(rhs.As<VarNode>(), v);
      if (v.lo > v.hi) unreachable_ = true;
    }
    if (lhs && rhs && lhs.kind() == ExprKind::kVar && rhs.kind() == ExprKind::kVar) {
      facts_.push_back({lhs.As<VarNode>(), rhs.As<VarNode>(), op == BinaryOp::kLt});
      if (op == BinaryOp::kEq) facts_.push_back({rhs.As<VarNode>(), lhs.As<VarNode>(), false});
    }
  }

  void VisitFor(const ForNode& f) {
    const Range mn = Eval(f.min);
    const Range ex = Eval(f.extent);
    const Range st = f.step ? Eval(f.step) : Range{1, 1};
    if (ex.hi <= 0) return;  // never runs
    const DType t = f.var.dtype();
    // The last value: min + (extent - 1) * step; min + extent - 1 when the extent is
    // `end - min` or the min `end - extent` (a [begin, end) loop).
    Range last;
    const BinaryNode* eb = f.extent.As<BinaryNode>();
    const BinaryNode* mb = f.min.As<BinaryNode>();
    const bool unit = !f.step || (st.lo == 1 && st.hi == 1);
    if (unit && eb != nullptr && eb->op == BinaryOp::kSub && StructuralEqual(eb->b, f.min)) {
      const Range end = Eval(eb->a);
      last = {mn.lo, end.hi - 1};
    } else if (unit && mb != nullptr && mb->op == BinaryOp::kSub &&
               StructuralEqual(mb->b, f.extent)) {
      const Range end = Eval(mb->a);
      last = {mn.lo, end.hi - 1};
    } else {
      const I128 k = ex.hi - 1;
      const I128 c[4] = {0, Mul(k, st.lo), 0, Mul(k, st.hi)};
      last = {Add(mn.lo, *std::min_element(c, c + 4)), Add(mn.hi, *std::max_element(c, c + 4))};
    }
    if (t.is_integer() && IsChecked(t)) {
      const Range full = TypeRange(t);
      if (last.lo < full.lo || last.hi > full.hi) {
        Report(
            &f,
            [&] {
              return "loop variable `" + f.var.name() + "` of `for " + f.var.name() + " in " +
                     ToString(f.for_kind) + "(" + Short(Print(f.min)) + ", " +
                     Short(Print(f.extent)) + (f.step ? ", " + Short(Print(f.step)) : "") + ")`";
            },
            last, t);
      }
    }
    const Mark m = Save();
    Set(f.var.get(), Clamp(last, t));
    if (f.extent.kind() == ExprKind::kVar) {
      Range e = Get(f.extent);
      e.lo = std::max<I128>(e.lo, 1);
      Set(f.extent.As<VarNode>(), e);
      if (unit) facts_.push_back({f.var.get(), f.extent.As<VarNode>(), true});
    }
    const IntImmNode* zero = f.min.As<IntImmNode>();
    const bool tracked = unit && zero != nullptr && zero->value == 0;
    if (tracked) loops_[f.var.get()] = f.extent;
    Visit(f.body);
    if (tracked) loops_.erase(f.var.get());
    Undo(m);
  }

  void Visit(const Stmt& s) {
    if (!s) return;
    switch (s.kind()) {
      case StmtKind::kFor:
        VisitFor(*s.As<ForNode>());
        return;
      case StmtKind::kIfThenElse: {
        const auto& n = *s.As<IfThenElseNode>();
        Eval(n.cond);
        for (bool arm : {true, false}) {
          const Stmt& body = arm ? n.then_case : n.else_case;
          if (!body) continue;
          const Mark m = Save();
          Refine(n.cond, arm);
          if (!unreachable_) Visit(body);
          unreachable_ = false;
          Undo(m);
        }
        return;
      }
      case StmtKind::kLetStmt: {
        const auto& n = *s.As<LetStmtNode>();
        const Range r = Eval(n.value);
        const Mark m = Save();
        const DType t = n.var.dtype();
        Set(n.var.get(), n.assignable ? TypeRange(t) : Clamp(r, t));
        if (n.assignable) assignable_.insert(n.var.get());
        if (!n.assignable) lets_[n.var.get()] = n.value;
        Visit(n.body);
        lets_.erase(n.var.get());
        Undo(m);
        return;
      }
      case StmtKind::kStore: {
        const auto& n = *s.As<StoreNode>();
        EvalIndices(n.indices);
        Eval(n.value);
        return;
      }
      case StmtKind::kAtomic: {
        const auto& n = *s.As<AtomicNode>();
        EvalIndices(n.indices);
        Eval(n.value);
        return;
      }
      case StmtKind::kAllocate: {
        const auto& n = *s.As<AllocateNode>();
        for (const Expr& d : n.buffer->shape) Eval(d);
        Visit(n.body);
        return;
      }
      case StmtKind::kEvaluate:
        Eval(s.As<EvaluateNode>()->value);
        return;
      case StmtKind::kAssign:
        Eval(s.As<AssignNode>()->value);
        return;
      case StmtKind::kSeq:
        for (const Stmt& x : s.As<SeqNode>()->seq) Visit(x);
        return;
      case StmtKind::kBarrier:
        return;
    }
  }

  struct Fact {
    const VarNode* a;
    const VarNode* b;
    bool strict;  // a < b; else a <= b
  };

  bool IsChecked(DType t) const { return t.is_int() && (t.bits <= 32 || (int64_ && t.bits == 64)); }

  const PrimFunc& func_;
  const bool describe_;
  const bool int64_;
  // Expression nodes evaluated, at most: refining a condition evaluates its operands again, so
  // selects nested in conditions could cost exponential time without a bound.
  int64_t budget_ = 2000000;
  std::map<const VarNode*, Range> ranges_;
  std::map<const VarNode*, Expr> lets_;   // let variables in scope and their values
  std::set<const VarNode*> assignable_;   // `var` variables (never narrowed by a condition)
  std::map<const VarNode*, Expr> loops_;  // loop variables from 0 by 1 and their extents
  std::vector<Fact> facts_;
  std::vector<Saved> saved_;
  bool unreachable_ = false;
  std::vector<Risk> risks_;
  std::set<const void*> reported_;
};

std::vector<Risk> Analyze(const PrimFunc& f, const std::map<const VarNode*, Range>& bounds) {
  Analyzer a(f, bounds, /*describe=*/false);
  a.Run();
  return a.risks();
}

bool Flags(const PrimFunc& f, const std::map<const VarNode*, Range>& bounds, const void* node) {
  for (const Risk& r : Analyze(f, bounds)) {
    if (r.node == node) return true;
  }
  return false;
}

// "for n > 2147482624": the bound on one integer param under which `node` is not flagged, found
// by bisection; "" when no single param's bound clears it.
std::string Threshold(const PrimFunc& f, const void* node) {
  Analyzer base(f, {}, /*describe=*/false);
  // The param whose bound is the largest: a risk that needs batch > 0 and c_out > 2^31 - 16
  // is told as the latter.
  std::string best;
  I128 best_bound = -1;
  for (const Param& p : f.params) {
    if (p.is_buffer() || !p.var().dtype().is_integer()) continue;
    const VarNode* v = p.var().get();
    const Range full = base.ParamRange(v);
    // An upper bound: the largest hi with no risk for v in [lo, hi].
    if (!Flags(f, {{v, {full.lo, full.lo}}}, node) && Flags(f, {{v, {full.lo, full.hi}}}, node)) {
      I128 good = full.lo, bad = full.hi;
      while (bad - good > 1) {
        const I128 mid = good + (bad - good) / 2;
        (Flags(f, {{v, {full.lo, mid}}}, node) ? bad : good) = mid;
      }
      if (good > best_bound) {
        best_bound = good;
        best = "for " + v->name + " > " + ToText(good);
      }
      continue;
    }
    if (!Flags(f, {{v, {full.hi, full.hi}}}, node) && Flags(f, {{v, full}}, node)) {
      I128 good = full.hi, bad = full.lo;
      while (good - bad > 1) {
        const I128 mid = bad + (good - bad) / 2;
        (Flags(f, {{v, {mid, full.hi}}}, node) ? bad : good) = mid;
      }
      if (-good > best_bound) {
        best_bound = -good;
        best = "for " + v->name + " < " + ToText(good);
      }
    }
  }
  return best;
}

std::string ParamRanges(const PrimFunc& f) {
  Analyzer base(f, {}, /*describe=*/false);
  std::string out;
  for (const Param& p : f.params) {
    if (p.is_buffer() || !p.var().dtype().is_integer()) continue;
    const Range r = base.ParamRange(p.var().get());
    out += (out.empty() ? "" : ", ") + p.var().name() + " in [" + ToText(r.lo) + ", " +
           ToText(r.hi) + "]";
  }
  return out;
}

std::vector<std::string> RisksOf(const PrimFunc& f) {
  std::vector<std::string> out;
  Analyzer analyzer(f, {}, /*describe=*/true);
  analyzer.Run();
  const std::vector<Risk>& risks = analyzer.risks();
  // Bisecting a size reruns the analysis about 34 times a param: only for the first few risks
  // of a function of ordinary depth.
  const bool thresholds = !analyzer.gave_up() && TreeDepth(f) <= 1000;
  for (size_t i = 0; i < risks.size(); ++i) {
    const Risk& r = risks[i];
    if (i == 100) {
      out.push_back("... and " + std::to_string(risks.size() - 100) + " more in function '" +
                    f.name + "'");
      break;
    }
    const Range full = TypeRange(r.type);
    const std::string when = thresholds && i < 10 ? Threshold(f, r.node) : "";
    const bool high = r.exact.hi > full.hi;
    out.push_back(r.what + " in function '" + f.name + "' can overflow " +
                  (when.empty() ? "for some arguments" : when) + ": its exact value can reach " +
                  ToText(high ? r.exact.hi : r.exact.lo) + ", past " + ToString(r.type) + "'s " +
                  ToText(high ? full.hi : full.lo) + " (" + ParamRanges(f) +
                  "), and wraps there; write it so that no value passes the range (a tile count "
                  "`(n + 1023) / 1024` as `n / 1024 + min(floormod(n, 1024), 1)`, an edge test "
                  "`base + 1024 <= n` as `base <= n - 1024`) or compute it in int64 where the "
                  "target has it (docs/ir.md, \"Int32 overflow check\")");
  }
  if (analyzer.gave_up()) {
    out.push_back("the int32 overflow check of function '" + f.name +
                  "' stopped early: its "
                  "conditions nest too many selects to follow (over 2,000,000 steps); the "
                  "expressions past that point are not checked");
  }
  return out;
}

}  // namespace

std::vector<std::string> Int32OverflowRisks(const PrimFunc& func) {
  std::vector<std::string> out;
  RunForDepth(TreeDepth(func), [&] { out = RisksOf(func); });
  return out;
}

SignedOverflowNodes SignedOverflowRiskNodes(const PrimFunc& func) {
  SignedOverflowNodes out;
  RunForDepth(TreeDepth(func), [&] {
    Analyzer analyzer(func, {}, /*describe=*/false, /*int64=*/true);
    analyzer.Run();
    for (const Risk& r : analyzer.risks()) out.nodes.insert(r.node);
    out.complete = !analyzer.gave_up();
  });
  if (out.complete || !func.body) return out;
  // Past the budget nothing is known: every signed +, -, * and negation is a risk.
  auto collect = [&](const Expr& root) {
    AnyExpr(root, [&](const Expr& e) {
      const DType t = e.dtype().Element();
      if (!t.is_int()) return false;
      const BinaryNode* b = e.As<BinaryNode>();
      if (e.kind() == ExprKind::kNeg || e.kind() == ExprKind::kRamp ||
          (b != nullptr &&
           (b->op == BinaryOp::kAdd || b->op == BinaryOp::kSub || b->op == BinaryOp::kMul))) {
        out.nodes.insert(e.get());
      }
      return false;
    });
  };
  ForEachStmt(func.body,
              [&](const Stmt& s) { detail::ForEachChild(s, collect, [](const Stmt&) {}); });
  return out;
}

std::vector<std::string> Int32OverflowRisks(const IRModule& module) {
  std::vector<std::string> out;
  for (const PrimFunc& f : module.functions()) {
    std::vector<std::string> one = Int32OverflowRisks(f);
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

}  // namespace ir
}  // namespace backplane
