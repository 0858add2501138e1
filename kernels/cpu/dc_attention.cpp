// CPU reference of kernels/dc_attention.h. Forward and the first backward pass run per query token (the
// head mixing couples all heads of a token); the second backward pass runs per key token so that dk and dv
// have a single writer.
#include "kernels/dc_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

namespace {

template <typename T, typename A = acc_t<T>>
A dot_row(const T* a, const T* b, int64_t n) {
  A s = 0;
  for (int64_t i = 0; i < n; ++i) s += load(a[i]) * load(b[i]);
  return s;
}

// Views of the flat buffers of one dtype, plus the per-token mixing weights.
template <typename T>
struct DcData {
  using A = acc_t<T>;
  const T* q;
  const T* k;
  const T* v;
  const T* gates;
  int64_t H, D, G;
  DcLanes lanes;
  A tau;

  // w1_h(t) = round(r_h · ρ) and ρ for token t.
  A w1(int64_t t, A* out) const {
    A ss = 0;
    for (int64_t h = 0; h < H; ++h) ss += load(gates[t * G + lanes.w1 + h]) * load(gates[t * G + lanes.w1 + h]);
    const A rho = A(1) / std::sqrt(ss / A(H) + A(kDcNormEps));
    for (int64_t h = 0; h < H; ++h) out[h] = load(store<T>(load(gates[t * G + lanes.w1 + h]) * rho));
    return rho;
  }
  A w2(int64_t t, int64_t g) const { return load(gates[t * G + lanes.w2 + g]); }
  A logit(int64_t t, int64_t s, int64_t h) const {
    return tau * dot_row<T>(q + (t * H + h) * D, k + (s * H + h) * D, D);
  }
  A per_key_weight(A w2g, A a) const { return load(store<T>(w2g * a)); }
};

int64_t first_key(const TokenSegments& seg, int64_t t, int64_t keys) { return std::max(seg.begin[t], t - keys + 1); }

}  // namespace

void dc_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                          const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                          float scale, int64_t keys) {
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const TokenSegments seg = token_segments(cu_seqlens, T, "dc_attention_forward");
  dispatch_floating(q.dtype(), "dc_attention_forward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const DcData<T_> dc{q.data<T_>(),  k.data<T_>(), v.data<T_>(),         gates.data<T_>(), H, D,
                        gates.size(1), lanes,        static_cast<A>(scale)};
    const T_* ycp = y_core.data<T_>();
    T_* yop = y_out.data<T_>();
    A* lp = lse.data<A>();
#pragma omp parallel if (T * H * D * std::min(keys, T) >= kParallelMinWork)
    {
      std::vector<A> prob, mix, w1(static_cast<size_t>(H)), acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 8)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t lo = first_key(seg, t, keys), n = t - lo + 1;
        prob.assign(static_cast<size_t>(n), A(0));
        mix.assign(static_cast<size_t>(n), A(0));
        dc.w1(t, w1.data());
        for (int64_t h = 0; h < H; ++h) {
          A mx = -std::numeric_limits<A>::infinity();
          for (int64_t i = 0; i < n; ++i) mx = std::max(mx, prob[i] = dc.logit(t, lo + i, h));
          A sum = 0;
          for (int64_t i = 0; i < n; ++i) sum += (prob[i] = std::exp(prob[i] - mx));
          lp[h * T + t] = mx + std::log(sum);
          for (int64_t i = 0; i < n; ++i) mix[i] += w1[h] * prob[i] / sum;
        }
        for (int64_t g = 0; g < H; ++g) {
          const A w2 = dc.w2(t, g);
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t i = 0; i < n; ++i) {
            const A c = dc.per_key_weight(w2, mix[i]);
            const T_* vr = dc.v + ((lo + i) * H + g) * D;
            for (int64_t d = 0; d < D; ++d) acc[d] += c * load(vr[d]);
          }
          const int64_t row = (t * H + g) * D;
          for (int64_t d = 0; d < D; ++d) yop[row + d] = store<T_>(load(ycp[row + d]) + acc[d]);
        }
      }
    }
  });
}

void dc_attention_backward(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse, Tensor& dq,
                           Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys) {
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2), G = gates.size(1);
  const TokenSegments seg = token_segments(cu_seqlens, T, "dc_attention_backward");
  dispatch_floating(q.dtype(), "dc_attention_backward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const DcData<T_> dc{q.data<T_>(), k.data<T_>(),         v.data<T_>(), gates.data<T_>(), H, D, G,
                        lanes,        static_cast<A>(scale)};
    const T_* gop = dy_out.data<T_>();
    const A* lp = lse.data<A>();
    T_* dqp = dq.data<T_>();
    T_* dkp = dk.data<T_>();
    T_* dvp = dv.data<T_>();
    T_* dgp = dgates.data<T_>();
    // Per (token, head), kept for the key pass: w1_h(t) and dw1_h(t).
    std::vector<A> w1_all(static_cast<size_t>(T * H)), dw1_all(static_cast<size_t>(T * H));
    const bool parallel = T * H * D * std::min(keys, T) >= kParallelMinWork;

    // Pass 1, per query token: dq, dgates (w1 and w2 lanes), dw1.
#pragma omp parallel if (parallel)
    {
      std::vector<A> prob, mix, dmix, dw2(static_cast<size_t>(H)), acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 8)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t lo = first_key(seg, t, keys), n = t - lo + 1;
        A* w1 = w1_all.data() + t * H;
        A* dw1 = dw1_all.data() + t * H;
        const A rho = dc.w1(t, w1);
        prob.assign(static_cast<size_t>(H * n), A(0));  // π_h(t, lo + i) at [h * n + i]
        mix.assign(static_cast<size_t>(n), A(0));
        dmix.assign(static_cast<size_t>(n), A(0));
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t i = 0; i < n; ++i) {
            prob[h * n + i] = std::exp(dc.logit(t, lo + i, h) - lp[h * T + t]);
            mix[i] += w1[h] * prob[h * n + i];
          }
        }
        for (int64_t g = 0; g < H; ++g) {
          const A w2 = dc.w2(t, g);
          dw2[g] = 0;
          for (int64_t i = 0; i < n; ++i) {
            const A dcg = dot_row<T_>(gop + (t * H + g) * D, dc.v + ((lo + i) * H + g) * D, D);
            dw2[g] += mix[i] * dcg;
            dmix[i] += w2 * dcg;
          }
        }
        A dw1_dot_r = 0;
        for (int64_t h = 0; h < H; ++h) {
          dw1[h] = 0;
          for (int64_t i = 0; i < n; ++i) dw1[h] += prob[h * n + i] * dmix[i];
          dw1_dot_r += dw1[h] * load(dc.gates[t * G + lanes.w1 + h]);
        }
        for (int64_t h = 0; h < H; ++h) {
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t i = 0; i < n; ++i) {
            const A dlogit = prob[h * n + i] * w1[h] * (dmix[i] - dw1[h]);
            const T_* kr = dc.k + ((lo + i) * H + h) * D;
            for (int64_t d = 0; d < D; ++d) acc[d] += dlogit * load(kr[d]);
          }
          T_* out = dqp + (t * H + h) * D;
          for (int64_t d = 0; d < D; ++d) out[d] = store<T_>(load(out[d]) + dc.tau * acc[d]);
          const A r = load(dc.gates[t * G + lanes.w1 + h]);
          const A dr = rho * dw1[h] - r * rho * rho * rho * dw1_dot_r / A(H);
          T_& g1 = dgp[t * G + lanes.w1 + h];
          g1 = store<T_>(load(g1) + dr);
          T_& g2 = dgp[t * G + lanes.w2 + h];
          g2 = store<T_>(load(g2) + dw2[h]);
        }
      }
    }

    // Pass 2, per key token s: dk and dv over the queries t whose local window holds s.
#pragma omp parallel if (parallel)
    {
      std::vector<A> prob(static_cast<size_t>(H)), acc_k(static_cast<size_t>(H * D)), acc_v(static_cast<size_t>(H * D));
#pragma omp for schedule(dynamic, 8)
      for (int64_t s = 0; s < T; ++s) {
        const int64_t hi = std::min(seg.end[s] - 1, s + keys - 1);
        std::fill(acc_k.begin(), acc_k.end(), A(0));
        std::fill(acc_v.begin(), acc_v.end(), A(0));
        for (int64_t t = s; t <= hi; ++t) {
          const A* w1 = w1_all.data() + t * H;
          const A* dw1 = dw1_all.data() + t * H;
          A mix = 0;
          for (int64_t h = 0; h < H; ++h) {
            prob[h] = std::exp(dc.logit(t, s, h) - lp[h * T + t]);
            mix += w1[h] * prob[h];
          }
          A dmix = 0;
          for (int64_t g = 0; g < H; ++g) {
            const A w2 = dc.w2(t, g);
            const T_* gr = gop + (t * H + g) * D;
            dmix += w2 * dot_row<T_>(gr, dc.v + (s * H + g) * D, D);
            const A c = dc.per_key_weight(w2, mix);
            for (int64_t d = 0; d < D; ++d) acc_v[g * D + d] += c * load(gr[d]);
          }
          for (int64_t h = 0; h < H; ++h) {
            const A dlogit = prob[h] * w1[h] * (dmix - dw1[h]);
            const T_* qr = dc.q + (t * H + h) * D;
            for (int64_t d = 0; d < D; ++d) acc_k[h * D + d] += dlogit * load(qr[d]);
          }
        }
        for (int64_t i = 0; i < H * D; ++i) {
          T_& gk = dkp[s * H * D + i];
          T_& gv = dvp[s * H * D + i];
          gk = store<T_>(load(gk) + dc.tau * acc_k[i]);
          gv = store<T_>(load(gv) + acc_v[i]);
        }
      }
    }
  });
}

}  // namespace gpt::cpu
