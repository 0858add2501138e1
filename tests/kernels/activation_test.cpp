#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/activation.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

TEST(Gelu, ForwardMatchesPublishedValues) {
  // x·Φ(x): Φ(1) = 0.8413447460685429, Φ(-2) = 0.022750131948179195.
  Tensor x = Tensor::from_doubles(std::vector<double>{0.0, 1.0, -2.0}, {3}, DType::f64);
  Tensor y = Tensor::empty({3}, DType::f64);
  gelu_forward(x, y);
  const auto v = y.to_doubles();
  EXPECT_EQ(v[0], 0.0);
  EXPECT_NEAR(v[1], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(v[2], -2 * 0.022750131948179195, 1e-15);
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({4, 5}, DType::f64, 1, 2.0);
  const Tensor w = random_tensor({4, 5}, DType::f64, 2);
  Tensor y = Tensor::empty({4, 5}, DType::f64);
  auto loss = [&] {
    gelu_forward(x, y);
    return testing::dot(y, w);
  };
  const auto expected = testing::numeric_gradient(loss, x);
  Tensor dx = Tensor::zeros({4, 5}, DType::f64);
  gelu_backward(w, x, dx);
  EXPECT_LT(testing::max_relative_error(dx.to_doubles(), expected), 1e-8);
}

TEST(Gelu, Bf16AgreesWithF64) {
  Tensor x = random_tensor({64}, DType::f64, 3, 2.0);
  Tensor y = Tensor::empty({64}, DType::f64), yb = Tensor::empty({64}, DType::bf16);
  gelu_forward(x, y);
  gelu_forward(x.to(DType::bf16), yb);
  EXPECT_LT(testing::max_relative_error(yb.to_doubles(), y.to_doubles()), 1e-2);
}

TEST(ReluSquare, ForwardRoundsTheSquare) {
  // 1.0078125 = 1 + 2^-7 (bf16 exact); its square 1 + 2^-6 + 2^-14 rounds to 1 + 2^-6.
  Tensor pre = Tensor::from_doubles(std::vector<double>{-3.0, 0.0, 1.0078125, 2.0}, {4}, DType::bf16);
  Tensor post = Tensor::empty({4}, DType::bf16);
  relu_square_forward(pre, post);
  EXPECT_EQ(post.to_doubles(), (std::vector<double>{0.0, 0.0, 1.015625, 4.0}));
}

TEST(ReluSquare, BackwardFromPostMatchesFiniteDifferences) {
  Tensor pre = random_tensor({3, 7}, DType::f64, 4);
  const Tensor w = random_tensor({3, 7}, DType::f64, 5);
  Tensor post = Tensor::empty({3, 7}, DType::f64);
  auto loss = [&] {
    relu_square_forward(pre, post);
    return testing::dot(post, w);
  };
  const auto expected = testing::numeric_gradient(loss, pre);
  loss();
  Tensor dpre = Tensor::zeros({3, 7}, DType::f64);
  relu_square_backward(w, post, dpre);
  EXPECT_LT(testing::max_relative_error(dpre.to_doubles(), expected), 1e-8);
}

TEST(ReluSquare, OverwritingBackwardEqualsAddingIntoZerosAndMayReuseDpost) {
  const Tensor post = random_tensor({4, 9}, DType::bf16, 6, 2.0);
  Tensor post_sq = Tensor::empty(post.shape(), DType::bf16);
  relu_square_forward(post, post_sq);  // non-negative, with exact zeros where post < 0
  const Tensor dpost = random_tensor({4, 9}, DType::bf16, 7);
  Tensor added = Tensor::zeros(post.shape(), DType::bf16);
  relu_square_backward(dpost, post_sq, added);
  Tensor written = random_tensor({4, 9}, DType::bf16, 8);  // overwritten, whatever it held
  relu_square_backward(dpost, post_sq, written, GradWrite::overwrite);
  Tensor in_place = dpost.clone();
  relu_square_backward(in_place, post_sq, in_place, GradWrite::overwrite);
  const std::vector<double> want = added.to_doubles(), got = written.to_doubles(), got_in_place = in_place.to_doubles();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << i;  // == also equates −0 and +0, the only way the two may differ
    EXPECT_EQ(got_in_place[i], want[i]) << i;
  }
  Tensor alias = dpost.clone();
  EXPECT_THROW(relu_square_backward(alias, post_sq, alias), Error);  // adding into its own input is refused
}

TEST(ReluSquare, InPlace) {
  Tensor t = Tensor::from_doubles(std::vector<double>{-1, 3}, {2}, DType::f32);
  relu_square_forward(t, t);
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{0, 9}));
}

TEST(BiasAdd, ForwardAndColumnSumBackward) {
  Tensor x = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64);
  Tensor b = Tensor::from_doubles(std::vector<double>{10, 20}, {2}, DType::f64);
  Tensor y = Tensor::empty({3, 2}, DType::f64);
  bias_add_forward(x, b, y);
  EXPECT_EQ(y.to_doubles(), (std::vector<double>{11, 22, 13, 24, 15, 26}));
  Tensor db = Tensor::from_doubles(std::vector<double>{1, 1}, {2}, DType::f64);
  bias_backward(x, db);
  EXPECT_EQ(db.to_doubles(), (std::vector<double>{10, 13}));
}

TEST(BiasAdd, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({2, 3, 4}, DType::f64, 6);
  Tensor b = random_tensor({4}, DType::f64, 7);
  const Tensor w = random_tensor({2, 3, 4}, DType::f64, 8);
  Tensor y = Tensor::empty({2, 3, 4}, DType::f64);
  auto loss = [&] {
    bias_add_forward(x, b, y);
    return testing::dot(y, w);
  };
  const auto expected = testing::numeric_gradient(loss, b);
  Tensor db = Tensor::zeros({4}, DType::f64);
  bias_backward(w, db);
  EXPECT_LT(testing::max_relative_error(db.to_doubles(), expected), 1e-8);
}

TEST(BiasAdd, RejectsWrongBiasLength) {
  Tensor x = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({2}, DType::f32);
  EXPECT_THROW(bias_add_forward(x, b, x), Error);
}

}  // namespace
}  // namespace gpt
