// E-divisive change points on synthetic benchmark histories.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "harness/stats/stats.h"
#include "base/check.h"

namespace gpt::harness::stats {
namespace {

std::vector<double> noisy(size_t n, double mean, double sd, std::mt19937_64& rng) {
  std::normal_distribution<double> dist(mean, sd);
  std::vector<double> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(EDivisive, FindsASingleShift) {
  std::mt19937_64 rng(1);
  // Draw in order (argument evaluation order is unspecified).
  const auto before = noisy(30, 100.0, 1.0, rng);
  const auto series = concat(before, noisy(25, 104.0, 1.0, rng));
  const auto points = e_divisive(series, 0.05, 199, 42);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].index, 30u);
  EXPECT_LT(points[0].p_value, 0.05);
  EXPECT_NEAR(points[0].p_value, 1.0 / 200.0, 1e-12);  // no permutation beats a 4-sigma shift
}

// The scaled energy statistic of Matteson & James computed straight from its definition (O(L^3)).
double energy_q(const std::vector<double>& v, size_t tau) {
  const auto m = static_cast<double>(tau), n = static_cast<double>(v.size() - tau);
  double cross = 0, left = 0, right = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    for (size_t j = i + 1; j < v.size(); ++j) {
      const double d = std::abs(v[i] - v[j]);
      (j < tau ? left : i >= tau ? right : cross) += d;
    }
  }
  return m * n / (m + n) * (2 * cross / (m * n) - left / (m * (m - 1) / 2) - right / (n * (n - 1) / 2));
}

TEST(EDivisive, ChosenSplitMaximisesTheEnergyStatistic) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 5; ++trial) {
    auto series = noisy(25, 0.0, 1.0, rng);
    series = concat(series, noisy(20, 1.5, 1.0, rng));
    const auto points = e_divisive(series, 0.05, 99, 3);
    ASSERT_FALSE(points.empty());
    size_t argmax = 3;
    for (size_t tau = 3; tau + 3 <= series.size(); ++tau) {
      if (energy_q(series, tau) > energy_q(series, argmax)) argmax = tau;
    }
    // The first (most significant) split is the global maximiser; later ones refine the pieces.
    bool found = false;
    for (const auto& cp : points) found = found || cp.index == argmax;
    EXPECT_TRUE(found) << "trial " << trial << " argmax " << argmax;
  }
}

TEST(EDivisive, FindsTwoShifts) {
  std::mt19937_64 rng(2);
  auto series = noisy(20, 10.0, 0.1, rng);
  series = concat(series, noisy(20, 11.0, 0.1, rng));
  series = concat(series, noisy(20, 10.5, 0.1, rng));
  const auto points = e_divisive(series, 0.05, 199, 7);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].index, 20u);
  EXPECT_EQ(points[1].index, 40u);
}

TEST(EDivisive, QuietHistoriesRarelyAlarm) {
  // 40 stationary histories at alpha = 0.05: about 2 false alarms expected; allow up to 6.
  std::mt19937_64 rng(3);
  int alarms = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    const auto series = noisy(40, 50.0, 2.0, rng);
    alarms += e_divisive(series, 0.05, 99, 100 + i).empty() ? 0 : 1;
  }
  EXPECT_LE(alarms, 6);
}

TEST(EDivisive, ConstantAndShortSeriesHaveNoChangePoint) {
  EXPECT_TRUE(e_divisive(std::vector<double>(30, 1.0), 0.05, 99, 1).empty());
  EXPECT_TRUE(e_divisive(std::vector<double>{1, 2, 3, 4, 5}, 0.05, 99, 1).empty());  // < 2·min_size
  EXPECT_TRUE(e_divisive(std::vector<double>{}, 0.05, 99, 1).empty());
}

TEST(EDivisive, RespectsMinSize) {
  // A jump after two points cannot be split off with min_size 3; the best legal split is index 3.
  std::vector<double> series{0.0, 0.0};
  series.insert(series.end(), 20, 10.0);
  for (const auto& cp : e_divisive(series, 0.05, 199, 5)) EXPECT_GE(cp.index, 3u);
  for (const auto& cp : e_divisive(series, 0.05, 199, 5, 2)) EXPECT_EQ(cp.index, 2u);
  EXPECT_EQ(e_divisive(series, 0.05, 199, 5, 2).size(), 1u);
}

TEST(EDivisive, RejectsUnusableArguments) {
  const std::vector<double> series(10, 1.0);
  EXPECT_THROW(e_divisive(series, 0.05, 10, 1), gpt::Error);  // p can never drop below 1/11
  EXPECT_THROW(e_divisive(series, 0.05, 99, 1, 1), gpt::Error);
  EXPECT_THROW(e_divisive(series, 1.5, 99, 1), gpt::Error);
}

}  // namespace
}  // namespace gpt::harness::stats
