#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm.h"
#include "kernels/transpose.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

float value(const Tensor& scalar) { return static_cast<float>(scalar.to_doubles()[0]); }

// max |a − b| relative to max |b|, for products whose operands went through fp8.
double rel_error(const Tensor& a, const Tensor& b) {
  return testing::max_relative_error(a.to_doubles(), b.to_doubles());
}

Tensor transposed(const Tensor& x) {
  Tensor out = Tensor::empty({x.size(1), x.size(0)}, x.dtype());
  transpose(x, out);
  return out;
}

// Bit-for-bit equality of two tensors of one dtype and shape.
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The CPU FP8 GEMM sums in one order whatever the layout an operand is stored in, as the CUDA path (both operands
// K-contiguous), so a stored transposed copy of an operand gives the same bits.
TEST(Fp8Gemm, AnOperandStoredTransposedGivesTheSameBits) {
  const int64_t m = 24, k = 48, n = 40;
  Tensor a = Tensor::empty({m, k}, DType::e4m3), b = Tensor::empty({k, n}, DType::e4m3);
  const Tensor one = Tensor::from_floats(std::vector<float>{1.0f}, {1}, DType::f32);
  quantize_fp8(random_tensor({m, k}, DType::f32, 71, 40.0), one, a);
  quantize_fp8(random_tensor({k, n}, DType::f32, 72, 40.0), one, b);
  Tensor a_t = Tensor::empty({k, m}, DType::e4m3), b_t = Tensor::empty({n, k}, DType::e4m3);
  quantize_fp8(transposed(random_tensor({m, k}, DType::f32, 71, 40.0)), one, a_t);
  quantize_fp8(transposed(random_tensor({k, n}, DType::f32, 72, 40.0)), one, b_t);
  Tensor c_plain = Tensor::empty({m, n}, DType::f32), c_stored_t = Tensor::empty({m, n}, DType::f32);
  fp8_gemm(a, b, one, one, c_plain);
  fp8_gemm(a_t, b_t, one, one, c_stored_t, {.trans_a = true, .trans_b = true});
  EXPECT_TRUE(same_bits(c_plain, c_stored_t));
}

TEST(LmHeadFp8, ScalesFollowRecipe) {
  const LmHeadFp8Scales s = LmHeadFp8Scales::make(4);
  EXPECT_FLOAT_EQ(value(s.x_s), 100.0f / 448);
  EXPECT_FLOAT_EQ(value(s.w_s), 1.6f / 448);
  EXPECT_FLOAT_EQ(s.grad_scale_value(), 0.25f * 0.75f / 448);
  EXPECT_THROW(LmHeadFp8Scales::make(0), Error);
}

TEST(LmHeadFp8, ForwardApproximatesBf16ProductAndMatchesDequantizedFormula) {
  const int64_t rows = 6, d = 32, vocab = 40;
  Tensor h = random_tensor({rows, d}, DType::bf16, 1);
  Tensor w = random_tensor({d, vocab}, DType::bf16, 2, 0.005);
  const LmHeadFp8Scales s = LmHeadFp8Scales::make(1);
  Tensor x8 = Tensor::empty({rows, d}, DType::e4m3), w8 = Tensor::empty({d, vocab}, DType::e4m3);
  Tensor z = Tensor::empty({rows, vocab}, DType::bf16);
  lm_head_fp8_forward(h, w, s, x8, w8, z);
  Tensor xd = Tensor::empty({rows, d}, DType::f64), wd = Tensor::empty({d, vocab}, DType::f64);
  dequantize_fp8(x8, s.x_s, xd);
  dequantize_fp8(w8, s.w_s, wd);
  Tensor formula = Tensor::empty({rows, vocab}, DType::f64);
  gemm(xd, wd, formula);
  EXPECT_LT(rel_error(z, formula), 1e-2);  // bf16 output rounding only
  Tensor exact = Tensor::empty({rows, vocab}, DType::f32);
  gemm(h.to(DType::f32), w.to(DType::f32), exact);
  EXPECT_LT(rel_error(z, exact), 0.1);  // e4m3 operands
}

TEST(LmHeadFp8, BackwardAccumulatesBothGradients) {
  const int64_t rows = 5, d = 16, vocab = 24;
  Tensor h = random_tensor({rows, d}, DType::bf16, 3);
  Tensor w = random_tensor({d, vocab}, DType::bf16, 4, 0.005);
  const LmHeadFp8Scales s = LmHeadFp8Scales::make(2);
  Tensor x8 = Tensor::empty({rows, d}, DType::e4m3), w8 = Tensor::empty({d, vocab}, DType::e4m3);
  Tensor z = Tensor::empty({rows, vocab}, DType::bf16);
  lm_head_fp8_forward(h, w, s, x8, w8, z);
  Tensor dz = random_tensor({rows, vocab}, DType::f32, 5, 1e-3);
  Tensor g8 = Tensor::empty({rows, vocab}, DType::e5m2);
  quantize_fp8(dz, s.grad_s, g8);
  Tensor dh = random_tensor({rows, d}, DType::bf16, 6, 1e-3);
  Tensor dw = random_tensor({d, vocab}, DType::f32, 7, 1e-3);
  const Tensor dh0 = dh.clone(), dw0 = dw.clone();
  lm_head_fp8_backward(g8, x8, w8, s, dh, dw);
  // References from the dequantized operands: dh0 + G·W8ᵀ and dw0 + X8ᵀ·G.
  Tensor gd = Tensor::empty({rows, vocab}, DType::f64), xd = Tensor::empty({rows, d}, DType::f64);
  Tensor wd = Tensor::empty({d, vocab}, DType::f64);
  dequantize_fp8(g8, s.grad_s, gd);
  dequantize_fp8(x8, s.x_s, xd);
  dequantize_fp8(w8, s.w_s, wd);
  Tensor dh_ref = dh0.to(DType::f64), dw_ref = dw0.to(DType::f64);
  gemm(gd, wd, dh_ref, {.trans_b = true, .beta = 1.0f});
  gemm(xd, gd, dw_ref, {.trans_a = true, .beta = 1.0f});
  EXPECT_LT(rel_error(dh, dh_ref), 1e-2);
  EXPECT_LT(rel_error(dw, dw_ref), 1e-5);
  // And the whole path approximates the exact bf16-free gradient of h·W.
  Tensor dh_exact = dh0.to(DType::f32);
  gemm(dz, w.to(DType::f32), dh_exact, {.trans_b = true, .beta = 1.0f});
  EXPECT_LT(rel_error(dh, dh_exact), 0.15);
}

// The copy made once per optimizer step gives what quantizing lm_head in every forward gives, bit for bit.
TEST(LmHeadFp8, ForwardFromTheCopyGivesTheBitsOfQuantizingPerCall) {
  const int64_t rows = 16, d = 32, vocab = 48;
  const Tensor h = random_tensor({rows, d}, DType::bf16, 81);
  const Tensor w = random_tensor({d, vocab}, DType::bf16, 82, 0.005);
  const LmHeadFp8Scales s = LmHeadFp8Scales::make(2);
  Tensor x8 = Tensor::empty({rows, d}, DType::e4m3), w8 = Tensor::empty({d, vocab}, DType::e4m3);
  Tensor z = Tensor::empty({rows, vocab}, DType::bf16);
  lm_head_fp8_forward(h, w, s, x8, w8, z);
  const LmHeadFp8Copy copy = lm_head_fp8_copy(w, s);
  Tensor x8_copy = Tensor::empty({rows, d}, DType::e4m3), z_copy = Tensor::empty({rows, vocab}, DType::bf16);
  lm_head_fp8_forward(h, copy, s, x8_copy, z_copy);
  EXPECT_TRUE(same_bits(copy.w8, w8));
  EXPECT_TRUE(same_bits(x8_copy, x8));
  EXPECT_TRUE(same_bits(z_copy, z));
  // w8_t holds w8's bytes transposed.
  const auto* a = static_cast<const uint8_t*>(copy.w8.raw());
  const auto* t = static_cast<const uint8_t*>(copy.w8_t.raw());
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < vocab; ++j) ASSERT_EQ(t[j * d + i], a[i * vocab + j]) << i << ", " << j;
  EXPECT_THROW(lm_head_fp8_forward(h, LmHeadFp8Copy{}, s, x8_copy, z_copy), Error);
}

// Copies made from the same weights and state give the per-call forward's bits (pre, post, out and the delayed
// activation scale it leaves behind), in the first forward and in one that uses the delayed scale.
TEST(MlpFp8, ForwardFromWeightCopiesGivesTheBitsOfQuantizingPerCall) {
  const int64_t rows = 16, d = 32, hidden = 64;
  const Tensor u = random_tensor({rows, d}, DType::bf16, 91);
  const Tensor w1 = random_tensor({hidden, d}, DType::bf16, 92, 0.2);
  const Tensor w2 = random_tensor({hidden, d}, DType::bf16, 93, 0.2);
  MlpFp8State per_call = MlpFp8State::make(), copied = MlpFp8State::make();
  mlp_fp8_refresh_w2_scale(w2, true, per_call);
  mlp_fp8_refresh_w2_scale(w2, true, copied);
  const MlpFp8Weights copies = mlp_fp8_weights(w1, w2, copied);
  for (int pass = 0; pass < 2; ++pass) {
    Tensor pre = Tensor::empty({rows, hidden}, DType::bf16), post = Tensor::empty({rows, hidden}, DType::bf16);
    Tensor out = Tensor::empty({rows, d}, DType::bf16);
    Tensor pre_c = Tensor::empty({rows, hidden}, DType::bf16), post_c = Tensor::empty({rows, hidden}, DType::bf16);
    Tensor out_c = Tensor::empty({rows, d}, DType::bf16);
    mlp_fp8_forward(u, w1, w2, per_call, pre, post, out);
    mlp_fp8_forward(u, copies, copied, pre_c, post_c, out_c);
    EXPECT_TRUE(same_bits(pre_c, pre)) << "pass " << pass;
    EXPECT_TRUE(same_bits(post_c, post)) << "pass " << pass;
    EXPECT_TRUE(same_bits(out_c, out)) << "pass " << pass;
    EXPECT_TRUE(same_bits(copied.act_scale, per_call.act_scale)) << "pass " << pass;
  }
  // A copy made before the W2 scale changed no longer matches: the copies belong to one refresh.
  std::vector<double> doubled = w2.to_doubles();
  for (double& v : doubled) v *= 4.0;
  const Tensor w2_big = Tensor::from_doubles(doubled, w2.shape(), DType::bf16);
  mlp_fp8_refresh_w2_scale(w2_big, true, per_call);
  Tensor pre = Tensor::empty({rows, hidden}, DType::bf16), post = Tensor::empty({rows, hidden}, DType::bf16);
  Tensor out = Tensor::empty({rows, d}, DType::bf16), out_stale = Tensor::empty({rows, d}, DType::bf16);
  mlp_fp8_forward(u, w1, w2_big, per_call, pre, post, out);
  mlp_fp8_forward(u, copies, copied, pre, post, out_stale);
  EXPECT_FALSE(same_bits(out_stale, out));
}

TEST(MlpFp8, RefreshBootstrapsThenUsesDelayedScale) {
  MlpFp8State state = MlpFp8State::make();
  Tensor w2 = Tensor::from_doubles(std::vector<double>{0.5, -2.0, 1.0, 0.25}, {2, 2}, DType::bf16);
  mlp_fp8_refresh_w2_scale(w2, /*bootstrap=*/true, state);
  EXPECT_FLOAT_EQ(value(state.w2_scale), 2.0f / 448);
  EXPECT_FLOAT_EQ(value(state.w2_scale_next), 2.0f * 1.12f / 448);
  Tensor w2b = Tensor::from_doubles(std::vector<double>{4.0, 0, 0, 0}, {2, 2}, DType::bf16);
  mlp_fp8_refresh_w2_scale(w2b, /*bootstrap=*/false, state);
  EXPECT_FLOAT_EQ(value(state.w2_scale), 2.0f * 1.12f / 448);  // the value delayed from the previous refresh
  EXPECT_FLOAT_EQ(value(state.w2_scale_next), 4.0f * 1.12f / 448);
  Tensor zero = Tensor::zeros({2, 2}, DType::bf16);
  mlp_fp8_refresh_w2_scale(zero, true, state);
  EXPECT_GT(value(state.w2_scale), 0.0f);  // floored: zero-initialised W2 gives no division by zero
  state.reset();
  EXPECT_EQ(value(state.act_scale), 1.0f);
}

TEST(MlpFp8, ForwardApproximatesBf16MlpAndUpdatesActivationScale) {
  const int64_t rows = 8, d = 32, hidden = 64;
  Tensor u = random_tensor({rows, d}, DType::bf16, 8);
  Tensor w1 = random_tensor({hidden, d}, DType::bf16, 9, 0.2);
  Tensor w2 = random_tensor({hidden, d}, DType::bf16, 10, 0.2);
  MlpFp8State state = MlpFp8State::make();
  mlp_fp8_refresh_w2_scale(w2, true, state);
  Tensor pre = Tensor::empty({rows, hidden}, DType::bf16), post = Tensor::empty({rows, hidden}, DType::bf16);
  Tensor out = Tensor::empty({rows, d}, DType::bf16);
  mlp_fp8_forward(u, w1, w2, state, pre, post, out);
  const auto pv = post.to_doubles();
  const float max_post = static_cast<float>(*std::max_element(pv.begin(), pv.end()));
  EXPECT_FLOAT_EQ(value(state.act_scale), max_post * 1.80f / 448);
  // Second forward uses the delayed scale; compare with the bf16 MLP relu(u·W1ᵀ)²·W2 in f32.
  mlp_fp8_forward(u, w1, w2, state, pre, post, out);
  Tensor ref_pre = Tensor::empty({rows, hidden}, DType::f32);
  gemm(u.to(DType::f32), w1.to(DType::f32), ref_pre, {.trans_b = true});
  std::vector<double> rp = ref_pre.to_doubles();
  for (double& v : rp) v = std::max(v, 0.0) * std::max(v, 0.0);
  Tensor ref_post = Tensor::from_doubles(rp, {rows, hidden}, DType::f32);
  Tensor ref_out = Tensor::empty({rows, d}, DType::f32);
  gemm(ref_post, w2.to(DType::f32), ref_out);
  EXPECT_LT(rel_error(post, ref_post), 0.15);
  EXPECT_LT(rel_error(out, ref_out), 0.15);
}

}  // namespace
}  // namespace gpt
