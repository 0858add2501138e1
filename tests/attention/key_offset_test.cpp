#include "kernels/key_offset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

TEST(KeyOffset, UpperHalfComesFromPreviousToken) {
  const int64_t T = 6, H = 2, D = 8;
  const Tensor k = random_tensor({T, H, D}, DType::f64, 1);
  Tensor y = Tensor::empty(k.shape(), DType::f64);
  key_offset_forward(k, y);
  const auto K = k.to_doubles(), Y = y.to_doubles();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < D; ++d) {
        const int64_t src = (d < D / 2 || t == 0) ? t : t - 1;
        EXPECT_EQ(Y[(t * H + h) * D + d], K[(src * H + h) * D + d]) << t << "," << h << "," << d;
      }
    }
  }
}

TEST(KeyOffset, BackwardMatchesFiniteDifferencesAndAccumulates) {
  Tensor k = random_tensor({7, 3, 8}, DType::f64, 2);
  const Tensor w = random_tensor({7, 3, 8}, DType::f64, 3);
  Tensor y = Tensor::empty(k.shape(), DType::f64);
  auto loss = [&] {
    key_offset_forward(k, y);
    return testing::dot(y, w);
  };
  const auto numeric = testing::numeric_gradient(loss, k);
  Tensor dk = random_tensor(k.shape(), DType::f64, 4);
  const auto base = dk.to_doubles();
  key_offset_backward(w, dk);
  auto got = dk.to_doubles();
  for (size_t i = 0; i < got.size(); ++i) got[i] -= base[i];
  EXPECT_LT(testing::max_relative_error(got, numeric), 1e-9);
}

TEST(KeyOffset, Bf16CopiesExactlyAndBackwardAgreesWithF64) {
  const Tensor kb = random_tensor({5, 2, 16}, DType::bf16, 5);
  Tensor yb = Tensor::empty(kb.shape(), DType::bf16);
  key_offset_forward(kb, yb);
  Tensor yh = Tensor::empty(kb.shape(), DType::f64);
  key_offset_forward(kb.to(DType::f64), yh);
  EXPECT_EQ(yb.to_doubles(), yh.to_doubles());
  const Tensor g = random_tensor({5, 2, 16}, DType::bf16, 6);
  Tensor db = Tensor::zeros(kb.shape(), DType::bf16), dh = Tensor::zeros(kb.shape(), DType::f64);
  key_offset_backward(g, db);
  key_offset_backward(g.to(DType::f64), dh);
  EXPECT_LT(testing::max_relative_error(db.to_doubles(), dh.to_doubles()), 1e-2);
}

// GradWrite::overwrite: written over NaN with what adding into zeros gives (both halves, token 0's double use too).
TEST(KeyOffset, OverwritingBackwardWritesWhatAddingIntoZerosGives) {
  const Tensor g = random_tensor({5, 2, 16}, DType::bf16, 7);
  Tensor want = Tensor::zeros(g.shape(), DType::bf16);
  key_offset_backward(g, want);
  const std::vector<double> nan(static_cast<size_t>(g.numel()), std::nan(""));
  Tensor dk = Tensor::from_doubles(nan, g.shape(), DType::bf16);
  key_offset_backward(g, dk, GradWrite::overwrite);
  EXPECT_EQ(dk.to_doubles(), want.to_doubles());
}

TEST(KeyOffset, SingleTokenIsUnchanged) {
  const Tensor k = random_tensor({1, 2, 4}, DType::f32, 7);
  Tensor y = Tensor::empty(k.shape(), DType::f32);
  key_offset_forward(k, y);
  EXPECT_EQ(y.to_doubles(), k.to_doubles());
}

TEST(KeyOffset, RejectsBadArguments) {
  Tensor k = Tensor::zeros({4, 2, 7}, DType::f32);
  Tensor y = Tensor::zeros({4, 2, 7}, DType::f32);
  EXPECT_THROW(key_offset_forward(k, y), Error);  // odd D
  Tensor k8 = Tensor::zeros({4, 2, 8}, DType::f32);
  EXPECT_THROW(key_offset_forward(k8, k8), Error);  // aliasing
  Tensor y16 = Tensor::zeros({4, 2, 8}, DType::bf16);
  EXPECT_THROW(key_offset_forward(k8, y16), Error);
}

}  // namespace
}  // namespace gpt
