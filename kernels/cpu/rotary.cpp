// CPU reference of kernels/rotary.h.
#include "kernels/rotary.h"

#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

namespace {

// out = R(sign·θ)·in (overwrite) or out += R(sign·θ)·in (accumulate). sign = +1 is the forward rotation,
// −1 its transpose.
void rotate(const Tensor& in, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& out, bool accumulate,
            int sign, const char* op) {
  const int64_t T = in.size(0), H = in.size(1), D = in.size(2), F = D / 4;
  dispatch_floating(in.dtype(), op, [&]<typename T_>() {
    using A = acc_t<T_>;
    const T_* ip = in.data<T_>();
    const T_* cp = cos.data<T_>();
    const T_* sp = sin.data<T_>();
    T_* op_ = out.data<T_>();
#pragma omp parallel for collapse(2) schedule(static) if (T * H * D >= kParallelMinWork)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t pos = layout == RotaryLayout::paired ? 2 * t + (h % 2) : t;
        const T_* src = ip + (t * H + h) * D;
        T_* dst = op_ + (t * H + h) * D;
        for (int64_t k = 0; k < F; ++k) {
          const A c = load(cp[pos * F + k]);
          const A s = static_cast<A>(sign) * load(sp[pos * F + k]);
          const A a = load(src[2 * k]), b = load(src[2 * k + 1]);
          A ra = c * a + s * b, rb = c * b - s * a;
          if (accumulate) {
            ra += load(dst[2 * k]);
            rb += load(dst[2 * k + 1]);
          }
          dst[2 * k] = store<T_>(ra);
          dst[2 * k + 1] = store<T_>(rb);
        }
        for (int64_t d = D / 2; d < D; ++d) {
          dst[d] = accumulate ? store<T_>(load(dst[d]) + load(src[d])) : src[d];
        }
      }
    }
  });
}

}  // namespace

void rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y) {
  rotate(x, cos, sin, layout, y, /*accumulate=*/false, +1, "rotary_forward");
}

void rotary_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& dx) {
  rotate(dy, cos, sin, layout, dx, /*accumulate=*/true, -1, "rotary_backward");
}

}  // namespace gpt::cpu
