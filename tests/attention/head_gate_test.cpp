#include "kernels/head_gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

TEST(HeadGate, ScalesEachHeadByItsLane) {
  const int64_t T = 4, H = 3, D = 5, G = 9, first = 4;
  const Tensor y = random_tensor({T, H, D}, DType::f64, 1);
  const Tensor gates = random_tensor({T, G}, DType::f64, 2);
  Tensor out = Tensor::empty(y.shape(), DType::f64);
  head_gate_forward(y, gates, first, out);
  const auto Y = y.to_doubles(), Gt = gates.to_doubles(), O = out.to_doubles();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) EXPECT_EQ(O[(t * H + h) * D + d], Y[(t * H + h) * D + d] * Gt[t * G + first + h]);
}

TEST(HeadGate, BackwardMatchesFiniteDifferencesAndTouchesOnlyItsLanes) {
  const int64_t T = 5, H = 3, D = 4, G = 8, first = 2;
  Tensor y = random_tensor({T, H, D}, DType::f64, 3);
  Tensor gates = random_tensor({T, G}, DType::f64, 4);
  const Tensor w = random_tensor({T, H, D}, DType::f64, 5);
  Tensor out = Tensor::empty(y.shape(), DType::f64);
  auto loss = [&] {
    head_gate_forward(y, gates, first, out);
    return testing::dot(out, w);
  };
  const auto ny = testing::numeric_gradient(loss, y);
  const auto ng = testing::numeric_gradient(loss, gates);
  Tensor dy = random_tensor(y.shape(), DType::f64, 6), dg = random_tensor(gates.shape(), DType::f64, 7);
  const auto by = dy.to_doubles(), bg = dg.to_doubles();
  head_gate_backward(w, y, gates, first, dy, dg);
  auto gy = dy.to_doubles(), gg = dg.to_doubles();
  for (size_t i = 0; i < gy.size(); ++i) gy[i] -= by[i];
  for (size_t i = 0; i < gg.size(); ++i) gg[i] -= bg[i];
  EXPECT_LT(testing::max_relative_error(gy, ny), 1e-9);
  EXPECT_LT(testing::max_relative_error(gg, ng), 1e-9);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t l = 0; l < G; ++l) {
      if (l < first || l >= first + H) {
        EXPECT_EQ(gg[t * G + l], 0.0);
      }
    }
  }
}

TEST(HeadGate, Bf16AgreesWithF64) {
  const auto y = attention_test::twin_random({6, 3, 8}, DType::bf16, 8);
  const auto g = attention_test::twin_random({6, 4}, DType::bf16, 9);
  const auto dout = attention_test::twin_random({6, 3, 8}, DType::bf16, 10);
  Tensor oh = Tensor::empty({6, 3, 8}, DType::f64), ol = Tensor::empty({6, 3, 8}, DType::bf16);
  head_gate_forward(y.exact, g.exact, 1, oh);
  head_gate_forward(y.low, g.low, 1, ol);
  EXPECT_LT(testing::max_relative_error(ol.to_doubles(), oh.to_doubles()), 1e-2);
  Tensor dyh = Tensor::zeros({6, 3, 8}, DType::f64), dyl = Tensor::zeros({6, 3, 8}, DType::bf16);
  Tensor dgh = Tensor::zeros({6, 4}, DType::f64), dgl = Tensor::zeros({6, 4}, DType::bf16);
  head_gate_backward(dout.exact, y.exact, g.exact, 1, dyh, dgh);
  head_gate_backward(dout.low, y.low, g.low, 1, dyl, dgl);
  EXPECT_LT(testing::max_relative_error(dyl.to_doubles(), dyh.to_doubles()), 1e-2);
  EXPECT_LT(testing::max_relative_error(dgl.to_doubles(), dgh.to_doubles()), 1e-2);
}

// write_dy = overwrite: dy written over NaN with what adding into zeros gives; dgates still adds.
TEST(HeadGate, OverwritingBackwardWritesWhatAddingIntoZerosGives) {
  const Tensor y = random_tensor({4, 3, 8}, DType::bf16, 20), gates = random_tensor({4, 6}, DType::bf16, 21);
  const Tensor dout = random_tensor({4, 3, 8}, DType::bf16, 22), dg0 = random_tensor({4, 6}, DType::bf16, 23);
  Tensor want_dy = Tensor::zeros(y.shape(), DType::bf16), want_dg = dg0.clone();
  head_gate_backward(dout, y, gates, 2, want_dy, want_dg);
  const std::vector<double> nan(static_cast<size_t>(y.numel()), std::nan(""));
  Tensor dy = Tensor::from_doubles(nan, y.shape(), DType::bf16), dg = dg0.clone();
  head_gate_backward(dout, y, gates, 2, dy, dg, GradWrite::overwrite);
  EXPECT_EQ(dy.to_doubles(), want_dy.to_doubles());
  EXPECT_EQ(dg.to_doubles(), want_dg.to_doubles());
}

TEST(HeadGate, RejectsLanesOutOfRange) {
  const Tensor y = Tensor::zeros({4, 3, 2}, DType::f32);
  Tensor out = Tensor::zeros({4, 3, 2}, DType::f32);
  EXPECT_THROW(head_gate_forward(y, Tensor::zeros({4, 5}, DType::f32), 3, out), Error);
  EXPECT_THROW(head_gate_forward(y, Tensor::zeros({4, 5}, DType::f32), -1, out), Error);
  EXPECT_THROW(head_gate_forward(y, Tensor::zeros({3, 5}, DType::f32), 0, out), Error);
  EXPECT_THROW(head_gate_forward(y, Tensor::zeros({4, 5}, DType::bf16), 0, out), Error);
  EXPECT_NO_THROW(head_gate_forward(y, Tensor::zeros({4, 5}, DType::f32), 2, out));
}

}  // namespace
}  // namespace gpt
