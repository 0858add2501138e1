// Nightly regression decisions on synthetic benchmark histories, and Google Benchmark JSON parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "harness/nightly/change_point_tracking.h"
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

// Night-by-night replay, as the nightly job runs: the findings of night k see nights 0..k only and the change points
// reported before it (each reported once, then tracked: the nights before it leave the tests).
struct Replay {
  int alarm_nights = 0;         // nights with at least one confirmed regression
  std::vector<int> first_flag;  // per benchmark, the first night it was flagged (-1: never)
  std::vector<int> flags;       // per benchmark, the nights it was flagged
  std::vector<std::vector<TrackedChangePoint>> tracked;
};

Replay replay(const std::vector<BenchmarkHistory>& full, size_t warmup, const RegressionOptions& options = {},
              size_t nights = 0) {
  Replay out;
  out.first_flag.assign(full.size(), -1);
  out.flags.assign(full.size(), 0);
  out.tracked.resize(full.size());
  const size_t end = nights > 0 ? nights : full[0].nights.size();
  for (size_t night = warmup; night < end; ++night) {
    std::vector<BenchmarkHistory> upto;
    for (size_t b = 0; b < full.size(); ++b) {
      upto.push_back({full[b].name, {full[b].nights.begin(), full[b].nights.begin() + night + 1}});
      upto.back().level_start = level_start(out.tracked[b]);
    }
    bool alarm = false;
    const auto findings = detect_regressions(upto, options);
    for (size_t b = 0; b < findings.size(); ++b) {
      track_change_points(out.tracked[b], upto[b], findings[b]);
      if (!findings[b].regression()) continue;
      alarm = true;
      ++out.flags[b];
      if (out.first_flag[b] < 0) out.first_flag[b] = static_cast<int>(night);
    }
    out.alarm_nights += alarm ? 1 : 0;
  }
  return out;
}

// Calibration (figures in harness/README.md): 50 benchmarks with noise only (5 repetitions of 0.5-2% noise
// a night, plus a night-to-night wobble of 0.3%), 100 nights after a warm-up of 20, two seeds (200 nights), the
// change-point history included: no night raises an alarm.
TEST(NightlyCalibration, NoFalseAlarmInTwoHundredNoiseOnlyNightsOfFiftyBenchmarks) {
  for (uint64_t seed : {1u, 2u}) {
    std::vector<BenchmarkHistory> hs;
    std::mt19937_64 wobble_rng(seed * 7919);
    std::normal_distribution<double> wobble(0.0, 0.003);
    for (uint64_t b = 0; b < 50; ++b) {
      std::vector<double> level(120);
      for (auto& l : level) l = 100.0 * (1.0 + wobble(wobble_rng));
      const double noise = 0.005 + 0.015 * static_cast<double>(b) / 49.0;
      hs.push_back(history(
          "bench" + std::to_string(b), 120, 5, noise, [&](size_t n) { return level[n]; }, seed * 1000 + b));
    }
    const Replay r = replay(hs, 20);
    EXPECT_EQ(r.alarm_nights, 0) << "seed " << seed;
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
      hs.push_back(history(
          "bench" + std::to_string(b), kStepNight + 3, 5, noise,
          [&](size_t n) { return stepped && n >= kStepNight ? 105.0 : 100.0; }, 4000 + b));
    }
    const Replay r = replay(hs, kStepNight - 5);
    for (size_t b = 0; b < hs.size(); ++b) {
      if (b == step_in) {
        EXPECT_TRUE(r.first_flag[b] == static_cast<int>(kStepNight) ||
                    r.first_flag[b] == static_cast<int>(kStepNight + 1))
            << hs[b].name << " first flagged on night " << r.first_flag[b];
      } else {
        EXPECT_EQ(r.first_flag[b], -1) << hs[b].name;
      }
    }
  }
}

// A step is reported once, on the night it is found; the nights after it at the same level flag nothing, and the
// change point is tracked: open, then confirmed once the level has held, resolved when the level comes back.
TEST(NightlyChangePoints, AStepIsReportedOnceThenTracked) {
  constexpr size_t kStep = 30, kBack = 45;
  auto level = [](size_t n) { return n >= kStep && n < kBack ? 105.0 : 100.0; };
  const std::vector<BenchmarkHistory> hs = {history("gemm", 60, 5, 0.005, level, 21),
                                            history(
                                                "quiet", 60, 5, 0.005, [](size_t) { return 100.0; }, 22)};
  Replay r = replay(hs, 20, {}, kBack);
  EXPECT_TRUE(r.first_flag[0] == static_cast<int>(kStep) || r.first_flag[0] == static_cast<int>(kStep + 1))
      << r.first_flag[0];
  EXPECT_EQ(r.flags[0], 1);  // reported on one night only, though 14 more nights run at the slower level
  EXPECT_EQ(r.flags[1], 0);
  ASSERT_EQ(r.tracked[0].size(), 1u);
  EXPECT_EQ(r.tracked[0][0].start_night, kStep);
  EXPECT_EQ(r.tracked[0][0].status, ChangePointStatus::confirmed);
  EXPECT_NEAR(r.tracked[0][0].relative, 0.05, 0.01);
  EXPECT_NEAR(r.tracked[0][0].before_mean, 100.0, 0.5);

  r = replay(hs, 20, {}, 60);  // the level returns on night 45
  ASSERT_EQ(r.tracked[0].size(), 1u);
  EXPECT_EQ(r.tracked[0][0].status, ChangePointStatus::resolved);
  EXPECT_EQ(r.tracked[0][0].resolved_night, kBack);
  EXPECT_EQ(r.flags[0], 1);
}

// An unchanged night after a reported step: the old code flagged it again and again (the step stays "recent" to
// the change-point test, and the history before it keeps the new-night test above its minimum effect).
TEST(NightlyChangePoints, AnUnchangedNightAfterAReportedStepFlagsNothing) {
  const auto h = history(
      "softmax", 33, 5, 0.005, [](size_t n) { return n >= 30 ? 104.0 : 100.0; }, 4);
  std::vector<TrackedChangePoint> tracked;
  BenchmarkHistory first_night = h;
  first_night.nights.resize(31);
  const auto found = detect_regressions({first_night})[0];
  ASSERT_TRUE(found.regression());
  EXPECT_EQ(found.regression_start, 30u);
  EXPECT_EQ(found.regression_start_label, "night 30");
  EXPECT_TRUE(track_change_points(tracked, first_night, found));
  for (size_t nights : {32u, 33u}) {
    BenchmarkHistory later = h;
    later.nights.resize(nights);
    later.level_start = level_start(tracked);
    const auto f = detect_regressions({later})[0];
    EXPECT_FALSE(f.regression()) << nights << " nights: " << format_findings({f});
    EXPECT_FALSE(track_change_points(tracked, later, f));
    EXPECT_EQ(format_findings({f}).find("change point"), std::string::npos) << format_findings({f});
  }
  EXPECT_EQ(tracked.size(), 1u);
}

TEST(NightlyChangePoints, StatusesParseAndPrint) {
  for (auto status : {ChangePointStatus::open, ChangePointStatus::confirmed, ChangePointStatus::resolved}) {
    EXPECT_EQ(parse_change_point_status(to_string(status)), status);
  }
  EXPECT_THROW(parse_change_point_status("closed"), gpt::Error);
}

TEST(NightlyRegression, NewNightSlowdownIsFlagged) {
  std::vector<BenchmarkHistory> hs;
  for (uint64_t b = 0; b < 6; ++b) {
    hs.push_back(history(
        "stable" + std::to_string(b), 10, 8, 0.005, [](size_t) { return 50.0; }, 10 + b));
  }
  hs.push_back(history(
      "gemm", 10, 8, 0.005, [](size_t n) { return n == 9 ? 55.0 : 50.0; }, 99));
  const auto findings = detect_regressions(hs);
  const auto& gemm = findings.back();
  EXPECT_TRUE(gemm.new_night_regression);
  EXPECT_LT(gemm.new_night_p, 1e-6);
  EXPECT_NEAR(gemm.relative, 0.10, 0.01);
  for (size_t i = 0; i + 1 < findings.size(); ++i) EXPECT_FALSE(findings[i].regression()) << findings[i].name;
}

TEST(NightlyRegression, SpeedupIsNotARegression) {
  const auto h = history(
      "attention", 10, 8, 0.005, [](size_t n) { return n == 9 ? 45.0 : 50.0; }, 5);
  const auto findings = detect_regressions({h});
  EXPECT_GT(findings[0].new_night_p, 0.99);
  EXPECT_FALSE(findings[0].regression());
}

// The minimum effect follows each benchmark's own noise: a 3% step is confirmed on a quiet benchmark
// and not on one whose nights wander by 2%.
TEST(NightlyRegression, MinimumEffectFollowsTheBenchmarksOwnNoise) {
  const auto quiet = history(
      "quiet", 21, 5, 0.002, [](size_t n) { return n == 20 ? 103.0 : 100.0; }, 8);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> wobble(0.0, 0.02);
  std::vector<double> level(21);
  for (auto& l : level) l = 100.0 * (1.0 + wobble(rng));
  level[20] = level[19] * 1.03;
  const auto noisy = history(
      "noisy", 21, 5, 0.002, [&](size_t n) { return level[n]; }, 10);
  const auto findings = detect_regressions({quiet, noisy});
  EXPECT_TRUE(findings[0].regression());
  EXPECT_NEAR(findings[0].min_effect, 0.02, 1e-12);  // the floor: 3 x its tiny night-to-night CV is less
  EXPECT_GT(findings[1].min_effect, 0.02);           // above the floor: its own night-to-night CV
  EXPECT_NEAR(findings[1].min_effect, RegressionOptions{}.noise_factor * findings[1].noise_cv, 1e-12);
  EXPECT_FALSE(findings[1].regression());
}

TEST(NightlyRegression, ShiftSeveralNightsAgoIsFoundByTheChangePoint) {
  // Slower from night 14 of 16: the change-point test, under the same BH as the rest, confirms it.
  const auto h = history(
      "rmsnorm", 16, 5, 0.005, [](size_t n) { return n >= 13 ? 106.0 : 100.0; }, 3);
  const auto f = detect_regressions({h})[0];
  ASSERT_FALSE(f.change_points.empty());
  EXPECT_EQ(f.change_points.back(), 13u);
  EXPECT_NEAR(f.change_relative, 0.06, 0.01);
  EXPECT_LT(f.change_p, 1e-3);
  EXPECT_TRUE(f.change_point_regression);
}

TEST(NightlyRegression, OldChangePointIsNotTestedAgain) {
  const auto h = history(
      "softmax", 30, 5, 0.005, [](size_t n) { return n >= 10 ? 104.0 : 100.0; }, 4);
  const auto f = detect_regressions({h})[0];
  ASSERT_FALSE(f.change_points.empty());
  EXPECT_EQ(f.change_points.back(), 10u);
  EXPECT_TRUE(std::isnan(f.change_p));  // not tested: the change point is not recent
  EXPECT_FALSE(f.regression());
}

TEST(NightlyRegression, ShortHistoriesAreNotedNotTested) {
  const auto findings =
      detect_regressions({BenchmarkHistory{"new", {{1.0, 1.1}}}, BenchmarkHistory{"young", {{1.0}, {2.0}, {9.0}}}});
  EXPECT_FALSE(findings[0].regression());
  EXPECT_TRUE(std::isnan(findings[0].baseline_mean));
  EXPECT_TRUE(std::isnan(findings[1].new_night_p));  // not tested: too little history
  // A test that did not run prints no p-value (it printed p=1).
  EXPECT_NE(format_findings({findings[1]}).find("not tested"), std::string::npos) << format_findings({findings[1]});
  EXPECT_EQ(format_findings({findings[1]}).find("p="), std::string::npos) << format_findings({findings[1]});
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

// 1e308 ms parses as a finite double but is +inf in nanoseconds, the unit it is stored in.
TEST(GoogleBenchmarkJson, TimesAreCheckedInNanoseconds) {
  const auto entry = [](const std::string& time, const std::string& unit) {
    return R"({"benchmarks":[{"name":"BM_A","real_time":)" + time + R"(,"time_unit":")" + unit + R"("}]})";
  };
  EXPECT_THROW(parse_google_benchmark_json(entry("1e308", "ms"), "x.json"), gpt::Error);
  EXPECT_THROW(parse_google_benchmark_json(entry("1e300", "s"), "x.json"), gpt::Error);
  EXPECT_THROW(parse_google_benchmark_json(entry("1.0000001e15", "ns"), "x.json"), gpt::Error);
  EXPECT_THROW(parse_google_benchmark_json(entry("-1", "ns"), "x.json"), gpt::Error);
  EXPECT_EQ(parse_google_benchmark_json(entry("1e15", "ns"), "x.json").size(), 1u);  // the limit itself
  EXPECT_EQ(parse_google_benchmark_json(entry("1e6", "s"), "x.json").size(), 1u);
  try {
    parse_google_benchmark_json(entry("1e308", "ms"), "gemm.json");
    FAIL() << "expected gpt::Error";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm.json: benchmark 'BM_A': real_time 1e+308 ms"), std::string::npos)
        << e.what();
  }
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
