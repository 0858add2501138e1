// CPU reference of kernels/adam.h.
#include <cmath>

#include "kernels/adam.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamCoefficients& c) {
  const int64_t n = param.numel();
  dispatch_floating(param.dtype(), "adam_update", [&]<typename T>() {
    using A = acc_t<T>;
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    A* mp = m.data<A>();
    A* vp = v.data<A>();
    const A b1 = static_cast<A>(c.beta1), b2 = static_cast<A>(c.beta2);
    const A one_b1 = static_cast<A>(1.0 - c.beta1), one_b2 = static_cast<A>(1.0 - c.beta2);
    const A eps = static_cast<A>(c.eps), step = static_cast<A>(c.step_size), decay = static_cast<A>(c.decay);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const A gi = load(g[i]);
      const A mi = b1 * mp[i] + one_b1 * gi;
      const A vi = b2 * vp[i] + one_b2 * gi * gi;
      mp[i] = mi;
      vp[i] = vi;
      const A pi = load(p[i]);
      A u = mi / (std::sqrt(vi) + eps) * step;
      if (u * pi > A(0)) u += decay * pi;  // cautious decay: only where the update already shrinks |p|
      p[i] = store<T>(pi - u);
    }
  });
}

}  // namespace gpt::cpu
