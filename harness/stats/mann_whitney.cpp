// Mann–Whitney U, two-sided, following scipy.stats.mannwhitneyu (1.10) with method='auto':
// exact null distribution when min(n1, n2) <= 8 and no value is tied, else the normal approximation
// with tie correction and a 0.5 continuity correction.
#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {
namespace {

constexpr size_t kExactMaxSmallSample = 8;  // scipy: asymptotic only when both n1 > 8 and n2 > 8

struct Ranking {
  std::vector<double> ranks;  // average ranks (1-based) of the pooled sample, in input order
  double tie_term = 0.0;      // Σ (t³ − t) over groups of t tied values
  bool has_ties = false;
};

Ranking rank_pooled(std::span<const double> x, std::span<const double> y) {
  std::vector<double> pooled(x.begin(), x.end());
  pooled.insert(pooled.end(), y.begin(), y.end());
  std::vector<size_t> order(pooled.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pooled[a] < pooled[b]; });
  Ranking r;
  r.ranks.resize(pooled.size());
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;
    while (end < order.size() && pooled[order[end]] == pooled[order[start]]) ++end;
    const double average_rank = 0.5 * static_cast<double>(start + 1 + end);  // mean of start+1 .. end
    for (size_t k = start; k < end; ++k) r.ranks[order[k]] = average_rank;
    const auto t = static_cast<double>(end - start);
    r.tie_term += t * t * t - t;
    r.has_ties = r.has_ties || end - start > 1;
    start = end;
  }
  return r;
}

// P(U >= u) under H0 for sample sizes m (small) and n, without ties. Builds the distribution of U
// for m' <= m and n' <= n column by column with the recurrence
//   P_{m',n'}(k) = m'/(m'+n') · P_{m'-1,n'}(k − n') + n'/(m'+n') · P_{m',n'-1}(k),
// (is the largest pooled value from the first sample or not), working in probabilities so large n
// never overflows the binomial counts.
double exact_upper_tail(size_t m, size_t n, size_t u) {
  // column[i] = distribution of U for sizes (i, j) at the current j; sizes i*j+1.
  std::vector<std::vector<double>> column(m + 1, std::vector<double>{1.0});
  for (size_t j = 1; j <= n; ++j) {
    std::vector<std::vector<double>> next(m + 1);
    next[0] = {1.0};
    for (size_t i = 1; i <= m; ++i) {
      const double total = static_cast<double>(i + j);
      const double w_first = static_cast<double>(i) / total;   // largest value in sample 1: U += j
      const double w_second = static_cast<double>(j) / total;  // largest value in sample 2: U unchanged
      std::vector<double> dist(i * j + 1, 0.0);
      const std::vector<double>& without_first = next[i - 1];  // sizes (i-1, j)
      const std::vector<double>& without_second = column[i];   // sizes (i, j-1)
      for (size_t k = 0; k < without_first.size(); ++k) dist[k + j] += w_first * without_first[k];
      for (size_t k = 0; k < without_second.size(); ++k) dist[k] += w_second * without_second[k];
      next[i] = std::move(dist);
    }
    column = std::move(next);
  }
  const std::vector<double>& dist = column[m];
  // By symmetry P(U >= u) = P(U <= m·n − u); summing the lower tail from the small end like scipy.
  double tail = 0.0;
  for (size_t k = 0; k <= m * n - u; ++k) tail += dist[k];
  return tail;
}

}  // namespace

MannWhitneyResult mann_whitney_u(std::span<const double> x, std::span<const double> y) {
  detail::require_sample(x, 1, "mann_whitney_u", "x");
  detail::require_sample(y, 1, "mann_whitney_u", "y");
  const size_t n1 = x.size(), n2 = y.size();
  const Ranking ranking = rank_pooled(x, y);
  const double r1 = std::accumulate(ranking.ranks.begin(), ranking.ranks.begin() + static_cast<long>(n1), 0.0);
  const double u1 = r1 - static_cast<double>(n1 * (n1 + 1)) / 2.0;
  const double mn = static_cast<double>(n1 * n2);
  const double u = std::max(u1, mn - u1);  // two-sided: the larger tail statistic, doubled below

  const bool exact = std::min(n1, n2) <= kExactMaxSmallSample && !ranking.has_ties;
  double p = 0.0;
  if (exact) {
    // Without ties U1 is an integer; the smaller sample drives the recurrence's cost.
    const auto u_int = static_cast<size_t>(std::llround(u));
    p = 2.0 * exact_upper_tail(std::min(n1, n2), std::max(n1, n2), u_int);
  } else {
    const double n = static_cast<double>(n1 + n2);
    const double s = std::sqrt(mn / 12.0 * ((n + 1.0) - ranking.tie_term / (n * (n - 1.0))));
    if (s == 0.0) {
      p = 1.0;  // every value tied: no evidence of a shift
    } else {
      const double z = (u - mn / 2.0 - 0.5) / s;
      p = 2.0 * boost::math::cdf(boost::math::complement(boost::math::normal_distribution<double>(), z));
    }
  }
  return MannWhitneyResult{u1, std::clamp(p, 0.0, 1.0), exact ? "exact" : "asymptotic"};
}

}  // namespace gpt::harness::stats
