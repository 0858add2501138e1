// CUDA softcapped training loss (fwd + fused bwd, bf16/f32/f64 and e5m2 gradients) and validation rows against the
// CPU reference.
#include <gtest/gtest.h>

#include "kernels/fp8.h"
#include "kernels/softcap_loss.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct LossCase {
  DType dtype;
  int64_t rows, vocab;
  bool prefix;
};

class SoftcapLossCuda : public ::testing::TestWithParam<LossCase> {};

Tensor make_prefix_table(int64_t vocab, uint64_t seed) {
  Tensor t = random_ids(vocab, -1, vocab, seed, DType::i64);  // about 1/V of the entries are −1 (no prefix)
  for (int64_t v = 0; v < vocab; v += 3) t.data<int64_t>()[v] = -1;
  return t;
}

TEST_P(SoftcapLossCuda, LossAndGradientMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, vocab, with_prefix] = GetParam();
  const Tensor z = random_tensor({rows, vocab}, dtype, 91, 12.0);  // raw logits spanning the softcap's slope
  const Tensor y = random_ids(rows, 0, vocab, 92, DType::i64);
  const Tensor prefix = with_prefix ? make_prefix_table(vocab, 93) : Tensor{};
  TrainLossConfig cfg{.mtp_weights = {1.0f, 0.5f, 0.25f}, .prefix_weight = 0.3f, .loss_scale = 1.0f / 3.0f};
  const DType sd = stat_dtype(dtype);
  Tensor loss_cpu = Tensor::empty({1}, sd), dz_cpu = Tensor::empty({rows, vocab}, dtype);
  softcap_train_loss(z, y, prefix, cfg, loss_cpu, dz_cpu);
  Tensor loss_gpu = Tensor::empty({1}, sd, Device::cuda), dz_gpu = Tensor::empty({rows, vocab}, dtype, Device::cuda);
  poison(loss_gpu);
  poison(dz_gpu);
  softcap_train_loss(gpu(z), gpu(y), with_prefix ? gpu(prefix) : Tensor{}, cfg, loss_gpu, dz_gpu);
  const double loss_tol = dtype == DType::f64 ? 1e-12 : 1e-5;
  EXPECT_LT(rel_error(loss_gpu, loss_cpu), loss_tol);
  EXPECT_LT(rel_error(dz_gpu, dz_cpu), tolerance_for(dtype));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftcapLossCuda,
                         ::testing::Values(LossCase{DType::f64, 7, 333, true}, LossCase{DType::f32, 7, 333, true},
                                           LossCase{DType::bf16, 7, 333, false}, LossCase{DType::bf16, 5, 64, true},
                                           LossCase{DType::f32, 64, 50304, true},
                                           LossCase{DType::bf16, 2048, 50304, true}));

TEST(SoftcapLossCuda, E5m2GradientMatchesCpuBits) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 33, vocab = 50304;
  const Tensor z = random_tensor({rows, vocab}, DType::bf16, 94, 12.0);
  const Tensor y = random_ids(rows, 0, vocab, 95, DType::i64);
  TrainLossConfig cfg{.mtp_weights = {1.0f, 0.5f}, .loss_scale = 1.0f / 8.0f, .grad_scale = 0.75f / 448.0f / 8.0f};
  Tensor loss_cpu = Tensor::empty({1}, DType::f32), g_cpu = Tensor::empty({rows, vocab}, DType::e5m2);
  softcap_train_loss(z, y, Tensor{}, cfg, loss_cpu, g_cpu);
  Tensor loss_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
  Tensor g_gpu = Tensor::empty({rows, vocab}, DType::e5m2, Device::cuda);
  GPT_CUDA_CHECK(cudaMemset(g_gpu.raw(), 0x7F, g_gpu.nbytes()));  // NaN bytes: unwritten entries fail
  softcap_train_loss(gpu(z), gpu(y), Tensor{}, cfg, loss_gpu, g_gpu);
  EXPECT_LT(rel_error(loss_gpu, loss_cpu), 1e-5);
  const Tensor back = g_gpu.to(Device::cpu);
  const auto* a = static_cast<const uint8_t*>(back.raw());
  const auto* b = static_cast<const uint8_t*>(g_cpu.raw());
  std::vector<double> ga(static_cast<size_t>(rows * vocab)), gb(ga.size());
  int64_t differing = 0;
  for (size_t i = 0; i < ga.size(); ++i) {
    ga[i] = e5m2_to_float(a[i]);
    gb[i] = e5m2_to_float(b[i]);
    differing += a[i] != b[i];
  }
  // Only elements whose fp32 value sits at an e5m2 rounding tie may land one code apart.
  EXPECT_LT(relative_frobenius(ga, gb), 2e-2);
  EXPECT_LT(static_cast<double>(differing) / static_cast<double>(ga.size()), 1e-2);
}

class ValidationLossCuda : public ::testing::TestWithParam<LossCase> {};

TEST_P(ValidationLossCuda, RowSumMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, vocab, unused] = GetParam();
  const Tensor z = random_tensor({rows, vocab}, dtype, 96, 12.0);
  const Tensor y = random_ids(rows, 0, vocab, 97, DType::i64);
  const DType sd = stat_dtype(dtype);
  Tensor sum_cpu = scalar_tensor(1.5, sd), sum_gpu = gpu(sum_cpu);  // rows_add accumulates
  validation_loss_rows_add(z, y, sum_cpu);
  validation_loss_rows_add(gpu(z), gpu(y), sum_gpu);
  EXPECT_LT(rel_error(sum_gpu, sum_cpu), dtype == DType::f64 ? 1e-12 : 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ValidationLossCuda,
                         ::testing::Values(LossCase{DType::f64, 5, 101, false}, LossCase{DType::f32, 5, 101, false},
                                           LossCase{DType::bf16, 5, 101, false},
                                           LossCase{DType::bf16, 512, 50304, false}));

}  // namespace
}  // namespace gpt
