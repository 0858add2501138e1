// Kernel ladder, forward v5 and v6 (kernels/cuda/ladder/attention_versions.h): the variants of the production
// fallback attention/forward_fallback.cuh (v4) that were not promoted. v5 overlaps each tile's products and softmax
// inside the warpgroup: S of tile n + 1 is issued before the softmax of tile n, so the tensor cores work while the
// softmax runs (4 stages: tile n + 1 must have landed one iteration early). v6 holds Q in registers as the A
// operand of Q·Kᵀ.
#include "kernels/cuda/attention/forward_fallback.cuh"
#include "kernels/cuda/ladder/attention_versions.h"

namespace gpt::cuda {

namespace {

// v5: S of tile n + 1 runs on the tensor cores while the softmax of tile n runs; P·V of tile n follows.
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_wgmma_overlap_kernel(const __grid_constant__ ForwardArgs a) {
  constexpr int kStages = 4;
  extern __shared__ unsigned char smem_raw[];
  const BlockTiles<kStages> tiles_smem(smem_raw);
  const int head = blockIdx.y, q0 = blockIdx.x * kBlockQ;
  const auto [key_begin, kv_end, tiles] = tiles_smem.start(a, head, q0);
  RowState rows(tiles_smem.cu, a.problem.r, q0, a.problem.tokens, a.problem.window);
  const uint32_t q_addr = wgmma::smem_addr(tiles_smem.qs) + (threadIdx.x / 128) * kWarpgroupRows * kRowBytes;
  float o[kHeadDim / 2] = {};
  float s_cur[kBlockK / 2] = {}, s_next[kBlockK / 2] = {};

  // Tile 0's scores before the loop.
  cp_async_wait<kStages - 2>();  // Q and tile 0 have landed
  fence_async_proxy();
  __syncthreads();
  TileKind kind = rows.classify_tile(key_begin);
  if (kind != TileKind::skip) {
    issue_scores(s_cur, q_addr, tiles_smem.k_addr(0));
    wgmma::wait<0>();
    wgmma::fence_operands(s_cur);
  }

  for (int n = 0; n < tiles; ++n) {
    const int k0 = key_begin + n * kBlockK, stage = n % kStages;
    // Refill the stage of tile n − 1 (its K and V reads completed before the barrier that ended iteration n − 1),
    // then wait until tile n + 1 has landed: its K feeds the scores issued below.
    const int ahead = n + kStages - 1;
    if (ahead < tiles) tiles_smem.load_kv(ahead % kStages, a, key_begin + ahead * kBlockK, kv_end, head);
    cp_async_commit();
    cp_async_wait<kStages - 2>();
    fence_async_proxy();
    __syncthreads();

    const TileKind kind_next = n + 1 < tiles ? rows.classify_tile(k0 + kBlockK) : TileKind::skip;
    if (kind_next != TileKind::skip) issue_scores(s_next, q_addr, tiles_smem.k_addr((n + 1) % kStages));
    if (kind != TileKind::skip) {
      uint32_t pa[kBlockK / 16][4];
      softmax_tile(s_cur, kind, k0, rows, o, a.problem.scale_log2, pa);
      issue_pv(o, pa, tiles_smem.v_addr(stage));
    }
    wgmma::wait<0>();  // S of tile n + 1 and P·V of tile n
    wgmma::fence_operands(o);
    wgmma::fence_operands(s_next);
#pragma unroll
    for (int i = 0; i < kBlockK / 2; ++i) s_cur[i] = s_next[i];
    kind = kind_next;
    __syncthreads();  // every warpgroup is done with this stage's V before it is refilled
  }
  store_output(o, rows, tiles_smem.qs, q0, a.problem.tokens, a.problem.heads, head, a.problem.y, a.problem.lse);
}

}  // namespace

namespace ladder {

void attention_forward_v5(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_wgmma_forward(attention_forward_wgmma_overlap_kernel, 4, q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_v6(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_wgmma_forward(attention_forward_wgmma_kernel<true>, 3, q, k, v, cu_seqlens, y, lse, window, scale);
}

}  // namespace ladder
}  // namespace gpt::cuda
