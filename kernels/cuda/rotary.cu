// CUDA kernels of kernels/rotary.h: one thread per N consecutive dims of one head vector (N/2 pairs),
// reading the [P, D/4] tables in place. Forward overwrites (y may alias x: each thread reads its dims before
// writing them); backward rotates by −θ and adds.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/rotary.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T, typename A, int N, bool kBackward>
__global__ void rotary_kernel(const T* in, const T* __restrict__ cos, const T* __restrict__ sin, T* out, int64_t packs,
                              int heads, int dim, bool paired) {
  const int packs_per_row = dim / N, rotating_pairs = dim / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const int64_t row = i / packs_per_row;  // t·H + h
    const int first_pair = static_cast<int>(i % packs_per_row) * (N / 2);
    const int64_t t = row / heads;
    const int64_t pos = paired ? 2 * t + (row % heads) % 2 : t;
    const Pack<T, N> src = load_pack<T, N>(in + i * N);
    Pack<T, N> dst;
    if constexpr (kBackward) dst = load_pack<T, N>(out + i * N);
#pragma unroll
    for (int u = 0; u < N / 2; ++u) {
      const int pair = first_pair + u;
      const A a = to_acc<A>(src.v[2 * u]), b = to_acc<A>(src.v[2 * u + 1]);
      A ra = a, rb = b;
      if (pair < rotating_pairs) {
        const A c = to_acc<A>(cos[pos * rotating_pairs + pair]);
        const A s =
            kBackward ? -to_acc<A>(sin[pos * rotating_pairs + pair]) : to_acc<A>(sin[pos * rotating_pairs + pair]);
        ra = c * a + s * b;
        rb = c * b - s * a;
      }
      if constexpr (kBackward) {
        ra += to_acc<A>(dst.v[2 * u]);
        rb += to_acc<A>(dst.v[2 * u + 1]);
        dst.v[2 * u] = from_acc<T>(ra);
        dst.v[2 * u + 1] = from_acc<T>(rb);
      } else if (pair < rotating_pairs) {
        dst.v[2 * u] = from_acc<T>(ra);
        dst.v[2 * u + 1] = from_acc<T>(rb);
      } else {
        dst.v[2 * u] = src.v[2 * u];  // stationary dims are copied exactly
        dst.v[2 * u + 1] = src.v[2 * u + 1];
      }
    }
    store_pack<T, N>(out + i * N, dst);
  }
}

template <bool kBackward>
void rotate(const Tensor& in, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& out, const char* op) {
  const int64_t heads = in.size(1), dim = in.size(2), n = in.numel();
  if (n == 0) return;
  dispatch_floating_cuda(in.dtype(), op, [&]<typename T, typename A>() {
    const T* ip = device_ptr<T>(in);
    T* op_ = device_ptr<T>(out);
    const bool quad = aligned_to(ip, 4 * sizeof(T)) && aligned_to(op_, 4 * sizeof(T));  // D % 4 == 0 always
    GPT_CHECK(aligned_to(ip, 2 * sizeof(T)) && aligned_to(op_, 2 * sizeof(T)), op,
              ": x and y must start on an even element (rotation pairs), got offsets of odd elements");
    auto launch = [&]<int N>() {
      const int64_t packs = n / N;
      rotary_kernel<T, A, N, kBackward><<<grid_stride_blocks(packs, kThreads), kThreads, 0, op_stream()>>>(
          ip, device_ptr<T>(cos), device_ptr<T>(sin), op_, packs, static_cast<int>(heads), static_cast<int>(dim),
          layout == RotaryLayout::paired);
    };
    if (quad) {
      launch.template operator()<4>();
    } else {
      launch.template operator()<2>();
    }
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y) {
  rotate<false>(x, cos, sin, layout, y, "rotary_forward");
}

void rotary_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& dx) {
  rotate<true>(dy, cos, sin, layout, dx, "rotary_backward");
}

}  // namespace gpt::cuda
