// SPDX-License-Identifier: Apache-2.0
// The one edit distance behind every "did you mean" of the project: the IR's parser (an
// unknown name), the core's target kinds and attributes, and `backplane info --prop`. Each
// caller keeps its own rule for which names are close enough and its own message; they share
// the measure. Header-only: the IR, the core and the programs all link the IR, which is the
// lowest layer, so this is the one place all of them reach.
#ifndef BACKPLANE_IR_EDIT_DISTANCE_HPP_
#define BACKPLANE_IR_EDIT_DISTANCE_HPP_

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {
namespace ir {

// What counts as one edit.
enum class Edits {
  kLevenshtein,  // insert, delete or replace a character
  kWithSwaps,    // those, or swap two neighbours (optimal string alignment): "alpah" is one
                 // edit from "alpha"
};

// The number of edits that turn `a` into `b`. Costs |a| * |b| steps: a caller that measures
// names of unbounded length caps them first.
inline size_t EditDistance(std::string_view a, std::string_view b,
                           Edits edits = Edits::kLevenshtein) {
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      if (edits == Edits::kWithSwaps && i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
          a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace ir
}  // namespace backplane

#endif  // BACKPLANE_IR_EDIT_DISTANCE_HPP_
