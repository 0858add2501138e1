// Wiring of the §2.1 topology and the §2.6/§2.7 lanes, read off the gradient: every documented gate lane, MUDD
// coefficient and scalar reaches the loss, and the entries §2.2 lists as unused receive exactly zero. Also the
// FP8 training path (§7) against the plain one.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/model_fixtures.h"

namespace gpt::testing {
namespace {

struct Gradients {
  std::map<std::string, std::vector<double>> by_name;
  double at(const std::string& name, int64_t i) const { return by_name.at(name)[static_cast<size_t>(i)]; }
};

Gradients gradients_of_small_model(uint64_t seed) {
  const ModelDims dims = small_dims();
  ModelWeights w = init_weights(dims, seed, DType::f64);
  perturb_weights(w, seed + 1);
  ModelHarness h(std::move(w));
  const Microbatch mb = make_microbatch({17, 20, 11, 1}, dims.vocab, 512, 0, seed + 2);
  StepConfig cfg = make_config(dims, 48, DType::f64, 5, 12, 0.4);
  cfg.mtp_weights = {1.0f, 0.5f};
  Tape tape;
  h.params.zero_grads();
  h.model->train_forward_backward(mb, cfg, tape);
  Gradients g;
  for (const Parameter& p : h.params.all()) g.by_name[p.name] = p.grad.to_doubles();
  return g;
}

TEST(ModelWiring, EveryDocumentedLaneIsReadAndNoOtherOne) {
  const Gradients g = gradients_of_small_model(51);
  // Gate MLP biases (§2.6): pre gate reads lanes 0-25 of slot 0, post gate all 41 lanes of slot 1.
  for (int64_t lane = 0; lane < 41; ++lane) {
    if (lane < 26)
      EXPECT_NE(g.at("mudd_gate_b2", lane), 0.0) << "pre lane " << lane;
    else
      EXPECT_EQ(g.at("mudd_gate_b2", lane), 0.0) << "pre lane " << lane << " is not read";
    EXPECT_NE(g.at("mudd_gate_b2", 41 + lane), 0.0) << "post lane " << lane;
  }
  // Coefficient MLP biases (§2.7): μ reads 14 lanes, μ' 5.
  for (int64_t lane = 0; lane < 14; ++lane) {
    EXPECT_NE(g.at("mudd_b2", lane), 0.0) << "μ" << lane;
    if (lane < 5)
      EXPECT_NE(g.at("mudd_b2", 14 + lane), 0.0) << "μ'" << lane;
    else
      EXPECT_EQ(g.at("mudd_b2", 14 + lane), 0.0) << "μ'" << lane << " is not read";
  }
  // scalars: λq/λo of every attention layer, λ_smear, λ_skip; layer 6 has none.
  for (int64_t i = 0; i < 24; ++i) {
    if (i == 12 || i == 13)
      EXPECT_EQ(g.at("scalars", i), 0.0) << "scalars[" << i << "]";
    else
      EXPECT_NE(g.at("scalars", i), 0.0) << "scalars[" << i << "]";
  }
  // resid/post lambdas: [i,0] for attention layers 0-9 except 6, [i,1] for MLPs 0-9; layer 10 uses μ instead.
  for (const char* name : {"resid_lambdas", "post_lambdas"}) {
    for (int64_t i = 0; i < 22; ++i) {
      const bool unused = i == 12 || i >= 20;
      if (unused)
        EXPECT_EQ(g.at(name, i), 0.0) << name << "[" << i << "]";
      else
        EXPECT_NE(g.at(name, i), 0.0) << name << "[" << i << "]";
    }
  }
  // ve_gate_bank: gates 0-3 (layers 1, 2, 8, 9) are read, gate 4 is not (layer 10 uses μ6/μ7).
  const std::vector<double>& ve = g.by_name.at("ve_gate_bank");
  const size_t per_gate = 6 * 12;
  for (size_t q = 0; q < 5; ++q) {
    double norm = 0;
    for (size_t i = q * per_gate; i < (q + 1) * per_gate; ++i) norm += std::abs(ve[i]);
    if (q < 4)
      EXPECT_GT(norm, 0.0) << "ve_gate_bank[" << q << "]";
    else
      EXPECT_EQ(norm, 0.0) << "ve_gate_bank[4]";
  }
  // mlp_bank: the 11 layers read their W1 and W2; padding slot 11 gets nothing.
  const ModelDims dims = small_dims();
  const std::vector<double>& mlp = g.by_name.at("mlp_bank");
  const size_t matrix = static_cast<size_t>(dims.mlp_hidden * dims.model_dim);
  for (size_t k = 0; k < 24; ++k) {
    double norm = 0;
    for (size_t i = k * matrix; i < (k + 1) * matrix; ++i) norm += std::abs(mlp[i]);
    if (k < 22)
      EXPECT_GT(norm, 0.0) << "mlp matrix " << k;
    else
      EXPECT_EQ(norm, 0.0) << "mlp padding matrix " << k;
  }
  // Every attention bank slot (60 qk, 20 vo at W = 1) is live.
  const size_t qk_slot = static_cast<size_t>(2 * dims.head_dim * dims.model_dim);
  const std::vector<double>& qk = g.by_name.at("qk_bank");
  for (size_t s = 0; s < 60; ++s) {
    double norm = 0;
    for (size_t i = s * qk_slot; i < (s + 1) * qk_slot; ++i) norm += std::abs(qk[i]);
    EXPECT_GT(norm, 0.0) << "qk slot " << s;
  }
}

// §7: with FP8 lm_head and MLP products the loss and gradients stay close to the plain products, and the MLP's
// delayed activation scale is updated by the forward.
TEST(ModelFp8, TrainingWithFp8StaysCloseToPlainProducts) {
  const ModelDims dims = small_dims();
  ModelWeights base = init_weights(dims, 61, DType::f64);
  perturb_weights(base, 62);
  ModelHarness plain(convert_weights(base, DType::f32));
  ModelHarness fp8(convert_weights(base, DType::f32));
  const Microbatch mb = make_microbatch({30, 19}, dims.vocab, 512, 0, 63);
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  cfg.accumulation_steps = 2;
  Tape tape;
  const double l_plain = plain.model->train_forward_backward(mb, cfg, tape);
  StepConfig cfg8 = cfg;
  cfg8.fp8_lm_head = cfg8.fp8_mlp = true;
  fp8.model->refresh_fp8(/*bootstrap=*/true);
  const double l_fp8 = fp8.model->train_forward_backward(mb, cfg8, tape);
  EXPECT_NEAR(l_fp8 / l_plain, 1.0, 3e-2);
  for (const char* name : {"lm_head", "mlp_bank", "qk_bank", "embed"}) {
    const std::vector<double> a = plain.grad(name).to_doubles(), b = fp8.grad(name).to_doubles();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(std::isfinite(b[i])) << name;
      diff += (a[i] - b[i]) * (a[i] - b[i]);
      norm += a[i] * a[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 0.3) << name;
  }
  // A second FP8 forward uses the delayed scales set by the first one and stays close as well.
  fp8.params.zero_grads();
  EXPECT_NEAR(fp8.model->train_forward_backward(mb, cfg8, tape) / l_plain, 1.0, 3e-2);
}

// §7: the FP8 forward reads the weight copies of the last refresh_fp8, so a refresh after a weight change gives
// exactly what a model built with the new weights gives; without the refresh the old copies are read. Each model
// runs one forward from its initial delayed activation scale (a forward updates it), so the four compare exactly.
TEST(ModelFp8, RefreshMakesTheCopiesOfTheCurrentWeights) {
  const ModelDims dims = small_dims();
  ModelWeights base = init_weights(dims, 64, DType::f64);
  perturb_weights(base, 65);
  ModelWeights other = init_weights(dims, 64, DType::f64);
  perturb_weights(other, 66);
  ModelHarness original(convert_weights(base, DType::f32));  // the old weights, refreshed
  ModelHarness stale(convert_weights(base, DType::f32));     // new weights written after the refresh
  ModelHarness updated(convert_weights(base, DType::f32));   // new weights written, then refreshed
  ModelHarness fresh(convert_weights(base, DType::f32));     // new weights written before its first refresh
  ModelHarness source(convert_weights(other, DType::f32));
  const Microbatch mb = make_microbatch({30, 19}, dims.vocab, 512, 0, 67);
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  cfg.fp8_lm_head = cfg.fp8_mlp = true;
  auto loss = [&](ModelHarness& m) {
    Tape tape;
    const double l = m.model->train_forward(mb, cfg, tape);
    tape.clear();
    return l;
  };
  for (ModelHarness* m : {&original, &stale, &updated}) m->model->refresh_fp8(true);
  // An optimizer step in place: new values of the FP8 weights overwrite the parameters' storage.
  for (ModelHarness* m : {&stale, &updated, &fresh}) {
    for (const char* name : {"mlp_bank", "lm_head"}) m->value(name).copy_from(source.value(name));
  }
  updated.model->refresh_fp8(true);
  fresh.model->refresh_fp8(true);
  const double refreshed = loss(updated), old = loss(original);
  EXPECT_EQ(refreshed, loss(fresh)) << "a refresh makes the copies of the current weights";
  EXPECT_EQ(loss(stale), old) << "between refreshes the forward reads the copies, not the weights";
  EXPECT_NE(refreshed, old);
}

}  // namespace
}  // namespace gpt::testing
