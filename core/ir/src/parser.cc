// SPDX-License-Identifier: Apache-2.0
// The parser of the text form (grammar in docs/ir.md): a recursive-descent parser over the
// tokens of lexer.hpp. Every error names the line and column, shows the line with a caret under
// the spot and says what was expected. It is one class of about 1,000 lines on purpose: its
// methods are one grammar's mutual recursion (statements, expressions, literals, scopes) over one
// parser state; split over files, the class would move to a header and its small helpers (Cur,
// Take, Expect) would become calls across files on every token.
#include <algorithm>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <unordered_map>
#include <utility>

#include "deep.hpp"
#include "lexer.hpp"
#include "literal.hpp"
#include "names.hpp"
#include "quote.hpp"

namespace backplane {
namespace ir {
namespace {

using lex::BracketDepth;
using lex::Lexer;
using lex::Q;
using lex::SourceError;
using lex::Tok;
using lex::Token;

constexpr ThreadTag kThreadTags[] = {ThreadTag::kBlockIdxX,  ThreadTag::kBlockIdxY,
                                     ThreadTag::kBlockIdxZ,  ThreadTag::kThreadIdxX,
                                     ThreadTag::kThreadIdxY, ThreadTag::kThreadIdxZ};

// What a name stands for in a scope.
struct Binding {
  Var var;
  Buffer buffer;
  int line = 0;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const SourceError& err, int version)
      : toks_(std::move(toks)), err_(err), version_(version) {}

  IRModule Module() {
    IRModule m;
    while (Cur().kind != Tok::kEnd) {
      if (!IsKeyword("func")) Fail("expected 'func' to start a function");
      const Token& at = Cur();
      PrimFunc f = Func();
      const int64_t depth = TreeDepth(f);
      if (depth > kMaxTreeDepth)
        err_.Throw(at.offset, "function '" + Q(f.name) + "' makes a tree " + std::to_string(depth) +
                                  " levels deep: expected at most " +
                                  std::to_string(kMaxTreeDepth) +
                                  " (a chain of operators, lets or else-ifs is one level an "
                                  "element); split long chains into partial sums held in lets");
      if (m.Find(f.name))
        err_.Throw(at.offset, "function '" + Q(f.name) +
                                  "' is defined twice: give each function its own name");
      m.Add(std::move(f));
    }
    return m;
  }

 private:
  // ---- tokens ----
  const Token& Cur() const { return toks_[pos_]; }
  const Token& Next() const { return toks_[pos_ + 1 < toks_.size() ? pos_ + 1 : pos_]; }
  void Take() {
    if (Cur().kind != Tok::kEnd) ++pos_;
  }
  bool IsPunct(const char* p) const { return Cur().kind == Tok::kPunct && Cur().text == p; }
  bool IsKeyword(const char* k) const { return Cur().kind == Tok::kIdent && Cur().text == k; }
  bool TakePunct(const char* p) {
    if (!IsPunct(p)) return false;
    Take();
    return true;
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case Tok::kEnd:
        return "the end of the input";
      case Tok::kString:
        return "a string";
      default:
        return "'" + Q(t.text) + "'";
    }
  }
  [[noreturn]] void Fail(const std::string& expected) const {
    err_.Throw(Cur().offset, expected + ", got " + Describe(Cur()));
  }
  // The same for a literal: the string is made out of line, only on failure.
  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void Fail(const char* expected) const {
    Fail(std::string(expected));
  }
  // Takes punctuation `p` or fails with "expected 'p' <context>, got ...".
  void Expect(const char* p, const std::string& context) {
    if (!TakePunct(p)) Fail(std::string("expected '") + p + "' " + context);
  }
  void Expect(const char* p, const char* context) {
    if (!TakePunct(p)) FailExpecting(p, context);
  }
  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void FailExpecting(const char* p,
                                                                  const char* context) {
    Fail(std::string("expected '") + p + "' " + context);
  }
  // Expect with the context made only on failure (`context()` returns it), out of line: on the
  // recursive paths of nesting, no string is built or held in the frame.
  template <typename MakeContext>
  void ExpectLazy(const char* p, const MakeContext& context) {
    if (!TakePunct(p)) FailExpecting(p, context);
  }
  template <typename MakeContext>
  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void FailExpecting(const char* p,
                                                                  const MakeContext& context) {
    Fail(std::string("expected '") + p + "' " + context());
  }
  std::string ExpectIdent(const std::string& what) {
    if (Cur().kind != Tok::kIdent) Fail("expected " + what);
    std::string s = Cur().text;
    Take();
    return s;
  }
  DType ExpectDType(const std::string& context) {
    DType t;
    if (Cur().kind != Tok::kIdent || !ParseDType(Cur().text, &t))
      Fail("expected a dtype (int32, float32, float32x4, bool...) " + context);
    Take();
    return t;
  }

  // ---- scopes ----
  const Binding* Lookup(const std::string& name) const {
    auto f = names_.find(name);
    return f == names_.end() ? nullptr : &f->second;
  }
  void Define(const Token& at, const std::string& name, Binding b) {
    if (!detail::IsIdentifier(name))
      err_.Throw(at.offset, "'" + Q(name) + "' is a keyword: expected a name");
    if (const Binding* old = Lookup(name))
      err_.Throw(at.offset, "'" + Q(name) + "' is already defined (line " +
                                std::to_string(old->line) +
                                "); expected a new name (names are not shadowed)");
    b.line = at.line;
    names_[name] = std::move(b);
    scopes_.back().push_back(name);
  }

  void PopScope() {
    for (const std::string& n : scopes_.back()) names_.erase(n);
    scopes_.pop_back();
  }

  // ---- functions ----
  PrimFunc Func() {
    Take();  // func
    PrimFunc f;
    const Token& name_tok = Cur();
    f.name = ExpectIdent("the function's name after 'func'");
    if (!detail::IsIdentifier(f.name))
      err_.Throw(name_tok.offset, "'" + Q(f.name) + "' is a keyword: expected the function's name");
    scopes_.assign(1, {});
    names_.clear();
    Expect("(", "after the function's name");
    ++nest_;
    if (!IsPunct(")")) {
      do {
        f.params.push_back(Param_());
      } while (TakePunct(","));
    }
    Expect(")", "after the parameters of '" + Q(f.name) + "'");
    --nest_;
    if (IsKeyword("attrs")) {
      Take();
      Expect("(", "after 'attrs'");
      ++nest_;
      if (!IsPunct(")")) {
        do {
          if (Cur().kind != Tok::kString) Fail("expected an attribute name as a string");
          const Token& key_tok = Cur();
          std::string key = Cur().text;
          Take();
          Expect(":", "after the attribute name");
          if (Cur().kind != Tok::kString) Fail("expected the attribute's value as a string");
          if (f.attrs.count(key) || (key == "launch_params" && f.launch_axes))
            err_.Throw(key_tok.offset,
                       "attribute '" + key + "' is given twice: give each attribute once");
          if (key == "launch_params") {
            f.launch_axes = LaunchAxes(Cur());
          } else {
            f.attrs[key] = Cur().text;
          }
          Take();
        } while (TakePunct(","));
      }
      Expect(")", "after the attributes");
      --nest_;
    }
    if (!IsPunct("{")) Fail("expected '{' to start the body of '" + Q(f.name) + "'");
    f.body = Block();
    scopes_.clear();
    names_.clear();
    CheckUntypedLiterals();
    return f;
  }

  Param Param_() {
    const Token& at = Cur();
    std::string name = ExpectIdent("a parameter name");
    Expect(":", "after the parameter name '" + Q(name) + "'");
    if (IsKeyword("buffer")) {
      Take();
      Expect("<", "after 'buffer'");
      DType t = ExpectDType("in buffer<...>");
      Expect(">", "after the buffer's dtype");
      std::vector<Expr> shape, strides;
      Shape(&shape, &strides);
      Buffer b = MakeBuffer(at, name, t, shape, strides);
      Define(at, name, Binding{Var(), b, 0});
      return b;
    }
    DType t = ExpectDType("or 'buffer<dtype>[shape]' for the parameter '" + Q(name) + "'");
    Var v = MakeVar(at, name, t);
    Define(at, name, Binding{v, Buffer(), 0});
    return v;
  }

  Var MakeVar(const Token& at, const std::string& name, DType t) {
    if (!detail::IsIdentifier(name))
      err_.Throw(at.offset, "'" + Q(name) + "' is a keyword: expected a name");
    return Var(name, t);
  }
  Buffer MakeBuffer(const Token& at, const std::string& name, DType t, std::vector<Expr> shape,
                    std::vector<Expr> strides) {
    if (!detail::IsIdentifier(name))
      err_.Throw(at.offset, "'" + Q(name) + "' is a keyword: expected a name");
    return Buffer(name, t, std::move(shape), std::move(strides));
  }

  void Shape(std::vector<Expr>* shape, std::vector<Expr>* strides) {
    Expect("[", "to start the buffer's shape");
    ++nest_;
    if (!IsPunct("]")) *shape = Exprs();
    Expect("]", "after the buffer's shape");
    --nest_;
    if (IsKeyword("strides")) {
      const Token& at = Cur();
      Take();
      Expect("[", "after 'strides'");
      ++nest_;
      if (!IsPunct("]")) *strides = Exprs();
      Expect("]", "after the strides");
      --nest_;
      if (strides->size() != shape->size())
        err_.Throw(at.offset, "expected " + std::to_string(shape->size()) +
                                  " strides (one a dimension), got " +
                                  std::to_string(strides->size()));
    }
  }

  // ---- statements ----
  Stmt Block() {
    Expect("{", "to start a block");
    scopes_.emplace_back();
    std::vector<Stmt> stmts = Stmts();
    PopScope();
    Expect("}", "to close the block");
    return Seq(std::move(stmts));
  }

  // Statements up to the closing '}' (not taken). A let or alloc takes the rest of the block as
  // its body: the statements after it are read in this loop, not by a recursive call, and the
  // nested LetStmt/Allocate nodes are made at the end, so a run of lets needs no stack.
  std::vector<Stmt> Stmts() {
    std::vector<OpenScope> open;
    std::vector<Stmt> out;
    while (!IsPunct("}")) {
      if (Cur().kind == Tok::kEnd) Fail("expected '}' to close the block");
      if (IsKeyword("let") || IsKeyword("alloc") || IsVarDeclaration()) {
        OpenLet(&open, &out);
        continue;
      }
      out.push_back(Statement());
    }
    CloseLets(&open, &out);
    return out;
  }

  // `let name: T = value` or `alloc name: T[shape] scope`, up to the end of the line; defines the
  // name in a new scope that Stmts closes.
  struct OpenScope {
    std::vector<Stmt> before;  // the statements ahead of the let or alloc
    Var var;                   // a let's or a var's
    Expr value;
    bool assignable = false;  // var
    Buffer buffer;            // an alloc's
    StorageScope scope = StorageScope::kGlobal;
  };

  // `let name: T = value` or `alloc name: T[shape] scope`, up to the end of the statement;
  // defines the name in a new scope, which Stmts closes after the body.
  [[gnu::noinline]] OpenScope ScopedHead() {
    const std::string keyword = Cur().text;
    const bool is_let = keyword != "alloc";
    Take();
    const Token& at = Cur();
    std::string name = ExpectIdent(is_let ? "a variable name after '" + keyword + "'"
                                          : "a buffer name after 'alloc'");
    Expect(":", "after '" + Q(name) + "'");
    DType t = ExpectDType("after '" + Q(name) + ":'");
    OpenScope o;
    if (is_let) {
      Var v = MakeVar(at, name, t);
      o.assignable = keyword == "var";
      Expect("=", "after '" + keyword + " " + Q(name) + ": " + ToString(t) + "'");
      o.value = TypeLiteral(Expression(), t);
      EndOfStatement();
      scopes_.emplace_back();
      Define(at, name, Binding{v, Buffer(), 0});
      o.var = v;
      return o;
    }
    std::vector<Expr> shape, strides;
    Shape(&shape, &strides);
    if (IsKeyword("global")) {
      o.scope = StorageScope::kGlobal;
    } else if (IsKeyword("shared")) {
      o.scope = StorageScope::kShared;
    } else if (IsKeyword("local")) {
      o.scope = StorageScope::kLocal;
    } else {
      Fail("expected the storage scope (global, shared or local) of '" + Q(name) + "'");
    }
    Take();
    EndOfStatement();
    Buffer b = MakeBuffer(at, name, t, shape, strides);
    scopes_.emplace_back();
    Define(at, name, Binding{Var(), b, 0});
    o.buffer = b;
    return o;
  }

  // A let, var or alloc read: the statements before it wait in `open` for the body.
  [[gnu::noinline]] void OpenLet(std::vector<OpenScope>* open, std::vector<Stmt>* out) {
    OpenScope o = ScopedHead();
    o.before = std::move(*out);
    out->clear();
    open->push_back(std::move(o));
  }
  // At the block's end: each open let, var or alloc takes the statements after it as its body.
  [[gnu::noinline]] void CloseLets(std::vector<OpenScope>* open, std::vector<Stmt>* out) {
    while (!open->empty()) {
      OpenScope& o = open->back();
      Stmt body = Seq(std::move(*out));
      Stmt s = !o.var         ? Allocate(o.buffer, o.scope, body)
               : o.assignable ? DeclareVar(o.var, o.value, body)
                              : LetStmt(o.var, o.value, body);
      *out = std::move(o.before);
      out->push_back(std::move(s));
      open->pop_back();
      PopScope();
    }
  }

  void EndOfStatement() {
    if (!Cur().bol && !IsPunct("}") && Cur().kind != Tok::kEnd)
      Fail("expected the end of the statement (a new line or '}')");
  }

  // Block -> Stmts -> Statement (-> ForStmt or IfStmt) is the path a level of nesting takes, so
  // these keep small frames: what parses a statement's head, or a statement that holds no block,
  // is out of line. Under AddressSanitizer at -O1 the inlined heads made a level of braces
  // ~16 KiB, and an error 10,000 levels deep unwound more stack than ASan cleans up after an
  // exception (64 MiB), which it then reported as a stack-use-after-scope.
  Stmt Statement() {
    if (IsPunct("{")) return Block();
    if (IsKeyword("for")) return ForStmt();
    if (IsKeyword("if")) return IfStmt();
    if (IsKeyword("barrier")) {
      Take();
      EndOfStatement();
      return Barrier();
    }
    if (IsAtomic()) return AtomicStmt();
    if (IsKeyword("else")) Fail("expected a statement ('else' must follow the '}' of an 'if')");
    if (IsKeyword("func")) Fail("expected a statement or '}' (is a '}' missing before 'func'?)");
    return AssignOrEvaluate();
  }

  // `target = value`, `target op= value` or an expression evaluated for its effect.
  [[gnu::noinline]] Stmt AssignOrEvaluate() {
    const Token& at = Cur();
    Expr e = Expression();
    BinaryOp op = BinaryOp::kAdd;
    const bool compound = CompoundOperator(&op);
    if (compound || IsPunct("=")) {
      const Token& op_at = Cur();
      const auto* load = e.As<LoadNode>();
      const auto* var = e.As<VarNode>();
      if (!load && !var)
        err_.Throw(at.offset,
                   "expected a variable or a buffer element (name[indices]) on the left of '" +
                       std::string(compound ? ToString(op) : "") + "='");
      if (compound) {
        Take();
        if (load) {
          for (const Expr& i : load->indices)
            if (detail::CallsPacked(i))
              err_.Throw(op_at.offset,
                         "compound assignment '" + std::string(ToString(op)) +
                             "=' to an element whose index calls call_packed would call it "
                             "twice: bind the index with let first");
        }
      }
      Take();  // '='
      Expr value = Expression();
      const DType t = load ? load->buffer.dtype().WithLanes(load->dtype.lanes) : e.dtype();
      value = TypeLiteral(value, t);
      if (compound) value = Binary(op, e, value);
      EndOfStatement();
      if (load) return Store(load->buffer, load->indices, value);
      return Assign(names_.at(var->name).var, value);
    }
    EndOfStatement();
    return Evaluate(e);
  }

  // `atomic_add(a[i], v)`, `atomic_min(...)`, `atomic_max(...)` as a statement: the names are
  // keywords only there.
  bool IsAtomic() const {
    return Cur().kind == Tok::kIdent &&
           (Cur().text == "atomic_add" || Cur().text == "atomic_min" ||
            Cur().text == "atomic_max") &&
           Next().kind == Tok::kPunct && Next().text == "(";
  }
  [[gnu::noinline]] Stmt AtomicStmt() {
    const std::string name = Cur().text;
    const AtomicOp op = name == "atomic_add"   ? AtomicOp::kAdd
                        : name == "atomic_min" ? AtomicOp::kMin
                                               : AtomicOp::kMax;
    Take();
    Expect("(", "after '" + name + "'");
    ++nest_;
    const Token& at = Cur();
    Expr target = Expression();
    const auto* load = target.As<LoadNode>();
    if (!load)
      err_.Throw(at.offset, "expected a buffer element (name[indices]) as the first argument of " +
                                name + ", the element it updates");
    Expect(",", "after the element " + name + " updates");
    Expr value = TypeLiteral(Expression(), load->buffer.dtype());
    Expect(")", "after the value of " + name);
    --nest_;
    EndOfStatement();
    return Atomic(op, load->buffer, load->indices, value);
  }

  // `var name: T = value`: `var` is a keyword only there (a name `var` stays usable elsewhere).
  bool IsVarDeclaration() const {
    return IsKeyword("var") && Next().kind == Tok::kIdent && !Next().bol;
  }

  // `+=`, `-=`, `*=`, `/=`, `%=` at the current token (the operator and '=' written together).
  bool CompoundOperator(BinaryOp* op) const {
    const Token& t = Cur();
    if (t.kind != Tok::kPunct || t.text.size() != 1) return false;
    const Token& next = Next();
    if (next.kind != Tok::kPunct || next.text != "=" || next.offset != t.offset + 1) return false;
    switch (t.text[0]) {
      case '+':
        *op = BinaryOp::kAdd;
        return true;
      case '-':
        *op = BinaryOp::kSub;
        return true;
      case '*':
        *op = BinaryOp::kMul;
        return true;
      case '/':
        *op = BinaryOp::kDiv;
        return true;
      case '%':
        *op = BinaryOp::kMod;
        return true;
      default:
        return false;
    }
  }

  // A loop's head, up to its body's '{' (not taken), with the loop variable defined in a new
  // scope that ForStmt closes after the body.
  struct ForHead {
    Var var;
    ForKind kind = ForKind::kSerial;
    ThreadTag tag = ThreadTag::kNone;
    Expr min, end, extent, step;
    int64_t range_step = 1;
    ScheduleKind schedule = ScheduleKind::kDefault;
    int64_t chunk = 0;
  };

  [[gnu::noinline]] Stmt ForStmt() {
    ForHead h = ForHeader();
    Stmt body = Block();
    PopScope();
    return MakeLoop(h, body);
  }

  [[gnu::noinline]] ForHead ForHeader() {
    Take();
    const Token& at = Cur();
    std::string name = ExpectIdent("the loop variable after 'for'");
    DType t = Int32();
    if (TakePunct(":")) t = ExpectDType("for the loop variable '" + Q(name) + "'");
    ForHead h;
    h.var = MakeVar(at, name, t);
    if (!IsKeyword("in")) Fail("expected 'in' after the loop variable");
    Take();
    static const struct {
      const char* name;
      ForKind kind;
    } kKinds[] = {{"serial", ForKind::kSerial},
                  {"parallel", ForKind::kParallel},
                  {"vectorized", ForKind::kVectorized},
                  {"unrolled", ForKind::kUnrolled},
                  {"thread", ForKind::kThreadBinding}};
    const ForKind* kind = nullptr;
    for (const auto& k : kKinds)
      if (IsKeyword(k.name)) kind = &k.kind;
    if (!kind) Fail("expected the loop kind (serial, parallel, vectorized, unrolled or thread)");
    h.kind = *kind;
    std::string kind_name = Cur().text;
    Take();
    Expect("(", "after '" + kind_name + "'");
    ++nest_;
    if (h.kind == ForKind::kThreadBinding) {
      h.tag = Thread();
      Expect(",", "after the thread axis");
    }
    h.min = TypeLiteral(Expression(), t);
    // `begin .. end[, step]`: C's loop by its end (ForRange), else `start, count[, step]`.
    if (TakePunct("..")) {
      h.end = TypeLiteral(Expression(), t);
      if (TakePunct(",")) {
        const Token& step_at = Cur();
        Expr e = TypeLiteral(Expression(), t);
        const auto* imm = e.As<IntImmNode>();
        if (imm == nullptr || imm->value == 0 || !t.is_integer())
          err_.Throw(step_at.offset,
                     "the step of a loop over a range (begin .. end, step) is a nonzero integer "
                     "constant, got '" +
                         Q(Print(e)) +
                         "': write a number (-1 counts down), or use the form (start, count, "
                         "step) for a step computed at run time");
        h.range_step = imm->value;
        if (h.kind == ForKind::kThreadBinding)
          err_.Throw(step_at.offset,
                     "a thread-bound loop takes no step: write thread(axis, begin .. end)");
      }
      Expect(")", "after the loop's range (begin .. end[, step])");
    } else {
      Expect(",", "after the loop's start (or '..' and its end)");
      h.extent = TypeLiteral(Expression(), t);
      if (TakePunct(",")) h.step = TypeLiteral(Expression(), t);
      Expect(")", h.step ? "after the loop's step" : "after the loop's extent (its trip count)");
    }
    --nest_;
    if (IsKeyword("schedule")) Schedule(&h.schedule, &h.chunk);
    scopes_.emplace_back();
    Define(at, name, Binding{h.var, Buffer(), 0});
    if (!IsPunct("{")) Fail("expected '{' to start the loop body");
    return h;
  }

  [[gnu::noinline]] static Stmt MakeLoop(const ForHead& h, const Stmt& body) {
    if (h.tag != ThreadTag::kNone) {
      Stmt s = ThreadFor(h.var, h.tag, h.min, h.end ? h.end - h.min : h.extent, body);
      if (!h.step) return s;
      return WithStep(s, h.step);
    }
    Stmt s = h.end    ? ForRange(h.var, h.min, h.end, h.range_step, h.kind, body)
             : h.step ? For(h.var, h.min, h.extent, h.step, h.kind, body)
                      : For(h.var, h.min, h.extent, h.kind, body);
    if (h.schedule == ScheduleKind::kDefault && h.chunk == 0) return s;
    auto n = std::make_shared<ForNode>(*s.As<ForNode>());
    n->schedule = h.schedule;
    n->chunk = h.chunk;
    return Stmt(std::move(n));
  }

  // A thread-bound loop with a step, which the verifier refuses with its message.
  static Stmt WithStep(const Stmt& loop, Expr step) {
    auto n = std::make_shared<ForNode>(*loop.As<ForNode>());
    n->step = std::move(step);
    return Stmt(std::move(n));
  }

  // `schedule(static|dynamic|guided [, chunk])` after a loop's bounds.
  void Schedule(ScheduleKind* kind, int64_t* chunk) {
    Take();
    Expect("(", "after 'schedule'");
    static const ScheduleKind kKinds[] = {ScheduleKind::kStatic, ScheduleKind::kDynamic,
                                          ScheduleKind::kGuided};
    bool found = false;
    for (ScheduleKind k : kKinds) {
      if (IsKeyword(ToString(k))) {
        *kind = k;
        found = true;
      }
    }
    if (!found) Fail("expected the schedule (static, dynamic or guided)");
    Take();
    if (TakePunct(",")) {
      const Token& at = Cur();
      if (at.kind != Tok::kInt) Fail("expected the chunk size, a positive integer");
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(at.text.c_str(), &end, 10);
      if (errno != 0 || end == nullptr || *end != '\0' || v <= 0 || v > (1LL << 31))
        err_.Throw(at.offset, "chunk size " + Q(at.text) +
                                  ": expected a positive integer without a suffix, at most "
                                  "2147483648");
      *chunk = v;
      Take();
    }
    Expect(")", "after the schedule");
  }

  // The value of attribute "launch_params": thread axes separated by commas ("" for none).
  std::vector<ThreadTag> LaunchAxes(const Token& value) {
    std::vector<ThreadTag> axes;
    const std::string& list = value.text;
    for (size_t start = 0; !list.empty() && start <= list.size();) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      const std::string name = list.substr(start, comma - start);
      ThreadTag tag = ThreadTag::kNone;
      if (!ParseThreadTag(name, &tag)) {
        std::vector<std::string> names;
        for (ThreadTag t : kThreadTags) names.push_back(ToString(t));
        std::string all;
        for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
        err_.Throw(value.offset,
                   "attribute 'launch_params' lists '" + Q(name) + "', which is no thread axis" +
                       detail::DidYouMean(name, names) +
                       ": expected thread axes separated by commas, each one of " + all);
      }
      axes.push_back(tag);
      start = comma + 1;
    }
    return axes;
  }

  ThreadTag Thread() {
    const Token& at = Cur();
    std::string s;
    if (Cur().kind == Tok::kIdent && Next().kind == Tok::kPunct && Next().text == ".") {
      s = Cur().text;
      Take();
      Take();
      if (Cur().kind == Tok::kIdent) {
        s += "." + Cur().text;
        Take();
      }
    }
    ThreadTag tag = ThreadTag::kNone;
    if (ParseThreadTag(s, &tag)) return tag;
    err_.Throw(at.offset,
               "expected a thread axis (blockIdx.x/y/z or threadIdx.x/y/z), got " + Describe(at));
  }

  // if (...) { } else if (...) { } ... else { }: the else-if chain is read in a loop and the
  // nested IfThenElse nodes made at the end, so a long chain needs no stack.
  [[gnu::noinline]] Stmt IfStmt() {
    std::vector<std::pair<Expr, Stmt>> arms;
    Stmt else_case;
    while (true) {
      Expr cond = IfCondition();
      Stmt then_case = Block();
      arms.emplace_back(cond, then_case);
      if (!IsKeyword("else")) {
        EndOfStatement();
        break;
      }
      Take();
      if (IsKeyword("if")) continue;
      if (!IsPunct("{")) Fail("expected '{' or 'if' after 'else'");
      else_case = Block();
      break;
    }
    return MakeIfChain(&arms, else_case);
  }
  [[gnu::noinline]] static Stmt MakeIfChain(std::vector<std::pair<Expr, Stmt>>* arms,
                                            Stmt else_case) {
    while (!arms->empty()) {
      else_case = IfThenElse(arms->back().first, arms->back().second, else_case);
      arms->pop_back();
    }
    return else_case;
  }

  // `if (cond)` up to the '{' of its block (not taken).
  [[gnu::noinline]] Expr IfCondition() {
    Take();  // if
    Expect("(", "after 'if'");
    ++nest_;
    Expr cond = Expression();
    Expect(")", "after the condition of 'if'");
    --nest_;
    if (!IsPunct("{")) Fail("expected '{' after the condition of 'if'");
    return cond;
  }

  // ---- expressions ----
  std::vector<Expr> Exprs() {
    std::vector<Expr> v;
    do {
      v.push_back(Expression());
    } while (TakePunct(","));
    return v;
  }

  Expr Expression() { return BinaryExpr(1); }

  // Operators of precedence >= `min_prec`, left-associative.
  Expr BinaryExpr(int min_prec) {
    Expr lhs = Unary();
    while (true) {
      if (Cur().kind != Tok::kPunct || (nest_ == 0 && Cur().bol)) return lhs;
      BinaryOp op = BinaryOp::kAdd;
      int prec = OperatorPrecedence(Cur().text, &op);
      if (prec < min_prec) return lhs;
      BinaryOp compound = BinaryOp::kAdd;
      if (CompoundOperator(&compound)) return lhs;  // `x += v`: the statement's, not an operator
      Take();
      Expr rhs = BinaryExpr(prec + 1);
      TypeLiterals(&lhs, &rhs);
      lhs = Binary(op, lhs, rhs);
    }
  }

  static int OperatorPrecedence(const std::string& s, BinaryOp* op) {
    static const struct {
      const char* text;
      BinaryOp op;
      int prec;
    } kOps[] = {{"||", BinaryOp::kOr, 1}, {"&&", BinaryOp::kAnd, 2}, {"==", BinaryOp::kEq, 3},
                {"!=", BinaryOp::kNe, 3}, {"<", BinaryOp::kLt, 4},   {"<=", BinaryOp::kLe, 4},
                {">", BinaryOp::kGt, 4},  {">=", BinaryOp::kGe, 4},  {"+", BinaryOp::kAdd, 5},
                {"-", BinaryOp::kSub, 5}, {"*", BinaryOp::kMul, 6},  {"/", BinaryOp::kDiv, 6},
                {"%", BinaryOp::kMod, 6}};
    for (const auto& o : kOps) {
      if (s == o.text) {
        *op = o.op;
        return o.prec;
      }
    }
    return 0;
  }

  // Prefix operators: `!e` is Not(e), `-e` is Neg(e) (0 - e in text of version 1), and `-`
  // written right before a number (or
  // before inf) is part of the literal. A run of them is read in a loop and applied from the
  // inside out, so `!-!-...x` needs no stack however long it is (its tree depth is bounded).
  Expr Unary() {
    if (!IsPunct("!") && !IsPunct("-")) return Primary();
    return PrefixRun();
  }
  [[gnu::noinline]] Expr PrefixRun() {
    std::vector<bool> nots;  // the run, outermost first: true for '!', false for '-'
    Expr e;
    while (true) {
      if (IsPunct("!")) {
        nots.push_back(true);
        Take();
        continue;
      }
      if (!IsPunct("-")) {
        e = Primary();
        break;
      }
      const Token& minus = Cur();
      Take();
      if (((Cur().kind == Tok::kInt || Cur().kind == Tok::kFloat) &&
           Cur().offset == minus.offset + 1) ||
          IsKeyword("inf") || IsKeyword("inff16") || IsKeyword("inff64")) {
        e = Number(true, minus);
        break;
      }
      nots.push_back(false);
    }
    for (size_t k = nots.size(); k-- > 0;) {
      if (nots[k]) {
        e = Not(e);
      } else if (version_ >= 2) {
        e = Neg(e);
      } else {
        e = Binary(BinaryOp::kSub, Const(e.dtype(), 0), e);
      }
    }
    return e;
  }

  [[gnu::noinline]] Expr Number(bool negative, const Token& at) {
    const Token t = Cur();
    Take();
    std::string text = t.text;
    DType type = t.kind == Tok::kInt ? Int32() : Float32();
    bool suffixed = false;
    static const struct {
      const char* suffix;
      DType type;
    } kSuffixes[] = {{"i8", Int(8)},     {"i16", Int(16)},   {"i32", Int(32)},  {"i64", Int(64)},
                     {"u8", UInt(8)},    {"u16", UInt(16)},  {"u32", UInt(32)}, {"u64", UInt(64)},
                     {"f16", Float(16)}, {"f32", Float(32)}, {"f64", Float(64)}};
    for (const auto& s : kSuffixes) {
      std::string suffix = s.suffix;
      if (text.size() > suffix.size() &&
          text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          !std::isalpha(static_cast<unsigned char>(text[text.size() - suffix.size() - 1]))) {
        type = s.type;
        text.resize(text.size() - suffix.size());
        suffixed = true;
        break;
      }
    }
    if (t.kind == Tok::kIdent) {  // inf, nan, inff16, nanf64, ...
      type = text.size() == 6 ? Float(std::atoi(text.c_str() + 4)) : Float32();
      text.resize(3);
      double v = text == "nan" ? std::numeric_limits<double>::quiet_NaN()
                               : std::numeric_limits<double>::infinity();
      return FloatImm(type, negative ? -v : v);
    }
    if (type.is_float()) {
      double v = std::strtod(text.c_str(), nullptr);
      Expr e = FloatImm(type, negative ? -v : v);
      if (!suffixed) untyped_[e.get()] = Literal{e, at.offset, t.text, negative, 0, v};
      return e;
    }
    errno = 0;
    unsigned long long mag = std::strtoull(text.c_str(), nullptr, 10);
    bool overflow = errno == ERANGE;
    if (!suffixed && !overflow) {
      // Without a suffix: int32 unless the context gives a type (TypeLiteral); the range is
      // checked once the type is known.
      Expr e =
          IntImm(type, negative ? static_cast<int64_t>(0ULL - mag) : static_cast<int64_t>(mag));
      untyped_[e.get()] = Literal{e, at.offset, t.text, negative, mag, 0};
      return e;
    }
    // The range of the literal's dtype.
    unsigned long long max_pos = type.is_uint()
                                     ? (type.bits == 64 ? ~0ULL : (1ULL << type.bits) - 1)
                                     : (1ULL << (type.bits - 1)) - 1;
    unsigned long long max_neg = type.is_uint() ? 0 : (1ULL << (type.bits - 1));
    if (overflow || mag > (negative ? max_neg : max_pos))
      err_.Throw(at.offset, "integer literal " + std::string(negative ? "-" : "") + Q(t.text) +
                                " does not fit in " + ToString(type) +
                                ": expected a value in its range (or another suffix)");
    int64_t v = negative ? static_cast<int64_t>(0ULL - mag) : static_cast<int64_t>(mag);
    return IntImm(type, v);
  }

  // Parentheses, an index and a call's arguments nest expressions (BinaryExpr -> Unary -> Primary
  // -> ...), so Primary keeps a small frame: names, calls and errors are parsed out of line.
  Expr Primary() {
    const Token& t = Cur();
    if (t.kind == Tok::kInt || t.kind == Tok::kFloat) return Number(false, t);
    if (IsPunct("(")) {
      Take();
      ++nest_;
      Expr e = Expression();
      Expect(")", "to close the parenthesis");
      --nest_;
      return e;
    }
    return NamedPrimary();
  }

  // A name: true/false, inf/nan, a call, a variable or a buffer's element.
  [[gnu::noinline]] Expr NamedPrimary() {
    const Token& t = Cur();
    if (t.kind != Tok::kIdent) Fail("expected an expression");
    const std::string& name = t.text;
    if (name == "true" || name == "false") {
      Take();
      return BoolImm(name == "true");
    }
    if (name == "inf" || name == "nan" || name == "inff16" || name == "inff64" ||
        name == "nanf16" || name == "nanf64")
      return Number(false, t);
    if (Next().kind == Tok::kPunct && Next().text == "(") return CallExpr();
    const Binding* b = Lookup(name);
    if (!b) Undefined(t);
    Take();
    if (b->buffer) return BufferUse(t, b->buffer);
    return b->var;
  }

  // After buffer `t`'s name: an element, `name[indices]`, or the whole buffer (call_packed's
  // argument).
  [[gnu::noinline]] Expr BufferUse(const Token& t, const Buffer& buffer) {
    if (IsPunct("[") && !(nest_ == 0 && Cur().bol)) {
      Take();
      ++nest_;
      std::vector<Expr> idx;
      if (!IsPunct("]")) idx = Exprs();
      ExpectLazy("]", [&] { return "after the indices of '" + Q(t.text) + "'"; });
      --nest_;
      return Load(buffer, idx);
    }
    if (!in_packed_args_) BufferAsValue(t);
    return Ref(buffer);
  }

  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void Undefined(const Token& t) {
    const std::string& name = t.text;
    if (detail::IsIdentifier(name)) {
      std::vector<std::string> in_scope;
      for (const auto& [known, binding] : names_) in_scope.push_back(known);
      err_.Throw(t.offset, "undefined variable '" + Q(name) +
                               "': expected a parameter, a loop variable, a let or an alloc "
                               "in scope" +
                               detail::DidYouMean(name, in_scope));
    }
    Fail("expected an expression");
  }

  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void BufferAsValue(const Token& t) {
    const std::string& name = t.text;
    err_.Throw(t.offset, "buffer '" + Q(name) + "' used as a value: expected an element (" +
                             Q(name) + "[i]); a whole buffer is only an argument of call_packed");
  }

  // name(args): a cast, select, ramp, broadcast, call_packed, floordiv/floormod/min/max, or a
  // math intrinsic. A call inside a call's arguments nests, so this frame holds only the
  // arguments: the call is made, and any error reported, out of line.
  [[gnu::noinline]] Expr CallExpr() {
    const Token& at = Cur();
    const std::string& name = at.text;
    if (name == "ramp" || name == "broadcast" || name == "call_packed") return SpecialCall();
    size_t arity = 0;
    if (!CallArity(name, &arity)) UnknownFunction(at, name);
    Take();
    Take();  // (
    ++nest_;
    std::vector<Expr> v;
    if (!IsPunct(")")) v = Exprs();
    if (v.size() != arity) WrongArgumentCount(at, arity, v.size());
    CloseCall(name);
    return MakeCall(name, &v);
  }

  // The number of arguments of a cast, select, floordiv/floormod/min/max or intrinsic `name`;
  // false for no such function.
  static bool CallArity(const std::string& name, size_t* arity) {
    DType t;
    if (ParseDType(name, &t)) {
      *arity = 1;
    } else if (name == "select") {
      *arity = 3;
    } else if (BinaryFunction(name, nullptr)) {
      *arity = 2;
    } else if (const Intrinsic* in = FindIntrinsic(name)) {
      *arity = static_cast<size_t>(in->arity);
    } else {
      return false;
    }
    return true;
  }

  // floordiv, floormod, min and max: their operator in `*op` (when not null).
  static bool BinaryFunction(const std::string& name, BinaryOp* op) {
    static const struct {
      const char* name;
      BinaryOp op;
    } kFns[] = {{"floordiv", BinaryOp::kFloorDiv},
                {"floormod", BinaryOp::kFloorMod},
                {"min", BinaryOp::kMin},
                {"max", BinaryOp::kMax}};
    for (const auto& f : kFns) {
      if (name == f.name) {
        if (op) *op = f.op;
        return true;
      }
    }
    return false;
  }

  void CloseCall(const std::string& name) {
    ExpectLazy(")", [&] { return "after the arguments of " + name; });
    --nest_;
  }

  // The call `name(v...)`, its arguments counted already.
  [[gnu::noinline]] Expr MakeCall(const std::string& name, std::vector<Expr>* args) {
    std::vector<Expr>& v = *args;
    DType cast_type;
    if (ParseDType(name, &cast_type))
      return Cast(cast_type, TypeLiteral(v[0], cast_type, /*cast=*/true));
    if (name == "select") {
      TypeLiterals(&v[1], &v[2]);
      return Select(v[0], v[1], v[2]);
    }
    BinaryOp op = BinaryOp::kAdd;
    if (BinaryFunction(name, &op)) {
      TypeLiterals(&v[0], &v[1]);
      return Binary(op, v[0], v[1]);
    }
    for (const Expr& typed : v) {  // an intrinsic
      if (untyped_.count(typed.get())) continue;
      for (Expr& x : v) x = TypeLiteral(x, typed.dtype());
      break;
    }
    return Call(name, v);
  }

  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void WrongArgumentCount(const Token& at, size_t n,
                                                                       size_t got) {
    const std::string& name = at.text;
    err_.Throw(at.offset, name + " takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") +
                              ", got " + std::to_string(got) + ": write " + Usage(name));
  }

  // ramp(base, stride, lanes), broadcast(value, lanes) and call_packed("name", args...): their
  // own forms.
  [[gnu::noinline]] Expr SpecialCall() {
    const Token& at = Cur();
    const std::string& name = at.text;
    Take();
    Take();  // (
    ++nest_;
    auto lanes = [&] {
      if (Cur().kind != Tok::kInt ||
          Cur().text.find_first_not_of("0123456789") != std::string::npos)
        Fail("expected the number of lanes (an integer without suffix)");
      long n = std::strtol(Cur().text.c_str(), nullptr, 10);
      if (n < 1 || n > 65535 || Cur().text.size() > 6)
        err_.Throw(Cur().offset, "expected lanes in [1, 65535], got " + Q(Cur().text));
      Take();
      return static_cast<int>(n);
    };
    if (name == "ramp") {
      Expr base = Expression();
      Expect(",", "after the base of ramp");
      Expr stride = Expression();
      Expect(",", "after the stride of ramp");
      int n = lanes();
      CloseCall(name);
      return Ramp(base, stride, n);
    }
    if (name == "broadcast") {
      Expr value = Expression();
      Expect(",", "after the value of broadcast");
      int n = lanes();
      CloseCall(name);
      return Broadcast(value, n);
    }
    if (Cur().kind != Tok::kString)
      Fail("expected the name of a global function as a string after 'call_packed('");
    std::string fn = Cur().text;
    Take();
    std::vector<Expr> v;
    in_packed_args_ = true;
    while (TakePunct(",")) v.push_back(Expression());
    in_packed_args_ = false;
    CloseCall(name);
    return CallPacked(fn, v);
  }

  [[noreturn]] [[gnu::noinline]] void UnknownFunction(const Token& at, const std::string& name) {
    std::vector<std::string> known = {"select",   "ramp",     "broadcast", "call_packed",
                                      "floordiv", "floormod", "min",       "max"};
    for (const Intrinsic& in : Intrinsics()) known.push_back(in.name);
    for (const char* t : {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                          "float16", "float32", "float64", "bool"})
      known.push_back(t);
    err_.Throw(at.offset, "unknown function '" + Q(name) +
                              "': expected a dtype cast (float32(x)), select, ramp, broadcast, "
                              "call_packed, floordiv, floormod, min, max or an intrinsic (exp, "
                              "log, sqrt, ...)" +
                              detail::DidYouMean(name, known));
  }

  // How a built-in function is called, for a wrong number of arguments.
  static std::string Usage(const std::string& name) {
    static const struct {
      const char* name;
      const char* usage;
    } kUsage[] = {{"select", "select(condition, value_if_true, value_if_false)"},
                  {"floordiv", "floordiv(a, b)"},
                  {"floormod", "floormod(a, b)"},
                  {"min", "min(a, b)"},
                  {"max", "max(a, b)"},
                  {"pow", "pow(x, y)"},
                  {"fma", "fma(a, b, c) (a * b + c, rounded once)"}};
    for (const auto& u : kUsage)
      if (name == u.name) return u.usage;
    DType t;
    if (ParseDType(name, &t)) return name + "(value)";
    return name + "(x)";
  }

  // ---- literals without a suffix ----
  // A literal written without a suffix takes its type from the context: the other operand of a
  // binary operator, min/max/select's other value, an intrinsic's typed argument, the buffer a
  // store writes, a let's type, a cast's type. Without one it is int32 or float32. It never
  // loses precision silently: a float literal becomes a constant of the context's float type
  // with the value of its digits, and an integer literal that does not fit its type is an error.
  struct Literal {
    Expr node;  // keeps the node (and so its address) alive while it is in untyped_
    size_t offset;
    std::string text;
    bool negative;
    unsigned long long mag;  // integers: the magnitude
    double value;            // floats: the magnitude as read
  };

  // `e` typed as `t` if it is a literal without a suffix that can take that type; else `e`.
  // A float literal takes a float type; an integer literal an integer type, and one that does
  // not fit it is an error, or a float type if it converts exactly, and one that does not is an
  // error naming its neighbours. An explicit cast types only float literals (float64(0.2) is
  // the float64 0.2); an integer in a cast stays int32 and converts as docs/ir.md says.
  Expr TypeLiteral(const Expr& e, DType t, bool cast = false) {
    auto it = untyped_.find(e.get());
    if (it == untyped_.end() || t.lanes != 1 || e.dtype() == t) return e;
    const Literal lit = it->second;
    const bool is_float_lit = e.kind() == ExprKind::kFloatImm;
    if (t.is_float()) {
      if (is_float_lit) {
        untyped_.erase(it);
        return FloatImm(t, lit.negative ? -lit.value : lit.value);
      }
      // An integer where a float is wanted (`y[i] = 0`, `1 - x`, `max(x, 0)`): that float, if
      // it converts exactly. Inside an explicit cast it stays int32 and converts as the cast
      // says (float32(16777217) rounds on purpose).
      if (cast) return e;
      std::string why;
      const std::string shown = (lit.negative ? "-" : "") + Q(lit.text);
      if (!detail::ExactFloat(lit.negative, lit.mag, t, &why))
        err_.Throw(lit.offset, "integer literal " + shown + ", where its context wants a " +
                                   ToString(t) + ", " + why +
                                   ": write one of them (as a float literal), or " + ToString(t) +
                                   "(" + shown + ") to round it on purpose");
      untyped_.erase(it);
      const double v = static_cast<double>(lit.mag);  // exact; -0 is the integer 0: +0.0
      return FloatImm(t, lit.negative && lit.mag != 0 ? -v : v);
    }
    if (!t.is_integer() || is_float_lit || cast) return e;
    const unsigned long long max_pos =
        t.is_uint() ? (t.bits == 64 ? ~0ULL : (1ULL << t.bits) - 1) : (1ULL << (t.bits - 1)) - 1;
    const unsigned long long max_neg = t.is_uint() ? 0 : (1ULL << (t.bits - 1));
    if (lit.mag > (lit.negative ? max_neg : max_pos)) {
      if (cast) return e;
      const std::string shown = (lit.negative ? "-" : "") + Q(lit.text);
      err_.Throw(lit.offset, "integer literal " + shown + " does not fit in " + ToString(t) +
                                 ", the type its context gives it: expected a value in [" +
                                 (t.is_uint() ? "0" : "-" + std::to_string(max_neg)) + ", " +
                                 std::to_string(max_pos) + "]; write another value, or " +
                                 ToString(t) + "(" + shown +
                                 "i64) to convert it on purpose (wrapping)");
    }
    untyped_.erase(it);
    return IntImm(
        t, lit.negative ? static_cast<int64_t>(0ULL - lit.mag) : static_cast<int64_t>(lit.mag));
  }

  // Two operands: a literal without a suffix takes the other's type.
  [[gnu::noinline]] void TypeLiterals(Expr* a, Expr* b) {
    const bool la = untyped_.count(a->get()) > 0, lb = untyped_.count(b->get()) > 0;
    if (la && !lb) *a = TypeLiteral(*a, b->dtype());
    if (lb && !la) *b = TypeLiteral(*b, a->dtype());
  }

  // At the end of a function: integer literals that took no type are int32 and must fit.
  void CheckUntypedLiterals() {
    for (auto& [node, lit] : untyped_) {
      (void)node;
      if (lit.node.kind() != ExprKind::kIntImm) continue;
      const unsigned long long limit = lit.negative ? (1ULL << 31) : (1ULL << 31) - 1;
      if (lit.mag > limit)
        err_.Throw(lit.offset, "integer literal " + std::string(lit.negative ? "-" : "") +
                                   Q(lit.text) +
                                   " does not fit in int32 (the type of an integer literal "
                                   "without a suffix, where nothing around it gives one): "
                                   "expected a value in [-2147483648, 2147483647], or a suffix "
                                   "(" +
                                   Q(lit.text) + "i64, " + Q(lit.text) + "u64)");
    }
    untyped_.clear();
  }

  std::vector<Token> toks_;
  const SourceError& err_;
  int version_;  // of the text: in version 1, `-x` is 0 - x
  size_t pos_ = 0;
  std::unordered_map<const ExprNode*, Literal> untyped_;
  int nest_ = 0;  // open ( and [: newlines do not end an expression inside them
  bool in_packed_args_ = false;
  // Names are never shadowed, so one map holds every name in scope; scopes_ lists the names each
  // open scope defined, to forget them when it closes (a run of 30,000 lets is 30,000 scopes).
  std::unordered_map<std::string, Binding> names_;
  std::vector<std::vector<std::string>> scopes_;
};

}  // namespace

IRModule Parse(std::string_view text, const std::string& source_name) {
  SourceError err(text, source_name);
  Lexer lexer(text, err);
  std::vector<Token> toks = lexer.Run();
  const int64_t depth = BracketDepth(toks, err);
  IRModule m;
  RunForDepth(depth, [&] { m = Parser(std::move(toks), err, lexer.version()).Module(); });
  return m;
}

}  // namespace ir
}  // namespace backplane
