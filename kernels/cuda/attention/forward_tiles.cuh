#pragma once
// Tiles, row state and per-tile steps of the wgmma attention forward kernels (kernels/cuda/attention/forward.cuh and
// forward_fallback.cuh, and their ladder versions): warpgroups of 64 query rows (kBlockQ = 128 rows per block except
// the three-consumer blocks' 192), 64-key K/V tiles in the 128-byte swizzle of kernels/cuda/wgmma.cuh, S = Q·Kᵀ
// from shared memory, P in registers as the A operand of P·V; and the arguments all of them take besides Q, K, V.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/wgmma_common.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/fast_math.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda::attn::forward_tiles {

constexpr int kBlockQ = 128, kBlockK = 64;
constexpr int kWarpgroupRows = 64;
constexpr int kRowBytes = wgmma::kSlabRowBytes;
constexpr int kQSlabBytes = kBlockQ * kRowBytes, kKvSlabBytes = kBlockK * kRowBytes;  // one 64-column slab
constexpr int kQBytes = 2 * kQSlabBytes, kKvBytes = 2 * kKvSlabBytes;                 // head dim 128 = two slabs
static_assert(kBlockQ * kHeadDim * sizeof(__nv_bfloat16) <= kQBytes, "the output is staged in the Q tile");

// What every forward kernel takes besides its Q, K and V: the segments, the outputs, the shape, the window and the
// scale in log2 units.
struct ForwardProblem {
  const int* cu_seqlens;
  int r;
  __nv_bfloat16* y;
  float* lse;
  int tokens, heads, window;
  float scale_log2;
};

// Windows past the sequence length behave as the sequence length (and fit the kernels' int arithmetic).
inline ForwardProblem forward_problem(const Tensor& cu_seqlens, Tensor& y, Tensor& lse, const AttentionProblem& p,
                                      int64_t window, float scale) {
  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);
  return {device_i32(cu_seqlens),
          p.r,
          device_bf16(y),
          static_cast<float*>(lse.raw()),
          static_cast<int>(p.tokens),
          p.heads,
          win,
          scale * kLog2e};
}

__device__ __forceinline__ TileKind classify(int k0, int t_first, int t_last, int lo_first, int lo_last) {
  return classify_keys<kBlockK>(k0, t_first, t_last, lo_first, lo_last);
}

// Everything one thread knows about its two query rows (g and g + 8 of its warp's 16) and its warpgroup's 64.
struct RowState {
  int w0, w_last, lo_w_first, lo_w_last;  // the warpgroup's rows and their first allowed keys
  int t_row[2], lo_row[2];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  __device__ RowState(const int* cu, int r, int q0, int tokens, int window) {
    const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) >> 2;
    w0 = q0 + wg * kWarpgroupRows;
    w_last = min(w0 + kWarpgroupRows - 1, tokens - 1);  // < w0 for a warpgroup wholly past the end
    // One search for the warpgroup's first row; its other rows walk on from that segment.
    const bool live = w0 < tokens;
    const int segment = live ? segment_index(cu, r, w0) : 0;
    lo_w_first = live ? static_cast<int>(first_key_from(cu, segment, w0, window)) : 0;
    lo_w_last = live ? static_cast<int>(first_key_from(cu, segment, w_last, window)) : 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int t = w0 + warp * 16 + g + 8 * i;
      t_row[i] = t;
      lo_row[i] = t < tokens ? static_cast<int>(first_key_from(cu, segment, t, window)) : t + 1;
    }
  }
  __device__ TileKind classify_tile(int k0) const { return classify(k0, w0, w_last, lo_w_first, lo_w_last); }
};

// Issues S = Q·Kᵀ for the warpgroup's 64 rows against one 64-key tile (one commit group; not waited).
// `q_slab_bytes`: bytes from the Q tile's first 64-column slab to its second (blocks of other than kBlockQ rows).
__device__ __forceinline__ void issue_scores(float (&s)[kBlockK / 2], uint32_t q_addr, uint32_t k_addr,
                                             uint32_t q_slab_bytes = kQSlabBytes) {
  wgmma::fence();
  issue_product(s, q_addr, q_slab_bytes, k_addr, kKvSlabBytes);
  wgmma::commit();
}

// v6: the same product with Q as register A fragments (read once per block), so the tensor cores read only K
// from shared memory.
__device__ __forceinline__ void issue_scores(float (&s)[kBlockK / 2], const uint32_t (&qa)[kHeadDim / 16][4],
                                             uint32_t k_addr) {
  wgmma::fence();
  const uint64_t k_desc = wgmma::k_major(k_addr);
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    wgmma::mma_m64n64k16_rs(s, qa[kk], wgmma::advance(k_desc, (kk / 4) * kKvSlabBytes + 32 * (kk % 4)), kk > 0);
  }
  wgmma::commit();
}

// Issues O += P·V for one tile (one commit group; not waited).
__device__ __forceinline__ void issue_pv(float (&o)[kHeadDim / 2], const uint32_t (&pa)[kBlockK / 16][4],
                                         uint32_t v_addr) {
  static_assert(kKvSlabBytes == kScoreTile * wgmma::kSlabRowBytes, "V tiles have the 64 rows issue_accumulate reads");
  wgmma::fence_operands(o);
  wgmma::fence();
  issue_accumulate(o, pa, v_addr);
  wgmma::commit();
}

// Keys a row of a masked tile may not see → −∞ (in place).
// The bounds are made relative to this thread's first column once, so that each element compares a constant.
__device__ __forceinline__ void mask_scores(float (&s)[kBlockK / 2], int k0, const RowState& rows) {
  const int first = k0 + 2 * (threadIdx.x & 3);
  const int lo[2] = {rows.lo_row[0] - first, rows.lo_row[1] - first};
  const int hi[2] = {rows.t_row[0] - first, rows.t_row[1] - first};
#pragma unroll
  for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = j >> 1, offset = nt * 8 + (j & 1);  // key − first
      if (offset < lo[row] || offset > hi[row]) s[4 * nt + j] = -INFINITY;
    }
  }
}

// This thread's maxima of its two rows' raw scores.
__device__ __forceinline__ void thread_row_max(const float (&s)[kBlockK / 2], float (&tile_max)[2]) {
  tile_max[0] = tile_max[1] = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kBlockK / 8; ++nt) {
    tile_max[0] = fmaxf(tile_max[0], fmaxf(s[4 * nt], s[4 * nt + 1]));
    tile_max[1] = fmaxf(tile_max[1], fmaxf(s[4 * nt + 2], s[4 * nt + 3]));
  }
}

// Raises the rows' running max (log2 domain) to the tile's, whose maxima are reduced over the row's 4 threads
// here (raw scores: scale > 0); the factor O and the sums must be rescaled by, and −m for the exponentials.
__device__ __forceinline__ void raise_row_max(float (&tile_max)[2], RowState& rows, float scale_log2,
                                              float (&rescale)[2], float (&neg_m)[2]) {
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    tile_max[row] = quad_max(tile_max[row]);
    const float m_new = fmaxf(rows.m[row], tile_max[row] * scale_log2);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing allowed yet stays at zero
    rescale[row] = fast_exp2(rows.m[row] - m_use);
    rows.m[row] = m_new;
    neg_m[row] = -m_use;
  }
}

// s ← 2^(s · scale_log2 − m) in place; the rows' sums l ← l · rescale + Σ s.
__device__ __forceinline__ void exponentiate(float (&s)[kBlockK / 2], const float (&neg_m)[2], float scale_log2,
                                             const float (&rescale)[2], RowState& rows) {
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < kBlockK / 2; ++i) {
    s[i] = fast_exp2(fmaf(s[i], scale_log2, neg_m[(i >> 1) & 1]));
    sum[(i >> 1) & 1] += s[i];
  }
#pragma unroll
  for (int row = 0; row < 2; ++row) rows.l[row] = rows.l[row] * rescale[row] + sum[row];
}

// Masks and exponentiates one tile's scores in place (s[4·nt + j] as v2's s[nt][j]), updates the rows' running max
// and sum, and returns the factor O must be rescaled by (rescale_output) before this tile's P·V accumulates.
__device__ __forceinline__ void softmax_scores(float (&s)[kBlockK / 2], TileKind kind, int k0, RowState& rows,
                                               float scale_log2, float (&rescale)[2]) {
  if (kind == TileKind::masked) mask_scores(s, k0, rows);
  float tile_max[2], neg_m[2];
  thread_row_max(s, tile_max);
  raise_row_max(tile_max, rows, scale_log2, rescale, neg_m);
  exponentiate(s, neg_m, scale_log2, rescale, rows);
}

// v10–v13: softmax_scores with a lazily raised max. The running max m moves only when some score of the warp's rows
// exceeds it by more than kMaxSlackLog2 (then exactly as softmax_scores); otherwise the tile is exponentiated
// against the stale m, so its values stay below 2^kMaxSlackLog2 (bf16 P and f32 sums hold that with room), and
// neither the reduction of the row maxima across threads nor a rescale of O is needed. y and lse are the same
// mathematically (lse = m + log2 l holds for any m the sums were taken against). Returns whether O must be rescaled.
constexpr float kMaxSlackLog2 = 8.f;
__device__ __forceinline__ bool softmax_scores_lazy(float (&s)[kBlockK / 2], TileKind kind, int k0, RowState& rows,
                                                    float scale_log2, float (&rescale)[2]) {
  if (kind == TileKind::masked) mask_scores(s, k0, rows);
  float tile_max[2], neg_m[2];
  thread_row_max(s, tile_max);
  // A row with nothing allowed yet (m = −∞) raises at its first allowed score.
  const bool over =
      tile_max[0] * scale_log2 > rows.m[0] + kMaxSlackLog2 || tile_max[1] * scale_log2 > rows.m[1] + kMaxSlackLog2;
  const bool raise = __any_sync(0xffffffffu, over);  // warp-uniform: the reduction's shuffles need the whole warp
  if (raise) {
    raise_row_max(tile_max, rows, scale_log2, rescale, neg_m);
  } else {
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      rescale[row] = 1.f;
      neg_m[row] = rows.m[row] == -INFINITY ? 0.f : -rows.m[row];  // m = −∞ here: every score of the row is −∞
    }
  }
  exponentiate(s, neg_m, scale_log2, rescale, rows);
  return raise;
}

__device__ __forceinline__ void rescale_output(float (&o)[kHeadDim / 2], const float (&rescale)[2]) {
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] *= rescale[(i >> 1) & 1];
}

// P (exponentiated scores) as the A fragments of P·V (k-step kk covers keys 16kk … 16kk + 15): pack_fragments of
// kernels/cuda/attention/wgmma_common.cuh (kBlockK = kScoreTile).
static_assert(kBlockK == kScoreTile, "P tiles are the wgmma score tiles");

// The end of a block: each row's softmax sum over the 4 threads that share it, 1 / sum for O (0 for a row with no
// allowed key) and the row's lse (natural log), written by one thread per row for rows before `tokens`.
__device__ __forceinline__ void finish_rows(const RowState& rows, int tokens, int head, float* lse, float (&inv)[2]) {
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const float total = quad_sum(rows.l[row]);
    inv[row] = total > 0.f ? 1.f / total : 0.f;
    const int t = rows.t_row[row];
    if ((threadIdx.x & 3) == 0 && t < tokens) {
      lse[static_cast<int64_t>(head) * tokens + t] = (rows.m[row] + log2f(total)) / kLog2e;
    }
  }
}

}  // namespace gpt::cuda::attn::forward_tiles
