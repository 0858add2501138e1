// CPU reference of kernels/rmsnorm.h.
#include <cmath>

#include "kernels/cpu/dispatch.h"
#include "kernels/rmsnorm.h"

namespace gpt::cpu {

void rmsnorm_forward(const Tensor& x, Tensor& y, Tensor& rstd, float eps) {
  const int64_t n = x.size(-1);
  const int64_t rows = x.numel() / n;
  dispatch_floating(x.dtype(), "rmsnorm_forward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    A* rp = rstd.data<A>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = xp + r * n;
      A ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += load(xr[i]) * load(xr[i]);
      const A inv = A(1) / std::sqrt(ss / A(n) + A(eps));
      rp[r] = inv;
      for (int64_t i = 0; i < n; ++i) yp[r * n + i] = store<T>(load(xr[i]) * inv);
    }
  });
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, Tensor& dx, GradWrite write) {
  const bool add = write == GradWrite::add;
  const int64_t n = x.size(-1);
  const int64_t rows = x.numel() / n;
  dispatch_floating(x.dtype(), "rmsnorm_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    const T* dyp = dy.data<T>();
    T* dxp = dx.data<T>();
    const A* rp = rstd.data<A>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = xp + r * n;
      const T* dyr = dyp + r * n;
      const A inv = rp[r];
      A dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += load(dyr[i]) * load(xr[i]);
      // d/dx_i of x_i·inv: inv·dy_i − x_i·inv³·(Σ dy·x)/n
      const A c = inv * inv * inv * dot / A(n);
      for (int64_t i = 0; i < n; ++i) {
        dxp[r * n + i] = store<T>((add ? load(dxp[r * n + i]) : A(0)) + inv * load(dyr[i]) - c * load(xr[i]));
      }
    }
  });
}

}  // namespace gpt::cpu
