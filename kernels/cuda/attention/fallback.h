#pragma once
// The production attention kernels' fallbacks (attention/kernels.h runs them, never chooses them): tensors whose
// base the tensor copy engine cannot address (TMA needs 16-byte alignment), and non-positive scales (the online
// softmax takes row maxima of raw scores). Each has the semantics of kernels/attention.h.
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

// Two warpgroups of 64 query rows on wgmma with cp.async-loaded K/V tiles (attention/forward_fallback.cuh); passes
// non-positive scales on to attention_forward_any_scale.
void attention_forward_without_tma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                   Tensor& y, Tensor& lse, int64_t window, float scale);
// Four warps of 16 query rows on mma.sync with synchronous tile loads and per-element masks: any scale.
void attention_forward_any_scale(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                                 Tensor& lse, int64_t window, float scale);
// A dK/dV pass and a dQ pass on wgmma, one warpgroup of 64 rows per block, gradients added (after a zero fill where
// `writes` asks to overwrite).
void attention_backward_without_tma(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                    Tensor& dk, Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);

}  // namespace gpt::cuda
