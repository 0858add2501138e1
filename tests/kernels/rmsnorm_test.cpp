#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/rmsnorm.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

TEST(RmsNorm, ForwardHasUnitRms) {
  Tensor x = random_tensor({5, 64}, DType::f64, 1, 3.0);
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  Tensor rstd = Tensor::empty({5}, DType::f64);
  rmsnorm_forward(x, y, rstd);
  const auto v = y.to_doubles();
  for (int r = 0; r < 5; ++r) {
    double ss = 0;
    for (int i = 0; i < 64; ++i) ss += v[r * 64 + i] * v[r * 64 + i];
    EXPECT_NEAR(ss / 64, 1.0, 1e-6);
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({3, 16}, DType::f64, 2);
  const Tensor w = random_tensor({3, 16}, DType::f64, 3);
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  Tensor rstd = Tensor::empty({3}, DType::f64);
  auto loss = [&] {
    rmsnorm_forward(x, y, rstd);
    return testing::dot(y, w);
  };
  const std::vector<double> expected = testing::numeric_gradient(loss, x);
  loss();
  Tensor dx = Tensor::zeros(x.shape(), DType::f64);
  rmsnorm_backward(w, x, rstd, dx);
  EXPECT_LT(testing::max_relative_error(dx.to_doubles(), expected), 1e-7);
}

TEST(RmsNorm, BackwardAccumulatesIntoGradient) {
  Tensor x = random_tensor({2, 8}, DType::f64, 4);
  const Tensor dy = random_tensor({2, 8}, DType::f64, 5);
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  Tensor rstd = Tensor::empty({2}, DType::f64);
  rmsnorm_forward(x, y, rstd);
  Tensor once = Tensor::zeros(x.shape(), DType::f64);
  rmsnorm_backward(dy, x, rstd, once);
  Tensor twice = Tensor::zeros(x.shape(), DType::f64);
  rmsnorm_backward(dy, x, rstd, twice);
  rmsnorm_backward(dy, x, rstd, twice);
  const auto a = once.to_doubles();
  const auto b = twice.to_doubles();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(2 * a[i], b[i], 1e-12);
}

TEST(RmsNorm, Bf16OutputIsRoundedFromFp32Math) {
  Tensor x = random_tensor({4, 32}, DType::f32, 6);
  Tensor xb = x.to(DType::bf16);
  Tensor y = Tensor::empty(x.shape(), DType::bf16);
  Tensor rstd = Tensor::empty({4}, DType::f32);
  rmsnorm_forward(xb, y, rstd);
  const auto xin = xb.to_doubles();
  const auto out = y.to_doubles();
  for (int r = 0; r < 4; ++r) {
    float ss = 0;
    for (int i = 0; i < 32; ++i) ss += static_cast<float>(xin[r * 32 + i] * xin[r * 32 + i]);
    const float inv = 1.0f / std::sqrt(ss / 32 + kNormEps);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(out[r * 32 + i], round_bf16(static_cast<float>(xin[r * 32 + i]) * inv));
  }
}

// GradWrite::overwrite: written over NaN with what adding into zeros gives.
TEST(RmsNorm, OverwritingBackwardWritesWhatAddingIntoZerosGives) {
  const Tensor x = random_tensor({6, 40}, DType::bf16, 20, 2.0), dy = random_tensor({6, 40}, DType::bf16, 21);
  Tensor y = Tensor::empty(x.shape(), DType::bf16), rstd = Tensor::empty({6}, DType::f32);
  rmsnorm_forward(x, y, rstd);
  Tensor want = Tensor::zeros(x.shape(), DType::bf16);
  rmsnorm_backward(dy, x, rstd, want);
  const std::vector<double> nan(static_cast<size_t>(x.numel()), std::nan(""));
  Tensor dx = Tensor::from_doubles(nan, x.shape(), DType::bf16);
  rmsnorm_backward(dy, x, rstd, dx, GradWrite::overwrite);
  EXPECT_EQ(dx.to_doubles(), want.to_doubles());
}

TEST(RmsNorm, RejectsMismatchedShapes) {
  Tensor x = Tensor::zeros({2, 8}, DType::f32);
  Tensor y = Tensor::zeros({2, 4}, DType::f32);
  Tensor rstd = Tensor::zeros({2}, DType::f32);
  EXPECT_THROW(rmsnorm_forward(x, y, rstd), Error);
}

}  // namespace
}  // namespace gpt
