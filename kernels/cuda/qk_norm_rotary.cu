// CUDA kernels of kernels/qk_norm_rotary.h. A group of G lanes (a power of two, at most a warp) owns one head
// vector: each lane holds PACKS 16-byte packs of it in registers, the group reduces Σx² (forward) or Σg·x
// (backward) with shuffles, then each lane normalises and rotates the pairs of its own packs. Head dim 128 in bf16
// is G = 16 lanes with one pack each, two head vectors per warp. Shapes the packs do not tile (or unaligned
// tensors) run the two unfused kernels through an intermediate, with the same rounding.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/qk_norm_rotary.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

struct RowGeometry {
  int64_t rows;
  int heads, dim, group;
  bool paired;
};

__device__ __forceinline__ int64_t table_position(int64_t row, const RowGeometry& g) {
  const int64_t t = row / g.heads;
  return g.paired ? 2 * t + (row % g.heads) % 2 : t;
}

template <typename T, typename A, int VEC, int PACKS>
__global__ void __launch_bounds__(kThreads)
    qk_norm_rotary_forward_kernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                                  T* __restrict__ y, A* __restrict__ rstd, const RowGeometry geo, float eps) {
  const int lane = threadIdx.x % geo.group;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / geo.group) + threadIdx.x / geo.group;
  const bool valid = row < geo.rows;
  Pack<T, VEC> v[PACKS];
  A ss = 0;
#pragma unroll
  for (int i = 0; i < PACKS; ++i) {
    const int64_t offset = row * geo.dim + (lane + i * geo.group) * VEC;
    if (valid) {
      v[i] = load_pack<T, VEC>(x + offset);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i].v[j] = from_acc<T>(A(0));
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) ss += to_acc<A>(v[i].v[j]) * to_acc<A>(v[i].v[j]);
  }
  ss = group_sum(ss, geo.group);
  const A inv = A(1) / sqrt(ss / A(geo.dim) + A(eps));
  if (!valid) return;
  if (lane == 0) rstd[row] = inv;
  const int64_t pos = table_position(row, geo);
  const int rotating_pairs = geo.dim / 4;
#pragma unroll
  for (int i = 0; i < PACKS; ++i) {
    const int first_pair = (lane + i * geo.group) * (VEC / 2);
    Pack<T, VEC> out;
#pragma unroll
    for (int u = 0; u < VEC / 2; ++u) {
      const int pair = first_pair + u;
      // The normalised value as rmsnorm_forward stores it.
      const T na = from_acc<T>(to_acc<A>(v[i].v[2 * u]) * inv), nb = from_acc<T>(to_acc<A>(v[i].v[2 * u + 1]) * inv);
      if (pair < rotating_pairs) {
        const A a = to_acc<A>(na), b = to_acc<A>(nb);
        const A c = to_acc<A>(cos[pos * rotating_pairs + pair]), s = to_acc<A>(sin[pos * rotating_pairs + pair]);
        out.v[2 * u] = from_acc<T>(c * a + s * b);
        out.v[2 * u + 1] = from_acc<T>(c * b - s * a);
      } else {
        out.v[2 * u] = na;
        out.v[2 * u + 1] = nb;
      }
    }
    store_pack<T, VEC>(y + row * geo.dim + first_pair * 2, out);
  }
}

// kOverwrite: dx is written, not added to (the first writer of the gradient): the bits of adding into zeros.
template <typename T, typename A, int VEC, int PACKS, bool kOverwrite>
__global__ void __launch_bounds__(kThreads)
    qk_norm_rotary_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const A* __restrict__ rstd,
                                   const T* __restrict__ cos, const T* __restrict__ sin, T* __restrict__ dx,
                                   const RowGeometry geo) {
  const int lane = threadIdx.x % geo.group;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / geo.group) + threadIdx.x / geo.group;
  const bool valid = row < geo.rows;
  const int64_t pos = valid ? table_position(row, geo) : 0;
  const int rotating_pairs = geo.dim / 4;
  Pack<T, VEC> g[PACKS], xv[PACKS];
  A dot = 0;
#pragma unroll
  for (int i = 0; i < PACKS; ++i) {
    const int first_pair = (lane + i * geo.group) * (VEC / 2);
    const int64_t offset = row * geo.dim + first_pair * 2;
    Pack<T, VEC> d;
    if (valid) {
      d = load_pack<T, VEC>(dy + offset);
      xv[i] = load_pack<T, VEC>(x + offset);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) d.v[j] = xv[i].v[j] = from_acc<T>(A(0));
    }
#pragma unroll
    for (int u = 0; u < VEC / 2; ++u) {
      const int pair = first_pair + u;
      if (pair < rotating_pairs && valid) {  // R(−θ)·dy, rounded as rotary_backward stores it
        const A a = to_acc<A>(d.v[2 * u]), b = to_acc<A>(d.v[2 * u + 1]);
        const A c = to_acc<A>(cos[pos * rotating_pairs + pair]), s = to_acc<A>(sin[pos * rotating_pairs + pair]);
        g[i].v[2 * u] = from_acc<T>(c * a - s * b);
        g[i].v[2 * u + 1] = from_acc<T>(c * b + s * a);
      } else {
        g[i].v[2 * u] = d.v[2 * u];
        g[i].v[2 * u + 1] = d.v[2 * u + 1];
      }
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) dot += to_acc<A>(g[i].v[j]) * to_acc<A>(xv[i].v[j]);
  }
  dot = group_sum(dot, geo.group);
  if (!valid) return;
  const A inv = rstd[row];
  const A coef = inv * inv * inv * dot / A(geo.dim);
#pragma unroll
  for (int i = 0; i < PACKS; ++i) {
    T* out = dx + row * geo.dim + (lane + i * geo.group) * VEC;
    Pack<T, VEC> acc;
    if constexpr (!kOverwrite) acc = load_pack<T, VEC>(out);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A old = kOverwrite ? A(0) : to_acc<A>(acc.v[j]);
      acc.v[j] = from_acc<T>(old + inv * to_acc<A>(g[i].v[j]) - coef * to_acc<A>(xv[i].v[j]));
    }
    store_pack<T, VEC>(out, acc);
  }
}

// Packs per lane (1 or 2) and lanes per head vector for the fused kernels, or 0 when they do not apply: the head
// vector must split into a power of two of at most 32 lanes holding 16-byte packs.
struct FusedShape {
  int packs_per_lane = 0, group = 0;
};

template <typename T>
FusedShape fused_shape(int64_t dim, std::initializer_list<const Tensor*> tensors) {
  constexpr int kVec = kVec16<T>;
  for (const Tensor* t : tensors) {
    if (!aligned16(t->raw())) return {};
  }
  if (dim % kVec != 0) return {};
  const int64_t packs = dim / kVec;
  auto power_of_two = [](int64_t n) { return n > 0 && (n & (n - 1)) == 0; };
  if (packs <= 32 && power_of_two(packs)) return {1, static_cast<int>(packs)};
  if (packs % 2 == 0 && packs / 2 <= 32 && power_of_two(packs / 2)) return {2, static_cast<int>(packs / 2)};
  return {};
}

RowGeometry geometry(const Tensor& x, const FusedShape& shape, RotaryLayout layout) {
  return {x.size(0) * x.size(1), static_cast<int>(x.size(1)), static_cast<int>(x.size(2)), shape.group,
          layout == RotaryLayout::paired};
}

unsigned row_blocks(const RowGeometry& geo) {
  const int64_t per_block = kThreads / geo.group;
  return static_cast<unsigned>((geo.rows + per_block - 1) / per_block);
}

}  // namespace

void qk_norm_rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y,
                            Tensor& rstd, float eps) {
  if (x.numel() == 0) return;
  dispatch_floating_cuda(x.dtype(), "qk_norm_rotary_forward", [&]<typename T, typename A>() {
    const FusedShape shape = fused_shape<T>(x.size(2), {&x, &y});
    if (shape.group == 0) {
      Tensor normed = Tensor::empty(x.shape(), x.dtype(), Device::cuda);
      cuda::rmsnorm_forward(x, normed, rstd, eps);
      cuda::rotary_forward(normed, cos, sin, layout, y);
      return;
    }
    const RowGeometry geo = geometry(x, shape, layout);
    constexpr int kVec = kVec16<T>;
    auto launch = [&]<int PACKS>() {
      qk_norm_rotary_forward_kernel<T, A, kVec, PACKS><<<row_blocks(geo), kThreads, 0, current_stream()>>>(
          device_ptr<T>(x), device_ptr<T>(cos), device_ptr<T>(sin), device_ptr<T>(y), device_ptr<A>(rstd), geo, eps);
    };
    if (shape.packs_per_lane == 1) {
      launch.template operator()<1>();
    } else {
      launch.template operator()<2>();
    }
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void qk_norm_rotary_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& cos,
                             const Tensor& sin, RotaryLayout layout, Tensor& dx, GradWrite write) {
  if (x.numel() == 0) return;
  dispatch_floating_cuda(x.dtype(), "qk_norm_rotary_backward", [&]<typename T, typename A>() {
    const FusedShape shape = fused_shape<T>(x.size(2), {&dy, &x, &dx});
    if (shape.group == 0) {
      Tensor g = Tensor::zeros(x.shape(), x.dtype(), Device::cuda);
      cuda::rotary_backward(dy, cos, sin, layout, g);
      cuda::rmsnorm_backward(g, x, rstd, dx, write);
      return;
    }
    const RowGeometry geo = geometry(x, shape, layout);
    constexpr int kVec = kVec16<T>;
    auto launch = [&]<int PACKS, bool kOverwrite>() {
      qk_norm_rotary_backward_kernel<T, A, kVec, PACKS, kOverwrite><<<row_blocks(geo), kThreads, 0, current_stream()>>>(
          device_ptr<T>(dy), device_ptr<T>(x), device_ptr<A>(rstd), device_ptr<T>(cos), device_ptr<T>(sin),
          device_ptr<T>(dx), geo);
    };
    const bool overwrite = write == GradWrite::overwrite;
    if (shape.packs_per_lane == 1) {
      overwrite ? launch.template operator()<1, true>() : launch.template operator()<1, false>();
    } else {
      overwrite ? launch.template operator()<2, true>() : launch.template operator()<2, false>();
    }
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
