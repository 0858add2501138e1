// Kernel ladder, backward v2 (kernels/cuda/ladder/attention_versions.h; v1 is in
// backward_v1.cu). Same three steps and the same atomic-free, deterministic split as v1:
//   1. D[h, t] = ⟨dy_th, y_th⟩ (attention_row_dot);
//   2. per block of 64 keys (4 warps × 16 keys): dK, dV over the queries that can see them, query tiles of 32;
//   3. per block of 64 queries (4 warps × 16 queries): dQ over the keys they see, key tiles of 64.
// What changes against v1 (which loaded every tile synchronously, one global latency per 16 bytes per thread):
//   - the streamed tiles (Q/dY with their lse, D and first keys in step 2; K/V in step 3) are double-buffered with
//     cp.async, so tile n+1 is in flight while tile n is multiplied;
//   - fragments come from shared memory through ldmatrix;
//   - each warp classifies every tile against its own 16 rows: skipped when no pair is allowed, computed without
//     masks when every pair is, masked per element only on boundary tiles;
//   - p = 2^(s·scale·log2e − lse·log2e) is one FFMA and one ex2.approx.
#include <cuda_bf16.h>

#include <cmath>
#include <memory>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/ladder/attention_versions.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace gpt::cuda::ladder {

namespace {

using namespace attn;

constexpr int kWarps = 4, kThreads = kWarps * 32, kStages = 2;
constexpr int kTileElems = 64 * kRowStride;

// dst[t, h, :] += scale · acc for this thread's two rows (fragment layout of 16 n-tiles), rounded once.
__device__ __forceinline__ void add_rows(__nv_bfloat16* dst, const float (&acc)[kHeadDim / 8][4], const int (&t)[2],
                                         int tokens, int heads, int head, float scale, int c) {
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    if (t[row] >= tokens) continue;
    __nv_bfloat16* p = dst + (static_cast<int64_t>(t[row]) * heads + head) * kHeadDim;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      auto* cell = reinterpret_cast<__nv_bfloat162*>(p + nt * 8 + 2 * c);
      const float2 old = __bfloat1622float2(*cell);
      *cell = __floats2bfloat162_rn(old.x + scale * acc[nt][2 * row], old.y + scale * acc[nt][2 * row + 1]);
    }
  }
}

// ---- step 2: dK, dV ----------------------------------------------------------------------------------------

constexpr int kKeysPerBlock = 64, kQueryTile = 32;
constexpr int kQTileElems = kQueryTile * kRowStride;

struct QueryStage {            // one query tile's row statistics
  float neg_lse2[kQueryTile];  // −lse·log2e
  float d[kQueryTile];
  int lo[kQueryTile];  // first allowed key; `tokens` for queries past the block's range (they see nothing)
};

__global__ void __launch_bounds__(kThreads)
    attention_dkdv_v2_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                             const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ dy,
                             const float* __restrict__ lse, const float* __restrict__ dsum,
                             const int* __restrict__ cu_seqlens, int r, __nv_bfloat16* __restrict__ dk,
                             __nv_bfloat16* __restrict__ dv, int tokens, int heads, int window, float scale,
                             float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* ks = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* vs = ks + kTileElems;
  __nv_bfloat16* qs = vs + kTileElems;              // kStages query tiles
  __nv_bfloat16* dos = qs + kStages * kQTileElems;  // kStages dY tiles
  auto* stats = reinterpret_cast<QueryStage*>(dos + kStages * kQTileElems);
  int* cu = reinterpret_cast<int*>(stats + kStages);

  const int head = blockIdx.y;
  const int s0 = blockIdx.x * kKeysPerBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  load_tile_async<kThreads, kKeysPerBlock>(ks, k, s0, tokens, heads, head);
  load_tile_async<kThreads, kKeysPerBlock>(vs, v, s0, tokens, heads, head);
  __syncthreads();  // cu

  const int s_last = min(s0 + kKeysPerBlock, tokens) - 1;
  // Queries that can see a key s: [s, min(segment end − 1, s + window)]; the block's union ends at s_last's bound.
  const int seg_last = segment_end(cu, r, s_last) - 1;
  const int q_end = s_last + min(seg_last - s_last, window);  // no int overflow near T = 2^31
  const int tiles = (q_end - s0) / kQueryTile + 1;

  auto load_queries = [&](int n) {
    const int q0 = s0 + n * kQueryTile, st = n % kStages;
    load_tile_async<kThreads, kQueryTile>(qs + st * kQTileElems, q, q0, q_end + 1, heads, head);
    load_tile_async<kThreads, kQueryTile>(dos + st * kQTileElems, dy, q0, q_end + 1, heads, head);
    cp_async_commit();
    if (threadIdx.x < kQueryTile) {
      const int t = q0 + threadIdx.x;
      const bool valid = t <= q_end;
      stats[st].neg_lse2[threadIdx.x] = valid ? -lse[static_cast<int64_t>(head) * tokens + t] * kLog2e : 0.f;
      stats[st].d[threadIdx.x] = valid ? dsum[static_cast<int64_t>(head) * tokens + t] : 0.f;
      stats[st].lo[threadIdx.x] = valid ? static_cast<int>(first_key(cu, r, t, window)) : tokens;
    }
  };
  load_queries(0);

  const int kw = s0 + warp * 16;                 // this warp's first key
  const int kw_last = min(kw + 15, tokens - 1);  // < kw for a warp wholly past the end
  const int key_row[2] = {kw + g, kw + g + 8};

  float dk_acc[kHeadDim / 8][4] = {}, dv_acc[kHeadDim / 8][4] = {};
  for (int n = 0; n < tiles; ++n) {
    const int q0 = s0 + n * kQueryTile, st = n % kStages;
    if (n + 1 < tiles) {  // the other stage was released by the barrier that ended iteration n − 1
      load_queries(n + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    const QueryStage& qst = stats[st];
    const int q_tile_last = min(q0 + kQueryTile - 1, q_end);
    TileKind kind = TileKind::masked;
    if (kw_last < kw || q_tile_last < kw || qst.lo[0] > kw_last) {
      kind = TileKind::skip;  // no key of the warp is seen by a query of the tile
    } else if (q0 >= kw_last && q0 + kQueryTile - 1 <= q_end && qst.lo[kQueryTile - 1] <= kw) {
      kind = TileKind::full;  // every query is at or after every key and its window reaches the warp's first key
    }
    if (kind != TileKind::skip) {
      const __nv_bfloat16* qt = qs + st * kQTileElems;
      const __nv_bfloat16* dt = dos + st * kQTileElems;
      float sT[kQueryTile / 8][4] = {}, dpT[kQueryTile / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t ka[4], va[4];
        ldmatrix_a(ka, ks, warp * 16, kk * 16, lane);
        ldmatrix_a(va, vs, warp * 16, kk * 16, lane);
#pragma unroll
        for (int n2 = 0; n2 < kQueryTile / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_b_rows_x2(b, qt, n2 * 16, kk * 16, lane);
          mma_bf16(sT[2 * n2], ka, b[0], b[1]);
          mma_bf16(sT[2 * n2 + 1], ka, b[2], b[3]);
          ldmatrix_b_rows_x2(b, dt, n2 * 16, kk * 16, lane);
          mma_bf16(dpT[2 * n2], va, b[0], b[1]);
          mma_bf16(dpT[2 * n2 + 1], va, b[2], b[3]);
        }
      }
      // sT becomes Pᵀ, dpT becomes dSᵀ (rows = keys, columns = queries).
#pragma unroll
      for (int nt = 0; nt < kQueryTile / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = nt * 8 + 2 * c + (j & 1);
          float p = fast_exp2(fmaf(sT[nt][j], scale_log2, qst.neg_lse2[col]));
          if (kind == TileKind::masked) {
            const int t = q0 + col, key = key_row[j >> 1];
            if (!(key < tokens && key <= t && key >= qst.lo[col])) p = 0.f;
          }
          sT[nt][j] = p;
          dpT[nt][j] = p * (dpT[nt][j] - qst.d[col]);
        }
      }
#pragma unroll
      for (int kk = 0; kk < kQueryTile / 16; ++kk) {
        const uint32_t pa[4] = {pack_bf16(sT[2 * kk][0], sT[2 * kk][1]), pack_bf16(sT[2 * kk][2], sT[2 * kk][3]),
                                pack_bf16(sT[2 * kk + 1][0], sT[2 * kk + 1][1]),
                                pack_bf16(sT[2 * kk + 1][2], sT[2 * kk + 1][3])};
        const uint32_t da[4] = {pack_bf16(dpT[2 * kk][0], dpT[2 * kk][1]), pack_bf16(dpT[2 * kk][2], dpT[2 * kk][3]),
                                pack_bf16(dpT[2 * kk + 1][0], dpT[2 * kk + 1][1]),
                                pack_bf16(dpT[2 * kk + 1][2], dpT[2 * kk + 1][3])};
#pragma unroll
        for (int n2 = 0; n2 < kHeadDim / 16; ++n2) {
          uint32_t b[4];
          load_b_cols_x2(b, dt, kk * 16, n2 * 16, lane);
          mma_bf16(dv_acc[2 * n2], pa, b[0], b[1]);
          mma_bf16(dv_acc[2 * n2 + 1], pa, b[2], b[3]);
          load_b_cols_x2(b, qt, kk * 16, n2 * 16, lane);
          mma_bf16(dk_acc[2 * n2], da, b[0], b[1]);
          mma_bf16(dk_acc[2 * n2 + 1], da, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  add_rows(dk, dk_acc, key_row, tokens, heads, head, scale, c);
  add_rows(dv, dv_acc, key_row, tokens, heads, head, 1.f, c);
}

// ---- step 3: dQ --------------------------------------------------------------------------------------------

constexpr int kQueriesPerBlock = 64, kKeyTile = 64;

__global__ void __launch_bounds__(kThreads)
    attention_dq_v2_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                           const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ dy,
                           const float* __restrict__ lse, const float* __restrict__ dsum,
                           const int* __restrict__ cu_seqlens, int r, __nv_bfloat16* __restrict__ dq, int tokens,
                           int heads, int window, float scale, float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* dos = qs + kTileElems;
  __nv_bfloat16* ks = dos + kTileElems;           // kStages K tiles
  __nv_bfloat16* vs = ks + kStages * kTileElems;  // kStages V tiles
  int* cu = reinterpret_cast<int*>(vs + kStages * kTileElems);

  const int head = blockIdx.y;
  const int q0 = blockIdx.x * kQueriesPerBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  const int q_last = min(q0 + kQueriesPerBlock, tokens) - 1;
  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  __syncthreads();
  const int key_begin = static_cast<int>(first_key(cu, r, q0, window));
  const int kv_end = q_last + 1;
  const int tiles = (q_last - key_begin) / kKeyTile + 1;
  load_tile_async<kThreads, kQueriesPerBlock>(qs, q, q0, tokens, heads, head);
  load_tile_async<kThreads, kQueriesPerBlock>(dos, dy, q0, tokens, heads, head);
  load_tile_async<kThreads, kKeyTile>(ks, k, key_begin, kv_end, heads, head);
  load_tile_async<kThreads, kKeyTile>(vs, v, key_begin, kv_end, heads, head);
  cp_async_commit();

  const int w0 = q0 + warp * 16;
  const int w_last = min(w0 + 15, tokens - 1);
  const int lo_w_first = w0 < tokens ? static_cast<int>(first_key(cu, r, w0, window)) : 0;
  const int lo_w_last = w0 < tokens ? static_cast<int>(first_key(cu, r, w_last, window)) : 0;
  int t_row[2], lo_row[2];
  float neg_lse2[2], d_row[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    t_row[i] = w0 + g + 8 * i;
    const bool valid = t_row[i] < tokens;
    lo_row[i] = valid ? static_cast<int>(first_key(cu, r, t_row[i], window)) : t_row[i] + 1;
    neg_lse2[i] = valid ? -lse[static_cast<int64_t>(head) * tokens + t_row[i]] * kLog2e : 0.f;
    d_row[i] = valid ? dsum[static_cast<int64_t>(head) * tokens + t_row[i]] : 0.f;
  }

  float dq_acc[kHeadDim / 8][4] = {};
  for (int n = 0; n < tiles; ++n) {
    const int k0 = key_begin + n * kKeyTile, st = n % kStages;
    if (n + 1 < tiles) {
      const int next = (n + 1) % kStages;
      load_tile_async<kThreads, kKeyTile>(ks + next * kTileElems, k, k0 + kKeyTile, kv_end, heads, head);
      load_tile_async<kThreads, kKeyTile>(vs + next * kTileElems, v, k0 + kKeyTile, kv_end, heads, head);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    const int k_last = k0 + kKeyTile - 1;
    TileKind kind = TileKind::masked;
    if (w_last < w0 || k0 > w_last || k_last < lo_w_first) {
      kind = TileKind::skip;
    } else if (k_last <= w0 && k0 >= lo_w_last) {
      kind = TileKind::full;
    }
    if (kind != TileKind::skip) {
      const __nv_bfloat16* kt = ks + st * kTileElems;
      const __nv_bfloat16* vt = vs + st * kTileElems;
      float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t qa[4], da[4];
        ldmatrix_a(qa, qs, warp * 16, kk * 16, lane);
        ldmatrix_a(da, dos, warp * 16, kk * 16, lane);
#pragma unroll
        for (int n2 = 0; n2 < kKeyTile / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_b_rows_x2(b, kt, n2 * 16, kk * 16, lane);
          mma_bf16(s[2 * n2], qa, b[0], b[1]);
          mma_bf16(s[2 * n2 + 1], qa, b[2], b[3]);
          ldmatrix_b_rows_x2(b, vt, n2 * 16, kk * 16, lane);
          mma_bf16(dp[2 * n2], da, b[0], b[1]);
          mma_bf16(dp[2 * n2 + 1], da, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = j >> 1;
          float p = fast_exp2(fmaf(s[nt][j], scale_log2, neg_lse2[row]));
          if (kind == TileKind::masked) {
            const int key = k0 + nt * 8 + 2 * c + (j & 1);
            if (key < lo_row[row] || key > t_row[row]) p = 0.f;
          }
          dp[nt][j] = p * (dp[nt][j] - d_row[row]);  // dS
        }
      }
#pragma unroll
      for (int kk = 0; kk < kKeyTile / 16; ++kk) {
        const uint32_t dsa[4] = {pack_bf16(dp[2 * kk][0], dp[2 * kk][1]), pack_bf16(dp[2 * kk][2], dp[2 * kk][3]),
                                 pack_bf16(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                 pack_bf16(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
        for (int n2 = 0; n2 < kHeadDim / 16; ++n2) {
          uint32_t b[4];
          load_b_cols_x2(b, kt, kk * 16, n2 * 16, lane);
          mma_bf16(dq_acc[2 * n2], dsa, b[0], b[1]);
          mma_bf16(dq_acc[2 * n2 + 1], dsa, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }
  add_rows(dq, dq_acc, t_row, tokens, heads, head, scale, c);
}

}  // namespace

void attention_backward_v2(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  zero_overwritten(writes, dq, dk, dv);  // this version only adds
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_backward");
  if (p.tokens == 0) return;
  const cudaStream_t stream = current_stream();
  const AttentionScratch dsum = attention_row_dot(dy, y, p);
  const auto* lse_p = static_cast<const float*>(lse.raw());
  const int tokens = static_cast<int>(p.tokens);
  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);

  const size_t dkdv_smem = (2 * kTileElems + 2 * kStages * kQTileElems) * sizeof(__nv_bfloat16) +
                           kStages * sizeof(QueryStage) + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_dkdv_v2_kernel, dkdv_smem, "attention_backward");
  const dim3 dkdv_grid(static_cast<unsigned>((p.tokens + kKeysPerBlock - 1) / kKeysPerBlock),
                       static_cast<unsigned>(p.heads));
  attention_dkdv_v2_kernel<<<dkdv_grid, kThreads, dkdv_smem, stream>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_bf16(dy), lse_p, dsum.get(), device_i32(cu_seqlens), p.r,
      device_bf16(dk), device_bf16(dv), tokens, p.heads, win, scale, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();

  const size_t dq_smem =
      (2 + 2 * kStages) * kTileElems * sizeof(__nv_bfloat16) + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_dq_v2_kernel, dq_smem, "attention_backward");
  const dim3 dq_grid(static_cast<unsigned>((p.tokens + kQueriesPerBlock - 1) / kQueriesPerBlock),
                     static_cast<unsigned>(p.heads));
  attention_dq_v2_kernel<<<dq_grid, kThreads, dq_smem, stream>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_bf16(dy), lse_p, dsum.get(), device_i32(cu_seqlens), p.r,
      device_bf16(dq), tokens, p.heads, win, scale, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda::ladder
