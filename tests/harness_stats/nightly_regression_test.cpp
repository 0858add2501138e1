// Nightly regression decisions on synthetic benchmark histories, and Google Benchmark JSON parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "harness/nightly/regression.h"
#include "base/check.h"

namespace gpt::harness::nightly {
namespace {

// `nights` nightlies of `reps` repetitions around `level(night)` with relative noise `noise`.
template <typename Level>
BenchmarkHistory history(const std::string& name, size_t nights, size_t reps, double noise, Level level,
                         uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> unit(0.0, 1.0);
  BenchmarkHistory h{name, {}};
  for (size_t n = 0; n < nights; ++n) {
    std::vector<double> values;
    for (size_t r = 0; r < reps; ++r) values.push_back(level(n) * (1.0 + noise * unit(rng)));
    h.nights.push_back(values);
  }
  return h;
}

// Night-by-night replay: the findings of night k see nights 0..k only, as the nightly job does.
struct Replay {
  int alarm_nights = 0;  // nights with at least one confirmed regression
  std::vector<int> first_flag;  // per benchmark, the first night it was flagged (-1: never)
};

Replay replay(const std::vector<BenchmarkHistory>& full, size_t warmup, const RegressionOptions& options = {}) {
  Replay out;
  out.first_flag.assign(full.size(), -1);
  for (size_t night = warmup; night < full[0].nights.size(); ++night) {
    std::vector<BenchmarkHistory> upto;
    for (const auto& h : full) upto.push_back({h.name, {h.nights.begin(), h.nights.begin() + night + 1}});
    bool alarm = false;
    const auto findings = detect_regressions(upto, options);
    for (size_t b = 0; b < findings.size(); ++b) {
      if (!findings[b].regression()) continue;
      alarm = true;
      if (out.first_flag[b] < 0) out.first_flag[b] = static_cast<int>(night);
    }
    out.alarm_nights += alarm ? 1 : 0;
  }
  return out;
}

// Calibration (figures in harness/README.md): 50 benchmarks with noise only (5 repetitions of 0.5-2% noise
// a night, plus a night-to-night wobble of 0.3%), 100 nights after a warm-up of 20: at most one night may
// raise an alarm.
TEST(NightlyCalibration, AtMostOneFalseAlarmInAHundredNoiseOnlyNightsOfFiftyBenchmarks) {
  for (uint64_t seed : {1u, 2u}) {
    std::vector<BenchmarkHistory> hs;
    std::mt19937_64 wobble_rng(seed * 7919);
    std::normal_distribution<double> wobble(0.0, 0.003);
    for (uint64_t b = 0; b < 50; ++b) {
      std::vector<double> level(120);
      for (auto& l : level) l = 100.0 * (1.0 + wobble(wobble_rng));
      const double noise = 0.005 + 0.015 * static_cast<double>(b) / 49.0;
      hs.push_back(history("bench" + std::to_string(b), 120, 5, noise, [&](size_t n) { return level[n]; },
                           seed * 1000 + b));
    }
    const Replay r = replay(hs, 20);
    EXPECT_LE(r.alarm_nights, 1) << "seed " << seed;
  }
}

// A 5% step in any of the 50 benchmarks is confirmed on its first or second night.
TEST(NightlyCalibration, FivePercentStepIsFoundOnItsFirstOrSecondNight) {
  constexpr size_t kStepNight = 40;
  // One benchmark steps at a time (the hardest case for BH), each of 10 across the range of noise.
  for (uint64_t step_in = 0; step_in < 50; step_in += 5) {
  std::vector<BenchmarkHistory> hs;
  for (uint64_t b = 0; b < 50; ++b) {
    const double noise = 0.005 + 0.015 * static_cast<double>(b) / 49.0;
    const bool stepped = b == step_in;
    hs.push_back(history("bench" + std::to_string(b), kStepNight + 3, 5, noise,
                         [&](size_t n) { return stepped && n >= kStepNight ? 105.0 : 100.0; }, 4000 + b));
  }
  const Replay r = replay(hs, kStepNight - 5);
  for (size_t b = 0; b < hs.size(); ++b) {
    if (b == step_in) {
      EXPECT_TRUE(r.first_flag[b] == static_cast<int>(kStepNight) || r.first_flag[b] == static_cast<int>(kStepNight + 1))
          << hs[b].name << " first flagged on night " << r.first_flag[b];
    } else {
      EXPECT_EQ(r.first_flag[b], -1) << hs[b].name;
    }
  }
  }
}

TEST(NightlyRegression, NewNightSlowdownIsFlagged) {
  std::vector<BenchmarkHistory> hs;
  for (uint64_t b = 0; b < 6; ++b) {
    hs.push_back(history("stable" + std::to_string(b), 10, 8, 0.005, [](size_t) { return 50.0; }, 10 + b));
  }
  hs.push_back(history("gemm", 10, 8, 0.005, [](size_t n) { return n == 9 ? 55.0 : 50.0; }, 99));
  const auto findings = detect_regressions(hs);
  const auto& gemm = findings.back();
  EXPECT_TRUE(gemm.new_night_regression);
  EXPECT_LT(gemm.new_night_p, 1e-6);
  EXPECT_NEAR(gemm.relative, 0.10, 0.01);
  for (size_t i = 0; i + 1 < findings.size(); ++i) EXPECT_FALSE(findings[i].regression()) << findings[i].name;
}

TEST(NightlyRegression, SpeedupIsNotARegression) {
  const auto h = history("attention", 10, 8, 0.005, [](size_t n) { return n == 9 ? 45.0 : 50.0; }, 5);
  const auto findings = detect_regressions({h});
  EXPECT_GT(findings[0].new_night_p, 0.99);
  EXPECT_FALSE(findings[0].regression());
}

// The minimum effect follows each benchmark's own noise: a 3% step is confirmed on a quiet benchmark
// and not on one whose nights wander by 2%.
TEST(NightlyRegression, MinimumEffectFollowsTheBenchmarksOwnNoise) {
  const auto quiet = history("quiet", 21, 5, 0.002, [](size_t n) { return n == 20 ? 103.0 : 100.0; }, 8);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> wobble(0.0, 0.02);
  std::vector<double> level(21);
  for (auto& l : level) l = 100.0 * (1.0 + wobble(rng));
  level[20] = level[19] * 1.03;
  const auto noisy = history("noisy", 21, 5, 0.002, [&](size_t n) { return level[n]; }, 10);
  const auto findings = detect_regressions({quiet, noisy});
  EXPECT_TRUE(findings[0].regression());
  EXPECT_NEAR(findings[0].min_effect, 0.02, 1e-12);  // the floor: 3 x its tiny night-to-night CV is less
  EXPECT_GT(findings[1].min_effect, 0.04);
  EXPECT_FALSE(findings[1].regression());
}

TEST(NightlyRegression, ShiftSeveralNightsAgoIsFoundByTheChangePoint) {
  // Slower from night 14 of 16: the change-point test, under the same BH as the rest, confirms it.
  const auto h = history("rmsnorm", 16, 5, 0.005, [](size_t n) { return n >= 13 ? 106.0 : 100.0; }, 3);
  const auto f = detect_regressions({h})[0];
  ASSERT_FALSE(f.change_points.empty());
  EXPECT_EQ(f.change_points.back(), 13u);
  EXPECT_NEAR(f.change_relative, 0.06, 0.01);
  EXPECT_LT(f.change_p, 1e-3);
  EXPECT_TRUE(f.change_point_regression);
}

TEST(NightlyRegression, OldChangePointIsNotTestedAgain) {
  const auto h = history("softmax", 30, 5, 0.005, [](size_t n) { return n >= 10 ? 104.0 : 100.0; }, 4);
  const auto f = detect_regressions({h})[0];
  ASSERT_FALSE(f.change_points.empty());
  EXPECT_EQ(f.change_points.back(), 10u);
  EXPECT_EQ(f.change_p, 1.0);
  EXPECT_FALSE(f.regression());
}

TEST(NightlyRegression, ShortHistoriesAreNotedNotTested) {
  const auto findings = detect_regressions({BenchmarkHistory{"new", {{1.0, 1.1}}},
                                            BenchmarkHistory{"young", {{1.0}, {2.0}, {9.0}}}});
  EXPECT_FALSE(findings[0].regression());
  EXPECT_TRUE(std::isnan(findings[0].baseline_mean));
  EXPECT_EQ(findings[1].new_night_p, 1.0);
  EXPECT_FALSE(findings[1].regression());
  EXPECT_NE(findings[1].note.find("the test needs 5"), std::string::npos);
  EXPECT_THROW(detect_regressions({BenchmarkHistory{"empty", {}}}), gpt::Error);
  EXPECT_NE(format_findings(findings).find("0 confirmed regression(s) in 2 benchmark(s)"), std::string::npos);
}

TEST(GoogleBenchmarkJson, KeepsIterationsAndSkipsAggregates) {
  const std::string json = R"({
    "context": {"date": "2025-01-01"},
    "benchmarks": [
      {"name": "BM_Gemm/512/repeats:2", "run_name": "BM_Gemm/512", "run_type": "iteration",
       "repetitions": 2, "repetition_index": 0, "real_time": 10.5, "cpu_time": 10.4, "time_unit": "us"},
      {"name": "BM_Gemm/512/repeats:2", "run_name": "BM_Gemm/512", "run_type": "iteration",
       "repetitions": 2, "repetition_index": 1, "real_time": 11.5, "cpu_time": 11.4, "time_unit": "us"},
      {"name": "BM_Gemm/512/repeats:2_mean", "run_name": "BM_Gemm/512", "run_type": "aggregate",
       "aggregate_name": "mean", "real_time": 11.0, "time_unit": "us"},
      {"name": "BM_Broken", "run_type": "iteration", "error_occurred": true, "real_time": 0}
    ]})";
  const auto samples = parse_google_benchmark_json(json, "gemm_bench.json");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].name, "BM_Gemm/512");
  EXPECT_EQ(samples[1].real_time, 11.5);
  EXPECT_EQ(samples[0].time_unit, "us");
  const auto run = parse_google_benchmark_run(json, "gemm_bench.json");
  EXPECT_EQ(run.context.date, "2025-01-01");
  EXPECT_TRUE(run.context.git_commit.empty());
}

// Issue: a unit change (us -> ns) read as a +99,672% regression.
TEST(GoogleBenchmarkJson, UnitsAreNormalisedToNanoseconds) {
  EXPECT_DOUBLE_EQ(to_nanoseconds(10.5, "us"), 10500.0);
  EXPECT_DOUBLE_EQ(to_nanoseconds(2, "ms"), 2e6);
  EXPECT_DOUBLE_EQ(to_nanoseconds(1, "s"), 1e9);
  EXPECT_THROW(to_nanoseconds(1, "fortnights"), gpt::Error);
  EXPECT_THROW(parse_google_benchmark_json(R"({"benchmarks":[{"name":"a","real_time":1,"time_unit":"h"}]})", "x"),
               gpt::Error);
}

TEST(GoogleBenchmarkJson, BadInputNamesTheSource) {
  try {
    parse_google_benchmark_json("{\"context\": {}}", "rmsnorm_bench.json");
    FAIL() << "expected gpt::Error";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm_bench.json"), std::string::npos);
  }
  EXPECT_THROW(parse_google_benchmark_json("not json", "x"), gpt::Error);
}

}  // namespace
}  // namespace gpt::harness::nightly
