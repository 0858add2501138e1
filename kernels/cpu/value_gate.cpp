// CPU reference of kernels/value_gate.h.
#include "kernels/value_gate.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

namespace {

// z_th = ⟨gate[h, :], [u_t[0:6], ve_t[0:6]]⟩ for one token.
template <typename T, typename A = acc_t<T>>
A gate_logit(const T* gate_row, const T* u_row, const T* ve_row) {
  A z = 0;
  for (int64_t j = 0; j < kValueGateLanes; ++j) {
    z += load(gate_row[j]) * load(u_row[j]) + load(gate_row[kValueGateLanes + j]) * load(ve_row[j]);
  }
  return z;
}

template <typename A>
A sigmoid(A z) {
  return A(1) / (A(1) + std::exp(-z));
}

}  // namespace

void value_gate_forward(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& v_out) {
  const int64_t T = v.size(0), H = v.size(1), D = v.size(2), C = u.size(1);
  dispatch_floating(v.dtype(), "value_gate_forward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* vp = v.data<T_>();
    const T_* up = u.data<T_>();
    const T_* ep = ve.data<T_>();
    const T_* gp = gate.data<T_>();
    T_* op = v_out.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      const T_* ve_row = ep + t * H * D;
      for (int64_t h = 0; h < H; ++h) {
        const A g = A(2) * sigmoid(gate_logit<T_>(gp + h * 2 * kValueGateLanes, up + t * C, ve_row));
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = (t * H + h) * D + d;
          op[i] = store<T_>(load(vp[i]) + g * load(ep[i]));
        }
      }
    }
  });
}

void value_gate_backward(const Tensor& dv_out, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& dv,
                         Tensor& du, Tensor& dve, Tensor& dgate, GradWrite write_dv, GradWrite write_dve) {
  const bool add_dv = write_dv == GradWrite::add, add_dve = write_dve == GradWrite::add;
  const int64_t T = dv_out.size(0), H = dv_out.size(1), D = dv_out.size(2), C = u.size(1);
  constexpr int64_t L = kValueGateLanes;
  dispatch_floating(dv_out.dtype(), "value_gate_backward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* gop = dv_out.data<T_>();
    const T_* up = u.data<T_>();
    const T_* ep = ve.data<T_>();
    const T_* gp = gate.data<T_>();
    T_* dvp = dv.data<T_>();
    T_* dup = du.data<T_>();
    T_* dep = dve.data<T_>();
    std::vector<A> dz(static_cast<size_t>(T * H));  // per token and head, for the dgate reduction
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      const T_* ve_row = ep + t * H * D;
      A du_lane[L] = {}, dve_lane[L] = {};
      for (int64_t h = 0; h < H; ++h) {
        const T_* gate_row = gp + h * 2 * L;
        const A s = sigmoid(gate_logit<T_>(gate_row, up + t * C, ve_row));
        A dot = 0;
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = (t * H + h) * D + d;
          const A g_out = load(gop[i]);
          dot += g_out * load(ep[i]);
          dvp[i] = store<T_>((add_dv ? load(dvp[i]) : A(0)) + g_out);
        }
        const A dzh = dot * A(2) * s * (A(1) - s);
        dz[t * H + h] = dzh;
        for (int64_t j = 0; j < L; ++j) {
          du_lane[j] += dzh * load(gate_row[j]);
          dve_lane[j] += dzh * load(gate_row[L + j]);
        }
        // The first L values of the ve row also feed the gate; they are collected in dve_lane and
        // stored after the head loop, so every element is rounded once.
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = (t * H + h) * D + d;
          const A add = A(2) * s * load(gop[i]);
          if (h * D + d < L) {
            dve_lane[h * D + d] += add;
          } else {
            dep[i] = store<T_>((add_dve ? load(dep[i]) : A(0)) + add);
          }
        }
      }
      for (int64_t j = 0; j < L; ++j) {
        dup[t * C + j] = store<T_>(load(dup[t * C + j]) + du_lane[j]);
        dep[t * H * D + j] = store<T_>((add_dve ? load(dep[t * H * D + j]) : A(0)) + dve_lane[j]);
      }
    }
    T_* dgp = dgate.data<T_>();
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < 2 * L; ++j) {
        A sum = 0;
        for (int64_t t = 0; t < T; ++t) {
          const A f = j < L ? load(up[t * C + j]) : load(ep[t * H * D + (j - L)]);
          sum += dz[t * H + h] * f;
        }
        dgp[h * 2 * L + j] = store<T_>(load(dgp[h * 2 * L + j]) + sum);
      }
    }
  });
}

}  // namespace gpt::cpu
