// transpose / add_transposed (kernels/transpose.h), used for the tied embedding.
#include <gtest/gtest.h>

#include <vector>

#include "base/check.h"
#include "kernels/transpose.h"

namespace gpt {
namespace {

TEST(Transpose, SmallMatrix) {
  // 2×3 → 3×2, across a tile boundary too (40×35).
  Tensor a = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
  Tensor t = Tensor::zeros({3, 2}, DType::f32);
  transpose(a, t);
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  std::vector<double> big(40 * 35);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i);
  Tensor b = Tensor::from_doubles(big, {40, 35}, DType::f64), bt = Tensor::zeros({35, 40}, DType::f64);
  transpose(b, bt);
  const auto v = bt.to_doubles();
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 35; ++j) ASSERT_EQ(v[j * 40 + i], big[i * 35 + j]);
}

TEST(Transpose, AddTransposedRoundsOnceToBf16) {
  Tensor src = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, DType::bf16);
  Tensor dst = Tensor::from_doubles(std::vector<double>{256, 0.5, 0, 0, 0, -6}, {2, 3}, DType::bf16);
  add_transposed(src, dst);
  // 256 + 1 = 257 is not a bf16 value: rounds to even (256).
  EXPECT_EQ(dst.to_doubles(), (std::vector<double>{256, 3.5, 5, 2, 4, 0}));
}

TEST(Transpose, ShapeErrors) {
  Tensor a = Tensor::zeros({2, 3}, DType::f32), wrong = Tensor::zeros({2, 3}, DType::f32);
  EXPECT_THROW(transpose(a, wrong), Error);
  Tensor other = Tensor::zeros({3, 2}, DType::bf16);
  EXPECT_THROW(add_transposed(a, other), Error);
}

}  // namespace
}  // namespace gpt
