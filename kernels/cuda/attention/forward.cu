// The production CUDA forward (attention/kernels.h): the promoted configuration of attention/forward.cuh and the
// candidate, and cuda::attention_forward, which runs the one attention_forward_in_use names.
#include "kernels/attention.h"
#include "kernels/cuda/attention/forward.cuh"
#include "kernels/cuda/attention/kernels.h"

namespace gpt::cuda {

namespace {

constexpr ForwardOptions kWarpSpecialized{.consumers = 3, .lazy_rescale = true};
constexpr ForwardOptions kPersistent{.consumers = 3, .persistent = true, .lazy_rescale = true};

__global__ void double_cu_seqlens_kernel(const int* __restrict__ in, int* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * in[i];
}

}  // namespace

void attention_forward_warp_specialized(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                        Tensor& y, Tensor& lse, int64_t window, float scale) {
  launch_forward<kWarpSpecialized>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_persistent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                  Tensor& y, Tensor& lse, int64_t window, float scale) {
  launch_forward<kPersistent>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                       Tensor& lse, int64_t window, float scale) {
  attention_forward_in_use().fn(q, k, v, cu_seqlens, y, lse, window, scale);
}

void double_cu_seqlens(const Tensor& cu_seqlens, Tensor& doubled) {
  const int n = static_cast<int>(cu_seqlens.size(0));
  double_cu_seqlens_kernel<<<(n + 255) / 256, 256, 0, current_stream()>>>(device_i32(cu_seqlens), device_i32(doubled),
                                                                          n);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
