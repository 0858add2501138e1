// CUDA key offset (kernels/key_offset.h) against the CPU reference: the forward is an exact copy, the
// backward adds the shifted gradient (with the double use of token 0's upper half).
#include <gtest/gtest.h>

#include "kernels/key_offset.h"
#include "tests/gpu/attention_ops_test_util.h"

namespace gpt {
namespace {

using namespace gpu_testing;

class KeyOffsetCuda : public ::testing::TestWithParam<DType> {};

TEST_P(KeyOffsetCuda, ForwardIsExactAndBackwardMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const TokenShape& s : {kSmallShape, kRecipeShape, TokenShape{5, 3, 6}}) {  // D = 6: unpacked path
    const Pair k = random_pair(s.shape(), dtype, 1);
    Tensor y_cpu = Tensor::empty(s.shape(), dtype);
    Tensor y_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(y_gpu);
    key_offset_forward(k.cpu, y_cpu);
    key_offset_forward(k.cuda, y_gpu);
    EXPECT_EQ(y_gpu.to_doubles(), y_cpu.to_doubles()) << shape_string(s.shape());

    const Pair dy = random_pair(s.shape(), dtype, 2);
    const Tensor start = testing::random_tensor(s.shape(), dtype, 3);
    Tensor dk_cpu = start.clone(), dk_gpu = start.to(Device::cuda);
    key_offset_backward(dy.cpu, dk_cpu);
    key_offset_backward(dy.cuda, dk_gpu);
    // Same sums in the same order: identical results.
    EXPECT_EQ(dk_gpu.to_doubles(), dk_cpu.to_doubles()) << shape_string(s.shape());
    Tensor written_cpu = Tensor::empty(s.shape(), dtype), written_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(written_gpu);
    key_offset_backward(dy.cpu, written_cpu, GradWrite::overwrite);
    key_offset_backward(dy.cuda, written_gpu, GradWrite::overwrite);
    EXPECT_EQ(written_gpu.to_doubles(), written_cpu.to_doubles()) << shape_string(s.shape()) << " overwrite";
  }
}

TEST(KeyOffsetCudaChecks, OverlappingOutputIsRejected) {
  GPT_REQUIRE_CUDA();
  Tensor k = Tensor::zeros({4, 2, 8}, DType::f32, Device::cuda);
  EXPECT_THROW(key_offset_forward(k, k), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KeyOffsetCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         dtype_param_name);

}  // namespace
}  // namespace gpt
