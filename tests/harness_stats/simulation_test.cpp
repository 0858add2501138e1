// Seeded simulations of the decisions the harness makes: a record check must not pass a trainer
// whose true mean sits exactly on the target more often than alpha, and a comparison must detect a
// 1% speed-up with 10 runs per arm.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "harness/stats/stats.h"

namespace gpt::harness::stats {
namespace {

std::vector<double> draw(std::normal_distribution<double>& dist, std::mt19937_64& rng, size_t n) {
  std::vector<double> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

TEST(Simulation, RecordFalsePassRateAtTheTargetIsAtMostAlpha) {
  constexpr double kAlpha = 0.01;
  constexpr int kSweeps = 20000;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> loss(3.28, 0.002);
  int passes = 0;
  for (int s = 0; s < kSweeps; ++s) {
    passes += one_sample_t_less(draw(loss, rng, 10), 3.28).p_value < kAlpha ? 1 : 0;
  }
  const double rate = static_cast<double>(passes) / kSweeps;
  const double slack = 3.0 * std::sqrt(kAlpha * (1 - kAlpha) / kSweeps);  // binomial, 3 sigma
  EXPECT_LE(rate, kAlpha + slack) << passes << " false passes";
  EXPECT_GE(rate, kAlpha - slack) << "the test should be exact, not merely conservative";
}

TEST(Simulation, UpperConfidenceBoundAgreesWithTheTTest) {
  // mean + t_{0.99}·sem < target  <=>  one-sided p < 0.01: the two record views never disagree.
  std::mt19937_64 rng(12);
  std::normal_distribution<double> loss(3.2790, 0.002);
  for (int s = 0; s < 2000; ++s) {
    const auto x = draw(loss, rng, 10);
    EXPECT_EQ(upper_confidence_bound(x, 0.99) < 3.28, one_sample_t_less(x, 3.28).p_value < 0.01);
  }
}

TEST(Simulation, CompareDetectsAOnePercentSpeedup) {
  constexpr int kComparisons = 2000;
  std::mt19937_64 rng(13);
  std::normal_distribution<double> baseline(75.0, 0.2), candidate(75.0 * 0.99, 0.2);
  int detected = 0;
  for (int c = 0; c < kComparisons; ++c) {
    detected += welch_t_test(draw(candidate, rng, 10), draw(baseline, rng, 10)).p_value < 0.01 ? 1 : 0;
  }
  EXPECT_GE(detected, kComparisons * 9 / 10);
}

TEST(Simulation, CompareRarelyFlagsEqualArms) {
  constexpr int kComparisons = 5000;
  std::mt19937_64 rng(14);
  std::normal_distribution<double> time(75.0, 0.2);
  int flagged = 0;
  for (int c = 0; c < kComparisons; ++c) {
    flagged += welch_t_test(draw(time, rng, 10), draw(time, rng, 10)).p_value < 0.01 ? 1 : 0;
  }
  // Welch is near-exact here: about 1% false alarms (50), 3-sigma binomial slack.
  EXPECT_LE(flagged, 50 + 3 * 7);
}

}  // namespace
}  // namespace gpt::harness::stats
