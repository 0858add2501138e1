// The production CUDA backward (attention/kernels.h): the promoted features of attention/backward.cuh and the
// candidate, cuda::attention_backward, which runs the one attention_backward_in_use names, and the row dot every
// backward kernel starts with.
#include "kernels/attention.h"
#include "kernels/cuda/attention/backward.cuh"
#include "kernels/cuda/attention/kernels.h"
#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

namespace {

constexpr BackwardFeatures kAsyncEpilogue{.async_epilogue = true};
constexpr BackwardFeatures kDeferredDq{.async_epilogue = true, .deferred_dq = true};

// D[h, t] = Σ_d dy·y, one warp per (token, head).
__global__ void row_dot_kernel(const __nv_bfloat16* __restrict__ dy, const __nv_bfloat16* __restrict__ y,
                               float* __restrict__ d, int64_t tokens, int heads) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= tokens * heads) return;
  const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(dy + row * kHeadDim) + lane * 2;
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(y + row * kHeadDim) + lane * 2;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 x = __bfloat1622float2(a[i]), z = __bfloat1622float2(b[i]);
    s += x.x * z.x + x.y * z.y;
  }
  s = warp_sum(s);
  if (lane == 0) {
    const int64_t t = row / heads, h = row % heads;
    d[h * tokens + t] = s;
  }
}

}  // namespace

AttentionScratch attention_row_dot(const Tensor& dy, const Tensor& y, const AttentionProblem& p) {
  const cudaStream_t stream = current_stream();
  // Stream-ordered scratch for D: no device-wide synchronization on allocation or release.
  AttentionScratch dsum(
      static_cast<float*>(stream_ordered_alloc(static_cast<size_t>(p.heads * p.tokens) * sizeof(float), stream)),
      StreamFree{stream});
  const int64_t rows = p.tokens * p.heads;
  row_dot_kernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(device_bf16(dy), device_bf16(y), dsum.get(),
                                                                            p.tokens, p.heads);
  GPT_CUDA_CHECK_LAUNCH();
  return dsum;
}

void attention_backward_async_epilogue(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                       Tensor& dk, Tensor& dv, int64_t window, float scale,
                                       AttentionGradWrites writes) {
  launch_fused_backward<kAsyncEpilogue>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, writes);
}

void attention_backward_deferred_dq(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                    Tensor& dk, Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  launch_fused_backward<kDeferredDq>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, writes);
}

void attention_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                        const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, int64_t window,
                        float scale, AttentionGradWrites writes) {
  attention_backward_in_use().fn(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, writes);
}

}  // namespace gpt::cuda
