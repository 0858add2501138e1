// CPU reference of kernels/xsa.h.
#include "kernels/xsa.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

void xsa_forward(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, Tensor& y_out) {
  const int64_t T = y.size(0), H = y.size(1), D = y.size(2), G = gates.size(1);
  dispatch_floating(y.dtype(), "xsa_forward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* yp = y.data<T_>();
    const T_* vp = v.data<T_>();
    const T_* gp = gates.data<T_>();
    T_* op = y_out.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (t * H + h) * D;
        A yv = 0, vv = 0;
        for (int64_t d = 0; d < D; ++d) {
          yv += load(yp[row + d]) * load(vp[row + d]);
          vv += load(vp[row + d]) * load(vp[row + d]);
        }
        const A coef = std::tanh(load(gp[t * G + first_lane + h])) * yv / std::max(vv, A(kXsaMinNormSq));
        for (int64_t d = 0; d < D; ++d) op[row + d] = store<T_>(load(yp[row + d]) - coef * load(vp[row + d]));
      }
    }
  });
}

void xsa_backward(const Tensor& dy_out, const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane,
                  Tensor& dy, Tensor& dv, Tensor& dgates, GradWrite write_dy, GradWrite write_dv) {
  const bool add_dy = write_dy == GradWrite::add, add_dv = write_dv == GradWrite::add;
  const int64_t T = y.size(0), H = y.size(1), D = y.size(2), G = gates.size(1);
  dispatch_floating(y.dtype(), "xsa_backward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* gop = dy_out.data<T_>();
    const T_* yp = y.data<T_>();
    const T_* vp = v.data<T_>();
    const T_* gp = gates.data<T_>();
    T_* dyp = dy.data<T_>();
    T_* dvp = dv.data<T_>();
    T_* dgp = dgates.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (t * H + h) * D;
        A p = 0, vv = 0, gv = 0;
        for (int64_t d = 0; d < D; ++d) {
          const A vd = load(vp[row + d]);
          p += load(yp[row + d]) * vd;
          vv += vd * vd;
          gv += load(gop[row + d]) * vd;
        }
        const bool clamped = vv <= A(kXsaMinNormSq);
        const A n = clamped ? A(kXsaMinNormSq) : vv;
        const A a = std::tanh(load(gp[t * G + first_lane + h]));
        const A norm_term = clamped ? A(0) : A(2) * a * p * gv / (n * n);
        for (int64_t d = 0; d < D; ++d) {
          const A g = load(gop[row + d]), vd = load(vp[row + d]), yd = load(yp[row + d]);
          const A old_dy = add_dy ? load(dyp[row + d]) : A(0), old_dv = add_dv ? load(dvp[row + d]) : A(0);
          dyp[row + d] = store<T_>(old_dy + g - a / n * gv * vd);
          dvp[row + d] = store<T_>(old_dv - a * (gv * yd + p * g) / n + norm_term * vd);
        }
        T_& dalpha = dgp[t * G + first_lane + h];
        dalpha = store<T_>(load(dalpha) - (A(1) - a * a) * p / n * gv);
      }
    }
  });
}

}  // namespace gpt::cpu
