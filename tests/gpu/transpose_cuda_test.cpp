// CUDA transpose / add_transposed against the CPU reference.
#include <gtest/gtest.h>

#include "kernels/transpose.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct TransposeCase {
  DType dtype;
  int64_t rows, cols;
};

class TransposeCuda : public ::testing::TestWithParam<TransposeCase> {};

TEST_P(TransposeCuda, MatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, cols] = GetParam();
  const Tensor src = random_tensor({rows, cols}, dtype, 81);
  Tensor dst_cpu = Tensor::empty({cols, rows}, dtype), dst_gpu = Tensor::empty({cols, rows}, dtype, Device::cuda);
  poison(dst_gpu);
  transpose(src, dst_cpu);
  transpose(gpu(src), dst_gpu);
  EXPECT_EQ(rel_error(dst_gpu, dst_cpu), 0.0);
  Tensor acc_cpu = random_tensor({cols, rows}, dtype, 82), acc_gpu = gpu(acc_cpu);
  add_transposed(src, acc_cpu);
  add_transposed(gpu(src), acc_gpu);
  EXPECT_EQ(rel_error(acc_gpu, acc_cpu), 0.0) << "one addition per element, rounded once";
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransposeCuda,
                         ::testing::Values(TransposeCase{DType::f64, 33, 65}, TransposeCase{DType::f32, 1, 7},
                                           TransposeCase{DType::f32, 33, 65}, TransposeCase{DType::bf16, 70, 31},
                                           TransposeCase{DType::bf16, 768, 50304},
                                           TransposeCase{DType::f32, 50304, 768}));

}  // namespace
}  // namespace gpt
