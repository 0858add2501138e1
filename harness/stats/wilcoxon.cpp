// Wilcoxon signed-rank test on paired differences (see stats.h for the method choice).
#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {
namespace {

constexpr size_t kExactMaxPairs = 50;  // scipy: the exact table up to 50 non-zero differences

// Number of sign patterns of ranks 1..n with R+ = k, for k = 0..n(n+1)/2 (the null distribution times 2^n).
// Counts stay below 2^50 and are exact in doubles.
std::vector<double> signed_rank_counts(size_t n) {
  const size_t max_sum = n * (n + 1) / 2;
  std::vector<double> counts(max_sum + 1, 0.0);
  counts[0] = 1.0;
  for (size_t rank = 1; rank <= n; ++rank) {
    for (size_t k = rank * (rank + 1) / 2; k >= rank; --k) counts[k] += counts[k - rank];
  }
  return counts;
}

}  // namespace

WilcoxonResult wilcoxon_signed_rank(std::span<const double> candidate, std::span<const double> baseline,
                                    Alternative alternative, bool continuity_correction) {
  GPT_CHECK(candidate.size() == baseline.size(), "wilcoxon_signed_rank: the samples must pair up, got ",
            candidate.size(), " candidate and ", baseline.size(), " baseline values");
  detail::require_sample(candidate, 1, "wilcoxon_signed_rank", "candidate");
  detail::require_sample(baseline, 1, "wilcoxon_signed_rank", "baseline");
  std::vector<double> d;
  for (size_t i = 0; i < candidate.size(); ++i) {
    if (candidate[i] != baseline[i]) d.push_back(candidate[i] - baseline[i]);
  }
  const bool had_zero = d.size() < candidate.size();
  if (d.empty()) return WilcoxonResult{0.0, 1.0, 0, "all-zero"};

  // Average ranks of |d| (1-based), with the tie term Σ t(t² − 1) of the variance correction.
  const size_t n = d.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::abs(d[a]) < std::abs(d[b]); });
  std::vector<double> rank(n);
  double tie_term = 0.0;
  bool ties = false;
  for (size_t start = 0; start < n;) {
    size_t end = start + 1;
    while (end < n && std::abs(d[order[end]]) == std::abs(d[order[start]])) ++end;
    for (size_t k = start; k < end; ++k) rank[order[k]] = 0.5 * static_cast<double>(start + 1 + end);
    const auto t = static_cast<double>(end - start);
    tie_term += t * (t * t - 1.0);
    ties = ties || end - start > 1;
    start = end;
  }
  double r_plus = 0.0, r_minus = 0.0;
  for (size_t i = 0; i < n; ++i) (d[i] > 0 ? r_plus : r_minus) += rank[i];
  const double statistic = alternative == Alternative::two_sided ? std::min(r_plus, r_minus) : r_plus;

  const auto nn = static_cast<double>(n);
  double p = 1.0;
  if (n <= kExactMaxPairs && !had_zero && !ties) {
    const std::vector<double> counts = signed_rank_counts(n);
    const auto k = static_cast<size_t>(std::llround(r_plus));
    const double total = std::ldexp(1.0, static_cast<int>(n));
    const double p_less = std::accumulate(counts.begin(), counts.begin() + static_cast<long>(k) + 1, 0.0) / total;
    const double p_greater = std::accumulate(counts.begin() + static_cast<long>(k), counts.end(), 0.0) / total;
    if (alternative == Alternative::less) {
      p = p_less;
    } else if (alternative == Alternative::greater) {
      p = p_greater;
    } else {
      p = k == (counts.size() - 1) / 2 ? 1.0 : 2.0 * std::min(p_less, p_greater);  // the centre: scipy's 1
    }
    return WilcoxonResult{statistic, std::clamp(p, 0.0, 1.0), n, "exact"};
  }
  const double mean = nn * (nn + 1.0) / 4.0;
  const double se = std::sqrt((nn * (nn + 1.0) * (2.0 * nn + 1.0) - 0.5 * tie_term) / 24.0);
  if (se > 0.0) {
    // scipy's continuity correction: 0.5 toward the mean (two-sided: by the sign of T − mean; "greater" tests the
    // upper tail, so its statistic moves down, "less" up).
    double shift = 0.0;
    if (continuity_correction) {
      if (alternative == Alternative::two_sided) {
        shift = statistic > mean ? 0.5 : (statistic < mean ? -0.5 : 0.0);
      } else {
        shift = alternative == Alternative::greater ? 0.5 : -0.5;
      }
    }
    const double z = (statistic - mean - shift) / se;
    const boost::math::normal_distribution<double> normal;
    if (alternative == Alternative::less) {
      p = boost::math::cdf(normal, z);
    } else if (alternative == Alternative::greater) {
      p = boost::math::cdf(boost::math::complement(normal, z));
    } else {
      p = 2.0 * boost::math::cdf(boost::math::complement(normal, std::abs(z)));
    }
  }
  return WilcoxonResult{statistic, std::clamp(p, 0.0, 1.0), n, "asymptotic"};
}

}  // namespace gpt::harness::stats
