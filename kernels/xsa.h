#pragma once
// Gated XSA (RECIPE §2.9 step 8, layers 1, 3, 4, 7): removes from each head's attention output part of
// its component along the token's own value vector. y, v, y_out: [T, H, D] (one floating dtype); the
// strength α_th = gates[t, first_lane + h] (gates: [T, G], same dtype; kernels/gate_lanes.h):
//   n_th = max(‖v_th‖², 1e-8),  c_th = ⟨y_th, v_th⟩ / n_th,  y_out_th = y_th − tanh(α_th) · c_th · v_th.
// Accumulation type from the stored inputs, y_out rounded once; y_out may alias y (but the backward needs
// the input y, so keep it if a backward follows).
// Backward (ADDS, or writes dy / dv where write_dy / write_dv say GradWrite::overwrite; a = tanh α, g = dy_out_th,
// p = ⟨y, v⟩, gv = ⟨g, v⟩):
//   dy += g − (a/n)·gv·v;   dα += −(1 − a²)·(p/n)·gv;
//   dv += −a·(gv·y + p·g)/n + [‖v‖² > 1e-8]·2a·p·gv·v/n²   (the clamp has zero derivative below 1e-8).
#include <cstdint>

#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

inline constexpr double kXsaMinNormSq = 1e-8;

void xsa_forward(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, Tensor& y_out);
// y: the forward's input. dgates: [T, G]; only lanes [first_lane, first_lane + H) are added to.
void xsa_backward(const Tensor& dy_out, const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane,
                  Tensor& dy, Tensor& dv, Tensor& dgates, GradWrite write_dy = GradWrite::add,
                  GradWrite write_dv = GradWrite::add);

namespace cpu {
void xsa_forward(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, Tensor& y_out);
void xsa_backward(const Tensor& dy_out, const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane,
                  Tensor& dy, Tensor& dv, Tensor& dgates, GradWrite write_dy, GradWrite write_dv);
}  // namespace cpu
namespace cuda {
void xsa_forward(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, Tensor& y_out);
void xsa_backward(const Tensor& dy_out, const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane,
                  Tensor& dy, Tensor& dv, Tensor& dgates, GradWrite write_dy, GradWrite write_dv);
}  // namespace cuda

}  // namespace gpt
