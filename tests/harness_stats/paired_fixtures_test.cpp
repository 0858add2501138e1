// The paired and one-sample tests against tests/fixtures/paired_stats_expected.json (exact values from
// tests/scripts/gen_paired_stats_fixtures.py: mpmath t and normal tails, enumerated Wilcoxon tables),
// and the hand-checkable cases that pin the conventions.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/stats/stats.h"
#include "base/check.h"

namespace gpt::harness::stats {
namespace {

constexpr double kRelTol = 1e-9;

const nlohmann::json& fixtures() {
  static const nlohmann::json data = [] {
    const std::string path = std::string(SPEEDRUN_FIXTURES_DIR) + "/paired_stats_expected.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  }();
  return data;
}

std::vector<double> values(const nlohmann::json& j) { return j.get<std::vector<double>>(); }

Alternative alternative(const nlohmann::json& c) {
  const std::string a = c.at("alternative");
  return a == "less" ? Alternative::less : (a == "greater" ? Alternative::greater : Alternative::two_sided);
}

void expect_rel(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, kRelTol * std::abs(expected) + 1e-15) << what;
}

TEST(PairedFixtures, FileCoversEveryMethodAndAlternative) {
  size_t exact = 0, asymptotic = 0;
  for (const auto& c : fixtures().at("wilcoxon")) (c.at("method") == "exact" ? exact : asymptotic) += 1;
  EXPECT_GE(exact, 6u);
  EXPECT_GE(asymptotic, 6u);
  EXPECT_GE(fixtures().at("paired_t").size(), 12u);
  EXPECT_GE(fixtures().at("one_sample_t").size(), 9u);
}

TEST(PairedFixtures, PairedT) {
  for (const auto& c : fixtures().at("paired_t")) {
    const TTestResult r = paired_t_test(values(c.at("candidate")), values(c.at("baseline")), alternative(c));
    const std::string what = c.dump().substr(0, 80);
    expect_rel(r.t, c.at("t"), what + " t");
    EXPECT_EQ(r.df, c.at("df").get<double>()) << what;
    expect_rel(r.p_value, c.at("p"), what + " p");
  }
}

TEST(PairedFixtures, WilcoxonSignedRank) {
  for (const auto& c : fixtures().at("wilcoxon")) {
    const WilcoxonResult r = wilcoxon_signed_rank(values(c.at("candidate")), values(c.at("baseline")), alternative(c));
    const std::string what = c.at("alternative").get<std::string>() + " n=" + std::to_string(r.n_nonzero);
    EXPECT_EQ(r.method, c.at("method").get<std::string>()) << what;
    EXPECT_EQ(r.statistic, c.at("statistic").get<double>()) << what;
    EXPECT_EQ(r.n_nonzero, c.at("n_nonzero").get<size_t>()) << what;
    expect_rel(r.p_value, c.at("p"), what + " p");
  }
}

TEST(PairedFixtures, OneSampleTAndWelchWithAlternatives) {
  for (const auto& c : fixtures().at("one_sample_t")) {
    const TTestResult r = one_sample_t_test(values(c.at("x")), c.at("mu").get<double>(), alternative(c));
    expect_rel(r.t, c.at("t"), "one-sample t");
    expect_rel(r.p_value, c.at("p"), "one-sample p " + c.at("alternative").get<std::string>());
  }
  for (const auto& c : fixtures().at("welch_alternative")) {
    const TTestResult r = welch_t_test(values(c.at("candidate")), values(c.at("baseline")), alternative(c));
    expect_rel(r.t, c.at("t"), "welch t");
    expect_rel(r.df, c.at("df"), "welch df");
    expect_rel(r.p_value, c.at("p"), "welch p " + c.at("alternative").get<std::string>());
  }
}

// n = 4, every difference negative: R+ = 0, and 1 of the 16 sign patterns is as extreme on each side.
TEST(Wilcoxon, ExactTableByHand) {
  const std::vector<double> base = {10, 20, 30, 40}, cand = {9, 18, 27, 36};
  const WilcoxonResult two = wilcoxon_signed_rank(cand, base);
  EXPECT_EQ(two.method, "exact");
  EXPECT_EQ(two.statistic, 0.0);
  EXPECT_DOUBLE_EQ(two.p_value, 2.0 / 16.0);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank(cand, base, Alternative::less).p_value, 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank(cand, base, Alternative::greater).p_value, 1.0);
  // R+ = 5 of 10 is the centre of n = 4's distribution.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank(std::vector<double>{11, 18, 27, 44}, base).p_value, 1.0);
}

// Same seeds on a deterministic trainer give identical losses: no evidence either way, never an error.
TEST(Wilcoxon, IdenticalArmsGiveNoEvidence) {
  const std::vector<double> x = {3.31, 3.29, 3.30, 3.32};
  const WilcoxonResult w = wilcoxon_signed_rank(x, x);
  EXPECT_EQ(w.method, "all-zero");
  EXPECT_EQ(w.p_value, 1.0);
  const TTestResult t = paired_t_test(x, x, Alternative::greater);
  EXPECT_EQ(t.t, 0.0);
  EXPECT_EQ(t.p_value, 1.0);
}

TEST(PairedT, ConstantShiftIsCertain) {
  const std::vector<double> base = {75.0, 75.5, 74.8}, slower = {76.0, 76.5, 75.8};
  EXPECT_EQ(paired_t_test(slower, base, Alternative::greater).p_value, 0.0);
  EXPECT_EQ(paired_t_test(slower, base, Alternative::less).p_value, 1.0);
  EXPECT_EQ(paired_t_test(slower, base).p_value, 0.0);
}

TEST(PairedT, BadInputNamesTheProblem) {
  const std::vector<double> three = {1, 2, 3}, two = {1, 2}, one = {1};
  EXPECT_THROW(paired_t_test(three, two), gpt::Error);
  EXPECT_THROW(paired_t_test(one, one), gpt::Error);
  EXPECT_THROW(wilcoxon_signed_rank(three, two), gpt::Error);
  EXPECT_THROW(wilcoxon_signed_rank(std::vector<double>{NAN}, std::vector<double>{1}), gpt::Error);
}

}  // namespace
}  // namespace gpt::harness::stats
