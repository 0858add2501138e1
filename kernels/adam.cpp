#include "kernels/adam.h"

#include <cmath>

#include "kernels/dispatch.h"

namespace gpt {

AdamCoefficients adam_coefficients(const AdamArgs& args) {
  GPT_CHECK(args.step >= 1, "adam_update: step counter must be >= 1, got ", args.step);
  GPT_CHECK(args.beta1 >= 0 && args.beta1 < 1 && args.beta2 >= 0 && args.beta2 < 1,
            "adam_update: betas must lie in [0, 1), got (", args.beta1, ", ", args.beta2, ")");
  const double k = static_cast<double>(args.step);
  AdamCoefficients c{};
  c.beta1 = args.beta1;
  c.beta2 = args.beta2;
  c.eps = args.eps;
  c.step_size = args.lr * std::sqrt(1.0 - std::pow(args.beta2, k)) / (1.0 - std::pow(args.beta1, k));
  c.decay = args.lr * args.lr * args.weight_decay;
  return c;
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamArgs& args) {
  GPT_CHECK(is_floating(param.dtype()), "adam_update: param must be f64, f32 or bf16, got ", param.describe());
  check_shape(grad, param.shape(), "adam_update: grad");
  check_dtype(grad, param.dtype(), "adam_update: grad");
  check_shape(m, param.shape(), "adam_update: m");
  check_shape(v, param.shape(), "adam_update: v");
  check_dtype(m, stat_dtype(param.dtype()), "adam_update: m");
  check_dtype(v, stat_dtype(param.dtype()), "adam_update: v");
  check_same_device({&param, &grad, &m, &v}, "adam_update");
  const AdamCoefficients c = adam_coefficients(args);
  GPT_BACKEND_CALL(param.device(), adam_update, param, grad, m, v, c);
}

}  // namespace gpt
