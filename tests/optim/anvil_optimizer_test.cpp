// The optimizer with recipe.extensions.bank_opt = "anvil" (RECIPE §S.8 on §4.1/§8): ANVIL per bank every step with the
// recipe's values, the same result at W = 1 and W = 2 thread ranks, reset, the state in collect_state, and the
// switch's validation. bank_opt = "normuon" keeps the optimizer tests of tests/optim/optimizer_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <random>
#include <thread>

#include "kernels/anvil.h"
#include "base/check.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/training_state.h"
#include "tests/common/exact_gradients.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

// tiny with ANVIL and rail boundaries scaled into its 26 steps, so 20 steps cross every branch.
Recipe tiny_anvil() {
  Recipe r = load_recipe("tiny");
  r.extensions.bank_opt = "anvil";
  r.extensions.anvil_rail_warmup = 6;
  r.extensions.anvil_fast_switch = 10;
  r.extensions.anvil_rail_taper = 8;
  r.extensions.anvil_fast_weight = 0.4385;
  return r;
}

Tensor random_values(const Shape& shape, DType dt, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = nd(rng);
  return Tensor::from_doubles(v, shape, dt);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(AnvilOptimizer, BanksUpdateEveryStepWithTheRecipeValues) {
  const Recipe recipe = tiny_anvil();
  ParameterSet ps;
  Parameter& mlp = ps.add("mlp_bank", random_values({2, 2, 8, 4}, DType::bf16, 4, 0.05), ParamKind::bank);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, recipe, *comm);
  EXPECT_EQ(opt.bank_optimizer(), Optimizer::BankOptimizer::anvil);
  const Schedule sched(recipe);
  ASSERT_EQ(sched.total_steps(), 26);
  Tensor expect = mlp.value.clone().view({4, 8, 4});
  AnvilState st = AnvilState::zeros(expect);
  for (int64_t s = 0; s < 24; ++s) {
    const Tensor g = random_values({2, 2, 8, 4}, DType::bf16, 10 + s, 1.0);
    mlp.grad.copy_from(g);
    opt.step(sched.at(s));
    AnvilArgs a;
    a.step = s;
    a.total_steps = 26;
    a.lr = 0.023 * sched.lr_mult(s);
    a.weight_decay = 2.25;
    a.beta2 = 0.9;
    a.rail_warmup = 6;
    a.fast_switch = 10;
    a.rail_taper = 8;
    a.fast_weight = 0.4385;
    a.odd_matrix_lr_mul = 2.0;
    anvil_update(expect, g.view({4, 8, 4}), st, a);
    ASSERT_TRUE(bitwise_equal(mlp.value, expect)) << "step " << s;
    ASSERT_EQ(mlp.grad.to_doubles(), std::vector<double>(128, 0.0));
  }
  EXPECT_TRUE(bitwise_equal(opt.anvil_state("mlp_bank").slow_rail, st.slow_rail));
  EXPECT_TRUE(bitwise_equal(opt.anvil_state("mlp_bank").mantissa, st.mantissa));
  EXPECT_THROW(opt.bank_state("mlp_bank"), Error);  // NorMuon's state is not kept
  opt.reset();
  const AnvilState& live = opt.anvil_state("mlp_bank");
  for (const Tensor* t : {&live.fast_rail, &live.slow_rail, &live.second_moment}) {
    for (double v : t->to_doubles()) ASSERT_EQ(v, 0.0);
  }
  for (int64_t i = 0; i < live.mantissa.numel(); ++i) ASSERT_EQ(live.mantissa.data<uint16_t>()[i], 0);
}

TEST(AnvilOptimizer, NorMuonIsTheDefault) {
  ParameterSet ps;
  ps.add("vo_bank", Tensor::zeros({2, 4, 4}, DType::bf16), ParamKind::bank);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, load_recipe("tiny"), *comm);
  EXPECT_EQ(opt.bank_optimizer(), Optimizer::BankOptimizer::normuon);
  EXPECT_NO_THROW(opt.bank_state("vo_bank"));
  EXPECT_THROW(opt.anvil_state("vo_bank"), Error);
}

TEST(AnvilOptimizer, UnknownBankOptimizerIsRefused) {
  Recipe r = load_recipe("tiny");
  r.extensions.bank_opt = "adamw";
  ParameterSet ps;
  ps.add("vo_bank", Tensor::zeros({2, 4, 4}, DType::bf16), ParamKind::bank);
  auto comm = make_single_rank_comm();
  try {
    Optimizer opt(ps, r, *comm);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extensions.bank_opt = 'adamw'"), std::string::npos) << e.what();
  }
}

// A model that is only its parameters, for collect_state.
class BankOnlyModel : public TrainableModel {
 public:
  std::string description() const override { return "banks"; }
  ParameterSet& parameters() override { return params; }
  std::vector<NamedTensor> buffers() override { return {}; }
  void set_schedule(const StepSchedule&) override {}
  double train_microbatch(const Microbatch&, double) override { return 0; }
  double validation_loss(const Microbatch&) override { return 0; }
  ParameterSet params;
};

TEST(AnvilOptimizer, CollectStateHoldsTheRailsSoResumeAndResetCoverThem) {
  BankOnlyModel model;
  model.params.add("qk_bank", random_values({4, 2, 6}, DType::bf16, 1, 0.05), ParamKind::bank);
  auto comm = make_single_rank_comm();
  const Recipe recipe = tiny_anvil();
  Optimizer opt(model.params, recipe, *comm);
  const std::vector<NamedTensor> state = collect_state(model, opt);
  std::vector<std::string> names;
  for (const NamedTensor& t : state) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"param/qk_bank", "grad/qk_bank", "bank/qk_bank/fast_rail",
                                             "bank/qk_bank/slow_rail", "bank/qk_bank/second_moment",
                                             "bank/qk_bank/mantissa"}));
  // A snapshot restored after some steps gives the same next step as the uninterrupted run (the resume path).
  const Schedule sched(recipe);
  Parameter& qk = model.params.get("qk_bank");
  for (int64_t s = 0; s < 3; ++s) {
    qk.grad.copy_from(random_values({4, 2, 6}, DType::bf16, 50 + s, 1.0));
    opt.step(sched.at(s));
  }
  const std::vector<NamedTensor> saved = clone_state(state);
  qk.grad.copy_from(random_values({4, 2, 6}, DType::bf16, 60, 1.0));
  opt.step(sched.at(3));
  const std::vector<NamedTensor> after = clone_state(state);
  restore_state(state, saved, "snapshot");
  qk.grad.copy_from(random_values({4, 2, 6}, DType::bf16, 60, 1.0));
  opt.step(sched.at(3));
  EXPECT_EQ(first_difference(state, after), "");
  EXPECT_NE(first_difference(saved, after), "");
}

// ---- world-size invariance (as optimizer_test.cpp for NorMuon) -------------------------------

struct Spec {
  const char* name;
  Shape shape;
};
const std::vector<Spec> kBanks = {
    {"qk_bank", {8, 4, 12}},     // wide
    {"vo_bank", {8, 6, 6}},      // square
    {"mlp_bank", {3, 2, 12, 6}}  // tall, W2 at odd indices; 3 per rank at W = 2, so rank 1 starts at an odd one
};

using test::slice_grad;  // exact sums over slices and ranks

std::vector<Tensor> run_world(int world, int64_t steps) {
  const Recipe recipe = tiny_anvil();
  std::vector<std::vector<Tensor>> results(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int r, Comm& comm) {
    ParameterSet ps;
    for (size_t i = 0; i < kBanks.size(); ++i) {
      ps.add(kBanks[i].name, random_values(kBanks[i].shape, DType::bf16, 1000 + i, 0.05), ParamKind::bank);
    }
    Optimizer opt(ps, recipe, comm);
    const Schedule sched(recipe);
    const int accum = 8 / world;
    for (int64_t s = 0; s < steps; ++s) {
      for (size_t i = 0; i < kBanks.size(); ++i) {
        Parameter& p = ps.get(kBanks[i].name);
        std::vector<double> local(static_cast<size_t>(p.value.numel()), 0.0);
        for (int k = r; k < 8; k += world) {  // slice k → rank k mod W
          const auto g = slice_grad(s, k, i, p.value.numel());
          for (size_t e = 0; e < local.size(); ++e) local[e] += g[e] / accum;
        }
        p.grad.copy_from(Tensor::from_doubles(local, p.grad.shape(), p.grad.dtype()));
      }
      opt.step(sched.at(s));
    }
    for (const Parameter& p : ps.all()) results[static_cast<size_t>(r)].push_back(p.value.clone());
  });
  for (int r = 1; r < world; ++r) {
    for (size_t i = 0; i < kBanks.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(results[static_cast<size_t>(r)][i], results[0][i]))
          << "W=" << world << ": rank " << r << " disagrees with rank 0 on " << kBanks[i].name;
    }
  }
  return results[0];
}

TEST(AnvilOptimizer, WorldSizes1And2GiveBitwiseEqualParameters) {
  // 26 steps: every rail branch (warmup, plateau, the fast switch, the taper) at W = 1 and W = 2 thread ranks.
  const std::vector<Tensor> one = run_world(1, 26);
  const std::vector<Tensor> two = run_world(2, 26);
  for (size_t i = 0; i < kBanks.size(); ++i) {
    EXPECT_FALSE(bitwise_equal(one[i], random_values(kBanks[i].shape, DType::bf16, 1000 + i, 0.05)))
        << kBanks[i].name << " never moved";
    EXPECT_TRUE(bitwise_equal(two[i], one[i])) << "W=2 differs from W=1 on " << kBanks[i].name;
  }
}

}  // namespace
}  // namespace gpt
