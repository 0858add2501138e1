// CPU reference of kernels/normuon.h (the elementwise and per-matrix parts; the products go through gemm).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/normuon_apply.h"
#include "kernels/normuon.h"

namespace gpt::cpu {

void normuon_momentum(const Tensor& grad, Tensor& momentum, Tensor& x, double mu) {
  const int64_t n = grad.numel();
  dispatch_floating(grad.dtype(), "normuon_momentum", [&]<typename T>() {
    using A = acc_t<T>;
    const T* g = grad.data<T>();
    A* m = momentum.data<A>();
    T* xp = x.data<T>();
    const A mu_a = static_cast<A>(mu), one_mu = static_cast<A>(1.0 - mu);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const A gi = load(g[i]);
      const A mi = mu_a * m[i] + one_mu * gi;
      m[i] = mi;
      xp[i] = store<T>(one_mu * gi + mu_a * mi);  // Nesterov
    }
  });
}

void normuon_normalize(Tensor& x) {
  const int64_t count = x.size(0), per = x.size(1) * x.size(2);
  dispatch_floating(x.dtype(), "normuon_normalize", [&]<typename T>() {
    using A = acc_t<T>;
    T* xp = x.data<T>();
    // One matrix per iteration; the sum runs serially within a matrix so the result is deterministic. It is
    // accumulated in double: a serial fp32 sum over millions of squares drifts by ~1e-4 relative, more than
    // the GPU's tree reduction, and the reference must be the more accurate of the two.
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < count; ++k) {
      T* xm = xp + k * per;
      double ss = 0;
      for (int64_t i = 0; i < per; ++i) ss += static_cast<double>(load(xm[i])) * static_cast<double>(load(xm[i]));
      const A norm = round_to<T>(static_cast<A>(std::sqrt(ss)));
      const A denom = round_to<T>(round_to<T>(norm * A(1.02)) + A(1e-6));
      for (int64_t i = 0; i < per; ++i) xm[i] = store<T>(load(xm[i]) / denom);
    }
  });
}

void normuon_apply(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa, const NorMuonArgs& args) {
  dispatch_floating(param.dtype(), "normuon_apply",
                    [&]<typename T>() { equalize_and_update<T>(x, second_moment, param, mantissa, args, nullptr); });
}

}  // namespace gpt::cpu
