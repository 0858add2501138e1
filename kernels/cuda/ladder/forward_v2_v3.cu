// Kernel ladder, forward v2 and v3 (kernels/cuda/ladder/attention_versions.h; v1 is the production fallback
// attention_forward_any_scale). bf16, head dim 128, varlen causal sliding window, fp32 online softmax.
//
// One block = 128 consecutive tokens × one head; v2: 8 warps owning 16 query rows each (≤128 registers), v3: 4 warps
// owning 32 rows each (≤255 registers); two blocks per SM (≈102 KB of shared memory each). The block walks the keys
// [first_key(q0), q_last] in tiles of 64:
//   - K and V tiles are double-buffered with cp.async: tile n+1 is in flight while tile n is multiplied;
//   - fragments come from shared memory through ldmatrix (Q is re-read per tile rather than held in registers,
//     which keeps the register count under the two-blocks-per-SM limit);
//   - each warp classifies every tile against its own 16 rows: skipped when no row can see any of its keys,
//     computed without masks when every row sees every key, masked per element only on the boundary tiles;
//   - p = 2^(s·scale·log2e − m) is one FFMA and one ex2.approx (the row maximum is taken on raw scores, which is
//     why the host falls back to v1 = attention_forward_any_scale for scale ≤ 0);
//   - the output is staged through the warp's own Q rows in shared memory so that y is written in 16-byte,
//     row-contiguous stores.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/ladder/attention_versions.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/runtime.h"

namespace gpt::cuda::ladder {

namespace {

using namespace attn;

constexpr int kBlockQ = 128, kBlockK = 64, kStages = 2;
constexpr int kQElems = kBlockQ * kRowStride, kKvElems = kBlockK * kRowStride;
constexpr size_t kTileBytes = (kQElems + 2 * kStages * kKvElems) * sizeof(__nv_bfloat16);

__device__ __forceinline__ TileKind classify(int k0, int t_first, int t_last, int lo_first, int lo_last) {
  return classify_keys<kBlockK>(k0, t_first, t_last, lo_first, lo_last);
}

// kMT = 16-row tiles per warp: 1 → 8 warps × 16 rows (v2), 2 → 4 warps × 32 rows (v3: every K/V fragment read
// from shared memory feeds two row tiles, so shared-memory traffic per FLOP halves, at ≈2× the registers).
template <int kMT>
__global__ void __launch_bounds__(32 * (8 / kMT), 2)
    attention_forward_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                             const __nv_bfloat16* __restrict__ v, const int* __restrict__ cu_seqlens, int r,
                             __nv_bfloat16* __restrict__ y, float* __restrict__ lse, int tokens, int heads, int window,
                             float scale_log2) {
  constexpr int kWarps = 8 / kMT, kThreads = 32 * kWarps, kWarpRows = 16 * kMT;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* ks = qs + kQElems;             // kStages K tiles
  __nv_bfloat16* vs = ks + kStages * kKvElems;  // kStages V tiles
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

  // This warp's rows and their first allowed keys; this thread's rows are g and g + 8 of each 16-row tile.
  const int w0 = q0 + warp * kWarpRows;
  const int w_last = min(w0 + kWarpRows - 1, tokens - 1);  // < w0 for a warp wholly past the end
  const int lo_w_first = w0 < tokens ? static_cast<int>(first_key(cu, r, w0, window)) : 0;
  const int lo_w_last = w0 < tokens ? static_cast<int>(first_key(cu, r, w_last, window)) : 0;
  int t_row[kMT][2], lo_row[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int t = w0 + mt * 16 + g + 8 * i;
      t_row[mt][i] = t;
      lo_row[mt][i] = t < tokens ? static_cast<int>(first_key(cu, r, t, window)) : t + 1;
    }
  }

  float o[kMT][kHeadDim / 8][4] = {};
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

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
      float s[kMT][kBlockK / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t qa[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) ldmatrix_a(qa[mt], qs, warp * kWarpRows + mt * 16, kk * 16, lane);
#pragma unroll
        for (int n2 = 0; n2 < kBlockK / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_b_rows_x2(b, kt, n2 * 16, kk * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_bf16(s[mt][2 * n2], qa[mt], b[0], b[1]);
            mma_bf16(s[mt][2 * n2 + 1], qa[mt], b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if (kind == TileKind::masked) {
#pragma unroll
          for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const int row = j >> 1, key = k0 + nt * 8 + 2 * c + (j & 1);
              if (key < lo_row[mt][row] || key > t_row[mt][row]) s[mt][nt][j] = -INFINITY;
            }
          }
        }
        // Row maxima on raw scores (scale > 0), then m in the log2 domain.
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < kBlockK / 8; ++nt) {
          tile_max[0] = fmaxf(tile_max[0], fmaxf(s[mt][nt][0], s[mt][nt][1]));
          tile_max[1] = fmaxf(tile_max[1], fmaxf(s[mt][nt][2], s[mt][nt][3]));
        }
        float neg_m[2], rescale[2];
#pragma unroll
        for (int row = 0; row < 2; ++row) {
          tile_max[row] = quad_max(tile_max[row]);
          const float m_new = fmaxf(m[mt][row], tile_max[row] * scale_log2);
          const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing allowed yet stays at zero
          rescale[row] = fast_exp2(m[mt][row] - m_use);
          m[mt][row] = m_new;
          neg_m[row] = -m_use;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            s[mt][nt][j] = fast_exp2(fmaf(s[mt][nt][j], scale_log2, neg_m[j >> 1]));
            sum[j >> 1] += s[mt][nt][j];
          }
        }
#pragma unroll
        for (int row = 0; row < 2; ++row) l[mt][row] = l[mt][row] * rescale[row] + sum[row];
#pragma unroll
        for (int nt = 0; nt < kHeadDim / 8; ++nt) {
          o[mt][nt][0] *= rescale[0];
          o[mt][nt][1] *= rescale[0];
          o[mt][nt][2] *= rescale[1];
          o[mt][nt][3] *= rescale[1];
        }
      }
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        uint32_t pa[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int n2 = 0; n2 < kHeadDim / 16; ++n2) {
          uint32_t b[4];
          load_b_cols_x2(b, vt, kk * 16, n2 * 16, lane);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_bf16(o[mt][2 * n2], pa[mt], b[0], b[1]);
            mma_bf16(o[mt][2 * n2 + 1], pa[mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Normalise, stage the warp's output rows in its own Q rows (only this warp ever read them), then store whole
  // 256-byte rows with 16-byte accesses.
  __nv_bfloat16* stage_rows = qs + warp * kWarpRows * kRowStride;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      const float sum = quad_sum(l[mt][row]);
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
      for (int nt = 0; nt < kHeadDim / 8; ++nt) {
        *reinterpret_cast<__nv_bfloat162*>(stage_rows + (mt * 16 + g + 8 * row) * kRowStride + nt * 8 + 2 * c) =
            __floats2bfloat162_rn(o[mt][nt][2 * row] * inv, o[mt][nt][2 * row + 1] * inv);
      }
      const int t = t_row[mt][row];
      if (c == 0 && t < tokens) lse[static_cast<int64_t>(head) * tokens + t] = (m[mt][row] + log2f(sum)) / kLog2e;
    }
  }
  __syncwarp();
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int j = 0; j < kWarpRows * kChunks / 32; ++j) {
    const int i = lane + j * 32, rr = i / kChunks, chunk = i % kChunks;
    const int t = w0 + rr;
    if (t < tokens) {
      *reinterpret_cast<uint4*>(y + (static_cast<int64_t>(t) * heads + head) * kHeadDim + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage_rows + rr * kRowStride + chunk * 8);
    }
  }
}

template <int kMT>
void launch_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y, Tensor& lse,
                    int64_t window, float scale) {
  if (!(scale > 0.f)) {  // the kernel takes row maxima on raw scores, which needs a positive scale
    attention_forward_any_scale(q, k, v, cu_seqlens, y, lse, window, scale);
    return;
  }
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  if (p.tokens == 0) return;
  const size_t smem = kTileBytes + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_forward_kernel<kMT>, smem, "attention_forward");
  // Windows past the sequence length behave as the sequence length (and fit the kernel's int arithmetic).
  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);
  const dim3 grid(static_cast<unsigned>((p.tokens + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(p.heads));
  attention_forward_kernel<kMT><<<grid, 32 * (8 / kMT), smem, current_stream()>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_i32(cu_seqlens), p.r, device_bf16(y),
      static_cast<float*>(lse.raw()), static_cast<int>(p.tokens), p.heads, win, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_forward_v2(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_forward<1>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_v3(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_forward<2>(q, k, v, cu_seqlens, y, lse, window, scale);
}

}  // namespace gpt::cuda::ladder
