// Every statistic against scipy 1.10 reference values in tests/fixtures/stats_expected.json (written by
// tests/scripts/gen_stats_fixtures.py), to 1e-6 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/stats/stats.h"

namespace gpt::harness::stats {
namespace {

constexpr double kRelTol = 1e-6;

const nlohmann::json& fixtures() {
  static const nlohmann::json data = [] {
    const std::string path = std::string(SPEEDRUN_FIXTURES_DIR) + "/stats_expected.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  }();
  return data;
}

std::vector<double> values(const nlohmann::json& j) { return j.get<std::vector<double>>(); }

void expect_rel(double actual, double expected, const std::string& what) {
  if (expected == 0.0) {
    EXPECT_NEAR(actual, 0.0, 1e-12) << what;
  } else {
    EXPECT_NEAR(actual, expected, kRelTol * std::abs(expected)) << what << " expected " << expected;
  }
}

TEST(ScipyFixtures, FileHasEnoughCases) {
  EXPECT_EQ(fixtures().at("scipy_version").get<std::string>().substr(0, 4), "1.10");
  EXPECT_GE(fixtures().at("one_sample_t_less").size(), 10u);
  EXPECT_GE(fixtures().at("welch").size(), 8u);
  EXPECT_GE(fixtures().at("mann_whitney").size(), 12u);
}

TEST(ScipyFixtures, Summary) {
  for (const auto& c : fixtures().at("summary")) {
    const Summary s = summarize(values(c.at("x")));
    const std::string what = "n=" + std::to_string(s.n);
    expect_rel(s.mean, c.at("mean"), what + " mean");
    expect_rel(s.std, c.at("std"), what + " std");
    expect_rel(s.sem, c.at("sem"), what + " sem");
    expect_rel(s.median, c.at("median"), what + " median");
    EXPECT_EQ(s.min, c.at("min").get<double>()) << what;
    EXPECT_EQ(s.max, c.at("max").get<double>()) << what;
  }
}

TEST(ScipyFixtures, OneSampleTLess) {
  for (const auto& c : fixtures().at("one_sample_t_less")) {
    const auto x = values(c.at("x"));
    const TTestResult r = one_sample_t_less(x, c.at("target"));
    const std::string what = "n=" + std::to_string(x.size());
    expect_rel(r.t, c.at("t"), what + " t");
    EXPECT_EQ(r.df, c.at("df").get<double>()) << what;
    expect_rel(r.p_value, c.at("p"), what + " p");
  }
}

TEST(ScipyFixtures, PublishedRecordPValue) {
  const auto& c = fixtures().at("published_record");
  const double n = c.at("n"), mean = c.at("mean"), sd = c.at("std"), target = c.at("target");
  // Rebuild a sample with exactly that mean and std (±a pairs, ddof=1) and run the real test.
  const double a = sd * std::sqrt((n - 1.0) / n);
  std::vector<double> x;
  for (int i = 0; i < static_cast<int>(n) / 2; ++i) x.insert(x.end(), {mean + a, mean - a});
  const TTestResult r = one_sample_t_less(x, target);
  expect_rel(r.t, c.at("t"), "published t");
  expect_rel(r.p_value, c.at("p"), "published p");
  EXPECT_LT(r.p_value, 1e-4);  // the write-up's "p ≈ 0.0001" is an upper rounding of 3.04e-5
}

TEST(ScipyFixtures, UpperConfidenceBound) {
  for (const auto& c : fixtures().at("upper_confidence_bound")) {
    const auto x = values(c.at("x"));
    expect_rel(upper_confidence_bound(x, c.at("confidence")), c.at("ucb"), "n=" + std::to_string(x.size()) + " ucb");
  }
}

TEST(ScipyFixtures, Welch) {
  for (const auto& c : fixtures().at("welch")) {
    const auto cand = values(c.at("candidate"));
    const auto base = values(c.at("baseline"));
    const TTestResult r = welch_t_test(cand, base);
    const std::string what = std::to_string(cand.size()) + " vs " + std::to_string(base.size());
    expect_rel(r.t, c.at("t"), what + " t");
    expect_rel(r.df, c.at("df"), what + " df");
    expect_rel(r.p_value, c.at("p"), what + " p");
  }
}

TEST(ScipyFixtures, MannWhitney) {
  for (const auto& c : fixtures().at("mann_whitney")) {
    const auto x = values(c.at("x"));
    const auto y = values(c.at("y"));
    const MannWhitneyResult r = mann_whitney_u(x, y);
    const std::string what = std::to_string(x.size()) + " vs " + std::to_string(y.size());
    EXPECT_EQ(r.method, c.at("method").get<std::string>()) << what;
    EXPECT_EQ(r.u, c.at("u").get<double>()) << what;
    expect_rel(r.p_value, c.at("p"), what + " p");
  }
}

}  // namespace
}  // namespace gpt::harness::stats
