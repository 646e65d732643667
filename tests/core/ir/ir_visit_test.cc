// SPDX-License-Identifier: Apache-2.0
// The passes' child visitor (core/ir/src/visit.hpp): on random trees of every node kind it
// reaches each child once and in the order of the text form, which the passes that report the
// first problem "in the order of its text" rely on.
#include <gtest/gtest.h>

#include <backplane/ir/text.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "visit.hpp"

using namespace backplane::ir;  // NOLINT(google-build-using-namespace): the builder reads best so

namespace {

// Random statements and expressions of every kind whose leaves are fresh variables u0, u1, ...
// (in no particular order of creation), so a walk's order can be read off the printed text.
class RandomTree {
 public:
  explicit RandomTree(unsigned seed) : rng_(seed) {}

  Expr E(int depth) {
    if (depth <= 0) return Leaf();
    switch (Pick(12)) {
      case 0:
        return E(depth - 1) + E(depth - 1);
      case 1:
        return Min(E(depth - 1), E(depth - 1));
      case 2:
        return Not(E(depth - 1) < E(depth - 1));
      case 3:
        return Neg(E(depth - 1));
      case 4:
        return Select(E(depth - 1) < E(depth - 1), E(depth - 1), E(depth - 1));
      case 5:
        return Cast(Int64(), E(depth - 1));
      case 6:
        return buf_({E(depth - 1), E(depth - 1)});
      case 7:
        return Call("pow", {Cast(Float32(), E(depth - 1)), Cast(Float32(), E(depth - 1))});
      case 8:
        return CallPacked("ext.f", {E(depth - 1), Ref(buf_), E(depth - 1)});
      case 9:
        return Ramp(E(depth - 1), E(depth - 1), 4);
      case 10:
        return Broadcast(E(depth - 1), 4);
      default:
        return Leaf();
    }
  }

  Stmt S(int depth) {
    if (depth <= 0) return Store(buf_, {E(1), E(1)}, E(1));
    const int d = depth - 1;
    switch (Pick(11)) {
      case 0:
        return For(Var("i" + std::to_string(next_++)), E(d), E(d), ForKind::kSerial, S(d));
      case 1:
        return For(Var("i" + std::to_string(next_++)), E(d), E(d), E(d), ForKind::kSerial, S(d));
      case 2:
        return IfThenElse(E(d) < E(d), S(d));
      case 3:
        return IfThenElse(E(d) < E(d), S(d), S(d));
      case 4:
        return LetStmt(Var("l" + std::to_string(next_++)), E(d), S(d));
      case 5: {
        Buffer w("w" + std::to_string(next_++), Int32(), {E(d), E(d)}, {E(d), E(d)});
        return Allocate(w, StorageScope::kLocal, S(d));
      }
      case 6:
        return Evaluate(E(d));
      case 7:
        return Atomic(AtomicOp::kAdd, buf_, {E(d), E(d)}, E(d));
      case 8:
        return Assign(Var("x"), E(d));
      case 9:
        return Seq({S(d), Barrier(), S(d), S(d)});
      default:
        return Store(buf_, {E(d), E(d)}, E(d));
    }
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<unsigned>(n)); }
  Expr Leaf() { return Var("u" + std::to_string(rng_() % 1000000)); }

  std::mt19937 rng_;
  Buffer buf_{"b", Int32(), {16, 16}};
  int next_ = 0;
};

bool IsLeaf(const Expr& e) { return e.kind() == ExprKind::kVar && e.As<VarNode>()->name[0] == 'u'; }

// The leaves in the order the visitor reaches them. Each leaf is a subtree's only way into the
// list, so a child missed, reached twice or out of order shows as a difference from the text.
void Walk(const Expr& e, std::vector<std::string>* leaves) {
  if (IsLeaf(e)) leaves->push_back(e.As<VarNode>()->name);
  backplane::ir::detail::ForEachChild(e, [&](const Expr& c) { Walk(c, leaves); });
}
void Walk(const Stmt& s, std::vector<std::string>* leaves) {
  backplane::ir::detail::ForEachChild(
      s, [&](const Expr& e) { Walk(e, leaves); }, [&](const Stmt& c) { Walk(c, leaves); });
}

// The leaves in the order the text form writes them.
std::vector<std::string> TextOrder(const std::string& text) {
  static const std::regex kLeaf(R"(\bu[0-9]+\b)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kLeaf);
       it != std::sregex_iterator(); ++it)
    out.push_back(it->str());
  return out;
}

// For 300 seeds: the leaves of `make(gen)` as the visitor reaches them are those of its text.
template <typename Make>
void ExpectTextOrder(Make make) {
  for (unsigned seed = 1; seed <= 300; ++seed) {
    RandomTree gen(seed);
    const auto tree = make(gen);
    std::vector<std::string> leaves;
    Walk(tree, &leaves);
    const std::string text = Print(tree);
    ASSERT_EQ(leaves, TextOrder(text)) << "seed " << seed << ":\n" << text;
  }
}

TEST(IrVisit, ExpressionChildrenInTextOrder) {
  ExpectTextOrder([](RandomTree& gen) { return gen.E(5); });
}

TEST(IrVisit, StatementChildrenInTextOrder) {
  ExpectTextOrder([](RandomTree& gen) { return gen.S(4); });
}

TEST(IrVisit, MapSeqKeepsAnUnchangedSequence) {
  RandomTree gen(7);
  const Stmt seq = Seq({gen.S(2), gen.S(2), gen.S(2)});
  ASSERT_EQ(seq.kind(), StmtKind::kSeq);
  const Stmt same = backplane::ir::detail::MapSeq(seq, [](const Stmt& c) { return c; });
  EXPECT_EQ(same.get(), seq.get());

  const Stmt replacement = Evaluate(Var("u1"));
  int calls = 0;
  const Stmt changed = backplane::ir::detail::MapSeq(
      seq, [&](const Stmt& c) { return ++calls == 2 ? replacement : c; });
  EXPECT_EQ(calls, 3);
  ASSERT_NE(changed.get(), seq.get());
  const auto& before = seq.As<SeqNode>()->seq;
  const auto& after = changed.As<SeqNode>()->seq;
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0].get(), before[0].get());
  EXPECT_EQ(after[1].get(), replacement.get());
  EXPECT_EQ(after[2].get(), before[2].get());
}

}  // namespace
