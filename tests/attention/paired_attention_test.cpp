// Paired heads (§2.9 step 7): (T, 6, D) viewed as (2T, 3, D) with doubled cu_seqlens.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using attention_test::cu_tensor;
using attention_test::segment_ids;
using testing::random_tensor;

TEST(DoubleCuSeqlens, DoublesEveryEntry) {
  const Tensor cu = cu_tensor({0, 3, 3, 10, 17, 17});
  Tensor doubled = Tensor::empty({6}, DType::i32);
  double_cu_seqlens(cu, doubled);
  const int32_t* p = doubled.data<int32_t>();
  const std::vector<int32_t> want = {0, 6, 6, 20, 34, 34};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p[i], want[i]);
}

TEST(DoubleCuSeqlens, RejectsOverflowAndBadOutputs) {
  Tensor doubled = Tensor::empty({2}, DType::i32);
  EXPECT_THROW(double_cu_seqlens(cu_tensor({0, 1 << 30}), doubled), Error);
  Tensor wrong_size = Tensor::empty({3}, DType::i32);
  EXPECT_THROW(double_cu_seqlens(cu_tensor({0, 4}), wrong_size), Error);
  Tensor wrong_type = Tensor::empty({2}, DType::i64);
  EXPECT_THROW(double_cu_seqlens(cu_tensor({0, 4}), wrong_type), Error);
}

// The paired semantics written directly on the original (token, head) grid: head h of token t sits at
// position 2t + (h >= 3) of the doubled sequence and in group h mod 3; a query sees the keys of its
// group and segment whose position is at most `window` before its own.
std::vector<double> paired_reference(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu,
                                     int64_t window, double scale) {
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const auto Q = q.to_doubles(), K = k.to_doubles(), V = v.to_doubles();
  const std::vector<int> seg = segment_ids(cu, T);
  auto pos = [](int64_t t, int64_t h) { return 2 * t + (h >= 3 ? 1 : 0); };
  std::vector<double> y(static_cast<size_t>(T * H * D), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> w;
      std::vector<int64_t> rows;
      for (int64_t s = 0; s < T; ++s) {
        for (int64_t h2 = 0; h2 < H; ++h2) {
          const int64_t gap = pos(t, h) - pos(s, h2);
          if (h2 % 3 != h % 3 || seg[s] != seg[t] || gap < 0 || gap > window) continue;
          double z = 0;
          for (int64_t d = 0; d < D; ++d) z += Q[(t * H + h) * D + d] * K[(s * H + h2) * D + d];
          w.push_back(scale * z);
          rows.push_back(s * H + h2);
        }
      }
      double mx = -INFINITY, sum = 0;
      for (double z : w) mx = std::max(mx, z);
      for (double& z : w) sum += (z = std::exp(z - mx));
      for (size_t i = 0; i < w.size(); ++i) {
        for (int64_t d = 0; d < D; ++d) y[(t * H + h) * D + d] += w[i] / sum * V[rows[i] * D + d];
      }
    }
  }
  return y;
}

std::vector<double> run_paired(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu,
                               int64_t window, float scale) {
  const int64_t T = q.size(0), D = q.size(2);
  const Tensor cu_t = cu_tensor(cu);
  Tensor cu2 = Tensor::empty(cu_t.shape(), DType::i32);
  double_cu_seqlens(cu_t, cu2);
  Tensor y = Tensor::empty(q.shape(), q.dtype());
  Tensor y2 = y.view({2 * T, 3, D});
  Tensor lse = Tensor::empty({3, 2 * T}, stat_dtype(q.dtype()));
  attention_forward(q.view({2 * T, 3, D}), k.view({2 * T, 3, D}), v.view({2 * T, 3, D}), cu2, y2, lse, window, scale);
  return y.to_doubles();
}

TEST(PairedAttention, DoubledViewMatchesPairedSemantics) {
  const std::vector<int32_t> cu = {0, 1, 6, 6, 13, 13, 13};
  for (int64_t window : {0, 1, 2, 5, 40}) {
    const Tensor q = random_tensor({13, 6, 8}, DType::f64, 50 + window);
    const Tensor k = random_tensor({13, 6, 8}, DType::f64, 60 + window);
    const Tensor v = random_tensor({13, 6, 8}, DType::f64, 70 + window);
    EXPECT_LT(
        testing::max_relative_error(run_paired(q, k, v, cu, window, 0.5f), paired_reference(q, k, v, cu, window, 0.5)),
        1e-13)
        << "window " << window;
  }
}

TEST(PairedAttention, SecondHeadOfAPairSeesFirstHeadAtSameToken) {
  // Window 1: query (t, g+3) sees exactly the keys (t, g) and (t, g+3). With all-zero queries the
  // softmax is uniform, so its output is the mean of those two values.
  const int64_t T = 4, D = 4;
  const Tensor q = Tensor::zeros({T, 6, D}, DType::f64);
  const Tensor k = random_tensor({T, 6, D}, DType::f64, 80);
  const Tensor v = random_tensor({T, 6, D}, DType::f64, 81);
  const auto y = run_paired(q, k, v, {0, T}, 1, 1.0f);
  const auto V = v.to_doubles();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g = 0; g < 3; ++g) {
      for (int64_t d = 0; d < D; ++d) {
        const double first = V[(t * 6 + g) * D + d], second = V[(t * 6 + g + 3) * D + d];
        EXPECT_NEAR(y[(t * 6 + g + 3) * D + d], 0.5 * (first + second), 1e-15);
        if (t > 0) {  // query (t, g) sees (t, g) and the previous token's (t-1, g+3)
          EXPECT_NEAR(y[(t * 6 + g) * D + d], 0.5 * (first + V[((t - 1) * 6 + g + 3) * D + d]), 1e-15);
        } else {
          EXPECT_NEAR(y[(t * 6 + g) * D + d], first, 1e-15);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpt
