#include "kernels/rotary.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/dispatch.h"

namespace gpt {

RotaryTables::RotaryTables(int64_t head_dim, int64_t positions) : head_dim_(head_dim), positions_(positions) {
  GPT_CHECK(head_dim >= 8 && head_dim % 4 == 0, "RotaryTables: head_dim must be a multiple of 4 and >= 8, got ",
            head_dim);
  GPT_CHECK(positions >= 1, "RotaryTables: positions must be >= 1, got ", positions);
  const int64_t f = frequency_count();
  omega_.resize(static_cast<size_t>(f));
  for (int64_t k = 0; k < f; ++k) {
    const float exponent = static_cast<float>(k) / static_cast<float>(f - 1);  // linspace(0, 1, F)
    omega_[static_cast<size_t>(k)] = std::pow(1.0f / 1024.0f, exponent);
  }
}

void RotaryTables::apply_yarn(int64_t old_window, int64_t new_window) {
  GPT_CHECK(old_window > 0 && new_window > 0, "RotaryTables::apply_yarn: windows must be > 0 tokens, got ", old_window,
            " -> ", new_window);
  const float ratio = static_cast<float>(old_window) / static_cast<float>(new_window);
  for (float& w : omega_) {
    const float r = static_cast<float>(old_window) * w / (2.0f * std::numbers::pi_v<float>);
    const float gamma = std::clamp((r - kYarnAlpha) / (kYarnBeta - kYarnAlpha), 0.0f, 1.0f);
    w *= ratio + gamma * (1.0f - ratio);
  }
  tau_ *= 1.0 + 0.2 * std::log(static_cast<double>(new_window) / static_cast<double>(old_window));
}

Tensor RotaryTables::build_table(bool cosine, DType dtype, Device device) const {
  GPT_CHECK(is_floating(dtype), "RotaryTables: table dtype must be f64, f32 or bf16, got ", dtype_name(dtype));
  const int64_t f = frequency_count();
  std::vector<double> values(static_cast<size_t>(positions_ * f));
  for (int64_t p = 0; p < positions_; ++p) {
    for (int64_t k = 0; k < f; ++k) {
      const float theta = static_cast<float>(p) * omega_[static_cast<size_t>(k)];
      values[static_cast<size_t>(p * f + k)] = cosine ? std::cos(theta) : std::sin(theta);
    }
  }
  return Tensor::from_doubles(values, {positions_, f}, dtype, device);
}

Tensor RotaryTables::cos_table(DType dtype, Device device) const { return build_table(true, dtype, device); }
Tensor RotaryTables::sin_table(DType dtype, Device device) const { return build_table(false, dtype, device); }

void check_rotary_operands(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout,
                           const Tensor& out, const char* op) {
  GPT_CHECK(x.ndim() == 3, op, ": x must be [T, H, D], got ", x.describe());
  GPT_CHECK(is_floating(x.dtype()), op, ": x must be f64, f32 or bf16, got ", x.describe());
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2);
  GPT_CHECK(D >= 8 && D % 4 == 0, op, ": head dim D must be a multiple of 4 and >= 8, got ", D);
  GPT_CHECK(cos.ndim() == 2 && cos.size(1) == D / 4, op, ": cos must be [P, D/4 = ", D / 4, "], got ", cos.describe());
  check_shape(sin, cos.shape(), op);
  check_dtype(cos, x.dtype(), op);
  check_dtype(sin, x.dtype(), op);
  check_shape(out, x.shape(), op);
  check_dtype(out, x.dtype(), op);
  if (layout == RotaryLayout::paired) {
    GPT_CHECK(H % 2 == 0, op, ": the paired layout needs an even head count, got H = ", H);
    GPT_CHECK(cos.size(0) >= 2 * T, op, ": the paired layout needs 2T = ", 2 * T, " table rows, table has ",
              cos.size(0));
  } else {
    GPT_CHECK(cos.size(0) >= T, op, ": the table needs T = ", T, " rows, has ", cos.size(0));
  }
  check_same_device({&x, &cos, &sin, &out}, op);
}

void rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y) {
  check_rotary_operands(x, cos, sin, layout, y, "rotary_forward");
  GPT_BACKEND_CALL(x.device(), rotary_forward, x, cos, sin, layout, y);
}

void rotary_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& dx) {
  check_rotary_operands(dy, cos, sin, layout, dx, "rotary_backward");
  GPT_BACKEND_CALL(dy.device(), rotary_backward, dy, cos, sin, layout, dx);
}

}  // namespace gpt
