// Power of the one-sided one-sample t-test via Boost.Math's non-central t (see power.h for the model).
#include "harness/stats/power.h"

#include <algorithm>
#include <boost/math/distributions/non_central_t.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>

#include "harness/stats/validate.h"
#include "base/check.h"

namespace gpt::harness::stats {

namespace {

double critical_t(std::size_t n, double alpha) {
  const boost::math::students_t_distribution<double> central(static_cast<double>(n) - 1.0);
  return boost::math::quantile(boost::math::complement(central, alpha));
}

}  // namespace

double t_test_power(std::size_t n, double effect, double alpha) {
  GPT_CHECK(n >= 2, "t_test_power: needs n >= 2 runs, got ", n);
  GPT_CHECK(!std::isnan(effect), "t_test_power: effect must not be NaN");
  detail::require_probability(alpha, "t_test_power", "alpha");
  if (std::isinf(effect)) return effect > 0 ? 1.0 : 0.0;
  const double df = static_cast<double>(n) - 1.0;
  const double t_crit = critical_t(n, alpha);
  const double ncp = effect * std::sqrt(static_cast<double>(n));
  // Far beyond the critical value the power is 1 (or 0) to double precision, and Boost's non-central t does not
  // converge there (a --std of 1e-300 gives an effect near 1e298): missing by then needs the sample's standard
  // deviation above 40 times its expected size, or a normal draw 40 deviations out.
  if (ncp > 40.0 * std::max(1.0, t_crit)) return 1.0;
  if (ncp < -40.0 && t_crit >= 0) return 0.0;
  if (ncp == 0.0) {
    const boost::math::students_t_distribution<double> central(df);
    return boost::math::cdf(boost::math::complement(central, t_crit));
  }
  const boost::math::non_central_t_distribution<double> shifted(df, ncp);
  return boost::math::cdf(boost::math::complement(shifted, t_crit));
}

std::optional<std::size_t> runs_for_power(double effect, double alpha, double power, std::size_t max_runs) {
  detail::require_probability(alpha, "runs_for_power", "alpha");
  detail::require_probability(power, "runs_for_power", "power");
  GPT_CHECK(!std::isnan(effect), "runs_for_power: effect must not be NaN");
  if (!(effect > 0)) return std::nullopt;
  const auto reaches = [&](std::size_t n) { return t_test_power(n, effect, alpha) >= power; };
  // Power grows with n for a positive effect (the non-centrality grows like √n, the critical t falls),
  // so bracket by doubling, then bisect.
  std::size_t hi = 2;
  while (!reaches(hi)) {
    if (hi >= max_runs) return std::nullopt;
    hi = std::min(hi * 2, max_runs);
  }
  std::size_t lo = hi / 2;  // does not reach (or is below 2)
  if (lo < 2) return hi;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (reaches(mid) ? hi : lo) = mid;
  }
  return hi;
}

double detectable_effect(std::size_t n, double alpha, double power) {
  GPT_CHECK(n >= 2, "detectable_effect: needs n >= 2 runs, got ", n);
  detail::require_probability(alpha, "detectable_effect", "alpha");
  detail::require_probability(power, "detectable_effect", "power");
  // Power at zero effect is alpha; a power below alpha is reached by a negative effect.
  if (power == alpha) return 0.0;
  double lo = 0.0, hi = 1.0;
  if (power < alpha) {
    lo = -1.0, hi = 0.0;
    while (t_test_power(n, lo, alpha) > power) lo *= 2;
  } else {
    while (t_test_power(n, hi, alpha) < power) {
      lo = hi;
      hi *= 2;
      GPT_CHECK(hi < 1e12, "detectable_effect: no effect reaches power ", power, " with ", n, " runs");
    }
  }
  for (int i = 0; i < 200 && hi - lo > 1e-13 * std::max(1.0, std::abs(hi)); ++i) {
    const double mid = 0.5 * (lo + hi);
    (t_test_power(n, mid, alpha) < power ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

PowerPlan plan_power(double mean, double std, double target, double alpha, double power,
                     const std::vector<std::size_t>& runs_list) {
  GPT_CHECK(std::isfinite(mean), "plan_power: mean must be finite, got ", mean);
  GPT_CHECK(std::isfinite(target), "plan_power: target must be finite, got ", target);
  GPT_CHECK(std::isfinite(std) && std >= 0.0, "plan_power: std must be finite and >= 0, got ", std);
  detail::require_probability(alpha, "plan_power", "alpha");
  detail::require_probability(power, "plan_power", "power");
  PowerPlan plan{mean, std, target, alpha, power, 0.0, std::nullopt, {}};
  const double gap = target - mean;
  if (std > 0) {
    plan.effect = gap / std;
  } else {
    plan.effect =
        gap > 0 ? std::numeric_limits<double>::infinity() : (gap < 0 ? -std::numeric_limits<double>::infinity() : 0.0);
  }
  plan.runs_needed = std::isinf(plan.effect) ? (plan.effect > 0 ? std::optional<std::size_t>(2) : std::nullopt)
                                             : runs_for_power(plan.effect, alpha, power);
  for (const std::size_t n : runs_list) {
    GPT_CHECK(n >= 2, "plan_power: each run count must be >= 2, got ", n);
    const double improvement = detectable_effect(n, alpha, power) * std;
    plan.rows.push_back({n, t_test_power(n, plan.effect, alpha), improvement, target - improvement});
  }
  return plan;
}

}  // namespace gpt::harness::stats
