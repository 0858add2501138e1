#include <cmath>

#include <gtest/gtest.h>

#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

// Naive triple loop in double: the independent reference.
std::vector<double> naive(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n, int64_t k,
                          bool ta, bool tb) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[ta ? p * m + i : i * k + p] * b[tb ? j * k + p : p * n + j];
      c[i * n + j] = s;
    }
  return c;
}

class GemmTransposes : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTransposes, MatchesNaiveProductInF64) {
  const auto [ta, tb] = GetParam();
  const int64_t m = 5, n = 7, k = 3;
  Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, DType::f64, 1);
  Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, DType::f64, 2);
  Tensor c = Tensor::empty({m, n}, DType::f64);
  gemm(a, b, c, {.trans_a = ta, .trans_b = tb});
  EXPECT_LT(testing::max_relative_error(c.to_doubles(), naive(a.to_doubles(), b.to_doubles(), m, n, k, ta, tb)), 1e-14);
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, GemmTransposes, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(Gemm, AlphaBetaAccumulate) {
  Tensor a = random_tensor({4, 3}, DType::f64, 3);
  Tensor b = random_tensor({3, 2}, DType::f64, 4);
  Tensor c = random_tensor({4, 2}, DType::f64, 5);
  const auto c0 = c.to_doubles();
  gemm(a, b, c, {.alpha = 2.0f, .beta = 0.5f});
  const auto ab = naive(a.to_doubles(), b.to_doubles(), 4, 2, 3, false, false);
  for (size_t i = 0; i < ab.size(); ++i) EXPECT_NEAR(c.to_doubles()[i], 2 * ab[i] + 0.5 * c0[i], 1e-12);
}

TEST(Gemm, BatchedWithSharedOperand) {
  Tensor a = random_tensor({3, 4, 5}, DType::f64, 6);
  Tensor b = random_tensor({5, 2}, DType::f64, 7);
  Tensor c = Tensor::empty({3, 4, 2}, DType::f64);
  gemm(a, b, c);
  const auto av = a.to_doubles(), bv = b.to_doubles(), cv = c.to_doubles();
  for (int i = 0; i < 3; ++i) {
    std::vector<double> ai(av.begin() + i * 20, av.begin() + (i + 1) * 20);
    const auto ref = naive(ai, bv, 4, 2, 5, false, false);
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(cv[i * 8 + j], ref[j], 1e-12);
  }
}

TEST(Gemm, Bf16RoundsOnceFromFp32Accumulation) {
  Tensor a = random_tensor({8, 64}, DType::bf16, 8);
  Tensor b = random_tensor({64, 8}, DType::bf16, 9);
  Tensor c = Tensor::empty({8, 8}, DType::bf16);
  Tensor c32 = Tensor::empty({8, 8}, DType::f32);
  gemm(a, b, c);
  gemm(a, b, c32);
  const auto r = c.to_doubles(), f = c32.to_doubles();
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], round_bf16(static_cast<float>(f[i])));
}

TEST(Gemm, RejectsMismatchedInnerDimension) {
  Tensor a = Tensor::zeros({4, 3}, DType::f32);
  Tensor b = Tensor::zeros({4, 2}, DType::f32);
  Tensor c = Tensor::zeros({4, 2}, DType::f32);
  EXPECT_THROW(gemm(a, b, c), Error);
}

}  // namespace
}  // namespace gpt

namespace gpt {
namespace {

TEST(Fp8Decode, E4m3KnownValues) {
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0xB8), -1.0f);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);                // largest finite
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_float(0x00), 0.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(Fp8Decode, E5m2KnownValues) {
  EXPECT_EQ(e5m2_to_float(0x3C), 1.0f);
  EXPECT_EQ(e5m2_to_float(0x7B), 57344.0f);  // largest finite
  EXPECT_EQ(e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2_to_float(0x7C), INFINITY);
  EXPECT_EQ(e5m2_to_float(0xFC), -INFINITY);
  EXPECT_TRUE(std::isnan(e5m2_to_float(0x7D)));
}

Tensor fp8_from_bits(const std::vector<uint8_t>& bits, Shape shape, DType dtype) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  std::copy(bits.begin(), bits.end(), static_cast<uint8_t*>(t.raw()));
  return t;
}

TEST(GemmFp8, ComputesScaledProductWithSecondOperandTransposed) {
  // A = [[1, 2], [-1, 0.5]] (e4m3), B = [[1, 1], [2, -1], [0.5, 4]] as [N=3, K=2] (e5m2).
  const Tensor a = fp8_from_bits({0x38, 0x40, 0xB8, 0x30}, {2, 2}, DType::e4m3);
  const Tensor b = fp8_from_bits({0x3C, 0x3C, 0x40, 0xBC, 0x38, 0x44}, {3, 2}, DType::e5m2);
  const float sa_v[1] = {0.5f}, sb_v[1] = {3.0f};
  const Tensor sa = Tensor::from_floats(sa_v, {1}, DType::f32), sb = Tensor::from_floats(sb_v, {1}, DType::f32);
  Tensor c = Tensor::empty({2, 3}, DType::f32);
  gemm_fp8(a, b, c, sa, sb, {.alpha = 2.0f});
  // A·Bᵀ = [[3, 0, 8.5], [-0.5, -2.5, 1.5]], times alpha·sa·sb = 3.
  const std::vector<double> expected = {9, 0, 25.5, -1.5, -7.5, 4.5};
  EXPECT_EQ(c.to_doubles(), expected);
}

TEST(GemmFp8, RejectsE5m2TimesE5m2AndWrongShapes) {
  const Tensor a = Tensor::zeros({2, 4}, DType::e5m2), b = Tensor::zeros({3, 4}, DType::e5m2);
  const Tensor s = Tensor::zeros({1}, DType::f32);
  Tensor c = Tensor::empty({2, 3}, DType::f32);
  EXPECT_THROW(gemm_fp8(a, b, c, s, s), Error);
  const Tensor a4 = Tensor::zeros({2, 4}, DType::e4m3), b5 = Tensor::zeros({3, 5}, DType::e4m3);
  EXPECT_THROW(gemm_fp8(a4, b5, c, s, s), Error);
}

}  // namespace
}  // namespace gpt
