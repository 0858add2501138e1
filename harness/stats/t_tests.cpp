// Student t procedures: the one-sided record test, its confidence bound and sample-size planning, the
// one-sample, Welch and paired tests with a chosen alternative for comparisons. p-values follow scipy's _ttest_finish
// (stdtr of t).
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "harness/stats/stats.h"
#include "harness/stats/validate.h"

namespace gpt::harness::stats {
namespace {

// P(T <= t) for T ~ Student t with df degrees of freedom, including t = ±inf.
double student_cdf(double t, double df) {
  if (std::isinf(t)) return t < 0 ? 0.0 : 1.0;
  return boost::math::cdf(boost::math::students_t_distribution<double>(df), t);
}

TTestResult t_less(double mean, double sd, size_t n, double target) {
  const double df = static_cast<double>(n) - 1.0;
  const double diff = mean - target;
  if (sd == 0.0) {
    // No spread: the evidence is certain either way (scipy would answer NaN for diff == 0).
    if (diff == 0.0) return TTestResult{0.0, df, 1.0};
    const double t = diff < 0 ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return TTestResult{t, df, diff < 0 ? 0.0 : 1.0};
  }
  const double t = diff / (sd / std::sqrt(static_cast<double>(n)));
  return TTestResult{t, df, student_cdf(t, df)};
}

// The p-value of t under H1 `alternative` (scipy's _ttest_finish).
double p_from_t(double t, double df, Alternative alternative) {
  switch (alternative) {
    case Alternative::less:
      return student_cdf(t, df);
    case Alternative::greater:
      return student_cdf(-t, df);
    case Alternative::two_sided:
      break;
  }
  return 2.0 * student_cdf(-std::abs(t), df);
}

// A test whose samples have no spread: the sign of the difference is certain (scipy would answer NaN for a
// zero difference; no difference is no evidence, p = 1).
TTestResult no_spread(double diff, double df, Alternative alternative) {
  if (diff == 0.0) return TTestResult{0.0, df, 1.0};
  const double t = diff < 0 ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  return TTestResult{t, df, p_from_t(t, df, alternative)};
}

}  // namespace

TTestResult one_sample_t_less(std::span<const double> x, double target) {
  detail::require_sample(x, 2, "one_sample_t_less", "x");
  GPT_CHECK(std::isfinite(target), "one_sample_t_less: target must be finite, got ", target);
  const Summary s = summarize(x);
  return t_less(s.mean, s.std, s.n, target);
}

double upper_confidence_bound(std::span<const double> x, double confidence) {
  detail::require_sample(x, 2, "upper_confidence_bound", "x");
  detail::require_probability(confidence, "upper_confidence_bound", "confidence");
  const Summary s = summarize(x);
  const boost::math::students_t_distribution<double> dist(static_cast<double>(s.n) - 1.0);
  return s.mean + boost::math::quantile(dist, confidence) * s.sem;
}

std::optional<size_t> runs_needed(double mean, double sd, double target, double alpha) {
  GPT_CHECK(std::isfinite(mean) && std::isfinite(target), "runs_needed: mean and target must be finite, got ", mean,
            " and ", target);
  GPT_CHECK(std::isfinite(sd) && sd >= 0.0, "runs_needed: sd must be finite and >= 0, got ", sd);
  detail::require_probability(alpha, "runs_needed", "alpha");
  if (mean >= target) return std::nullopt;
  const auto passes = [&](size_t n) { return t_less(mean, sd, n, target).p_value < alpha; };
  // p falls monotonically with n (|t| grows like √n and the tails thin), so bracket then bisect.
  constexpr size_t kMaxRuns = 10'000'000;
  size_t hi = 2;
  while (!passes(hi)) {
    if (hi >= kMaxRuns) return std::nullopt;
    hi = std::min(hi * 2, kMaxRuns);
  }
  size_t lo = hi / 2;  // fails (or is below 2)
  if (lo < 2) return hi;
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (passes(mid) ? hi : lo) = mid;
  }
  return hi;
}

const char* to_string(Alternative alternative) {
  switch (alternative) {
    case Alternative::less:
      return "less";
    case Alternative::greater:
      return "greater";
    case Alternative::two_sided:
      break;
  }
  return "two-sided";
}

TTestResult welch_t_test(std::span<const double> candidate, std::span<const double> baseline) {
  return welch_t_test(candidate, baseline, Alternative::two_sided);
}

TTestResult welch_t_test(std::span<const double> candidate, std::span<const double> baseline, Alternative alternative) {
  detail::require_sample(candidate, 2, "welch_t_test", "candidate");
  detail::require_sample(baseline, 2, "welch_t_test", "baseline");
  const Summary c = summarize(candidate);
  const Summary b = summarize(baseline);
  const double vn_c = c.std * c.std / static_cast<double>(c.n);
  const double vn_b = b.std * b.std / static_cast<double>(b.n);
  const double diff = c.mean - b.mean;
  if (vn_c + vn_b == 0.0) return no_spread(diff, 1.0, alternative);
  const double df = (vn_c + vn_b) * (vn_c + vn_b) /
                    (vn_c * vn_c / (static_cast<double>(c.n) - 1.0) + vn_b * vn_b / (static_cast<double>(b.n) - 1.0));
  const double t = diff / std::sqrt(vn_c + vn_b);
  return TTestResult{t, df, p_from_t(t, df, alternative)};
}

TTestResult one_sample_t_test(std::span<const double> x, double mu, Alternative alternative) {
  detail::require_sample(x, 2, "one_sample_t_test", "x");
  GPT_CHECK(std::isfinite(mu), "one_sample_t_test: mu must be finite, got ", mu);
  const Summary s = summarize(x);
  const double df = static_cast<double>(s.n) - 1.0;
  if (s.std == 0.0) return no_spread(s.mean - mu, df, alternative);
  const double t = (s.mean - mu) / s.sem;
  return TTestResult{t, df, p_from_t(t, df, alternative)};
}

TTestResult paired_t_test(std::span<const double> candidate, std::span<const double> baseline,
                          Alternative alternative) {
  GPT_CHECK(candidate.size() == baseline.size(), "paired_t_test: the samples must pair up, got ", candidate.size(),
            " candidate and ", baseline.size(), " baseline values");
  detail::require_sample(candidate, 2, "paired_t_test", "candidate");
  detail::require_sample(baseline, 2, "paired_t_test", "baseline");
  std::vector<double> differences(candidate.size());
  for (size_t i = 0; i < candidate.size(); ++i) differences[i] = candidate[i] - baseline[i];
  return one_sample_t_test(differences, 0.0, alternative);
}

}  // namespace gpt::harness::stats
