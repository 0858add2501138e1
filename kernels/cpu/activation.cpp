// CPU reference of kernels/activation.h.
#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/activation.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

namespace {

constexpr int64_t kParallelMin = 1 << 15;

// Applies y[i] = f(inputs at i) elementwise over n elements, rounding once into T.
template <typename F>
void pointwise(int64_t n, F&& f) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename A>
A normal_cdf(A x) {
  return A(0.5) * (A(1) + std::erf(x * A(std::numbers::sqrt2 / 2)));
}
template <typename A>
A normal_pdf(A x) {
  return A(std::numbers::inv_sqrtpi * std::numbers::sqrt2 / 2) * std::exp(A(-0.5) * x * x);
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  dispatch_floating(x.dtype(), "gelu_forward", [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    pointwise(x.numel(), [&](int64_t i) {
      const auto v = load(xp[i]);
      yp[i] = store<T>(v * normal_cdf(v));
    });
  });
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  dispatch_floating(x.dtype(), "gelu_backward", [&]<typename T>() {
    const T* xp = x.data<T>();
    const T* gp = dy.data<T>();
    T* dp = dx.data<T>();
    pointwise(x.numel(), [&](int64_t i) {
      const auto v = load(xp[i]);
      dp[i] = store<T>(load(dp[i]) + load(gp[i]) * (normal_cdf(v) + v * normal_pdf(v)));
    });
  });
}

void relu_square_forward(const Tensor& pre, Tensor& post) {
  dispatch_floating(pre.dtype(), "relu_square_forward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* xp = pre.data<T>();
    T* yp = post.data<T>();
    pointwise(pre.numel(), [&](int64_t i) {
      const A r = std::max(load(xp[i]), A(0));
      yp[i] = store<T>(r * r);
    });
  });
}

void relu_square_backward(const Tensor& dpost, const Tensor& post, Tensor& dpre, GradWrite write) {
  dispatch_floating(post.dtype(), "relu_square_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* pp = post.data<T>();
    const T* gp = dpost.data<T>();
    T* dp = dpre.data<T>();
    const bool add = write == GradWrite::add;
    pointwise(post.numel(), [&](int64_t i) {
      const A grad = A(2) * std::sqrt(load(pp[i])) * load(gp[i]);  // read before dp[i] is written (dp may be gp)
      dp[i] = store<T>(add ? load(dp[i]) + grad : grad);
    });
  });
}

void bias_add_forward(const Tensor& x, const Tensor& bias, Tensor& y) {
  const int64_t n = x.size(-1), rows = x.numel() / n;
  dispatch_floating(x.dtype(), "bias_add_forward", [&]<typename T>() {
    const T* xp = x.data<T>();
    const T* bp = bias.data<T>();
    T* yp = y.data<T>();
    pointwise(rows, [&](int64_t r) {
      for (int64_t c = 0; c < n; ++c) yp[r * n + c] = store<T>(load(xp[r * n + c]) + load(bp[c]));
    });
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  const int64_t n = dy.size(-1), rows = dy.numel() / n;
  dispatch_floating(dy.dtype(), "bias_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* gp = dy.data<T>();
    T* bp = dbias.data<T>();
    // One thread per column, rows summed in order: deterministic for any thread count.
#pragma omp parallel for schedule(static) if (rows * n > kParallelMin)
    for (int64_t c = 0; c < n; ++c) {
      A sum = 0;
      for (int64_t r = 0; r < rows; ++r) sum += load(gp[r * n + c]);
      bp[c] = store<T>(load(bp[c]) + sum);
    }
  });
}

}  // namespace gpt::cpu
