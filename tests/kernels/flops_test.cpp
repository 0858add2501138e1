#include <gtest/gtest.h>

#include "kernels/flops.h"

namespace gpt {
namespace {

TEST(Flops, ReproducesRecipeParameterCounts) {
  const FlopModel head;
  EXPECT_EQ(attention_gemm_params(head), 23'592'960);
  EXPECT_EQ(mlp_gemm_params(head), 51'904'512);
  EXPECT_EQ(lm_head_params(head), 38'633'472);
  EXPECT_EQ(gemm_params_per_token(head), 114'130'944);
  EXPECT_NEAR(training_gemm_flops_per_token(head) / 1e6, 684.8, 0.05);
  EXPECT_NEAR(validation_gemm_flops_per_token(head) / 1e6, 228.3, 0.05);
}

TEST(Flops, ReproducesPerStageAttentionBounds) {
  const FlopModel head;
  // (short, long) windows of §5.1 in tokens -> 16.6, 44.9, 73.2, 87.4 MFLOP/token (§10.2).
  EXPECT_NEAR(training_attention_flops_per_token(head, 128, 384) / 1e6, 16.6, 0.05);
  EXPECT_NEAR(training_attention_flops_per_token(head, 384, 896) / 1e6, 44.9, 0.05);
  EXPECT_NEAR(training_attention_flops_per_token(head, 640, 1408) / 1e6, 73.2, 0.05);
  EXPECT_NEAR(training_attention_flops_per_token(head, 768, 1664) / 1e6, 87.4, 0.05);
  EXPECT_EQ(training_attention_flops_per_token(head, 128, 384), 12.0 * 768 * (8 * 129 + 2 * 385));
}

TEST(Flops, WholeRunGemmTotalMatchesRecipe) {
  // 6·N_mm·338,821,120 tokens = 2.32e17 FLOP (§10.2).
  EXPECT_NEAR(training_gemm_flops_per_token(FlopModel{}) * 338'821'120.0 / 1e17, 2.32, 0.005);
}

TEST(Flops, TinyRecipeCost) {
  // §R.1: d = 96, hidden 384: ≈ 6.0M GEMM parameters per token (dominated by the 96 × 50304 lm_head).
  const FlopModel tiny{.d = 96, .mlp_hidden = 384};
  EXPECT_EQ(gemm_params_per_token(tiny), 10 * 4 * 96 * 96 + 11 * 2 * 384 * 96 + 96 * 50304);
  EXPECT_NEAR(static_cast<double>(gemm_params_per_token(tiny)) / 1e6, 6.0, 0.05);
}

}  // namespace
}  // namespace gpt
