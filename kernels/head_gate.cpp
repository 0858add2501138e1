#include "kernels/head_gate.h"

#include <initializer_list>

#include "kernels/dispatch.h"
#include "kernels/gate_lanes.h"

namespace gpt {

namespace {
void check_head_gate(const Tensor& y, const Tensor& gates, int64_t first_lane, const char* op) {
  GPT_CHECK(y.ndim() == 3, op, ": y must be [T, H, D], got ", y.describe());
  GPT_CHECK(is_floating(y.dtype()), op, ": y must be f64, f32 or bf16, got ", y.describe());
  check_gate_lanes(gates, y.size(0), y.size(1), first_lane, y.dtype(), op);
}
}  // namespace

void head_gate_forward(const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& y_out) {
  check_head_gate(y, gates, first_lane, "head_gate_forward");
  check_shape(y_out, y.shape(), "head_gate_forward: y_out");
  check_dtype(y_out, y.dtype(), "head_gate_forward: y_out");
  check_same_device({&y, &gates, &y_out}, "head_gate_forward");
  GPT_BACKEND_CALL(y.device(), head_gate_forward, y, gates, first_lane, y_out);
}

void head_gate_backward(const Tensor& dy_out, const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& dy,
                        Tensor& dgates, GradWrite write_dy) {
  check_head_gate(y, gates, first_lane, "head_gate_backward");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy_out, &dy}) {
    check_shape(*t, y.shape(), "head_gate_backward: dy_out/dy");
    check_dtype(*t, y.dtype(), "head_gate_backward: dy_out/dy");
  }
  check_shape(dgates, gates.shape(), "head_gate_backward: dgates");
  check_dtype(dgates, gates.dtype(), "head_gate_backward: dgates");
  check_same_device({&dy_out, &y, &gates, &dy, &dgates}, "head_gate_backward");
  GPT_BACKEND_CALL(y.device(), head_gate_backward, dy_out, y, gates, first_lane, dy, dgates, write_dy);
}

}  // namespace gpt
