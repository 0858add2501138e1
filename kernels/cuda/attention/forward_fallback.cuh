#pragma once
// The forward for tensors the copy engine cannot address (attention/fallback.h): the ladder's v2 tiling and masks with
// the products on Hopper's warpgroup MMA (kernels/cuda/wgmma.cuh). bf16, head dim 128, varlen causal sliding window,
// fp32 online softmax. attention/forward_fallback.cu instantiates it for production; the kernel ladder
// (kernels/cuda/ladder/forward_wgmma.cu) adds the variants that were not promoted. Internal linkage: each including
// file gets its own kernels.
//
// One block = 128 consecutive tokens × one head = two warpgroups of 64 query rows (one block per SM). The block
// walks the keys [first_key(q0), q_last] in tiles of 64:
//   - Q and the K/V tiles sit in shared memory in the 128-byte swizzle wgmma reads; K/V tiles are multi-buffered
//     with cp.async;
//   - S = Q·Kᵀ is eight m64n64k16 products with both operands in shared memory; P stays in registers and is the A
//     operand of O += P·V (four m64n128k16, V transposed on the fly from its row-major tile);
//   - each warpgroup classifies every tile against its 64 rows (skip / full / masked), as v2 does per warp;
//   - the output is staged through the Q tile's shared memory for 16-byte, row-contiguous stores.
// Each tile's products and softmax run in sequence (3 stages); kQInRegisters holds Q as register A fragments.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/forward_tiles.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/wgmma_common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda {

namespace {

using namespace attn;
using namespace attn::forward_tiles;

constexpr int kThreads = 128 * (kBlockQ / kWarpgroupRows);                                  // one warpgroup per 64 rows
constexpr size_t smem_bytes(int stages) { return kQBytes + 2 * stages * kKvBytes + 1024; }  // + alignment slack

// This thread's A fragments of the warpgroup's 64 Q rows (swizzled tile at `q_wg`, the warpgroup's first row).
__device__ __forceinline__ void load_q_fragments(const uint8_t* q_wg, uint32_t (&qa)[kHeadDim / 16][4]) {
  const int warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) >> 2, c = threadIdx.x & 3;
  auto pair = [&](int row, int col) {
    const uint8_t* slab = q_wg + (col / wgmma::kSlabCols) * kQSlabBytes;
    const int in_slab = col % wgmma::kSlabCols;
    return *reinterpret_cast<const uint32_t*>(slab + wgmma::swizzled_offset(row, in_slab / 8) + (in_slab % 8) * 2);
  };
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const int r0 = warp * 16 + g, k0 = 16 * kk + 2 * c;
    qa[kk][0] = pair(r0, k0);
    qa[kk][1] = pair(r0 + 8, k0);
    qa[kk][2] = pair(r0, k0 + 8);
    qa[kk][3] = pair(r0 + 8, k0 + 8);
  }
}

// The per-tile softmax: scores, rescale and P in one step (attention/forward.cuh splits them around the wait for
// P·V).
__device__ __forceinline__ void softmax_tile(float (&s)[kBlockK / 2], TileKind kind, int k0, RowState& rows,
                                             float (&o)[kHeadDim / 2], float scale_log2,
                                             uint32_t (&pa)[kBlockK / 16][4]) {
  float rescale[2];
  softmax_scores(s, kind, k0, rows, scale_log2, rescale);
  rescale_output(o, rescale);
  pack_fragments(s, pa);
}

// Normalises O, stages the block's rows row-major in the Q tile (every wgmma that read it has completed), then
// stores whole 256-byte rows with 16-byte accesses; lse per row.
__device__ __forceinline__ void store_output(const float (&o)[kHeadDim / 2], const RowState& rows, uint8_t* qs, int q0,
                                             int tokens, int heads, int head, __nv_bfloat16* y, float* lse) {
  const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  auto* stage_rows = reinterpret_cast<__nv_bfloat16*>(qs);  // [kBlockQ, 128] row-major
  float inv[2];
  finish_rows(rows, tokens, head, lse, inv);
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const int local = wg * kWarpgroupRows + warp * 16 + g + 8 * row;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      *reinterpret_cast<__nv_bfloat162*>(stage_rows + local * kHeadDim + nt * 8 + 2 * c) =
          __floats2bfloat162_rn(o[4 * nt + 2 * row] * inv[row], o[4 * nt + 2 * row + 1] * inv[row]);
    }
  }
  __syncthreads();
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int j = 0; j < kBlockQ * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads, rr = i / kChunks, chunk = i % kChunks;
    const int t = q0 + rr;
    if (t < tokens) {
      *reinterpret_cast<uint4*>(y + (static_cast<int64_t>(t) * heads + head) * kHeadDim + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage_rows + rr * kHeadDim + chunk * 8);
    }
  }
}

struct ForwardArgs {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  ForwardProblem problem;
};

// The block's shared memory: Q, kStages K tiles, kStages V tiles, cu_seqlens; wgmma's swizzle is anchored at
// 1024-byte boundaries.
template <int kStages>
struct BlockTiles {
  uint8_t *qs, *ks, *vs;
  int* cu;
  __device__ explicit BlockTiles(unsigned char* raw) {
    qs = align_1024(raw);
    ks = qs + kQBytes;
    vs = ks + kStages * kKvBytes;
    cu = reinterpret_cast<int*>(vs + kStages * kKvBytes);
  }
  __device__ void load_kv(int stage, const ForwardArgs& a, int first, int end, int head) const {
    load_swizzled_async<kThreads, kBlockK>(ks + stage * kKvBytes, a.k, first, end, a.problem.heads, head);
    load_swizzled_async<kThreads, kBlockK>(vs + stage * kKvBytes, a.v, first, end, a.problem.heads, head);
  }
  __device__ uint32_t k_addr(int stage) const { return wgmma::smem_addr(ks + stage * kKvBytes); }
  __device__ uint32_t v_addr(int stage) const { return wgmma::smem_addr(vs + stage * kKvBytes); }
  // Copies cu_seqlens in, finds the block's keys and starts the prologue loads: Q with tile 0 in the first cp.async
  // group, then tiles 1 … kStages − 2, one group each (empty past the end).
  __device__ BlockKeys start(const ForwardArgs& a, int head, int q0) const {
    for (int i = threadIdx.x; i < a.problem.r; i += kThreads) cu[i] = a.problem.cu_seqlens[i];
    __syncthreads();
    const BlockKeys keys = block_keys<kBlockK>(cu, a.problem.r, q0, kBlockQ, a.problem.tokens, a.problem.window);
    load_swizzled_async<kThreads, kBlockQ>(qs, a.q, q0, a.problem.tokens, a.problem.heads, head);
#pragma unroll
    for (int n = 0; n < kStages - 1; ++n) {
      if (n < keys.tiles) load_kv(n, a, keys.key_begin + n * kBlockK, keys.kv_end, head);
      cp_async_commit();
    }
    return keys;
  }
};

// Q read from shared memory by every S product, or held in registers (kQInRegisters): per tile, S then softmax then
// P·V, each waited before the next.
template <bool kQInRegisters>
__global__ void __launch_bounds__(kThreads, 1) attention_forward_wgmma_kernel(const __grid_constant__ ForwardArgs a) {
  constexpr int kStages = 3;
  extern __shared__ unsigned char smem_raw[];
  const BlockTiles<kStages> tiles_smem(smem_raw);
  const int head = blockIdx.y, q0 = blockIdx.x * kBlockQ;
  const auto [key_begin, kv_end, tiles] = tiles_smem.start(a, head, q0);
  RowState rows(tiles_smem.cu, a.problem.r, q0, a.problem.tokens, a.problem.window);
  const uint32_t q_addr = wgmma::smem_addr(tiles_smem.qs) + (threadIdx.x / 128) * kWarpgroupRows * kRowBytes;
  float o[kHeadDim / 2] = {};     // m64n128 accumulators
  uint32_t qa[kHeadDim / 16][4];  // kQInRegisters only

  for (int n = 0; n < tiles; ++n) {
    const int k0 = key_begin + n * kBlockK, stage = n % kStages;
    // Tile n + kStages − 1 into the stage tile n − 1 used (released by the barrier that ended iteration n − 1).
    const int ahead = n + kStages - 1;
    if (ahead < tiles) tiles_smem.load_kv(ahead % kStages, a, key_begin + ahead * kBlockK, kv_end, head);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // tile n has landed (and with tile 0, Q)
    fence_async_proxy();
    __syncthreads();
    if constexpr (kQInRegisters) {
      if (n == 0) load_q_fragments(tiles_smem.qs + (threadIdx.x / 128) * kWarpgroupRows * kRowBytes, qa);
    }

    const TileKind kind = rows.classify_tile(k0);  // uniform over the warpgroup
    if (kind != TileKind::skip) {
      float s[kBlockK / 2];
      if constexpr (kQInRegisters) {
        issue_scores(s, qa, tiles_smem.k_addr(stage));
      } else {
        issue_scores(s, q_addr, tiles_smem.k_addr(stage));
      }
      wgmma::wait<0>();
      wgmma::fence_operands(s);
      uint32_t pa[kBlockK / 16][4];
      softmax_tile(s, kind, k0, rows, o, a.problem.scale_log2, pa);
      issue_pv(o, pa, tiles_smem.v_addr(stage));
      wgmma::wait<0>();
      wgmma::fence_operands(o);
    }
    __syncthreads();  // every warpgroup is done with this stage before it is refilled
  }
  store_output(o, rows, tiles_smem.qs, q0, a.problem.tokens, a.problem.heads, head, a.problem.y, a.problem.lse);
}

template <typename Kernel>
void launch_wgmma_forward(Kernel kernel, int stages, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& cu_seqlens, Tensor& y, Tensor& lse, int64_t window, float scale) {
  if (!(scale > 0.f)) {  // the kernels take row maxima on raw scores, which needs a positive scale
    attention_forward_any_scale(q, k, v, cu_seqlens, y, lse, window, scale);
    return;
  }
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  if (p.tokens == 0) return;
  const size_t smem = smem_bytes(stages) + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(kernel, smem, "attention_forward");
  const ForwardArgs args{device_bf16(q), device_bf16(k), device_bf16(v),
                         forward_problem(cu_seqlens, y, lse, p, window, scale)};
  const dim3 grid(static_cast<unsigned>((p.tokens + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(p.heads));
  kernel<<<grid, kThreads, smem, current_stream()>>>(args);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace gpt::cuda
