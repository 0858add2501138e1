#include "tests/common/gradcheck.h"

#include <algorithm>
#include <cmath>

namespace gpt::testing {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double scale, Device device) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (double& v : values) v = normal(rng);
  return Tensor::from_doubles(values, shape, dtype, device);
}

std::vector<double> numeric_gradient_at(const std::function<double()>& f, Tensor& param,
                                        const std::vector<int64_t>& indices, double step) {
  GPT_CHECK(param.dtype() == DType::f64 && param.is_cpu(), "numeric_gradient needs an f64 CPU tensor, got ",
            param.describe());
  double* p = param.data<double>();
  std::vector<double> grad;
  grad.reserve(indices.size());
  for (int64_t i : indices) {
    const double saved = p[i];
    p[i] = saved + step;
    const double up = f();
    p[i] = saved - step;
    const double down = f();
    p[i] = saved;
    grad.push_back((up - down) / (2 * step));
  }
  return grad;
}

std::vector<double> numeric_gradient(const std::function<double()>& f, Tensor& param, double step) {
  std::vector<int64_t> all(static_cast<size_t>(param.numel()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return numeric_gradient_at(f, param, all, step);
}

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles();
  const std::vector<double> y = b.to_doubles();
  GPT_CHECK(x.size() == y.size(), "dot: sizes differ");
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

double max_relative_error(const std::vector<double>& a, const std::vector<double>& b, double floor) {
  GPT_CHECK(a.size() == b.size(), "max_relative_error: sizes differ (", a.size(), " vs ", b.size(), ")");
  double diff = 0, scale = floor;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

}  // namespace gpt::testing
