#pragma once
// Softcapped cross-entropy losses of RECIPE §3.
//
// Training (§3.1–§3.3), one microbatch of T positions, row by row over V logits:
//   a = (z_raw + 5)/7.5,  s = σ(a) evaluated as 0.5 + 0.5·tanh(0.5·a) and rounded to z_raw's dtype (bf16 in
//   training; exact for f64),  z = 23·s,  lse_t = log Σ_v exp(z_t,v) over all V columns.
//   ℓ_t = Σ_{k<n, t+k<T} w_k·(lse_t − z_t,y[t+k]) + [P_t ≥ 0]·w_P·(lse_t − z_t,P_t),  P_t = prefix_table[y[t]]
//   loss = loss_scale · Σ_t ℓ_t   (loss_scale = 1/A)
// Gradient, as the reference's fused kernel produces it (a documented quirk, not the exact derivative):
//   S_w = Σ_{k<n} w_k + [P_t ≥ 0]·w_P   (ALL n weights, also those whose target t+k fell beyond the microbatch),
//   ∂/∂z_t,v = S_w·softmax(z_t)_v − Σ_{present predictions with target v} weight,
//   dz_raw = loss_scale · ∂/∂z · (23/7.5)·s(1−s).
// dz_raw is written (overwritten) in z_raw's dtype, or as e5m2(dz_raw / grad_scale) when dz_raw is e5m2 (the G8 of
// §7.1, with grad_scale = grad_s; loss_scale then carries the 1/A).
//
// Validation (§3.4): ℓ_t = lse(z_t) − z_t,y[t] with z_raw = h·lm_head from a GEMM stored in h's dtype, then softcap
// and log-sum-exp in fp32 (f64 for f64) without rounding s. validation_loss walks the rows in chunks of chunk_rows,
// so at most [chunk_rows, V] logits exist at once (a workspace allocated on h's device for the call), and writes
// loss_sum[0] = Σ_t ℓ_t (overwritten; the caller divides by the number of positions).
#include <vector>

#include "kernels/tensor.h"

namespace gpt {

inline constexpr float kSoftcap = 23.0f;
inline constexpr float kSoftcapShift = 5.0f;
inline constexpr float kSoftcapDivisor = 7.5f;

struct TrainLossConfig {
  std::vector<float> mtp_weights;  // w_0..w_{n−1}, n ≥ 1 (§5.3)
  float prefix_weight = 0.0f;      // w_P (§5.3); the prefix term needs a prefix table as well
  float loss_scale = 1.0f;         // 1/A (§3.3)
  float grad_scale = 1.0f;         // grad_s when dz_raw is e5m2 (§7.1); ignored otherwise
};

// z_raw: [T, V] (f64, f32 or bf16). targets: i64 [T], in [0, V). prefix_table: i64 [V] with entries in [−1, V), or
// an undefined Tensor for "no prefix term". loss: stat_dtype(z_raw) [1]. dz_raw: [T, V], z_raw's dtype or e5m2.
void softcap_train_loss(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                        const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw);

// h: [T, d], lm_head: [d, V] (same floating dtype), targets: i64 [T], chunk_rows ≥ 1, loss_sum: stat_dtype(h) [1].
void validation_loss(const Tensor& h, const Tensor& lm_head, const Tensor& targets, int64_t chunk_rows,
                     Tensor& loss_sum);

// Backend piece of validation_loss: loss_sum[0] += Σ over the rows of z_raw [rows, V] of lse − z_y.
void validation_loss_rows_add(const Tensor& z_raw, const Tensor& targets, Tensor& loss_sum);

namespace cpu {
void softcap_train_loss(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                        const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw);
void validation_loss_rows_add(const Tensor& z_raw, const Tensor& targets, Tensor& loss_sum);
}  // namespace cpu
namespace cuda {
void softcap_train_loss(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                        const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw);
void validation_loss_rows_add(const Tensor& z_raw, const Tensor& targets, Tensor& loss_sum);
}  // namespace cuda

}  // namespace gpt
