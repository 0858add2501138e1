#include "kernels/fp8_linear.h"

#include <vector>

#include "kernels/activation.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "kernels/transpose.h"

namespace gpt {

namespace {

Tensor scalar_on(float v, Device device) { return Tensor::from_floats(std::vector<float>{v}, {1}, DType::f32, device); }

}  // namespace

LmHeadFp8Scales LmHeadFp8Scales::make(int64_t accumulation_steps, Device device) {
  GPT_CHECK(accumulation_steps >= 1, "LmHeadFp8Scales: accumulation steps must be >= 1, got ", accumulation_steps);
  const float inv_a = 1.0f / static_cast<float>(accumulation_steps);
  const float grad_s = inv_a * 0.75f / 448.0f;
  return {scalar_on(100.0f / 448.0f, device), scalar_on(1.6f / 448.0f, device), scalar_on(grad_s, device), grad_s};
}

void lm_head_fp8_forward(const Tensor& h, const Tensor& lm_head, const LmHeadFp8Scales& scales, Tensor& x8, Tensor& w8,
                         Tensor& z_raw) {
  check_dtype(x8, DType::e4m3, "lm_head_fp8_forward: x8");
  check_dtype(w8, DType::e4m3, "lm_head_fp8_forward: w8");
  quantize_fp8(h, scales.x_s, x8);
  quantize_fp8(lm_head, scales.w_s, w8);
  fp8_gemm(x8, w8, scales.x_s, scales.w_s, z_raw, {}, Fp8Accumulation::fast);
}

LmHeadFp8Copy lm_head_fp8_copy(const Tensor& lm_head, const LmHeadFp8Scales& scales) {
  GPT_CHECK(lm_head.ndim() == 2, "lm_head_fp8_copy: lm_head must be [d, V], got ", lm_head.describe());
  const int64_t d = lm_head.size(0), vocab = lm_head.size(1);
  LmHeadFp8Copy copy{Tensor::empty({d, vocab}, DType::e4m3, lm_head.device()),
                     Tensor::empty({vocab, d}, DType::e4m3, lm_head.device())};
  quantize_fp8(lm_head, scales.w_s, copy.w8);
  // Quantizing is elementwise, so quantizing the transposed weights gives the transposed bytes of w8.
  Tensor transposed = Tensor::empty({vocab, d}, lm_head.dtype(), lm_head.device());
  transpose(lm_head, transposed);
  quantize_fp8(transposed, scales.w_s, copy.w8_t);
  return copy;
}

void lm_head_fp8_forward(const Tensor& h, const LmHeadFp8Copy& copy, const LmHeadFp8Scales& scales, Tensor& x8,
                         Tensor& z_raw) {
  GPT_CHECK(copy.defined(), "lm_head_fp8_forward: the lm_head copy was never made (lm_head_fp8_copy)");
  check_dtype(x8, DType::e4m3, "lm_head_fp8_forward: x8");
  quantize_fp8(h, scales.x_s, x8);
  fp8_gemm(x8, copy.w8_t, scales.x_s, scales.w_s, z_raw, {.trans_b = true}, Fp8Accumulation::fast);
}

void lm_head_fp8_backward(const Tensor& g8, const Tensor& x8, const Tensor& w8, const LmHeadFp8Scales& scales,
                          Tensor& dh, Tensor& dlm_head) {
  check_dtype(g8, DType::e5m2, "lm_head_fp8_backward: g8");
  fp8_gemm(g8, w8, scales.grad_s, scales.w_s, dh, {.trans_b = true, .beta = 1.0f});
  fp8_gemm(x8, g8, scales.x_s, scales.grad_s, dlm_head, {.trans_a = true, .beta = 1.0f});
}

MlpFp8State MlpFp8State::make(Device device) {
  return {scalar_on(1.0f, device), scalar_on(1.0f, device), scalar_on(1.0f, device)};
}

void MlpFp8State::reset() {
  const Device device = act_scale.device();
  act_scale.copy_from(scalar_on(1.0f, device));
  w2_scale.copy_from(scalar_on(1.0f, device));
  w2_scale_next.copy_from(scalar_on(1.0f, device));
}

void mlp_fp8_refresh_w2_scale(const Tensor& w2, bool bootstrap, MlpFp8State& state) {
  Tensor w2_amax = Tensor::empty({1}, DType::f32, w2.device());
  amax(w2, w2_amax);
  if (bootstrap) {
    scale_from_amax(w2_amax, 1.0f / 448.0f, kFp8ScaleFloor, state.w2_scale);
  } else {
    state.w2_scale.copy_from(state.w2_scale_next);
  }
  scale_from_amax(w2_amax, kFp8W2Headroom / 448.0f, kFp8ScaleFloor, state.w2_scale_next);
}

MlpFp8Weights mlp_fp8_weights(const Tensor& w1, const Tensor& w2, const MlpFp8State& state) {
  GPT_CHECK(w1.ndim() == 2 && w2.shape() == w1.shape(), "mlp_fp8_weights: need W1 and W2 [hidden, d]; got ",
            w1.describe(), ", ", w2.describe());
  const Device device = w1.device();
  const int64_t hidden = w1.size(0), d = w1.size(1);
  MlpFp8Weights out{Tensor::empty({hidden, d}, DType::e4m3, device), Tensor::empty({1}, DType::f32, device),
                    Tensor::empty({d, hidden}, DType::e4m3, device)};
  // W1 from the current weights: sw1 = max(max|W1|, 1e-12)/448.
  amax_scale(w1, 1.0f / 448.0f, kFp8ScaleFloor, out.w1_scale);
  quantize_fp8(w1, out.w1_scale, out.w1_8);
  // W2 with the delayed scale in use; saturation implements the clamp of §7.2. Quantizing is elementwise, so the
  // transposed weights give the transposed bytes.
  Tensor w2_t = Tensor::empty({d, hidden}, w2.dtype(), device);
  transpose(w2, w2_t);
  quantize_fp8(w2_t, state.w2_scale, out.w2_8_t);
  return out;
}

void mlp_fp8_forward(const Tensor& u, const Tensor& w1, const Tensor& w2, MlpFp8State& state, Tensor& pre, Tensor& post,
                     Tensor& out) {
  mlp_fp8_forward(u, mlp_fp8_weights(w1, w2, state), state, pre, post, out);
}

void mlp_fp8_forward(const Tensor& u, const MlpFp8Weights& weights, MlpFp8State& state, Tensor& pre, Tensor& post,
                     Tensor& out) {
  GPT_CHECK(weights.defined(), "mlp_fp8_forward: the weight copies were never made (mlp_fp8_weights)");
  const Tensor& w1_8 = weights.w1_8;
  const Shape w2_t_shape = {w1_8.size(1), w1_8.size(0)};
  GPT_CHECK(u.ndim() == 2 && w1_8.ndim() == 2 && w1_8.size(1) == u.size(1) && weights.w2_8_t.shape() == w2_t_shape,
            "mlp_fp8_forward: need u [T, d], W1 copy [hidden, d] and W2 copy [d, hidden]; got ", u.describe(), ", ",
            w1_8.describe(), ", ", weights.w2_8_t.describe());
  const Device device = u.device();
  const int64_t rows = u.size(0), hidden = w1_8.size(0), d = u.size(1);
  // Input: scale amax_x/448 (u8 = e4m3(u·448/amax_x)).
  Tensor x_scale = Tensor::empty({1}, DType::f32, device);
  amax_scale(u, 1.0f / 448.0f, kFp8ScaleFloor, x_scale);
  Tensor u8 = Tensor::empty({rows, d}, DType::e4m3, device);
  quantize_fp8(u, x_scale, u8);
  fp8_gemm(u8, w1_8, x_scale, weights.w1_scale, pre, {.trans_b = true}, Fp8Accumulation::fast);
  // post, its e4m3 copy with the delayed scale (saturation implements min(·, 448)) and max(post) in one pass.
  Tensor post8 = Tensor::empty({rows, hidden}, DType::e4m3, device);
  Tensor measured = Tensor::empty({1}, DType::f32, device);
  relu_square_quantize_fp8(pre, state.act_scale, post, post8, measured);
  // Down projection with the delayed W2 scale.
  fp8_gemm(post8, weights.w2_8_t, state.act_scale, state.w2_scale, out, {.trans_b = true}, Fp8Accumulation::fast);
  // Delayed activation scale for the next forward (post ≥ 0, so amax = max); floored so that an all-zero post
  // cannot leave a zero scale behind. Written after the GEMM above has been enqueued with the old scale.
  scale_from_amax(measured, kFp8ActHeadroom / 448.0f, kFp8ScaleFloor, state.act_scale);
}

}  // namespace gpt
