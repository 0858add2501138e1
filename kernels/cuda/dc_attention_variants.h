#pragma once
// Numbered versions of the CUDA DC correction (kernels/dc_attention.h). cuda::dc_attention_forward / _backward run
// v2 where it applies (dc_attention_v2_supports) and v1 otherwise; the GPU tests check both against the CPU
// reference and attention_bench times them side by side (kernels/cuda/NOTES.md).
//   v1 (dc_attention.cu): one block per token on CUDA cores, every dtype and shape; windows re-read from L2.
//   v2 (dc_attention_mma.cu): 64 tokens per block, bf16 tensor-core products, head dim 128, ≤ 8 heads,
//       windows of at most kDcMaxKeysV2 keys.
#include <cstdint>

#include "kernels/dc_attention.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

inline constexpr int64_t kDcMaxKeysV2 = 113;  // 16 rows + window − 1 must fit one warp's 128-wide span

bool dc_attention_v2_supports(const Tensor& q, const Tensor& gates, int64_t keys);

void dc_attention_forward_v1(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                             const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                             float scale, int64_t keys);
void dc_attention_backward_v1(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse,
                              Tensor& dq, Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys);
void dc_attention_forward_v2(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                             const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                             float scale, int64_t keys);
void dc_attention_backward_v2(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse,
                              Tensor& dq, Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys);

}  // namespace gpt::cuda
