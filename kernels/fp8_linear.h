#pragma once
// The FP8 products of RECIPE §7, composed from kernels/fp8.h (quantize, amax, fp8_gemm) so that both backends share
// them: §7.1 lm_head of the training loss and §7.2 MLP training forward. Scales are f32 [1] tensors on the device.
// The forward products use the tensor cores' fast accumulation (Fp8Accumulation::fast), the backward ones full.
#include "kernels/tensor.h"

namespace gpt {

// §7.1 constants: x_s = 100/448, w_s = 1.6/448, grad_s = (1/A)·0.75/448.
struct LmHeadFp8Scales {
  Tensor x_s, w_s, grad_s;
  float grad_s_host = 0.0f;  // the value stored in grad_s, kept on the host so that reading it never syncs
  static LmHeadFp8Scales make(int64_t accumulation_steps, Device device = Device::cpu);
  float grad_scale_value() const { return grad_s_host; }  // grad_s for TrainLossConfig::grad_scale
};

// Forward: x8 = e4m3(h/x_s) [T, d], w8 = e4m3(lm_head/w_s) [d, V] (saved for the backward),
// z_raw = bf16((x8·w8)·x_s·w_s) [T, V]. h, lm_head, z_raw: bf16 (f32 accepted for tests).
void lm_head_fp8_forward(const Tensor& h, const Tensor& lm_head, const LmHeadFp8Scales& scales, Tensor& x8, Tensor& w8,
                         Tensor& z_raw);

// §7.1 FP8 copy of lm_head, w8 = e4m3(lm_head/w_s), in the two layouts its products read: [d, V] for the
// backward's G8·W8ᵀ and [V, d] (K-contiguous, so the forward's FP8 GEMM needs no byte transpose of it). w_s is a
// constant, so the copy depends on the weights alone: the model makes it once per optimizer step instead of once
// per microbatch. An undefined copy (defined() false) is one that was never made.
struct LmHeadFp8Copy {
  Tensor w8;    // [d, V] e4m3
  Tensor w8_t;  // [V, d] e4m3, the same bytes transposed
  bool defined() const { return w8.defined(); }
};
LmHeadFp8Copy lm_head_fp8_copy(const Tensor& lm_head, const LmHeadFp8Scales& scales);
// lm_head_fp8_forward from a copy of the same lm_head: the same x8 and z_raw, bit for bit.
void lm_head_fp8_forward(const Tensor& h, const LmHeadFp8Copy& copy, const LmHeadFp8Scales& scales, Tensor& x8,
                         Tensor& z_raw);
// Backward from g8 = e5m2 loss gradient (softcap_train_loss with dz_raw e5m2 and grad_scale = grad_s) (ADDS):
//   dh += (g8·w8ᵀ)·grad_s·w_s          [T, d], h's dtype (rounded once with the existing content)
//   dlm_head += (x8ᵀ·g8)·x_s·grad_s    [d, V], f32 or bf16
void lm_head_fp8_backward(const Tensor& g8, const Tensor& x8, const Tensor& w8, const LmHeadFp8Scales& scales,
                          Tensor& dh, Tensor& dlm_head);

// §7.2 delayed-scale state of one MLP layer (per rank, never communicated).
struct MlpFp8State {
  Tensor act_scale;      // sa_i: (max of post in the previous training forward)·1.80/448; 1 after init/reset
  Tensor w2_scale;       // sw2_i in use
  Tensor w2_scale_next;  // delayed value for the next refresh: max|W2| at the last refresh ·1.12/448
  static MlpFp8State make(Device device = Device::cpu);
  void reset();  // act_scale = 1, W2 scales = 1 (the bootstrap refresh sets them before use)
};

// amax floor of §7.2 (1e-12 for u and W1); also applied to W2's amax and to max(post) so that an all-zero tensor
// (W2 is zero at init) never yields a zero scale.
inline constexpr float kFp8ScaleFloor = 1e-12f;
inline constexpr float kFp8ActHeadroom = 1.80f;
inline constexpr float kFp8W2Headroom = 1.12f;

// Refresh after an optimizer step (and before training). bootstrap (refresh before training, and after steps
// s < 16): sw2 = max|W2|/448; otherwise sw2 = the delayed value of the previous refresh. Then always
// sw2_next = max|W2|·1.12/448.
void mlp_fp8_refresh_w2_scale(const Tensor& w2, bool bootstrap, MlpFp8State& state);

// §7.2 FP8 copies of one MLP layer's weights: w1_8 = e4m3(W1/sw1) with sw1 = max(max|W1|, 1e-12)/448 from the
// current weights, and w2_8_t = e4m3(W2ᵀ/sw2) with the state's sw2 in use, stored [d, hidden] (K-contiguous for the
// down projection, so its FP8 GEMM needs no byte transpose). sw1 and sw2 change only with the weights and at a
// refresh, so the model makes the copies once per optimizer step, after mlp_fp8_refresh_w2_scale.
struct MlpFp8Weights {
  Tensor w1_8;      // [hidden, d] e4m3
  Tensor w1_scale;  // f32 [1]
  Tensor w2_8_t;    // [d, hidden] e4m3
  bool defined() const { return w1_8.defined(); }
};
MlpFp8Weights mlp_fp8_weights(const Tensor& w1, const Tensor& w2, const MlpFp8State& state);

// Training forward of MLP_i(u) = relu(u·W1ᵀ)²·W2 with FP8 products. u: [T, d]; w1, w2: [hidden, d]; pre, post:
// [T, hidden] (saved for the bf16 backward); out: [T, d]; all bf16 (f32 accepted). Updates state.act_scale for the
// next forward from max(post).
void mlp_fp8_forward(const Tensor& u, const Tensor& w1, const Tensor& w2, MlpFp8State& state, Tensor& pre, Tensor& post,
                     Tensor& out);
// The same forward from copies made of the same weights and state (mlp_fp8_weights): the same bits.
void mlp_fp8_forward(const Tensor& u, const MlpFp8Weights& weights, MlpFp8State& state, Tensor& pre, Tensor& post,
                     Tensor& out);

}  // namespace gpt
