// Optimizer orchestration (RECIPE §4.1, §4.5, §4.6, §8): Adam parity and pair accumulation, banks every step,
// the tied embedding and its split, reset, and world-size invariance over thread ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <random>
#include <thread>

#include "kernels/adam.h"
#include "base/check.h"
#include "kernels/normuon.h"
#include "kernels/transpose.h"
#include "trainer/optim/optimizer.h"
#include "tests/common/exact_gradients.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

const Recipe& tiny() {
  static const Recipe r = load_recipe("tiny");
  return r;
}

Tensor random_values(const Shape& shape, DType dt, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = nd(rng);
  return Tensor::from_doubles(v, shape, dt);
}

void add_to_grad(Parameter& p, const std::vector<double>& delta) {
  std::vector<double> g = p.grad.to_doubles();
  for (size_t i = 0; i < g.size(); ++i) g[i] += delta[i];
  p.grad.copy_from(Tensor::from_doubles(g, p.grad.shape(), p.grad.dtype()));
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(Optimizer, AdamOnlyOnOddStepsOnThePairSum) {
  ParameterSet ps;
  Parameter& sc = ps.add("scalars", random_values({8}, DType::f32, 1, 1.0), ParamKind::adam);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, tiny(), *comm);
  const Schedule sched(tiny());
  const Tensor start = sc.value.clone();
  const Tensor g0 = random_values({8}, DType::f32, 2, 0.1), g1 = random_values({8}, DType::f32, 3, 0.1);
  add_to_grad(sc, g0.to_doubles());
  opt.step(sched.at(0));
  EXPECT_TRUE(bitwise_equal(sc.value, start));  // even step: no update...
  EXPECT_TRUE(bitwise_equal(sc.grad, g0));      // ...and the gradient is kept
  add_to_grad(sc, g1.to_doubles());
  Tensor expect_grad = sc.grad.clone();
  opt.step(sched.at(1));
  Tensor expect = start.clone();
  Tensor m = Tensor::zeros({8}, DType::f32), v = Tensor::zeros({8}, DType::f32);
  const AdamGroupConfig& g = tiny().optimizer.adam.at("scalars");
  adam_update(expect, expect_grad, m, v,
              AdamArgs{.lr = 0.008 * sched.lr_mult(1) * g.lr_mul,
                       .beta1 = g.beta1,
                       .beta2 = g.beta2,
                       .eps = 1e-10,
                       .weight_decay = 0.005 * g.wd_mul,
                       .step = 1});
  EXPECT_TRUE(bitwise_equal(sc.value, expect));
  EXPECT_FALSE(bitwise_equal(sc.value, start));
  EXPECT_EQ(opt.adam_state("scalars").steps, 1);
  EXPECT_EQ(sc.grad.to_doubles(), std::vector<double>(8, 0.0));  // cleared after the update
}

TEST(Optimizer, BanksUpdateEveryStepLikeNorMuon) {
  ParameterSet ps;
  Parameter& mlp = ps.add("mlp_bank", random_values({2, 2, 8, 4}, DType::bf16, 4, 0.05), ParamKind::bank);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, tiny(), *comm);
  const Schedule sched(tiny());
  Tensor expect = mlp.value.clone().view({4, 8, 4});
  NorMuonState st = NorMuonState::zeros(expect);
  for (int64_t s = 0; s < 2; ++s) {
    const Tensor g = random_values({2, 2, 8, 4}, DType::bf16, 10 + s, 1.0);
    mlp.grad.copy_from(g);
    opt.step(sched.at(s));
    NorMuonArgs a;
    a.momentum = sched.momentum(s);
    a.lr = 0.023 * sched.lr_mult(s);
    a.weight_decay = 1.2;
    a.odd_matrix_lr_mul = 2.0;
    normuon_update(expect, g.view({4, 8, 4}), st, a);
    EXPECT_TRUE(bitwise_equal(mlp.value, expect)) << "step " << s;
    EXPECT_EQ(mlp.grad.to_doubles(), std::vector<double>(128, 0.0));
  }
}

TEST(Optimizer, TiedEmbeddingThenSplit) {
  ParameterSet ps;
  Parameter& lm = ps.add("lm_head", random_values({8, 24}, DType::bf16, 5, 0.05), ParamKind::adam);
  Parameter& em = ps.add("embed", Tensor::zeros({24, 8}, DType::bf16), ParamKind::adam);
  transpose(lm.value, em.value);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, tiny(), *comm);
  const Schedule sched(tiny());
  ASSERT_EQ(sched.split_step(), 17);
  EXPECT_TRUE(opt.tied());
  // Step 0 and 1 with gradients on both: lm_head's update uses g_lm + g_embedᵀ summed over the pair.
  Tensor lm_sum = Tensor::zeros({8, 24}, DType::bf16);
  const Tensor lm_start = lm.value.clone();
  for (int64_t s = 0; s < 2; ++s) {
    const Tensor gl = random_values({8, 24}, DType::bf16, 20 + s, 0.1),
                 ge = random_values({24, 8}, DType::bf16, 30 + s, 0.1);
    add_to_grad(lm, gl.to_doubles());
    add_to_grad(em, ge.to_doubles());
    opt.step(sched.at(s));
  }
  // Mirror: the same accumulation order (lm pair sum, then + embed pair sumᵀ), in bf16.
  {
    Tensor gl = Tensor::zeros({8, 24}, DType::bf16), ge = Tensor::zeros({24, 8}, DType::bf16);
    std::vector<double> a(192, 0.0), b(192, 0.0);
    for (int64_t s = 0; s < 2; ++s) {
      const auto x = random_values({8, 24}, DType::bf16, 20 + s, 0.1).to_doubles();
      const auto y = random_values({24, 8}, DType::bf16, 30 + s, 0.1).to_doubles();
      for (size_t i = 0; i < 192; ++i) {
        a[i] = static_cast<double>(round_bf16(static_cast<float>(a[i] + x[i])));
        b[i] = static_cast<double>(round_bf16(static_cast<float>(b[i] + y[i])));
      }
    }
    gl.copy_from(Tensor::from_doubles(a, {8, 24}, DType::bf16));
    ge.copy_from(Tensor::from_doubles(b, {24, 8}, DType::bf16));
    add_transposed(ge, gl);
    Tensor expect = lm_start.clone();
    Tensor m = Tensor::zeros({8, 24}, DType::f32), v = Tensor::zeros({8, 24}, DType::f32);
    const AdamGroupConfig& g = tiny().optimizer.adam.at("lm_head");
    adam_update(expect, gl, m, v,
                AdamArgs{.lr = 0.008 * sched.lr_mult(1) * g.lr_mul,
                         .beta1 = g.beta1,
                         .beta2 = g.beta2,
                         .eps = 1e-10,
                         .weight_decay = 0.005 * g.wd_mul,
                         .step = 1});
    EXPECT_TRUE(bitwise_equal(lm.value, expect));
  }
  Tensor lm_t = Tensor::zeros({24, 8}, DType::bf16);
  transpose(lm.value, lm_t);
  EXPECT_TRUE(bitwise_equal(em.value, lm_t));  // embed ← lm_headᵀ
  EXPECT_EQ(opt.adam_state("embed").steps, 0);
  // Run to the split with small gradients on lm_head only.
  for (int64_t s = 2; s <= 17; ++s) {
    add_to_grad(lm, random_values({8, 24}, DType::bf16, 100 + s, 0.1).to_doubles());
    opt.step(sched.at(s));
    EXPECT_EQ(opt.tied(), s < 17) << s;
  }
  transpose(lm.value, lm_t);
  EXPECT_TRUE(bitwise_equal(em.value, lm_t));  // the split step itself is still tied
  const auto& ls = opt.adam_state("lm_head");
  const auto& es = opt.adam_state("embed");
  EXPECT_EQ(ls.steps, 9);
  EXPECT_EQ(es.steps, 9);
  Tensor mt = Tensor::zeros({24, 8}, DType::f32), vt = Tensor::zeros({24, 8}, DType::f32);
  transpose(ls.m, mt);
  transpose(ls.v, vt);
  EXPECT_TRUE(bitwise_equal(es.m, mt));
  EXPECT_TRUE(bitwise_equal(es.v, vt));
  // After the split: embed's own gradient, its own update at step 19 (first own Adam step), lm_head untouched by it.
  Tensor em_expect = em.value.clone(), m = es.m.clone(), v = es.v.clone();
  const Tensor ge = random_values({24, 8}, DType::bf16, 55, 0.1);
  add_to_grad(em, ge.to_doubles());
  opt.step(sched.at(18));
  opt.step(sched.at(19));
  const AdamGroupConfig& g = tiny().optimizer.adam.at("embed");
  adam_update(em_expect, ge, m, v,
              AdamArgs{.lr = 0.008 * sched.lr_mult(19) * g.lr_mul,
                       .beta1 = g.beta1,
                       .beta2 = g.beta2,
                       .eps = 1e-10,
                       .weight_decay = 0.005 * g.wd_mul,
                       .step = 10});
  EXPECT_TRUE(bitwise_equal(em.value, em_expect));
  transpose(lm.value, lm_t);
  EXPECT_FALSE(bitwise_equal(em.value, lm_t));
  // Reset: state zero, tied again.
  opt.reset();
  EXPECT_TRUE(opt.tied());
  EXPECT_EQ(opt.adam_state("embed").steps, 0);
  EXPECT_EQ(opt.adam_state("lm_head").m.to_doubles(), std::vector<double>(192, 0.0));
}

TEST(Optimizer, ConfigurationErrors) {
  auto comm = make_single_rank_comm();
  {
    ParameterSet ps;
    ps.add("foo", Tensor::zeros({4}, DType::f32), ParamKind::adam);
    try {
      Optimizer opt(ps, tiny(), *comm);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("optimizer.adam.foo"), std::string::npos) << e.what();
    }
  }
  {
    ThreadRankGroup group(4);
    auto c1 = group.comm(1);
    ParameterSet ps;
    ps.add("vo_bank", Tensor::zeros({6, 4, 4}, DType::bf16), ParamKind::bank);
    try {
      Optimizer opt(ps, tiny(), *c1);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("world size 4"), std::string::npos) << e.what();
    }
  }
  ParameterSet ps;
  EXPECT_THROW(ps.add("qk_bank", Tensor::zeros({4, 4}, DType::bf16), ParamKind::bank), Error);
}

// ---- world-size invariance --------------------------------------------------------------------------------

struct Spec {
  const char* name;
  Shape shape;
  DType dtype;
  ParamKind kind;
};
const std::vector<Spec> kSpecs = {
    {"qk_bank", {8, 4, 12}, DType::bf16, ParamKind::bank},      // wide
    {"vo_bank", {8, 6, 6}, DType::bf16, ParamKind::bank},       // square
    {"mlp_bank", {4, 2, 12, 6}, DType::bf16, ParamKind::bank},  // tall, W2 at odd indices
    {"lm_head", {8, 32}, DType::bf16, ParamKind::adam},         // sharded rows, tied
    {"embed", {32, 8}, DType::bf16, ParamKind::adam},           // sharded rows after the split
    {"value_embeds", {16, 8}, DType::bf16, ParamKind::adam},    // sharded rows
    {"scalars", {8}, DType::f32, ParamKind::adam},              // replicated
    {"smear_gate", {1, 4}, DType::bf16, ParamKind::adam},       // replicated
    {"resid_lambdas", {11, 2}, DType::f32, ParamKind::adam},    // replicated
};

using test::slice_grad;  // exact sums over slices, ranks and the tied transpose

std::vector<Tensor> run_world(int world, int64_t steps) {
  std::vector<std::vector<Tensor>> results(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int r, Comm& comm) {
    ParameterSet ps;
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      ps.add(kSpecs[i].name, random_values(kSpecs[i].shape, kSpecs[i].dtype, 1000 + i, 0.05), kSpecs[i].kind);
    }
    transpose(ps.get("lm_head").value, ps.get("embed").value);
    Optimizer opt(ps, tiny(), comm);
    const Schedule sched(tiny());
    const int accum = 8 / world;
    for (int64_t s = 0; s < steps; ++s) {
      for (size_t i = 0; i < kSpecs.size(); ++i) {
        Parameter& p = ps.get(kSpecs[i].name);
        std::vector<double> local(static_cast<size_t>(p.value.numel()), 0.0);
        for (int k = r; k < 8; k += world) {  // slice k → rank k mod W
          const auto g = slice_grad(s, k, i, p.value.numel());
          for (size_t e = 0; e < local.size(); ++e) local[e] += g[e] / accum;
        }
        add_to_grad(p, local);
      }
      opt.step(sched.at(s));
    }
    for (const Parameter& p : ps.all()) results[static_cast<size_t>(r)].push_back(p.value.clone());
  });
  for (int r = 1; r < world; ++r) {
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(results[static_cast<size_t>(r)][i], results[0][i]))
          << "W=" << world << ": rank " << r << " disagrees with rank 0 on " << kSpecs[i].name;
    }
  }
  return results[0];
}

TEST(Optimizer, WorldSizes1248GiveBitwiseEqualParameters) {
  // 20 steps of the tiny schedule: banks every step, Adam on odd steps, the split at 17 and embed's own updates.
  // Bitwise equality holds because the reduced gradients are exact (see slice_grad), collectives reduce in rank
  // order, and every update is elementwise or per matrix, so sharding changes no arithmetic.
  const int64_t steps = 20;
  const std::vector<Tensor> reference = run_world(1, steps);
  std::vector<Tensor> start;
  for (size_t i = 0; i < kSpecs.size(); ++i)
    start.push_back(random_values(kSpecs[i].shape, kSpecs[i].dtype, 1000 + i, 0.05));
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    EXPECT_FALSE(bitwise_equal(reference[i], start[i])) << kSpecs[i].name << " never moved";
  }
  for (int world : {2, 4, 8}) {
    const std::vector<Tensor> got = run_world(world, steps);
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(got[i], reference[i])) << "W=" << world << " differs from W=1 on " << kSpecs[i].name;
    }
  }
}

}  // namespace
}  // namespace gpt
