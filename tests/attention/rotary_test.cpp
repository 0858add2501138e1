#include "kernels/rotary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

TEST(RotaryTables, RecipeFrequenciesForHeadDim128) {
  const RotaryTables tables(128, 16);
  ASSERT_EQ(tables.frequency_count(), 32);
  const auto& w = tables.frequencies();
  for (int k = 0; k < 32; ++k) EXPECT_NEAR(w[k], std::pow(1024.0, -k / 31.0), 1e-6 * std::pow(1024.0, -k / 31.0));
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_FLOAT_EQ(w[31], 1.0f / 1024.0f);
  EXPECT_DOUBLE_EQ(tables.attention_scale(), 0.1);
}

TEST(RotaryTables, TinyFrequenciesForHeadDim16) {
  const RotaryTables tables(16, 16);
  ASSERT_EQ(tables.frequency_count(), 4);
  const std::vector<double> want = {1.0, std::pow(1024.0, -1.0 / 3), std::pow(1024.0, -2.0 / 3), 1.0 / 1024};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(tables.frequencies()[k], want[k], 1e-6 * want[k]);
}

TEST(RotaryTables, YarnAttentionScaleMatchesReferenceEvents) {
  RotaryTables tables(128, 16);
  tables.apply_yarn(384, 896);
  EXPECT_NEAR(tables.attention_scale(), 0.116946, 5e-7);
  tables.apply_yarn(896, 1408);
  EXPECT_NEAR(tables.attention_scale(), 0.127518, 5e-7);
  tables.apply_yarn(1408, 1664);
  EXPECT_NEAR(tables.attention_scale(), 0.131778, 5e-7);
}

TEST(RotaryTables, YarnRescalesFrequenciesByTheirRotationCount) {
  RotaryTables tables(128, 16);
  const std::vector<float> before = tables.frequencies();
  tables.apply_yarn(384, 896);
  const auto& after = tables.frequencies();
  int kept = 0, interpolated = 0, blended = 0;
  for (size_t k = 0; k < before.size(); ++k) {
    const double w = before[k];
    const double r = 384 * w / (2 * std::numbers::pi);
    const double gamma = std::min(1.0, std::max(0.0, (r - 1) / 31));
    const double want = w * (384.0 / 896 + gamma * (1 - 384.0 / 896));
    EXPECT_NEAR(after[k], want, 2e-6 * want) << "k=" << k;
    if (r >= 32) {
      EXPECT_EQ(after[k], before[k]);  // fast frequencies untouched
      ++kept;
    } else if (r <= 1) {
      EXPECT_NEAR(after[k], w * 384 / 896, 1e-6 * w);  // slow frequencies interpolated
      ++interpolated;
    } else {
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(interpolated, 0);
  EXPECT_GT(blended, 0);
}

TEST(RotaryTables, TablesHoldFp32CosSinOfPositionTimesFrequency) {
  RotaryTables tables(16, 40);
  tables.apply_yarn(48, 112);
  const Tensor c = tables.cos_table(DType::f64), s = tables.sin_table(DType::f64);
  const Tensor cb = tables.cos_table(DType::bf16);
  ASSERT_EQ(c.shape(), (Shape{40, 4}));
  const auto cv = c.to_doubles(), sv = s.to_doubles(), cbv = cb.to_doubles();
  for (int p = 0; p < 40; ++p) {
    for (int k = 0; k < 4; ++k) {
      const float theta = static_cast<float>(p) * tables.frequencies()[k];
      EXPECT_EQ(cv[p * 4 + k], static_cast<double>(std::cos(theta)));
      EXPECT_EQ(sv[p * 4 + k], static_cast<double>(std::sin(theta)));
      EXPECT_EQ(cbv[p * 4 + k], static_cast<double>(round_bf16(std::cos(theta))));
    }
  }
}

TEST(RotaryTables, RejectsBadArguments) {
  EXPECT_THROW(RotaryTables(10, 8), Error);
  EXPECT_THROW(RotaryTables(4, 8), Error);
  EXPECT_THROW(RotaryTables(16, 0), Error);
  RotaryTables tables(16, 8);
  EXPECT_THROW(tables.apply_yarn(0, 64), Error);
  EXPECT_THROW(tables.cos_table(DType::i32), Error);
}

using Tables = attention_test::RotaryTableSet;
constexpr auto make_tables = attention_test::yarn_tables;

// Independent formula: pair (z_2k, z_2k+1) as a complex number times e^{−iθ}.
std::vector<double> rotate_reference(const Tensor& x, const Tables& tab, RotaryLayout layout) {
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2), F = D / 4;
  const auto X = x.to_doubles(), C = tab.cos.to_doubles(), S = tab.sin.to_doubles();
  std::vector<double> y = X;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t pos = layout == RotaryLayout::paired ? 2 * t + (h % 2) : t;
      for (int64_t k = 0; k < F; ++k) {
        const int64_t i = (t * H + h) * D + 2 * k;
        const std::complex<double> z(X[i], X[i + 1]);
        const std::complex<double> r = z * std::complex<double>(C[pos * F + k], -S[pos * F + k]);
        y[i] = r.real();
        y[i + 1] = r.imag();
      }
    }
  }
  return y;
}

TEST(Rotary, ForwardMatchesComplexRotation) {
  for (RotaryLayout layout : {RotaryLayout::normal, RotaryLayout::paired}) {
    const Tensor x = random_tensor({9, 4, 16}, DType::f64, 1);
    const Tables tab = make_tables(16, 18, DType::f64);
    Tensor y = Tensor::empty(x.shape(), DType::f64);
    rotary_forward(x, tab.cos, tab.sin, layout, y);
    EXPECT_LT(testing::max_relative_error(y.to_doubles(), rotate_reference(x, tab, layout)), 1e-15);
    const auto X = x.to_doubles(), Y = y.to_doubles();
    for (int64_t row = 0; row < 9 * 4; ++row) {  // stationary half copied exactly
      for (int64_t d = 8; d < 16; ++d) EXPECT_EQ(Y[row * 16 + d], X[row * 16 + d]);
    }
  }
}

TEST(Rotary, PairedLayoutUsesPositions2tAnd2tPlus1) {
  // A paired rotation of token t equals a normal rotation of a sequence where head h of token t is
  // placed at row 2t + (h mod 2).
  const int64_t T = 5, H = 6, D = 8;
  const Tensor x = random_tensor({T, H, D}, DType::f64, 2);
  const Tables tab = make_tables(D, 2 * T, DType::f64);
  Tensor paired = Tensor::empty(x.shape(), DType::f64);
  rotary_forward(x, tab.cos, tab.sin, RotaryLayout::paired, paired);
  const auto X = x.to_doubles(), P = paired.to_doubles();
  std::vector<double> spread(static_cast<size_t>(2 * T * H * D), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) spread[((2 * t + h % 2) * H + h) * D + d] = X[(t * H + h) * D + d];
  const Tensor xs = Tensor::from_doubles(spread, {2 * T, H, D}, DType::f64);
  Tensor ys = Tensor::empty(xs.shape(), DType::f64);
  rotary_forward(xs, tab.cos, tab.sin, RotaryLayout::normal, ys);
  const auto Y = ys.to_doubles();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) EXPECT_EQ(P[(t * H + h) * D + d], Y[((2 * t + h % 2) * H + h) * D + d]);
}

TEST(Rotary, ScoresDependOnlyOnRelativePosition) {
  // ⟨R_p q, R_s k⟩ is a function of p − s: the same q, k at positions (7, 3) and (12, 8) give one score.
  const int64_t D = 16;
  const Tables tab = make_tables(D, 16, DType::f64);
  const auto q = random_tensor({1, 1, D}, DType::f64, 3).to_doubles();
  const auto k = random_tensor({1, 1, D}, DType::f64, 4).to_doubles();
  auto score = [&](int64_t p, int64_t s) {
    std::vector<double> xs(16 * D, 0.0);
    for (int64_t d = 0; d < D; ++d) xs[p * D + d] = q[d];
    Tensor qs = Tensor::from_doubles(xs, {16, 1, D}, DType::f64);
    std::vector<double> ks(16 * D, 0.0);
    for (int64_t d = 0; d < D; ++d) ks[s * D + d] = k[d];
    Tensor kt = Tensor::from_doubles(ks, {16, 1, D}, DType::f64);
    Tensor rq = Tensor::empty(qs.shape(), DType::f64), rk = Tensor::empty(kt.shape(), DType::f64);
    rotary_forward(qs, tab.cos, tab.sin, RotaryLayout::normal, rq);
    rotary_forward(kt, tab.cos, tab.sin, RotaryLayout::normal, rk);
    const auto a = rq.to_doubles(), b = rk.to_doubles();
    double z = 0;
    for (int64_t d = 0; d < D; ++d) z += a[p * D + d] * b[s * D + d];
    return z;
  };
  EXPECT_NEAR(score(7, 3), score(12, 8), 1e-6);
  EXPECT_GT(std::abs(score(7, 3) - score(7, 6)), 1e-3);  // and it does depend on the offset
}

TEST(Rotary, InPlaceEqualsOutOfPlace) {
  const Tensor x = random_tensor({6, 2, 16}, DType::bf16, 5);
  const Tables tab = make_tables(16, 6, DType::bf16);
  Tensor y = Tensor::empty(x.shape(), DType::bf16);
  rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y);
  Tensor inplace = x.clone();
  rotary_forward(inplace, tab.cos, tab.sin, RotaryLayout::normal, inplace);
  EXPECT_EQ(inplace.to_doubles(), y.to_doubles());
}

TEST(Rotary, BackwardMatchesFiniteDifferencesAndAccumulates) {
  for (RotaryLayout layout : {RotaryLayout::normal, RotaryLayout::paired}) {
    Tensor x = random_tensor({5, 2, 8}, DType::f64, 6);
    const Tensor w = random_tensor({5, 2, 8}, DType::f64, 7);
    const Tables tab = make_tables(8, 10, DType::f64);
    Tensor y = Tensor::empty(x.shape(), DType::f64);
    auto loss = [&] {
      rotary_forward(x, tab.cos, tab.sin, layout, y);
      return testing::dot(y, w);
    };
    const auto numeric = testing::numeric_gradient(loss, x);
    Tensor dx = random_tensor(x.shape(), DType::f64, 8);
    const auto base = dx.to_doubles();
    rotary_backward(w, tab.cos, tab.sin, layout, dx);
    auto got = dx.to_doubles();
    for (size_t i = 0; i < got.size(); ++i) got[i] -= base[i];
    EXPECT_LT(testing::max_relative_error(got, numeric), 1e-8);
  }
}

TEST(Rotary, BackwardInvertsForward) {
  const Tensor x = random_tensor({7, 3, 16}, DType::f64, 9);
  const Tables tab = make_tables(16, 7, DType::f64);
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y);
  Tensor back = Tensor::zeros(x.shape(), DType::f64);
  rotary_backward(y, tab.cos, tab.sin, RotaryLayout::normal, back);
  // cos² + sin² of the fp32-evaluated table is 1 up to fp32 rounding.
  EXPECT_LT(testing::max_relative_error(back.to_doubles(), x.to_doubles()), 1e-6);
}

TEST(Rotary, Bf16AgreesWithF64) {
  const auto x = attention_test::twin_random({8, 4, 16}, DType::bf16, 10);
  const Tables hi = make_tables(16, 16, DType::f64), lo = make_tables(16, 16, DType::bf16);
  for (RotaryLayout layout : {RotaryLayout::normal, RotaryLayout::paired}) {
    Tensor yh = Tensor::empty(x.exact.shape(), DType::f64), yl = Tensor::empty(x.low.shape(), DType::bf16);
    rotary_forward(x.exact, hi.cos, hi.sin, layout, yh);
    rotary_forward(x.low, lo.cos, lo.sin, layout, yl);
    EXPECT_LT(testing::max_relative_error(yl.to_doubles(), yh.to_doubles()), 1e-2);
    Tensor gh = Tensor::zeros(x.exact.shape(), DType::f64), gl = Tensor::zeros(x.low.shape(), DType::bf16);
    rotary_backward(x.exact, hi.cos, hi.sin, layout, gh);
    rotary_backward(x.low, lo.cos, lo.sin, layout, gl);
    EXPECT_LT(testing::max_relative_error(gl.to_doubles(), gh.to_doubles()), 1e-2);
  }
}

TEST(Rotary, RejectsBadArguments) {
  const Tables tab = make_tables(16, 8, DType::f32);
  const Tensor x = Tensor::zeros({8, 2, 16}, DType::f32);
  Tensor y = Tensor::zeros({8, 2, 16}, DType::f32);
  EXPECT_NO_THROW(rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y));
  EXPECT_THROW(rotary_forward(x, tab.cos, tab.sin, RotaryLayout::paired, y), Error);  // needs 16 rows
  const Tensor odd_heads = Tensor::zeros({2, 3, 16}, DType::f32);
  Tensor y_odd = Tensor::zeros({2, 3, 16}, DType::f32);
  EXPECT_THROW(rotary_forward(odd_heads, tab.cos, tab.sin, RotaryLayout::paired, y_odd), Error);
  const Tensor wide = Tensor::zeros({8, 2, 32}, DType::f32);
  Tensor y_wide = Tensor::zeros({8, 2, 32}, DType::f32);
  EXPECT_THROW(rotary_forward(wide, tab.cos, tab.sin, RotaryLayout::normal, y_wide), Error);  // D/4 mismatch
  const Tensor xb = Tensor::zeros({8, 2, 16}, DType::bf16);
  Tensor yb = Tensor::zeros({8, 2, 16}, DType::bf16);
  EXPECT_THROW(rotary_forward(xb, tab.cos, tab.sin, RotaryLayout::normal, yb), Error);  // table dtype
}

}  // namespace
}  // namespace gpt
