// Power analysis of the record test against independent reference values (tests/fixtures/power_expected.json,
// written by tests/scripts/gen_power_fixtures.py by numerical integration without Boost), plus the properties
// every power function must have.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/stats/power.h"
#include "base/check.h"

namespace gpt::harness::stats {
namespace {

const nlohmann::json& fixtures() {
  static const nlohmann::json data = [] {
    const std::string path = std::string(SPEEDRUN_FIXTURES_DIR) + "/power_expected.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  }();
  return data;
}

TEST(PowerFixtures, PowerMatchesIntegration) {
  ASSERT_GE(fixtures().at("power").size(), 10u);
  for (const auto& c : fixtures().at("power")) {
    const auto n = c.at("n").get<std::size_t>();
    const double effect = c.at("effect"), alpha = c.at("alpha"), expected = c.at("power");
    EXPECT_NEAR(t_test_power(n, effect, alpha), expected, 1e-8 + 1e-7 * expected)
        << "n " << n << " effect " << effect << " alpha " << alpha;
  }
}

TEST(PowerFixtures, RunsForPowerMatchesIntegration) {
  ASSERT_GE(fixtures().at("runs_for_power").size(), 5u);
  for (const auto& c : fixtures().at("runs_for_power")) {
    const double effect = c.at("effect"), alpha = c.at("alpha"), power = c.at("power");
    const auto runs = runs_for_power(effect, alpha, power);
    ASSERT_TRUE(runs.has_value()) << "effect " << effect;
    EXPECT_EQ(*runs, c.at("runs").get<std::size_t>())
        << "effect " << effect << " alpha " << alpha << " power " << power;
  }
}

TEST(PowerFixtures, DetectableEffectMatchesIntegration) {
  for (const auto& c : fixtures().at("detectable_effect")) {
    const auto n = c.at("n").get<std::size_t>();
    const double alpha = c.at("alpha"), power = c.at("power"), expected = c.at("effect");
    EXPECT_NEAR(detectable_effect(n, alpha, power), expected, 1e-6 * expected) << "n " << n << " alpha " << alpha;
  }
}

TEST(PowerProperties, EqualsAlphaAtZeroEffect) {
  for (const double alpha : {0.001, 0.01, 0.05, 0.2}) {
    for (const std::size_t n : {2u, 3u, 10u, 100u, 5000u}) {
      EXPECT_NEAR(t_test_power(n, 0.0, alpha), alpha, 1e-12) << n;
    }
  }
}

TEST(PowerProperties, IncreasesWithRunsAndEffect) {
  double previous = 0.0;
  for (std::size_t n = 2; n <= 200; n += 3) {
    const double p = t_test_power(n, 0.3, 0.01);
    EXPECT_GT(p, previous) << "n " << n;
    previous = p;
  }
  previous = 0.0;
  for (double effect = -1.0; effect <= 3.0; effect += 0.25) {
    const double p = t_test_power(10, effect, 0.05);
    EXPECT_GT(p, previous) << "effect " << effect;
    previous = p;
  }
  EXPECT_LT(t_test_power(10, -0.5, 0.05), 0.05);
  EXPECT_GT(t_test_power(10, 5.0, 0.05), 0.999);
}

TEST(PowerProperties, RoundTripsBetweenRunsAndEffect) {
  for (const std::size_t n : {4u, 16u, 64u}) {
    const double effect = detectable_effect(n, 0.01, 0.8);
    EXPECT_NEAR(t_test_power(n, effect, 0.01), 0.8, 1e-9);
    // The runs needed at exactly that effect are n (or n - 1 when rounding lands just above).
    const auto runs = runs_for_power(effect * (1 + 1e-9), 0.01, 0.8);
    ASSERT_TRUE(runs);
    EXPECT_EQ(*runs, n);
  }
}

TEST(PowerProperties, ApproachesTheNormalApproximationForLargeSamples) {
  // For large n the t-test is a z-test: n ≈ ((z_{1-alpha} + z_{power}) / d)^2.
  const double z_alpha = 2.3263478740408408, z_power = 0.8416212335729143;  // alpha 0.01, power 0.8
  const double effect = 0.05;
  const double normal_n = std::pow((z_alpha + z_power) / effect, 2);
  const auto runs = runs_for_power(effect, 0.01, 0.8);
  ASSERT_TRUE(runs);
  EXPECT_NEAR(static_cast<double>(*runs), normal_n, 0.005 * normal_n);
  EXPECT_GE(static_cast<double>(*runs), normal_n);  // the t-test needs slightly more than the z-test
}

TEST(PowerPlan, RowsAndRunsNeeded) {
  const auto plan = plan_power(3.275, 0.01, 3.28, 0.05, 0.8, {2, 27});
  EXPECT_NEAR(plan.effect, 0.5, 1e-12);
  ASSERT_TRUE(plan.runs_needed);
  EXPECT_EQ(*plan.runs_needed, 27u);
  ASSERT_EQ(plan.rows.size(), 2u);
  EXPECT_NEAR(plan.rows[1].power, 0.8118315517081675, 1e-7);
  EXPECT_NEAR(plan.rows[1].min_improvement, 0.01 * detectable_effect(27, 0.05, 0.8), 1e-15);
  EXPECT_LT(plan.rows[1].min_improvement, 0.005);  // 27 runs prove the 0.005 improvement with power >= 0.8
  EXPECT_NEAR(plan.rows[1].max_mean, 3.28 - plan.rows[1].min_improvement, 1e-15);
}

TEST(PowerPlan, DegenerateInputs) {
  EXPECT_FALSE(plan_power(3.29, 0.01, 3.28, 0.01, 0.8, {}).runs_needed);  // worse than the target
  EXPECT_FALSE(plan_power(3.28, 0.01, 3.28, 0.01, 0.8, {}).runs_needed);  // no improvement
  const auto exact = plan_power(3.27, 0.0, 3.28, 0.01, 0.8, {5});         // no spread at all
  EXPECT_EQ(exact.runs_needed, std::optional<std::size_t>(2));
  EXPECT_EQ(exact.rows[0].power, 1.0);
  EXPECT_THROW(plan_power(3.27, -1.0, 3.28, 0.01, 0.8, {}), gpt::Error);
  EXPECT_THROW(plan_power(3.27, 0.01, 3.28, 0.0, 0.8, {}), gpt::Error);
  EXPECT_THROW(plan_power(3.27, 0.01, 3.28, 0.01, 1.0, {}), gpt::Error);
  EXPECT_THROW(plan_power(3.27, 0.01, 3.28, 0.01, 0.8, {1}), gpt::Error);
  EXPECT_THROW(t_test_power(1, 0.5, 0.01), gpt::Error);
}

// A --std of 1e-300 gave an effect near 1e298, and Boost's non-central t threw instead of answering "power 1".
TEST(PowerPlan, AVanishingStdGivesPowerOneNotABoostError) {
  const auto plan = plan_power(3.27, 1e-300, 3.28, 0.01, 0.8, {2, 4});
  EXPECT_EQ(plan.runs_needed, std::optional<std::size_t>(2));
  EXPECT_EQ(plan.rows[0].power, 1.0);
  EXPECT_EQ(plan.rows[1].power, 1.0);
  EXPECT_EQ(t_test_power(2, 1e298, 1e-12), 1.0);
  EXPECT_EQ(t_test_power(8, -1e298, 0.01), 0.0);
  // Just inside the bound the distribution still answers, and agrees.
  EXPECT_NEAR(t_test_power(8, 30.0 / std::sqrt(8.0), 0.01), 1.0, 1e-12);
}

}  // namespace
}  // namespace gpt::harness::stats
