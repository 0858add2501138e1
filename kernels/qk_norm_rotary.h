#pragma once
// QK-norm followed by the rotary embedding (RECIPE §2.9 steps 3–4) as one op: y = rotary(rmsnorm(x)), with the
// normalised head vector rounded to x's dtype before it is rotated, exactly as the two ops of kernels/rmsnorm.h
// and kernels/rotary.h compose. The fused CUDA kernel reads x once and writes y once, where the two ops read and
// write the [T, H, D] tensor twice and keep the normalised copy alive for the backward.
//
// Forward:  n = dtype(x · rstd),  rstd = 1 / sqrt(mean_D(x²) + eps)  (per head vector, saved, stat_dtype(x)),
//           y = R(θ)·n                                               (rounded once, stationary dims copied).
// Backward (ADDS, like every backward; with GradWrite::overwrite dx is written: the first writer of q's or k's
// gradient, kernels/grad_write.h):
//           g  = dtype(R(−θ)·dy)                                     (what rotary_backward leaves in a zero buffer)
//           dx += rstd·g − rstd³·(Σ_D g·x)/D · x                      (rmsnorm_backward of g)
// Shapes: x, y, dy, dx [T, H, D] of one floating dtype; cos, sin [P, D/4] of that dtype; rstd [T·H].
// Layouts and table sizes are those of kernels/rotary.h. y must not alias x.
#include "kernels/grad_write.h"
#include "kernels/rmsnorm.h"
#include "kernels/rotary.h"
#include "kernels/tensor.h"

namespace gpt {

void qk_norm_rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y,
                            Tensor& rstd, float eps = kNormEps);
void qk_norm_rotary_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& cos,
                             const Tensor& sin, RotaryLayout layout, Tensor& dx, GradWrite write = GradWrite::add);

namespace cpu {
void qk_norm_rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y,
                            Tensor& rstd, float eps);
void qk_norm_rotary_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& cos,
                             const Tensor& sin, RotaryLayout layout, Tensor& dx, GradWrite write);
}  // namespace cpu
namespace cuda {
void qk_norm_rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y,
                            Tensor& rstd, float eps);
void qk_norm_rotary_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& cos,
                             const Tensor& sin, RotaryLayout layout, Tensor& dx, GradWrite write);
}  // namespace cuda

}  // namespace gpt
