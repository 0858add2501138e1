#pragma once
// The kernel ladder of the CUDA attention (kernels/attention.h semantics, bf16, head dim 128): every version in the
// order it was written, each a step that was measured against the one before (kernels/cuda/NOTES.md). The
// production kernels (kernels/cuda/attention/kernels.h) are steps of it too, listed here under their version
// numbers; the others are superseded and live in this folder only, built into the library speedrun_attention_ladder
// that attention_bench and the `ladder` GPU tests link (never the trainer).
//   forward v1: 64 queries × 4 warps per block, synchronous tile loads, per-element masks on every tile
//               (production: attention_forward_any_scale, the fallback for non-positive scales).
//   forward v2: 128 queries × 8 warps, cp.async double-buffered K/V, ldmatrix fragments, masks only on boundary
//               tiles, per-warp skipping of tiles the warp cannot see, exp2 with the scale folded into one FFMA.
//   forward v3: v2 with 4 warps × 32 rows (two 16-row tiles per warp share every K/V fragment).
//   forward v4: v2's tiling and masks on Hopper's warpgroup MMA (wgmma): two warpgroups × 64 rows, swizzled
//               shared tiles, P in registers as the A operand of P·V, K/V triple-buffered with cp.async
//               (production: attention_forward_without_tma, the fallback for tensors TMA cannot address).
//   forward v5: v4 with S of tile n + 1 issued before the softmax of tile n, 4 K/V stages.
//   forward v6: v4 with Q held in registers as the A operand of Q·Kᵀ.
//   forward v7: v4's tiles in a warp-specialised block: a TMA producer warp, two consumer warpgroups that walk the
//               tiles independently and take turns at the tensor cores (attention/forward.cuh, consumers = 2).
//   forward v8: v7 with three consumer warpgroups and a producer warpgroup that gives its registers to them.
//   forward v9: v8 made persistent (persistent = true).
//   forward v10/v11: v8/v9 with a lazily raised softmax max (lazy_rescale = true).
//   forward v12: v10 without turns (production, promoted: "warp_specialized").
//   forward v13: v11 without turns (production, candidate: "persistent").
//   backward v1: dK/dV pass (64 keys × 4 warps) + dQ pass (64 queries × 4 warps), synchronous tile loads.
//   backward v2: the same two passes with cp.async double-buffered tiles, ldmatrix fragments, boundary-only masks
//                and per-warp tile skipping.
//   backward v3: the same two passes on wgmma (production: attention_backward_without_tma).
//   backward v4: one pass of five products per tile pair, TMA producer, dQ added in a fixed order by the copy
//                engine (attention/backward.cuh, no features).
//   backward v5: v4 with the dK/dV epilogue added by the copy engine (production, promoted: "async_epilogue").
//   backward v6: v5 with each tile's dQ product issued before dK's (dq_before_dk).
//   backward v7: v5 with two dSᵀ tiles and each tile's dQ product deferred (production, candidate: "deferred_dq").
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/kernels.h"
#include "kernels/tensor.h"

namespace gpt::cuda::ladder {

void attention_forward_v2(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v3(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v5(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v6(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v7(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v8(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v9(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v10(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                           Tensor& lse, int64_t window, float scale);
void attention_forward_v11(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                           Tensor& lse, int64_t window, float scale);
void attention_backward_v1(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v2(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v4(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v6(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);

struct AttentionForwardVersion {
  const char* name;
  AttentionForwardFn fn;
};
struct AttentionBackwardVersion {
  const char* name;
  AttentionBackwardFn fn;
};

// Every version, oldest first, by name (tests and attention_bench look versions up by name, never by position).
inline constexpr AttentionForwardVersion kAttentionForwardVersions[] = {
    {"v1", attention_forward_any_scale},   {"v2", attention_forward_v2},   {"v3", attention_forward_v3},
    {"v4", attention_forward_without_tma}, {"v5", attention_forward_v5},   {"v6", attention_forward_v6},
    {"v7", attention_forward_v7},          {"v8", attention_forward_v8},   {"v9", attention_forward_v9},
    {"v10", attention_forward_v10},        {"v11", attention_forward_v11}, {"v12", attention_forward_warp_specialized},
    {"v13", attention_forward_persistent}};
inline constexpr AttentionBackwardVersion kAttentionBackwardVersions[] = {{"v1", attention_backward_v1},
                                                                          {"v2", attention_backward_v2},
                                                                          {"v3", attention_backward_without_tma},
                                                                          {"v4", attention_backward_v4},
                                                                          {"v5", attention_backward_async_epilogue},
                                                                          {"v6", attention_backward_v6},
                                                                          {"v7", attention_backward_deferred_dq}};

// The version named `name`; an error naming it when the ladder has none.
const AttentionForwardVersion& forward_version(const char* name);
const AttentionBackwardVersion& backward_version(const char* name);

}  // namespace gpt::cuda::ladder
