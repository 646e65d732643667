// SPDX-License-Identifier: Apache-2.0
// Tree depth, stack for deep walks and tree destruction without recursion (limits.hpp).
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/limits.hpp>
#include <backplane/ir/text.hpp>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "deep.hpp"
#include "visit.hpp"

namespace backplane {
namespace ir {

// ---- freeing without recursion ----------------------------------------------------------------

namespace detail {
namespace {

struct Pending {
  std::vector<Expr> exprs;
  std::vector<Stmt> stmts;
  bool draining = false;
  ~Pending();
};
// Set when this thread's Pending is gone (thread exit): nodes freed after that (by destructors
// of other thread-locals or statics) are freed the ordinary way.
thread_local bool t_pending_gone = false;
thread_local Pending t_pending;
Pending::~Pending() { t_pending_gone = true; }

// Frees what was handed over, each node's children joining the queue instead of being freed
// inside their parent's destructor.
void Drain(Pending& p) noexcept {
  p.draining = true;
  while (!p.exprs.empty() || !p.stmts.empty()) {
    if (!p.exprs.empty()) {
      Expr e = std::move(p.exprs.back());
      p.exprs.pop_back();
    } else {
      Stmt s = std::move(p.stmts.back());
      p.stmts.pop_back();
    }
  }
  p.draining = false;
}

template <typename T>
void Take(std::vector<T> Pending::*queue, T& handle) noexcept {
  if (!handle) return;
  if (t_pending_gone) {
    T dropped = std::move(handle);
    return;
  }
  Pending& p = t_pending;
  (p.*queue).push_back(std::move(handle));
  if (!p.draining) Drain(p);
}

}  // namespace

void ReleaseLater(Expr& e) noexcept { Take(&Pending::exprs, e); }
void ReleaseLater(std::vector<Expr>& v) noexcept {
  for (Expr& e : v) Take(&Pending::exprs, e);
}
void ReleaseLater(Stmt& s) noexcept { Take(&Pending::stmts, s); }
void ReleaseLater(std::vector<Stmt>& v) noexcept {
  for (Stmt& s : v) Take(&Pending::stmts, s);
}

}  // namespace detail

// ---- depth ------------------------------------------------------------------------------------

namespace {

// A node of either kind.
struct Item {
  const void* node;
  bool is_stmt;
};

void AddExpr(const Expr& e, std::vector<Item>* out) {
  if (e) out->push_back({e.get(), false});
}
void AddStmt(const Stmt& s, std::vector<Item>* out) {
  if (s) out->push_back({s.get(), true});
}

void Children(const Item& it, std::vector<Item>* out) {
  auto add_expr = [out](const Expr& e) { AddExpr(e, out); };
  if (!it.is_stmt) {
    detail::ForEachChild(*static_cast<const ExprNode*>(it.node), add_expr);
    return;
  }
  detail::ForEachChild(*static_cast<const StmtNode*>(it.node), add_expr,
                       [out](const Stmt& s) { AddStmt(s, out); });
}

// A node without children: its height is 1, and it is not remembered (most nodes of a chain
// are its leaves).
bool IsLeaf(const Item& it) {
  if (it.is_stmt) return static_cast<const StmtNode*>(it.node)->kind == StmtKind::kBarrier;
  switch (static_cast<const ExprNode*>(it.node)->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
    case ExprKind::kBufferRef:
      return true;
    default:
      return false;
  }
}

// Heights by node address, in one array with open addressing (linear probing), grown at half
// full. Every public entry point measures its tree, so this is on the path of each; a
// std::unordered_map allocated a node per entry and was most of the time a long chain took
// to parse, print, verify and run.
class HeightMemo {
 public:
  // The height remembered for `node`, or 0.
  int64_t Find(const void* node) const {
    if (slots_.empty()) return 0;
    for (size_t i = Index(node);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].node == node) return slots_[i].height;
      if (slots_[i].node == nullptr) return 0;
    }
  }
  void Insert(const void* node, int64_t height) {
    if ((used_ + 1) * 2 > slots_.size()) Grow();
    size_t i = Index(node);
    while (slots_[i].node != nullptr && slots_[i].node != node) i = (i + 1) & (slots_.size() - 1);
    if (slots_[i].node == nullptr) ++used_;
    slots_[i] = Slot{node, height};
  }

 private:
  struct Slot {
    const void* node = nullptr;
    int64_t height = 0;
  };
  // Fibonacci hashing: the top bits of the address times 2^64 / phi.
  size_t Index(const void* node) const {
    const uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(node));
    return static_cast<size_t>((h * 0x9E3779B97F4A7C15ull) >> (64 - bits_));
  }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    bits_ = old.empty() ? 6 : bits_ + 1;
    slots_.assign(size_t{1} << bits_, Slot{});
    used_ = 0;
    for (const Slot& s : old)
      if (s.node != nullptr) Insert(s.node, s.height);
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
  int bits_ = 0;
};

// Height of the tree under `root`, post-order with an explicit stack; heights are remembered
// per node so a shared subtree is measured once.
int64_t Height(Item root, HeightMemo* memo) {
  if (IsLeaf(root)) return 1;
  if (const int64_t h = memo->Find(root.node)) return h;
  struct Frame {
    Item item;
    bool expanded;
  };
  std::vector<Frame> stack{{root, false}};
  std::vector<Item> kids;
  while (!stack.empty()) {
    const Item item = stack.back().item;
    if (!stack.back().expanded) {
      if (memo->Find(item.node) != 0) {  // a shared node, reached again
        stack.pop_back();
        continue;
      }
      stack.back().expanded = true;
      kids.clear();
      Children(item, &kids);
      for (const Item& k : kids)
        if (!IsLeaf(k) && memo->Find(k.node) == 0) stack.push_back({k, false});
      continue;
    }
    stack.pop_back();
    kids.clear();
    Children(item, &kids);
    int64_t h = 0;
    for (const Item& k : kids) h = std::max(h, IsLeaf(k) ? 1 : memo->Find(k.node));
    memo->Insert(item.node, h + 1);
  }
  return memo->Find(root.node);
}

int64_t FuncDepth(const PrimFunc& f, HeightMemo* memo) {
  int64_t d = 0;
  if (f.body) d = Height({f.body.get(), true}, memo);
  for (const Param& p : f.params) {
    if (!p.is_buffer()) continue;
    for (const Expr& e : p.buffer()->shape)
      if (e) d = std::max(d, Height({e.get(), false}, memo));
    for (const Expr& e : p.buffer()->strides)
      if (e) d = std::max(d, Height({e.get(), false}, memo));
  }
  return d;
}

}  // namespace

int64_t TreeDepth(const Expr& e) {
  if (!e) return 0;
  HeightMemo memo;
  return Height({e.get(), false}, &memo);
}
int64_t TreeDepth(const Stmt& s) {
  if (!s) return 0;
  HeightMemo memo;
  return Height({s.get(), true}, &memo);
}
int64_t TreeDepth(const PrimFunc& f) {
  HeightMemo memo;
  return FuncDepth(f, &memo);
}
int64_t TreeDepth(const IRModule& m) {
  HeightMemo memo;
  int64_t d = 0;
  for (const PrimFunc& f : m.functions()) d = std::max(d, FuncDepth(f, &memo));
  return d;
}

bool AnyExpr(const Expr& e, const std::function<bool(const Expr&)>& pred) {
  std::vector<Item> todo, kids;
  std::unordered_set<const void*> seen;
  AddExpr(e, &todo);
  while (!todo.empty()) {
    const Item it = todo.back();
    todo.pop_back();
    if (!seen.insert(it.node).second) continue;
    // A handle that shares the node (no ownership taken: the tree outlives the walk).
    const auto* node = static_cast<const ExprNode*>(it.node);
    if (pred(Expr(std::shared_ptr<const ExprNode>(std::shared_ptr<const ExprNode>(), node))))
      return true;
    kids.clear();
    Children(it, &kids);
    todo.insert(todo.end(), kids.begin(), kids.end());
  }
  return false;
}

namespace detail {
bool CallsPacked(const Expr& e) {
  return AnyExpr(e, [](const Expr& x) { return x.kind() == ExprKind::kCallPacked; });
}
}  // namespace detail

int TextVersion(const IRModule& m) {
  int version = 1;
  std::vector<Item> todo, kids;
  std::unordered_set<const void*> seen;
  for (const PrimFunc& f : m.functions()) {
    if (f.body) todo.push_back({f.body.get(), true});
    for (const Param& p : f.params) {
      if (!p.is_buffer()) continue;
      for (const Expr& e : p.buffer()->shape) AddExpr(e, &todo);
      for (const Expr& e : p.buffer()->strides) AddExpr(e, &todo);
    }
  }
  while (!todo.empty()) {
    const Item it = todo.back();
    todo.pop_back();
    if (!seen.insert(it.node).second) continue;
    if (it.is_stmt) {
      const auto* n = static_cast<const StmtNode*>(it.node);
      if (n->kind == StmtKind::kAssign || n->kind == StmtKind::kAtomic) version = 2;
      if (n->kind == StmtKind::kLetStmt && static_cast<const LetStmtNode*>(n)->assignable)
        version = 2;
      if (n->kind == StmtKind::kFor) {
        const auto* f = static_cast<const ForNode*>(n);
        if (f->step || f->schedule != ScheduleKind::kDefault || f->chunk != 0) version = 2;
      }
    } else {
      const auto* n = static_cast<const ExprNode*>(it.node);
      if (n->kind == ExprKind::kNeg) version = 2;
      // C's remainder `%` (version 3): the newest there is.
      if (n->kind == ExprKind::kBinary && static_cast<const BinaryNode*>(n)->op == BinaryOp::kMod)
        return 3;
    }
    kids.clear();
    Children(it, &kids);
    todo.insert(todo.end(), kids.begin(), kids.end());
  }
  return version;
}

// ---- stack ------------------------------------------------------------------------------------

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kFrameScale = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr size_t kFrameScale = 4;
#else
constexpr size_t kFrameScale = 1;
#endif
#else
constexpr size_t kFrameScale = 1;
#endif
// A level of the deepest walker (a code generator's expression emitter, which builds strings on
// the way down) measured at under 1 KiB; 4 KiB leaves room for walkers not measured.
constexpr size_t kStackBytesPerLevel = 4096;
constexpr size_t kStackBase = size_t{1} << 20;

// Bytes of stack left below the caller on this thread; 0 if unknown.
size_t StackLeft() {
  // One thread-local object (one TLS lookup per call in a plugin that links this library).
  struct Low {
    bool known = false;
    char* low = nullptr;
  };
  thread_local Low t;
  if (!t.known) {
    t.known = true;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) t.low = static_cast<char*>(addr);
      pthread_attr_destroy(&attr);
    }
  }
  char* here = static_cast<char*>(__builtin_frame_address(0));
  if (t.low == nullptr || here <= t.low) return 0;
  return static_cast<size_t>(here - t.low);
}

size_t PageSize() {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<size_t>(p) : 4096;
}

}  // namespace

size_t StackBytesForDepth(int64_t depth) {
  if (depth < 0) depth = 0;
  return kStackBase + static_cast<size_t>(depth) * kStackBytesPerLevel * kFrameScale;
}

struct StackThread::State {
  std::function<void()> fn;
  void* map = nullptr;
  size_t map_size = 0;
  pthread_t thread{};
  bool joined = false;

  static void* Main(void* arg) {
    static_cast<State*>(arg)->fn();
    return nullptr;
  }
};

StackThread::StackThread(size_t bytes, std::function<void()> fn) {
  auto* st = new State;
  st->fn = std::move(fn);
  const size_t page = PageSize();
  bytes = (std::max(bytes, static_cast<size_t>(PTHREAD_STACK_MIN) + page) + page - 1) / page * page;
  st->map_size = bytes + page;  // one guard page below the stack
  st->map = mmap(nullptr, st->map_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  std::string why;
  if (st->map == MAP_FAILED) {
    why = std::strerror(errno);
  } else {
    mprotect(st->map, page, PROT_NONE);
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) rc = pthread_attr_setstack(&attr, static_cast<char*>(st->map) + page, bytes);
    if (rc == 0) rc = pthread_create(&st->thread, &attr, &State::Main, st);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      why = std::strerror(rc);
      munmap(st->map, st->map_size);
    }
  }
  if (!why.empty()) {
    delete st;
    throw Error(ErrorKind::kValue, "cannot start a thread with " + std::to_string(bytes >> 20) +
                                       " MiB of stack for a deep IR tree: " + why +
                                       "; make the tree shallower (docs/ir.md, \"Limits\")");
  }
  state_ = st;
}

StackThread::StackThread(StackThread&& other) noexcept : state_(other.state_) {
  other.state_ = nullptr;
}

void StackThread::Join() {
  if (state_ == nullptr || state_->joined) return;
  pthread_join(state_->thread, nullptr);
  state_->joined = true;
  munmap(state_->map, state_->map_size);
}

StackThread::~StackThread() {
  Join();
  delete state_;
}

bool HasStack(size_t bytes) { return StackLeft() >= bytes; }

void RunWithStack(size_t bytes, const std::function<void()>& fn) {
  if (StackLeft() >= bytes) {
    fn();
    return;
  }
  std::exception_ptr error;
  {
    StackThread t(bytes, [&] {
      try {
        fn();
      } catch (...) {
        error = std::current_exception();
      }
    });
  }
  if (error) std::rethrow_exception(error);
}

void RunForDepth(int64_t depth, const std::function<void()>& fn) {
  RunWithStack(StackBytesForDepth(depth), fn);
}

}  // namespace ir
}  // namespace backplane
