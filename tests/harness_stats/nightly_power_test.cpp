// The nightly detector's power and false-alarm rate, measured on simulated histories (fixed seeds) decided night by
// night as the nightly job decides them: docs/nightly-power.md publishes the figures this test prints, and the test
// asserts the targets stated there.
//
// Benchmark b of a suite has 5 repetitions a night; its night mean wanders with a relative standard deviation
// sigma_b, its night-to-night noise (1.25% .. 3% across a suite of 50, so that 2·sigma stays above the 2% floor of
// the minimum effect; 60% of the variance is a wobble of the whole night, 40% the repetitions' own noise). One
// benchmark steps up by k·sigma_b after 30 nights; the step's night and the three after it are decided in turn, with
// the change points reported before each night tracked as the nightly job tracks them.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness/nightly/change_point_tracking.h"
#include "harness/nightly/regression.h"

namespace gpt::harness::nightly {
namespace {

constexpr size_t kRepetitions = 5;
constexpr size_t kHistory = 30;     // nights before the step
constexpr size_t kNightsAfter = 4;  // the step's night and the three after it

// The night-to-night noise of benchmark b of n (a lone benchmark sits in the middle of the range).
double night_sigma(size_t b, size_t n) {
  return n == 1 ? 0.02 : 0.0125 + 0.0175 * static_cast<double>(b) / static_cast<double>(n - 1);
}

// `nights` nights of one benchmark; from `step_night` on its level is (1 + step·sigma) times higher.
BenchmarkHistory simulate(double sigma, size_t nights, size_t step_night, double step, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> wobble(0.0, std::sqrt(0.6) * sigma);
  std::normal_distribution<double> repetition(0.0, std::sqrt(0.4 * kRepetitions) * sigma);
  BenchmarkHistory h{"bench" + std::to_string(seed), {}};
  for (size_t n = 0; n < nights; ++n) {
    const double level = 100.0 * (1.0 + (n >= step_night ? step * sigma : 0.0));
    const double night = wobble(rng);
    std::vector<double> values;
    for (size_t r = 0; r < kRepetitions; ++r) values.push_back(level * (1.0 + night + repetition(rng)));
    h.nights.push_back(std::move(values));
  }
  return h;
}

// Decides nights from..end in turn, each seeing the nights up to it and the change points reported before it.
// Returns, per benchmark, the nights (counted from `from`) on which it was flagged.
std::vector<std::vector<size_t>> replay_suite(const std::vector<BenchmarkHistory>& suite, size_t from) {
  std::vector<std::vector<size_t>> flagged(suite.size());
  std::vector<std::vector<TrackedChangePoint>> tracked(suite.size());
  for (size_t night = from; night < suite[0].nights.size(); ++night) {
    std::vector<BenchmarkHistory> upto;
    for (size_t b = 0; b < suite.size(); ++b) {
      upto.push_back({suite[b].name, {suite[b].nights.begin(), suite[b].nights.begin() + night + 1}});
      upto.back().level_start = level_start(tracked[b]);
    }
    const auto findings = detect_regressions(upto, RegressionOptions{});
    for (size_t b = 0; b < suite.size(); ++b) {
      track_change_points(tracked[b], upto[b], findings[b]);
      if (findings[b].regression()) flagged[b].push_back(night - from);
    }
  }
  return flagged;
}

struct PowerRow {
  double step = 0;                        // in units of the benchmark's night-to-night noise
  std::array<double, kNightsAfter> by{};  // fraction flagged by night j after the step (0: the step's night)
};

// `suites` simulated suites of `benchmarks` per step size; suite s plants the step in benchmark (7·s) mod n.
std::vector<PowerRow> power_curve(size_t benchmarks, const std::vector<double>& steps, size_t suites) {
  std::vector<PowerRow> rows;
  for (double step : steps) {
    PowerRow row{step, {}};
    for (size_t s = 0; s < suites; ++s) {
      const size_t stepped = (7 * s) % benchmarks;
      std::vector<BenchmarkHistory> suite;
      for (size_t b = 0; b < benchmarks; ++b) {
        suite.push_back(simulate(night_sigma(b, benchmarks), kHistory + kNightsAfter, kHistory,
                                 b == stepped ? step : 0.0, 1000 * s + b));
      }
      const auto flagged = replay_suite(suite, kHistory);
      if (flagged[stepped].empty()) continue;
      for (size_t j = flagged[stepped].front(); j < kNightsAfter; ++j) row.by[j] += 1.0 / static_cast<double>(suites);
    }
    rows.push_back(row);
  }
  return rows;
}

struct FalseAlarms {
  size_t nights = 0, alarm_nights = 0;      // suite nights, and those with at least one benchmark flagged
  size_t benchmark_nights = 0, alarms = 0;  // benchmark nights, and those flagged
};

// `nights` noise-only nights after 30 of history, for each of `seeds` suites of `benchmarks`.
FalseAlarms false_alarms(size_t benchmarks, size_t seeds, size_t nights) {
  FalseAlarms fa;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    std::vector<BenchmarkHistory> suite;
    for (size_t b = 0; b < benchmarks; ++b) {
      suite.push_back(
          simulate(night_sigma(b, benchmarks), kHistory + nights, kHistory + nights, 0.0, 77000 * seed + b));
    }
    const auto flagged = replay_suite(suite, kHistory);
    std::vector<bool> alarm(nights, false);
    for (const auto& nights_flagged : flagged) {
      fa.alarms += nights_flagged.size();
      for (size_t j : nights_flagged) alarm[j] = true;
    }
    fa.nights += nights;
    fa.benchmark_nights += nights * benchmarks;
    for (bool a : alarm) fa.alarm_nights += a ? 1 : 0;
  }
  return fa;
}

std::string format_curve(const std::vector<PowerRow>& rows) {
  std::string out = "| step / noise | step's night | +1 night | +2 nights | +3 nights |\n|---|---|---|---|---|\n";
  char line[128];
  for (const PowerRow& r : rows) {
    std::snprintf(line, sizeof line, "| %.1f | %.0f%% | %.0f%% | %.0f%% | %.0f%% |\n", r.step, 100 * r.by[0],
                  100 * r.by[1], 100 * r.by[2], 100 * r.by[3]);
    out += line;
  }
  return out;
}

// Targets (docs/nightly-power.md): in a suite of 50, a step of 4× a benchmark's night-to-night noise is flagged by
// the third night after it in at least 95% of the suites, and no more than 1 night in 100 raises a false alarm.
TEST(NightlyPower, FiftyBenchmarkSuite) {
  const auto rows = power_curve(50, {1.0, 2.0, 3.0, 4.0, 5.0}, 20);
  std::printf("%s", format_curve(rows).c_str());
  for (const PowerRow& r : rows) {
    if (r.step >= 4.0) {
      EXPECT_GE(r.by[3], 0.95) << "step " << r.step << "\n" << format_curve(rows);
    }
    for (size_t j = 1; j < kNightsAfter; ++j) EXPECT_GE(r.by[j], r.by[j - 1]);  // cumulative
  }
  const FalseAlarms fa = false_alarms(50, 2, 100);
  std::printf("false alarms: %zu of %zu suite nights, %zu of %zu benchmark nights\n", fa.alarm_nights, fa.nights,
              fa.alarms, fa.benchmark_nights);
  EXPECT_LE(100 * fa.alarm_nights, fa.nights) << "more than 1 night in 100 with a false alarm";
}

// One benchmark alone (no other tests in the night's Benjamini–Hochberg procedure): a step of 3× its noise is
// flagged by the third night after it in at least 95% of histories; at most 1 false alarm in 100 nights.
TEST(NightlyPower, OneBenchmarkAlone) {
  const auto rows = power_curve(1, {1.0, 2.0, 3.0, 4.0}, 40);
  std::printf("%s", format_curve(rows).c_str());
  for (const PowerRow& r : rows) {
    if (r.step >= 3.0) {
      EXPECT_GE(r.by[3], 0.95) << "step " << r.step << "\n" << format_curve(rows);
    }
  }
  const FalseAlarms fa = false_alarms(1, 4, 250);
  std::printf("false alarms: %zu of %zu nights\n", fa.alarm_nights, fa.nights);
  EXPECT_LE(100 * fa.alarm_nights, fa.nights) << "more than 1 night in 100 with a false alarm";
}

}  // namespace
}  // namespace gpt::harness::nightly
