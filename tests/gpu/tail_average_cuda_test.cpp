// CUDA tail-average ops (kernels/tail_average.h, RECIPE §S.5) against the CPU reference, with the `ext` profile's
// rates and ship factors, on a small odd shape, one rank's 1/8 shard of the embedding (seed: W = 8) and the whole
// 50304×768 table (mini-ext: W = 1). The elementwise ops must give the CPU's bits (outputs NaN-poisoned first where
// the op overwrites); sum_of_squares sums in another fixed order: each backend's double sum of n non-negative terms
// is within a few √n·2^-53 of the exact value in practice (≈1e-12 at n = 4·10^7), so 1e-11 relative separates order
// from error, and terms whose every partial sum is exact must give the CPU's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "kernels/tail_average.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using gpu_testing::bit_mismatches;
using gpu_testing::poison;
using gpu_testing::relative_frobenius;
using gpu_testing::tolerance_for;

const Shape kShapes[] = {{7, 13}, {6288, 768}, {50304, 768}};

// extensions.tail_ema_rate, tail_avg_rate, bank_blend_rate
constexpr double kRates[] = {0.006688963210702341, 0.07547169811320754, 0.02666666666666667};
constexpr double kShipFactors[] = {0.65, 0.55, 0.3493, 1.0};  // ext ships; 1 stores the accumulator itself

constexpr double kSumTolerance = 1e-11;

class TailAverageCuda : public ::testing::TestWithParam<DType> {};

TEST_P(TailAverageCuda, SeedCopyIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    const Tensor w = testing::random_tensor(shape, dtype, 1);
    Tensor acc_cpu = Tensor::empty(shape, stat_dtype(dtype));
    Tensor acc_gpu = Tensor::empty(shape, stat_dtype(dtype), Device::cuda);
    poison(acc_cpu);
    poison(acc_gpu);
    tail_accumulate(acc_cpu, w, kRates[0], true);
    tail_accumulate(acc_gpu, w.to(Device::cuda), kRates[0], true);
    EXPECT_EQ(bit_mismatches(acc_gpu, acc_cpu), 0) << shape_string(shape);
  }
}

TEST_P(TailAverageCuda, RateUpdateIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    for (double rate : kRates) {
      const Tensor w = testing::random_tensor(shape, dtype, 2);
      Tensor acc_cpu = testing::random_tensor(shape, stat_dtype(dtype), 3);
      Tensor acc_gpu = acc_cpu.to(Device::cuda);
      const Tensor before = acc_cpu.clone();
      tail_accumulate(acc_cpu, w, rate, false);
      tail_accumulate(acc_gpu, w.to(Device::cuda), rate, false);
      EXPECT_EQ(bit_mismatches(acc_gpu, acc_cpu), 0) << shape_string(shape) << " rate " << rate;
      EXPECT_GT(bit_mismatches(acc_cpu, before), 0);  // the update moved the accumulator
    }
  }
}

// A rank's shard is a leading-dimension slice: the op writes the slice and nothing around it. Rows of 96 keep the
// slice 16-byte aligned (the packed path); rows of 13 start it at an odd element (the single-element path).
TEST_P(TailAverageCuda, RateUpdateAndShipOfASliceTouchOnlyTheSlice) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const int64_t cols : {int64_t{96}, int64_t{13}}) {
    const Tensor w = testing::random_tensor({64, cols}, dtype, 4);
    Tensor acc_cpu = testing::random_tensor({16, cols}, stat_dtype(dtype), 5);
    Tensor acc_gpu = acc_cpu.to(Device::cuda);
    Tensor w_gpu = w.to(Device::cuda);
    tail_accumulate(acc_cpu, w.slice(17, 33), kRates[1], false);
    tail_accumulate(acc_gpu, w_gpu.slice(17, 33), kRates[1], false);
    EXPECT_EQ(bit_mismatches(acc_gpu, acc_cpu), 0) << cols;
    Tensor shard_gpu = w_gpu.slice(17, 33);
    tail_ship(shard_gpu, acc_gpu, kShipFactors[0]);
    Tensor w_cpu = w.clone();
    Tensor shard_cpu = w_cpu.slice(17, 33);
    tail_ship(shard_cpu, acc_cpu, kShipFactors[0]);
    EXPECT_EQ(bit_mismatches(w_gpu, w_cpu), 0) << cols;
    EXPECT_GT(bit_mismatches(w_gpu.slice(17, 33), w.slice(17, 33)), 0) << cols;
    EXPECT_EQ(bit_mismatches(w_gpu.slice(0, 17), w.slice(0, 17)), 0) << cols;
    EXPECT_EQ(bit_mismatches(w_gpu.slice(33, 64), w.slice(33, 64)), 0) << cols;
  }
}

TEST_P(TailAverageCuda, ShipIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    for (double factor : kShipFactors) {
      const Tensor acc = testing::random_tensor(shape, stat_dtype(dtype), 6);
      Tensor w_cpu = testing::random_tensor(shape, dtype, 7);
      Tensor w_gpu = w_cpu.to(Device::cuda);
      if (factor == 1.0) {  // w ← acc overwrites: w must not be read
        poison(w_cpu);
        poison(w_gpu);
      }
      tail_ship(w_cpu, acc, factor);
      tail_ship(w_gpu, acc.to(Device::cuda), factor);
      EXPECT_EQ(bit_mismatches(w_gpu, w_cpu), 0) << shape_string(shape) << " factor " << factor;
    }
  }
}

TEST_P(TailAverageCuda, ScaleIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    Tensor w_cpu = testing::random_tensor(shape, dtype, 8);
    Tensor w_gpu = w_cpu.to(Device::cuda);
    scale_in_place(w_cpu, 1.0123456789);
    scale_in_place(w_gpu, 1.0123456789);
    EXPECT_EQ(bit_mismatches(w_gpu, w_cpu), 0) << shape_string(shape);
  }
}

TEST_P(TailAverageCuda, SumOfSquaresMatchesCpuAndRepeats) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    const Tensor w = testing::random_tensor(shape, dtype, 9);
    const Tensor w_gpu = w.to(Device::cuda);
    const double cpu = sum_of_squares(w);
    const double gpu = sum_of_squares(w_gpu);
    EXPECT_LT(std::abs(gpu - cpu) / cpu, kSumTolerance) << shape_string(shape);
    EXPECT_EQ(sum_of_squares(w_gpu), gpu) << "the CUDA sum must repeat bit for bit";
  }
  EXPECT_EQ(sum_of_squares(Tensor::empty({0, 768}, dtype, Device::cuda)), 0.0);
}

// Multiples of 1/16 below 16 in magnitude: every square is a multiple of 2^-8 below 2^8, every partial sum of 4·10^7
// of them is below 2^34 and exact in double, so any order gives the same bits.
TEST_P(TailAverageCuda, SumOfSquaresIsBitExactWhenEverySumIsExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    std::mt19937_64 rng(10);
    std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
    for (double& x : v) x = static_cast<double>(static_cast<int>(rng() % 511) - 255) / 16.0;
    const Tensor w = Tensor::from_doubles(v, shape, dtype);
    EXPECT_EQ(sum_of_squares(w.to(Device::cuda)), sum_of_squares(w)) << shape_string(shape);
  }
}

// A diverged run's report (trainer/run/divergence_report.h) tests each state tensor on its device through this sum:
// one NaN or infinity anywhere (first element, last element of the tail chunk) makes it non-finite, the largest
// finite values of the dtype do not.
TEST_P(TailAverageCuda, SumOfSquaresIsNonFiniteExactlyWhenAnElementIs) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    const int64_t n = shape_numel(shape);
    std::vector<double> v(static_cast<size_t>(n), 0.5);
    v[0] = dtype == DType::f64 ? 1e150 : (dtype == DType::f32 ? 3.4028234663852886e38 : 3.3e38);
    EXPECT_TRUE(std::isfinite(sum_of_squares(Tensor::from_doubles(v, shape, dtype).to(Device::cuda))))
        << shape_string(shape);
    for (const auto& [index, value] :
         {std::pair<int64_t, double>{0, std::nan("")}, std::pair<int64_t, double>{n - 1, std::nan("")},
          std::pair<int64_t, double>{n - 1, -INFINITY}}) {
      std::vector<double> bad = v;
      bad[static_cast<size_t>(index)] = value;
      EXPECT_FALSE(std::isfinite(sum_of_squares(Tensor::from_doubles(bad, shape, dtype).to(Device::cuda))))
          << shape_string(shape) << " element " << index << " = " << value;
    }
  }
}

// The §S.5 ship as the trainer runs it: norm before, ship, rescale to the old norm. The rescale factor comes from two
// sums that agree to kSumTolerance, so the result is compared within the dtype's tolerance and the norm must be back.
TEST_P(TailAverageCuda, ShipWithNormRestorationMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Shape& shape : kShapes) {
    const Tensor acc = testing::random_tensor(shape, stat_dtype(dtype), 11, 0.5);
    Tensor w_cpu = testing::random_tensor(shape, dtype, 12);
    Tensor w_gpu = w_cpu.to(Device::cuda);
    for (Tensor* w : {&w_cpu, &w_gpu}) {
      const double before = std::sqrt(sum_of_squares(*w));
      tail_ship(*w, w->is_cpu() ? acc : acc.to(Device::cuda), kShipFactors[0]);
      const double after = std::sqrt(sum_of_squares(*w));
      scale_in_place(*w, before / after);
    }
    EXPECT_LT(relative_frobenius(w_gpu, w_cpu), tolerance_for(dtype)) << shape_string(shape);
    const double norm_cpu = std::sqrt(sum_of_squares(w_cpu)), norm_gpu = std::sqrt(sum_of_squares(w_gpu));
    EXPECT_LT(std::abs(norm_gpu - norm_cpu) / norm_cpu, tolerance_for(dtype)) << shape_string(shape);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TailAverageCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gpt
