#pragma once
// Masked validation loss of the final validation (RECIPE §S.6): validation_loss of kernels/softcap_loss.h (§3.4:
// fp32 softcap z = 23·σ((z_raw + 5)/7.5), then ℓ_t = lse(z_t) − z_t,y[t]) with every column v whose bit is set in
// row inputs[t] of the canonical mask replaced by z_t,v = −60 before the log-sum-exp. (−60 is removal in fp32:
// V·e⁻⁶⁰ ≪ 2⁻²⁴ of the row's mass.) With an all-zero mask the result is bitwise the unmasked loss.
//
// mask: u8 [V_mask, ⌈V/8⌉ or more], row p = previous token, bit v in byte v/8 at bit v mod 8 (trainer/tokenizer/
// canonical_mask.h); inputs: i32 [T] in [0, V_mask); targets: i64 [T] in [0, V).
#include <cstdint>

#include "kernels/tensor.h"

namespace gpt {

inline constexpr float kMaskedLogit = -60.0f;

// h: [T, d], lm_head: [d, V] (same floating dtype), chunk_rows ≥ 1, loss_sum: stat_dtype(h) [1] (overwritten with
// Σ_t ℓ_t; the caller divides by T).
void masked_validation_loss(const Tensor& h, const Tensor& lm_head, const Tensor& inputs, const Tensor& targets,
                            const Tensor& mask, int64_t chunk_rows, Tensor& loss_sum);

// Backend piece: loss_sum[0] += Σ over the rows of z_raw [rows, V] of the masked ℓ_t. Inputs without a mask row and
// targets outside [0, V) are an error on the CPU and make the sum NaN on CUDA (checking them would make the host wait
// for the device).
void masked_validation_loss_rows_add(const Tensor& z_raw, const Tensor& inputs, const Tensor& targets,
                                     const Tensor& mask, Tensor& loss_sum);

namespace cpu {
void masked_validation_loss_rows_add(const Tensor& z_raw, const Tensor& inputs, const Tensor& targets,
                                     const Tensor& mask, Tensor& loss_sum);
}  // namespace cpu
namespace cuda {
void masked_validation_loss_rows_add(const Tensor& z_raw, const Tensor& inputs, const Tensor& targets,
                                     const Tensor& mask, Tensor& loss_sum);
}  // namespace cuda

}  // namespace gpt
