// CUDA kernels of kernels/rmsnorm.h: one warp per row, fp32 accumulation.
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/rms_backward.cuh"
#include "kernels/rmsnorm.h"

namespace gpt::cuda {

namespace {

template <typename T, typename A>
__global__ void rmsnorm_forward_kernel(const T* __restrict__ x, T* __restrict__ y, A* __restrict__ rstd, int64_t rows,
                                       int n, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* xr = x + row * n;
  const A ss = warp_row_sum_squares<A>(xr, n, lane);
  const A inv = rms_inverse<A>(ss, n, eps);
  if (lane == 0) rstd[row] = inv;
  for (int i = lane; i < n; i += 32) y[row * n + i] = from_acc<T>(to_acc<A>(xr[i]) * inv);
}

template <typename T, typename A>
__global__ void rmsnorm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const A* __restrict__ rstd,
                                        T* __restrict__ dx, int64_t rows, int n, bool add) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* xr = x + row * n;
  const T* dyr = dy + row * n;
  const A inv = rstd[row];
  const A c = rms_backward_coefficient(inv, warp_row_dot<A>(dyr, xr, n, lane), n);
  for (int i = lane; i < n; i += 32) {
    const int64_t k = row * n + i;
    dx[k] =
        from_acc<T>(rms_backward_element((add ? to_acc<A>(dx[k]) : A(0)), to_acc<A>(dyr[i]), to_acc<A>(xr[i]), inv, c));
  }
}

constexpr int kWarpsPerBlock = 8;

}  // namespace

void rmsnorm_forward(const Tensor& x, Tensor& y, Tensor& rstd, float eps) {
  const int n = static_cast<int>(x.size(-1));
  const int64_t rows = x.numel() / n;
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  dispatch_floating_cuda(x.dtype(), "rmsnorm_forward", [&]<typename T, typename A>() {
    rmsnorm_forward_kernel<T, A>
        <<<grid, kWarpsPerBlock * 32>>>(device_ptr<T>(x), device_ptr<T>(y), device_ptr<A>(rstd), rows, n, eps);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, Tensor& dx, GradWrite write) {
  const int n = static_cast<int>(x.size(-1));
  const int64_t rows = x.numel() / n;
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  dispatch_floating_cuda(x.dtype(), "rmsnorm_backward", [&]<typename T, typename A>() {
    rmsnorm_backward_kernel<T, A><<<grid, kWarpsPerBlock * 32>>>(
        device_ptr<T>(dy), device_ptr<T>(x), device_ptr<A>(rstd), device_ptr<T>(dx), rows, n, write == GradWrite::add);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
