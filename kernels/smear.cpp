#include "kernels/smear.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_inputs(const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig, const char* op) {
  GPT_CHECK(e.ndim() == 2 && e.size(1) >= kSmearGateWidth, op, ": e must be [T, d] with d >= ", kSmearGateWidth,
            ", got ", e.describe());
  GPT_CHECK(is_floating(e.dtype()), op, ": e must be floating, got ", e.describe());
  check_shape(w, {1, kSmearGateWidth}, op);
  check_dtype(w, e.dtype(), op);
  check_shape(lambda, {1}, op);
  check_dtype(lambda, stat_dtype(e.dtype()), op);
  check_shape(sig, {e.size(0)}, op);
  check_dtype(sig, stat_dtype(e.dtype()), op);
  check_same_device({&e, &w, &lambda, &sig}, op);
}

}  // namespace

void smear_forward(const Tensor& e, const Tensor& w, const Tensor& lambda, Tensor& out, Tensor& sig) {
  check_inputs(e, w, lambda, sig, "smear_forward");
  check_shape(out, e.shape(), "smear_forward: out");
  check_dtype(out, e.dtype(), "smear_forward: out");
  GPT_CHECK(out.raw() != e.raw(), "smear_forward: out must not alias e (row t reads e_{t-1})");
  check_same_device({&e, &out}, "smear_forward");
  GPT_BACKEND_CALL(e.device(), smear_forward, e, w, lambda, out, sig);
}

void smear_backward(const Tensor& dout, const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig,
                    Tensor& de, Tensor& dw, Tensor& dlambda) {
  check_inputs(e, w, lambda, sig, "smear_backward");
  check_shape(dout, e.shape(), "smear_backward: dout");
  check_dtype(dout, e.dtype(), "smear_backward: dout");
  check_shape(de, e.shape(), "smear_backward: de");
  check_dtype(de, e.dtype(), "smear_backward: de");
  GPT_CHECK(de.raw() != dout.raw(), "smear_backward: de must not alias dout");
  check_shape(dw, w.shape(), "smear_backward: dw");
  check_dtype(dw, w.dtype(), "smear_backward: dw");
  check_shape(dlambda, {1}, "smear_backward: dlambda");
  check_dtype(dlambda, lambda.dtype(), "smear_backward: dlambda");
  check_same_device({&dout, &e, &de, &dw, &dlambda}, "smear_backward");
  GPT_BACKEND_CALL(e.device(), smear_backward, dout, e, w, lambda, sig, de, dw, dlambda);
}

}  // namespace gpt
