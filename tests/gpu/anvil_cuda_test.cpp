// CUDA ANVIL steps (kernels/anvil.h, RECIPE §S.8) against the CPU reference on the bank shapes of the `ext` and
// `mini-ext` profiles (768×768, 3072×768 and the wide 768×3072, for per-row and per-column statistics):
//  - momentum of the two rails and the trace scaling are bit-exact on random data (elementwise math and a serial
//    trace in the CPU's order);
//  - the update is bit-exact where its statistics sum exactly in any order, and within the per-dtype tolerances of
//    tests/gpu/gpu_test_util.h on random data (the row/column means are summed in another fixed order);
//  - whole steps (gemm products included) are held to the accuracy the CPU reaches in the same dtype against f64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/anvil.h"
#include "tests/gpu/bank_optimizer_test_util.h"

namespace gpt {
namespace {

using gpu_testing::bit_mismatches;
using gpu_testing::difference;
using gpu_testing::masters;
using gpu_testing::poison;
using gpu_testing::random_u16;
using gpu_testing::relative_frobenius;
using gpu_testing::tolerance_for;

struct StackShape {
  int64_t count, rows, cols;
};
const StackShape kSeedShapes[] = {{2, 768, 768}, {2, 3072, 768}, {2, 768, 3072}};

constexpr int64_t kSteps = 1194;  // the seed schedule's N

AnvilArgs args_at(int64_t step) {
  AnvilArgs a;
  a.step = step;
  a.total_steps = kSteps;
  a.lr = 0.03;
  a.odd_matrix_lr_mul = 2.0;
  a.first_matrix = 1;
  return a;
}

int64_t stats_of(const StackShape& s) { return s.rows >= s.cols ? s.rows : s.cols; }

class AnvilCuda : public ::testing::TestWithParam<DType> {};

// Steps in the rail warmup (β_f = β_r, w = 1), on the plateau after the fast switch and in the taper.
TEST_P(AnvilCuda, MomentumIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const StackShape& s : kSeedShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    for (int64_t step : {int64_t{17}, int64_t{600}, kSteps - 3}) {
      const AnvilRails rails = anvil_rails(args_at(step));
      const Tensor grad = testing::random_tensor(shape, dtype, 1 + step);
      Tensor fast_cpu = testing::random_tensor(shape, stat_dtype(dtype), 2, 0.3);
      Tensor slow_cpu = testing::random_tensor(shape, stat_dtype(dtype), 3, 0.3);
      Tensor fast_gpu = fast_cpu.to(Device::cuda), slow_gpu = slow_cpu.to(Device::cuda);
      Tensor x_cpu = Tensor::empty(shape, dtype);
      Tensor x_gpu = Tensor::empty(shape, dtype, Device::cuda);
      poison(x_gpu);
      anvil_momentum(grad, fast_cpu, slow_cpu, x_cpu, rails);
      anvil_momentum(grad.to(Device::cuda), fast_gpu, slow_gpu, x_gpu, rails);
      EXPECT_EQ(bit_mismatches(x_gpu, x_cpu), 0) << shape_string(shape) << " step " << step;
      EXPECT_EQ(bit_mismatches(fast_gpu, fast_cpu), 0) << shape_string(shape) << " step " << step;
      EXPECT_EQ(bit_mismatches(slow_gpu, slow_cpu), 0) << shape_string(shape) << " step " << step;
    }
  }
}

// The backend piece after the Gram product, on the same X and A: δ from the trace, X/δ and A/δ² give the CPU's bits.
// A sizeable trace (a Gram matrix of random X) so δ is far from its 1e-6 floor.
TEST_P(AnvilCuda, TraceScalingIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const StackShape& s : kSeedShapes) {
    const int64_t k = std::min(s.rows, s.cols);
    Tensor x_cpu = testing::random_tensor({s.count, s.rows, s.cols}, dtype, 4, 0.05);
    Tensor gram_cpu = Tensor::empty({s.count, k, k}, dtype);
    short_side_gram(x_cpu, gram_cpu);
    Tensor x_gpu = x_cpu.to(Device::cuda), gram_gpu = gram_cpu.to(Device::cuda);
    const Tensor x_before = x_cpu.clone();
    cpu::anvil_scale_by_trace(x_cpu, gram_cpu);
    cuda::anvil_scale_by_trace(x_gpu, gram_gpu);
    EXPECT_EQ(bit_mismatches(x_gpu, x_cpu), 0) << shape_string(x_cpu.shape());
    EXPECT_EQ(bit_mismatches(gram_gpu, gram_cpu), 0) << shape_string(x_cpu.shape());
    EXPECT_GT(relative_frobenius(x_before, x_cpu), 0.1);  // the scaling did something
  }
}

// The public op (the Gram product through gemm, then the scaling): within the dtype's tolerance, except in bf16: the
// two gemms may round a diagonal entry of A differently, which can flip the bf16 rounding of the trace, so δ may
// differ by one bf16 ulp (2^-8 relative) and W(δ²) by two, moving every element of X and A by that much.
TEST_P(AnvilCuda, GramNormalizeMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const double tolerance = dtype == DType::bf16 ? 3.0 / 256 : tolerance_for(dtype);
  for (const StackShape& s : kSeedShapes) {
    const int64_t k = std::min(s.rows, s.cols);
    Tensor x_cpu = testing::random_tensor({s.count, s.rows, s.cols}, dtype, 5, 0.05);
    Tensor x_gpu = x_cpu.to(Device::cuda);
    Tensor gram_cpu = Tensor::empty({s.count, k, k}, dtype);
    Tensor gram_gpu = Tensor::empty({s.count, k, k}, dtype, Device::cuda);
    poison(gram_gpu);
    anvil_gram_normalize(x_cpu, gram_cpu);
    anvil_gram_normalize(x_gpu, gram_gpu);
    EXPECT_LT(relative_frobenius(x_gpu, x_cpu), tolerance) << shape_string(x_cpu.shape());
    EXPECT_LT(relative_frobenius(gram_gpu, gram_cpu), tolerance) << shape_string(x_cpu.shape());
  }
}

struct ApplyResult {
  std::vector<double> master_gpu, master_cpu, master_before;
  Tensor param_gpu, param_cpu, mantissa_gpu, mantissa_cpu, s_gpu, s_cpu;
};

ApplyResult run_apply(const Tensor& x, const Tensor& s0, const Tensor& slow_rail, const Tensor& param0,
                      const Tensor& mantissa0, const AnvilArgs& args) {
  ApplyResult r;
  r.param_cpu = param0.clone();
  r.s_cpu = s0.clone();
  r.mantissa_cpu = mantissa0.defined() ? mantissa0.clone() : Tensor();
  r.param_gpu = param0.to(Device::cuda);
  r.s_gpu = s0.to(Device::cuda);
  r.mantissa_gpu = mantissa0.defined() ? mantissa0.to(Device::cuda) : Tensor();
  r.master_before = masters(param0, mantissa0);
  anvil_apply(x, r.s_cpu, slow_rail, r.param_cpu, r.mantissa_cpu, args);
  anvil_apply(x.to(Device::cuda), r.s_gpu, slow_rail.to(Device::cuda), r.param_gpu, r.mantissa_gpu, args);
  r.master_cpu = masters(r.param_cpu, r.mantissa_cpu);
  r.master_gpu = masters(r.param_gpu, r.mantissa_gpu);
  return r;
}

TEST_P(AnvilCuda, ApplyMatchesCpuOnRandomData) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const StackShape& s : kSeedShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    Tensor x = testing::random_tensor(shape, dtype, 6, 0.02);
    std::vector<double> s0 = testing::random_tensor({s.count, stats_of(s)}, DType::f64, 7, 1e-4).to_doubles();
    for (double& v : s0) v = std::abs(v);
    const Tensor s0_t = Tensor::from_doubles(s0, {s.count, stats_of(s)}, stat_dtype(dtype));
    const Tensor rail = testing::random_tensor(shape, stat_dtype(dtype), 8, 0.01);
    const Tensor param = testing::random_tensor(shape, dtype, 9, 0.05);
    const Tensor mantissa = dtype == DType::bf16 ? random_u16(shape, 10) : Tensor();
    const ApplyResult r = run_apply(x, s0_t, rail, param, mantissa, args_at(700));
    EXPECT_LT(relative_frobenius(difference(r.master_gpu, r.master_before), difference(r.master_cpu, r.master_before)),
              tolerance_for(dtype))
        << shape_string(shape);
    EXPECT_LT(relative_frobenius(r.s_gpu, r.s_cpu), tolerance_for(stat_dtype(dtype))) << shape_string(shape);
  }
}

// Rows (or columns, for wide matrices) of ±2^-e with one e per statistic, S = r and β2 = 3/4: every mean, sum and
// square root of the statistics is exact, so the GPU must give the CPU's bits, the decay gated by a slow rail of
// random sign (a gate that read U instead would differ wherever the signs of U and the rail disagree).
TEST_P(AnvilCuda, ApplyIsBitExactWhenStatisticsAreExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  if (dtype == DType::f64) GTEST_SKIP() << "covered by the f32/bf16 cases";
  for (const StackShape& s : kSeedShapes) {
    const Shape shape{s.count, s.rows, s.cols};
    const bool per_row = s.rows >= s.cols;
    const int64_t stats = stats_of(s);
    std::mt19937_64 rng(11);
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
    AnvilArgs args = args_at(700);
    args.beta2 = 0.75;
    args.lr = 0.1;  // a decay of 2.25·lr·lr_eff ≥ 2%, so a wrong gate changes many bits
    const Tensor rail = testing::random_tensor(shape, stat_dtype(dtype), 12, 1.0);
    const Tensor param = testing::random_tensor(shape, dtype, 13, 0.05);
    const Tensor mantissa = dtype == DType::bf16 ? random_u16(shape, 14) : Tensor();
    const ApplyResult r =
        run_apply(Tensor::from_doubles(x, shape, dtype), Tensor::from_doubles(s0, {s.count, stats}, stat_dtype(dtype)),
                  rail, param, mantissa, args);
    EXPECT_EQ(bit_mismatches(r.param_gpu, r.param_cpu), 0) << shape_string(shape);
    if (dtype == DType::bf16) {
      EXPECT_EQ(bit_mismatches(r.mantissa_gpu, r.mantissa_cpu), 0) << shape_string(shape);
    }
    EXPECT_EQ(bit_mismatches(r.s_gpu, r.s_cpu), 0) << shape_string(shape);
    EXPECT_GT(relative_frobenius(difference(r.master_cpu, r.master_before), r.master_before), 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AnvilCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Three whole steps (warmup, plateau, taper) from zero state on the same gradients: the f64 CPU run is the
// reference, and the CUDA run in `dtype` may be at most 3× as far from it as the CPU run in `dtype` plus a floor: the
// two differ only in summation orders (gemm, statistics), which either may round better. The floor is the dtype's
// tolerance, except in f64, where the CPU run is the reference itself and the floor, 1e-10, allows the ≈1e-13
// relative differences of f64 gemm orders to grow through the six maps. The 768×768 bank and two small stacks keep
// the f64 CPU products short.
void check_whole_steps(DType dtype) {
  const StackShape shapes[] = {{2, 768, 768}, {3, 96, 160}, {3, 160, 96}};
  for (const StackShape& s : shapes) {
    const Shape shape{s.count, s.rows, s.cols};
    // All three start from the same values (the dtype's rounding of a random stack); clones, since to() of the
    // same dtype shares storage.
    Tensor p_cpu = testing::random_tensor(shape, DType::f64, 20, 0.05).to(dtype).clone();
    Tensor p_ref = p_cpu.to(DType::f64).clone();
    Tensor p_gpu = p_cpu.to(Device::cuda);
    const std::vector<double> before = p_ref.to_doubles();
    AnvilState st_ref = AnvilState::zeros(p_ref), st_cpu = AnvilState::zeros(p_cpu), st_gpu = AnvilState::zeros(p_gpu);
    for (int64_t step : {int64_t{3}, int64_t{600}, kSteps - 2}) {
      const Tensor g = testing::random_tensor(shape, DType::f64, 100 + step, 0.01).to(dtype);
      anvil_update(p_ref, g.to(DType::f64), st_ref, args_at(step));
      anvil_update(p_cpu, g, st_cpu, args_at(step));
      anvil_update(p_gpu, g.to(Device::cuda), st_gpu, args_at(step));
    }
    const std::vector<double> update_ref = difference(p_ref.to_doubles(), before);
    const std::vector<double> update_cpu = difference(masters(p_cpu, st_cpu.mantissa), before);
    const std::vector<double> update_gpu = difference(masters(p_gpu, st_gpu.mantissa), before);
    const double cpu_error = relative_frobenius(update_cpu, update_ref);
    const double gpu_error = relative_frobenius(update_gpu, update_ref);
    std::printf("[%s %s] update error against f64: cpu %.3e cuda %.3e\n", dtype_name(dtype),
                shape_string(shape).c_str(), cpu_error, gpu_error);
    const double floor = dtype == DType::f64 ? 1e-10 : tolerance_for(dtype);
    EXPECT_LT(gpu_error, 3 * cpu_error + floor) << shape_string(shape);
  }
}

TEST(AnvilCudaUpdate, F64WholeStepsMatchCpu) {
  GPT_REQUIRE_CUDA();
  check_whole_steps(DType::f64);
}
TEST(AnvilCudaUpdate, F32WholeStepsAsAccurateAsCpu) {
  GPT_REQUIRE_CUDA();
  check_whole_steps(DType::f32);
}
TEST(AnvilCudaUpdate, Bf16WholeStepsAsAccurateAsCpu) {
  GPT_REQUIRE_CUDA();
  check_whole_steps(DType::bf16);
}

// Matrices with a zero gradient from zero state: a bank's padding slots at W > 1 (zero weights too: vo_bank and
// qk_bank hold more matrices than the layers use) and a layer whose output is gated to zero (live weights). Both
// give X = 0, a zero Gram and trace and δ = W(1e-6); over the first three steps of a run every state tensor must
// stay finite, the padding matrix zero and the whole stack equal to the CPU's within the bf16 tolerance.
TEST(AnvilCudaUpdate, ZeroGradientMatricesStayFinite) {
  GPT_REQUIRE_CUDA();
  const Shape shape{4, 768, 768};
  const int64_t per = 768 * 768;
  auto zero_matrices = [&](Tensor t, std::initializer_list<int64_t> which) {
    Tensor host = t.to(DType::f64).clone();
    for (const int64_t m : which) std::fill_n(host.data<double>() + m * per, per, 0.0);
    return host.to(t.dtype());
  };
  Tensor p_cpu = zero_matrices(testing::random_tensor(shape, DType::bf16, 30, 0.05), {1});  // 1: padding
  Tensor p_gpu = p_cpu.to(Device::cuda);
  AnvilState st_cpu = AnvilState::zeros(p_cpu), st_gpu = AnvilState::zeros(p_gpu);
  for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{2}}) {
    const Tensor g = zero_matrices(testing::random_tensor(shape, DType::bf16, 40 + step, 0.01), {1, 2});  // 2: gated
    anvil_update(p_cpu, g, st_cpu, args_at(step));
    anvil_update(p_gpu, g.to(Device::cuda), st_gpu, args_at(step));
  }
  auto expect_finite = [](const Tensor& t, const char* what) {
    const std::vector<double> v = t.to(Device::cpu).to_doubles();
    EXPECT_EQ(std::count_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), 0) << what;
  };
  expect_finite(p_gpu, "param");
  expect_finite(st_gpu.fast_rail, "fast_rail");
  expect_finite(st_gpu.slow_rail, "slow_rail");
  expect_finite(st_gpu.second_moment, "second_moment");
  const std::vector<double> gpu = masters(p_gpu, st_gpu.mantissa), cpu = masters(p_cpu, st_cpu.mantissa);
  EXPECT_TRUE(std::all_of(gpu.begin() + per, gpu.begin() + 2 * per, [](double x) { return x == 0.0; }));
  EXPECT_LT(relative_frobenius(gpu, cpu), tolerance_for(DType::bf16));
}

}  // namespace
}  // namespace gpt
