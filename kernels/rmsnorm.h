#pragma once
// RMS normalization without a learned weight (RECIPE §0.4): y = x / sqrt(mean(x²) + eps) over the last
// dimension, computed in the accumulation type, stored in x's dtype. rstd (stat_dtype: f32, or f64 for f64
// inputs; one per row) is saved for the backward.
//
// Convention for every op family in kernels/: forward ops overwrite their outputs; backward ops ADD
// into their gradient outputs (the caller zeroes them), so a tensor read in several places collects
// its gradient without extra buffers.
#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

inline constexpr float kNormEps = 1.1920928955078125e-07f;  // 2^-23, §0.4 / §U.3

// x, y: [rows, n] (any leading shape), same dtype. rstd: stat_dtype(x) [rows].
void rmsnorm_forward(const Tensor& x, Tensor& y, Tensor& rstd, float eps = kNormEps);
// The argument checks of rmsnorm_forward (y like x, rstd stat_dtype(x) [rows]), for ops that make a norm too.
void check_rmsnorm_outputs(const Tensor& x, const Tensor& y, const Tensor& rstd, const char* op);
// dx += J^T dy (GradWrite::overwrite: dx = J^T dy, its first writer). dy, x, dx: same shape and dtype as x.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, Tensor& dx,
                      GradWrite write = GradWrite::add);

namespace cpu {
void rmsnorm_forward(const Tensor& x, Tensor& y, Tensor& rstd, float eps);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, Tensor& dx, GradWrite write);
}  // namespace cpu
namespace cuda {
void rmsnorm_forward(const Tensor& x, Tensor& y, Tensor& rstd, float eps);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, Tensor& dx, GradWrite write);
}  // namespace cuda

}  // namespace gpt
