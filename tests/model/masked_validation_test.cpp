// RECIPE §S.6 at the model: StepConfig::canonical_mask masks the validation loss (and only it), and
// GptTrainable::set_canonical_mask hands the mask to the model for the final validation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/check.h"
#include "tests/common/model_fixtures.h"
#include "trainer/recipe/recipe.h"
#include "trainer/gpt/gpt_trainable.h"
#include "trainer/schedule/schedule.h"

namespace gpt::testing {
namespace {

Tensor zero_mask(int64_t vocab) { return Tensor::zeros({vocab, vocab / 8}, DType::u8); }

void set_bit(Tensor& mask, int64_t p, int64_t x) {
  auto* bytes = static_cast<uint8_t*>(mask.raw());
  bytes[p * mask.size(1) + x / 8] |= static_cast<uint8_t>(1u << (x % 8));
}
bool bit(const Tensor& mask, int64_t p, int64_t x) {
  const auto* bytes = static_cast<const uint8_t*>(mask.raw());
  return (bytes[p * mask.size(1) + x / 8] >> (x % 8)) & 1;
}

struct SmallModel {
  ModelDims dims = small_dims();
  std::unique_ptr<ModelHarness> h;
  Microbatch mb;
  StepConfig cfg;
  SmallModel() {
    ModelWeights w = init_weights(dims, 3, DType::f32);
    perturb_weights(w, 4);
    h = std::make_unique<ModelHarness>(std::move(w));
    mb = make_microbatch({17, 20, 11, 1}, dims.vocab, 512, 0, 5);
    cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  }
};

TEST(MaskedValidation, AllZeroMaskGivesBitwiseTheUnmaskedLoss) {
  SmallModel m;
  const double plain = m.h->model->validation_loss(m.mb, m.cfg);
  m.cfg.canonical_mask = zero_mask(m.dims.vocab);
  EXPECT_EQ(m.h->model->validation_loss(m.mb, m.cfg), plain);
}

TEST(MaskedValidation, MaskedLossEqualsF64ComputationFromTheLogits) {
  SmallModel m;
  Tensor mask = zero_mask(m.dims.vocab);
  std::mt19937_64 rng(6);
  for (int64_t p = 0; p < m.dims.vocab; ++p) {
    for (int64_t x = 0; x < m.dims.vocab; ++x) {
      if (rng() % 2 == 0) set_bit(mask, p, x);
    }
  }
  // Unmask the pairs the microbatch holds (canonical text never has a masked target).
  auto* bytes = static_cast<uint8_t*>(mask.raw());
  for (size_t t = 0; t < m.mb.inputs.size(); ++t) {
    bytes[m.mb.inputs[t] * mask.size(1) + m.mb.targets[t] / 8] &= static_cast<uint8_t>(~(1u << (m.mb.targets[t] % 8)));
  }
  const std::vector<double> raw = m.h->model->logits(m.mb, m.cfg).to_doubles();
  const int64_t vocab = m.dims.vocab, tokens = static_cast<int64_t>(m.mb.inputs.size());
  double total = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> z(static_cast<size_t>(vocab));
    double top = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) {
      z[v] = bit(mask, m.mb.inputs[t], v) ? -60.0 : 23.0 / (1.0 + std::exp(-(raw[t * vocab + v] + 5.0) / 7.5));
      top = std::max(top, z[v]);
    }
    double sum = 0;
    for (double x : z) sum += std::exp(x - top);
    total += top + std::log(sum) - z[m.mb.targets[t]];
  }
  const double plain = m.h->model->validation_loss(m.mb, m.cfg);
  m.cfg.canonical_mask = mask;
  const double masked = m.h->model->validation_loss(m.mb, m.cfg);
  EXPECT_NEAR(masked, total / static_cast<double>(tokens), 1e-5);
  EXPECT_LT(masked, plain - 0.3);  // half the columns removed: lse drops by about ln 2
}

TEST(MaskedValidation, TrainingIgnoresTheMask) {
  SmallModel m;
  Tape tape;
  const double plain = m.h->model->train_forward_backward(m.mb, m.cfg, tape);
  Tensor mask = zero_mask(m.dims.vocab);
  for (int64_t p = 0; p < m.dims.vocab; ++p) set_bit(mask, p, 7);
  m.cfg.canonical_mask = mask;
  m.h->params.zero_grads();
  EXPECT_EQ(m.h->model->train_forward_backward(m.mb, m.cfg, tape), plain);
}

TEST(MaskedValidation, GptTrainableTakesTheMaskForValidationOnly) {
  const Recipe recipe = load_recipe("tiny", {"fp8=false"});
  GptTrainable model(recipe, 1, 1, DType::f32, Device::cpu);
  model.set_schedule(Schedule(recipe).at(0));
  const ModelDims dims = ModelDims::tiny();
  const Microbatch mb = make_microbatch({40, 30, 59}, 50257, static_cast<int32_t>(dims.bigram_rows), 50256, 1);
  const double plain = model.validation_loss(mb);
  model.set_canonical_mask(zero_mask(dims.vocab));
  EXPECT_EQ(model.validation_loss(mb), plain);
  // Tier 0 (the 47 padding columns in every row) lowers the loss by removing their mass from the log-sum-exp
  // (tokens are drawn from the 50,257 real ids).
  Tensor tier0 = zero_mask(dims.vocab);
  for (int64_t p = 0; p < dims.vocab; ++p) {
    for (int64_t x = 50257; x < dims.vocab; ++x) set_bit(tier0, p, x);
  }
  bool padding_target = false;
  for (const auto y : mb.targets) padding_target = padding_target || y > 50256;
  ASSERT_FALSE(padding_target);
  model.set_canonical_mask(tier0);
  const double masked = model.validation_loss(mb);
  EXPECT_LT(masked, plain);
  EXPECT_NEAR(plain - masked, -std::log1p(-47.0 / 50304.0), 2e-4);  // near-uniform softmax at initialisation
  model.set_canonical_mask(Tensor());
  EXPECT_EQ(model.validation_loss(mb), plain);
  EXPECT_THROW(model.set_canonical_mask(Tensor::zeros({dims.vocab, 8}, DType::u8)), Error);
  EXPECT_THROW(model.set_canonical_mask(Tensor::zeros({dims.vocab, dims.vocab / 8}, DType::i32)), Error);
}

}  // namespace
}  // namespace gpt::testing
