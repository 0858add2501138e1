#include "kernels/rmsnorm.h"

#include <string>

#include "kernels/dispatch.h"

namespace gpt {

namespace {
int64_t rows_of(const Tensor& x) { return x.numel() / x.size(-1); }
}  // namespace

void check_rmsnorm_outputs(const Tensor& x, const Tensor& y, const Tensor& rstd, const char* op) {
  const std::string what(op);
  GPT_CHECK(x.ndim() >= 1, op, ": x must have at least one dimension");
  check_shape(y, x.shape(), (what + ": y").c_str());
  check_dtype(y, x.dtype(), (what + ": y").c_str());
  check_shape(rstd, {rows_of(x)}, (what + ": rstd").c_str());
  check_dtype(rstd, stat_dtype(x.dtype()), (what + ": rstd").c_str());
  check_same_device({&x, &y, &rstd}, op);
}

void rmsnorm_forward(const Tensor& x, Tensor& y, Tensor& rstd, float eps) {
  check_rmsnorm_outputs(x, y, rstd, "rmsnorm_forward");
  GPT_BACKEND_CALL(x.device(), rmsnorm_forward, x, y, rstd, eps);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, Tensor& dx, GradWrite write) {
  check_shape(dy, x.shape(), "rmsnorm_backward: dy");
  check_shape(dx, x.shape(), "rmsnorm_backward: dx");
  check_dtype(dy, x.dtype(), "rmsnorm_backward: dy");
  check_dtype(dx, x.dtype(), "rmsnorm_backward: dx");
  check_shape(rstd, {rows_of(x)}, "rmsnorm_backward: rstd");
  check_same_device({&dy, &x, &rstd, &dx}, "rmsnorm_backward");
  GPT_BACKEND_CALL(x.device(), rmsnorm_backward, dy, x, rstd, dx, write);
}

}  // namespace gpt
