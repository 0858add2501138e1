// CPU reference of kernels/anvil.h (the elementwise and per-matrix parts; the products go through gemm).
#include <cmath>

#include "kernels/anvil.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/normuon_apply.h"

namespace gpt::cpu {

void anvil_momentum(const Tensor& grad, Tensor& fast_rail, Tensor& slow_rail, Tensor& x, const AnvilRails& rails) {
  const int64_t n = grad.numel();
  dispatch_floating(grad.dtype(), "anvil_momentum", [&]<typename T>() {
    using A = acc_t<T>;
    const T* g = grad.data<T>();
    A* vf = fast_rail.data<A>();
    A* vs = slow_rail.data<A>();
    T* xp = x.data<T>();
    const A bf = static_cast<A>(rails.fast_beta), one_bf = static_cast<A>(1.0 - rails.fast_beta);
    const A bs = static_cast<A>(kAnvilSlowBeta), one_bs = static_cast<A>(1.0 - kAnvilSlowBeta);
    const A w = static_cast<A>(rails.fast_weight), one_w = static_cast<A>(1.0 - rails.fast_weight);
    const A mu = static_cast<A>(rails.rail), one_mu = static_cast<A>(1.0 - rails.rail);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const A gi = load(g[i]);
      const A f = bf * vf[i] + one_bf * gi;
      const A s = bs * vs[i] + one_bs * gi;
      vf[i] = f;
      vs[i] = s;
      const A blend = w * f + one_w * s;
      xp[i] = store<T>(one_mu * gi + mu * blend);  // Nesterov on the blended rails
    }
  });
}

void anvil_scale_by_trace(Tensor& x, Tensor& gram) {
  const int64_t count = x.size(0), per = x.size(1) * x.size(2);
  const int64_t k = gram.size(1);
  dispatch_floating(x.dtype(), "anvil_scale_by_trace", [&]<typename T>() {
    using A = acc_t<T>;
    T* xp = x.data<T>();
    T* ap = gram.data<T>();
    // One matrix per iteration; the trace is a serial sum (deterministic) in double, as NorMuon's norm.
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < count; ++m) {
      T* xm = xp + m * per;
      T* am = ap + m * k * k;
      double trace = 0;
      for (int64_t i = 0; i < k; ++i) trace += static_cast<double>(load(am[i * k + i]));
      const A t = round_to<T>(static_cast<A>(trace));
      const A root = round_to<T>(std::sqrt(t));
      const A delta = round_to<T>(round_to<T>(root * static_cast<A>(kAnvilTraceMargin)) + A(1e-6));
      const A delta_sq = round_to<T>(delta * delta);
      for (int64_t i = 0; i < per; ++i) xm[i] = store<T>(load(xm[i]) / delta);
      for (int64_t i = 0; i < k * k; ++i) am[i] = store<T>(load(am[i]) / delta_sq);
    }
  });
}

void anvil_apply(const Tensor& x, Tensor& second_moment, const Tensor& slow_rail, Tensor& param, Tensor& mantissa,
                 const AnvilArgs& args) {
  const NorMuonArgs shared = anvil_equalizer_args(args);  // §4.3's equalizer and update, the slow rail as gate
  dispatch_floating(param.dtype(), "anvil_apply", [&]<typename T>() {
    equalize_and_update<T>(x, second_moment, param, mantissa, shared, &slow_rail);
  });
}

}  // namespace gpt::cpu
