// CUDA rotary embedding (kernels/rotary.h) against the CPU reference: both layouts, forward (also in place)
// and backward, small and recipe shapes.
#include <gtest/gtest.h>

#include "kernels/rotary.h"
#include "tests/gpu/attention_ops_test_util.h"

namespace gpt {
namespace {

using namespace gpu_testing;

class RotaryCuda : public ::testing::TestWithParam<DType> {};

TEST_P(RotaryCuda, ForwardAndBackwardMatchCpuInBothLayouts) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const TokenShape& s : {kSmallShape, kRecipeShape}) {
    RotaryTables tables(s.dim, 2 * s.tokens + 3);
    tables.apply_yarn(1024, 2048);  // non-trivial frequencies
    const Tensor cos = tables.cos_table(dtype), sin = tables.sin_table(dtype);
    const Tensor cos_g = cos.to(Device::cuda), sin_g = sin.to(Device::cuda);
    for (RotaryLayout layout : {RotaryLayout::normal, RotaryLayout::paired}) {
      const char* name = layout == RotaryLayout::paired ? "paired" : "normal";
      const Pair x = random_pair(s.shape(), dtype, 1);
      Tensor y_cpu = Tensor::empty(s.shape(), dtype);
      Tensor y_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
      poison(y_gpu);
      rotary_forward(x.cpu, cos, sin, layout, y_cpu);
      rotary_forward(x.cuda, cos_g, sin_g, layout, y_gpu);
      EXPECT_LT(relative_frobenius(y_gpu, y_cpu), tolerance_for(dtype)) << name << " " << shape_string(s.shape());
      // In place: y aliases x.
      Tensor inplace = x.cuda.clone();
      rotary_forward(inplace, cos_g, sin_g, layout, inplace);
      EXPECT_LT(relative_frobenius(inplace, y_cpu), tolerance_for(dtype)) << name << " in place";

      const Pair dy = random_pair(s.shape(), dtype, 2);
      const Tensor start = testing::random_tensor(s.shape(), dtype, 3);
      Tensor dx_cpu = start.clone(), dx_gpu = start.to(Device::cuda);
      rotary_backward(dy.cpu, cos, sin, layout, dx_cpu);
      rotary_backward(dy.cuda, cos_g, sin_g, layout, dx_gpu);
      EXPECT_LT(added_error(dx_gpu, dx_cpu, start), backward_tolerance(dtype)) << name << " backward";
    }
  }
}

TEST(RotaryCudaChecks, StationaryHalfIsCopiedExactly) {
  GPT_REQUIRE_CUDA();
  const TokenShape s{9, 2, 16};
  RotaryTables tables(s.dim, s.tokens);
  const Pair x = random_pair(s.shape(), DType::bf16, 4);
  Tensor y = Tensor::empty(s.shape(), DType::bf16, Device::cuda);
  poison(y);
  rotary_forward(x.cuda, tables.cos_table(DType::bf16, Device::cuda), tables.sin_table(DType::bf16, Device::cuda),
                 RotaryLayout::normal, y);
  const std::vector<double> in = x.cpu.to_doubles(), out = y.to_doubles();
  for (int64_t r = 0; r < s.tokens * s.heads; ++r) {
    for (int64_t d = s.dim / 2; d < s.dim; ++d) EXPECT_EQ(out[r * s.dim + d], in[r * s.dim + d]);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RotaryCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16), dtype_param_name);

}  // namespace
}  // namespace gpt
