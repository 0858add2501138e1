// CUDA GELU, ReLU², bias add and bias column-sum backward against the CPU reference.
#include <gtest/gtest.h>

#include "kernels/activation.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct ActCase {
  DType dtype;
  int64_t rows, n;
};

class ActivationCuda : public ::testing::TestWithParam<ActCase> {};

TEST_P(ActivationCuda, GeluMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const Tensor x = random_tensor({rows, n}, dtype, 61, 3.0);
  Tensor y_cpu = Tensor::empty(x.shape(), dtype), y_gpu = Tensor::empty(x.shape(), dtype, Device::cuda);
  poison(y_gpu);
  gelu_forward(x, y_cpu);
  gelu_forward(gpu(x), y_gpu);
  EXPECT_LT(rel_error(y_gpu, y_cpu), tolerance_for(dtype));
  const Tensor dy = random_tensor(x.shape(), dtype, 62);
  Tensor dx_cpu = random_tensor(x.shape(), dtype, 63), dx_gpu = gpu(dx_cpu);
  gelu_backward(dy, x, dx_cpu);
  gelu_backward(gpu(dy), gpu(x), dx_gpu);
  EXPECT_LT(rel_error(dx_gpu, dx_cpu), tolerance_for(dtype));
}

TEST_P(ActivationCuda, ReluSquareMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const Tensor pre = random_tensor({rows, n}, dtype, 64, 2.0);
  Tensor post_cpu = Tensor::empty(pre.shape(), dtype), post_gpu = Tensor::empty(pre.shape(), dtype, Device::cuda);
  poison(post_gpu);
  relu_square_forward(pre, post_cpu);
  relu_square_forward(gpu(pre), post_gpu);
  EXPECT_LT(rel_error(post_gpu, post_cpu), tolerance_for(dtype));
  const Tensor dpost = random_tensor(pre.shape(), dtype, 65);
  Tensor dpre_cpu = random_tensor(pre.shape(), dtype, 66), dpre_gpu = gpu(dpre_cpu);
  relu_square_backward(dpost, post_cpu, dpre_cpu);
  relu_square_backward(gpu(dpost), gpu(post_cpu), dpre_gpu);
  EXPECT_LT(rel_error(dpre_gpu, dpre_cpu), tolerance_for(dtype));
}

TEST_P(ActivationCuda, OverwritingReluSquareBackwardMatchesCpuInPlace) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  Tensor post = random_tensor({rows, n}, dtype, 68, 2.0);
  relu_square_forward(post, post);
  Tensor dpre_cpu = random_tensor(post.shape(), dtype, 69), dpre_gpu = gpu(dpre_cpu);  // dpost, overwritten
  relu_square_backward(dpre_cpu, post, dpre_cpu, GradWrite::overwrite);
  relu_square_backward(dpre_gpu, gpu(post), dpre_gpu, GradWrite::overwrite);
  EXPECT_LT(rel_error(dpre_gpu, dpre_cpu), tolerance_for(dtype));
}

TEST_P(ActivationCuda, InPlaceReluSquareMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  Tensor cpu_t = random_tensor({rows, n}, dtype, 67, 2.0), gpu_t = gpu(cpu_t);
  relu_square_forward(cpu_t, cpu_t);
  relu_square_forward(gpu_t, gpu_t);
  EXPECT_LT(rel_error(gpu_t, cpu_t), tolerance_for(dtype));
}

TEST_P(ActivationCuda, BiasAddAndColumnSumMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const Tensor x = random_tensor({rows, n}, dtype, 68), b = random_tensor({n}, dtype, 69);
  Tensor y_cpu = Tensor::empty(x.shape(), dtype), y_gpu = Tensor::empty(x.shape(), dtype, Device::cuda);
  poison(y_gpu);
  bias_add_forward(x, b, y_cpu);
  bias_add_forward(gpu(x), gpu(b), y_gpu);
  EXPECT_LT(rel_error(y_gpu, y_cpu), tolerance_for(dtype));
  const Tensor dy = random_tensor(x.shape(), dtype, 70);
  Tensor db_cpu = random_tensor({n}, dtype, 71), db_gpu = gpu(db_cpu), db_again = gpu(db_cpu);
  bias_backward(dy, db_cpu);
  bias_backward(gpu(dy), db_gpu);
  bias_backward(gpu(dy), db_again);
  // Column sums over many rows: the GPU's chunked order differs from the CPU's sequential one.
  const double tol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 1e-2;
  EXPECT_LT(rel_error(db_gpu, db_cpu), tol);
  EXPECT_EQ(db_gpu.to_doubles(), db_again.to_doubles()) << "column sums must be deterministic";
}

INSTANTIATE_TEST_SUITE_P(Shapes, ActivationCuda,
                         ::testing::Values(ActCase{DType::f64, 13, 30}, ActCase{DType::f32, 13, 30},
                                           ActCase{DType::bf16, 13, 30}, ActCase{DType::bf16, 7, 13},
                                           ActCase{DType::f32, 2048, 768}, ActCase{DType::bf16, 16384, 768},
                                           ActCase{DType::bf16, 4096, 3072}));

}  // namespace
}  // namespace gpt
