#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/rmsnorm.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

class RmsNormCuda : public ::testing::TestWithParam<DType> {};

TEST_P(RmsNormCuda, ForwardAndBackwardMatchCpuReference) {
  ASSERT_TRUE(cuda_available()) << "no CUDA device visible";
  const DType dtype = GetParam();
  const Shape shape{257, 768};
  Tensor x = random_tensor(shape, dtype, 11, 2.0);
  Tensor dy = random_tensor(shape, dtype, 12);
  Tensor y_cpu = Tensor::empty(shape, dtype);
  Tensor r_cpu = Tensor::empty({257}, stat_dtype(dtype));
  rmsnorm_forward(x, y_cpu, r_cpu);
  Tensor dx_cpu = random_tensor(shape, dtype, 13);  // backward accumulates: start from non-zero
  Tensor dx_gpu = dx_cpu.to(Device::cuda);
  rmsnorm_backward(dy, x, r_cpu, dx_cpu);

  Tensor xg = x.to(Device::cuda), dyg = dy.to(Device::cuda);
  Tensor y_gpu = Tensor::empty(shape, dtype, Device::cuda);
  Tensor r_gpu = Tensor::empty({257}, stat_dtype(dtype), Device::cuda);
  rmsnorm_forward(xg, y_gpu, r_gpu);
  rmsnorm_backward(dyg, xg, r_gpu, dx_gpu);

  const double tol = dtype == DType::bf16 ? 1e-2 : 1e-5;
  EXPECT_LT(testing::max_relative_error(y_gpu.to_doubles(), y_cpu.to_doubles()), tol);
  EXPECT_LT(testing::max_relative_error(r_gpu.to_doubles(), r_cpu.to_doubles()), 1e-5);
  EXPECT_LT(testing::max_relative_error(dx_gpu.to_doubles(), dx_cpu.to_doubles()), tol);

  // The first writer: written over NaN (every element), the values the CPU reference writes.
  Tensor written_cpu = Tensor::empty(shape, dtype);
  const std::vector<double> nan(static_cast<size_t>(x.numel()), std::nan(""));
  Tensor written_gpu = Tensor::from_doubles(nan, shape, dtype).to(Device::cuda);
  rmsnorm_backward(dy, x, r_cpu, written_cpu, GradWrite::overwrite);
  rmsnorm_backward(dyg, xg, r_gpu, written_gpu, GradWrite::overwrite);
  EXPECT_LT(testing::max_relative_error(written_gpu.to_doubles(), written_cpu.to_doubles()), tol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16));

}  // namespace
}  // namespace gpt
