// Mann–Whitney details, bootstrap intervals, Benjamini–Hochberg and the MLPerf / track-3 rules.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "harness/stats/stats.h"
#include "base/check.h"

namespace gpt::harness::stats {
namespace {

TEST(MannWhitney, ExactRuleFollowsScipy) {
  // Exact when either sample has n <= 8 and nothing is tied.
  const std::vector<double> small{1, 2, 3}, big{4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  EXPECT_EQ(mann_whitney_u(small, big).method, "exact");
  EXPECT_EQ(mann_whitney_u(big, small).method, "exact");
  const std::vector<double> tied{1, 2, 2};
  EXPECT_EQ(mann_whitney_u(tied, big).method, "asymptotic");
  const std::vector<double> nine_a{1, 2, 3, 4, 5, 6, 7, 8, 9}, nine_b{11, 12, 13, 14, 15, 16, 17, 18, 19};
  EXPECT_EQ(mann_whitney_u(nine_a, nine_b).method, "asymptotic");
}

TEST(MannWhitney, HandCountedExactDistribution) {
  // x = {1, 2}, y = {3, 4}: U1 = 0; of the C(4,2) = 6 orderings only one has U <= 0 and one has
  // U >= 4, so the two-sided p is 2/6.
  const MannWhitneyResult r = mann_whitney_u(std::vector<double>{1, 2}, std::vector<double>{3, 4});
  EXPECT_EQ(r.u, 0.0);
  EXPECT_NEAR(r.p_value, 1.0 / 3.0, 1e-15);
  // U1 of the swapped call is n1·n2 − U1; the p-value is the same.
  const MannWhitneyResult s = mann_whitney_u(std::vector<double>{3, 4}, std::vector<double>{1, 2});
  EXPECT_EQ(s.u, 4.0);
  EXPECT_NEAR(s.p_value, r.p_value, 1e-15);
}

TEST(MannWhitney, AllTiedGivesPOne) {
  const MannWhitneyResult r = mann_whitney_u(std::vector<double>{2, 2}, std::vector<double>{2, 2, 2});
  EXPECT_EQ(r.method, "asymptotic");
  EXPECT_EQ(r.p_value, 1.0);
  EXPECT_EQ(r.u, 3.0);
}

TEST(MannWhitney, RejectsEmptyOrNan) {
  EXPECT_THROW(mann_whitney_u(std::vector<double>{}, std::vector<double>{1}), gpt::Error);
  EXPECT_THROW(mann_whitney_u(std::vector<double>{NAN}, std::vector<double>{1}), gpt::Error);
}

TEST(BootstrapRatio, DeterministicForASeedAndBracketsThePointEstimate) {
  const std::vector<double> cand{74.1, 74.3, 74.0, 74.4, 74.2}, base{75.0, 75.2, 74.9, 75.1, 75.3};
  const Interval a = bootstrap_ratio_ci(cand, base, 0.95, 2000, 7);
  const Interval b = bootstrap_ratio_ci(cand, base, 0.95, 2000, 7);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  const double point = 74.2 / 75.1;
  EXPECT_LT(a.low, point);
  EXPECT_GT(a.high, point);
  EXPECT_LT(a.high, 1.0);  // clearly faster
  const Interval wider = bootstrap_ratio_ci(cand, base, 0.999, 2000, 7);
  EXPECT_LE(wider.low, a.low);
  EXPECT_GE(wider.high, a.high);
}

TEST(BootstrapRatio, ConstantArmsGiveAPointInterval) {
  const Interval r = bootstrap_ratio_ci(std::vector<double>{2, 2}, std::vector<double>{4, 4, 4}, 0.9, 100, 1);
  EXPECT_DOUBLE_EQ(r.low, 0.5);
  EXPECT_DOUBLE_EQ(r.high, 0.5);
}

TEST(BootstrapRatio, CoversTheTrueRatio) {
  // 200 simulated comparisons (true ratio 74.25/75 at sd 0.2, 10 runs per arm): the 95% percentile
  // interval should cover the truth about 95% of the time; percentile intervals undercover a little
  // at n = 10, so require 85%.
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> cand_dist(74.25, 0.2), base_dist(75.0, 0.2);
  const double truth = 74.25 / 75.0;
  int covered = 0;
  constexpr int kTrials = 200;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<double> cand(10), base(10);
    for (auto& v : cand) v = cand_dist(rng);
    for (auto& v : base) v = base_dist(rng);
    const Interval ci = bootstrap_ratio_ci(cand, base, 0.95, 1000, static_cast<uint64_t>(trial));
    covered += (ci.low <= truth && truth <= ci.high) ? 1 : 0;
  }
  EXPECT_GE(covered, 170);
  EXPECT_LE(covered, 199);  // an interval that always covers would be uselessly wide
}

TEST(BootstrapRatio, RejectsBadArguments) {
  const std::vector<double> x{1, 2};
  EXPECT_THROW(bootstrap_ratio_ci(x, x, 1.0, 100, 1), gpt::Error);
  EXPECT_THROW(bootstrap_ratio_ci(x, x, 0.9, 1, 1), gpt::Error);
  EXPECT_THROW(bootstrap_ratio_ci(x, std::vector<double>{0, 0}, 0.9, 100, 1), gpt::Error);
}

std::vector<bool> bh(std::vector<double> p, double q) { return benjamini_hochberg(p, q); }

TEST(BenjaminiHochberg, HandComputedCases) {
  // m = 4, q = 0.05: thresholds 0.0125, 0.025, 0.0375, 0.05; every sorted p is under its threshold.
  EXPECT_EQ(bh({0.01, 0.04, 0.03, 0.005}, 0.05), (std::vector<bool>{true, true, true, true}));
  // m = 6, q = 0.05: thresholds k/120; each p_(k) = k/100 + ... misses its threshold: nothing rejected.
  EXPECT_EQ(bh({0.01, 0.02, 0.03, 0.04, 0.05, 0.5}, 0.05), (std::vector<bool>(6, false)));
  // m = 4, q = 0.1: thresholds 0.025, 0.05, 0.075, 0.1; sorted 0.001, 0.02, 0.03 pass, 0.9 does not.
  EXPECT_EQ(bh({0.001, 0.03, 0.02, 0.9}, 0.1), (std::vector<bool>{true, true, true, false}));
}

TEST(BenjaminiHochberg, StepUpRejectsEarlierRanksThatMissTheirOwnThreshold) {
  // m = 3, q = 0.06: thresholds 0.02, 0.04, 0.06. 0.021 misses 0.02, but 0.039 passes at rank 2, so
  // both are rejected.
  EXPECT_EQ(bh({0.9, 0.039, 0.021}, 0.06), (std::vector<bool>{false, true, true}));
  // Bonferroni-like single test: m = 1.
  EXPECT_EQ(bh({0.05}, 0.05), (std::vector<bool>{true}));
  EXPECT_EQ(bh({0.0501}, 0.05), (std::vector<bool>{false}));
}

TEST(BenjaminiHochberg, EmptyAndInvalid) {
  EXPECT_TRUE(bh({}, 0.05).empty());
  EXPECT_THROW(bh({1.5}, 0.05), gpt::Error);
  EXPECT_THROW(bh({0.5}, 0.0), gpt::Error);
}

TEST(OlympicMean, DropsOneMinAndOneMax) {
  EXPECT_DOUBLE_EQ(olympic_mean(std::vector<double>{10, 1, 5, 6, 100}), 7.0);
  EXPECT_DOUBLE_EQ(olympic_mean(std::vector<double>{3, 3, 3}), 3.0);
  EXPECT_DOUBLE_EQ(olympic_mean(std::vector<double>{1, 1, 2, 9, 9}), 4.0);  // only one copy of each extreme
  EXPECT_THROW(olympic_mean(std::vector<double>{1, 2}), gpt::Error);
}

TEST(Track3Rule, MarginScalesWithRootN) {
  // mean 3.279, n = 16: (3.28 − 3.279)·4 = 0.004 -> passes at the default margin (boundary inclusive
  // up to rounding, so test just either side).
  const std::vector<double> sixteen(16, 3.2789);
  EXPECT_TRUE(track3_rule(sixteen));          // 0.0011·4 = 0.0044
  const std::vector<double> four(4, 3.2789);  // 0.0011·2 = 0.0022
  EXPECT_FALSE(track3_rule(four));
  EXPECT_TRUE(track3_rule(four, 3.28, 0.002));
  EXPECT_FALSE(track3_rule(std::vector<double>{3.281, 3.281}));
}

}  // namespace
}  // namespace gpt::harness::stats
