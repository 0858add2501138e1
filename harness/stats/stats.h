#pragma once
// Statistics for the harness: record checks, branch-vs-baseline comparisons and nightly regression
// detection. Every test matches scipy 1.10 (tests/fixtures/stats_expected.json, written by
// tests/scripts/gen_stats_fixtures.py) to 1e-6 relative; distributions come from Boost.Math.
//
// Conventions: sample standard deviation uses ddof=1; p-values are in [0, 1]; inputs with NaN or too
// few values throw gpt::Error naming the function and what it expected.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpt::harness::stats {

// Descriptive statistics. std is the sample standard deviation (ddof=1, 0 when n == 1); sem = std/√n;
// median averages the two middle values for even n.
struct Summary {
  size_t n;
  double mean, std, sem, median, min, max;
};
Summary summarize(std::span<const double> x);

struct TTestResult {
  double t, df, p_value;
};

// One-sample t-test of H1: mean(x) < target (scipy.stats.ttest_1samp(x, target, alternative='less')).
// Needs n >= 2. Zero spread gives t = ±inf (p = 0 or 1), or t = 0 and p = 1 when mean == target.
TTestResult one_sample_t_less(std::span<const double> x, double target);

// One-sided upper confidence bound of the mean: mean + t.ppf(confidence, n-1)·sem. Needs n >= 2 and
// confidence in (0, 1).
double upper_confidence_bound(std::span<const double> x, double confidence);

// Smallest n >= 2 for which a sample with this mean and sd would give one_sample_t_less p < alpha;
// nullopt when mean >= target or no n up to 10^7 suffices.
std::optional<size_t> runs_needed(double mean, double sd, double target, double alpha);

// Welch's two-sided t-test (scipy.stats.ttest_ind(candidate, baseline, equal_var=False)); t > 0 means
// the candidate mean is larger; df is Welch–Satterthwaite. Needs n >= 2 in each arm. When both arms
// have zero spread: t = 0, p = 1 for equal means, else t = ±inf, p = 0 (df = 1, as scipy sets it).
TTestResult welch_t_test(std::span<const double> candidate, std::span<const double> baseline);

// The alternative hypothesis of a test about a shift: H1 mean(candidate) − mean(baseline) (or mean(x) − mu)
// is != 0, < 0 or > 0; scipy's `alternative` = 'two-sided' | 'less' | 'greater'.
enum class Alternative { two_sided, less, greater };
const char* to_string(Alternative alternative);

// One-sample t-test of H0 mean(x) = mu (scipy.stats.ttest_1samp(x, mu, alternative)). Needs n >= 2. Zero
// spread: t = 0, p = 1 when mean == mu, else t = ±inf with p 0 or 1 as the alternative says.
TTestResult one_sample_t_test(std::span<const double> x, double mu, Alternative alternative);

// Welch's test with a chosen alternative (same t and df as welch_t_test above).
TTestResult welch_t_test(std::span<const double> candidate, std::span<const double> baseline, Alternative alternative);

// Paired t-test on the differences candidate[i] − baseline[i] (scipy.stats.ttest_rel(candidate, baseline,
// alternative)); the samples must have the same length >= 2. Differences without spread follow
// one_sample_t_test: all equal to zero gives t = 0, p = 1.
TTestResult paired_t_test(std::span<const double> candidate, std::span<const double> baseline,
                          Alternative alternative = Alternative::two_sided);

// Wilcoxon signed-rank test on d = candidate − baseline, as scipy.stats.wilcoxon(candidate, baseline,
// alternative, correction=continuity_correction) with zero_method='wilcox': zero differences are dropped; the exact
// null distribution when at most 50 differences remain, none was zero and no |d| is tied, else the normal
// approximation with the tie correction Σ t(t² − 1)/48 of the variance ("asymptotic") and, when asked, the
// continuity correction (the statistic moved by 0.5 toward its mean). statistic is min(R+, R−) for two-sided,
// R+ otherwise.
// When every difference is zero there is no evidence of a shift: statistic 0, p = 1, method "all-zero".
struct WilcoxonResult {
  double statistic, p_value;
  size_t n_nonzero;
  std::string method;  // "exact" | "asymptotic" | "all-zero"
};
WilcoxonResult wilcoxon_signed_rank(std::span<const double> candidate, std::span<const double> baseline,
                                    Alternative alternative = Alternative::two_sided,
                                    bool continuity_correction = false);

// Two-sided Mann–Whitney U test with scipy.stats.mannwhitneyu's default method choice: "exact" when
// at least one sample has n <= 8 and there are no ties, otherwise "asymptotic" (normal approximation
// with tie correction and continuity correction). u is scipy's U1 (the statistic for x).
struct MannWhitneyResult {
  double u, p_value;
  std::string method;  // "exact" | "asymptotic"
};
MannWhitneyResult mann_whitney_u(std::span<const double> x, std::span<const double> y);

// Percentile bootstrap CI of mean(candidate)/mean(baseline): each arm resampled with replacement,
// `resamples` times, from a generator seeded with `seed` (same inputs + seed = same interval).
struct Interval {
  double low, high;
};
Interval bootstrap_ratio_ci(std::span<const double> candidate, std::span<const double> baseline, double confidence,
                            size_t resamples, uint64_t seed);

// MLPerf-style olympic mean: drop one minimum and one maximum, average the rest. Needs n >= 3.
double olympic_mean(std::span<const double> x);

// Track-3 style record rule: (target − mean)·√n >= margin.
bool track3_rule(std::span<const double> losses, double target = 3.28, double margin = 0.004);

// Benjamini–Hochberg step-up at false discovery rate q: result[i] is true when p_values[i] is rejected.
std::vector<bool> benjamini_hochberg(std::span<const double> p_values, double q);

// E-divisive means change points (Matteson & James 2014, exponent 1) with hierarchical bisection and a
// permutation significance test, as the Hunter regression tool uses it. index is the first position
// of the new segment; p_value is the permutation p of that split. Returned sorted by index; only
// splits with p < alpha are kept; each segment has at least min_size points.
struct ChangePoint {
  size_t index;
  double p_value;
};
std::vector<ChangePoint> e_divisive(std::span<const double> series, double alpha, size_t permutations, uint64_t seed,
                                    size_t min_size = 3);

}  // namespace gpt::harness::stats
