// CUDA smear gate forward/backward against the CPU reference.
#include <gtest/gtest.h>

#include "kernels/smear.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct SmearCase {
  DType dtype;
  int64_t rows, d;
};

class SmearCuda : public ::testing::TestWithParam<SmearCase> {};

TEST_P(SmearCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, d] = GetParam();
  const DType sd = stat_dtype(dtype);
  const Tensor e = random_tensor({rows, d}, dtype, 51);
  const Tensor w = random_tensor({1, kSmearGateWidth}, dtype, 52, 0.5);
  const Tensor lam = scalar_tensor(0.61, sd);
  Tensor out_cpu = Tensor::empty({rows, d}, dtype), sig_cpu = Tensor::empty({rows}, sd);
  smear_forward(e, w, lam, out_cpu, sig_cpu);
  const Tensor eg = gpu(e), wg = gpu(w), lg = gpu(lam);
  Tensor out_gpu = Tensor::empty({rows, d}, dtype, Device::cuda), sig_gpu = Tensor::empty({rows}, sd, Device::cuda);
  poison(out_gpu);
  poison(sig_gpu);
  smear_forward(eg, wg, lg, out_gpu, sig_gpu);
  const double tol = tolerance_for(dtype);
  EXPECT_LT(rel_error(out_gpu, out_cpu), tol);
  // bf16: z is rounded to bf16 before σ, and a different summation order can flip that rounding on rare rows.
  EXPECT_LT(rel_error(sig_gpu, sig_cpu), dtype == DType::bf16 ? tol : dtype == DType::f64 ? 1e-12 : 1e-5);

  const Tensor dout = random_tensor({rows, d}, dtype, 53);
  Tensor de_cpu = random_tensor({rows, d}, dtype, 54), de_gpu = gpu(de_cpu);
  Tensor dw_cpu = random_tensor({1, kSmearGateWidth}, dtype, 55), dw_gpu = gpu(dw_cpu);
  Tensor dl_cpu = scalar_tensor(0.125, sd), dl_gpu = gpu(dl_cpu);
  smear_backward(dout, e, w, lam, sig_cpu, de_cpu, dw_cpu, dl_cpu);
  smear_backward(gpu(dout), eg, wg, lg, gpu(sig_cpu), de_gpu, dw_gpu, dl_gpu);
  EXPECT_LT(rel_error(de_gpu, de_cpu), tol);
  // Parameter gradients sum over all rows: summation order differs from the CPU's sequential loop.
  const double ptol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-4 : 1e-2;
  EXPECT_LT(rel_error(dw_gpu, dw_cpu), ptol);
  EXPECT_LT(rel_error(dl_gpu, dl_cpu), dtype == DType::f64 ? 1e-12 : 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SmearCuda,
                         ::testing::Values(SmearCase{DType::f64, 9, 16}, SmearCase{DType::f32, 9, 16},
                                           SmearCase{DType::bf16, 9, 16}, SmearCase{DType::f32, 1, 12},
                                           SmearCase{DType::f32, 2048, 768}, SmearCase{DType::bf16, 16384, 768}));

}  // namespace
}  // namespace gpt
