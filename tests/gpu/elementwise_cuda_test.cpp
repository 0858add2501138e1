// CUDA mix_forward / mix_backward (scalar, sigmoid-scalar, lane, grouped-lane and offset coefficients) and
// scale_weight against the CPU reference.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/mix_variants.h"
#include "kernels/elementwise.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct MixCase {
  DType dtype;
  int64_t rows, n;
};

class MixCuda : public ::testing::TestWithParam<MixCase> {};

// Builds the same four terms on one device: ρ·x0, σ(λ)·G[:, 3]·x1, (1 + G[:, 5 + head])·x2 (6 groups), x3.
struct MixSetup {
  Tensor x[4], rho, lam, lanes;
  std::vector<MixTerm> terms() const {
    return {MixTerm{x[0], Coef::of_scalar(rho)}, MixTerm{x[1], Coef::sigmoid_scalar(lam).times_lane(lanes, 3)},
            MixTerm{x[2], Coef::of_lane(lanes, 5, 6).plus(1.0f)}, MixTerm{x[3], Coef::one()}};
  }
  MixSetup on_gpu() const {
    MixSetup g;
    for (int k = 0; k < 4; ++k) g.x[k] = gpu(x[k]);
    g.rho = gpu(rho);
    g.lam = gpu(lam);
    g.lanes = gpu(lanes);
    return g;
  }
};

MixSetup make_setup(DType dtype, int64_t rows, int64_t n, uint64_t seed) {
  MixSetup s;
  for (int k = 0; k < 4; ++k) s.x[k] = random_tensor({rows, n}, dtype, seed + k);
  const DType sd = stat_dtype(dtype);
  s.rho = scalar_tensor(0.8125, sd);
  s.lam = scalar_tensor(-0.37, sd);
  s.lanes = random_tensor({rows, 12}, dtype, seed + 9);
  return s;
}

TEST_P(MixCuda, ForwardMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const MixSetup cpu = make_setup(dtype, rows, n, 100);
  const MixSetup dev = cpu.on_gpu();
  Tensor out_cpu = Tensor::empty({rows, n}, dtype), out_gpu = Tensor::empty({rows, n}, dtype, Device::cuda);
  poison(out_gpu);
  const auto tc = cpu.terms(), tg = dev.terms();
  mix_forward(tc, out_cpu);
  mix_forward(tg, out_gpu);
  EXPECT_LT(rel_error(out_gpu, out_cpu), tolerance_for(dtype));
}

TEST_P(MixCuda, InPlaceForwardMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  MixSetup cpu = make_setup(dtype, rows, n, 200);
  MixSetup dev = cpu.on_gpu();
  const auto tc = cpu.terms(), tg = dev.terms();
  mix_forward(tc, cpu.x[0]);  // out aliases x0
  mix_forward(tg, dev.x[0]);
  EXPECT_LT(rel_error(dev.x[0], cpu.x[0]), tolerance_for(dtype));
}

// Every version of kernels/cuda/mix_variants.h (v2 takes the packed bf16 rows of 768 and the f32 rows of 384, v1
// the rest) from the same start values.
TEST_P(MixCuda, BackwardMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const MixSetup cpu = make_setup(dtype, rows, n, 300);
  const MixSetup dev = cpu.on_gpu();
  const DType sd = stat_dtype(dtype);
  const Tensor dout_start = random_tensor({rows, n}, dtype, 310);
  Tensor dx_start[3];
  for (int k = 0; k < 3; ++k) dx_start[k] = random_tensor({rows, n}, dtype, 320 + k);
  const Tensor dl_start = random_tensor({rows, 12}, dtype, 330);
  // Term 3 overwrites the dout tensor itself (the in-place residual gradient).
  auto grads = [](Tensor* dx, Tensor& drho, Tensor& dlam, Tensor& dl, Tensor& dout) {
    return std::vector<MixGrad>{MixGrad{.dx = dx[0], .dscalar = drho},
                                MixGrad{.dx = dx[1], .dscalar = dlam, .dlanes = dl},
                                MixGrad{.dx = dx[2], .dlanes = dl}, MixGrad{.dx = dout, .overwrite_dx = true}};
  };
  Tensor dout_cpu = dout_start.clone(), dl_cpu = dl_start.clone();
  Tensor dx_cpu[3] = {dx_start[0].clone(), dx_start[1].clone(), dx_start[2].clone()};
  Tensor drho_cpu = scalar_tensor(0.25, sd), dlam_cpu = scalar_tensor(-0.5, sd);
  const auto tc = cpu.terms(), tg = dev.terms();
  mix_backward(dout_cpu, tc, grads(dx_cpu, drho_cpu, dlam_cpu, dl_cpu, dout_cpu));  // dout is term 3's dx too
  for (int version = 1; version <= cuda::kMixBackwardVersions; ++version) {
    SCOPED_TRACE("version " + std::to_string(version));
    Tensor dout_gpu = gpu(dout_start), dl_gpu = gpu(dl_start);
    Tensor dx_gpu[3] = {gpu(dx_start[0]), gpu(dx_start[1]), gpu(dx_start[2])};
    Tensor drho_gpu = gpu(scalar_tensor(0.25, sd)), dlam_gpu = gpu(scalar_tensor(-0.5, sd));
    cuda::mix_backward_version(dout_gpu, tg, grads(dx_gpu, drho_gpu, dlam_gpu, dl_gpu, dout_gpu), version);
    const double tol = tolerance_for(dtype);
    for (int k = 0; k < 3; ++k) EXPECT_LT(rel_error(dx_gpu[k], dx_cpu[k]), tol) << "dx" << k;
    EXPECT_LT(rel_error(dout_gpu, dout_cpu), tol) << "in-place dx of term 3";
    EXPECT_LT(rel_error(dl_gpu, dl_cpu), tol);
    // Scalar gradients are sums over rows·n products; bf16 inputs but fp32/double sums.
    const double stol = dtype == DType::f64 ? 1e-12 : 1e-4;
    EXPECT_LT(rel_error(drho_gpu, drho_cpu), stol);
    EXPECT_LT(rel_error(dlam_gpu, dlam_cpu), stol);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MixCuda,
                         ::testing::Values(MixCase{DType::f64, 37, 42}, MixCase{DType::f32, 37, 42},
                                           MixCase{DType::bf16, 37, 42}, MixCase{DType::bf16, 5, 18},
                                           MixCase{DType::f32, 2048, 768}, MixCase{DType::f32, 1000, 384},
                                           MixCase{DType::bf16, 16384, 768}));

// §2.7: the MUDD factor 0.1 in fp32, never rounded to bf16: 0.1f·2.25 -> bf16 0.224609375 (a bf16-rounded factor
// gives 0.2255859375), on the CPU reference and on CUDA alike.
TEST(MixUnroundedScalarCuda, KeepsTheFp32Factor) {
  GPT_REQUIRE_CUDA_DEVICE();
  Tensor x = gpu(Tensor::from_doubles(std::vector<double>{2.25, -2.25, 2.25, 2.25}, {4, 1}, DType::bf16));
  Tensor tenth = gpu(Tensor::from_doubles(std::vector<double>{0.1}, {1}, DType::f32));
  Tensor out = Tensor::empty({4, 1}, DType::bf16, Device::cuda);
  poison(out);
  const MixTerm term{x, Coef::unrounded_scalar(tenth)};
  mix_forward({&term, 1}, out);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{0.224609375, -0.224609375, 0.224609375, 0.224609375}));
}

TEST(ScaleWeightCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const Tensor w = random_tensor({768, 3072}, DType::bf16, 401);
  const Tensor lam = scalar_tensor(1.37, DType::f32);
  Tensor out_cpu = Tensor::empty(w.shape(), DType::bf16), out_gpu = Tensor::empty(w.shape(), DType::bf16, Device::cuda);
  poison(out_gpu);
  scale_weight_forward(w, lam, out_cpu);
  scale_weight_forward(gpu(w), gpu(lam), out_gpu);
  EXPECT_EQ(rel_error(out_gpu, out_cpu), 0.0) << "one bf16 product, rounded once";
  const Tensor dwo = random_tensor(w.shape(), DType::bf16, 402);
  Tensor dw_cpu = random_tensor(w.shape(), DType::bf16, 403), dw_gpu = gpu(dw_cpu);
  Tensor dl_cpu = scalar_tensor(0.0, DType::f32), dl_gpu = gpu(dl_cpu);
  scale_weight_backward(dwo, w, lam, dw_cpu, dl_cpu);
  scale_weight_backward(gpu(dwo), gpu(w), gpu(lam), dw_gpu, dl_gpu);
  EXPECT_EQ(rel_error(dw_gpu, dw_cpu), 0.0);
  EXPECT_LT(rel_error(dl_gpu, dl_cpu), 1e-4);
}

}  // namespace
}  // namespace gpt
