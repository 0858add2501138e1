#include "kernels/qk_norm_rotary.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_rstd(const Tensor& rstd, const Tensor& x, const char* op) {
  check_shape(rstd, {x.size(0) * x.size(1)}, op);
  check_dtype(rstd, stat_dtype(x.dtype()), op);
}

}  // namespace

void qk_norm_rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y,
                            Tensor& rstd, float eps) {
  check_rotary_operands(x, cos, sin, layout, y, "qk_norm_rotary_forward");
  check_rstd(rstd, x, "qk_norm_rotary_forward: rstd");
  GPT_CHECK(y.raw() != x.raw(), "qk_norm_rotary_forward: y must not be x (the fused kernel reads x while writing y)");
  check_same_device({&x, &cos, &sin, &y, &rstd}, "qk_norm_rotary_forward");
  GPT_BACKEND_CALL(x.device(), qk_norm_rotary_forward, x, cos, sin, layout, y, rstd, eps);
}

void qk_norm_rotary_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& cos,
                             const Tensor& sin, RotaryLayout layout, Tensor& dx, GradWrite write) {
  check_rotary_operands(x, cos, sin, layout, dx, "qk_norm_rotary_backward");
  check_shape(dy, x.shape(), "qk_norm_rotary_backward: dy");
  check_dtype(dy, x.dtype(), "qk_norm_rotary_backward: dy");
  check_rstd(rstd, x, "qk_norm_rotary_backward: rstd");
  GPT_CHECK(dx.raw() != dy.raw() && dx.raw() != x.raw(), "qk_norm_rotary_backward: dx must not be dy or x");
  check_same_device({&dy, &x, &rstd, &cos, &sin, &dx}, "qk_norm_rotary_backward");
  GPT_BACKEND_CALL(x.device(), qk_norm_rotary_backward, dy, x, rstd, cos, sin, layout, dx, write);
}

}  // namespace gpt
