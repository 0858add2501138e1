// CPU reference of kernels/head_gate.h.
#include "kernels/head_gate.h"

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

void head_gate_forward(const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& y_out) {
  const int64_t T = y.size(0), H = y.size(1), D = y.size(2), G = gates.size(1);
  dispatch_floating(y.dtype(), "head_gate_forward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* yp = y.data<T_>();
    const T_* gp = gates.data<T_>();
    T_* op = y_out.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const A g = load(gp[t * G + first_lane + h]);
        for (int64_t d = 0; d < D; ++d) op[(t * H + h) * D + d] = store<T_>(load(yp[(t * H + h) * D + d]) * g);
      }
    }
  });
}

void head_gate_backward(const Tensor& dy_out, const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& dy,
                        Tensor& dgates, GradWrite write_dy) {
  const bool add_dy = write_dy == GradWrite::add;
  const int64_t T = y.size(0), H = y.size(1), D = y.size(2), G = gates.size(1);
  dispatch_floating(y.dtype(), "head_gate_backward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* gop = dy_out.data<T_>();
    const T_* yp = y.data<T_>();
    const T_* gp = gates.data<T_>();
    T_* dyp = dy.data<T_>();
    T_* dgp = dgates.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (t * H + h) * D;
        const A g = load(gp[t * G + first_lane + h]);
        A dot = 0;
        for (int64_t d = 0; d < D; ++d) {
          const A go = load(gop[row + d]);
          dot += go * load(yp[row + d]);
          dyp[row + d] = store<T_>((add_dy ? load(dyp[row + d]) : A(0)) + g * go);
        }
        T_& dg = dgp[t * G + first_lane + h];
        dg = store<T_>(load(dg) + dot);
      }
    }
  });
}

}  // namespace gpt::cpu
