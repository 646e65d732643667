// SPDX-License-Identifier: Apache-2.0
// What the emitter knows of an integer's value modulo a power of two (docs/codegen-guide.md,
// "Vector accesses"): enough to tell a dialect that a contiguous vector access starts at a
// multiple of its lanes, so that it may use an aligned access without a run-time test.
#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <numeric>

#include "c_family_internal.hpp"

namespace backplane {
namespace codegen {

using ir::BinaryOp;
using ir::ExprKind;

namespace {

// Moduli are powers of two up to kMaxModulus: enough for any vector's lanes, and the residues
// of int32 and int64 arithmetic that wraps (modulo 2^32 or 2^64) are still right modulo them.
constexpr int64_t kMaxModulus = 64;
// Expressions deeper than this are not looked into (an index is a few levels deep; a hostile
// tree is not walked on the stack).
constexpr int kMaxDepth = 32;

int64_t Mod(int64_t v, int64_t m) { return ((v % m) + m) % m; }

// The largest power of two dividing `v` (0 counts as divisible by any), at most kMaxModulus.
int64_t PowerOfTwoPart(int64_t v) {
  int64_t p = 1;
  while (p < kMaxModulus && Mod(v, p * 2) == 0) p *= 2;
  return p;
}

}  // namespace

CFamilyEmitter::Congruence CFamilyEmitter::Known(int64_t modulus, int64_t residue) {
  modulus = PowerOfTwoPart(modulus);
  return Congruence{modulus, Mod(residue, modulus)};
}

CFamilyEmitter::Congruence CFamilyEmitter::Sum(Congruence x, Congruence y) {
  return Known(std::gcd(x.modulus, y.modulus), x.residue + y.residue);
}

CFamilyEmitter::Congruence CFamilyEmitter::Product(Congruence x, Congruence y) {
  // (gx i + rx)(gy j + ry) = gx gy i j + gx ry i + gy rx j + rx ry.
  const int64_t g =
      std::gcd(std::gcd(x.modulus * y.modulus, x.modulus * y.residue), y.modulus * x.residue);
  return Known(g, x.residue * y.residue);
}

CFamilyEmitter::Congruence CFamilyEmitter::Either(Congruence x, Congruence y) {
  const int64_t g = std::gcd(std::gcd(x.modulus, y.modulus), x.residue - y.residue);
  return Known(g, x.residue);
}

CFamilyEmitter::Congruence CFamilyEmitter::CongruenceOf(const ir::Expr& e, int depth) const {
  const Congruence unknown{1, 0};
  const ir::DType t = e.dtype();
  if (!(t.is_int() || t.is_uint()) || t.lanes != 1 || depth > kMaxDepth) return unknown;
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return Known(0, AsIntImm(e)->value % kMaxModulus);
    case ExprKind::kVar: {
      auto it = congruences_.find(e.get());
      return it == congruences_.end() ? unknown : it->second;
    }
    case ExprKind::kCast: {
      const ir::Expr& v = e.As<ir::CastNode>()->value;
      if (!(v.dtype().is_int() || v.dtype().is_uint()) || t.bits < 8) return unknown;
      return CongruenceOf(v, depth + 1);
    }
    case ExprKind::kNeg: {
      const Congruence a = CongruenceOf(e.As<ir::NegNode>()->a, depth + 1);
      return Known(a.modulus, -a.residue);
    }
    case ExprKind::kSelect: {
      const auto& s = *e.As<ir::SelectNode>();
      return Either(CongruenceOf(s.a, depth + 1), CongruenceOf(s.b, depth + 1));
    }
    case ExprKind::kBinary: {
      const auto& b = *e.As<ir::BinaryNode>();
      if (ir::IsComparison(b.op) || ir::IsLogical(b.op)) return unknown;
      const Congruence x = CongruenceOf(b.a, depth + 1);
      const Congruence y = CongruenceOf(b.b, depth + 1);
      switch (b.op) {
        case BinaryOp::kAdd:
          return Sum(x, y);
        case BinaryOp::kSub:
          return Sum(x, Known(y.modulus, -y.residue));
        case BinaryOp::kMul:
          return Product(x, y);
        case BinaryOp::kMin:
        case BinaryOp::kMax:
          return Either(x, y);
        case BinaryOp::kFloorMod:
        case BinaryOp::kMod: {
          // x - (x mod c) is a multiple of c, for floormod and C's remainder alike.
          const ir::IntImmNode* c = AsIntImm(b.b);
          if (c == nullptr || c->value == 0) return unknown;
          return Known(std::gcd(x.modulus, PowerOfTwoPart(c->value)), x.residue);
        }
        default:
          return unknown;
      }
    }
    default:
      return unknown;
  }
}

CFamilyEmitter::Congruence CFamilyEmitter::FlatCongruence(const ir::Buffer& buffer,
                                                          const std::vector<ir::Expr>& indices) {
  // As FlatIndex computes it: with the declared strides, else row-major from the shape.
  const ir::BufferNode& b = *buffer.get();
  if (!b.strides.empty()) {
    Congruence flat = Known(0, 0);
    for (size_t k = 0; k < indices.size() && k < b.strides.size(); ++k) {
      flat = Sum(flat, Product(CongruenceOf(indices[k], 0), CongruenceOf(b.strides[k], 0)));
    }
    return flat;
  }
  if (indices.empty()) return Known(0, 0);
  Congruence flat = CongruenceOf(indices[0], 0);
  for (size_t k = 1; k < indices.size() && k < b.shape.size(); ++k) {
    flat = Sum(Product(flat, CongruenceOf(b.shape[k], 0)), CongruenceOf(indices[k], 0));
  }
  return flat;
}

int64_t CFamilyEmitter::AlignmentOf(const ir::Buffer& buffer,
                                    const std::vector<ir::Expr>& indices) {
  const Congruence c = FlatCongruence(buffer, indices);
  return std::min(c.modulus, PowerOfTwoPart(c.residue));
}

void CFamilyEmitter::Assume(const ir::Expr& cond, CongruenceScope* scope) {
  // Only the conjuncts of `a && b && ...` that say `floormod(v, c) == r` or `v % c == 0`
  // (either side) for a variable v and constants c, r.
  std::vector<const ir::Expr*> todo{&cond};
  while (!todo.empty() && todo.size() < 64) {
    const ir::Expr& e = *todo.back();
    todo.pop_back();
    const auto* b = e.As<ir::BinaryNode>();
    if (b == nullptr || e.dtype().lanes != 1) continue;
    if (b->op == BinaryOp::kAnd) {
      todo.push_back(&b->a);
      todo.push_back(&b->b);
      continue;
    }
    if (b->op != BinaryOp::kEq) continue;
    for (int side = 0; side < 2; ++side) {
      const ir::Expr& m = side == 0 ? b->a : b->b;
      const ir::IntImmNode* r = AsIntImm(side == 0 ? b->b : b->a);
      const auto* mod = m.As<ir::BinaryNode>();
      if (r == nullptr || mod == nullptr) continue;
      if (mod->op != BinaryOp::kFloorMod && !(mod->op == BinaryOp::kMod && r->value == 0)) continue;
      const ir::IntImmNode* c = AsIntImm(mod->b);
      if (c == nullptr || c->value <= 0 || mod->a.kind() != ExprKind::kVar) continue;
      // A `var` may be assigned inside the arm: what the test said of it need not last.
      if (assignable_.count(mod->a.As<ir::VarNode>()) != 0) continue;
      const Congruence known = Known(c->value, r->value);
      auto it = congruences_.find(mod->a.get());
      if (it != congruences_.end() && it->second.modulus >= known.modulus) continue;
      Set(mod->a.get(), known, scope);
    }
  }
}

void CFamilyEmitter::Bound(const ir::Var& var, Congruence known, CongruenceScope* scope) {
  Set(var.get(), known, scope);
}

void CFamilyEmitter::Set(const ir::ExprNode* var, Congruence known, CongruenceScope* scope) {
  auto it = congruences_.find(var);
  std::optional<Congruence> before;
  if (it != congruences_.end()) before = it->second;
  scope->saved.emplace_back(var, before);
  congruences_[var] = known;
}

void CFamilyEmitter::Restore(CongruenceScope* scope) {
  for (auto it = scope->saved.rbegin(); it != scope->saved.rend(); ++it) {
    if (it->second) {
      congruences_[it->first] = *it->second;
    } else {
      congruences_.erase(it->first);
    }
  }
  scope->saved.clear();
}

}  // namespace codegen
}  // namespace backplane
