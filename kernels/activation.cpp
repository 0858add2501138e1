#include "kernels/activation.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_like(const Tensor& t, const Tensor& ref, const char* what) {
  check_shape(t, ref.shape(), what);
  check_dtype(t, ref.dtype(), what);
  check_same_device({&t, &ref}, what);
}

void check_floating(const Tensor& t, const char* what) {
  GPT_CHECK(t.defined() && is_floating(t.dtype()) && t.ndim() >= 1, what, ": expected a floating tensor, got ",
            t.describe());
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  check_floating(x, "gelu_forward: x");
  check_like(y, x, "gelu_forward: y");
  GPT_BACKEND_CALL(x.device(), gelu_forward, x, y);
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  check_floating(x, "gelu_backward: x");
  check_like(dy, x, "gelu_backward: dy");
  check_like(dx, x, "gelu_backward: dx");
  GPT_BACKEND_CALL(x.device(), gelu_backward, dy, x, dx);
}

void relu_square_forward(const Tensor& pre, Tensor& post) {
  check_floating(pre, "relu_square_forward: pre");
  check_like(post, pre, "relu_square_forward: post");
  GPT_BACKEND_CALL(pre.device(), relu_square_forward, pre, post);
}

void relu_square_backward(const Tensor& dpost, const Tensor& post, Tensor& dpre, GradWrite write) {
  check_floating(post, "relu_square_backward: post");
  check_like(dpost, post, "relu_square_backward: dpost");
  check_like(dpre, post, "relu_square_backward: dpre");
  GPT_CHECK(write == GradWrite::overwrite || dpre.raw() != dpost.raw(),
            "relu_square_backward: dpre may be dpost only with GradWrite::overwrite");
  GPT_BACKEND_CALL(post.device(), relu_square_backward, dpost, post, dpre, write);
}

void bias_add_forward(const Tensor& x, const Tensor& bias, Tensor& y) {
  check_floating(x, "bias_add_forward: x");
  check_like(y, x, "bias_add_forward: y");
  check_shape(bias, {x.size(-1)}, "bias_add_forward: bias");
  check_dtype(bias, x.dtype(), "bias_add_forward: bias");
  check_same_device({&x, &bias}, "bias_add_forward");
  GPT_BACKEND_CALL(x.device(), bias_add_forward, x, bias, y);
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  check_floating(dy, "bias_backward: dy");
  check_shape(dbias, {dy.size(-1)}, "bias_backward: dbias");
  check_dtype(dbias, dy.dtype(), "bias_backward: dbias");
  check_same_device({&dy, &dbias}, "bias_backward");
  GPT_BACKEND_CALL(dy.device(), bias_backward, dy, dbias);
}

}  // namespace gpt
