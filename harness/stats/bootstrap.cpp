// Percentile bootstrap for the ratio of two means (candidate time / baseline time).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {
namespace {

// Mean of a resample drawn with replacement. Indices come straight from the 64-bit stream (not
// std::uniform_int_distribution, whose algorithm differs between standard libraries) so a seed gives
// the same interval everywhere; the modulo bias is below n/2^64.
double resampled_mean(std::span<const double> x, std::mt19937_64& rng) {
  double total = 0.0;
  for (size_t i = 0; i < x.size(); ++i) total += x[rng() % x.size()];
  return total / static_cast<double>(x.size());
}

// Linear interpolation between order statistics (numpy.percentile's default).
double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

}  // namespace

Interval bootstrap_ratio_ci(std::span<const double> candidate, std::span<const double> baseline, double confidence,
                            size_t resamples, uint64_t seed) {
  detail::require_sample(candidate, 1, "bootstrap_ratio_ci", "candidate");
  detail::require_sample(baseline, 1, "bootstrap_ratio_ci", "baseline");
  detail::require_probability(confidence, "bootstrap_ratio_ci", "confidence");
  GPT_CHECK(resamples >= 2, "bootstrap_ratio_ci: resamples must be >= 2, got ", resamples);
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(resamples);
  for (size_t r = 0; r < resamples; ++r) {
    const double c = resampled_mean(candidate, rng);
    const double b = resampled_mean(baseline, rng);
    GPT_CHECK(b != 0.0, "bootstrap_ratio_ci: a baseline resample has mean 0; the ratio is undefined");
    ratios.push_back(c / b);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1.0 - confidence) / 2.0;
  return Interval{quantile_sorted(ratios, tail), quantile_sorted(ratios, 1.0 - tail)};
}

}  // namespace gpt::harness::stats
