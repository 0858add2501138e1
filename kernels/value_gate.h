#pragma once
// Gated value-embedding injection (RECIPE §2.9 step 6, layers 1, 2, 8, 9).
// Shapes (one floating dtype for all): v, v_out, ve: [T, H, Dh] (ve = the token's value-embedding row
// viewed per head); u: [T, C], C >= 6 (the attention input norm(x), C = H·Dh in the model); gate: [H, 12]
// (the layer's ve_gate_bank matrix).
//   f_t = [u_t[0:6], ve_t[0:6]]   (ve_t flat, so ve_t[0:6] are the first 6 dims of head 0)
//   z_th = ⟨gate[h, :], f_t⟩,   g_th = 2σ(z_th),   v_out_th = v_th + g_th · ve_th
// Computed in the accumulation type from the stored inputs, v_out rounded once. v_out may alias v.
// Backward (every gradient ADDED to, but dv / dve written where write_dv / write_dve say GradWrite::overwrite; du
// cannot be: only its first 6 columns are touched): dv += dv_out; dve_th += g_th·dv_out_th;
//   dz_th = ⟨dv_out_th, ve_th⟩ · 2σ(z)(1 − σ(z));  dgate[h, j] += Σ_t dz_th f_t[j];
//   du_t[j] += Σ_h dz_th gate[h, j], dve_t[j] += Σ_h dz_th gate[h, 6 + j] (j < 6).
// dgate sums over all tokens in the accumulation type and is stored once. dv must not alias dv_out.
#include <cstdint>

#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

inline constexpr int64_t kValueGateLanes = 6;  // lanes taken from u and from ve each (gate has 12 columns)

void value_gate_forward(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& v_out);
void value_gate_backward(const Tensor& dv_out, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& dv,
                         Tensor& du, Tensor& dve, Tensor& dgate, GradWrite write_dv = GradWrite::add,
                         GradWrite write_dve = GradWrite::add);

namespace cpu {
void value_gate_forward(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& v_out);
void value_gate_backward(const Tensor& dv_out, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& dv,
                         Tensor& du, Tensor& dve, Tensor& dgate, GradWrite write_dv, GradWrite write_dve);
}  // namespace cpu
namespace cuda {
void value_gate_forward(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& v_out);
void value_gate_backward(const Tensor& dv_out, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& dv,
                         Tensor& du, Tensor& dve, Tensor& dgate, GradWrite write_dv, GradWrite write_dve);
}  // namespace cuda

}  // namespace gpt
