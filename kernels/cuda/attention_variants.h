#pragma once
// Numbered versions of the CUDA attention kernels (kernels/attention.h semantics, bf16, head dim 128). The
// public cuda::attention_forward / attention_backward call the promoted version; the older ones stay so that the
// GPU tests check every version and attention_bench times them side by side (kernels/cuda/NOTES.md has the
// figures and predictions).
//   forward v1: 64 queries × 4 warps per block, synchronous tile loads, per-element masks on every tile.
//   forward v2: 128 queries × 8 warps, cp.async double-buffered K/V, ldmatrix fragments, masks only on boundary
//               tiles, per-warp skipping of tiles the warp cannot see, exp2 with the scale folded into one FFMA.
//   forward v3: v2 with 4 warps × 32 rows (two 16-row tiles per warp share every K/V fragment: half the
//               shared-memory reads per FLOP, twice the accumulator registers).
//   forward v4: v2's tiling and masks on Hopper's warpgroup MMA (wgmma): two warpgroups × 64 rows, swizzled
//               shared tiles, P in registers as the A operand of P·V, K/V triple-buffered with cp.async.
//   forward v5: v4 with S of tile n + 1 issued before the softmax of tile n (tensor cores and softmax overlap
//               inside the warpgroup), 4 K/V stages.
//   forward v6: v4 with Q held in registers as the A operand of Q·Kᵀ (shared-memory reads of S halve).
//   forward v7: v4's tiles in a warp-specialised block: a producer warp loads Q and K/V with TMA into 4 stages
//               (mbarriers), the two consumer warpgroups walk the tiles independently (no block-wide barrier per
//               tile), overlap each softmax with their previous P·V and take turns at the tensor cores.
//   forward v8: v7 with three consumer warpgroups (192 queries per block: each K/V tile feeds 1.5× the rows) and a
//               producer warpgroup that gives its registers to them (setmaxnreg).
//   forward v9: v8's block made persistent: one block per SM takes (query block, head) items heaviest first from a
//               ticket counter, and loads the next item's Q (two Q tiles) and K/V while it finishes the current one.
//   forward v10/v11: v8/v9 whose softmax raises its running max only when a score exceeds it by more than 2^8
//               (most tiles then skip the max reduction across threads and the rescale of O).
//   forward v12: v10 whose warpgroups issue their tensor-core bursts whenever ready instead of round robin.
//   forward v13: v11 (persistent) without the round robin, as v12.
//   backward v1: dK/dV pass (64 keys × 4 warps) + dQ pass (64 queries × 4 warps), synchronous tile loads.
//   backward v2: the same two passes with cp.async double-buffered tiles, ldmatrix fragments, boundary-only masks
//                and per-warp tile skipping.
//   backward v3: the same two passes on wgmma: one warpgroup × 64 rows per block, swizzled tiles, Pᵀ/dSᵀ (dK/dV
//                pass) and dS (dQ pass) in registers as the A operands of the accumulating products.
//   backward v4: one pass of five products per tile pair: 128 keys per block (two consumer warpgroups) and a TMA
//                producer; dQ = dS·K from dSᵀ in shared memory, added into a f32 accumulator by the copy engine in
//                a fixed order per query tile (deterministic).
//   backward v5: v4 whose dK/dV epilogue is added by the copy engine from shared memory (bf16 adds at L2) instead
//                of a read-modify-write by the consumer threads.
//   backward v6: v5 with each tile's dQ product issued before dK's, so that staging dQ overlaps the dK product.
//   backward v7: v5 with two dSᵀ tiles and each tile's dQ product issued after the next tile's products, so that the
//                two warpgroups drift apart instead of meeting twice per tile (cu_seqlens read from global memory).
#include <cstdint>
#include <iterator>

#include "kernels/attention.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

using AttentionForwardFn = void (*)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                    Tensor& y, Tensor& lse, int64_t window, float scale);
// Backward versions store each gradient as `writes` says (kernels/attention.h): v5+ natively, v4 dq natively, the
// others (and v4's dk, dv) by a zero fill before they add.
using AttentionBackwardFn = void (*)(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                     Tensor& dk, Tensor& dv, int64_t window, float scale,
                                     AttentionGradWrites writes);

void attention_forward_v1(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v2(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v3(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale);
void attention_forward_v4(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
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
void attention_forward_v12(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                           Tensor& lse, int64_t window, float scale);
void attention_forward_v13(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                           Tensor& lse, int64_t window, float scale);
void attention_backward_v1(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v2(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v3(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v4(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v5(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v6(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);
void attention_backward_v7(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes);

struct AttentionForwardVariant {
  const char* name;
  AttentionForwardFn fn;
};
struct AttentionBackwardVariant {
  const char* name;
  AttentionBackwardFn fn;
};

// Every version, oldest first; cuda::attention_forward / attention_backward run the one marked promoted.
inline constexpr AttentionForwardVariant kAttentionForwardVariants[] = {
    {"v1", attention_forward_v1}, {"v2", attention_forward_v2}, {"v3", attention_forward_v3},
    {"v4", attention_forward_v4}, {"v5", attention_forward_v5},
    {"v6", attention_forward_v6}, {"v7", attention_forward_v7},
    {"v8", attention_forward_v8}, {"v9", attention_forward_v9},
    {"v10", attention_forward_v10}, {"v11", attention_forward_v11}, {"v12", attention_forward_v12},
    {"v13", attention_forward_v13}};
inline constexpr int kPromotedForward = 11;  // v12: 1.07× v8 (2026-12-04 s8 calls 5, 6; NOTES.md)
inline constexpr AttentionBackwardVariant kAttentionBackwardVariants[] = {
    {"v1", attention_backward_v1}, {"v2", attention_backward_v2}, {"v3", attention_backward_v3},
    {"v4", attention_backward_v4}, {"v5", attention_backward_v5}, {"v6", attention_backward_v6},
    {"v7", attention_backward_v7}};
inline constexpr int kPromotedBackward = 4;  // v5: 1.08–1.11× v4; stage-2 step 767.6 → 763.8 ms (NOTES.md)
static_assert(kPromotedForward < static_cast<int>(std::size(kAttentionForwardVariants)));
static_assert(kPromotedBackward < static_cast<int>(std::size(kAttentionBackwardVariants)));

// The version cuda::attention_forward / attention_backward run: the promoted one, or the one named by
// SPEEDRUN_ATTENTION_FORWARD / SPEEDRUN_ATTENTION_BACKWARD (e.g. "v4"), so that a whole training step can be timed
// with a candidate before it is promoted. Read once per process; an unknown name is an error that lists the known.
const AttentionForwardVariant& attention_forward_in_use();
const AttentionBackwardVariant& attention_backward_in_use();

}  // namespace gpt::cuda
