// kernels/qk_norm_rotary.h on the CPU: the fused op is rotary(rmsnorm(x)) with the intermediate rounded to x's
// dtype, its backward is the exact gradient (finite differences in f64) and adds, and bad arguments are refused.
#include "kernels/qk_norm_rotary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

using Tables = attention_test::RotaryTableSet;
constexpr auto make_tables = attention_test::yarn_tables;

constexpr RotaryLayout kLayouts[] = {RotaryLayout::normal, RotaryLayout::paired};

TEST(QkNormRotary, ForwardEqualsRmsnormThenRotaryBitForBit) {
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    for (RotaryLayout layout : kLayouts) {
      const Tensor x = random_tensor({9, 4, 16}, dtype, 1, 3.0);
      const Tables tab = make_tables(16, 18, dtype);
      Tensor normed = Tensor::empty(x.shape(), dtype), expected = Tensor::empty(x.shape(), dtype);
      Tensor rstd_expected = Tensor::empty({36}, stat_dtype(dtype));
      rmsnorm_forward(x, normed, rstd_expected);
      rotary_forward(normed, tab.cos, tab.sin, layout, expected);

      Tensor y = Tensor::empty(x.shape(), dtype), rstd = Tensor::empty({36}, stat_dtype(dtype));
      qk_norm_rotary_forward(x, tab.cos, tab.sin, layout, y, rstd);
      EXPECT_EQ(y.to_doubles(), expected.to_doubles()) << dtype_name(dtype);
      EXPECT_EQ(rstd.to_doubles(), rstd_expected.to_doubles()) << dtype_name(dtype);
    }
  }
}

TEST(QkNormRotary, OutputRowsHaveUnitRmsAndKeepTheStationaryHalf) {
  const Tensor x = random_tensor({6, 2, 16}, DType::f64, 2, 5.0);
  const Tables tab = make_tables(16, 6, DType::f64);
  Tensor y = Tensor::empty(x.shape(), DType::f64), rstd = Tensor::empty({12}, DType::f64);
  qk_norm_rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y, rstd);
  const std::vector<double> in = x.to_doubles(), out = y.to_doubles(), r = rstd.to_doubles();
  for (int64_t row = 0; row < 12; ++row) {
    double ss = 0;
    for (int64_t d = 0; d < 16; ++d) ss += out[row * 16 + d] * out[row * 16 + d];
    EXPECT_NEAR(ss / 16, 1.0, 1e-6) << "row " << row;  // rotation keeps the norm up to the table's fp32 rounding
    for (int64_t d = 8; d < 16; ++d) EXPECT_DOUBLE_EQ(out[row * 16 + d], in[row * 16 + d] * r[row]);
  }
}

TEST(QkNormRotary, BackwardMatchesFiniteDifferencesAndAccumulates) {
  for (RotaryLayout layout : kLayouts) {
    Tensor x = random_tensor({5, 2, 8}, DType::f64, 3, 2.0);
    const Tensor w = random_tensor({5, 2, 8}, DType::f64, 4);
    const Tables tab = make_tables(8, 10, DType::f64);
    Tensor y = Tensor::empty(x.shape(), DType::f64), rstd = Tensor::empty({10}, DType::f64);
    auto loss = [&] {
      qk_norm_rotary_forward(x, tab.cos, tab.sin, layout, y, rstd);
      return testing::dot(y, w);
    };
    const std::vector<double> numeric = testing::numeric_gradient(loss, x);
    loss();  // rstd of the unperturbed x
    Tensor dx = random_tensor(x.shape(), DType::f64, 5);
    const std::vector<double> start = dx.to_doubles();
    qk_norm_rotary_backward(w, x, rstd, tab.cos, tab.sin, layout, dx);
    std::vector<double> added = dx.to_doubles();
    for (size_t i = 0; i < added.size(); ++i) added[i] -= start[i];
    EXPECT_LT(testing::max_relative_error(added, numeric), 1e-7);
  }
}

TEST(QkNormRotary, BackwardEqualsRotaryBackwardThenRmsnormBackward) {
  for (RotaryLayout layout : kLayouts) {
    const Tensor x = random_tensor({7, 4, 16}, DType::bf16, 6), dy = random_tensor({7, 4, 16}, DType::bf16, 7);
    const Tables tab = make_tables(16, 14, DType::bf16);
    Tensor y = Tensor::empty(x.shape(), DType::bf16), rstd = Tensor::empty({28}, DType::f32);
    qk_norm_rotary_forward(x, tab.cos, tab.sin, layout, y, rstd);
    const Tensor start = random_tensor(x.shape(), DType::bf16, 8);
    Tensor g = Tensor::zeros(x.shape(), DType::bf16), expected = start.clone(), dx = start.clone();
    rotary_backward(dy, tab.cos, tab.sin, layout, g);
    rmsnorm_backward(g, x, rstd, expected);
    qk_norm_rotary_backward(dy, x, rstd, tab.cos, tab.sin, layout, dx);
    EXPECT_EQ(dx.to_doubles(), expected.to_doubles());
  }
}

// GradWrite::overwrite writes what adding into zeros gives, whatever dx held (here NaN).
TEST(QkNormRotary, OverwritingBackwardWritesWhatAddingIntoZerosGives) {
  for (RotaryLayout layout : kLayouts) {
    const Tensor x = random_tensor({7, 4, 16}, DType::bf16, 9), dy = random_tensor({7, 4, 16}, DType::bf16, 10);
    const Tables tab = make_tables(16, 14, DType::bf16);
    Tensor y = Tensor::empty(x.shape(), DType::bf16), rstd = Tensor::empty({28}, DType::f32);
    qk_norm_rotary_forward(x, tab.cos, tab.sin, layout, y, rstd);
    Tensor expected = Tensor::zeros(x.shape(), DType::bf16);
    qk_norm_rotary_backward(dy, x, rstd, tab.cos, tab.sin, layout, expected);
    const std::vector<double> nan(static_cast<size_t>(x.numel()), std::nan(""));
    Tensor dx = Tensor::from_doubles(nan, x.shape(), DType::bf16);
    qk_norm_rotary_backward(dy, x, rstd, tab.cos, tab.sin, layout, dx, GradWrite::overwrite);
    EXPECT_EQ(dx.to_doubles(), expected.to_doubles());
  }
}

TEST(QkNormRotary, RejectsBadArguments) {
  const Tables tab = make_tables(16, 8, DType::f32);
  const Tensor x = Tensor::zeros({8, 2, 16}, DType::f32);
  Tensor y = Tensor::zeros({8, 2, 16}, DType::f32), rstd = Tensor::zeros({16}, DType::f32);
  EXPECT_NO_THROW(qk_norm_rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y, rstd));
  Tensor short_rstd = Tensor::zeros({8}, DType::f32), f64_rstd = Tensor::zeros({16}, DType::f64);
  EXPECT_THROW(qk_norm_rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y, short_rstd), Error);
  EXPECT_THROW(qk_norm_rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y, f64_rstd), Error);
  EXPECT_THROW(qk_norm_rotary_forward(x, tab.cos, tab.sin, RotaryLayout::paired, y, rstd), Error);  // 16 rows
  Tensor same = Tensor::zeros({8, 2, 16}, DType::f32);
  EXPECT_THROW(qk_norm_rotary_forward(same, tab.cos, tab.sin, RotaryLayout::normal, same, rstd), Error);
  Tensor dx = Tensor::zeros({8, 2, 16}, DType::f32);
  const Tensor dy_wrong = Tensor::zeros({8, 2, 8}, DType::f32);
  EXPECT_THROW(qk_norm_rotary_backward(dy_wrong, x, rstd, tab.cos, tab.sin, RotaryLayout::normal, dx), Error);
  try {
    qk_norm_rotary_forward(x, tab.cos, tab.sin, RotaryLayout::normal, y, short_rstd);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qk_norm_rotary_forward: rstd"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
