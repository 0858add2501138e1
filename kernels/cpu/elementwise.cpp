// CPU reference of kernels/elementwise.h.
#include <algorithm>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/scalars.h"
#include "kernels/elementwise.h"

namespace gpt::cpu {

namespace {

// A term's coefficient resolved for one call: S, f'(s), and typed access to the lanes.
template <typename T>
struct ResolvedCoef {
  double s = 1.0;      // S (rounded as out's dtype requires)
  double ds_ds = 0.0;  // f'(s) for the scalar gradient
  const T* lanes = nullptr;
  int64_t lane_stride = 0, lane = 0, groups = 1;
  double offset = 0.0;

  // L for block g of row t.
  double lane_value(int64_t t, int64_t g) const {
    return lanes == nullptr ? 1.0 : offset + static_cast<double>(load(lanes[t * lane_stride + lane + g]));
  }
};

template <typename T>
ResolvedCoef<T> resolve(const Coef& c) {
  ResolvedCoef<T> r;
  if (c.scalar.defined()) {
    const double s = read_scalar(c.scalar);
    if (c.fn == ScalarFn::sigmoid) {
      const double sg = sigmoid(s);
      r.s = scalar_for<T>(sg);
      r.ds_ds = sg * (1.0 - sg);
    } else if (c.fn == ScalarFn::unrounded) {
      r.s = s;
      r.ds_ds = 1.0;
    } else {
      r.s = scalar_for<T>(s);
      r.ds_ds = 1.0;
    }
  }
  if (c.lanes.defined()) {
    r.lanes = c.lanes.data<T>();
    r.lane_stride = c.lanes.size(1);
    r.lane = c.lane;
    r.groups = c.groups;
    r.offset = c.offset;
  }
  return r;
}

int64_t parallel_threshold() { return 1 << 15; }

}  // namespace

void mix_forward(std::span<const MixTerm> terms, Tensor& out) {
  const int64_t rows = out.size(0);
  const int64_t n = out.numel() / rows;
  dispatch_floating(out.dtype(), "mix_forward", [&]<typename T>() {
    using A = acc_t<T>;
    std::vector<ResolvedCoef<T>> coefs;
    std::vector<const T*> xs;
    for (const MixTerm& term : terms) {
      coefs.push_back(resolve<T>(term.coef));
      xs.push_back(term.x.data<T>());
    }
    T* op = out.data<T>();
#pragma omp parallel if (rows * n > parallel_threshold())
    {
      std::vector<A> acc(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < rows; ++t) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (size_t k = 0; k < coefs.size(); ++k) {
          const ResolvedCoef<T>& c = coefs[k];
          const T* x = xs[k] + t * n;
          const int64_t block = n / c.groups;
          for (int64_t g = 0; g < c.groups; ++g) {
            const A coef = static_cast<A>(c.s * c.lane_value(t, g));
            for (int64_t i = g * block; i < (g + 1) * block; ++i) acc[i] += coef * load(x[i]);
          }
        }
        for (int64_t i = 0; i < n; ++i) op[t * n + i] = store<T>(acc[i]);
      }
    }
  });
}

void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  const int64_t rows = dout.size(0);
  const int64_t n = dout.numel() / rows;
  const size_t n_terms = terms.size();
  dispatch_floating(dout.dtype(), "mix_backward", [&]<typename T>() {
    using A = acc_t<T>;
    std::vector<ResolvedCoef<T>> coefs;
    for (const MixTerm& term : terms) coefs.push_back(resolve<T>(term.coef));
    std::vector<const T*> xs(n_terms);
    std::vector<T*> dxs(n_terms, nullptr), dlanes(n_terms, nullptr);
    for (size_t k = 0; k < n_terms; ++k) {
      xs[k] = terms[k].x.data<T>();
      Tensor dx = grads[k].dx, dl = grads[k].dlanes;  // handles share the callers' storage
      if (dx.defined()) dxs[k] = dx.data<T>();
      if (dl.defined()) dlanes[k] = dl.data<T>();
    }
    // Per (term, row) partial sums of the scalar gradient, reduced in row order afterwards.
    std::vector<double> scalar_partial(n_terms * static_cast<size_t>(rows), 0.0);
    const T* dp = dout.data<T>();
#pragma omp parallel if (rows * n > parallel_threshold())
    {
      std::vector<A> d(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t i = 0; i < n; ++i) d[i] = load(dp[t * n + i]);  // read before any dx (maybe dout) is written
        for (size_t k = 0; k < n_terms; ++k) {
          const ResolvedCoef<T>& c = coefs[k];
          const T* x = xs[k] + t * n;
          const int64_t block = n / c.groups;
          const bool want_coef_grad = dlanes[k] != nullptr || grads[k].dscalar.defined();
          double scalar_sum = 0.0;
          for (int64_t g = 0; g < c.groups; ++g) {
            const double lane_value = c.lane_value(t, g);
            if (want_coef_grad) {
              A dot = 0;
              for (int64_t i = g * block; i < (g + 1) * block; ++i) dot += d[i] * load(x[i]);
              if (dlanes[k] != nullptr) {
                T& slot = dlanes[k][t * c.lane_stride + c.lane + g];
                slot = store<T>(load(slot) + static_cast<A>(c.s) * dot);
              }
              scalar_sum += lane_value * static_cast<double>(dot);
            }
            if (dxs[k] != nullptr) {
              const A coef = static_cast<A>(c.s * lane_value);
              T* dx = dxs[k] + t * n;
              if (grads[k].overwrite_dx) {
                for (int64_t i = g * block; i < (g + 1) * block; ++i) dx[i] = store<T>(coef * d[i]);
              } else {
                for (int64_t i = g * block; i < (g + 1) * block; ++i) dx[i] = store<T>(load(dx[i]) + coef * d[i]);
              }
            }
          }
          scalar_partial[k * static_cast<size_t>(rows) + static_cast<size_t>(t)] = scalar_sum;
        }
      }
    }
    for (size_t k = 0; k < n_terms; ++k) {
      if (!grads[k].dscalar.defined()) continue;
      double sum = 0.0;
      for (int64_t t = 0; t < rows; ++t) sum += scalar_partial[k * static_cast<size_t>(rows) + static_cast<size_t>(t)];
      Tensor ds = grads[k].dscalar;
      add_to_scalar(ds, coefs[k].ds_ds * sum);
    }
  });
}

void mix_rmsnorm_forward(std::span<const MixTerm> terms, Tensor& out, Tensor& y, Tensor& rstd, float eps) {
  cpu::mix_forward(terms, out);
  cpu::rmsnorm_forward(out, y, rstd, eps);
}

// The reference: the two ops on a temporary dout.
void mix_rmsnorm_backward(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
                          std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  const bool has_old = dout_old != nullptr && dout_old->defined();
  Tensor dout = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (has_old) dout.copy_from(*dout_old);
  cpu::rmsnorm_backward(dy, x, rstd, dout, has_old ? GradWrite::add : GradWrite::overwrite);
  cpu::mix_backward(dout, terms, grads);
}

}  // namespace gpt::cpu
