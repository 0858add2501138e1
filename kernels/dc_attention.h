#pragma once
// "DC correction" of layer 10 (RECIPE §2.9 step 7): a short local softmax per head, mixed across heads by
// per-token weights, added to the core attention output.
//
// Shapes (one floating dtype): q, k, v, y_core, y_out: [T, H, D] (q, k after norm, rotary and key offset;
// v after injection: the same tensors the core attention reads); gates: [T, G] lane tensor
// (kernels/gate_lanes.h): the raw w1 lanes are gates[t, w1_lane + h] and the w2 lanes gates[t, w2_lane + g]
// (P[29:35] and P[35:41] of the post gate MLP in the recipe). cu_seqlens as in kernels/attention.h.
// lse: stat_dtype [H, T], saved for the backward.
//
// For query t of segment [b, e), the local keys are s in [max(b, t − keys + 1), t] (0 <= t − s < keys,
// keys = 112 in the recipe), per head h:
//   π_h(t,s) = softmax_s(scale · ⟨q_th, k_sh⟩)                  (lse[h, t] = its log-normalizer)
//   w1_h(t) = round(r_h · ρ),  ρ = 1/sqrt(mean_h r_h² + 1e-6),  r_h = gates[t, w1_lane + h]
//   a(t,s) = Σ_h w1_h(t) · π_h(t,s)
//   c_g(t,s) = round(w2_g(t) · a(t,s)),  w2_g(t) = gates[t, w2_lane + g]
//   y_out_tg = round(y_core_tg + Σ_s c_g(t,s) · v_sg)
// round() is the storage rounding of the dtype (bf16 in training, identity for f64/f32 tensors beyond
// their own precision): RECIPE §2.9's bf16(w1) and bf16 per-key weight. Everything else runs in the
// accumulation type; y_out is stored once and may alias y_core.
//
// Backward (ADDS into dq, dk, dv, dgates; the two roundings are treated as identity). The gradient with
// respect to y_core is dy_out itself and is NOT added anywhere: the caller passes dy_out on to the core
// attention's backward. With dc_g(t,s) = ⟨dy_out_tg, v_sg⟩:
//   dv_sg += Σ_t c_g(t,s)·dy_out_tg,  dw2_g(t) = Σ_s a(t,s)·dc_g(t,s),  da(t,s) = Σ_g w2_g(t)·dc_g(t,s),
//   dw1_h(t) = Σ_s π_h(t,s)·da(t,s),  dlogit_h(t,s) = π_h(t,s)·w1_h(t)·(da(t,s) − dw1_h(t)),
//   dq_th += scale·Σ_s dlogit·k_sh,  dk_sh += scale·Σ_t dlogit·q_th,
//   dr_h = ρ·dw1_h − r_h·ρ³·(Σ_h' dw1_h'·r_h')/H   -> dgates[t, w1_lane + h];  dw2 -> dgates[t, w2_lane + g].
#include <cstdint>

#include "kernels/tensor.h"

namespace gpt {

inline constexpr int64_t kDcKeys = 112;     // keys per query: 0 <= t − s < 112
inline constexpr double kDcNormEps = 1e-6;  // ε of the w1 RMS normalization (§0.4 exception)

struct DcLanes {
  int64_t w1 = 0;  // first raw w1 lane in gates
  int64_t w2 = 0;  // first w2 lane in gates
};

void dc_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                          const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                          float scale, int64_t keys = kDcKeys);
void dc_attention_backward(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse, Tensor& dq,
                           Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys = kDcKeys);

namespace cpu {
void dc_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                          const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                          float scale, int64_t keys);
void dc_attention_backward(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse, Tensor& dq,
                           Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys);
}  // namespace cpu
namespace cuda {
void dc_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                          const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                          float scale, int64_t keys);
void dc_attention_backward(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse, Tensor& dq,
                           Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys);
}  // namespace cuda

}  // namespace gpt
