// CUDA QK-norm + rotary (kernels/qk_norm_rotary.h) against the CPU reference: both layouts, forward (y and rstd)
// and the added part of the backward, at the small test shape, the recipe shape (16 lanes per head vector in
// bf16), a wide head (two packs per lane) and a head dim the fused kernels do not tile (the unfused fallback).
#include <gtest/gtest.h>

#include "kernels/qk_norm_rotary.h"
#include "tests/gpu/attention_ops_test_util.h"

namespace gpt {
namespace {

using namespace gpu_testing;

class QkNormRotaryCuda : public ::testing::TestWithParam<DType> {};

TEST_P(QkNormRotaryCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const TokenShape wide_head{33, 2, 512}, untiled_head{11, 2, 12};
  for (const TokenShape& s : {kSmallShape, kRecipeShape, wide_head, untiled_head}) {
    RotaryTables tables(s.dim, 2 * s.tokens + 3);
    tables.apply_yarn(1024, 2048);  // non-trivial frequencies
    const Tensor cos = tables.cos_table(dtype), sin = tables.sin_table(dtype);
    const Tensor cos_g = cos.to(Device::cuda), sin_g = sin.to(Device::cuda);
    const int64_t rows = s.tokens * s.heads;
    for (RotaryLayout layout : {RotaryLayout::normal, RotaryLayout::paired}) {
      const std::string where =
          std::string(layout == RotaryLayout::paired ? "paired " : "normal ") + shape_string(s.shape());
      const Pair x = random_pair(s.shape(), dtype, 1, 4.0);
      Tensor y_cpu = Tensor::empty(s.shape(), dtype), rstd_cpu = Tensor::empty({rows}, stat_dtype(dtype));
      Tensor y_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
      Tensor rstd_gpu = Tensor::empty({rows}, stat_dtype(dtype), Device::cuda);
      poison(y_gpu);
      poison(rstd_gpu);
      qk_norm_rotary_forward(x.cpu, cos, sin, layout, y_cpu, rstd_cpu);
      qk_norm_rotary_forward(x.cuda, cos_g, sin_g, layout, y_gpu, rstd_gpu);
      EXPECT_LT(relative_frobenius(y_gpu, y_cpu), tolerance_for(dtype)) << where;
      // rstd is accumulated in fp32 (f64 for f64) on both sides: only the summation order differs.
      EXPECT_LT(relative_frobenius(rstd_gpu, rstd_cpu), tolerance_for(dtype == DType::bf16 ? DType::f32 : dtype))
          << where;

      const Pair dy = random_pair(s.shape(), dtype, 2);
      const Tensor start = testing::random_tensor(s.shape(), dtype, 3);
      Tensor dx_cpu = start.clone(), dx_gpu = start.to(Device::cuda);
      qk_norm_rotary_backward(dy.cpu, x.cpu, rstd_cpu, cos, sin, layout, dx_cpu);
      qk_norm_rotary_backward(dy.cuda, x.cuda, rstd_cpu.to(Device::cuda), cos_g, sin_g, layout, dx_gpu);
      EXPECT_LT(added_error(dx_gpu, dx_cpu, start), backward_tolerance(dtype)) << where << " backward";

      // The first writer of the gradient: written over poison, the values adding into zeros gives.
      Tensor written_cpu = Tensor::zeros(s.shape(), dtype), written_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
      poison(written_gpu);
      qk_norm_rotary_backward(dy.cpu, x.cpu, rstd_cpu, cos, sin, layout, written_cpu);
      qk_norm_rotary_backward(dy.cuda, x.cuda, rstd_cpu.to(Device::cuda), cos_g, sin_g, layout, written_gpu,
                              GradWrite::overwrite);
      EXPECT_LT(relative_frobenius(written_gpu, written_cpu), backward_tolerance(dtype)) << where << " overwrite";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QkNormRotaryCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         dtype_param_name);

}  // namespace
}  // namespace gpt
