#include "kernels/key_offset.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {
void check_key_offset(const Tensor& in, const Tensor& out, const char* op) {
  GPT_CHECK(in.ndim() == 3 && in.size(2) % 2 == 0, op, ": expected [T, H, D] with even D, got ", in.describe());
  GPT_CHECK(is_floating(in.dtype()), op, ": expected f64, f32 or bf16, got ", in.describe());
  check_shape(out, in.shape(), op);
  check_dtype(out, in.dtype(), op);
  check_same_device({&in, &out}, op);
}
}  // namespace

void key_offset_forward(const Tensor& k, Tensor& y) {
  check_key_offset(k, y, "key_offset_forward");
  GPT_CHECK(y.raw() != k.raw(), "key_offset_forward: y must not alias k");
  GPT_BACKEND_CALL(k.device(), key_offset_forward, k, y);
}

void key_offset_backward(const Tensor& dy, Tensor& dk, GradWrite write) {
  check_key_offset(dy, dk, "key_offset_backward");
  GPT_BACKEND_CALL(dy.device(), key_offset_backward, dy, dk, write);
}

}  // namespace gpt
