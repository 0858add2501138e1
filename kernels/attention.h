#pragma once
// Variable-length causal sliding-window attention (RECIPE §2.9 step 7, §1.4).
//
// Layout. q, k, v, y: [T, H, D] row-major (token, head, dim), one floating dtype (f64, f32 or bf16), any D.
// The T tokens are one packed sequence cut into segments by cu_seqlens (int32 [R]):
//   cu_seqlens = [0, c_1, ..., c_n, T, ..., T],   0 = c_0 <= c_1 <= ... <= c_{R-1} = T.
// Segment i holds tokens [cu[i], cu[i+1]); repeated entries are empty segments (accepted anywhere, in
// particular the trailing T, T, ... of §1.4). Every token lies in exactly one non-empty segment.
//
// Semantics. Query t of segment [b, e) attends the keys s with max(b, t − window) <= s <= t (at most
// window + 1 keys; never empty, since s = t is always allowed), per head h independently:
//   p_ts = softmax_s(scale · ⟨q_th, k_sh⟩),   y_th = Σ_s p_ts · v_sh,
//   lse[h, t] = log Σ_s exp(scale · ⟨q_th, k_sh⟩)   (natural log, saved for the backward).
// Precision: logits, softmax and the P·V sum run in the accumulation type (f64 for f64 tensors, f32
// otherwise) from the stored inputs; y is rounded to its dtype once at the end. lse is stat_dtype(q):
// f64 for f64 inputs, else f32, laid out head-major [H, T] (as FlashAttention's varlen softmax_lse).
//
// Backward (standard recomputation form): with D_th = ⟨dy_th, y_th⟩ (y = the stored forward output) and
// p_ts = exp(scale·⟨q_th,k_sh⟩ − lse[h,t]), ds_ts = p_ts·(⟨dy_th, v_sh⟩ − D_th):
//   dq_th += scale · Σ_s ds_ts k_sh,   dk_sh += scale · Σ_t ds_ts q_th,   dv_sh += Σ_t p_ts dy_th.
// Each gradient element is read, increased by its full contribution (summed in the accumulation type)
// and stored once, so bf16 gradients round once per call. A gradient whose AttentionGradWrites entry is
// GradWrite::overwrite is written instead (its first writer: the bits adding into zeros gives; kernels/grad_write.h).
//
// Paired heads (§2.9 step 7) are not a separate op: the model views (T, 6, D) as (2T, 3, D), passes
// double_cu_seqlens(cu_seqlens) and the same window; row 2t holds heads 0–2 of token t and row 2t+1
// heads 3–5, so a query of head g+3 at token t sees the key of head g at token t. lse is then [3, 2T].
#include <cstdint>

#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

// How attention_backward stores each of its three gradients.
struct AttentionGradWrites {
  GradWrite dq = GradWrite::add, dk = GradWrite::add, dv = GradWrite::add;
};

// Forward. q, k, v, y: [T, H, D], same floating dtype; cu_seqlens: i32 [R], R >= 2; lse: stat_dtype(q)
// [H, T]. window >= 0 (in tokens), scale = τ (§2.11). y must not alias q, k or v.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                       Tensor& lse, int64_t window, float scale);
// Backward: dq, dk, dv += gradients of Σ ⟨dy, y⟩ (or = where `writes` says so). y and lse are the forward's
// outputs; shapes as above, all of q's dtype. Window and scale must be the forward's.
void attention_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                        const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, int64_t window,
                        float scale, AttentionGradWrites writes = {});

// Zeroes the gradients that `writes` marks GradWrite::overwrite: what a backward that only adds does first (adding
// into zeros is the definition of overwriting).
void zero_overwritten(const AttentionGradWrites& writes, Tensor& dq, Tensor& dk, Tensor& dv);

// doubled[i] = 2 · cu_seqlens[i] (int32 [R] -> int32 [R]) for the paired-head view of a (T, H, D)
// tensor as (2T, H/2, D). Throws (CPU) when a value would overflow int32.
void double_cu_seqlens(const Tensor& cu_seqlens, Tensor& doubled);

// Validates the values of a CPU cu_seqlens table for `tokens` tokens: c_0 = 0, non-decreasing,
// c_{R-1} = tokens. The CPU backend calls it; the CUDA backend trusts its caller (the loader checks
// on the host before the copy).
void check_cu_seqlens_values(const Tensor& cu_seqlens, int64_t tokens, const char* op);

namespace cpu {
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                       Tensor& lse, int64_t window, float scale);
void attention_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                        const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, int64_t window,
                        float scale, AttentionGradWrites writes);
void double_cu_seqlens(const Tensor& cu_seqlens, Tensor& doubled);
}  // namespace cpu
namespace cuda {
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                       Tensor& lse, int64_t window, float scale);
void attention_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                        const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, int64_t window,
                        float scale, AttentionGradWrites writes);
void double_cu_seqlens(const Tensor& cu_seqlens, Tensor& doubled);
}  // namespace cuda

}  // namespace gpt
