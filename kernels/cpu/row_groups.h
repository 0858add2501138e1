#pragma once
// Deterministic scatter-add support for the CPU references: tokens grouped by the table row they hit, each group
// in increasing token order, so one thread owns one row and sums its tokens in a fixed order.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "base/check.h"

namespace gpt::cpu {

// Throws unless every id lies in [0, rows).
inline void check_row_ids(const int32_t* ids, int64_t n, int64_t rows, const char* what) {
  for (int64_t t = 0; t < n; ++t) {
    GPT_CHECK(ids[t] >= 0 && ids[t] < rows, what, ": id ", ids[t], " at position ", t, " is outside [0, ", rows, ")");
  }
}

struct RowGroups {
  std::vector<int64_t> order;   // token indices sorted by (row, token)
  std::vector<int64_t> starts;  // group g = order[starts[g] .. starts[g+1])
};

inline RowGroups group_by_row(const int32_t* ids, int64_t n) {
  RowGroups g;
  g.order.resize(static_cast<size_t>(n));
  std::iota(g.order.begin(), g.order.end(), int64_t{0});
  std::stable_sort(g.order.begin(), g.order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || ids[g.order[i]] != ids[g.order[i - 1]]) g.starts.push_back(i);
  }
  g.starts.push_back(n);
  return g;
}

}  // namespace gpt::cpu
