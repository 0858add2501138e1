#pragma once
// Smear gate of the input stage (RECIPE §2.5 step 2): a one-token look-back that crosses document boundaries.
//
//   z_t = ⟨w, e_t[0:12]⟩           (the smear_gate linear; fp32 accumulation, rounded to e's dtype like a GEMM)
//   g_t = bf16(λ) · σ(z_t)          for t ≥ 1 (λ = scalars[22] = λ_smear, fp32, rounded to bf16 for bf16 e)
//   out_0 = e_0,   out_t = e_t + g_t · e_{t−1}     (fp32, rounded once into out)
//
// e, out: [T, d] with d ≥ 12 (f64, f32 or bf16). w: the smear_gate parameter [1, 12], e's dtype. λ: [1],
// stat_dtype(e). sig: stat_dtype(e) [T], saved σ(z_t) for the backward (sig[0] = 0, unused).
//
// Backward (ADDS): de_t += dout_t + g_{t+1}·dout_{t+1} + [t ≥ 1]·dz_t·w (first 12 columns),
// with dg_t = ⟨dout_t, e_{t−1}⟩, dz_t = dg_t·bf16(λ)·σ_t(1 − σ_t); dw += Σ_t dz_t·e_t[0:12]; dλ += Σ_t dg_t·σ_t.
// Rounding of z and λ is pass-through in the backward. Reductions are in fixed token order (deterministic).
#include "kernels/tensor.h"

namespace gpt {

inline constexpr int64_t kSmearGateWidth = 12;

void smear_forward(const Tensor& e, const Tensor& w, const Tensor& lambda, Tensor& out, Tensor& sig);
void smear_backward(const Tensor& dout, const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig,
                    Tensor& de, Tensor& dw, Tensor& dlambda);

namespace cpu {
void smear_forward(const Tensor& e, const Tensor& w, const Tensor& lambda, Tensor& out, Tensor& sig);
void smear_backward(const Tensor& dout, const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig,
                    Tensor& de, Tensor& dw, Tensor& dlambda);
}  // namespace cpu
namespace cuda {
void smear_forward(const Tensor& e, const Tensor& w, const Tensor& lambda, Tensor& out, Tensor& sig);
void smear_backward(const Tensor& dout, const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig,
                    Tensor& de, Tensor& dw, Tensor& dlambda);
}  // namespace cuda

}  // namespace gpt
