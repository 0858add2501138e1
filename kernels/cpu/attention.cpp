// CPU reference of kernels/attention.h. Parallel over (token, head) pairs; the backward makes one pass
// over queries (dq) and one over keys (dk, dv) so that every gradient element has a single writer and the
// result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/attention_common.h"

namespace gpt::cpu {

namespace {

template <typename T, typename A = acc_t<T>>
A dot_row(const T* a, const T* b, int64_t n) {
  A s = 0;
  for (int64_t i = 0; i < n; ++i) s += load(a[i]) * load(b[i]);
  return s;
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                       Tensor& lse, int64_t window, float scale) {
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const TokenSegments seg = token_segments(cu_seqlens, T, "attention_forward");
  dispatch_floating(q.dtype(), "attention_forward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* qp = q.data<T_>();
    const T_* kp = k.data<T_>();
    const T_* vp = v.data<T_>();
    T_* yp = y.data<T_>();
    A* lp = lse.data<A>();
    const A tau = static_cast<A>(scale);
    const bool parallel = T * H * D * std::min(window + 1, T) >= kParallelMinWork;
#pragma omp parallel if (parallel)
    {
      std::vector<A> logits;
      std::vector<A> acc(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(dynamic, 16)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < H; ++h) {
          const int64_t lo = std::max(seg.begin[t], t - window);
          const T_* qr = qp + (t * H + h) * D;
          logits.assign(static_cast<size_t>(t - lo + 1), A(0));
          A mx = -std::numeric_limits<A>::infinity();
          for (int64_t s = lo; s <= t; ++s) {
            const A z = tau * dot_row<T_>(qr, kp + (s * H + h) * D, D);
            logits[s - lo] = z;
            mx = std::max(mx, z);
          }
          std::fill(acc.begin(), acc.end(), A(0));
          A sum = 0;
          for (int64_t s = lo; s <= t; ++s) {
            const A p = std::exp(logits[s - lo] - mx);
            sum += p;
            const T_* vr = vp + (s * H + h) * D;
            for (int64_t d = 0; d < D; ++d) acc[d] += p * load(vr[d]);
          }
          lp[h * T + t] = mx + std::log(sum);
          T_* yr = yp + (t * H + h) * D;
          for (int64_t d = 0; d < D; ++d) yr[d] = store<T_>(acc[d] / sum);
        }
      }
    }
  });
}

void attention_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                        const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, int64_t window,
                        float scale, AttentionGradWrites writes) {
  zero_overwritten(writes, dq, dk, dv);  // the reference only adds
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const TokenSegments seg = token_segments(cu_seqlens, T, "attention_backward");
  dispatch_floating(q.dtype(), "attention_backward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* qp = q.data<T_>();
    const T_* kp = k.data<T_>();
    const T_* vp = v.data<T_>();
    const T_* dyp = dy.data<T_>();
    const T_* yp = y.data<T_>();
    const A* lp = lse.data<A>();
    T_* dqp = dq.data<T_>();
    T_* dkp = dk.data<T_>();
    T_* dvp = dv.data<T_>();
    const A tau = static_cast<A>(scale);
    // D_th = ⟨dy_th, y_th⟩: the softmax-Jacobian term, shared by both passes.
    std::vector<A> dot_dy_y(static_cast<size_t>(T * H));
    const bool parallel = T * H * D * std::min(window + 1, T) >= kParallelMinWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < T * H; ++i) dot_dy_y[i] = dot_row<T_>(dyp + i * D, yp + i * D, D);

      // Pass 1, per query: dq.
#pragma omp parallel if (parallel)
    {
      std::vector<A> acc(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(dynamic, 16)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < H; ++h) {
          const int64_t row = t * H + h;
          const int64_t lo = std::max(seg.begin[t], t - window);
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t s = lo; s <= t; ++s) {
            const T_* kr = kp + (s * H + h) * D;
            const A p = std::exp(tau * dot_row<T_>(qp + row * D, kr, D) - lp[h * T + t]);
            const A ds = p * (dot_row<T_>(dyp + row * D, vp + (s * H + h) * D, D) - dot_dy_y[row]);
            for (int64_t d = 0; d < D; ++d) acc[d] += ds * load(kr[d]);
          }
          T_* out = dqp + row * D;
          for (int64_t d = 0; d < D; ++d) out[d] = store<T_>(load(out[d]) + tau * acc[d]);
        }
      }
    }

    // Pass 2, per key: dk and dv over the queries that see key s.
#pragma omp parallel if (parallel)
    {
      std::vector<A> acc_k(static_cast<size_t>(D));
      std::vector<A> acc_v(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(dynamic, 16)
      for (int64_t s = 0; s < T; ++s) {
        for (int64_t h = 0; h < H; ++h) {
          const int64_t key = s * H + h;
          const int64_t hi = std::min(seg.end[s] - 1, s + window);
          std::fill(acc_k.begin(), acc_k.end(), A(0));
          std::fill(acc_v.begin(), acc_v.end(), A(0));
          for (int64_t t = s; t <= hi; ++t) {
            const int64_t row = t * H + h;
            const T_* qr = qp + row * D;
            const T_* dyr = dyp + row * D;
            const A p = std::exp(tau * dot_row<T_>(qr, kp + key * D, D) - lp[h * T + t]);
            const A ds = p * (dot_row<T_>(dyr, vp + key * D, D) - dot_dy_y[row]);
            for (int64_t d = 0; d < D; ++d) {
              acc_k[d] += ds * load(qr[d]);
              acc_v[d] += p * load(dyr[d]);
            }
          }
          T_* gk = dkp + key * D;
          T_* gv = dvp + key * D;
          for (int64_t d = 0; d < D; ++d) {
            gk[d] = store<T_>(load(gk[d]) + tau * acc_k[d]);
            gv[d] = store<T_>(load(gv[d]) + acc_v[d]);
          }
        }
      }
    }
  });
}

void double_cu_seqlens(const Tensor& cu_seqlens, Tensor& doubled) {
  const int32_t* in = cu_seqlens.data<int32_t>();
  int32_t* out = doubled.data<int32_t>();
  for (int64_t i = 0; i < cu_seqlens.size(0); ++i) {
    const int64_t twice = 2 * static_cast<int64_t>(in[i]);
    GPT_CHECK(twice <= std::numeric_limits<int32_t>::max() && twice >= std::numeric_limits<int32_t>::min(),
              "double_cu_seqlens: cu_seqlens[", i, "] = ", in[i], " overflows int32 when doubled");
    out[i] = static_cast<int32_t>(twice);
  }
}

}  // namespace gpt::cpu
