// CPU reference of kernels/key_offset.h.
#include "kernels/key_offset.h"

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

void key_offset_forward(const Tensor& k, Tensor& y) {
  const int64_t T = k.size(0), H = k.size(1), D = k.size(2);
  dispatch_floating(k.dtype(), "key_offset_forward", [&]<typename T_>() {
    const T_* kp = k.data<T_>();
    T_* yp = y.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t upper_src = t == 0 ? 0 : t - 1;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D / 2; ++d) yp[(t * H + h) * D + d] = kp[(t * H + h) * D + d];
        for (int64_t d = D / 2; d < D; ++d) yp[(t * H + h) * D + d] = kp[(upper_src * H + h) * D + d];
      }
    }
  });
}

void key_offset_backward(const Tensor& dy, Tensor& dk, GradWrite write) {
  const bool add = write == GradWrite::add;
  const int64_t T = dy.size(0), H = dy.size(1), D = dy.size(2);
  dispatch_floating(dy.dtype(), "key_offset_backward", [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* gp = dy.data<T_>();
    T_* dp = dk.data<T_>();
#pragma omp parallel for schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        T_* out = dp + (t * H + h) * D;
        const T_* own = gp + (t * H + h) * D;
        for (int64_t d = 0; d < D / 2; ++d) out[d] = store<T_>((add ? load(out[d]) : A(0)) + load(own[d]));
        for (int64_t d = D / 2; d < D; ++d) {
          A g = t + 1 < T ? load(gp[((t + 1) * H + h) * D + d]) : A(0);
          if (t == 0) g += load(own[d]);
          out[d] = store<T_>((add ? load(out[d]) : A(0)) + g);
        }
      }
    }
  });
}

}  // namespace gpt::cpu
