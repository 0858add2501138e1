// The production backward's fallback for tensors the copy engine cannot address (attention/fallback.h): two
// atomic-free passes (deterministic: every output element has one writer) with the products on Hopper's warpgroup MMA
// (kernels/cuda/wgmma.cuh). One warpgroup per block, two blocks per SM, tiles of 64 in the 128-byte swizzle:
//   1. D[h, t] = ⟨dy_th, y_th⟩ (attention_row_dot, attention/backward.cu);
//   2. per block of 64 keys: over the query tiles that can see them, Sᵀ = K·Qᵀ and dPᵀ = V·dYᵀ (both operands in
//      shared memory, K-major), Pᵀ and dSᵀ = Pᵀ ⊙ (dPᵀ − D) in registers, then dV += Pᵀ·dY and dK += dSᵀ·Q with the
//      register operands as A and the query tiles read MN-major;
//   3. per block of 64 queries: over the key tiles they see, S = Q·Kᵀ and dP = dY·Vᵀ, dS in registers,
//      dQ += dS·K (K read MN-major).
// The streamed tiles are double-buffered with cp.async; each warpgroup classifies a tile against its 64 rows
// (skip / full / masked; masks per element only on boundary tiles).
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/wgmma_common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda {

namespace {

using namespace attn;

constexpr int kThreads = 128, kRows = 64, kTile = kScoreTile, kStages = 2;
constexpr int kTileBytes = swizzled_tile_bytes(kTile), kSlabBytes = kTile * wgmma::kSlabRowBytes;

struct BackwardArgs {
  const __nv_bfloat16 *q, *k, *v, *dy;
  const float *lse, *dsum;
  const int* cu_seqlens;
  int r;
  __nv_bfloat16 *dq, *dk, *dv;
  int tokens, heads, window;
  float scale, scale_log2;
};

// ---- step 2: dK, dV ----------------------------------------------------------------------------------------

struct QueryStats {       // one query tile's row statistics
  float neg_lse2[kTile];  // −lse·log2e
  float d[kTile];
  int lo[kTile];  // first allowed key; `tokens` for queries past the block's range (they see nothing)
};

__global__ void __launch_bounds__(kThreads, 2) attention_dkdv_wgmma_kernel(const __grid_constant__ BackwardArgs a) {
  extern __shared__ unsigned char smem_raw[];
  uint8_t* ks = align_1024(smem_raw);
  uint8_t* vs = ks + kTileBytes;
  uint8_t* qs = vs + kTileBytes;             // kStages query tiles
  uint8_t* dos = qs + kStages * kTileBytes;  // kStages dY tiles
  auto* stats = reinterpret_cast<QueryStats*>(dos + kStages * kTileBytes);
  int* cu = reinterpret_cast<int*>(stats + kStages);

  const int head = blockIdx.y, s0 = blockIdx.x * kRows, c = threadIdx.x & 3;
  for (int i = threadIdx.x; i < a.r; i += kThreads) cu[i] = a.cu_seqlens[i];
  load_swizzled_async<kThreads, kRows>(ks, a.k, s0, a.tokens, a.heads, head);
  load_swizzled_async<kThreads, kRows>(vs, a.v, s0, a.tokens, a.heads, head);
  __syncthreads();  // cu

  const int s_last = min(s0 + kRows, a.tokens) - 1;
  // Queries that can see a key s: [s, min(segment end − 1, s + window)]; the block's union ends at s_last's bound.
  const int seg_last = segment_end(cu, a.r, s_last) - 1;
  const int q_end = s_last + min(seg_last - s_last, a.window);  // no int overflow near T = 2^31
  const int tiles = (q_end - s0) / kTile + 1;

  auto load_queries = [&](int n) {
    const int q0 = s0 + n * kTile, st = n % kStages;
    load_swizzled_async<kThreads, kTile>(qs + st * kTileBytes, a.q, q0, q_end + 1, a.heads, head);
    load_swizzled_async<kThreads, kTile>(dos + st * kTileBytes, a.dy, q0, q_end + 1, a.heads, head);
    cp_async_commit();
    if (threadIdx.x < kTile) {
      const int t = q0 + threadIdx.x;
      const bool valid = t <= q_end;
      stats[st].neg_lse2[threadIdx.x] = valid ? -a.lse[static_cast<int64_t>(head) * a.tokens + t] * kLog2e : 0.f;
      stats[st].d[threadIdx.x] = valid ? a.dsum[static_cast<int64_t>(head) * a.tokens + t] : 0.f;
      stats[st].lo[threadIdx.x] = valid ? static_cast<int>(first_key(cu, a.r, t, a.window)) : a.tokens;
    }
  };
  load_queries(0);  // its group also carries K and V

  const int key_row[2] = {s0 + warpgroup_row(0), s0 + warpgroup_row(1)};
  const uint32_t k_addr = wgmma::smem_addr(ks), v_addr = wgmma::smem_addr(vs);
  float dk_acc[kRowAcc] = {}, dv_acc[kRowAcc] = {};
  for (int n = 0; n < tiles; ++n) {
    const int q0 = s0 + n * kTile, st = n % kStages;
    if (n + 1 < tiles) {  // the other stage was released by the barrier that ended iteration n − 1
      load_queries(n + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    fence_async_proxy();
    __syncthreads();

    const QueryStats& qst = stats[st];
    const int q_tile_last = min(q0 + kTile - 1, q_end);
    TileKind kind = TileKind::masked;  // uniform over the warpgroup (the block)
    if (s_last < s0 || q_tile_last < s0 || qst.lo[0] > s_last) {
      kind = TileKind::skip;  // no key of the block is seen by a query of the tile
    } else if (q0 >= s_last && q0 + kTile - 1 <= q_end && qst.lo[kTile - 1] <= s0) {
      kind = TileKind::full;  // every query is at or after every key and its window reaches the block's first key
    }
    if (kind != TileKind::skip) {
      const uint32_t q_addr = wgmma::smem_addr(qs + st * kTileBytes), do_addr = wgmma::smem_addr(dos + st * kTileBytes);
      float sT[kScoreAcc], dpT[kScoreAcc];
      wgmma::fence();
      issue_product(sT, k_addr, kSlabBytes, q_addr, kSlabBytes);
      issue_product(dpT, v_addr, kSlabBytes, do_addr, kSlabBytes);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(sT);
      wgmma::fence_operands(dpT);
      // sT becomes Pᵀ, dpT becomes dSᵀ (rows = keys, columns = queries).
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int i = 4 * nt + j, col = nt * 8 + 2 * c + (j & 1);
          float p = fast_exp2(fmaf(sT[i], a.scale_log2, qst.neg_lse2[col]));
          if (kind == TileKind::masked) {
            const int t = q0 + col, key = key_row[j >> 1];
            if (!(key < a.tokens && key <= t && key >= qst.lo[col])) p = 0.f;
          }
          sT[i] = p;
          dpT[i] = p * (dpT[i] - qst.d[col]);
        }
      }
      uint32_t pa[kTile / 16][4], da[kTile / 16][4];
      pack_fragments(sT, pa);
      pack_fragments(dpT, da);
      wgmma::fence_operands(dv_acc);
      wgmma::fence_operands(dk_acc);
      wgmma::fence();
      issue_accumulate(dv_acc, pa, do_addr);
      issue_accumulate(dk_acc, da, q_addr);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(dv_acc);
      wgmma::fence_operands(dk_acc);
    }
    __syncthreads();  // the stage is done with before it is refilled
  }
  add_accumulator_rows<2>({GradientRows{a.dk, dk_acc, s0, a.scale}, GradientRows{a.dv, dv_acc, s0, 1.f}}, a.tokens,
                          a.heads, head);
}

// ---- step 3: dQ --------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads, 2) attention_dq_wgmma_kernel(const __grid_constant__ BackwardArgs a) {
  extern __shared__ unsigned char smem_raw[];
  uint8_t* qs = align_1024(smem_raw);
  uint8_t* dos = qs + kTileBytes;
  uint8_t* ks = dos + kTileBytes;           // kStages K tiles
  uint8_t* vs = ks + kStages * kTileBytes;  // kStages V tiles
  int* cu = reinterpret_cast<int*>(vs + kStages * kTileBytes);

  const int head = blockIdx.y, q0 = blockIdx.x * kRows, c = threadIdx.x & 3;
  const int q_last = min(q0 + kRows, a.tokens) - 1;
  for (int i = threadIdx.x; i < a.r; i += kThreads) cu[i] = a.cu_seqlens[i];
  __syncthreads();
  const int key_begin = static_cast<int>(first_key(cu, a.r, q0, a.window));
  const int kv_end = q_last + 1;
  const int tiles = (q_last - key_begin) / kTile + 1;
  load_swizzled_async<kThreads, kRows>(qs, a.q, q0, a.tokens, a.heads, head);
  load_swizzled_async<kThreads, kRows>(dos, a.dy, q0, a.tokens, a.heads, head);
  load_swizzled_async<kThreads, kTile>(ks, a.k, key_begin, kv_end, a.heads, head);
  load_swizzled_async<kThreads, kTile>(vs, a.v, key_begin, kv_end, a.heads, head);
  cp_async_commit();

  const int lo_w_first = static_cast<int>(first_key(cu, a.r, q0, a.window));
  const int lo_w_last = static_cast<int>(first_key(cu, a.r, q_last, a.window));
  int t_row[2], lo_row[2];
  float neg_lse2[2], d_row[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    t_row[i] = q0 + warpgroup_row(i);
    const bool valid = t_row[i] < a.tokens;
    lo_row[i] = valid ? static_cast<int>(first_key(cu, a.r, t_row[i], a.window)) : t_row[i] + 1;
    neg_lse2[i] = valid ? -a.lse[static_cast<int64_t>(head) * a.tokens + t_row[i]] * kLog2e : 0.f;
    d_row[i] = valid ? a.dsum[static_cast<int64_t>(head) * a.tokens + t_row[i]] : 0.f;
  }

  const uint32_t q_addr = wgmma::smem_addr(qs), do_addr = wgmma::smem_addr(dos);
  float dq_acc[kRowAcc] = {};
  for (int n = 0; n < tiles; ++n) {
    const int k0 = key_begin + n * kTile, st = n % kStages;
    if (n + 1 < tiles) {
      const int next = (n + 1) % kStages;
      load_swizzled_async<kThreads, kTile>(ks + next * kTileBytes, a.k, k0 + kTile, kv_end, a.heads, head);
      load_swizzled_async<kThreads, kTile>(vs + next * kTileBytes, a.v, k0 + kTile, kv_end, a.heads, head);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    fence_async_proxy();
    __syncthreads();

    const int k_last = k0 + kTile - 1;
    TileKind kind = TileKind::masked;  // q_last ≥ q0 always: a block has at least one query
    if (k0 > q_last || k_last < lo_w_first) {
      kind = TileKind::skip;
    } else if (k_last <= q0 && k0 >= lo_w_last) {
      kind = TileKind::full;
    }
    if (kind != TileKind::skip) {
      const uint32_t k_addr = wgmma::smem_addr(ks + st * kTileBytes), v_addr = wgmma::smem_addr(vs + st * kTileBytes);
      float s[kScoreAcc], dp[kScoreAcc];
      wgmma::fence();
      issue_product(s, q_addr, kSlabBytes, k_addr, kSlabBytes);
      issue_product(dp, do_addr, kSlabBytes, v_addr, kSlabBytes);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(s);
      wgmma::fence_operands(dp);
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int i = 4 * nt + j, row = j >> 1;
          float p = fast_exp2(fmaf(s[i], a.scale_log2, neg_lse2[row]));
          if (kind == TileKind::masked) {
            const int key = k0 + nt * 8 + 2 * c + (j & 1);
            if (key < lo_row[row] || key > t_row[row]) p = 0.f;
          }
          dp[i] = p * (dp[i] - d_row[row]);  // dS
        }
      }
      uint32_t dsa[kTile / 16][4];
      pack_fragments(dp, dsa);
      wgmma::fence_operands(dq_acc);
      wgmma::fence();
      issue_accumulate(dq_acc, dsa, k_addr);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(dq_acc);
    }
    __syncthreads();
  }
  add_accumulator_rows<1>({GradientRows{a.dq, dq_acc, q0, a.scale}}, a.tokens, a.heads, head);
}

}  // namespace

void attention_backward_without_tma(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq,
                                    Tensor& dk, Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  zero_overwritten(writes, dq, dk, dv);  // this kernel only adds
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_backward");
  if (p.tokens == 0) return;
  const cudaStream_t stream = current_stream();
  const AttentionScratch dsum = attention_row_dot(dy, y, p);
  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);
  const BackwardArgs args{device_bf16(q),
                          device_bf16(k),
                          device_bf16(v),
                          device_bf16(dy),
                          static_cast<const float*>(lse.raw()),
                          dsum.get(),
                          device_i32(cu_seqlens),
                          p.r,
                          device_bf16(dq),
                          device_bf16(dk),
                          device_bf16(dv),
                          static_cast<int>(p.tokens),
                          p.heads,
                          win,
                          scale,
                          scale * kLog2e};
  const dim3 grid(static_cast<unsigned>((p.tokens + kRows - 1) / kRows), static_cast<unsigned>(p.heads));
  const size_t cu_bytes = static_cast<size_t>(p.r) * sizeof(int);

  const size_t dkdv_smem = (2 + 2 * kStages) * kTileBytes + kStages * sizeof(QueryStats) + cu_bytes + 1024;
  set_smem_limit(attention_dkdv_wgmma_kernel, dkdv_smem, "attention_backward");
  attention_dkdv_wgmma_kernel<<<grid, kThreads, dkdv_smem, stream>>>(args);
  GPT_CUDA_CHECK_LAUNCH();

  const size_t dq_smem = (2 + 2 * kStages) * kTileBytes + cu_bytes + 1024;
  set_smem_limit(attention_dq_wgmma_kernel, dq_smem, "attention_backward");
  attention_dq_wgmma_kernel<<<grid, kThreads, dq_smem, stream>>>(args);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
