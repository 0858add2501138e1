// §S.3: value_embeds on the n-gram table's cadence. Updated only at event steps, by Adam on the gradient summed
// over the cycle (rank-averaged), with the early betas/wd before extensions.ngram_late_step and the squared betas and
// late wd from it, against an independent f64 Adam written here.
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <random>
#include <thread>

#include "trainer/optim/optimizer.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

constexpr int64_t kLateStep = 6;  // a small stand-in for 336
constexpr int64_t kSteps = 14;

Recipe cadence_recipe() {
  Recipe r = load_recipe("tiny");
  r.extensions.ngram_rows = 1000;
  r.extensions.value_embeds_on_cadence = true;
  r.extensions.ngram_late_step = kLateStep;
  r.extensions.ngram_wd_mul_late = 10;
  r.optimizer.adam["value_embeds"] =
      AdamGroupConfig{.beta1 = 0.75, .beta2 = 0.95, .lr_mul = 70, .wd_mul = 5, .sharded = true};
  return r;
}

// The event cadence of §S.2 with the stand-in late step: odd steps, then s mod 4 = 3.
bool event(int64_t s) { return s < kLateStep ? s % 2 == 1 : s % 4 == 3; }

double lr_mult(int64_t s) { return 1.0 - 0.03 * static_cast<double>(s); }

StepSchedule at(int64_t s) {
  StepSchedule st;
  st.step = s;
  st.adam_step = s % 2 == 1;
  st.ngram_event = event(s);
  st.lr_mult = lr_mult(s);
  st.tied = false;
  return st;
}

std::vector<double> normal(size_t n, uint64_t seed, double mean, double sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(mean, sd);
  std::vector<double> v(n);
  for (double& x : v) x = nd(rng);
  return v;
}

void add_to_grad(Parameter& p, const std::vector<double>& delta) {
  std::vector<double> g = p.grad.to_doubles();
  for (size_t i = 0; i < g.size(); ++i) g[i] += delta[i];
  p.grad.copy_from(Tensor::from_doubles(g, p.grad.shape(), p.grad.dtype()));
}

// Independent §4.5 Adam over whole vectors, in f64.
struct ReferenceAdam {
  std::vector<double> m, v;
  int64_t k = 0;
  void update(std::vector<double>& p, const std::vector<double>& g, double lr, double b1, double b2, double wd) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++k;
    const double step =
        lr * std::sqrt(1 - std::pow(b2, static_cast<double>(k))) / (1 - std::pow(b1, static_cast<double>(k)));
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double u = m[i] / (std::sqrt(v[i]) + 1e-10) * step;
      if (u * p[i] > 0) u += lr * lr * wd * p[i];
      p[i] -= u;
    }
  }
};

// Gradient of rank r at step s.
std::vector<double> grad_of(int64_t s, int r, size_t n) { return normal(n, 500 + 10 * s + r, 0.0, 0.1); }

// Runs kSteps on `world` thread ranks; checks every rank against the f64 reference after every step.
void run_and_check(int world) {
  const size_t n = 8 * 4;
  const std::vector<double> start = normal(n, 7, 0.0, 0.5);
  // The reference: the same cycles, the rank average of each cycle's sums.
  std::vector<std::vector<double>> want_after(kSteps);
  std::vector<std::vector<double>> want_grad(kSteps);  // rank 0's buffer after each step
  {
    std::vector<double> p = start;
    ReferenceAdam adam;
    std::vector<std::vector<double>> cycle(static_cast<size_t>(world), std::vector<double>(n, 0.0));
    for (int64_t s = 0; s < kSteps; ++s) {
      for (int r = 0; r < world; ++r) {
        const std::vector<double> g = grad_of(s, r, n);
        for (size_t i = 0; i < n; ++i) cycle[r][i] += g[i];
      }
      if (event(s)) {
        std::vector<double> avg(n, 0.0);
        for (size_t i = 0; i < n; ++i) {
          for (int r = 0; r < world; ++r) avg[i] += cycle[r][i];
          avg[i] /= world;
        }
        const bool late = s >= kLateStep;
        adam.update(p, avg, 0.008 * lr_mult(s) * 70, late ? 0.5625 : 0.75, late ? 0.9025 : 0.95,
                    0.005 * (late ? 10 : 5));
        for (auto& c : cycle) c.assign(n, 0.0);
      }
      want_after[s] = p;
      want_grad[s] = cycle[0];
    }
  }
  test::run_thread_ranks(world, [&](int r, Comm& comm) {
    ParameterSet ps;
    Parameter& ve = ps.add("value_embeds", Tensor::from_doubles(start, {8, 4}, DType::f64), ParamKind::adam);
    Parameter& sc = ps.add("scalars", Tensor::from_doubles(normal(4, 9, 0, 1), {4}, DType::f64), ParamKind::adam);
    Optimizer opt(ps, cadence_recipe(), comm);
    for (int64_t s = 0; s < kSteps; ++s) {
      add_to_grad(ve, grad_of(s, r, n));
      add_to_grad(sc, normal(4, 900 + s, 0, 0.1));
      const std::vector<double> before = ve.value.to_doubles();
      const std::vector<double> scalars_before = sc.value.to_doubles();
      opt.step(at(s));
      const std::vector<double> got = ve.value.to_doubles();
      if (!event(s)) {
        EXPECT_EQ(got, before) << "rank " << r << " step " << s << ": value_embeds changed outside an event";
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(got[i], want_after[s][i], 1e-12 * (1 + std::abs(want_after[s][i])))
            << "rank " << r << " step " << s << " element " << i;
      }
      if (r == 0) {
        // The gradient buffer sums the cycle's steps and is cleared by the event.
        const std::vector<double> g = ve.grad.to_doubles();
        for (size_t i = 0; i < n; ++i) ASSERT_NEAR(g[i], want_grad[s][i], 1e-15) << "step " << s;
      }
      // The other Adam groups keep the odd-step cadence.
      EXPECT_EQ(sc.value.to_doubles() != scalars_before, s % 2 == 1) << "scalars at step " << s;
    }
    EXPECT_EQ(opt.adam_state("value_embeds").steps, 5);  // events 1, 3, 5, 7, 11
  });
}

TEST(ValueEmbedsCadence, UpdatedOnlyAtEventsWithTheCycleSum) { run_and_check(1); }

TEST(ValueEmbedsCadence, TwoThreadRanksAverageTheCycleSums) { run_and_check(2); }

TEST(ValueEmbedsCadence, OffKeepsTheOddStepAdam) {
  Recipe r = cadence_recipe();
  r.extensions.value_embeds_on_cadence = false;
  ParameterSet ps;
  Parameter& ve =
      ps.add("value_embeds", Tensor::from_doubles(normal(32, 7, 0, 0.5), {8, 4}, DType::f64), ParamKind::adam);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, r, *comm);
  for (int64_t s = 0; s < 10; ++s) {
    add_to_grad(ve, normal(32, 50 + s, 0, 0.1));
    const std::vector<double> before = ve.value.to_doubles();
    opt.step(at(s));
    EXPECT_EQ(ve.value.to_doubles() != before, s % 2 == 1) << "step " << s;
  }
  EXPECT_EQ(opt.adam_state("value_embeds").steps, 5);
}

TEST(ValueEmbedsCadence, NeedsTheNgramTable) {
  Recipe r = cadence_recipe();
  r.extensions.ngram_rows = 0;
  ParameterSet ps;
  ps.add("value_embeds", Tensor::zeros({8, 4}, DType::f64), ParamKind::adam);
  auto comm = make_single_rank_comm();
  try {
    Optimizer opt(ps, r, *comm);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extensions.value_embeds_on_cadence"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
