// CPU reference of kernels/normuon.h (the elementwise and per-matrix parts; the products go through gemm).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/normuon.h"

namespace gpt::cpu {

namespace {
// Rounds to the storage type T and back: the W(·) of the header (identity for float and double).
template <typename T, typename A>
A round_to(A v) {
  return load(store<T>(v));
}
}  // namespace

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
  const int64_t count = param.size(0), rows = param.size(1), cols = param.size(2);
  const bool per_row = rows >= cols;
  const int64_t stats = per_row ? rows : cols;  // length of r and S per matrix
  const int64_t q = per_row ? cols : rows;      // entries averaged into each statistic
  const double shape_mult = std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
  dispatch_floating(param.dtype(), "normuon_apply", [&]<typename T>() {
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    A* sp = second_moment.data<A>();
    T* pp = param.data<T>();
    uint16_t* mp = nullptr;
    if constexpr (std::is_same_v<T, bf16>) mp = mantissa.data<uint16_t>();
    const A beta2 = static_cast<A>(args.beta2), one_beta2 = static_cast<A>(1.0 - args.beta2);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < count; ++k) {
      const T* xm = xp + k * rows * cols;
      A* s = sp + k * stats;
      std::vector<A> r(static_cast<size_t>(stats), A(0));
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const A v = load(xm[i * cols + j]);
          r[static_cast<size_t>(per_row ? i : j)] += v * v;
        }
      }
      A sum_r = 0, sum_rg2 = 0;
      std::vector<A> g(static_cast<size_t>(stats));
      for (int64_t t = 0; t < stats; ++t) {
        A& rt = r[static_cast<size_t>(t)];
        rt /= static_cast<A>(q);
        sum_r += rt;
        s[t] = beta2 * s[t] + one_beta2 * rt;
        const A gt = A(1) / std::sqrt(std::max(s[t], A(1e-10)));
        g[static_cast<size_t>(t)] = gt;
        sum_rg2 += rt * gt * gt;
      }
      const A nu = std::sqrt(static_cast<A>(q) * sum_r);
      const A nu_new = std::sqrt(static_cast<A>(q) * sum_rg2);
      const A ratio = nu / std::max(nu_new, A(1e-10));
      for (int64_t t = 0; t < stats; ++t) g[static_cast<size_t>(t)] = round_to<T>(g[static_cast<size_t>(t)] * ratio);

      const double mat_mult = ((args.first_matrix + k) % 2 == 1) ? args.odd_matrix_lr_mul : 1.0;
      const double lr_eff_d = args.lr * shape_mult * mat_mult;
      const A lr_eff = static_cast<A>(lr_eff_d);
      const A decay = static_cast<A>(args.weight_decay * args.lr * lr_eff_d);
      T* pm = pp + k * rows * cols;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t e = i * cols + j;
          const A u = round_to<T>(load(xm[e]) * g[static_cast<size_t>(per_row ? i : j)]);
          A p;
          if constexpr (std::is_same_v<T, bf16>) {
            p = join_master(pm[e], mp[k * rows * cols + e]);
          } else {
            p = pm[e];
          }
          const A decayed = (u * p >= A(0)) ? p - p * decay : p;  // cautious decay: [U⊙P ≥ 0]
          const A updated = decayed - u * lr_eff;
          if constexpr (std::is_same_v<T, bf16>) {
            split_master(updated, pm[e], mp[k * rows * cols + e]);
          } else {
            pm[e] = updated;
          }
        }
      }
    }
  });
}

}  // namespace gpt::cpu
