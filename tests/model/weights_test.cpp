#include <gtest/gtest.h>

#include <cmath>

#include "trainer/model/weights.h"

namespace gpt {
namespace {

int64_t count(const ModelDims& dims, const std::string& name) {
  for (const ParameterInfo& p : parameter_table(dims))
    if (p.name == name) return shape_numel(p.shape);
  ADD_FAILURE() << "no parameter " << name;
  return 0;
}

// RECIPE §10.1 at W = 8.
TEST(ParameterTable, HeadCountsMatchSpecAtWorldSize8) {
  const ModelDims dims = ModelDims::head(8);
  EXPECT_EQ(count(dims, "embed"), 38'633'472);
  EXPECT_EQ(count(dims, "lm_head"), 38'633'472);
  EXPECT_EQ(count(dims, "value_embeds"), 193'167'360);
  EXPECT_EQ(count(dims, "bigram_embed"), 289'751'040);
  EXPECT_EQ(count(dims, "qk_bank"), 12'582'912);
  EXPECT_EQ(count(dims, "vo_bank"), 14'155'776);
  EXPECT_EQ(count(dims, "mlp_bank"), 56'623'104);
  int64_t small = 0;
  for (const ParameterInfo& p : parameter_table(dims))
    if (p.name != "embed" && p.name != "lm_head" && p.name != "value_embeds" && p.name != "bigram_embed" && !p.is_bank)
      small += shape_numel(p.shape);
  EXPECT_EQ(small, 204'199);
  EXPECT_EQ(total_parameter_count(dims), 643'751'335);
}

TEST(ParameterTable, BankPaddingFollowsWorldSize) {
  for (int64_t w : {1, 2, 4}) {
    EXPECT_EQ(ModelDims::head(w).qk_slots(), 60) << "W=" << w;
    EXPECT_EQ(ModelDims::head(w).vo_slots(), 20) << "W=" << w;
  }
  EXPECT_EQ(ModelDims::head(8).qk_slots(), 64);
  EXPECT_EQ(ModelDims::head(8).vo_slots(), 24);
}

TEST(ParameterTable, InitBoundIsOneOver32ForHead) {
  EXPECT_FLOAT_EQ(ModelDims::head().bank_init_bound(), 1.0f / 32.0f);
}

// The tiny weights are built once per process (ctest runs each test in its own process, gtest_filter runs of
// the whole suite share them).
class TinyWeights : public ::testing::Test {
 protected:
  static const ModelWeights& tiny() {
    static const ModelWeights weights = init_weights(ModelDims::tiny(), 7, DType::f32);
    return weights;
  }
  const ModelWeights* weights_ = &tiny();
};

TEST_F(TinyWeights, EmbedIsLmHeadTransposed) {
  const auto e = weights_->embed.to_doubles(), h = weights_->lm_head.to_doubles();
  const int64_t d = 96, V = 50304;
  for (int64_t i : {0L, 5L, 95L})
    for (int64_t j : {0L, 777L, V - 1}) EXPECT_EQ(e[j * d + i], h[i * V + j]);
}

TEST_F(TinyWeights, ScalarsAndLambdasFollowSpec) {
  const auto s = weights_->scalars.to_doubles();
  EXPECT_EQ(s[0], 0.5);
  EXPECT_EQ(s[1], 1.0);
  EXPECT_EQ(s[22], 0.0);
  EXPECT_EQ(s[23], -1.5);
  EXPECT_NEAR(weights_->resid_lambdas.to_doubles()[3], std::sqrt(1.1), 1e-6);
  EXPECT_EQ(weights_->mudd_gate_scale.to_doubles()[0], 0.1f);
  const auto b2 = weights_->mudd_b2.to_doubles();
  EXPECT_EQ(b2[8], 10.5);  // √1.1/0.1 = 10.488… rounded to bf16 (§2.2)
  EXPECT_EQ(b2[14 + 1], -5.0);
  const auto gb = weights_->mudd_gate_b2.to_doubles();
  EXPECT_EQ(gb[12], 2.5);
  EXPECT_EQ(gb[41 + 28], 5.0);
  EXPECT_EQ(gb[41 + 34], 10.0);
  EXPECT_EQ(gb[41 + 35], 0.0);
}

TEST_F(TinyWeights, BanksAreUniformWithZeroSecondMatrices) {
  const auto mlp = weights_->mlp_bank.to_doubles();
  const int64_t per = 384 * 96;
  const double bound = ModelDims::tiny().bank_init_bound();
  double max_w1 = 0, max_w2 = 0;
  for (int64_t k = 0; k < 12; ++k)
    for (int64_t i = 0; i < per; ++i) {
      max_w1 = std::max(max_w1, std::abs(mlp[2 * k * per + i]));
      max_w2 = std::max(max_w2, std::abs(mlp[(2 * k + 1) * per + i]));
    }
  EXPECT_GT(max_w1, 0.9 * bound);
  EXPECT_LE(max_w1, bound * (1 + 1.0 / 128));  // bf16 rounding may step just past the bound
  EXPECT_EQ(max_w2, 0.0);
}

TEST_F(TinyWeights, SignTableIsPlusMinusOneAndBalanced) {
  const auto s = weights_->bigram_sign_table.to_doubles();
  int64_t plus = 0;
  for (double x : s) {
    ASSERT_TRUE(x == 1.0 || x == -1.0);
    plus += x > 0;
  }
  EXPECT_NEAR(static_cast<double>(plus) / static_cast<double>(s.size()), 0.5, 0.01);
}

TEST_F(TinyWeights, SameSeedSameWeightsDifferentSeedDifferent) {
  const ModelWeights same = init_weights(ModelDims::tiny(), 7, DType::f32);
  const ModelWeights other = init_weights(ModelDims::tiny(), 8, DType::f32);
  EXPECT_EQ(same.qk_bank.to_doubles(), weights_->qk_bank.to_doubles());
  EXPECT_EQ(same.value_embeds.to_doubles(), weights_->value_embeds.to_doubles());
  EXPECT_NE(other.qk_bank.to_doubles(), weights_->qk_bank.to_doubles());
}

}  // namespace
}  // namespace gpt
