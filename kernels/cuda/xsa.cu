// CUDA kernels of kernels/xsa.h: one warp per (token, head) row; the row's dot products are warp sums, the
// gate lane is read (and its gradient added) in place in the [T, G] lane tensor.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/xsa.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T, typename A>
__global__ void xsa_forward_kernel(const T* y, const T* __restrict__ v, const T* __restrict__ gates, T* y_out,
                                   int64_t rows, int heads, int dim, int64_t gate_stride, int64_t first_lane) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t t = row / heads, h = row % heads, base = row * dim;
  A yv = 0, vv = 0;
  for (int d = lane; d < dim; d += 32) {
    const A vd = to_acc<A>(v[base + d]);
    yv += to_acc<A>(y[base + d]) * vd;
    vv += vd * vd;
  }
  yv = warp_sum(yv);
  vv = warp_sum(vv);
  const A coef = tanh(to_acc<A>(gates[t * gate_stride + first_lane + h])) * yv / max(vv, A(kXsaMinNormSq));
  for (int d = lane; d < dim; d += 32)
    y_out[base + d] = from_acc<T>(to_acc<A>(y[base + d]) - coef * to_acc<A>(v[base + d]));
}

template <typename T, typename A>
__global__ void xsa_backward_kernel(const T* __restrict__ dy_out, const T* __restrict__ y, const T* __restrict__ v,
                                    const T* __restrict__ gates, T* __restrict__ dy, T* __restrict__ dv,
                                    T* __restrict__ dgates, int64_t rows, int heads, int dim, int64_t gate_stride,
                                    int64_t first_lane, bool add_dy, bool add_dv) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t t = row / heads, h = row % heads, base = row * dim;
  A p = 0, vv = 0, gv = 0;
  for (int d = lane; d < dim; d += 32) {
    const A vd = to_acc<A>(v[base + d]);
    p += to_acc<A>(y[base + d]) * vd;
    vv += vd * vd;
    gv += to_acc<A>(dy_out[base + d]) * vd;
  }
  p = warp_sum(p);
  vv = warp_sum(vv);
  gv = warp_sum(gv);
  const bool clamped = vv <= A(kXsaMinNormSq);
  const A n = clamped ? A(kXsaMinNormSq) : vv;
  T& dalpha = dgates[t * gate_stride + first_lane + h];
  const A a = tanh(to_acc<A>(gates[t * gate_stride + first_lane + h]));
  const A norm_term = clamped ? A(0) : A(2) * a * p * gv / (n * n);
  for (int d = lane; d < dim; d += 32) {
    const A g = to_acc<A>(dy_out[base + d]), vd = to_acc<A>(v[base + d]), yd = to_acc<A>(y[base + d]);
    const A old_dy = add_dy ? to_acc<A>(dy[base + d]) : A(0), old_dv = add_dv ? to_acc<A>(dv[base + d]) : A(0);
    dy[base + d] = from_acc<T>(old_dy + g - a / n * gv * vd);
    dv[base + d] = from_acc<T>(old_dv - a * (gv * yd + p * g) / n + norm_term * vd);
  }
  if (lane == 0) dalpha = from_acc<T>(to_acc<A>(dalpha) - (A(1) - a * a) * p / n * gv);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

}  // namespace

void xsa_forward(const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane, Tensor& y_out) {
  const int64_t rows = y.size(0) * y.size(1);
  if (rows == 0) return;
  dispatch_floating_cuda(y.dtype(), "xsa_forward", [&]<typename T, typename A>() {
    xsa_forward_kernel<T, A><<<row_blocks(rows), kThreads, 0, op_stream()>>>(
        device_ptr<T>(y), device_ptr<T>(v), device_ptr<T>(gates), device_ptr<T>(y_out), rows,
        static_cast<int>(y.size(1)), static_cast<int>(y.size(2)), gates.size(1), first_lane);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void xsa_backward(const Tensor& dy_out, const Tensor& y, const Tensor& v, const Tensor& gates, int64_t first_lane,
                  Tensor& dy, Tensor& dv, Tensor& dgates, GradWrite write_dy, GradWrite write_dv) {
  const int64_t rows = y.size(0) * y.size(1);
  if (rows == 0) return;
  dispatch_floating_cuda(y.dtype(), "xsa_backward", [&]<typename T, typename A>() {
    xsa_backward_kernel<T, A><<<row_blocks(rows), kThreads, 0, op_stream()>>>(
        device_ptr<T>(dy_out), device_ptr<T>(y), device_ptr<T>(v), device_ptr<T>(gates), device_ptr<T>(dy),
        device_ptr<T>(dv), device_ptr<T>(dgates), rows, static_cast<int>(y.size(1)), static_cast<int>(y.size(2)),
        gates.size(1), first_lane, write_dy == GradWrite::add, write_dv == GradWrite::add);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
