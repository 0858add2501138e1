// CUDA kernels of kernels/key_offset.h: the upper half of each key comes from the previous token. One
// thread per N consecutive elements; values are copied exactly, the backward adds in the CPU's order.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/key_offset.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T, int N>
__global__ void key_offset_forward_kernel(const T* __restrict__ k, T* __restrict__ y, int64_t packs, int64_t row,
                                          int dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const int64_t e0 = i * N, t = e0 / row;
    Pack<T, N> out;
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int64_t e = e0 + u;
      const bool upper = e % dim >= dim / 2;
      out.v[u] = k[upper && t > 0 ? e - row : e];
    }
    store_pack<T, N>(y + i * N, out);
  }
}

template <typename T, typename A, int N>
__global__ void key_offset_backward_kernel(const T* __restrict__ dy, T* __restrict__ dk, int64_t packs, int64_t row,
                                           int64_t tokens, int dim, bool add) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const int64_t e0 = i * N, t = e0 / row;
    Pack<T, N> acc;
    if (add) acc = load_pack<T, N>(dk + i * N);
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int64_t e = e0 + u;
      A g;
      if (e % dim < dim / 2) {
        g = to_acc<A>(dy[e]);
      } else {
        g = t + 1 < tokens ? to_acc<A>(dy[e + row]) : A(0);
        if (t == 0) g += to_acc<A>(dy[e]);
      }
      acc.v[u] = from_acc<T>((add ? to_acc<A>(acc.v[u]) : A(0)) + g);
    }
    store_pack<T, N>(dk + i * N, acc);
  }
}

// N = 4 when every row starts 4-aligned (D % 4 == 0 and aligned bases), else one element per thread.
template <typename F>
void with_pack(bool packed, F&& f) {
  if (packed) {
    f.template operator()<4>();
  } else {
    f.template operator()<1>();
  }
}

}  // namespace

void key_offset_forward(const Tensor& k, Tensor& y) {
  const int64_t row = k.size(1) * k.size(2), n = k.numel();
  const int dim = static_cast<int>(k.size(2));
  if (n == 0) return;
  dispatch_floating_cuda(k.dtype(), "key_offset_forward", [&]<typename T_, typename A>() {
    const T_* kp = device_ptr<T_>(k);
    T_* yp = device_ptr<T_>(y);
    GPT_CHECK(yp + n <= kp || kp + n <= yp, "key_offset_forward: y must not overlap k");
    const bool packed = dim % 4 == 0 && aligned_to(kp, 4 * sizeof(T_)) && aligned_to(yp, 4 * sizeof(T_));
    with_pack(packed, [&]<int N>() {
      key_offset_forward_kernel<T_, N>
          <<<grid_stride_blocks(n / N, kThreads), kThreads, 0, op_stream()>>>(kp, yp, n / N, row, dim);
    });
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void key_offset_backward(const Tensor& dy, Tensor& dk, GradWrite write) {
  const int64_t T = dy.size(0), row = dy.size(1) * dy.size(2), n = dy.numel();
  const int dim = static_cast<int>(dy.size(2));
  if (n == 0) return;
  dispatch_floating_cuda(dy.dtype(), "key_offset_backward", [&]<typename T_, typename A>() {
    const T_* gp = device_ptr<T_>(dy);
    T_* dp = device_ptr<T_>(dk);
    const bool packed = dim % 4 == 0 && aligned_to(gp, 4 * sizeof(T_)) && aligned_to(dp, 4 * sizeof(T_));
    with_pack(packed, [&]<int N>() {
      key_offset_backward_kernel<T_, A, N><<<grid_stride_blocks(n / N, kThreads), kThreads, 0, op_stream()>>>(
          gp, dp, n / N, row, T, dim, write == GradWrite::add);
    });
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
