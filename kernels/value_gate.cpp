#include "kernels/value_gate.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {
void check_value_gate(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, const char* op) {
  GPT_CHECK(v.ndim() == 3, op, ": v must be [T, H, Dh], got ", v.describe());
  GPT_CHECK(is_floating(v.dtype()), op, ": v must be f64, f32 or bf16, got ", v.describe());
  GPT_CHECK(v.size(1) * v.size(2) >= kValueGateLanes, op, ": ve rows need at least ", kValueGateLanes, " values");
  check_shape(ve, v.shape(), op);
  GPT_CHECK(u.ndim() == 2 && u.size(0) == v.size(0) && u.size(1) >= kValueGateLanes, op, ": u must be [T = ", v.size(0),
            ", C >= ", kValueGateLanes, "], got ", u.describe());
  check_shape(gate, {v.size(1), 2 * kValueGateLanes}, op);
  for (const Tensor* t : {&u, &ve, &gate}) check_dtype(*t, v.dtype(), op);
}
}  // namespace

void value_gate_forward(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& v_out) {
  constexpr const char* op = "value_gate_forward";
  check_value_gate(v, u, ve, gate, op);
  check_shape(v_out, v.shape(), "value_gate_forward: v_out");
  check_dtype(v_out, v.dtype(), "value_gate_forward: v_out");
  check_same_device({&v, &u, &ve, &gate, &v_out}, op);
  GPT_BACKEND_CALL(v.device(), value_gate_forward, v, u, ve, gate, v_out);
}

void value_gate_backward(const Tensor& dv_out, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& dv,
                         Tensor& du, Tensor& dve, Tensor& dgate, GradWrite write_dv, GradWrite write_dve) {
  constexpr const char* op = "value_gate_backward";
  check_value_gate(dv_out, u, ve, gate, op);
  check_shape(dv, dv_out.shape(), "value_gate_backward: dv");
  check_shape(dve, dv_out.shape(), "value_gate_backward: dve");
  check_shape(du, u.shape(), "value_gate_backward: du");
  check_shape(dgate, gate.shape(), "value_gate_backward: dgate");
  for (const Tensor* t : {&dv, &du, &dve, &dgate}) check_dtype(*t, dv_out.dtype(), "value_gate_backward: grads");
  GPT_CHECK(dv.raw() != dv_out.raw(), "value_gate_backward: dv must not alias dv_out");
  check_same_device({&dv_out, &u, &ve, &gate, &dv, &du, &dve, &dgate}, op);
  GPT_BACKEND_CALL(dv_out.device(), value_gate_backward, dv_out, u, ve, gate, dv, du, dve, dgate, write_dv, write_dve);
}

}  // namespace gpt
