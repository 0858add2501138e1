// E-divisive means change-point detection (Matteson & James 2014, "A nonparametric approach for
// multiple change point analysis of multivariate data", exponent alpha = 1): the split of a segment
// that maximises the scaled energy distance between its two halves is proposed, a permutation test
// decides whether it is significant, and the search recurses into the pieces (hierarchical bisection).
// As in Hunter, each candidate splits a whole segment (the second half runs to the segment's end).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {
namespace {

struct Segment {
  size_t begin, end;  // half-open range of series indices
};

struct Split {
  size_t index = 0;  // first index of the right part (absolute)
  double q = -1.0;   // scaled energy statistic; -1 when the segment cannot be split
};

// Best split of v (one segment) with both parts at least min_size long. For a split at tau with
// left X (m values) and right Y (n values):
//   Q = m·n/(m+n) · ( 2/(m·n)·Σ|x−y| − Σ_{i<k}|x_i−x_k| / C(m,2) − Σ_{j<k}|y_j−y_k| / C(n,2) ).
// Within-part sums are grown incrementally and the cross sum is total − left − right: O(L²) overall.
Split best_split(std::span<const double> v, size_t offset, size_t min_size) {
  const size_t length = v.size();
  Split best;
  if (length < 2 * min_size) return best;
  std::vector<double> left_within(length + 1, 0.0), right_within(length + 1, 0.0);
  for (size_t tau = 1; tau <= length; ++tau) {  // left part [0, tau)
    double row = 0.0;
    for (size_t p = 0; p + 1 < tau; ++p) row += std::abs(v[p] - v[tau - 1]);
    left_within[tau] = left_within[tau - 1] + row;
  }
  for (size_t tau = length; tau-- > 0;) {  // right part [tau, length)
    double row = 0.0;
    for (size_t q = tau + 1; q < length; ++q) row += std::abs(v[tau] - v[q]);
    right_within[tau] = right_within[tau + 1] + row;
  }
  const double total = left_within[length];
  for (size_t tau = min_size; tau + min_size <= length; ++tau) {
    const auto m = static_cast<double>(tau);
    const auto n = static_cast<double>(length - tau);
    const double cross = total - left_within[tau] - right_within[tau];
    const double energy =
        2.0 * cross / (m * n) - left_within[tau] / (m * (m - 1.0) / 2.0) - right_within[tau] / (n * (n - 1.0) / 2.0);
    const double q = m * n / (m + n) * energy;
    if (q > best.q) best = Split{offset + tau, q};
  }
  return best;
}

Split best_over_segments(std::span<const double> series, const std::vector<Segment>& segments, size_t min_size) {
  Split best;
  for (const Segment& s : segments) {
    const Split candidate = best_split(series.subspan(s.begin, s.end - s.begin), s.begin, min_size);
    if (candidate.q > best.q) best = candidate;
  }
  return best;
}

// Fisher–Yates on the raw 64-bit stream (std::shuffle's draws differ between standard libraries, and a
// seed should give the same answer everywhere); modulo bias is below length/2^64.
void shuffle_range(std::vector<double>& values, Segment s, std::mt19937_64& rng) {
  for (size_t i = s.end - s.begin; i > 1; --i) {
    const size_t j = rng() % i;
    std::swap(values[s.begin + i - 1], values[s.begin + j]);
  }
}

}  // namespace

std::vector<ChangePoint> e_divisive(std::span<const double> series, double alpha, size_t permutations, uint64_t seed,
                                    size_t min_size) {
  detail::require_sample(series, 0, "e_divisive", "series");
  detail::require_probability(alpha, "e_divisive", "alpha");
  GPT_CHECK(min_size >= 2, "e_divisive: min_size must be >= 2 (within-part distances need pairs), got ", min_size);
  GPT_CHECK(1.0 / static_cast<double>(permutations + 1) < alpha, "e_divisive: ", permutations,
            " permutations can never give p < alpha = ", alpha, "; use at least ",
            static_cast<size_t>(std::ceil(1.0 / alpha)), " permutations");

  std::mt19937_64 rng(seed);
  std::vector<Segment> segments{{0, series.size()}};
  std::vector<ChangePoint> found;
  std::vector<double> shuffled(series.begin(), series.end());
  for (;;) {
    const Split observed = best_over_segments(series, segments, min_size);
    if (observed.q < 0.0) break;  // no segment is long enough to split
    // Permutation test: shuffle within every current segment (the accepted change points stay fixed)
    // and count how often the best split of the shuffled series is at least as strong.
    // Once `hopeless` shuffles are as strong, p = (count + 1)/(permutations + 1) can no longer fall below alpha:
    // the test stops there with the same answer (most splits of a quiet series are decided after a few dozen
    // shuffles instead of all of them; the nightly job runs this for every benchmark every night).
    const auto hopeless =
        static_cast<size_t>(std::ceil(alpha * static_cast<double>(permutations + 1))) - 1;  // count + 1 >= alpha·(P+1)
    size_t at_least_as_strong = 0;
    for (size_t r = 0; r < permutations && at_least_as_strong < hopeless; ++r) {
      std::copy(series.begin(), series.end(), shuffled.begin());
      for (const Segment& s : segments) shuffle_range(shuffled, s, rng);
      if (best_over_segments(shuffled, segments, min_size).q >= observed.q) ++at_least_as_strong;
    }
    const double p = static_cast<double>(at_least_as_strong + 1) / static_cast<double>(permutations + 1);
    if (!(p < alpha)) break;
    found.push_back(ChangePoint{observed.index, p});
    const auto containing = std::find_if(segments.begin(), segments.end(), [&](const Segment& s) {
      return s.begin < observed.index && observed.index < s.end;
    });
    const Segment whole = *containing;
    *containing = Segment{whole.begin, observed.index};
    segments.insert(containing + 1, Segment{observed.index, whole.end});
  }
  std::sort(found.begin(), found.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });
  return found;
}

}  // namespace gpt::harness::stats
