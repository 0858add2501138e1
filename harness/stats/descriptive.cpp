// Descriptive statistics and the MLPerf / track-3 summary rules.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {

Summary summarize(std::span<const double> x) {
  detail::require_sample(x, 1, "summarize", "x");
  const auto n = static_cast<double>(x.size());
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  // Two-pass variance: the losses differ in the 4th decimal, so one-pass sums would cancel badly.
  double squares = 0.0;
  for (double v : x) squares += (v - mean) * (v - mean);
  const double sd = x.size() > 1 ? std::sqrt(squares / (n - 1.0)) : 0.0;

  std::vector<double> sorted(x.begin(), x.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 == 1 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
  return Summary{x.size(), mean, sd, sd / std::sqrt(n), median, sorted.front(), sorted.back()};
}

double olympic_mean(std::span<const double> x) {
  detail::require_sample(x, 3, "olympic_mean", "x");
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  const double total = std::accumulate(x.begin(), x.end(), 0.0) - *lo - *hi;
  return total / static_cast<double>(x.size() - 2);
}

bool track3_rule(std::span<const double> losses, double target, double margin) {
  detail::require_sample(losses, 1, "track3_rule", "losses");
  const Summary s = summarize(losses);
  return (target - s.mean) * std::sqrt(static_cast<double>(s.n)) >= margin;
}

}  // namespace gpt::harness::stats
