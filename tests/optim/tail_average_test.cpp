// Tail averaging (RECIPE §S.5): which steps each accumulator ticks at, its seed and rates, against an independent
// f64 computation of the table's rules; the ship's order, bf16 writes and norm restoration; W = 2 thread ranks
// equal to W = 1; reset and checkpoint round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <random>
#include <thread>

#include "kernels/transpose.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/tail_average.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

Recipe seed_recipe() {
  Recipe r = load_recipe("tiny");
  r.extensions.tail_average = true;
  return r;
}

// The listed weights at small sizes (sharded like the recipe's groups: banks by matrix, lm_head/embed/value_embeds
// by rows), bf16 as in a run.
struct Weights {
  ParameterSet ps;
  Weights() {
    ps.add("lm_head", Tensor::zeros({8, 6}, DType::bf16), ParamKind::adam);
    ps.add("embed", Tensor::zeros({6, 8}, DType::bf16), ParamKind::adam);
    ps.add("value_embeds", Tensor::zeros({10, 4}, DType::bf16), ParamKind::adam);
    ps.add("scalars", Tensor::zeros({3}, DType::bf16), ParamKind::adam);  // not listed: never touched
    ps.add("qk_bank", Tensor::zeros({4, 3, 5}, DType::bf16), ParamKind::bank);
    ps.add("vo_bank", Tensor::zeros({4, 4, 4}, DType::bf16), ParamKind::bank);
    ps.add("mlp_bank", Tensor::zeros({2, 2, 6, 4}, DType::bf16), ParamKind::bank);
  }
  // Fresh values for step s (a function of s only, so every rank and every replay sees the same weights).
  void set_for_step(int64_t s) {
    uint64_t k = 0;
    for (Parameter& p : ps.all()) {
      std::mt19937_64 rng(static_cast<uint64_t>(s) * 1000 + k++);
      std::normal_distribution<double> nd(0.5, 1.0);
      std::vector<double> v(static_cast<size_t>(p.value.numel()));
      for (double& x : v) x = nd(rng);
      p.value.copy_from(Tensor::from_doubles(v, p.value.shape(), p.value.dtype()));
    }
  }
};

// The §S.2 cadence with the recipe's constants (an independent statement of it for the test).
bool ngram_event(int64_t s) { return s < 336 ? s % 2 == 1 : s % 4 == 3; }

StepSchedule at(int64_t s) {
  StepSchedule st;
  st.step = s;
  st.ngram_event = ngram_event(s);
  return st;
}

// Independent f64 statement of §S.5's table: the rate of a tick at s, or a negative value when none fires.
double expected_rate(TailAccumulator a, int64_t s, int64_t n) {
  switch (a) {
    case TailAccumulator::tail_ema: {
      if (s < n - 298) return -1;
      const double r = 2.0 / 299;
      if (s == n - 1) return r;
      if (s % 2 == 0) return s == n - 298 ? r : -1;
      return 1 - (1 - r) * (1 - r);
    }
    case TailAccumulator::tail_avg:
      return s >= n - 250 && (n - 1 - s) % 4 == 0 ? 4.0 / 53 : -1;
    case TailAccumulator::value_embed_avg:
      return s >= n - 250 && ngram_event(s) ? 4.0 / 53 : -1;
    case TailAccumulator::bank_blend:
      return s >= n - 298 && (s % 4 == 1 || s >= n - 2) ? 2.0 / 75 : -1;
  }
  return -1;
}

const std::map<TailAccumulator, std::vector<std::string>> kListed = {
    {TailAccumulator::tail_ema, {"lm_head", "embed"}},
    {TailAccumulator::tail_avg, {"vo_bank", "mlp_bank"}},
    {TailAccumulator::value_embed_avg, {"value_embeds"}},
    {TailAccumulator::bank_blend, {"qk_bank", "vo_bank", "mlp_bank"}},
};

void run_against_reference(int64_t n) {
  Weights w;
  auto comm = make_single_rank_comm();
  TailAverage tail(w.ps, seed_recipe(), *comm);
  std::map<std::pair<TailAccumulator, std::string>, std::vector<double>> ref;
  std::map<TailAccumulator, bool> ref_seeded;
  std::map<TailAccumulator, int64_t> ticks, first_tick;
  for (int64_t s = 0; s < n; ++s) {
    w.set_for_step(s);
    tail.after_optimizer_step(at(s), n);
    for (const auto& [acc, names] : kListed) {
      const double rate = expected_rate(acc, s, n);
      if (rate >= 0) {
        if (!ref_seeded[acc]) first_tick[acc] = s;
        for (const std::string& name : names) {
          std::vector<double> x = w.ps.get(name).value.to_doubles();
          std::vector<double>& a = ref[{acc, name}];
          if (!ref_seeded[acc]) {
            a = x;
          } else {
            for (size_t i = 0; i < a.size(); ++i) a[i] += rate * (x[i] - a[i]);
          }
        }
        ref_seeded[acc] = true;
        ++ticks[acc];
      }
      ASSERT_EQ(tail.seeded(acc), ref_seeded[acc]) << tail_accumulator_name(acc) << " step " << s;
      if (!ref_seeded[acc]) continue;
      for (const std::string& name : names) {
        const std::vector<double> got = tail.accumulator(acc, name).to_doubles();
        const std::vector<double>& want = ref[{acc, name}];
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i])))
              << tail_accumulator_name(acc) << "/" << name << " step " << s << " element " << i;
        }
      }
    }
  }
  if (n == 1194) {  // §S.5: the windows start at steps 896 and 944
    EXPECT_EQ(first_tick[TailAccumulator::tail_ema], 896);
    EXPECT_EQ(first_tick[TailAccumulator::tail_avg], 945);  // the first s ≥ 944 with (1193 − s) mod 4 = 0
    EXPECT_EQ(first_tick[TailAccumulator::value_embed_avg], 947);
    EXPECT_EQ(first_tick[TailAccumulator::bank_blend], 897);
    EXPECT_EQ(ticks[TailAccumulator::tail_ema], 1 + 149);  // seed + the odd steps 897 … 1193
    EXPECT_EQ(ticks[TailAccumulator::tail_avg], 63);
    EXPECT_EQ(ticks[TailAccumulator::value_embed_avg], 62);
    EXPECT_EQ(ticks[TailAccumulator::bank_blend], 75 + 1);  // s mod 4 = 1 from 897 to 1193, plus 1192
  }
}

TEST(TailAverage, TicksMatchTheTableAtTheSeedLength) { run_against_reference(1194); }

TEST(TailAverage, TicksMatchTheTableOnAShortRun) {
  // N = 26 < every window: every step is inside; tail-ema's first tick is the first odd step (even steps other
  // than N − 298 never tick), and the rate r of s = N − 1 applies.
  run_against_reference(26);
}

TEST(TailAverage, TicksMatchTheTableWithAnOddLength) { run_against_reference(301); }

// One bf16 rounding of a double.
double bf16_of(double x) { return static_cast<double>(round_bf16(static_cast<float>(x))); }

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

TEST(TailAverage, ShipOrderBf16WritesAndNormRestoration) {
  const int64_t n = 26;
  Weights w;
  auto comm = make_single_rank_comm();
  TailAverage tail(w.ps, seed_recipe(), *comm);
  for (int64_t s = 0; s < n; ++s) {
    w.set_for_step(s);
    tail.after_optimizer_step(at(s), n);
  }
  std::map<std::string, std::vector<double>> before;
  for (const Parameter& p : w.ps.all()) before[p.name] = p.value.to_doubles();
  auto acc = [&](TailAccumulator a, const std::string& name) { return tail.accumulator(a, name).to_doubles(); };
  // Expected in f64, in the ship order of §S.5, each write rounded to bf16.
  std::map<std::string, std::vector<double>> want = before;
  auto lerp = [&](const std::string& name, const std::vector<double>& a, double f) {
    for (size_t i = 0; i < a.size(); ++i) want[name][i] = bf16_of(want[name][i] + f * (a[i] - want[name][i]));
  };
  auto assign = [&](const std::string& name, const std::vector<double>& a) {
    for (size_t i = 0; i < a.size(); ++i) want[name][i] = bf16_of(a[i]);
  };
  lerp("lm_head", acc(TailAccumulator::tail_ema, "lm_head"), 0.65);
  lerp("embed", acc(TailAccumulator::tail_ema, "embed"), 0.65);
  assign("vo_bank", acc(TailAccumulator::tail_avg, "vo_bank"));
  assign("mlp_bank", acc(TailAccumulator::tail_avg, "mlp_bank"));
  assign("value_embeds", acc(TailAccumulator::value_embed_avg, "value_embeds"));
  lerp("qk_bank", acc(TailAccumulator::bank_blend, "qk_bank"), 0.55);
  lerp("vo_bank", acc(TailAccumulator::bank_blend, "vo_bank"), 0.3493);  // from the shipped tail average
  lerp("mlp_bank", acc(TailAccumulator::bank_blend, "mlp_bank"), 0.3493);
  for (const char* name : {"embed", "lm_head", "mlp_bank", "qk_bank", "vo_bank"}) {
    const double f = norm(before[name]) / norm(want[name]);
    for (double& x : want[name]) x = bf16_of(x * f);
  }

  tail.ship(*comm);

  for (const Parameter& p : w.ps.all()) {
    const std::vector<double> got = p.value.to_doubles();
    for (size_t i = 0; i < got.size(); ++i) {
      // The kernel computes in fp32: a result may land one bf16 step away where f64 sits at a rounding boundary.
      ASSERT_NEAR(got[i], want[p.name][i], std::ldexp(std::abs(want[p.name][i]), -7) + 1e-30)
          << p.name << " element " << i;
      ASSERT_EQ(got[i], bf16_of(got[i])) << p.name << " is written in bf16";
    }
    if (p.name == "scalars") {
      EXPECT_EQ(got, before["scalars"]);
    } else if (p.name == "value_embeds") {
      EXPECT_EQ(got, want["value_embeds"]);  // w ← acc, no norm restoration
    } else {
      EXPECT_NE(got, before[p.name]) << p.name << " was shipped";
      // Norms equal before and after to the final bf16 rounding.
      EXPECT_NEAR(norm(got), norm(before[p.name]), 2e-3 * norm(before[p.name])) << p.name;
    }
  }
}

// Runs a full N = 26 tick sequence and the ship on each of `world` thread ranks; returns every rank's final
// weights (concatenated per parameter) and rank 0's accumulator shards.
std::vector<std::map<std::string, std::vector<double>>> run_world(int world) {
  std::vector<std::map<std::string, std::vector<double>>> out(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int r, Comm& comm) {
    Weights w;
    TailAverage tail(w.ps, seed_recipe(), comm);
    for (int64_t s = 0; s < 26; ++s) {
      w.set_for_step(s);
      tail.after_optimizer_step(at(s), 26);
    }
    for (const auto& [acc, names] : kListed) {
      for (const std::string& name : names) {
        out[r]["acc/" + std::string(tail_accumulator_name(acc)) + "/" + name] =
            tail.accumulator(acc, name).to_doubles();
      }
    }
    tail.ship(comm);
    for (const Parameter& p : w.ps.all()) out[r][p.name] = p.value.to_doubles();
  });
  return out;
}

TEST(TailAverage, TwoThreadRanksShipLikeOne) {
  const auto one = run_world(1);
  const auto two = run_world(2);
  for (int r = 0; r < 2; ++r) {
    for (const auto& [name, values] : one[0]) {
      if (name.rfind("acc/", 0) == 0) {
        // Each rank holds its half of the rows / matrices.
        const size_t half = values.size() / 2;
        const std::vector<double> shard(values.begin() + r * half, values.begin() + (r + 1) * half);
        EXPECT_EQ(two[r].at(name), shard) << name << " rank " << r;
      } else {
        EXPECT_EQ(two[r].at(name), values) << name << " rank " << r;  // bitwise
      }
    }
  }
}

std::vector<std::vector<double>> snapshot(const TailAverage& tail) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, t] : tail.state_tensors()) {
    out.push_back(t.dtype() == DType::u8 ? std::vector<double>(t.data<uint8_t>(), t.data<uint8_t>() + t.numel())
                                         : t.to_doubles());
  }
  return out;
}

TEST(TailAverage, CheckpointRoundTripResumesBitExactly) {
  const int64_t n = 40, cut = 21;
  Weights w;
  auto comm = make_single_rank_comm();
  TailAverage a(w.ps, seed_recipe(), *comm);
  for (int64_t s = 0; s <= cut; ++s) {
    w.set_for_step(s);
    a.after_optimizer_step(at(s), n);
  }
  // The checkpoint: deep copies of the named tensors.
  std::vector<std::pair<std::string, Tensor>> saved;
  for (const auto& [name, t] : a.state_tensors()) saved.emplace_back(name, t.clone());
  ASSERT_EQ(saved.size(), 2u + 2u + 1u + 3u + 1u);
  EXPECT_EQ(saved.back().first, "tail/seeded");
  EXPECT_EQ(saved.front().first, "tail/tail_ema/lm_head");
  for (int64_t s = cut + 1; s < n; ++s) {
    w.set_for_step(s);
    a.after_optimizer_step(at(s), n);
  }
  // A fresh object restored from the checkpoint continues identically.
  TailAverage b(w.ps, seed_recipe(), *comm);
  auto live = b.state_tensors();
  ASSERT_EQ(live.size(), saved.size());
  for (size_t i = 0; i < live.size(); ++i) {
    ASSERT_EQ(live[i].first, saved[i].first);
    live[i].second.copy_from(saved[i].second);
  }
  for (int64_t s = cut + 1; s < n; ++s) {
    w.set_for_step(s);
    b.after_optimizer_step(at(s), n);
  }
  EXPECT_EQ(snapshot(a), snapshot(b));
}

TEST(TailAverage, ResetUnseedsAndTheNextTickSeeds) {
  const int64_t n = 26;
  Weights w;
  auto comm = make_single_rank_comm();
  TailAverage tail(w.ps, seed_recipe(), *comm);
  for (int64_t s = 0; s < 6; ++s) {
    w.set_for_step(s);
    tail.after_optimizer_step(at(s), n);
  }
  ASSERT_TRUE(tail.seeded(TailAccumulator::bank_blend));
  tail.reset();
  for (int k = 0; k < kTailAccumulatorCount; ++k) EXPECT_FALSE(tail.seeded(static_cast<TailAccumulator>(k)));
  w.set_for_step(100);
  tail.after_optimizer_step(at(9), n);  // fires for every accumulator (odd, ≡ 1 mod 4, event, (25 − 9) mod 4 = 0)
  for (const auto& [acc, names] : kListed) {
    EXPECT_TRUE(tail.seeded(acc));
    for (const std::string& name : names) {
      EXPECT_EQ(tail.accumulator(acc, name).to_doubles(), w.ps.get(name).value.to_doubles())
          << tail_accumulator_name(acc) << "/" << name << " is a copy of the weight";
    }
  }
}

TEST(TailAverage, OffIsInert) {
  Weights w;
  w.set_for_step(3);
  auto comm = make_single_rank_comm();
  TailAverage tail(w.ps, load_recipe("tiny"), *comm);
  EXPECT_FALSE(tail.enabled());
  tail.after_optimizer_step(at(25), 26);
  tail.ship(*comm);
  EXPECT_TRUE(tail.state_tensors().empty());
  Weights fresh;
  fresh.set_for_step(3);
  for (const Parameter& p : w.ps.all()) EXPECT_EQ(p.value.to_doubles(), fresh.ps.get(p.name).value.to_doubles());
}

TEST(TailAverage, TiedEmbedAveragesTheTransposedLmHead) {
  // Before the split the optimizer keeps embed = lm_headᵀ, so the embed accumulator is lm_head's, transposed.
  Recipe recipe = seed_recipe();
  ParameterSet ps;
  Parameter& lm = ps.add("lm_head", Tensor::zeros({8, 24}, DType::bf16), ParamKind::adam);
  Parameter& em = ps.add("embed", Tensor::zeros({24, 8}, DType::bf16), ParamKind::adam);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd(0.0, 0.1);
  auto fill = [&](Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (double& x : v) x = nd(rng);
    t.copy_from(Tensor::from_doubles(v, t.shape(), t.dtype()));
  };
  fill(lm.value);
  transpose(lm.value, em.value);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, recipe, *comm);
  TailAverage tail(ps, recipe, *comm);
  const Schedule sched(recipe);
  const int64_t n = sched.total_steps();
  ASSERT_EQ(sched.split_step(), 17);
  for (int64_t s = 0; s <= sched.split_step(); ++s) {
    fill(lm.grad);
    fill(em.grad);
    opt.step(sched.at(s));
    tail.after_optimizer_step(sched.at(s), n);
    if (!tail.seeded(TailAccumulator::tail_ema)) continue;
    Tensor lm_acc_t = Tensor::zeros({24, 8}, DType::f32);
    transpose(tail.accumulator(TailAccumulator::tail_ema, "lm_head"), lm_acc_t);
    ASSERT_EQ(tail.accumulator(TailAccumulator::tail_ema, "embed").to_doubles(), lm_acc_t.to_doubles()) << "step " << s;
  }
  EXPECT_TRUE(tail.seeded(TailAccumulator::tail_ema));
}

TEST(TailAverage, StepOutsideTheRunIsAnError) {
  Weights w;
  auto comm = make_single_rank_comm();
  TailAverage tail(w.ps, seed_recipe(), *comm);
  EXPECT_THROW(tail.after_optimizer_step(at(26), 26), Error);
}

}  // namespace
}  // namespace gpt
