// Kernel ladder, backward v4 and v6 (kernels/cuda/ladder/attention_versions.h): the superseded features of the
// production kernel template attention/backward.cuh (v5 and v7 are the production ones).
#include "kernels/cuda/attention/backward.cuh"
#include "kernels/cuda/ladder/attention_versions.h"

namespace gpt::cuda {

namespace {

constexpr BackwardFeatures kV4{}, kV6{.async_epilogue = true, .dq_before_dk = true};

}  // namespace

namespace ladder {

void attention_backward_v4(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  launch_fused_backward<kV4>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, writes);
}

void attention_backward_v6(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  launch_fused_backward<kV6>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, writes);
}

}  // namespace ladder
}  // namespace gpt::cuda
