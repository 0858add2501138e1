#pragma once
// rmsnorm's backward of one row on CUDA, shared by rmsnorm_backward (kernels/cuda/rmsnorm.cu) and the fused kernel
// of mix_rmsnorm_backward (kernels/cuda/mix_norm_backward.cu), which must give its bits:
//   dx = old + r·dy − c·x,  c = r³·(Σ dy·x)/n.
// The pieces are written with explicit FMAs (the contraction the compiler chose for the plain expressions: dot +
// dy·x and old + r·dy as FMAs, then − c·x folded into one), so no kernel that inlines them can contract differently.
#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

// Σ dy[i]·x[i] over the warp's row: lane l adds i = l, l + 32, ... in order, then warp_sum. Every lane gets it.
template <typename A, typename T>
__device__ __forceinline__ A warp_row_dot(const T* dy, const T* x, int n, int lane) {
  A dot = 0;
  for (int i = lane; i < n; i += 32) dot = fma_rn(to_acc<A>(dy[i]), to_acc<A>(x[i]), dot);
  return warp_sum(dot);
}

template <typename A>
__device__ __forceinline__ A rms_backward_coefficient(A rstd, A dot, int n) {
  return rstd * rstd * rstd * dot / A(n);
}

template <typename A>
__device__ __forceinline__ A rms_backward_element(A old, A dy, A x, A rstd, A coefficient) {
  return fma_rn(-coefficient, x, fma_rn(rstd, dy, old));
}

}  // namespace gpt::cuda
