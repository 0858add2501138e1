// The tail-average ops' CPU reference (kernels/tail_average.h, RECIPE §S.5) against the formulas of its header,
// written out per element: in f64 (exact arithmetic up to double rounding), and in bf16, where the accumulator is
// f32 and the shipped or scaled weight is rounded once to bf16.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/bf16.h"
#include "kernels/tail_average.h"

namespace gpt {
namespace {

const std::vector<double> kWeights = {0.5, -1.25, 3.0, 0.0, -0.0625, 7.5};
const std::vector<double> kAccumulator = {1.0, 2.0, -3.0, 0.25, 0.125, -7.5};

Tensor tensor_of(const std::vector<double>& values, DType dtype) { return Tensor::from_doubles(values, {2, 3}, dtype); }

TEST(TailAverage, AccumulateSeedsWithTheWeightsThenMovesByTheRate) {
  const Tensor w = tensor_of(kWeights, DType::f64);
  Tensor acc = tensor_of(kAccumulator, DType::f64);
  tail_accumulate(acc, w, 0.25, /*seed=*/true);
  EXPECT_EQ(acc.to_doubles(), kWeights);
  acc = tensor_of(kAccumulator, DType::f64);
  tail_accumulate(acc, w, 0.25, /*seed=*/false);
  const std::vector<double> got = acc.to_doubles();
  for (size_t i = 0; i < kWeights.size(); ++i) {
    EXPECT_DOUBLE_EQ(got[i], kAccumulator[i] + 0.25 * (kWeights[i] - kAccumulator[i])) << i;
  }
}

TEST(TailAverage, AccumulatorOfBf16WeightsIsF32) {
  const Tensor w = tensor_of(kWeights, DType::bf16);
  Tensor acc = tensor_of(kAccumulator, DType::f32);
  tail_accumulate(acc, w, 0.1, /*seed=*/false);
  const std::vector<double> got = acc.to_doubles();
  const float rate = 0.1f;
  for (size_t i = 0; i < kWeights.size(); ++i) {
    const auto a = static_cast<float>(kAccumulator[i]), x = static_cast<float>(kWeights[i]);
    EXPECT_EQ(got[i], static_cast<double>(a + rate * (x - a))) << i;
  }
}

TEST(TailAverage, ShipMovesTheWeightsTowardTheAccumulatorAndFactorOneStoresIt) {
  const Tensor acc = tensor_of(kAccumulator, DType::f64);
  Tensor w = tensor_of(kWeights, DType::f64);
  tail_ship(w, acc, 0.65);
  std::vector<double> got = w.to_doubles();
  for (size_t i = 0; i < kWeights.size(); ++i) {
    EXPECT_DOUBLE_EQ(got[i], kWeights[i] + 0.65 * (kAccumulator[i] - kWeights[i])) << i;
  }
  w = tensor_of(kWeights, DType::f64);
  tail_ship(w, acc, 1.0);
  EXPECT_EQ(w.to_doubles(), kAccumulator);
}

TEST(TailAverage, ShipIntoBf16RoundsOnce) {
  const Tensor acc = tensor_of(kAccumulator, DType::f32);
  Tensor w = tensor_of(kWeights, DType::bf16);
  tail_ship(w, acc, 0.3493);
  const std::vector<double> got = w.to_doubles();
  const float factor = 0.3493f;
  for (size_t i = 0; i < kWeights.size(); ++i) {
    const auto a = static_cast<float>(kAccumulator[i]), x = static_cast<float>(kWeights[i]);
    EXPECT_EQ(got[i], static_cast<double>(round_bf16(x + factor * (a - x)))) << i;
  }
}

TEST(TailAverage, SumOfSquaresAndScaleInPlace) {
  double expected = 0;
  for (double x : kWeights) expected += x * x;
  EXPECT_EQ(sum_of_squares(tensor_of(kWeights, DType::f64)), expected);
  Tensor w = tensor_of(kWeights, DType::bf16);
  scale_in_place(w, 0.3);
  const std::vector<double> got = w.to_doubles();
  for (size_t i = 0; i < kWeights.size(); ++i) {
    EXPECT_EQ(got[i], static_cast<double>(round_bf16(static_cast<float>(kWeights[i]) * 0.3f))) << i;
  }
}

}  // namespace
}  // namespace gpt
