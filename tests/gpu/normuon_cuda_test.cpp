// CUDA NorMuon steps (kernels/normuon.h: momentum, normalize, apply) against the CPU reference on the
// recipe's stack shapes (768×768 and 3072×768, plus a wide 768×3072 for the per-column statistics).
// The elementwise math is bit-exact: momentum on random data; apply (including the bf16 master
// truncation into weight + mantissa) on inputs whose statistics sum exactly in any order.
#include <gtest/gtest.h>

#include <random>

#include "kernels/normuon.h"
#include "tests/gpu/bank_optimizer_test_util.h"

namespace gpt {
namespace {

using gpu_testing::bit_mismatches;
using gpu_testing::difference;
using gpu_testing::masters;
using gpu_testing::random_u16;
using gpu_testing::relative_frobenius;
using gpu_testing::tolerance_for;

struct StackShape {
  int64_t count, rows, cols;
};
const StackShape kShapes[] = {{2, 768, 768}, {2, 3072, 768}, {2, 768, 3072}};

class NorMuonCuda : public ::testing::TestWithParam<DType> {};

TEST_P(NorMuonCuda, MomentumIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const StackShape& s : kShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    Tensor grad = testing::random_tensor(shape, dtype, 1);
    Tensor m_cpu = testing::random_tensor(shape, stat_dtype(dtype), 2, 0.3);
    Tensor m_gpu = m_cpu.to(Device::cuda);
    Tensor x_cpu = Tensor::empty(shape, dtype);
    Tensor x_gpu = Tensor::empty(shape, dtype, Device::cuda);
    gpu_testing::poison(x_gpu);
    normuon_momentum(grad, m_cpu, x_cpu, 0.95);
    normuon_momentum(grad.to(Device::cuda), m_gpu, x_gpu, 0.95);
    EXPECT_EQ(bit_mismatches(x_gpu, x_cpu), 0) << shape_string(shape);
    EXPECT_EQ(bit_mismatches(m_gpu, m_cpu), 0) << shape_string(shape);
  }
}

TEST_P(NorMuonCuda, NormalizeMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const StackShape& s : kShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    Tensor x_cpu = testing::random_tensor(shape, dtype, 3, 0.05);
    Tensor x_gpu = x_cpu.to(Device::cuda);
    normuon_normalize(x_cpu);
    normuon_normalize(x_gpu);
    EXPECT_LT(relative_frobenius(x_gpu, x_cpu), tolerance_for(dtype)) << shape_string(shape);
  }
}

// Runs normuon_apply on both backends from the same state; returns (gpu, cpu) of masters and S.
struct ApplyResult {
  std::vector<double> master_gpu, master_cpu, master_before;
  Tensor param_gpu, param_cpu, mantissa_gpu, mantissa_cpu, s_gpu, s_cpu;
};

ApplyResult run_apply(const Tensor& x, const Tensor& s0, const Tensor& param0, const Tensor& mantissa0,
                      const NorMuonArgs& args) {
  ApplyResult r;
  r.param_cpu = param0.clone();
  r.s_cpu = s0.clone();
  r.mantissa_cpu = mantissa0.defined() ? mantissa0.clone() : Tensor();
  r.param_gpu = param0.to(Device::cuda);
  r.s_gpu = s0.to(Device::cuda);
  r.mantissa_gpu = mantissa0.defined() ? mantissa0.to(Device::cuda) : Tensor();
  r.master_before = masters(param0, mantissa0);
  normuon_apply(x, r.s_cpu, r.param_cpu, r.mantissa_cpu, args);
  normuon_apply(x.to(Device::cuda), r.s_gpu, r.param_gpu, r.mantissa_gpu, args);
  r.master_cpu = masters(r.param_cpu, r.mantissa_cpu);
  r.master_gpu = masters(r.param_gpu, r.mantissa_gpu);
  return r;
}

const NorMuonArgs kApplyArgs{
    .momentum = 0.95, .lr = 0.03, .weight_decay = 1.2, .beta2 = 0.9, .odd_matrix_lr_mul = 2.0, .first_matrix = 1};

TEST_P(NorMuonCuda, ApplyMatchesCpuOnRandomData) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const StackShape& s : kShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    const int64_t stats = s.rows >= s.cols ? s.rows : s.cols;
    Tensor x = testing::random_tensor(shape, dtype, 4, 0.02);
    std::vector<double> s0 = testing::random_tensor({s.count, stats}, DType::f64, 5, 1e-4).to_doubles();
    for (double& v : s0) v = std::abs(v);
    const Tensor s0_t = Tensor::from_doubles(s0, {s.count, stats}, stat_dtype(dtype));
    const Tensor param = testing::random_tensor(shape, dtype, 6, 0.05);
    const Tensor mantissa = dtype == DType::bf16 ? random_u16(shape, 7) : Tensor();
    const ApplyResult r = run_apply(x, s0_t, param, mantissa, kApplyArgs);
    // Compare the updates (new − old master): the params themselves would hide an error in the step.
    EXPECT_LT(gpu_testing::relative_frobenius(difference(r.master_gpu, r.master_before),
                                              difference(r.master_cpu, r.master_before)),
              tolerance_for(dtype))
        << shape_string(shape);
    EXPECT_LT(relative_frobenius(r.s_gpu, r.s_cpu), tolerance_for(stat_dtype(dtype))) << shape_string(shape);
  }
}

// Rows (or columns, for wide matrices) of ±2^-e with one e per statistic, S = r and β2 = 3/4: every mean,
// sum and square root of the statistics is exact, so the GPU must reproduce the CPU's update bit for bit.
TEST_P(NorMuonCuda, ApplyIsBitExactWhenStatisticsAreExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  if (dtype == DType::f64) GTEST_SKIP() << "covered by the f32/bf16 cases";
  for (const StackShape& s : kShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    const bool per_row = s.rows >= s.cols;
    const int64_t stats = per_row ? s.rows : s.cols;
    std::mt19937_64 rng(8);
    std::vector<int> exponent(static_cast<size_t>(s.count * stats));
    for (int& e : exponent) e = static_cast<int>(rng() % 5);
    std::vector<double> x(static_cast<size_t>(s.count * s.rows * s.cols));
    for (int64_t k = 0; k < s.count; ++k) {
      for (int64_t i = 0; i < s.rows; ++i) {
        for (int64_t j = 0; j < s.cols; ++j) {
          const int e = exponent[static_cast<size_t>(k * stats + (per_row ? i : j))];
          x[static_cast<size_t>((k * s.rows + i) * s.cols + j)] = std::ldexp(rng() % 2 ? 1.0 : -1.0, -e);
        }
      }
    }
    std::vector<double> s0(exponent.size());
    for (size_t t = 0; t < s0.size(); ++t) s0[t] = std::ldexp(1.0, -2 * exponent[t]);
    NorMuonArgs args = kApplyArgs;
    args.beta2 = 0.75;
    const Tensor param = testing::random_tensor(shape, dtype, 9, 0.05);
    const Tensor mantissa = dtype == DType::bf16 ? random_u16(shape, 10) : Tensor();
    const ApplyResult r =
        run_apply(Tensor::from_doubles(x, shape, dtype), Tensor::from_doubles(s0, {s.count, stats}, stat_dtype(dtype)),
                  param, mantissa, args);
    EXPECT_EQ(bit_mismatches(r.param_gpu, r.param_cpu), 0) << shape_string(shape);
    if (dtype == DType::bf16) {
      EXPECT_EQ(bit_mismatches(r.mantissa_gpu, r.mantissa_cpu), 0) << shape_string(shape);
    }
    EXPECT_EQ(bit_mismatches(r.s_gpu, r.s_cpu), 0) << shape_string(shape);
    // The update is not trivially zero.
    EXPECT_GT(gpu_testing::relative_frobenius(difference(r.master_cpu, r.master_before), r.master_before), 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NorMuonCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gpt
