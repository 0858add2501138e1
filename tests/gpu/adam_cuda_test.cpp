// CUDA Adam (kernels/adam.h) against the CPU reference: random data, several steps, the cautious-decay mask
// active on about half of the elements, packed and unpacked (misaligned slice) paths.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/adam.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using gpu_testing::relative_frobenius;
using gpu_testing::tolerance_for;

// Second moments are non-negative: |N(0, scale²)|.
Tensor random_second_moment(int64_t n, DType dtype, uint64_t seed) {
  std::vector<double> values = testing::random_tensor({n}, DType::f64, seed, 1e-3).to_doubles();
  for (double& v : values) v = std::abs(v);
  return Tensor::from_doubles(values, {n}, dtype);
}

struct AdamState {
  Tensor param, grad, m, v;
  AdamState to(Device device) const { return {param.to(device), grad.to(device), m.to(device), v.to(device)}; }
};

AdamState random_state(int64_t n, DType dtype, uint64_t seed) {
  const DType sd = stat_dtype(dtype);
  return {testing::random_tensor({n}, dtype, seed, 0.5), testing::random_tensor({n}, dtype, seed + 1, 0.1),
          testing::random_tensor({n}, sd, seed + 2, 0.03), random_second_moment(n, sd, seed + 3)};
}

// Fraction of elements where the cautious decay applies (update and parameter of the same sign).
double cautious_fraction(const AdamState& before, const AdamArgs& args) {
  const AdamCoefficients c = adam_coefficients(args);
  const auto p = before.param.to_doubles(), g = before.grad.to_doubles(), m = before.m.to_doubles(),
             v = before.v.to_doubles();
  int64_t hits = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double mi = c.beta1 * m[i] + (1 - c.beta1) * g[i];
    const double vi = c.beta2 * v[i] + (1 - c.beta2) * g[i] * g[i];
    hits += (mi / (std::sqrt(vi) + c.eps)) * p[i] > 0;
  }
  return static_cast<double>(hits) / static_cast<double>(p.size());
}

void expect_close(const AdamState& gpu, const AdamState& cpu, DType dtype, const char* what) {
  const double tol = tolerance_for(dtype);
  const double stat_tol = tolerance_for(stat_dtype(dtype));
  EXPECT_LT(relative_frobenius(gpu.param, cpu.param), tol) << what << ": param";
  EXPECT_LT(relative_frobenius(gpu.m, cpu.m), stat_tol) << what << ": m";
  EXPECT_LT(relative_frobenius(gpu.v, cpu.v), stat_tol) << what << ": v";
}

class AdamCuda : public ::testing::TestWithParam<DType> {};

TEST_P(AdamCuda, MillionElementsSeveralStepsMatchCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const int64_t n = (int64_t{1} << 20) + 3;  // a scalar tail after the packed part
  AdamState cpu = random_state(n, dtype, 100);
  AdamState gpu = cpu.to(Device::cuda);
  AdamArgs args{.lr = 0.008, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-10, .weight_decay = 5.0, .step = 1};
  const double fraction = cautious_fraction(cpu, args);
  EXPECT_GT(fraction, 0.3) << "the cautious mask should be active on a good share of elements";
  EXPECT_LT(fraction, 0.7);
  for (int64_t step = 1; step <= 3; ++step) {
    args.step = step;
    Tensor grad = testing::random_tensor({n}, dtype, 200 + static_cast<uint64_t>(step), 0.1);
    cpu.grad = grad;
    gpu.grad = grad.to(Device::cuda);
    adam_update(cpu.param, cpu.grad, cpu.m, cpu.v, args);
    adam_update(gpu.param, gpu.grad, gpu.m, gpu.v, args);
  }
  expect_close(gpu.to(Device::cpu), cpu, dtype, "1M elements");
}

TEST_P(AdamCuda, MisalignedSliceTakesUnpackedPathAndLeavesNeighboursAlone) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const int64_t rows = 1001, cols = 3;  // slice from row 1: offset of 3 elements, no 4-element alignment
  AdamState full = random_state(rows * cols, dtype, 300);
  AdamState full_gpu = full.to(Device::cuda);
  auto rows_view = [&](const Tensor& t) { return t.view({rows, cols}).slice(1, rows); };
  Tensor p_cpu = rows_view(full.param), g_cpu = rows_view(full.grad), m_cpu = rows_view(full.m),
         v_cpu = rows_view(full.v);
  Tensor p_gpu = rows_view(full_gpu.param), g_gpu = rows_view(full_gpu.grad), m_gpu = rows_view(full_gpu.m),
         v_gpu = rows_view(full_gpu.v);
  const AdamArgs args{.lr = 0.01, .weight_decay = 2.0, .step = 7};
  adam_update(p_cpu, g_cpu, m_cpu, v_cpu, args);
  adam_update(p_gpu, g_gpu, m_gpu, v_gpu, args);
  expect_close(full_gpu.to(Device::cpu), full, dtype, "slice");
  // Row 0 lies outside the slice: bit-identical to its initial values.
  const Tensor first = full_gpu.param.to(Device::cpu).view({rows, cols})[0];
  const Tensor first_ref = full.param.view({rows, cols})[0];
  EXPECT_EQ(first.to_doubles(), first_ref.to_doubles());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdamCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gpt
