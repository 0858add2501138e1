// CPU reference of kernels/tail_average.h.
#include "kernels/tail_average.h"

#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed) {
  const int64_t n = w.numel();
  dispatch_floating(w.dtype(), "tail_accumulate", [&]<typename T>() {
    using A = acc_t<T>;
    const T* wp = w.data<T>();
    A* ap = acc.data<A>();
    const A r = static_cast<A>(rate);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) ap[i] = seed ? load(wp[i]) : ap[i] + r * (load(wp[i]) - ap[i]);
  });
}

void tail_ship(Tensor& w, const Tensor& acc, double factor) {
  const int64_t n = w.numel();
  dispatch_floating(w.dtype(), "tail_ship", [&]<typename T>() {
    using A = acc_t<T>;
    T* wp = w.data<T>();
    const A* ap = acc.data<A>();
    const A f = static_cast<A>(factor);
    const bool replace = factor == 1.0;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) wp[i] = store<T>(replace ? ap[i] : load(wp[i]) + f * (ap[i] - load(wp[i])));
  });
}

void sum_of_squares(const Tensor& w, double& sum) {
  const int64_t n = w.numel();
  sum = 0;
  dispatch_floating(w.dtype(), "sum_of_squares", [&]<typename T>() {
    const T* wp = w.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(load(wp[i]));
      sum += x * x;
    }
  });
}

void scale_in_place(Tensor& w, double factor) {
  const int64_t n = w.numel();
  dispatch_floating(w.dtype(), "scale_in_place", [&]<typename T>() {
    using A = acc_t<T>;
    T* wp = w.data<T>();
    const A f = static_cast<A>(factor);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) wp[i] = store<T>(load(wp[i]) * f);
  });
}

}  // namespace gpt::cpu
