// CUDA forward of kernels/attention.h, version 2 (kernels/cuda/attention_variants.h; v1 is in
// attention_forward.cu). bf16, head dim 128, varlen causal sliding window, fp32 online softmax.
//
// One block = 128 consecutive tokens × one head, 8 warps owning 16 query rows each; two blocks per SM
// (≈102 KB of shared memory and ≤128 registers per thread each). The block walks the keys
// [first_key(q0), q_last] in tiles of 64:
//   - K and V tiles are double-buffered with cp.async: tile n+1 is in flight while tile n is multiplied;
//   - fragments come from shared memory through ldmatrix (Q is re-read per tile rather than held in registers,
//     which keeps the register count under the two-blocks-per-SM limit);
//   - each warp classifies every tile against its own 16 rows: skipped when no row can see any of its keys,
//     computed without masks when every row sees every key, masked per element only on the boundary tiles;
//   - p = 2^(s·scale·log2e − m) is one FFMA and one ex2.approx (the row maximum is taken on raw scores, which is
//     why the host falls back to v1 for scale ≤ 0);
//   - the output is staged through the warp's own Q rows in shared memory so that y is written in 16-byte,
//     row-contiguous stores.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace gpt::cuda {

namespace {

using namespace attn;

constexpr int kBlockQ = 128, kBlockK = 64, kWarps = 8, kThreads = kWarps * 32, kStages = 2;
constexpr int kQElems = kBlockQ * kRowStride, kKvElems = kBlockK * kRowStride;
constexpr size_t kTileBytes = (kQElems + 2 * kStages * kKvElems) * sizeof(__nv_bfloat16);

enum class TileKind { skip, full, masked };

// Tile [k0, k0 + 64) against rows [t_first, t_last] whose first allowed keys run from lo_first to lo_last
// (first_key is non-decreasing in t).
__device__ __forceinline__ TileKind classify(int k0, int t_first, int t_last, int lo_first, int lo_last) {
  const int k_last = k0 + kBlockK - 1;
  if (t_last < t_first || k0 > t_last || k_last < lo_first) return TileKind::skip;
  if (k_last <= t_first && k0 >= lo_last) return TileKind::full;
  return TileKind::masked;
}

__global__ void __launch_bounds__(kThreads, 2) attention_forward_v2_kernel(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const int* __restrict__ cu_seqlens, int r, __nv_bfloat16* __restrict__ y, float* __restrict__ lse, int tokens,
    int heads, int window, float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* ks = qs + kQElems;                 // kStages K tiles
  __nv_bfloat16* vs = ks + kStages * kKvElems;      // kStages V tiles
  int* cu = reinterpret_cast<int*>(vs + kStages * kKvElems);

  const int head = blockIdx.y;
  const int q0 = blockIdx.x * kBlockQ;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  const int q_last = min(q0 + kBlockQ, tokens) - 1;

  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  __syncthreads();
  const int key_begin = static_cast<int>(first_key(cu, r, q0, window));
  const int kv_end = q_last + 1;
  const int tiles = (q_last - key_begin) / kBlockK + 1;

  load_tile_async<kThreads, kBlockQ>(qs, q, q0, tokens, heads, head);
  load_tile_async<kThreads, kBlockK>(ks, k, key_begin, kv_end, heads, head);
  load_tile_async<kThreads, kBlockK>(vs, v, key_begin, kv_end, heads, head);
  cp_async_commit();

  // This warp's rows, their first allowed keys, and this thread's two rows (g and g + 8).
  const int w0 = q0 + warp * 16;
  const int w_last = min(w0 + 15, tokens - 1);  // < w0 for a warp wholly past the end
  const int lo_w_first = w0 < tokens ? static_cast<int>(first_key(cu, r, w0, window)) : 0;
  const int lo_w_last = w0 < tokens ? static_cast<int>(first_key(cu, r, w_last, window)) : 0;
  int t_row[2], lo_row[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    t_row[i] = w0 + g + 8 * i;
    lo_row[i] = t_row[i] < tokens ? static_cast<int>(first_key(cu, r, t_row[i], window)) : t_row[i] + 1;
  }

  float o[kHeadDim / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int n = 0; n < tiles; ++n) {
    const int k0 = key_begin + n * kBlockK;
    const int stage = n % kStages;
    if (n + 1 < tiles) {  // the other stage was released by the barrier that ended iteration n − 1
      const int next = (n + 1) % kStages;
      load_tile_async<kThreads, kBlockK>(ks + next * kKvElems, k, k0 + kBlockK, kv_end, heads, head);
      load_tile_async<kThreads, kBlockK>(vs + next * kKvElems, v, k0 + kBlockK, kv_end, heads, head);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    const TileKind kind = classify(k0, w0, w_last, lo_w_first, lo_w_last);
    if (kind != TileKind::skip) {
      const __nv_bfloat16* kt = ks + stage * kKvElems;
      const __nv_bfloat16* vt = vs + stage * kKvElems;
      float s[kBlockK / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t qa[4];
        ldmatrix_a(qa, qs, warp * 16, kk * 16, lane);
#pragma unroll
        for (int n2 = 0; n2 < kBlockK / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_b_rows_x2(b, kt, n2 * 16, kk * 16, lane);
          mma_bf16(s[2 * n2], qa, b[0], b[1]);
          mma_bf16(s[2 * n2 + 1], qa, b[2], b[3]);
        }
      }
      if (kind == TileKind::masked) {
#pragma unroll
        for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int row = j >> 1, key = k0 + nt * 8 + 2 * c + (j & 1);
            if (key < lo_row[row] || key > t_row[row]) s[nt][j] = -INFINITY;
          }
        }
      }
      // Row maxima on raw scores (scale > 0), then m in the log2 domain.
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt) {
        tile_max[0] = fmaxf(tile_max[0], fmaxf(s[nt][0], s[nt][1]));
        tile_max[1] = fmaxf(tile_max[1], fmaxf(s[nt][2], s[nt][3]));
      }
      float neg_m[2], rescale[2];
#pragma unroll
      for (int row = 0; row < 2; ++row) {
        tile_max[row] = fmaxf(tile_max[row], __shfl_xor_sync(0xffffffffu, tile_max[row], 1));
        tile_max[row] = fmaxf(tile_max[row], __shfl_xor_sync(0xffffffffu, tile_max[row], 2));
        const float m_new = fmaxf(m[row], tile_max[row] * scale_log2);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing allowed yet stays at zero
        rescale[row] = fast_exp2(m[row] - m_use);
        m[row] = m_new;
        neg_m[row] = -m_use;
      }
      float sum[2] = {0.f, 0.f};
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[nt][j] = fast_exp2(fmaf(s[nt][j], scale_log2, neg_m[j >> 1]));
          sum[j >> 1] += s[nt][j];
        }
      }
#pragma unroll
      for (int row = 0; row < 2; ++row) l[row] = l[row] * rescale[row] + sum[row];
#pragma unroll
      for (int nt = 0; nt < kHeadDim / 8; ++nt) {
        o[nt][0] *= rescale[0];
        o[nt][1] *= rescale[0];
        o[nt][2] *= rescale[1];
        o[nt][3] *= rescale[1];
      }
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int n2 = 0; n2 < kHeadDim / 16; ++n2) {
          uint32_t b[4];
          load_b_cols_x2(b, vt, kk * 16, n2 * 16, lane);
          mma_bf16(o[2 * n2], pa, b[0], b[1]);
          mma_bf16(o[2 * n2 + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Normalise, stage the warp's 16 output rows in its own Q rows (only this warp ever read them), then store
  // whole 256-byte rows with 16-byte accesses.
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    l[row] += __shfl_xor_sync(0xffffffffu, l[row], 1);
    l[row] += __shfl_xor_sync(0xffffffffu, l[row], 2);
  }
  __nv_bfloat16* stage_rows = qs + warp * 16 * kRowStride;
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const float inv = l[row] > 0.f ? 1.f / l[row] : 0.f;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      *reinterpret_cast<__nv_bfloat162*>(stage_rows + (g + 8 * row) * kRowStride + nt * 8 + 2 * c) =
          __floats2bfloat162_rn(o[nt][2 * row] * inv, o[nt][2 * row + 1] * inv);
    }
    const int t = t_row[row];
    if (c == 0 && t < tokens) lse[static_cast<int64_t>(head) * tokens + t] = (m[row] + log2f(l[row])) / kLog2e;
  }
  __syncwarp();
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int j = 0; j < 16 * kChunks / 32; ++j) {
    const int i = lane + j * 32, rr = i / kChunks, chunk = i % kChunks;
    const int t = w0 + rr;
    if (t < tokens) {
      *reinterpret_cast<uint4*>(y + (static_cast<int64_t>(t) * heads + head) * kHeadDim + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage_rows + rr * kRowStride + chunk * 8);
    }
  }
}

}  // namespace

void attention_forward_v2(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  if (!(scale > 0.f)) {  // the kernel takes row maxima on raw scores, which needs a positive scale
    attention_forward_v1(q, k, v, cu_seqlens, y, lse, window, scale);
    return;
  }
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  if (p.tokens == 0) return;
  const size_t smem = kTileBytes + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_forward_v2_kernel, smem, "attention_forward");
  // Windows past the sequence length behave as the sequence length (and fit the kernel's int arithmetic).
  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);
  const dim3 grid(static_cast<unsigned>((p.tokens + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(p.heads));
  attention_forward_v2_kernel<<<grid, kThreads, smem, current_stream()>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_i32(cu_seqlens), p.r, device_bf16(y),
      static_cast<float*>(lse.raw()), static_cast<int>(p.tokens), p.heads, win, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
