// Nightly regression decisions on synthetic benchmark histories, and Google Benchmark JSON parsing.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "harness/nightly/regression.h"
#include "kernels/check.h"

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

TEST(NightlyRegression, StableHistoriesAreQuiet) {
  std::vector<BenchmarkHistory> hs;
  for (uint64_t b = 0; b < 8; ++b) {
    hs.push_back(history("bench" + std::to_string(b), 20, 5, 0.01, [](size_t) { return 100.0; }, b + 1));
  }
  const auto findings = detect_regressions(hs);
  ASSERT_EQ(findings.size(), 8u);
  int flagged = 0;
  for (const auto& f : findings) flagged += f.regression() ? 1 : 0;
  EXPECT_LE(flagged, 1);  // BH at 5% plus a 1% effect floor: false alarms are rare
}

TEST(NightlyRegression, LatestNightSlowdownIsFlaggedByWelch) {
  std::vector<BenchmarkHistory> hs;
  for (uint64_t b = 0; b < 6; ++b) {
    hs.push_back(history("stable" + std::to_string(b), 10, 8, 0.005, [](size_t) { return 50.0; }, 10 + b));
  }
  hs.push_back(history("gemm", 10, 8, 0.005, [](size_t n) { return n == 9 ? 55.0 : 50.0; }, 99));
  const auto findings = detect_regressions(hs);
  const auto& gemm = findings.back();
  EXPECT_TRUE(gemm.welch_regression);
  EXPECT_LT(gemm.welch_p, 1e-6);
  EXPECT_FALSE(gemm.change_point_regression);  // one night is below the E-divisive segment minimum
  for (size_t i = 0; i + 1 < findings.size(); ++i) EXPECT_FALSE(findings[i].welch_regression) << findings[i].name;
}

TEST(NightlyRegression, SpeedupIsNotARegression) {
  const auto h = history("attention", 10, 8, 0.005, [](size_t n) { return n == 9 ? 45.0 : 50.0; }, 5);
  const auto findings = detect_regressions({h});
  EXPECT_LT(findings[0].welch_p, 1e-6);
  EXPECT_FALSE(findings[0].regression());
}

TEST(NightlyRegression, ShiftSeveralNightsAgoIsFoundByEDivisive) {
  // Slower from night 12 of 16: the latest-vs-previous test sees nothing, the change point does.
  const auto h = history("rmsnorm", 16, 5, 0.005, [](size_t n) { return n >= 12 ? 104.0 : 100.0; }, 3);
  const auto findings = detect_regressions({h});
  const auto& f = findings[0];
  ASSERT_FALSE(f.change_points.empty());
  EXPECT_EQ(f.change_points.back(), 12u);
  EXPECT_NEAR(f.change_relative, 0.04, 0.005);
  EXPECT_TRUE(f.change_point_regression);
  EXPECT_FALSE(f.welch_regression);
}

TEST(NightlyRegression, OldChangePointIsNotReportedAgain) {
  const auto h = history("softmax", 30, 5, 0.005, [](size_t n) { return n >= 10 ? 104.0 : 100.0; }, 4);
  RegressionOptions options;
  options.recent_nights = 5;
  const auto f = detect_regressions({h}, options)[0];
  ASSERT_FALSE(f.change_points.empty());
  EXPECT_EQ(f.change_points.back(), 10u);
  EXPECT_FALSE(f.change_point_regression);
}

TEST(NightlyRegression, BenjaminiHochbergTamesManyMarginalTests) {
  // 20 unchanged benchmarks, 3 noisy repetitions a night: about one would cross p < 0.05 alone;
  // BH across the family keeps false discoveries in check.
  std::vector<BenchmarkHistory> hs;
  for (uint64_t b = 0; b < 20; ++b) {
    hs.push_back(history("null" + std::to_string(b), 4, 3, 0.02, [](size_t) { return 10.0; }, 200 + b));
  }
  int flagged = 0;
  for (const auto& f : detect_regressions(hs)) flagged += f.welch_regression ? 1 : 0;
  EXPECT_LE(flagged, 1);
}

TEST(NightlyRegression, FirstNightAndSingleRepetitionAreHandled) {
  const auto findings = detect_regressions({BenchmarkHistory{"new", {{1.0, 1.1}}},
                                            BenchmarkHistory{"single", {{1.0}, {2.0}}}});
  EXPECT_FALSE(findings[0].regression());
  EXPECT_NE(findings[0].previous_mean, findings[0].previous_mean);  // NaN: nothing to compare with
  EXPECT_EQ(findings[1].welch_p, 1.0);
  EXPECT_FALSE(findings[1].regression());
  EXPECT_THROW(detect_regressions({BenchmarkHistory{"empty", {}}}), gpt::Error);
  EXPECT_NE(format_findings(findings).find("0 regression(s) in 2 benchmark(s)"), std::string::npos);
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
