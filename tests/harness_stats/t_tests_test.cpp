// Student t procedures against values computed with scipy 1.10 (see tests/scripts/gen_stats_fixtures.py
// for the bulk cases) and against the published record figure.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/stats/stats.h"
#include "base/check.h"

namespace gpt::harness::stats {
namespace {

void expect_rel(double actual, double expected, double rel = 1e-6) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected)) << "expected " << expected;
}

TEST(Summarize, SampleStdUsesDdofOne) {
  const std::vector<double> x{1.0, 2.0, 3.0, 4.0};
  const Summary s = summarize(x);
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  expect_rel(s.std, std::sqrt(5.0 / 3.0), 1e-14);
  expect_rel(s.sem, std::sqrt(5.0 / 3.0) / 2.0, 1e-14);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
}

TEST(Summarize, SingleValueHasZeroSpreadAndOddMedian) {
  const std::vector<double> one{7.0};
  EXPECT_DOUBLE_EQ(summarize(one).std, 0.0);
  const std::vector<double> odd{5.0, 1.0, 3.0};
  EXPECT_DOUBLE_EQ(summarize(odd).median, 3.0);
}

TEST(Summarize, RejectsEmptyAndNonFinite) {
  EXPECT_THROW(summarize(std::vector<double>{}), gpt::Error);
  EXPECT_THROW(summarize(std::vector<double>{1.0, NAN}), gpt::Error);
  EXPECT_THROW(summarize(std::vector<double>{INFINITY}), gpt::Error);
}

TEST(OneSampleTLess, MatchesScipyTtest1sampLess) {
  // scipy.stats.ttest_1samp(x, 3.28, alternative='less') -> t=-2.617119612950631, p=0.02948868438955185
  const std::vector<double> x{3.2790, 3.2785, 3.2801, 3.2779, 3.2795};
  const TTestResult r = one_sample_t_less(x, 3.28);
  expect_rel(r.t, -2.617119612950631);
  EXPECT_DOUBLE_EQ(r.df, 4.0);
  expect_rel(r.p_value, 0.02948868438955185);
}

TEST(OneSampleTLess, PublishedEightyRunRecord) {
  // 80 runs, mean 3.2791, std 0.0019: t = -0.0009/(0.0019/√80) and p = scipy.stats.t.cdf(t, 79)
  // = 3.0443418762013716e-05 (quoted as "p ≈ 0.0001" in rounded form).
  const double sd = 0.0019;
  std::vector<double> x(80);
  // A sample with exactly that mean and ddof=1 std: ±a alternating scaled so the std is sd.
  const double a = sd * std::sqrt(79.0 / 80.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.2791 + (i % 2 == 0 ? a : -a);
  const Summary s = summarize(x);
  expect_rel(s.std, sd, 1e-10);
  const TTestResult r = one_sample_t_less(x, 3.28);
  expect_rel(r.t, -4.2367603784191425, 1e-8);
  expect_rel(r.p_value, 3.0443418762013716e-05, 1e-6);
  EXPECT_LT(r.p_value, 1e-4);
}

TEST(OneSampleTLess, ZeroSpreadIsDecisive) {
  EXPECT_EQ(one_sample_t_less(std::vector<double>{3.27, 3.27}, 3.28).p_value, 0.0);
  EXPECT_EQ(one_sample_t_less(std::vector<double>{3.29, 3.29}, 3.28).p_value, 1.0);
  EXPECT_EQ(one_sample_t_less(std::vector<double>{3.28, 3.28}, 3.28).p_value, 1.0);
}

TEST(OneSampleTLess, NeedsTwoRuns) { EXPECT_THROW(one_sample_t_less(std::vector<double>{3.27}, 3.28), gpt::Error); }

TEST(UpperConfidenceBound, MatchesTPpf) {
  // mean + t.ppf(0.99, 4) * sem = 3.280431706586676
  const std::vector<double> x{3.2790, 3.2785, 3.2801, 3.2779, 3.2795};
  expect_rel(upper_confidence_bound(x, 0.99), 3.280431706586676, 1e-12);
  EXPECT_THROW(upper_confidence_bound(x, 1.0), gpt::Error);
  EXPECT_THROW(upper_confidence_bound(x, 0.0), gpt::Error);
}

// A sample of size n with exactly this mean and ddof=1 standard deviation.
std::vector<double> sample_with(double mean, double sd, size_t n) {
  std::vector<double> x;
  if (n % 2 == 1) {
    x.push_back(mean);  // the centre adds nothing; (n-1)/2 pairs of ±sd give sum of squares (n-1)·sd²
    for (size_t i = 0; i < n / 2; ++i) x.insert(x.end(), {mean + sd, mean - sd});
  } else {
    const double a = sd * std::sqrt((n - 1.0) / n);
    for (size_t i = 0; i < n / 2; ++i) x.insert(x.end(), {mean + a, mean - a});
  }
  return x;
}

TEST(RunsNeeded, SmallestPassingSampleSize) {
  const double mean = 3.2795, sd = 0.0019, target = 3.28, alpha = 0.01;
  const auto n = runs_needed(mean, sd, target, alpha);
  ASSERT_TRUE(n.has_value());
  ASSERT_GT(*n, 2u);
  EXPECT_LT(one_sample_t_less(sample_with(mean, sd, *n), target).p_value, alpha);
  EXPECT_GE(one_sample_t_less(sample_with(mean, sd, *n - 1), target).p_value, alpha);
}

TEST(RunsNeeded, NoSampleSizeHelpsAMeanAtOrAboveTarget) {
  EXPECT_FALSE(runs_needed(3.2800, 0.0019, 3.28, 0.01).has_value());
  EXPECT_FALSE(runs_needed(3.2810, 0.0019, 3.28, 0.01).has_value());
  EXPECT_EQ(runs_needed(3.27, 0.0, 3.28, 0.01), 2u);
  EXPECT_THROW(runs_needed(3.27, -1.0, 3.28, 0.01), gpt::Error);
  EXPECT_THROW(runs_needed(3.27, 0.001, 3.28, 1.5), gpt::Error);
}

TEST(WelchTTest, MatchesScipyTtestIndUnequalVar) {
  // scipy.stats.ttest_ind([1,2,3,4], [2,4,6,8,9], equal_var=False)
  const std::vector<double> a{1, 2, 3, 4}, b{2, 4, 6, 8, 9};
  const TTestResult r = welch_t_test(a, b);
  expect_rel(r.t, -2.301081417250779);
  expect_rel(r.p_value, 0.06255581707060956);
  const TTestResult swapped = welch_t_test(b, a);
  expect_rel(swapped.t, 2.301081417250779);
  expect_rel(swapped.p_value, r.p_value, 1e-14);
}

TEST(WelchTTest, ZeroSpreadInBothArms) {
  const std::vector<double> a{1, 1}, b{2, 2, 2};
  EXPECT_EQ(welch_t_test(a, b).p_value, 0.0);
  EXPECT_LT(welch_t_test(a, b).t, 0.0);
  EXPECT_EQ(welch_t_test(a, a).p_value, 1.0);
}

}  // namespace
}  // namespace gpt::harness::stats
