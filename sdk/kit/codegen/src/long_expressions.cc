// SPDX-License-Identifier: Apache-2.0
// The C-family emitter's handling of long expressions (docs/codegen-guide.md, "Long
// expressions"): temporaries that keep every expression's nesting bounded, in evaluation order,
// and conditional arms, else-if chains and operands written twice that need them.
#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/ir.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace codegen {

using ir::BinaryOp;
using ir::DType;
using ir::ExprKind;

namespace {

// The deepest nesting of brackets ( [ { in `text`, outside string literals.
int NestingDepth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = false;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
    } else if (c == '(' || c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// A literal or a variable: evaluating it has no effect and costs nothing, so its text may be
// written anywhere and more than once.
bool IsSimple(const ir::Expr& e) {
  return e.kind() == ExprKind::kIntImm || e.kind() == ExprKind::kFloatImm ||
         e.kind() == ExprKind::kVar;
}

// An operand written more than once (min, max, a ramp's lanes) whose text is longer than this
// is evaluated once, into a temporary: nested min/max would otherwise double the text at
// every level.
constexpr size_t kDuplicatedTextLimit = 160;

}  // namespace

std::string CFamilyEmitter::EmitExpr(const ir::Expr& e) {
  std::string text = EmitExprText(e);
  // A text nested deeper than the bound is the value of a temporary (a chain of 10,000 terms
  // becomes about 160 statements of 64): compilers' parsers have a bounded stack (glslang's
  // gave out on 10,000 levels), and their passes can be superlinear in an expression's depth.
  if (e.dtype().is_handle() || NestingDepth(text) <= kMaxExprDepth) return text;
  return Bind(e.dtype(), text);
}

std::string CFamilyEmitter::TempQualifier(DType) { return ""; }

std::string CFamilyEmitter::Bind(DType t, const std::string& text) {
  const std::string name = Temp();
  pending_.back().push_back(TempQualifier(t) + TypeName(t) + " " + name + " = " + text + ";");
  return name;
}

CFamilyEmitter::Operand CFamilyEmitter::EmitOperand(const ir::Expr& e) {
  const int64_t effects = effects_, reads = reads_, writes = writes_;
  Operand op;
  op.text = EmitExpr(e);
  op.dtype = e.dtype();
  op.simple = IsSimple(e);
  op.end = pending_.back().size();
  op.effects = effects_ != effects;
  op.reads = reads_ != reads;
  op.writes = writes_ != writes;
  op.writes_at_end = writes_;
  return op;
}

void CFamilyEmitter::KeepInOrder(Operand* op, bool duplicated) {
  if (op->simple || op->dtype.is_handle()) return;
  std::vector<std::string>& pending = pending_.back();
  // Statements emitted after the operand run before its text does. That is harmless unless
  // one of the two has an effect the other could see: the first fault noted wins, and a call
  // to the host may write what a load reads.
  const bool later = pending.size() > op->end;
  bool bind = later && (op->effects || op->writes || (op->reads && writes_ != op->writes_at_end));
  if (duplicated) {
    bind = bind || op->effects || op->writes || (op->reads && writes_ != 0) ||
           op->text.size() > kDuplicatedTextLimit;
  }
  if (bind) BindAt(op);
}

void CFamilyEmitter::BindAt(Operand* op) {
  std::vector<std::string>& pending = pending_.back();
  const std::string name = Temp();
  pending.insert(
      pending.begin() + static_cast<std::ptrdiff_t>(op->end),
      TempQualifier(op->dtype) + TypeName(op->dtype) + " " + name + " = " + op->text + ";");
  op->text = name;
}

std::vector<std::string> CFamilyEmitter::EmitInOrder(const std::vector<ir::Expr>& exprs,
                                                     bool duplicated) {
  std::vector<Operand> ops;
  ops.reserve(exprs.size());
  for (const ir::Expr& e : exprs) ops.push_back(EmitOperand(e));
  // Last first: binding an operand inserts its declaration after every earlier one's.
  for (size_t i = ops.size(); i-- > 0;) KeepInOrder(&ops[i], duplicated);
  std::vector<std::string> texts;
  texts.reserve(ops.size());
  for (Operand& op : ops) texts.push_back(std::move(op.text));
  return texts;
}

std::string CFamilyEmitter::EmitArm(const ir::Expr& e, std::vector<std::string>* lines) {
  pending_.emplace_back();
  std::string text = EmitExpr(e);
  *lines = std::move(pending_.back());
  pending_.pop_back();
  return text;
}

std::string CFamilyEmitter::EmitSelect(const ir::SelectNode& s, const ir::Expr& e) {
  const std::string cond = EmitExpr(s.cond);
  std::vector<std::string> then_lines, else_lines;
  const std::string a = EmitArm(s.a, &then_lines);
  const std::string b = EmitArm(s.b, &else_lines);
  if (then_lines.empty() && else_lines.empty()) return "(" + cond + " ? " + a + " : " + b + ")";
  // An arm needs statements of its own: they run only when the select takes that arm.
  const DType t = e.dtype();
  const std::string r = Temp();
  std::vector<std::string>& p = pending_.back();
  p.push_back(TempQualifier(t) + TypeName(t) + " " + r + ";");
  p.push_back("if (" + cond + ") {");
  for (const std::string& l : then_lines) p.push_back("  " + l);
  p.push_back("  " + r + " = " + a + ";");
  p.push_back("} else {");
  for (const std::string& l : else_lines) p.push_back("  " + l);
  p.push_back("  " + r + " = " + b + ";");
  p.push_back("}");
  return r;
}

std::string CFamilyEmitter::EmitLogical(const ir::BinaryNode& b, const ir::Expr& e) {
  const bool is_and = b.op == BinaryOp::kAnd;
  const std::string x = EmitExpr(b.a);
  std::vector<std::string> lines;
  const std::string y = EmitArm(b.b, &lines);
  if (lines.empty()) return "(" + x + (is_and ? " && " : " || ") + y + ")";
  // The right operand needs statements: they run only when it is evaluated.
  const std::string r = Temp();
  std::vector<std::string>& p = pending_.back();
  p.push_back(TypeName(e.dtype()) + " " + r + " = " + x + ";");
  p.push_back("if (" + (is_and ? r : "!" + r) + ") {");
  for (const std::string& l : lines) p.push_back("  " + l);
  p.push_back("  " + r + " = " + y + ";");
  p.push_back("}");
  return r;
}

// if / else if / else. The condition of an `else if` runs only when every condition before it
// was false, so the temporaries it needs cannot go before the `if`: from the first such
// condition on, the rest of the chain is a `do { ... } while (false)` block in which each arm
// ends with `break`, flat however long the chain is.
void CFamilyEmitter::EmitIf(const ir::IfThenElseNode& first) {
  const ir::IfThenElseNode* n = &first;
  Line("if (" + EmitExpr(n->cond) + ") {");
  bool flat = false;  // inside the do-while block
  for (;;) {
    ++indent_;
    CongruenceScope scope;
    Assume(n->cond, &scope);
    EmitStmt(n->then_case);
    Restore(&scope);
    if (flat) Line("break;");
    --indent_;
    if (!n->else_case) {
      Line("}");
      break;
    }
    const auto* chained = n->else_case.As<ir::IfThenElseNode>();
    if (chained == nullptr) {
      if (flat) {
        Line("}");
        EmitStmt(n->else_case);  // no arm was taken
      } else {
        Line("} else {");
        ++indent_;
        EmitStmt(n->else_case);
        --indent_;
        Line("}");
      }
      break;
    }
    std::vector<std::string> lines;
    const std::string cond = EmitArm(chained->cond, &lines);
    n = chained;
    if (!flat && lines.empty()) {
      Line("} else if (" + cond + ") {");
      continue;
    }
    if (flat) {
      Line("}");
    } else {
      Line("} else {");
      ++indent_;
      Line("do {");
      ++indent_;
      flat = true;
    }
    pending_[0].insert(pending_[0].end(), lines.begin(), lines.end());
    Line("if (" + cond + ") {");
  }
  if (flat) {
    --indent_;
    Line("} while (false);");
    --indent_;
    Line("}");
  }
}

}  // namespace codegen
}  // namespace backplane
