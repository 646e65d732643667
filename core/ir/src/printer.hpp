// SPDX-License-Identifier: Apache-2.0
// Internal: how the text form (grammar in docs/ir.md) is written, for the printer's entry points
// (printer.cc) and the quotes in messages (quote.cc). Printer appends a tree to one buffer; its
// helpers decide where parentheses and literal suffixes go. It stays one class: its methods
// call one another for every node of the tree.
#ifndef BACKPLANE_IR_SRC_PRINTER_HPP_
#define BACKPLANE_IR_SRC_PRINTER_HPP_

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "deep.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {
namespace print {

// Binding strength, as the parser reads it: a higher number binds tighter.
constexpr int kPrecOr = 1, kPrecAnd = 2, kPrecEq = 3, kPrecRel = 4, kPrecAdd = 5, kPrecMul = 6,
              kPrecUnary = 7, kPrecPrimary = 8;

inline int Precedence(BinaryOp op) {
  switch (op) {
    case BinaryOp::kOr:
      return kPrecOr;
    case BinaryOp::kAnd:
      return kPrecAnd;
    case BinaryOp::kEq:
    case BinaryOp::kNe:
      return kPrecEq;
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      return kPrecRel;
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return kPrecAdd;
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
      return kPrecMul;
    default:
      return kPrecPrimary;  // floordiv(a, b), min(a, b), ...
  }
}

// Whether `a` is the zero of type `t` that the parser makes for a unary minus (`-x` reads as
// Const(x's type, 0) - x).
inline bool IsZeroOf(const Expr& a, DType t) {
  if (!a || a.dtype() != t) return false;
  if (t.lanes != 1) {
    const auto* n = a.As<BroadcastNode>();
    return n != nullptr && IsZeroOf(n->value, t.Element());
  }
  if (const auto* n = a.As<FloatImmNode>()) return n->value == 0 && !std::signbit(n->value);
  if (const auto* n = a.As<IntImmNode>()) return !t.is_float() && n->value == 0;
  return false;
}

// Whether a literal's text starts with '-' (an unsigned one never does, nor does NaN).
inline bool PrintsMinus(const Expr& lit) {
  if (const auto* n = lit.As<IntImmNode>())
    return n->value < 0 && !n->dtype.is_uint() && !n->dtype.is_bool();
  if (const auto* n = lit.As<FloatImmNode>())
    return std::signbit(n->value) && !std::isnan(n->value);
  return false;
}

// In text of version 1, `-x` read as `0 - x`, and the printer wrote `0 - x` back as `-x`, so a
// run of unary operators printed as it was written, a level of text per operator at most (as
// `!(0 - x)` it grew a parenthesis each). Version 2 has a negation node (NegNode) for `-x`, and
// `0 - x` prints as it is; the printer writes version 1 for a module that uses nothing newer,
// so that a module saved before keeps its text and its meaning.
inline const BinaryNode* Negation(const Expr& e, bool v1) {
  if (!v1) return nullptr;
  const auto* n = e.As<BinaryNode>();
  if (n == nullptr || n->op != BinaryOp::kSub || !n->b || !IsZeroOf(n->a, n->b.dtype()))
    return nullptr;
  return n;
}

inline int Precedence(const Expr& e, bool v1) {
  switch (e.kind()) {
    case ExprKind::kBinary:
      if (Negation(e, v1)) return kPrecUnary;
      return Precedence(e.As<BinaryNode>()->op);
    case ExprKind::kNot:
    case ExprKind::kNeg:
      return kPrecUnary;
    case ExprKind::kIntImm:
      return e.As<IntImmNode>()->value < 0 ? kPrecUnary : kPrecPrimary;
    case ExprKind::kFloatImm: {
      double v = e.As<FloatImmNode>()->value;
      return std::signbit(v) ? kPrecUnary : kPrecPrimary;
    }
    default:
      return kPrecPrimary;
  }
}

inline std::string Suffix(DType t) {
  if (t.is_float()) return t.bits == 32 ? "" : "f" + std::to_string(t.bits);
  if (t.is_int()) return t.bits == 32 ? "" : "i" + std::to_string(t.bits);
  return "u" + std::to_string(t.bits);
}

inline std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

inline std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Appends everything to one buffer, `out`: a chain of N terms prints in time linear in N (an
// expression returned as a string and concatenated into its parent's copied each level's text
// again, quadratic in a chain's length).
class Printer {
 public:
  // Writes text of version 1 (docs/ir.md, "Versions"): `0 - x` as `-x`.
  bool v1 = false;
  // Where each expression's text starts and ends in `out`, when set (Quoter).
  std::unordered_map<const ExprNode*, std::pair<size_t, size_t>>* spans = nullptr;

  void Expr_(const Expr& e) {
    if (spans == nullptr || !e) {
      Node(e);
      return;
    }
    const size_t begin = out.size();
    Node(e);
    spans->emplace(e.get(), std::make_pair(begin, out.size()));
  }

  void Node(const Expr& e) {
    if (!e) {
      out += "<null>";
      return;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        const auto* n = e.As<IntImmNode>();
        if (n->dtype.is_bool()) {
          out += n->value ? "true" : "false";
        } else if (n->dtype.is_uint()) {
          out += std::to_string(static_cast<uint64_t>(n->value));
          out += LiteralSuffix(e);
        } else {
          out += std::to_string(n->value);
          out += LiteralSuffix(e);
        }
        return;
      }
      case ExprKind::kFloatImm: {
        const auto* n = e.As<FloatImmNode>();
        out += FormatDouble(n->value);
        out += LiteralSuffix(e);
        return;
      }
      case ExprKind::kVar:
        out += e.As<VarNode>()->name;
        return;
      case ExprKind::kBinary: {
        const auto* n = e.As<BinaryNode>();
        if (Negation(e, v1)) {
          // A literal right after the minus would read as a negative literal (`-1`, `-inf`);
          // one that prints with its own minus does not (`--1` is 0 - -1).
          const bool literal =
              (n->b.kind() == ExprKind::kIntImm || n->b.kind() == ExprKind::kFloatImm) &&
              !PrintsMinus(n->b);
          out += '-';
          if (literal) out += '(';
          Operand(n->b, kPrecUnary, false);
          if (literal) out += ')';
          return;
        }
        int p = Precedence(n->op);
        Force(n->a, n->b);
        Force(n->b, n->a);
        if (p == kPrecPrimary) {
          out += ToString(n->op);
          out += '(';
          Expr_(n->a);
          out += ", ";
          Expr_(n->b);
          out += ')';
          return;
        }
        // Left-associative: the right operand needs parentheses at equal precedence.
        Operand(n->a, p, false);
        out += ' ';
        out += ToString(n->op);
        out += ' ';
        Operand(n->b, p, true);
        return;
      }
      case ExprKind::kNot:
        out += '!';
        Operand(e.As<NotNode>()->a, kPrecUnary, false);  // `!!b`, `!-x`: unary operators chain
        return;
      case ExprKind::kNeg: {
        // A literal right after the minus would read as a negative literal (`-1`, `-inf`); one
        // that prints with its own minus does not (`--1` is -(-1)).
        const Expr& a = e.As<NegNode>()->a;
        const bool literal =
            (a.kind() == ExprKind::kIntImm || a.kind() == ExprKind::kFloatImm) && !PrintsMinus(a);
        out += '-';
        if (literal) out += '(';
        Operand(a, kPrecUnary, false);
        if (literal) out += ')';
        return;
      }
      case ExprKind::kSelect: {
        const auto* n = e.As<SelectNode>();
        Force(n->a, n->b);
        Force(n->b, n->a);
        out += "select(";
        Expr_(n->cond);
        out += ", ";
        Expr_(n->a);
        out += ", ";
        Expr_(n->b);
        out += ')';
        return;
      }
      case ExprKind::kCast: {
        const auto* n = e.As<CastNode>();
        if (n->dtype.is_float()) Force(n->value, n->dtype, /*cast=*/true);
        out += ToString(n->dtype);
        out += '(';
        Expr_(n->value);
        out += ')';
        return;
      }
      case ExprKind::kLoad: {
        const auto* n = e.As<LoadNode>();
        out += n->buffer.name();
        out += '[';
        List(n->indices);
        out += ']';
        return;
      }
      case ExprKind::kCall: {
        const auto* n = e.As<CallNode>();
        for (const Expr& a : n->args)
          for (const Expr& b : n->args) Force(a, b);
        out += n->name;
        out += '(';
        List(n->args);
        out += ')';
        return;
      }
      case ExprKind::kCallPacked: {
        const auto* n = e.As<CallPackedNode>();
        out += "call_packed(";
        out += Quote(n->name);
        for (const auto& a : n->args) {
          out += ", ";
          Expr_(a);
        }
        out += ')';
        return;
      }
      case ExprKind::kRamp: {
        const auto* n = e.As<RampNode>();
        out += "ramp(";
        Expr_(n->base);
        out += ", ";
        Expr_(n->stride);
        out += ", ";
        out += std::to_string(n->dtype.lanes);
        out += ')';
        return;
      }
      case ExprKind::kBroadcast: {
        const auto* n = e.As<BroadcastNode>();
        out += "broadcast(";
        Expr_(n->value);
        out += ", ";
        out += std::to_string(n->dtype.lanes);
        out += ')';
        return;
      }
      case ExprKind::kBufferRef:
        out += e.As<BufferRefNode>()->buffer.name();
        return;
    }
    out += "<?>";
  }

  void List(const std::vector<Expr>& v) {
    for (size_t k = 0; k < v.size(); ++k) {
      if (k) out += ", ";
      Expr_(v[k]);
    }
  }

  void BufferShape(const Buffer& b) {
    out += '[';
    List(b->shape);
    out += ']';
    if (!b->strides.empty()) {
      out += " strides [";
      List(b->strides);
      out += ']';
    }
  }

  void Stmt_(const Stmt& s, int indent) {
    if (!s) {
      Line(indent, "<null>");
      return;
    }
    switch (s.kind()) {
      case StmtKind::kSeq: {
        const auto& seq = s.As<SeqNode>()->seq;
        for (size_t k = 0; k < seq.size(); ++k) {
          // A let or alloc scopes the rest of its block; one that does not end its sequence
          // gets its own braces.
          StmtKind kind = seq[k].kind();
          if (k + 1 < seq.size() && (kind == StmtKind::kLetStmt || kind == StmtKind::kAllocate)) {
            Line(indent, "{");
            Stmt_(seq[k], indent + 1);
            Line(indent, "}");
          } else {
            Stmt_(seq[k], indent);
          }
        }
        return;
      }
      case StmtKind::kFor: {
        const auto* n = s.As<ForNode>();
        ForHead(*n, indent);
        Stmt_(n->body, indent + 1);
        Line(indent, "}");
        return;
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        IfHead(*n, indent);
        while (true) {
          Stmt_(n->then_case, indent + 1);
          if (!n->else_case) break;
          if (const auto* elif = n->else_case.As<IfThenElseNode>()) {
            Indent(indent);
            out += "} else if (";
            Expr_(elif->cond);
            out += ") {\n";
            n = elif;
            continue;
          }
          Line(indent, "} else {");
          Stmt_(n->else_case, indent + 1);
          break;
        }
        Line(indent, "}");
        return;
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.As<LetStmtNode>();
        LetHead(*n, indent);
        Stmt_(n->body, indent);
        return;
      }
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        const BinaryNode* c = v1 ? nullptr : CompoundStore(*n);
        Force(c ? c->b : n->value, n->buffer.dtype());
        Indent(indent);
        out += n->buffer.name();
        out += '[';
        List(n->indices);
        out += ']';
        Assignment(c, n->value);
        return;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.As<AllocateNode>();
        AllocateHead(*n, indent);
        Stmt_(n->body, indent);
        return;
      }
      case StmtKind::kEvaluate:
        Indent(indent);
        Expr_(s.As<EvaluateNode>()->value);
        out += '\n';
        return;
      case StmtKind::kBarrier:
        Line(indent, "barrier");
        return;
      case StmtKind::kAtomic: {
        const auto* n = s.As<AtomicNode>();
        Force(n->value, n->buffer.dtype());
        Indent(indent);
        out += ToString(n->op);
        out += '(';
        out += n->buffer.name();
        out += '[';
        List(n->indices);
        out += "], ";
        Expr_(n->value);
        out += ")\n";
        return;
      }
      case StmtKind::kAssign: {
        const auto* n = s.As<AssignNode>();
        const BinaryNode* c =
            v1 ? nullptr
               : Compound(n->value, [&](const Expr& a) { return a.get() == n->var.get(); });
        Force(c ? c->b : n->value, n->var.dtype());
        Indent(indent);
        out += n->var.name();
        Assignment(c, n->value);
        return;
      }
    }
  }

  // The first line of `s` as Stmt_(s, 0) writes it, without its newline, and not the lines
  // after it (a loop's or an if's body, the statements a let or an alloc scopes); `more` says
  // whether Stmt_ writes any.
  void Head(const Stmt& s, bool* more) {
    *more = false;
    switch (s ? s.kind() : StmtKind::kBarrier) {
      case StmtKind::kFor:
        ForHead(*s.As<ForNode>(), 0);
        *more = true;
        break;
      case StmtKind::kIfThenElse:
        IfHead(*s.As<IfThenElseNode>(), 0);
        *more = true;
        break;
      case StmtKind::kLetStmt:
        LetHead(*s.As<LetStmtNode>(), 0);
        *more = !PrintsNothing(s.As<LetStmtNode>()->body);
        break;
      case StmtKind::kAllocate:
        AllocateHead(*s.As<AllocateNode>(), 0);
        *more = !PrintsNothing(s.As<AllocateNode>()->body);
        break;
      case StmtKind::kSeq: {  // not a statement of its own: all of it, then its first line
        Stmt_(s, 0);
        const size_t nl = out.find('\n');
        *more = nl != std::string::npos && nl + 1 < out.size();
        if (nl != std::string::npos) out.resize(nl + 1);
        break;
      }
      default:  // one line
        Stmt_(s, 0);
        break;
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
  }

  void Func(const PrimFunc& f) {
    out += "func ";
    out += f.name;
    out += '(';
    for (size_t k = 0; k < f.params.size(); ++k) {
      const Param& p = f.params[k];
      if (k) out += ", ";
      if (p.is_buffer()) {
        out += p.buffer().name();
        out += ": buffer<";
        out += ToString(p.buffer().dtype());
        out += '>';
        BufferShape(p.buffer());
      } else {
        out += p.var().name();
        out += ": ";
        out += ToString(p.var().dtype());
      }
    }
    out += ')';
    // The launch axes are the attribute "launch_params", in its sorted place among the rest.
    std::map<std::string, std::string> attrs = f.attrs;
    if (f.launch_axes) attrs["launch_params"] = ToString(*f.launch_axes);
    if (!attrs.empty()) {
      out += " attrs(";
      bool first = true;
      for (const auto& kv : attrs) {
        if (!first) out += ", ";
        out += Quote(kv.first);
        out += ": ";
        out += Quote(kv.second);
        first = false;
      }
      out += ')';
    }
    out += " {\n";
    Stmt_(f.body, 1);
    Line(0, "}");
  }

  std::string out;

 private:
  // The parser types a literal written without a suffix (int32, float32) from its context
  // (docs/ir.md, "Literals without a suffix"): where the context has another type, such a
  // literal is written with its suffix so that the text parses back to the same tree.
  // `cast`: the context is an explicit cast, which types float literals only.
  void Force(const Expr& lit, DType context, bool cast = false) {
    if (!lit || lit.dtype() == context || !Suffix(lit.dtype()).empty()) return;
    // As the parser's TypeLiteral: an integer takes an integer type, or a float type outside a
    // cast (`y[i] = 0`); a float a float type.
    if (lit.kind() == ExprKind::kIntImm && lit.dtype().is_int() &&
        (context.is_integer() || (context.is_float() && !cast)))
      force_.insert(lit.get());
    if (lit.kind() == ExprKind::kFloatImm && context.is_float() &&
        std::isfinite(lit.As<FloatImmNode>()->value))
      force_.insert(lit.get());
  }
  void Force(const Expr& lit, const Expr& other) {
    if (other) Force(lit, other.dtype());
  }
  std::string LiteralSuffix(const Expr& e) const {
    const DType t = e.dtype();
    if (!force_.count(e.get())) return Suffix(t);
    return t.is_float() ? "f32" : "i32";
  }
  std::unordered_set<const ExprNode*> force_;

  void ForHead(const ForNode& n, int indent) {
    Indent(indent);
    out += "for ";
    out += n.var.name();
    if (n.var.dtype() != Int32()) {
      out += ": ";
      out += ToString(n.var.dtype());
    }
    out += " in ";
    out += ToString(n.for_kind);
    out += '(';
    if (n.for_kind == ForKind::kThreadBinding) {
      out += ToString(n.thread);
      out += ", ";
    }
    Force(n.min, n.var.dtype());
    Force(n.extent, n.var.dtype());
    Force(n.step, n.var.dtype());
    Expr_(n.min);
    out += ", ";
    Expr_(n.extent);
    if (n.step) {
      out += ", ";
      Expr_(n.step);
    }
    out += ')';
    if (n.schedule != ScheduleKind::kDefault) {
      out += " schedule(";
      out += ToString(n.schedule);
      if (n.chunk > 0) {
        out += ", ";
        out += std::to_string(n.chunk);
      }
      out += ')';
    }
    out += " {\n";
  }
  // ` = value` or, for `x = x op v` (`c`), ` op= v`, and the end of the line.
  void Assignment(const BinaryNode* c, const Expr& value) {
    if (c != nullptr) {
      out += ' ';
      out += ToString(c->op);
      out += "= ";
      Expr_(c->b);
    } else {
      out += " = ";
      Expr_(value);
    }
    out += '\n';
  }
  // `value` as `x op v` with op one of + - * / % and `is_target(x)`: what compound assignment
  // reads back to (version 2); else nullptr.
  template <typename F>
  static const BinaryNode* Compound(const Expr& value, F is_target) {
    const auto* b = value.As<BinaryNode>();
    if (b == nullptr || !b->a || !b->b) return nullptr;
    if (b->op != BinaryOp::kAdd && b->op != BinaryOp::kSub && b->op != BinaryOp::kMul &&
        b->op != BinaryOp::kDiv && b->op != BinaryOp::kMod)
      return nullptr;
    return is_target(b->a) ? b : nullptr;
  }
  // A store `a[i] = a[i] op v` (the same buffer, indices structurally equal and without a packed
  // call, which compound assignment refuses) as a compound assignment.
  static const BinaryNode* CompoundStore(const StoreNode& n) {
    return Compound(n.value, [&](const Expr& a) {
      const auto* load = a.As<LoadNode>();
      if (load == nullptr || load->buffer.get() != n.buffer.get() ||
          load->indices.size() != n.indices.size())
        return false;
      for (size_t k = 0; k < n.indices.size(); ++k) {
        if (!StructuralEqual(load->indices[k], n.indices[k]) || detail::CallsPacked(n.indices[k]))
          return false;
      }
      return true;
    });
  }
  void IfHead(const IfThenElseNode& n, int indent) {
    Indent(indent);
    out += "if (";
    Expr_(n.cond);
    out += ") {\n";
  }
  void LetHead(const LetStmtNode& n, int indent) {
    Force(n.value, n.var.dtype());
    Indent(indent);
    out += n.assignable ? "var " : "let ";
    out += n.var.name();
    out += ": ";
    out += ToString(n.var.dtype());
    out += " = ";
    Expr_(n.value);
    out += '\n';
  }
  void AllocateHead(const AllocateNode& n, int indent) {
    Indent(indent);
    out += "alloc ";
    out += n.buffer.name();
    out += ": ";
    out += ToString(n.buffer.dtype());
    BufferShape(n.buffer);
    out += ' ';
    out += ToString(n.scope);
    out += '\n';
  }
  // Whether Stmt_(s) writes no text: a Seq of nothing (or of such Seqs).
  static bool PrintsNothing(const Stmt& s) {
    std::vector<const Stmt*> todo{&s};
    while (!todo.empty()) {
      const Stmt& t = *todo.back();
      todo.pop_back();
      if (!t || t.kind() != StmtKind::kSeq) return false;
      for (const Stmt& c : t.As<SeqNode>()->seq) todo.push_back(&c);
    }
    return true;
  }

  void Operand(const Expr& e, int parent, bool right) {
    int p = Precedence(e, v1);
    bool parens = right ? p <= parent : p < parent;
    // Comparisons do not chain: a < b < c reads as (a < b) < c, but say so.
    if (!right && (parent == kPrecEq || parent == kPrecRel) && p == parent) parens = true;
    if (parens) out += '(';
    Expr_(e);
    if (parens) out += ')';
  }
  // Two spaces a level, up to kMaxIndent levels: deeper statements are indented no further, so
  // the text of a deeply nested function grows with its size, not with the square of its depth
  // (100,000 nested loops would be 10 GB of spaces). The parser ignores indentation.
  static constexpr int kMaxIndent = 32;
  void Indent(int indent) {
    out.append(static_cast<size_t>(std::min(indent, kMaxIndent)) * 2, ' ');
  }
  void Line(int indent, const char* text) {
    Indent(indent);
    out += text;
    out += '\n';
  }
};

}  // namespace print
}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_SRC_PRINTER_HPP_
