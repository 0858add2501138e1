// CPU reference of kernels/smear.h.
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/scalars.h"
#include "kernels/smear.h"

namespace gpt::cpu {

void smear_forward(const Tensor& e, const Tensor& w, const Tensor& lambda, Tensor& out, Tensor& sig) {
  const int64_t rows = e.size(0), d = e.size(1);
  dispatch_floating(e.dtype(), "smear_forward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* ep = e.data<T>();
    const T* wp = w.data<T>();
    T* op = out.data<T>();
    A* sp = sig.data<A>();
    const A lam = static_cast<A>(scalar_for<T>(read_scalar(lambda)));
    if (rows > 0) {
      sp[0] = 0;
      for (int64_t c = 0; c < d; ++c) op[c] = ep[c];
    }
#pragma omp parallel for schedule(static) if (rows * d > (1 << 15))
    for (int64_t t = 1; t < rows; ++t) {
      const T* et = ep + t * d;
      const T* prev = et - d;
      A z = 0;
      for (int64_t c = 0; c < kSmearGateWidth; ++c) z += load(wp[c]) * load(et[c]);
      const A s = static_cast<A>(sigmoid(static_cast<double>(load(store<T>(z)))));
      sp[t] = s;
      const A g = lam * s;
      for (int64_t c = 0; c < d; ++c) op[t * d + c] = store<T>(load(et[c]) + g * load(prev[c]));
    }
  });
}

void smear_backward(const Tensor& dout, const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig,
                    Tensor& de, Tensor& dw, Tensor& dlambda) {
  const int64_t rows = e.size(0), d = e.size(1);
  dispatch_floating(e.dtype(), "smear_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* ep = e.data<T>();
    const T* gp = dout.data<T>();
    const T* wp = w.data<T>();
    const A* sp = sig.data<A>();
    T* dep = de.data<T>();
    T* dwp = dw.data<T>();
    const A lam = static_cast<A>(scalar_for<T>(read_scalar(lambda)));
    // Per token: dg_t (gate gradient) and dz_t (gate logit gradient); index 0 unused.
    std::vector<A> dg(static_cast<size_t>(rows), A(0)), dz(static_cast<size_t>(rows), A(0));
#pragma omp parallel for schedule(static) if (rows * d > (1 << 15))
    for (int64_t t = 1; t < rows; ++t) {
      A dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += load(gp[t * d + c]) * load(ep[(t - 1) * d + c]);
      dg[t] = dot;
      dz[t] = dot * lam * sp[t] * (A(1) - sp[t]);
    }
#pragma omp parallel for schedule(static) if (rows * d > (1 << 15))
    for (int64_t t = 0; t < rows; ++t) {
      const A g_next = t + 1 < rows ? lam * sp[t + 1] : A(0);
      for (int64_t c = 0; c < d; ++c) {
        A v = load(gp[t * d + c]);
        if (t + 1 < rows) v += g_next * load(gp[(t + 1) * d + c]);
        if (t >= 1 && c < kSmearGateWidth) v += dz[t] * load(wp[c]);
        dep[t * d + c] = store<T>(load(dep[t * d + c]) + v);
      }
    }
    double dlam = 0;
    std::vector<A> dw_sum(kSmearGateWidth, A(0));
    for (int64_t t = 1; t < rows; ++t) {
      dlam += static_cast<double>(dg[t] * sp[t]);
      for (int64_t c = 0; c < kSmearGateWidth; ++c) dw_sum[c] += dz[t] * load(ep[t * d + c]);
    }
    for (int64_t c = 0; c < kSmearGateWidth; ++c) dwp[c] = store<T>(load(dwp[c]) + dw_sum[c]);
    add_to_scalar(dlambda, dlam);
  });
}

}  // namespace gpt::cpu
