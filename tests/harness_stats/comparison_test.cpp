// Comparison verdicts, interleaving and named baselines.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "harness/compare/comparison.h"
#include "trainer/recipe/recipe.h"
#include "base/check.h"

namespace gpt::harness::compare {
namespace {

TEST(Interleave, SeedBySeedAndArmByArmWithinASeed) {
  const std::vector<InterleavedRun> two_arms = interleaved_order(2, 3);
  const std::vector<InterleavedRun> abab = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}};
  EXPECT_EQ(two_arms, abab);
  const std::vector<InterleavedRun> one_arm = {{0, 0}, {1, 0}};
  EXPECT_EQ(interleaved_order(1, 2), one_arm);
  EXPECT_TRUE(interleaved_order(2, 0).empty());
  EXPECT_TRUE(interleaved_order(0, 3).empty());
}

ComparisonSettings settings_with_target(double target = 3.28) {
  ComparisonSettings s;
  s.target_loss = target;
  return s;
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
  const ComparisonReport r = analyze_comparison(cand, base, settings_with_target());
  EXPECT_TRUE(r.faster);
  EXPECT_FALSE(r.time.paired);  // no seeds given
  EXPECT_LT(r.time.t.t, 0);
  ASSERT_TRUE(r.time.mann_whitney.has_value());
  EXPECT_LT(r.time.mann_whitney->p_value, 0.01);
  EXPECT_EQ(r.time.mann_whitney->method, "asymptotic");  // 10 vs 10
  EXPECT_NEAR(r.time_ratio, 0.99, 0.003);
  EXPECT_LT(r.time_ratio_ci.low, r.time_ratio);
  EXPECT_GT(r.time_ratio_ci.high, r.time_ratio);
  EXPECT_LT(r.time_ratio_ci.high, 1.0);
  ASSERT_TRUE(r.loss.has_value());
  EXPECT_GT(r.loss->t.p_value, 0.001);  // same loss distribution
  ASSERT_TRUE(r.candidate_record.has_value());
  ComparisonSettings with_published = settings_with_target();
  with_published.published = PublishedFigures{80, 3.2791, std::nullopt};
  const std::string text = format_comparison(r, with_published);
  EXPECT_NE(text.find("candidate is faster"), std::string::npos) << text;
  EXPECT_NE(text.find("published baseline: n=80"), std::string::npos) << text;
}

TEST(AnalyzeComparison, RecordCheckFollowsTheCandidateLosses) {
  const ComparisonReport good = analyze_comparison(arm(75.0, 3.2770, 3), arm(75.0, 3.2790, 4), settings_with_target());
  EXPECT_TRUE(good.candidate_passes_record);
  const ComparisonReport bad = analyze_comparison(arm(75.0, 3.2810, 5), arm(75.0, 3.2790, 6), settings_with_target());
  EXPECT_FALSE(bad.candidate_passes_record);
  EXPECT_FALSE(bad.faster);
}

TEST(AnalyzeComparison, TimesOnlyWhenLossesAreMissing) {
  ArmResults cand = arm(75.0, 3.28, 7), base = arm(75.0, 3.28, 8);
  cand.final_val_loss.clear();
  const ComparisonReport r = analyze_comparison(cand, base, settings_with_target());
  EXPECT_FALSE(r.loss.has_value());
  EXPECT_FALSE(r.candidate_record.has_value());
  EXPECT_FALSE(r.candidate_passes_record);
  ArmResults single = arm(75.0, 3.28, 9, 1);
  EXPECT_THROW(analyze_comparison(single, base), gpt::Error);
}

// Seeds run in both arms pair up: a 0.3% slowdown under 1% run-to-run noise that is shared per seed (the seed
// decides most of the time) is plain to the paired tests and invisible to the unpaired ones.
ArmResults seeded(const std::vector<double>& seed_effect, double factor, uint64_t noise_seed) {
  std::mt19937_64 rng(noise_seed);
  std::normal_distribution<double> noise(0.0, 0.02);
  ArmResults a;
  for (size_t i = 0; i < seed_effect.size(); ++i) {
    a.train_time_s.push_back(75.0 * factor + seed_effect[i] + noise(rng));
    a.time_seeds.push_back(static_cast<std::int64_t>(i));
  }
  return a;
}

TEST(AnalyzeComparison, SameSeedsArePairedAndShowASmallSlowdown) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> per_seed(0.0, 0.75);
  std::vector<double> effect(8);
  for (double& e : effect) e = per_seed(rng);
  const ArmResults base = seeded(effect, 1.0, 1), cand = seeded(effect, 1.003, 2);
  ComparisonSettings s;
  s.fail_if_slower_pct = 0.0;
  const ComparisonReport paired = analyze_comparison(cand, base, s);
  EXPECT_TRUE(paired.time.paired);
  EXPECT_EQ(paired.time.pairs, 8u);
  ASSERT_TRUE(paired.time.wilcoxon.has_value());
  EXPECT_FALSE(paired.time.mann_whitney.has_value());
  EXPECT_EQ(paired.time.wilcoxon->method, "exact");
  EXPECT_DOUBLE_EQ(paired.time.wilcoxon->p_value, 2.0 / 256.0);  // every difference positive: 2 of 2^8 patterns
  EXPECT_TRUE(paired.slower);
  ASSERT_TRUE(paired.slowdown.has_value());
  EXPECT_TRUE(paired.too_slow);
  EXPECT_NE(format_comparison(paired, s).find("FAIL: the candidate is slower than 100% of the baseline time"),
            std::string::npos)
      << format_comparison(paired, s);
  // The passing check never reads as a statement that the candidate was above the allowance.
  s.fail_if_slower_pct = 5.0;
  const ComparisonReport allowed = analyze_comparison(cand, base, s);
  ASSERT_FALSE(allowed.too_slow);
  const std::string verdict = slowdown_verdict(allowed, s);
  EXPECT_EQ(verdict.rfind("PASS: the runs do not show the candidate slower than 105% of the baseline time", 0), 0u)
      << verdict;
  EXPECT_EQ(verdict.find("candidate above"), std::string::npos) << verdict;
  s.fail_if_slower_pct = 0.0;

  ArmResults unpaired_cand = cand;
  for (auto& seed : unpaired_cand.time_seeds) seed += 100;  // other seeds: nothing pairs up
  const ComparisonReport unpaired = analyze_comparison(unpaired_cand, base, s);
  EXPECT_FALSE(unpaired.time.paired);
  EXPECT_TRUE(unpaired.time.mann_whitney.has_value());
  EXPECT_FALSE(unpaired.slower);
  EXPECT_FALSE(unpaired.too_slow);
}

TEST(AnalyzeComparison, FailIfSlowerAllowsTheGivenPercent) {
  std::vector<double> effect = {0.1, -0.2, 0.3, 0.0, -0.1, 0.2};
  const ArmResults base = seeded(effect, 1.0, 3), cand = seeded(effect, 1.02, 4);  // 2% slower
  ComparisonSettings s;
  s.fail_if_slower_pct = 5.0;
  EXPECT_FALSE(analyze_comparison(cand, base, s).too_slow);  // within the allowed 5%
  s.fail_if_slower_pct = 1.0;
  EXPECT_TRUE(analyze_comparison(cand, base, s).too_slow);
  s.fail_if_slower_pct.reset();
  const ComparisonReport none = analyze_comparison(cand, base, s);
  EXPECT_FALSE(none.slowdown.has_value());
  EXPECT_FALSE(none.too_slow);
  EXPECT_TRUE(analyze_comparison(base, cand, s).faster);
  s.fail_if_slower_pct = -1.0;
  EXPECT_THROW(analyze_comparison(cand, base, s), gpt::Error);
}

TEST(AnalyzeComparison, PublishedMeanIsTestedAgainstTheFreshBaselineRuns) {
  ComparisonSettings s;
  s.published = PublishedFigures{80, 3.2791, std::nullopt};
  const ComparisonReport same = analyze_comparison(arm(75.0, 3.2790, 12), arm(75.0, 3.2791, 13), s);
  ASSERT_TRUE(same.published_drift.has_value());
  EXPECT_FALSE(same.drifted);
  const ComparisonReport drift = analyze_comparison(arm(75.0, 3.2790, 14), arm(75.0, 3.2850, 15), s);
  EXPECT_TRUE(drift.drifted);
  EXPECT_LT(drift.published_drift->p_value, 1e-4);
  EXPECT_NE(format_comparison(drift, s).find("DRIFT"), std::string::npos) << format_comparison(drift, s);
  EXPECT_FALSE(analyze_comparison(arm(75.0, 3.2790, 14), arm(75.0, 3.2850, 15)).published_drift.has_value());
}

TEST(AnalyzeComparison, IdenticalSeededLossesArePairedWithoutEvidence) {
  ArmResults base = seeded({0.1, -0.1, 0.2, 0.0}, 1.0, 5), cand = seeded({0.1, -0.1, 0.2, 0.0}, 1.0, 6);
  base.final_val_loss = cand.final_val_loss = {6.97, 6.96, 6.98, 6.97};
  base.loss_seeds = cand.loss_seeds = {0, 1, 2, 3};
  const ComparisonReport r = analyze_comparison(cand, base);
  ASSERT_TRUE(r.loss.has_value());
  EXPECT_TRUE(r.loss->paired);
  EXPECT_EQ(r.loss->t.p_value, 1.0);
  EXPECT_EQ(r.loss->wilcoxon->method, "all-zero");
  EXPECT_FALSE(r.candidate_record.has_value());  // no target: no record check
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

TEST(Baseline, BaselineRecipeNamesTheRecipeInTheBaselinesOwnTrainer) {
  const Baseline b = parse_baseline("revision = \"abc\"\nrecipe = \"tiny-ext\"\nbaseline_recipe = \"tiny-seed\"\n",
                                    "old", "baselines/old.toml");
  EXPECT_EQ(b.recipe, "tiny-ext");
  EXPECT_EQ(b.baseline_recipe, "tiny-seed");
  EXPECT_TRUE(parse_baseline("revision = \"abc\"\nrecipe = \"tiny\"\n", "t", "t.toml").baseline_recipe.empty());
  expect_error_mentions("revision = \"a\"\nrecipe = \"r\"\nbaseline_recipe = \"\"", "baseline_recipe");
  expect_error_mentions("revision = \"a\"\nrecipe = \"r\"\nbaseline_recipe = 3", "baseline_recipe");
}

// `harness compare --baseline NAME` runs the candidate with the baseline's `recipe`: a name today's trainer refuses
// (a renamed recipe) would make every comparison against that baseline fail.
TEST(Baseline, EveryShippedBaselineRunsARecipeOfToday) {
  const std::filesystem::path dir = std::filesystem::path(SPEEDRUN_FIXTURES_DIR) / ".." / ".." / "baselines";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    const auto baseline = find_baseline(dir, entry.path().stem().string());
    ASSERT_TRUE(baseline.has_value()) << entry.path();
    EXPECT_NO_THROW(gpt::load_recipe(baseline->recipe)) << entry.path() << ": recipe " << baseline->recipe;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

}  // namespace
}  // namespace gpt::harness::compare
