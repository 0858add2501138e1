// Benjamini–Hochberg false-discovery-rate control across the benchmarks of one nightly run.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {

std::vector<bool> benjamini_hochberg(std::span<const double> p_values, double q) {
  detail::require_probability(q, "benjamini_hochberg", "q");
  for (size_t i = 0; i < p_values.size(); ++i) {
    GPT_CHECK(p_values[i] >= 0.0 && p_values[i] <= 1.0, "benjamini_hochberg: p_values[", i, "] must be in [0, 1], got ",
              p_values[i]);
  }
  const size_t m = p_values.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p_values[a] < p_values[b]; });
  // Step-up: the largest rank k with p_(k) <= k·q/m; every hypothesis ranked at or below it is rejected.
  size_t cutoff = 0;
  for (size_t k = 1; k <= m; ++k) {
    if (p_values[order[k - 1]] <= static_cast<double>(k) * q / static_cast<double>(m)) cutoff = k;
  }
  std::vector<bool> rejected(m, false);
  for (size_t k = 0; k < cutoff; ++k) rejected[order[k]] = true;
  return rejected;
}

}  // namespace gpt::harness::stats
