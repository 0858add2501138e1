#pragma once
// Pointwise activations and bias adds of the MLPs (RECIPE §0.4, §2.6, §2.7, §2.10). The MUDD gate and coefficient
// MLPs are assembled as gemm + bias_add + gelu + gemm + bias_add + mix (the final ·γ or ·0.1 scale).
//
// GELU (exact erf form):  y = x·Φ(x),  Φ(x) = (1 + erf(x/√2))/2.  Backward: dx += dy·(Φ(x) + x·φ(x)).
// ReLU² (§2.10):          post = bf16(relu(pre)²) where pre is already stored (rounded) in the activation dtype.
//                         Backward reads only post: dpre += dpost·2·sqrt(post) (= 2·relu(pre) up to rounding), so
//                         pre need not be kept.
// Bias add:               y[r, c] = x[r, c] + b[c] over a [rows, n] tensor (y may be x). The gradient w.r.t. x
//                         is dy itself; bias_backward ADDS the column sums Σ_r dy[r, c] (fixed order) into db.
// All tensors: f64, f32 or bf16, one dtype per call; math in the accumulation type, rounded once when stored.
#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

// x, y, dy, dx: same shape and dtype. y may be x.
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx);

// pre, post, dpost, dpre: same shape and dtype. post may be pre. With GradWrite::overwrite the gradient is written
// (dpre = dpost·2·sqrt(post), the same bits as adding into zeros) and dpre may be dpost: the MLP backward turns its
// dpost scratch into dpre in place instead of zeroing a second [tokens, hidden] buffer and reading it back.
void relu_square_forward(const Tensor& pre, Tensor& post);
void relu_square_backward(const Tensor& dpost, const Tensor& post, Tensor& dpre, GradWrite write = GradWrite::add);

// x, y: [rows, n] (any leading shape, n = last dimension); bias, dbias: [n].
void bias_add_forward(const Tensor& x, const Tensor& bias, Tensor& y);
void bias_backward(const Tensor& dy, Tensor& dbias);

namespace cpu {
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx);
void relu_square_forward(const Tensor& pre, Tensor& post);
void relu_square_backward(const Tensor& dpost, const Tensor& post, Tensor& dpre, GradWrite write);
void bias_add_forward(const Tensor& x, const Tensor& bias, Tensor& y);
void bias_backward(const Tensor& dy, Tensor& dbias);
}  // namespace cpu
namespace cuda {
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx);
void relu_square_forward(const Tensor& pre, Tensor& post);
void relu_square_backward(const Tensor& dpost, const Tensor& post, Tensor& dpre, GradWrite write);
void bias_add_forward(const Tensor& x, const Tensor& bias, Tensor& y);
void bias_backward(const Tensor& dy, Tensor& dbias);
}  // namespace cuda

}  // namespace gpt
