// Adam with cautious decay (RECIPE §4.5) against updates computed by hand in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/adam.h"
#include "base/check.h"

namespace gpt {
namespace {

struct RefAdam {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g, const AdamArgs& a) {
    const double k = static_cast<double>(a.step);
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = a.beta1 * m[i] + (1 - a.beta1) * g[i];
      v[i] = a.beta2 * v[i] + (1 - a.beta2) * g[i] * g[i];
      double u =
          m[i] / (std::sqrt(v[i]) + a.eps) * (a.lr * std::sqrt(1 - std::pow(a.beta2, k)) / (1 - std::pow(a.beta1, k)));
      if (u * p[i] > 0) u += a.lr * a.lr * a.weight_decay * p[i];
      p[i] -= u;
    }
  }
};

AdamArgs args_for(int64_t step) {
  AdamArgs a;
  a.lr = 0.008 * 1.52 * 75;  // a large lr_e so the decay term matters
  a.beta1 = 0.75;
  a.beta2 = 0.95;
  a.eps = 1e-10;
  a.weight_decay = 0.005 * 5;
  a.step = step;
  return a;
}

TEST(Adam, FirstStepClosedForm) {
  // k = 1, g = ±1: m/(sqrt(v)+eps) = ±(1−β1)/(sqrt(1−β2)+eps), times lr·sqrt(1−β2)/(1−β1) = ±lr·r/(r+eps).
  const AdamArgs a = args_for(1);
  Tensor p = Tensor::from_doubles(std::vector<double>{1.0, -1.0, 2.0, 0.5}, {4}, DType::f64);
  Tensor g = Tensor::from_doubles(std::vector<double>{1.0, 1.0, -1.0, 0.0}, {4}, DType::f64);
  Tensor m = Tensor::zeros({4}, DType::f64), v = Tensor::zeros({4}, DType::f64);
  adam_update(p, g, m, v, a);
  const auto out = p.to_doubles();
  const double r = std::sqrt(1 - a.beta2);
  const double lr = a.lr * r / (r + a.eps), d = a.lr * a.lr * a.weight_decay;
  EXPECT_NEAR(out[0], 1.0 - lr - d * 1.0, 1e-12);  // u·p > 0: decay on
  EXPECT_NEAR(out[1], -1.0 - lr, 1e-12);           // u·p < 0: decay off
  EXPECT_NEAR(out[2], 2.0 + lr, 1e-12);            // u < 0, p > 0: decay off
  EXPECT_DOUBLE_EQ(out[3], 0.5);                   // zero gradient: u = 0, mask off, unchanged
}

TEST(Adam, F64MatchesHandComputedOverSteps) {
  const std::vector<double> p0{0.3, -0.2, 0.05, -0.7, 1.1, 0.0};
  RefAdam ref{p0, std::vector<double>(6, 0.0), std::vector<double>(6, 0.0)};
  Tensor p = Tensor::from_doubles(p0, {2, 3}, DType::f64);
  Tensor m = Tensor::zeros({2, 3}, DType::f64), v = Tensor::zeros({2, 3}, DType::f64);
  const std::vector<std::vector<double>> grads{
      {0.1, -0.3, 0.02, 0.5, -0.4, 0.2}, {-0.2, -0.1, 0.3, 0.5, 0.1, -0.2}, {0.0, 0.4, -0.3, -0.1, 0.2, 0.3}};
  for (int64_t k = 1; k <= 3; ++k) {
    const auto& gv = grads[static_cast<size_t>(k - 1)];
    Tensor g = Tensor::from_doubles(gv, {2, 3}, DType::f64);
    adam_update(p, g, m, v, args_for(k));
    ref.step(gv, args_for(k));
  }
  const auto pp = p.to_doubles(), mm = m.to_doubles(), vv = v.to_doubles();
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(pp[i], ref.p[i], 1e-14) << i;
    EXPECT_NEAR(mm[i], ref.m[i], 1e-15) << i;
    EXPECT_NEAR(vv[i], ref.v[i], 1e-15) << i;
  }
}

TEST(Adam, F32AndBf16Paths) {
  const std::vector<double> p0{0.3, -0.2, 0.05, -0.7, 1.1, 0.0, 2.5, -3.0};
  const std::vector<double> g0{0.1, -0.3, 0.02, 0.5, -0.4, 0.2, 1e-3, -2.0};
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor p = Tensor::from_doubles(p0, {8}, dt);
    const std::vector<double> start = p.to_doubles();  // bf16-rounded start values
    Tensor g = Tensor::from_doubles(g0, {8}, dt);
    const std::vector<double> gr = g.to_doubles();
    RefAdam ref{start, std::vector<double>(8, 0.0), std::vector<double>(8, 0.0)};
    Tensor m = Tensor::zeros({8}, DType::f32), v = Tensor::zeros({8}, DType::f32);
    for (int64_t k = 1; k <= 2; ++k) {
      adam_update(p, g, m, v, args_for(k));
      ref.step(gr, args_for(k));
      // bf16 params are rounded after every update (no mantissa): mirror that in the reference.
      if (dt == DType::bf16) {
        for (double& x : ref.p) x = static_cast<double>(round_bf16(static_cast<float>(x)));
      }
    }
    const auto pp = p.to_doubles();
    for (size_t i = 0; i < 8; ++i) {
      const double tol =
          dt == DType::f32 ? 1e-6 * (1 + std::fabs(ref.p[i])) : std::ldexp(std::fabs(ref.p[i]), -8) + 1e-30;
      EXPECT_NEAR(pp[i], ref.p[i], tol) << dtype_name(dt) << " element " << i;
    }
  }
}

TEST(Adam, RejectsMismatchedState) {
  Tensor p = Tensor::zeros({4}, DType::bf16), g = Tensor::zeros({4}, DType::bf16);
  Tensor m = Tensor::zeros({4}, DType::bf16), v = Tensor::zeros({4}, DType::f32);
  try {
    adam_update(p, g, m, v, args_for(1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adam_update: m"), std::string::npos) << e.what();
  }
  Tensor m32 = Tensor::zeros({4}, DType::f32), g3 = Tensor::zeros({3}, DType::bf16);
  EXPECT_THROW(adam_update(p, g3, m32, v, args_for(1)), Error);
  EXPECT_THROW(adam_update(p, g, m32, v, args_for(0)), Error);
}

}  // namespace
}  // namespace gpt
