// CUDA kernels of kernels/head_gate.h. Forward: one thread per element, the gate lane read in place.
// Backward: one warp per (token, head) row: dy += gate·dy_out and the row's dot product into its gate lane
// (a single writer per lane element, so no atomics).
#include "kernels/cuda/device_utils.cuh"
#include "kernels/head_gate.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T, typename A>
__global__ void head_gate_forward_kernel(const T* y, const T* __restrict__ gates, T* y_out, int64_t n, int heads,
                                         int dim, int64_t gate_stride, int64_t first_lane) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t row = e / dim, t = row / heads, h = row % heads;
    y_out[e] = from_acc<T>(to_acc<A>(y[e]) * to_acc<A>(gates[t * gate_stride + first_lane + h]));
  }
}

template <typename T, typename A>
__global__ void head_gate_backward_kernel(const T* __restrict__ dy_out, const T* __restrict__ y,
                                          const T* __restrict__ gates, T* __restrict__ dy, T* __restrict__ dgates,
                                          int64_t rows, int heads, int dim, int64_t gate_stride, int64_t first_lane,
                                          bool add_dy) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t t = row / heads, h = row % heads, base = row * dim;
  const A g = to_acc<A>(gates[t * gate_stride + first_lane + h]);
  A dot = 0;
  for (int d = lane; d < dim; d += 32) {
    const A go = to_acc<A>(dy_out[base + d]);
    dot += go * to_acc<A>(y[base + d]);
    dy[base + d] = from_acc<T>((add_dy ? to_acc<A>(dy[base + d]) : A(0)) + g * go);
  }
  dot = warp_sum(dot);
  if (lane == 0) {
    T& dg = dgates[t * gate_stride + first_lane + h];
    dg = from_acc<T>(to_acc<A>(dg) + dot);
  }
}

}  // namespace

void head_gate_forward(const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& y_out) {
  const int64_t n = y.numel();
  if (n == 0) return;
  dispatch_floating_cuda(y.dtype(), "head_gate_forward", [&]<typename T, typename A>() {
    head_gate_forward_kernel<T, A><<<grid_stride_blocks(n, kThreads), kThreads, 0, op_stream()>>>(
        device_ptr<T>(y), device_ptr<T>(gates), device_ptr<T>(y_out), n, static_cast<int>(y.size(1)),
        static_cast<int>(y.size(2)), gates.size(1), first_lane);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void head_gate_backward(const Tensor& dy_out, const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& dy,
                        Tensor& dgates, GradWrite write_dy) {
  const int64_t rows = y.size(0) * y.size(1);
  if (rows == 0) return;
  dispatch_floating_cuda(y.dtype(), "head_gate_backward", [&]<typename T, typename A>() {
    head_gate_backward_kernel<T, A><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, op_stream()>>>(
        device_ptr<T>(dy_out), device_ptr<T>(y), device_ptr<T>(gates), device_ptr<T>(dy), device_ptr<T>(dgates), rows,
        static_cast<int>(y.size(1)), static_cast<int>(y.size(2)), gates.size(1), first_lane,
        write_dy == GradWrite::add);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
