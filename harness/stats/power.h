#pragma once
// Power analysis for the record test (the one-sided one-sample t-test of H1: mean < target).
//
// With n runs of true mean mu and standard deviation sigma, the statistic (target − mean)/(s/√n) follows a
// non-central t with n − 1 degrees of freedom and non-centrality δ√n, where δ = (target − mu)/sigma is the
// standardized improvement. The test rejects when that statistic exceeds t_{1−alpha, n−1}, so
//   power(n, δ) = 1 − F_nct(t_{1−alpha, n−1}; n − 1, δ√n).
// Distributions come from Boost.Math (non_central_t, students_t). Tested against independent numerical
// integration in tests/fixtures/power_expected.json.
#include <cstddef>
#include <optional>
#include <vector>

namespace gpt::harness::stats {

// Probability that n runs (n >= 2) with standardized improvement `effect` = (target − mu)/sigma pass the test
// at level alpha. effect may be 0 (power = alpha) or negative (power < alpha).
double t_test_power(std::size_t n, double effect, double alpha);

// Smallest n >= 2 whose power reaches `power`; nullopt when effect <= 0 or more than `max_runs` are needed.
std::optional<std::size_t> runs_for_power(double effect, double alpha, double power, std::size_t max_runs = 1'000'000);

// Smallest standardized improvement that n runs (n >= 2) detect with the given power.
double detectable_effect(std::size_t n, double alpha, double power);

// A plan for a record attempt from an estimate of the mean and sd of the final val loss.
struct PowerPlan {
  double mean = 0, std = 0, target = 0, alpha = 0, power = 0;
  double effect = 0;                       // (target − mean)/std; +inf when std == 0 and mean < target
  std::optional<std::size_t> runs_needed;  // for `power` at this effect
  struct Row {
    std::size_t runs;
    double power;            // at the estimated effect
    double min_improvement;  // smallest target − mu detectable with `power` (in loss units)
    double max_mean;         // target − min_improvement: the mean the runs must reach
  };
  std::vector<Row> rows;
};

// Rows for each n in `runs_list` (each >= 2). std must be > 0 for the rows' improvements to be finite;
// std == 0 gives effect ±inf and improvements of 0.
PowerPlan plan_power(double mean, double std, double target, double alpha, double power,
                     const std::vector<std::size_t>& runs_list);

}  // namespace gpt::harness::stats
