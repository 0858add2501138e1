#include "kernels/xsa.h"

#include <initializer_list>

#include "kernels/dispatch.h"
#include "kernels/gate_lanes.h"

namespace gpt {

namespace {
void check_xsa(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, const char* op) {
  GPT_CHECK(y.ndim() == 3, op, ": y must be [T, H, D], got ", y.describe());
  GPT_CHECK(is_floating(y.dtype()), op, ": y must be f64, f32 or bf16, got ", y.describe());
  check_shape(v, y.shape(), op);
  check_dtype(v, y.dtype(), op);
  check_gate_lanes(gates, y.size(0), y.size(1), first_lane, y.dtype(), op);
}
}  // namespace

void xsa_forward(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, Tensor& y_out) {
  constexpr const char* op = "xsa_forward";
  check_xsa(y, v, gates, first_lane, op);
  check_shape(y_out, y.shape(), "xsa_forward: y_out");
  check_dtype(y_out, y.dtype(), "xsa_forward: y_out");
  check_same_device({&y, &v, &gates, &y_out}, op);
  GPT_BACKEND_CALL(y.device(), xsa_forward, y, v, gates, first_lane, y_out);
}

void xsa_backward(const Tensor& dy_out, const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane,
                  Tensor& dy, Tensor& dv, Tensor& dgates, GradWrite write_dy, GradWrite write_dv) {
  constexpr const char* op = "xsa_backward";
  check_xsa(y, v, gates, first_lane, op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy_out, &dy, &dv}) {
    check_shape(*t, y.shape(), "xsa_backward: dy_out/dy/dv");
    check_dtype(*t, y.dtype(), "xsa_backward: dy_out/dy/dv");
  }
  check_shape(dgates, gates.shape(), "xsa_backward: dgates");
  check_dtype(dgates, gates.dtype(), "xsa_backward: dgates");
  check_same_device({&dy_out, &y, &v, &gates, &dy, &dv, &dgates}, op);
  GPT_BACKEND_CALL(y.device(), xsa_backward, dy_out, y, v, gates, first_lane, dy, dv, dgates, write_dy, write_dv);
}

}  // namespace gpt
