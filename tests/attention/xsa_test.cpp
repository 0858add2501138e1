#include "kernels/xsa.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

TEST(Xsa, ForwardMatchesFormula) {
  const int64_t T = 4, H = 2, D = 6, G = 7, first = 3;
  const Tensor y = random_tensor({T, H, D}, DType::f64, 1);
  const Tensor v = random_tensor({T, H, D}, DType::f64, 2);
  const Tensor gates = random_tensor({T, G}, DType::f64, 3);
  Tensor out = Tensor::empty(y.shape(), DType::f64);
  xsa_forward(y, v, gates, first, out);
  const auto Y = y.to_doubles(), V = v.to_doubles(), Gt = gates.to_doubles(), O = out.to_doubles();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      double yv = 0, vv = 0;
      for (int64_t d = 0; d < D; ++d) {
        yv += Y[(t * H + h) * D + d] * V[(t * H + h) * D + d];
        vv += V[(t * H + h) * D + d] * V[(t * H + h) * D + d];
      }
      const double c = std::tanh(Gt[t * G + first + h]) * yv / vv;
      for (int64_t d = 0; d < D; ++d) {
        EXPECT_NEAR(O[(t * H + h) * D + d], Y[(t * H + h) * D + d] - c * V[(t * H + h) * D + d], 1e-14);
      }
    }
  }
}

TEST(Xsa, FullStrengthRemovesTheValueComponent) {
  // tanh(α) → 1 makes the output orthogonal to v.
  const Tensor y = random_tensor({3, 2, 8}, DType::f64, 4);
  const Tensor v = random_tensor({3, 2, 8}, DType::f64, 5);
  const Tensor gates = Tensor::from_doubles(std::vector<double>(6, 40.0), {3, 2}, DType::f64);
  Tensor out = Tensor::empty(y.shape(), DType::f64);
  xsa_forward(y, v, gates, 0, out);
  const auto O = out.to_doubles(), V = v.to_doubles();
  for (int row = 0; row < 6; ++row) {
    double dot = 0;
    for (int d = 0; d < 8; ++d) dot += O[row * 8 + d] * V[row * 8 + d];
    EXPECT_NEAR(dot, 0.0, 1e-12);
  }
}

TEST(Xsa, ZeroValueLeavesOutputUnchanged) {
  const Tensor y = random_tensor({2, 2, 4}, DType::f64, 6);
  const Tensor v = Tensor::zeros({2, 2, 4}, DType::f64);
  Tensor out = Tensor::empty(y.shape(), DType::f64);
  xsa_forward(y, v, random_tensor({2, 2}, DType::f64, 7), 0, out);
  EXPECT_EQ(out.to_doubles(), y.to_doubles());
}

void check_gradients(double v_scale, uint64_t seed) {
  const int64_t T = 4, H = 3, D = 5, G = 8, first = 2;
  Tensor y = random_tensor({T, H, D}, DType::f64, seed);
  Tensor v = random_tensor({T, H, D}, DType::f64, seed + 1, v_scale);
  Tensor gates = random_tensor({T, G}, DType::f64, seed + 2);
  const Tensor w = random_tensor({T, H, D}, DType::f64, seed + 3);
  Tensor out = Tensor::empty(y.shape(), DType::f64);
  auto loss = [&] {
    xsa_forward(y, v, gates, first, out);
    return testing::dot(out, w);
  };
  const double step = 1e-6 * v_scale;
  const auto ny = testing::numeric_gradient(loss, y);
  const auto nv = testing::numeric_gradient(loss, v, step);
  const auto ng = testing::numeric_gradient(loss, gates);
  Tensor dy = Tensor::zeros(y.shape(), DType::f64), dv = Tensor::zeros(v.shape(), DType::f64),
         dg = Tensor::zeros(gates.shape(), DType::f64);
  xsa_backward(w, y, v, gates, first, dy, dv, dg);
  EXPECT_LT(testing::max_relative_error(dy.to_doubles(), ny), 1e-8) << "v scale " << v_scale;
  EXPECT_LT(testing::max_relative_error(dv.to_doubles(), nv), 1e-6) << "v scale " << v_scale;
  EXPECT_LT(testing::max_relative_error(dg.to_doubles(), ng), 1e-8) << "v scale " << v_scale;
}

TEST(Xsa, BackwardMatchesFiniteDifferences) { check_gradients(1.0, 10); }
// ‖v‖² ≈ 5·1e-10 < 1e-8: the clamp is active and its derivative must be dropped.
TEST(Xsa, BackwardMatchesFiniteDifferencesInsideTheClamp) { check_gradients(1e-5, 20); }

TEST(Xsa, BackwardAccumulates) {
  const Tensor y = random_tensor({3, 2, 4}, DType::f64, 30), v = random_tensor({3, 2, 4}, DType::f64, 31);
  const Tensor gates = random_tensor({3, 2}, DType::f64, 32), g = random_tensor({3, 2, 4}, DType::f64, 33);
  Tensor a[3] = {Tensor::zeros(y.shape(), DType::f64), Tensor::zeros(y.shape(), DType::f64),
                 Tensor::zeros(gates.shape(), DType::f64)};
  Tensor b[3] = {random_tensor(y.shape(), DType::f64, 34), random_tensor(y.shape(), DType::f64, 35),
                 random_tensor(gates.shape(), DType::f64, 36)};
  const std::vector<double> base[3] = {b[0].to_doubles(), b[1].to_doubles(), b[2].to_doubles()};
  xsa_backward(g, y, v, gates, 0, a[0], a[1], a[2]);
  xsa_backward(g, y, v, gates, 0, b[0], b[1], b[2]);
  for (int i = 0; i < 3; ++i) {
    const auto x = a[i].to_doubles(), z = b[i].to_doubles();
    for (size_t j = 0; j < x.size(); ++j) EXPECT_NEAR(z[j], base[i][j] + x[j], 1e-12);
  }
}

// write_dy / write_dv = overwrite: written over NaN with what adding into zeros gives; the other gradients add.
TEST(Xsa, OverwrittenGradientsEqualAddingIntoZeros) {
  const Tensor y = random_tensor({3, 2, 8}, DType::bf16, 40), v = random_tensor({3, 2, 8}, DType::bf16, 41);
  const Tensor gates = random_tensor({3, 2}, DType::bf16, 42), g = random_tensor({3, 2, 8}, DType::bf16, 43);
  Tensor zero[3] = {Tensor::zeros(y.shape(), DType::bf16), Tensor::zeros(y.shape(), DType::bf16),
                    Tensor::zeros(gates.shape(), DType::bf16)};
  xsa_backward(g, y, v, gates, 0, zero[0], zero[1], zero[2]);
  const Tensor dg0 = random_tensor(gates.shape(), DType::bf16, 44);
  Tensor dg_added = dg0.clone(), unused_dy = zero[0].clone(), unused_dv = zero[1].clone();
  xsa_backward(g, y, v, gates, 0, unused_dy, unused_dv, dg_added);
  const std::vector<double> nan(static_cast<size_t>(y.numel()), std::nan(""));
  Tensor dy = Tensor::from_doubles(nan, y.shape(), DType::bf16), dv = Tensor::from_doubles(nan, y.shape(), DType::bf16);
  Tensor dg = dg0.clone();
  xsa_backward(g, y, v, gates, 0, dy, dv, dg, GradWrite::overwrite, GradWrite::overwrite);
  EXPECT_EQ(dy.to_doubles(), zero[0].to_doubles());
  EXPECT_EQ(dv.to_doubles(), zero[1].to_doubles());
  // dgates = dg0 + its increment, rounded once, as in the adding call
  EXPECT_EQ(dg.to_doubles(), dg_added.to_doubles());
}

TEST(Xsa, Bf16AgreesWithF64) {
  const auto y = attention_test::twin_random({6, 3, 16}, DType::bf16, 40);
  const auto v = attention_test::twin_random({6, 3, 16}, DType::bf16, 41);
  const auto gates = attention_test::twin_random({6, 3}, DType::bf16, 42);
  const auto g = attention_test::twin_random({6, 3, 16}, DType::bf16, 43);
  Tensor oh = Tensor::empty({6, 3, 16}, DType::f64), ol = Tensor::empty({6, 3, 16}, DType::bf16);
  xsa_forward(y.exact, v.exact, gates.exact, 0, oh);
  xsa_forward(y.low, v.low, gates.low, 0, ol);
  EXPECT_LT(testing::max_relative_error(ol.to_doubles(), oh.to_doubles()), 1e-2);
  Tensor h[3] = {Tensor::zeros({6, 3, 16}, DType::f64), Tensor::zeros({6, 3, 16}, DType::f64),
                 Tensor::zeros({6, 3}, DType::f64)};
  Tensor l[3] = {Tensor::zeros({6, 3, 16}, DType::bf16), Tensor::zeros({6, 3, 16}, DType::bf16),
                 Tensor::zeros({6, 3}, DType::bf16)};
  xsa_backward(g.exact, y.exact, v.exact, gates.exact, 0, h[0], h[1], h[2]);
  xsa_backward(g.low, y.low, v.low, gates.low, 0, l[0], l[1], l[2]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(testing::max_relative_error(l[i].to_doubles(), h[i].to_doubles()), 2e-2) << "grad " << i;
  }
}

TEST(Xsa, RejectsBadArguments) {
  const Tensor y = Tensor::zeros({2, 2, 4}, DType::f32);
  Tensor out = Tensor::zeros({2, 2, 4}, DType::f32);
  EXPECT_THROW(xsa_forward(y, Tensor::zeros({2, 2, 5}, DType::f32), Tensor::zeros({2, 2}, DType::f32), 0, out), Error);
  EXPECT_THROW(xsa_forward(y, y, Tensor::zeros({2, 2}, DType::f32), 1, out), Error);
}

}  // namespace
}  // namespace gpt
