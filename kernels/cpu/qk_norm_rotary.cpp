// CPU reference of kernels/qk_norm_rotary.h: the definition itself, the two reference ops in sequence through a
// normalised (forward) or rotated-back (backward) intermediate of x's dtype.
#include "kernels/qk_norm_rotary.h"

namespace gpt::cpu {

void qk_norm_rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y,
                            Tensor& rstd, float eps) {
  Tensor normed = Tensor::empty(x.shape(), x.dtype());
  cpu::rmsnorm_forward(x, normed, rstd, eps);
  cpu::rotary_forward(normed, cos, sin, layout, y);
}

void qk_norm_rotary_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& cos,
                             const Tensor& sin, RotaryLayout layout, Tensor& dx, GradWrite write) {
  Tensor g = Tensor::zeros(x.shape(), x.dtype());
  cpu::rotary_backward(dy, cos, sin, layout, g);
  cpu::rmsnorm_backward(g, x, rstd, dx, write);
}

}  // namespace gpt::cpu
