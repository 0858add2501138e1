// Comparison verdicts, interleaving and named baselines.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "harness/compare/comparison.h"
#include "kernels/check.h"

namespace gpt::harness::compare {
namespace {

TEST(Interleave, AlternatesStartingWithTheBaseline) {
  const auto order = interleaved_order(3);
  ASSERT_EQ(order.size(), 6u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i % 2 == 0 ? Arm::baseline : Arm::candidate);
  EXPECT_TRUE(interleaved_order(0).empty());
  EXPECT_EQ(to_string(Arm::candidate), "candidate");
}

ArmResults arm(double time_mean, double loss_mean, uint64_t seed, size_t n = 10) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> time(time_mean, 0.2), loss(loss_mean, 0.002);
  ArmResults a;
  for (size_t i = 0; i < n; ++i) {
    a.train_time_s.push_back(time(rng));
    a.final_val_loss.push_back(loss(rng));
  }
  return a;
}

TEST(AnalyzeComparison, OnePercentFasterCandidateIsDetected) {
  const ArmResults base = arm(75.0, 3.2790, 1), cand = arm(74.25, 3.2790, 2);
  const ComparisonReport r = analyze_comparison(cand, base);
  EXPECT_TRUE(r.faster);
  EXPECT_LT(r.time_welch.t, 0);
  EXPECT_LT(r.time_mann_whitney.p_value, 0.01);
  EXPECT_EQ(r.time_mann_whitney.method, "asymptotic");  // 10 vs 10
  EXPECT_NEAR(r.time_ratio, 0.99, 0.003);
  EXPECT_LT(r.time_ratio_ci.low, r.time_ratio);
  EXPECT_GT(r.time_ratio_ci.high, r.time_ratio);
  EXPECT_LT(r.time_ratio_ci.high, 1.0);
  ASSERT_TRUE(r.loss_welch.has_value());
  EXPECT_GT(r.loss_welch->p_value, 0.001);  // same loss distribution
  ASSERT_TRUE(r.candidate_record.has_value());
  const std::string text = format_comparison(r, ComparisonSettings{}, PublishedFigures{80, 3.2791, std::nullopt});
  EXPECT_NE(text.find("candidate is faster"), std::string::npos) << text;
  EXPECT_NE(text.find("published baseline: n=80"), std::string::npos) << text;
}

TEST(AnalyzeComparison, RecordCheckFollowsTheCandidateLosses) {
  const ComparisonReport good = analyze_comparison(arm(75.0, 3.2770, 3), arm(75.0, 3.2790, 4));
  EXPECT_TRUE(good.candidate_passes_record);
  const ComparisonReport bad = analyze_comparison(arm(75.0, 3.2810, 5), arm(75.0, 3.2790, 6));
  EXPECT_FALSE(bad.candidate_passes_record);
  EXPECT_FALSE(bad.faster);
}

TEST(AnalyzeComparison, TimesOnlyWhenLossesAreMissing) {
  ArmResults cand = arm(75.0, 3.28, 7), base = arm(75.0, 3.28, 8);
  cand.final_val_loss.clear();
  const ComparisonReport r = analyze_comparison(cand, base);
  EXPECT_FALSE(r.loss_welch.has_value());
  EXPECT_FALSE(r.candidate_record.has_value());
  EXPECT_FALSE(r.candidate_passes_record);
  ArmResults single = arm(75.0, 3.28, 9, 1);
  EXPECT_THROW(analyze_comparison(single, base), gpt::Error);
}

TEST(Baseline, ParsesRevisionRecipeAndPublishedFigures) {
  const Baseline b = parse_baseline(R"(
revision = "abc123"
recipe = "track1"
[published]
runs = 80
mean_val_loss = 3.2791
mean_train_time_s = 180.5
)",
                                    "record", "baselines/record.toml");
  EXPECT_EQ(b.name, "record");
  EXPECT_EQ(b.revision, "abc123");
  EXPECT_TRUE(b.binary.empty());
  EXPECT_EQ(b.recipe, "track1");
  ASSERT_TRUE(b.published.has_value());
  EXPECT_EQ(b.published->runs, 80);
  EXPECT_DOUBLE_EQ(b.published->mean_val_loss, 3.2791);
  EXPECT_DOUBLE_EQ(b.published->mean_train_time_s.value(), 180.5);
}

void expect_error_mentions(const std::string& toml, const std::string& needle) {
  try {
    parse_baseline(toml, "x", "baselines/x.toml");
    FAIL() << "expected gpt::Error for: " << toml;
  } catch (const gpt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("baselines/x.toml"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(Baseline, RejectsIncompleteFiles) {
  expect_error_mentions("recipe = \"track1\"", "revision");
  expect_error_mentions("revision = \"a\"\nbinary = \"b\"\nrecipe = \"r\"", "exactly one");
  expect_error_mentions("revision = \"a\"", "recipe");
  expect_error_mentions("revision = \"a\"\nrecipe = \"r\"\n[published]\nruns = 3", "mean_val_loss");
  expect_error_mentions("revision = \"a\"\nrecipe = \"r\"\n[published]\nruns = 0\nmean_val_loss = 3.2", "runs");
  expect_error_mentions("revision = = 3", "invalid TOML");
}

TEST(Baseline, ShippedExampleLoadsAndUnknownNamesAreRevisions) {
  const std::filesystem::path dir = std::filesystem::path(SPEEDRUN_FIXTURES_DIR) / ".." / ".." / "baselines";
  const auto example = find_baseline(dir, "example-record");
  ASSERT_TRUE(example.has_value());
  EXPECT_EQ(example->recipe, "track1");
  ASSERT_TRUE(example->published.has_value());
  EXPECT_EQ(example->published->runs, 80);
  EXPECT_FALSE(find_baseline(dir, "no-such-baseline").has_value());
}

}  // namespace
}  // namespace gpt::harness::compare
