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

// scipy 1.10.1's values (scipy.stats.wilcoxon(c, b, alternative=..., correction=..., mode='approx')), written in by
// hand: tied |d| (the variance's tie correction), a zero difference (dropped), and the continuity correction.
TEST(WilcoxonScipy, TiesZerosAndContinuityCorrection) {
  struct Case {
    std::vector<double> candidate, baseline;
    Alternative alternative;
    bool correction;
    double statistic, p;
  };
  const std::vector<double> c1 = {10.25, 10.25, 11.25, 11.75, 11.75, 12.75, 13.25, 13.0},
                            b1 = {10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5};
  const std::vector<double> c2 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b2 = {0, 0, 1, 2, 3, 3, 4, 4, 9, 9, 9, 9};
  const std::vector<double> c3 = {75.5, 76.0, 75.5, 77.0, 76.0, 78.0, 75.0, 76.5, 77.5, 76.0}, b3(10, 75.0);
  const std::vector<Case> cases = {
      {c1, b1, Alternative::two_sided, false, 16.0, 0.763024600552995},
      {c1, b1, Alternative::two_sided, true, 16.0, 0.8210975835519595},
      {c1, b1, Alternative::less, false, 20.0, 0.6184876997235025},
      {c1, b1, Alternative::less, true, 20.0, 0.6468720189475737},
      {c1, b1, Alternative::greater, false, 20.0, 0.3815123002764975},
      {c1, b1, Alternative::greater, true, 20.0, 0.41054879177597975},
      {c2, b2, Alternative::two_sided, false, 0.0, 0.00296846954118083},
      {c2, b2, Alternative::two_sided, true, 0.0, 0.003433847244047068},
      {c2, b2, Alternative::less, false, 66.0, 0.9985157652294095},
      {c2, b2, Alternative::less, true, 66.0, 0.9987193303858737},
      {c2, b2, Alternative::greater, false, 66.0, 0.001484234770590415},
      {c2, b2, Alternative::greater, true, 66.0, 0.001716923622023534},
      {c3, b3, Alternative::two_sided, false, 0.0, 0.007420961287866498},
      {c3, b3, Alternative::two_sided, true, 0.0, 0.008848773653994606},
      {c3, b3, Alternative::less, true, 45.0, 0.9968983295102617},
      {c3, b3, Alternative::greater, false, 45.0, 0.003710480643933249},
      {c3, b3, Alternative::greater, true, 45.0, 0.004424386826997303},
  };
  for (const Case& c : cases) {
    const WilcoxonResult r = wilcoxon_signed_rank(c.candidate, c.baseline, c.alternative, c.correction);
    const std::string what = "n=" + std::to_string(c.candidate.size()) + " alternative " +
                             std::to_string(static_cast<int>(c.alternative)) + " correction " +
                             std::to_string(c.correction);
    EXPECT_EQ(r.method, "asymptotic") << what;
    EXPECT_EQ(r.statistic, c.statistic) << what;
    expect_rel(r.p_value, c.p, what);
  }
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
