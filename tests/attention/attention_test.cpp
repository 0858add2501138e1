#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using attention_test::cu_tensor;
using attention_test::segment_ids;
using testing::random_tensor;

struct Dense {
  std::vector<double> y;    // [T, H, D]
  std::vector<double> lse;  // [H, T]
};

// Dense masked attention: a full T×T score matrix per head, masked by "same segment, causal, within
// the window", then an ordinary softmax. Written without reference to the kernel's loop structure.
Dense dense_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu, int64_t window,
                      double scale) {
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const auto Q = q.to_doubles(), K = k.to_doubles(), V = v.to_doubles();
  const std::vector<int> seg = segment_ids(cu, T);
  Dense out{std::vector<double>(static_cast<size_t>(T * H * D)), std::vector<double>(static_cast<size_t>(H * T))};
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> score(static_cast<size_t>(T), -std::numeric_limits<double>::infinity());
      for (int64_t s = 0; s < T; ++s) {
        if (seg[s] != seg[t] || s > t || t - s > window) continue;
        double z = 0;
        for (int64_t d = 0; d < D; ++d) z += Q[(t * H + h) * D + d] * K[(s * H + h) * D + d];
        score[s] = scale * z;
      }
      double mx = -INFINITY;
      for (double z : score) mx = std::max(mx, z);
      double sum = 0;
      for (double z : score) sum += std::exp(z - mx);
      out.lse[h * T + t] = mx + std::log(sum);
      for (int64_t s = 0; s < T; ++s) {
        const double p = std::exp(score[s] - mx) / sum;
        for (int64_t d = 0; d < D; ++d) out.y[(t * H + h) * D + d] += p * V[(s * H + h) * D + d];
      }
    }
  }
  return out;
}

struct Case {
  int64_t T, H, D;
  std::vector<int32_t> cu;
  int64_t window;
};

// Segments of length 1, empty segments in the middle and at the end, windows below and above the
// segment lengths.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {20, 2, 8, {0, 1, 7, 7, 15, 20, 20, 20}, 3},
      {20, 2, 8, {0, 1, 7, 7, 15, 20, 20, 20}, 0},
      {20, 3, 16, {0, 1, 7, 7, 15, 20, 20, 20}, 100},
      {12, 3, 8, {0, 12}, 5},
      {9, 2, 12, {0, 4, 5, 9, 9}, 1},
      {32, 2, 16, {0, 11, 12, 30, 32, 32}, 7},
  };
  return all;
}

struct Outputs {
  Tensor y, lse;
};
Outputs run_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu, int64_t window, float scale) {
  Outputs o{Tensor::empty(q.shape(), q.dtype()), Tensor::empty({q.size(1), q.size(0)}, stat_dtype(q.dtype()))};
  attention_forward(q, k, v, cu, o.y, o.lse, window, scale);
  return o;
}

TEST(Attention, ForwardMatchesDenseMaskedAttention) {
  int seed = 10;
  for (const Case& c : cases()) {
    const Tensor q = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    const Tensor k = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    const Tensor v = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    const float scale = 0.37f;
    const Outputs got = run_forward(q, k, v, cu_tensor(c.cu), c.window, scale);
    const Dense want = dense_attention(q, k, v, c.cu, c.window, scale);
    EXPECT_LT(testing::max_relative_error(got.y.to_doubles(), want.y), 1e-13) << "T=" << c.T << " w=" << c.window;
    EXPECT_LT(testing::max_relative_error(got.lse.to_doubles(), want.lse), 1e-13) << "T=" << c.T;
  }
}

TEST(Attention, WindowZeroReturnsOwnValue) {
  const Tensor q = random_tensor({6, 2, 4}, DType::f64, 1);
  const Tensor k = random_tensor({6, 2, 4}, DType::f64, 2);
  const Tensor v = random_tensor({6, 2, 4}, DType::f64, 3);
  const Outputs o = run_forward(q, k, v, cu_tensor({0, 6}), 0, 1.0f);
  EXPECT_EQ(o.y.to_doubles(), v.to_doubles());
}

TEST(Attention, LengthOneSegmentSeesOnlyItself) {
  // Token 3 is a segment of its own: whatever the window, its output is its own value.
  const Tensor q = random_tensor({6, 2, 4}, DType::f64, 4);
  const Tensor k = random_tensor({6, 2, 4}, DType::f64, 5);
  const Tensor v = random_tensor({6, 2, 4}, DType::f64, 6);
  const Outputs o = run_forward(q, k, v, cu_tensor({0, 3, 4, 6, 6}), 50, 1.0f);
  const auto y = o.y.to_doubles(), vv = v.to_doubles();
  for (int i = 3 * 8; i < 4 * 8; ++i) EXPECT_DOUBLE_EQ(y[i], vv[i]);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  int seed = 100;
  for (const Case& c : cases()) {
    if (c.T > 20) continue;  // keep the central differences cheap
    Tensor q = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    Tensor k = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    Tensor v = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    const Tensor w = random_tensor({c.T, c.H, c.D}, DType::f64, seed++);
    const Tensor cu = cu_tensor(c.cu);
    const float scale = 0.45f;
    auto loss = [&] { return testing::dot(run_forward(q, k, v, cu, c.window, scale).y, w); };
    const auto nq = testing::numeric_gradient(loss, q);
    const auto nk = testing::numeric_gradient(loss, k);
    const auto nv = testing::numeric_gradient(loss, v);
    const Outputs o = run_forward(q, k, v, cu, c.window, scale);
    Tensor dq = Tensor::zeros(q.shape(), DType::f64), dk = Tensor::zeros(q.shape(), DType::f64),
           dv = Tensor::zeros(q.shape(), DType::f64);
    attention_backward(w, q, k, v, cu, o.y, o.lse, dq, dk, dv, c.window, scale);
    EXPECT_LT(testing::max_relative_error(dq.to_doubles(), nq), 1e-7) << "dq T=" << c.T << " w=" << c.window;
    EXPECT_LT(testing::max_relative_error(dk.to_doubles(), nk), 1e-7) << "dk T=" << c.T << " w=" << c.window;
    EXPECT_LT(testing::max_relative_error(dv.to_doubles(), nv), 1e-7) << "dv T=" << c.T << " w=" << c.window;
  }
}

TEST(Attention, BackwardAccumulates) {
  const Case& c = cases()[0];
  const Tensor q = random_tensor({c.T, c.H, c.D}, DType::f64, 1);
  const Tensor k = random_tensor({c.T, c.H, c.D}, DType::f64, 2);
  const Tensor v = random_tensor({c.T, c.H, c.D}, DType::f64, 3);
  const Tensor dy = random_tensor({c.T, c.H, c.D}, DType::f64, 4);
  const Tensor cu = cu_tensor(c.cu);
  const Outputs o = run_forward(q, k, v, cu, c.window, 0.3f);
  Tensor g1[3] = {Tensor::zeros(q.shape(), DType::f64), Tensor::zeros(q.shape(), DType::f64),
                  Tensor::zeros(q.shape(), DType::f64)};
  Tensor g2[3] = {random_tensor(q.shape(), DType::f64, 7), random_tensor(q.shape(), DType::f64, 8),
                  random_tensor(q.shape(), DType::f64, 9)};
  const std::vector<double> base[3] = {g2[0].to_doubles(), g2[1].to_doubles(), g2[2].to_doubles()};
  attention_backward(dy, q, k, v, cu, o.y, o.lse, g1[0], g1[1], g1[2], c.window, 0.3f);
  attention_backward(dy, q, k, v, cu, o.y, o.lse, g2[0], g2[1], g2[2], c.window, 0.3f);
  for (int i = 0; i < 3; ++i) {
    const auto a = g1[i].to_doubles(), b = g2[i].to_doubles();
    for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(b[j], base[i][j] + a[j], 1e-12);
  }
}

// Each gradient marked GradWrite::overwrite is written (over NaN here) with what adding into zeros gives, the others
// keep adding: the writes are independent.
TEST(Attention, OverwrittenGradientsEqualAddingIntoZeros) {
  const Case& c = cases()[0];
  const Shape shape{c.T, c.H, c.D};
  const Tensor q = random_tensor(shape, DType::bf16, 1), k = random_tensor(shape, DType::bf16, 2);
  const Tensor v = random_tensor(shape, DType::bf16, 3), dy = random_tensor(shape, DType::bf16, 4);
  const Tensor cu = cu_tensor(c.cu);
  const Outputs o = run_forward(q, k, v, cu, c.window, 0.3f);
  Tensor zero[3] = {Tensor::zeros(shape, DType::bf16), Tensor::zeros(shape, DType::bf16),
                    Tensor::zeros(shape, DType::bf16)};
  attention_backward(dy, q, k, v, cu, o.y, o.lse, zero[0], zero[1], zero[2], c.window, 0.3f);
  const Tensor start[3] = {random_tensor(shape, DType::bf16, 5), random_tensor(shape, DType::bf16, 6),
                           random_tensor(shape, DType::bf16, 7)};
  Tensor added[3] = {start[0].clone(), start[1].clone(), start[2].clone()};
  attention_backward(dy, q, k, v, cu, o.y, o.lse, added[0], added[1], added[2], c.window, 0.3f);
  const std::vector<double> nan(static_cast<size_t>(q.numel()), std::nan(""));
  for (int which = 0; which < 3; ++which) {
    AttentionGradWrites writes;
    GradWrite* mode[] = {&writes.dq, &writes.dk, &writes.dv};
    *mode[which] = GradWrite::overwrite;
    Tensor g[3] = {start[0].clone(), start[1].clone(), start[2].clone()};
    g[which] = Tensor::from_doubles(nan, shape, DType::bf16);
    attention_backward(dy, q, k, v, cu, o.y, o.lse, g[0], g[1], g[2], c.window, 0.3f, writes);
    for (int t = 0; t < 3; ++t) {
      const Tensor& want = t == which ? zero[t] : added[t];
      EXPECT_EQ(g[t].to_doubles(), want.to_doubles()) << "gradient " << t << ", overwriting " << which;
    }
  }
}

// bf16 and f32 runs from the same (bf16-representable) inputs agree with the f64 run within the
// storage precision: relative 2^-8 per stored element plus accumulation slack.
void check_low_precision(DType dtype, double tol) {
  const Case c{32, 2, 16, {0, 11, 12, 30, 32, 32}, 7};
  const Tensor cu = cu_tensor(c.cu);
  const Shape shape{c.T, c.H, c.D};
  auto q = attention_test::twin_random(shape, dtype, 21), k = attention_test::twin_random(shape, dtype, 22),
       v = attention_test::twin_random(shape, dtype, 23), dy = attention_test::twin_random(shape, dtype, 24);
  const float scale = 0.25f;
  const Outputs hi = run_forward(q.exact, k.exact, v.exact, cu, c.window, scale);
  const Outputs lo = run_forward(q.low, k.low, v.low, cu, c.window, scale);
  EXPECT_LT(testing::max_relative_error(lo.y.to_doubles(), hi.y.to_doubles()), tol);
  EXPECT_LT(testing::max_relative_error(lo.lse.to_doubles(), hi.lse.to_doubles()), 1e-5);
  Tensor dh[3] = {Tensor::zeros(shape, DType::f64), Tensor::zeros(shape, DType::f64), Tensor::zeros(shape, DType::f64)};
  Tensor dl[3] = {Tensor::zeros(shape, dtype), Tensor::zeros(shape, dtype), Tensor::zeros(shape, dtype)};
  attention_backward(dy.exact, q.exact, k.exact, v.exact, cu, hi.y, hi.lse, dh[0], dh[1], dh[2], c.window, scale);
  attention_backward(dy.low, q.low, k.low, v.low, cu, lo.y, lo.lse, dl[0], dl[1], dl[2], c.window, scale);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(testing::max_relative_error(dl[i].to_doubles(), dh[i].to_doubles()), 3 * tol) << "grad " << i;
  }
}

TEST(Attention, Bf16AgreesWithF64) { check_low_precision(DType::bf16, 1e-2); }
TEST(Attention, F32AgreesWithF64) { check_low_precision(DType::f32, 1e-5); }

TEST(Attention, Bf16OutputIsRoundedOnce) {
  // With window 0 the output is exactly the stored value: no double rounding may change it.
  const Tensor v = random_tensor({5, 2, 8}, DType::bf16, 31);
  const Outputs o = run_forward(random_tensor({5, 2, 8}, DType::bf16, 32), random_tensor({5, 2, 8}, DType::bf16, 33), v,
                                cu_tensor({0, 5}), 0, 1.0f);
  EXPECT_EQ(o.y.to_doubles(), v.to_doubles());
}

TEST(Attention, RejectsBadCuSeqlens) {
  const Tensor q = Tensor::zeros({6, 2, 4}, DType::f32);
  Tensor y = Tensor::zeros({6, 2, 4}, DType::f32);
  Tensor lse = Tensor::zeros({2, 6}, DType::f32);
  EXPECT_THROW(attention_forward(q, q, q, cu_tensor({0, 4}), y, lse, 2, 1.0f), Error);        // ends before T
  EXPECT_THROW(attention_forward(q, q, q, cu_tensor({1, 6}), y, lse, 2, 1.0f), Error);        // starts at 1
  EXPECT_THROW(attention_forward(q, q, q, cu_tensor({0, 4, 3, 6}), y, lse, 2, 1.0f), Error);  // decreasing
  EXPECT_THROW(attention_forward(q, q, q, cu_tensor({6}), y, lse, 2, 1.0f), Error);           // R < 2
  EXPECT_NO_THROW(attention_forward(q, q, q, cu_tensor({0, 0, 6, 6, 6}), y, lse, 2, 1.0f));
}

TEST(Attention, RejectsBadShapesAndArguments) {
  const Tensor q = Tensor::zeros({6, 2, 4}, DType::f32);
  const Tensor cu = cu_tensor({0, 6});
  Tensor y = Tensor::zeros({6, 2, 4}, DType::f32);
  Tensor lse = Tensor::zeros({2, 6}, DType::f32);
  Tensor lse_tokens_first = Tensor::zeros({6, 2}, DType::f32);
  Tensor lse_bf16 = Tensor::zeros({2, 6}, DType::bf16);
  Tensor y_bf16 = Tensor::zeros({6, 2, 4}, DType::bf16);
  EXPECT_THROW(attention_forward(q, q, q, cu, y, lse_tokens_first, 2, 1.0f), Error);
  EXPECT_THROW(attention_forward(q, q, q, cu, y, lse_bf16, 2, 1.0f), Error);
  EXPECT_THROW(attention_forward(q, q, q, cu, y_bf16, lse, 2, 1.0f), Error);
  EXPECT_THROW(attention_forward(q, q, q, cu, y, lse, -1, 1.0f), Error);
  EXPECT_THROW(attention_forward(q, q, q, cu, y, lse, 2, NAN), Error);
  EXPECT_THROW(attention_forward(q, Tensor::zeros({6, 2, 8}, DType::f32), q, cu, y, lse, 2, 1.0f), Error);
  EXPECT_THROW(attention_forward(q.view({12, 4}), q, q, cu, y, lse, 2, 1.0f), Error);
}

}  // namespace
}  // namespace gpt
