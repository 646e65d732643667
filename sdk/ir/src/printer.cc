// SPDX-License-Identifier: Apache-2.0
// The printer of the text form (grammar in docs/ir.md).
#include <algorithm>
#include <backplane/ir/text.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "deep.hpp"

namespace backplane {
namespace ir {
namespace {

// Binding strength, as the parser reads it: a higher number binds tighter.
constexpr int kPrecOr = 1, kPrecAnd = 2, kPrecEq = 3, kPrecRel = 4, kPrecAdd = 5, kPrecMul = 6,
              kPrecUnary = 7, kPrecPrimary = 8;

int Precedence(BinaryOp op) {
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
      return kPrecMul;
    default:
      return kPrecPrimary;  // floordiv(a, b), min(a, b), ...
  }
}

int Precedence(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::kBinary:
      return Precedence(e.As<BinaryNode>()->op);
    case ExprKind::kNot:
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

std::string Suffix(DType t) {
  if (t.is_float()) return t.bits == 32 ? "" : "f" + std::to_string(t.bits);
  if (t.is_int()) return t.bits == 32 ? "" : "i" + std::to_string(t.bits);
  return "u" + std::to_string(t.bits);
}

std::string FormatDouble(double v) {
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

std::string Quote(const std::string& s) {
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
  void Expr_(const Expr& e) {
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
        Operand(e.As<NotNode>()->a, kPrecUnary, true);
        return;
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
        if (n->dtype.is_float()) Force(n->value, n->dtype);
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
        Indent(indent);
        out += "for ";
        out += n->var.name();
        if (n->var.dtype() != Int32()) {
          out += ": ";
          out += ToString(n->var.dtype());
        }
        out += " in ";
        out += ToString(n->for_kind);
        out += '(';
        if (n->for_kind == ForKind::kThreadBinding) {
          out += ToString(n->thread);
          out += ", ";
        }
        Expr_(n->min);
        out += ", ";
        Expr_(n->extent);
        out += ") {\n";
        Stmt_(n->body, indent + 1);
        Line(indent, "}");
        return;
      }
      case StmtKind::kIfThenElse: {
        const auto* n = s.As<IfThenElseNode>();
        Indent(indent);
        out += "if (";
        Expr_(n->cond);
        out += ") {\n";
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
        Force(n->value, n->var.dtype());
        Indent(indent);
        out += "let ";
        out += n->var.name();
        out += ": ";
        out += ToString(n->var.dtype());
        out += " = ";
        Expr_(n->value);
        out += '\n';
        Stmt_(n->body, indent);
        return;
      }
      case StmtKind::kStore: {
        const auto* n = s.As<StoreNode>();
        Force(n->value, n->buffer.dtype());
        Indent(indent);
        out += n->buffer.name();
        out += '[';
        List(n->indices);
        out += "] = ";
        Expr_(n->value);
        out += '\n';
        return;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.As<AllocateNode>();
        Indent(indent);
        out += "alloc ";
        out += n->buffer.name();
        out += ": ";
        out += ToString(n->buffer.dtype());
        BufferShape(n->buffer);
        out += ' ';
        out += ToString(n->scope);
        out += '\n';
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
    }
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
    if (!f.attrs.empty()) {
      out += " attrs(";
      bool first = true;
      for (const auto& kv : f.attrs) {
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
  void Force(const Expr& lit, DType context) {
    if (!lit || lit.dtype() == context || !Suffix(lit.dtype()).empty()) return;
    // As the parser's TypeLiteral: an integer takes an integer type, a float a float type.
    if (lit.kind() == ExprKind::kIntImm && lit.dtype().is_int() && context.is_integer())
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

  void Operand(const Expr& e, int parent, bool right) {
    int p = Precedence(e);
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

}  // namespace

std::string Print(const Expr& expr) {
  return detail::Deep(TreeDepth(expr), [&] {
    Printer p;
    p.Expr_(expr);
    return std::move(p.out);
  });
}

std::string Print(const Stmt& stmt, int indent) {
  return detail::Deep(TreeDepth(stmt), [&] {
    Printer p;
    p.Stmt_(stmt, indent);
    return std::move(p.out);
  });
}

std::string Print(const PrimFunc& func) {
  return detail::Deep(TreeDepth(func), [&] {
    Printer p;
    p.Func(func);
    return std::move(p.out);
  });
}

std::string Print(const IRModule& module) {
  return detail::Deep(TreeDepth(module), [&] {
    Printer p;
    p.out = "# backplane-ir " + std::to_string(kTextFormatVersion) + "\n";
    for (const auto& f : module.functions()) {
      p.out += "\n";
      p.Func(f);
    }
    return std::move(p.out);
  });
}

}  // namespace ir
}  // namespace backplane
