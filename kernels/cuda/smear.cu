// CUDA kernels of kernels/smear.h. Forward and the per-token part of the backward run one warp per row; the
// parameter gradients (dw, dλ) are a second, single-block pass over the saved per-token values in a fixed order
// (deterministic, in the accumulation type; dλ in double as the CPU reference does).
#include "kernels/cuda/device_utils.cuh"
#include "kernels/smear.h"

namespace gpt::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kWidth = static_cast<int>(kSmearGateWidth);

template <typename T, typename A>
__device__ __forceinline__ A lambda_for(const A* lambda) {
  return static_cast<A>(scalar_for<T>(static_cast<double>(lambda[0])));
}

template <typename T, typename A>
__global__ void smear_forward_kernel(const T* __restrict__ e, const T* __restrict__ w, const A* __restrict__ lambda,
                                     T* __restrict__ out, A* __restrict__ sig, int64_t rows, int d) {
  const int lane = threadIdx.x % 32;
  const A lam = lambda_for<T, A>(lambda);
  for (int64_t t = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; t < rows; t += gridDim.x * int64_t{kWarps}) {
    const T* et = e + t * d;
    if (t == 0) {
      for (int c = lane; c < d; c += 32) out[c] = et[c];
      if (lane == 0) sig[0] = A(0);
      continue;
    }
    A z = lane < kWidth ? to_acc<A>(w[lane]) * to_acc<A>(et[lane]) : A(0);
    z = warp_sum(z);
    // z is rounded to e's dtype like a GEMM output, then σ in double (the CPU reference's order).
    const A s = static_cast<A>(sigmoid_d(static_cast<double>(to_acc<A>(from_acc<T>(z)))));
    if (lane == 0) sig[t] = s;
    const A g = lam * s;
    const T* prev = et - d;
    for (int c = lane; c < d; c += 32) out[t * d + c] = from_acc<T>(to_acc<A>(et[c]) + g * to_acc<A>(prev[c]));
  }
}

// de_t += dout_t + g_{t+1}·dout_{t+1} + [t ≥ 1]·dz_t·w; saves dg_t and dz_t for the parameter pass.
template <typename T, typename A>
__global__ void smear_backward_rows_kernel(const T* __restrict__ dout, const T* __restrict__ e, const T* __restrict__ w,
                                           const A* __restrict__ lambda, const A* __restrict__ sig, T* __restrict__ de,
                                           A* __restrict__ dg_out, A* __restrict__ dz_out, int64_t rows, int d) {
  const int lane = threadIdx.x % 32;
  const A lam = lambda_for<T, A>(lambda);
  for (int64_t t = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; t < rows; t += gridDim.x * int64_t{kWarps}) {
    const T* gt = dout + t * d;
    A dz = 0;
    if (t >= 1) {
      const T* prev = e + (t - 1) * d;
      A dot = 0;
      for (int c = lane; c < d; c += 32) dot += to_acc<A>(gt[c]) * to_acc<A>(prev[c]);
      dot = warp_sum(dot);
      dz = dot * lam * sig[t] * (A(1) - sig[t]);
      if (lane == 0) {
        dg_out[t] = dot;
        dz_out[t] = dz;
      }
    } else if (lane == 0) {
      dg_out[0] = A(0);
      dz_out[0] = A(0);
    }
    const bool has_next = t + 1 < rows;
    const A g_next = has_next ? lam * sig[t + 1] : A(0);
    for (int c = lane; c < d; c += 32) {
      A v = to_acc<A>(gt[c]);
      if (has_next) v += g_next * to_acc<A>(gt[d + c]);
      if (t >= 1 && c < kWidth) v += dz * to_acc<A>(w[c]);
      de[t * d + c] = from_acc<T>(to_acc<A>(de[t * d + c]) + v);
    }
  }
}

// dw[c] += Σ_t dz_t·e_t[c] (c < 12), dλ += Σ_t dg_t·σ_t: one block, rows strided over threads, fixed-order tree.
template <typename T, typename A>
__global__ void smear_param_grad_kernel(const T* __restrict__ e, const A* __restrict__ sig, const A* __restrict__ dg,
                                        const A* __restrict__ dz, T* __restrict__ dw, A* __restrict__ dlambda,
                                        int64_t rows, int d) {
  __shared__ A shared_a[32];
  __shared__ double shared_d[32];
  A part[kWidth];
#pragma unroll
  for (int c = 0; c < kWidth; ++c) part[c] = A(0);
  double lam_part = 0.0;
  for (int64_t t = 1 + threadIdx.x; t < rows; t += blockDim.x) {
    lam_part += static_cast<double>(dg[t] * sig[t]);
#pragma unroll
    for (int c = 0; c < kWidth; ++c) part[c] += dz[t] * to_acc<A>(e[t * d + c]);
  }
#pragma unroll
  for (int c = 0; c < kWidth; ++c) {
    const A total = block_sum(part[c], shared_a);
    if (threadIdx.x == 0) dw[c] = from_acc<T>(to_acc<A>(dw[c]) + total);
  }
  const double lam_total = block_sum(lam_part, shared_d);
  if (threadIdx.x == 0) dlambda[0] = static_cast<A>(static_cast<double>(dlambda[0]) + lam_total);
}

unsigned row_blocks(int64_t rows) { return blocks_for(rows, kWarps, 1 << 20); }

}  // namespace

void smear_forward(const Tensor& e, const Tensor& w, const Tensor& lambda, Tensor& out, Tensor& sig) {
  const int64_t rows = e.size(0);
  const int d = static_cast<int>(e.size(1));
  if (rows == 0) return;
  dispatch_floating_cuda(e.dtype(), "smear_forward", [&]<typename T, typename A>() {
    smear_forward_kernel<T, A><<<row_blocks(rows), kWarps * 32>>>(
        device_ptr<T>(e), device_ptr<T>(w), device_ptr<A>(lambda), device_ptr<T>(out), device_ptr<A>(sig), rows, d);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void smear_backward(const Tensor& dout, const Tensor& e, const Tensor& w, const Tensor& lambda, const Tensor& sig,
                    Tensor& de, Tensor& dw, Tensor& dlambda) {
  const int64_t rows = e.size(0);
  const int d = static_cast<int>(e.size(1));
  if (rows == 0) return;
  dispatch_floating_cuda(e.dtype(), "smear_backward", [&]<typename T, typename A>() {
    DeviceScratch per_token(2 * static_cast<size_t>(rows) * sizeof(A), kLegacyDefaultStream);
    A* dg = per_token.as<A>();
    A* dz = dg + rows;
    smear_backward_rows_kernel<T, A><<<row_blocks(rows), kWarps * 32>>>(
        device_ptr<T>(dout), device_ptr<T>(e), device_ptr<T>(w), device_ptr<A>(lambda), device_ptr<A>(sig),
        device_ptr<T>(de), dg, dz, rows, d);
    GPT_CUDA_CHECK_LAUNCH();
    smear_param_grad_kernel<T, A>
        <<<1, 1024>>>(device_ptr<T>(e), device_ptr<A>(sig), dg, dz, device_ptr<T>(dw), device_ptr<A>(dlambda), rows, d);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
