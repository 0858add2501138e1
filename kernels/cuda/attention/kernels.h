#pragma once
// The production CUDA attention kernels (kernels/attention.h semantics, bf16, head dim 128): per direction the
// promoted configuration, which cuda::attention_forward / attention_backward run, and at most one candidate that a
// whole training step can be timed with before it is promoted. Superseded versions live in the kernel ladder
// (kernels/cuda/ladder/), which only attention_bench and the `ladder` GPU tests link. kernels/cuda/NOTES.md has the
// design and the current figures of each.
//   forward "warp_specialized" (promoted): three consumer warpgroups of 64 query rows fed by a TMA producer
//       warpgroup, lazily raised softmax max, tensor-core bursts issued whenever each warpgroup is ready
//       (attention/forward.cuh, ForwardOptions{.lazy_rescale = true}).
//   forward "persistent" (candidate): the same block made persistent, one per SM, taking (query block, head) items
//       heaviest first and loading the next item's Q while it finishes the current one.
//   backward "async_epilogue" (promoted): one pass of five products per tile pair, 128 keys per block, dQ added in a
//       fixed order by the copy engine, dK/dV added by the copy engine from shared memory (attention/backward.cuh,
//       BackwardFeatures{.async_epilogue = true}).
//   backward "deferred_dq" (candidate): the same with two dSᵀ tiles and each tile's dQ product issued after the
//       next tile's products, so that the two consumer warpgroups need not meet at every tile.
// Inputs the copy engine cannot address, and non-positive scales, go to the fallbacks of attention/fallback.h.
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

using AttentionForwardFn = void (*)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                    Tensor& y, Tensor& lse, int64_t window, float scale);
// Every kernel stores each gradient as `writes` says (kernels/attention.h).
using AttentionBackwardFn = void (*)(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                     Tensor& dk, Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);

void attention_forward_warp_specialized(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                        Tensor& y, Tensor& lse, int64_t window, float scale);
void attention_forward_persistent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                  Tensor& y, Tensor& lse, int64_t window, float scale);
void attention_backward_async_epilogue(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                       Tensor& dk, Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_deferred_dq(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                    Tensor& dk, Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);

struct AttentionForwardKernel {
  const char* name;
  AttentionForwardFn fn;
};
struct AttentionBackwardKernel {
  const char* name;
  AttentionBackwardFn fn;
};

inline constexpr AttentionForwardKernel kPromotedForward{"warp_specialized", attention_forward_warp_specialized};
inline constexpr AttentionForwardKernel kCandidateForward{"persistent", attention_forward_persistent};
inline constexpr AttentionBackwardKernel kPromotedBackward{"async_epilogue", attention_backward_async_epilogue};
inline constexpr AttentionBackwardKernel kCandidateBackward{"deferred_dq", attention_backward_deferred_dq};

// The production kernels, promoted first: the GPU tests check each of them.
inline constexpr AttentionForwardKernel kAttentionForwardKernels[] = {kPromotedForward, kCandidateForward};
inline constexpr AttentionBackwardKernel kAttentionBackwardKernels[] = {kPromotedBackward, kCandidateBackward};

// The kernel cuda::attention_forward / attention_backward run: the promoted one, or the one named by
// SPEEDRUN_ATTENTION_FORWARD / SPEEDRUN_ATTENTION_BACKWARD (e.g. "persistent"). Read once per process; a name that
// is not in the tables above is an error that lists the known names.
const AttentionForwardKernel& attention_forward_in_use();
const AttentionBackwardKernel& attention_backward_in_use();

}  // namespace gpt::cuda
