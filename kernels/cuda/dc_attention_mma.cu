// DC correction (kernels/dc_attention.h), version 2: bf16 tensor-core kernels for head dim 128 and windows of
// at most 113 keys (the recipe's 112). Version 1 (dc_attention.cu) runs one block per token on CUDA cores and
// re-reads the whole window from L2 for every token; here a block of 64 tokens shares its tiles in shared memory
// and the products run as mma.sync m16n8k16 with fp32 accumulation (fragment layouts: attention/common.cuh).
//
// Geometry. A warp owns 16 consecutive rows; every key (or query) those rows can touch lies in one 128-wide span
// (16 + keys − 1 ≤ 128), so each warp multiplies 16 × 128 tiles and masks per element. A block of 64 rows reads a
// "wide" tile of 176 = 64 + 112 rows of the other side, warp w starting at its row 16·w.
//
//   forward (query blocks): phase 1, per head: S = Q·Kᵀ, π = softmax (whole window in registers: no online
//     rescaling), a += w1_h·π. Phase 2, per head g: y_g = bf16(w2_g·a)·V_g, added to y_core.
//   backward pass 1 (query blocks): phase A accumulates a and da = Σ_g w2_g·dc_g (dc = dY·Vᵀ) and saves both to
//     a [T, 128] scratch (slot s − t + 127) for pass 2; phase B, per head: dw2 = Σ_s a·dc, π again, dw1 = Σ_s π·da,
//     dlogit = π·w1·(da − dw1), dq += τ·dlogit·K; then the gate-lane gradients, serially per token as in v1.
//   backward pass 2 (key blocks): per head, Sᵀ = K·Qᵀ, dlogitᵀ and cᵀ = bf16(w2·a) from pass 1's scratch,
//     dk += τ·dlogitᵀ·Q, dv += cᵀ·dY. One writer per output element: deterministic, no atomics.
// dlogit enters its products rounded to bf16 (v1 keeps it in fp32); c is bf16 by RECIPE §2.9's rounding.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/dc_attention_variants.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/dc_attention.h"

namespace gpt::cuda {

namespace {

using namespace attn;
using bf16 = __nv_bfloat16;

constexpr int kRows = 64;  // tokens per block (queries, or keys in pass 2)
constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kSpan = 128;                 // one warp's reach on the other side
constexpr int kWide = kRows + kSpan - 16;  // 176 rows of the other side per block
constexpr int kMaxHeads = 8;
constexpr int kSlots = kSpan;  // pass-1 scratch entries per token
constexpr int kNarrowElems = kRows * kRowStride, kWideElems = kWide * kRowStride;

struct DcParams {
  const bf16 *q, *k, *v, *dy, *gates, *y_core;
  bf16 *y_out, *dq, *dk, *dv, *dgates;
  float* lse;
  float *w1_all, *dw1_all, *a_all, *da_all;  // pass 1 → pass 2
  const int* cu;
  int r, tokens, heads, keys, w1_lane, w2_lane;
  int64_t gate_stride;
  float scale, scale_log2;
};

// Rows [first, first + kTileRows) of one head into a padded tile; tokens outside [0, tokens) read as zeros.
template <int kTileRows>
__device__ __forceinline__ void load_rows(bf16* tile, const bf16* base, int first, int tokens, int heads, int head) {
  constexpr int kChunks = kHeadDim / 8;
  static_assert(kTileRows * kChunks % kThreads == 0);
#pragma unroll 4
  for (int j = 0; j < kTileRows * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads, row = i / kChunks, chunk = i % kChunks;
    const int token = first + row;
    const bool valid = token >= 0 && token < tokens;
    const bf16* src = base + ((static_cast<int64_t>(valid ? token : 0) * heads + head) * kHeadDim + chunk * 8);
    cp_async_16(tile + row * kRowStride + chunk * 8, src, valid);
  }
}

__device__ __forceinline__ void finish_loads() {
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// acc (16 × 128 of this warp) = A rows [row0, row0 + 16) of `narrow` · Bᵀ with B = `wide` rows
// [row0, row0 + 128): the scores of the warp's rows against its span.
__device__ __forceinline__ void scores(float (&acc)[16][4], const bf16* narrow, const bf16* wide, int row0, int lane) {
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_a(a, narrow, row0, kk * 16, lane);
#pragma unroll
    for (int n2 = 0; n2 < kSpan / 16; ++n2) {
      uint32_t b[4];
      ldmatrix_b_rows_x2(b, wide, row0 + n2 * 16, kk * 16, lane);
      mma_bf16(acc[2 * n2], a, b[0], b[1]);
      mma_bf16(acc[2 * n2 + 1], a, b[2], b[3]);
    }
  }
}

// acc (16 × 64: output columns [col0, col0 + 64)) = P · wide rows [row0, row0 + 128), with P given as the eight
// 16-column A fragments of this warp's 16 × 128 weights.
__device__ __forceinline__ void weighted_rows(float (&acc)[8][4], const uint32_t (&p)[8][4], const bf16* wide, int row0,
                                              int col0, int lane) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kSpan / 16; ++kk) {
#pragma unroll
    for (int n2 = 0; n2 < 4; ++n2) {
      uint32_t b[4];
      load_b_cols_x2(b, wide, row0 + kk * 16, col0 + n2 * 16, lane);
      mma_bf16(acc[2 * n2], p[kk], b[0], b[1]);
      mma_bf16(acc[2 * n2 + 1], p[kk], b[2], b[3]);
    }
  }
}

// out[t, head, col0 + ...] = bf16(base + scale · acc) for this thread's rows t (where t < tokens); `out` may be
// `base` (the backward adds into its gradients, the forward into y_core).
__device__ __forceinline__ void add_rows(bf16* out, const bf16* base, const float (&acc)[8][4], const int (&t)[2],
                                         int tokens, int heads, int head, int col0, float scale, int c) {
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    if (t[row] >= tokens) continue;
    const int64_t at = (static_cast<int64_t>(t[row]) * heads + head) * kHeadDim + col0 + 2 * c;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const __nv_bfloat162 old = *reinterpret_cast<const __nv_bfloat162*>(base + at + nt * 8);
      *reinterpret_cast<__nv_bfloat162*>(out + at + nt * 8) = __floats2bfloat162_rn(
          __bfloat162float(old.x) + scale * acc[nt][2 * row], __bfloat162float(old.y) + scale * acc[nt][2 * row + 1]);
    }
  }
}

// Per block row (threads 0..63): w1 = bf16(r·ρ) and w2 (raw lanes) of every head; ρ is returned in rho[row].
__device__ void stage_mixing_weights(const DcParams& p, int t0, float* w1s, float* w2s, float* rho) {
  for (int i = threadIdx.x; i < kRows; i += kThreads) {
    const int t = t0 + i;
    if (t >= p.tokens) continue;
    const bf16* g = p.gates + static_cast<int64_t>(t) * p.gate_stride;
    float ss = 0.f;
    for (int h = 0; h < p.heads; ++h) ss += __bfloat162float(g[p.w1_lane + h]) * __bfloat162float(g[p.w1_lane + h]);
    const float rh = 1.f / sqrtf(ss / static_cast<float>(p.heads) + static_cast<float>(kDcNormEps));
    for (int h = 0; h < p.heads; ++h) {
      w1s[i * kMaxHeads + h] = __bfloat162float(__float2bfloat16(__bfloat162float(g[p.w1_lane + h]) * rh));
      w2s[i * kMaxHeads + h] = __bfloat162float(g[p.w2_lane + h]);
    }
    if (rho != nullptr) rho[i] = rh;
  }
}

// This thread's two rows of a query block and the lowest key each may see (t + 1 for rows past the end: no key).
struct QueryRows {
  int t[2], lo[2], local[2];
};
__device__ __forceinline__ QueryRows query_rows(const DcParams& p, const int* cu, int q0, int warp, int g) {
  QueryRows rows;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    rows.local[i] = warp * 16 + g + 8 * i;
    rows.t[i] = q0 + rows.local[i];
    rows.lo[i] = rows.t[i] < p.tokens ? static_cast<int>(first_key(cu, p.r, rows.t[i], p.keys - 1)) : rows.t[i] + 1;
  }
  return rows;
}

// The key of element (nt, j) of this warp's score tile whose span starts at `span0`.
__device__ __forceinline__ int span_index(int span0, int nt, int j, int c) { return span0 + nt * 8 + 2 * c + (j & 1); }

// π of one head in place of the scores: normalised over the row when `lse_in` is null (forward; writes lse),
// else exp(τ·s − lse) with the saved log-normalizer. Masked entries become 0.
__device__ __forceinline__ void probabilities(float (&s)[16][4], const QueryRows& rows, int span0, int c,
                                              const DcParams& p, int head, bool forward) {
  float m[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = j >> 1, key = span_index(span0, nt, j, c);
      const bool ok = key >= rows.lo[row] && key <= rows.t[row];
      s[nt][j] = ok ? s[nt][j] * p.scale_log2 : -INFINITY;
      m[row] = fmaxf(m[row], s[nt][j]);
    }
  }
  float shift[2];
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    if (forward) {
      m[row] = quad_max(m[row]);
      shift[row] = m[row] == -INFINITY ? 0.f : m[row];
    } else {
      shift[row] = rows.t[row] < p.tokens ? p.lse[static_cast<int64_t>(head) * p.tokens + rows.t[row]] * kLog2e : 0.f;
    }
  }
  float z[2] = {0.f, 0.f};
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[nt][j] = fast_exp2(s[nt][j] - shift[j >> 1]);
      z[j >> 1] += s[nt][j];
    }
  }
  if (!forward) return;
  float inv[2];
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    z[row] = quad_sum(z[row]);
    inv[row] = z[row] > 0.f ? 1.f / z[row] : 0.f;
    if (c == 0 && rows.t[row] < p.tokens) {
      p.lse[static_cast<int64_t>(head) * p.tokens + rows.t[row]] = (shift[row] + log2f(z[row])) / kLog2e;
    }
  }
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) s[nt][j] *= inv[j >> 1];
  }
}

// The 16-column A fragments of x (16 × 128 in C layout) scaled per row: bf16(scale[row] · x).
__device__ __forceinline__ void pack_rows(uint32_t (&out)[8][4], const float (&x)[16][4], const float (&scale)[2]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    out[kk][0] = pack_bf16(scale[0] * x[2 * kk][0], scale[0] * x[2 * kk][1]);
    out[kk][1] = pack_bf16(scale[1] * x[2 * kk][2], scale[1] * x[2 * kk][3]);
    out[kk][2] = pack_bf16(scale[0] * x[2 * kk + 1][0], scale[0] * x[2 * kk + 1][1]);
    out[kk][3] = pack_bf16(scale[1] * x[2 * kk + 1][2], scale[1] * x[2 * kk + 1][3]);
  }
}

// Shared memory of every kernel here: a narrow tile (64 rows), a wide tile (176 rows), kFloats per-row values and
// the cu_seqlens table: 64 + 176 padded rows and 10 KB of floats, ≈ 76 KB (two blocks per SM).
constexpr int kFloats = 5 * kRows * kMaxHeads;
struct SharedLayout {
  bf16 *narrow, *wide;
  float* f;  // kFloats values; each kernel names its own parts
  int* cu;
};
__device__ __forceinline__ SharedLayout shared_layout(unsigned char* raw) {
  SharedLayout l;
  l.narrow = reinterpret_cast<bf16*>(raw);
  l.wide = l.narrow + kNarrowElems;
  l.f = reinterpret_cast<float*>(l.wide + kWideElems);
  l.cu = reinterpret_cast<int*>(l.f + kFloats);
  return l;
}
size_t shared_bytes(int r) {
  return (kNarrowElems + kWideElems) * sizeof(bf16) + kFloats * sizeof(float) + static_cast<size_t>(r) * sizeof(int);
}

__device__ __forceinline__ void stage_cu(const DcParams& p, int* cu) {
  for (int i = threadIdx.x; i < p.r; i += kThreads) cu[i] = p.cu[i];
}

// w1 (bf16-rounded) and w2 of every head for the block's 64 query rows: [kRows][kMaxHeads] each.
struct Weights {
  float *w1s, *w2s;
};

// Opening of the forward and of the backward's pass 1: stages cu_seqlens and the mixing weights of the block's
// queries (ρ too where `rho` is given), then finds this thread's query rows.
__device__ __forceinline__ QueryRows stage_query_block(const DcParams& p, const SharedLayout& sh, const Weights& w,
                                                       int q0, int warp, int g, float* rho) {
  stage_cu(p, sh.cu);
  stage_mixing_weights(p, q0, w.w1s, w.w2s, rho);
  __syncthreads();
  return query_rows(p, sh.cu, q0, warp, g);
}

// s = this warp's 16 rows of `narrow_src` rows [narrow_first, + kRows) · (`wide_src` rows [wide_first, + kWide))ᵀ,
// one head; the tiles stay in use until the caller's next barrier.
__device__ __forceinline__ void head_scores(float (&s)[16][4], const SharedLayout& sh, const DcParams& p, int h,
                                            const bf16* narrow_src, int narrow_first, const bf16* wide_src,
                                            int wide_first, int warp, int lane) {
  load_rows<kRows>(sh.narrow, narrow_src, narrow_first, p.tokens, p.heads, h);
  load_rows<kWide>(sh.wide, wide_src, wide_first, p.tokens, p.heads, h);
  finish_loads();
  scores(s, sh.narrow, sh.wide, warp * 16, lane);
}

__global__ void __launch_bounds__(kThreads, 2) dc_forward_v2_kernel(DcParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const SharedLayout sh = shared_layout(smem_raw);
  const Weights w{sh.f, sh.f + kRows * kMaxHeads};
  const int q0 = blockIdx.x * kRows, span_first = q0 - (kSpan - 16);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  const QueryRows rows = stage_query_block(p, sh, w, q0, warp, g, nullptr);
  const int span0 = span_first + warp * 16;

  float a[16][4] = {};
  for (int h = 0; h < p.heads; ++h) {
    float s[16][4];
    head_scores(s, sh, p, h, p.q, q0, p.k, span_first, warp, lane);
    __syncthreads();  // tiles free for the next head
    probabilities(s, rows, span0, c, p, h, true);
    const float w1[2] = {w.w1s[rows.local[0] * kMaxHeads + h], w.w1s[rows.local[1] * kMaxHeads + h]};
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) a[nt][j] += w1[j >> 1] * s[nt][j];
    }
  }
  for (int h = 0; h < p.heads; ++h) {
    load_rows<kWide>(sh.wide, p.v, span_first, p.tokens, p.heads, h);
    finish_loads();
    uint32_t weights[8][4];
    const float w2[2] = {w.w2s[rows.local[0] * kMaxHeads + h], w.w2s[rows.local[1] * kMaxHeads + h]};
    pack_rows(weights, a, w2);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float y[8][4];
      weighted_rows(y, weights, sh.wide, warp * 16, half * 64, lane);
      add_rows(p.y_out, p.y_core, y, rows.t, p.tokens, p.heads, h, half * 64, 1.f, c);
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads, 2) dc_backward_query_v2_kernel(DcParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const SharedLayout sh = shared_layout(smem_raw);
  const Weights w{sh.f, sh.f + kRows * kMaxHeads};
  float* dw1s = sh.f + 2 * kRows * kMaxHeads;  // [kRows][kMaxHeads]
  float* dw2s = sh.f + 3 * kRows * kMaxHeads;  // [kRows][kMaxHeads]
  float* rho = sh.f + 4 * kRows * kMaxHeads;   // [kRows]
  const int q0 = blockIdx.x * kRows, span_first = q0 - (kSpan - 16);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  const QueryRows rows = stage_query_block(p, sh, w, q0, warp, g, rho);
  const int span0 = span_first + warp * 16;

  // Phase A: a = Σ_h w1_h·π_h and da = Σ_g w2_g·dc_g over the warp's span.
  float a[16][4] = {}, da[16][4] = {};
  for (int h = 0; h < p.heads; ++h) {
    const float w1[2] = {w.w1s[rows.local[0] * kMaxHeads + h], w.w1s[rows.local[1] * kMaxHeads + h]};
    const float w2[2] = {w.w2s[rows.local[0] * kMaxHeads + h], w.w2s[rows.local[1] * kMaxHeads + h]};
    float s[16][4];
    head_scores(s, sh, p, h, p.q, q0, p.k, span_first, warp, lane);
    __syncthreads();
    probabilities(s, rows, span0, c, p, h, false);
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) a[nt][j] += w1[j >> 1] * s[nt][j];
    }
    head_scores(s, sh, p, h, p.dy, q0, p.v, span_first, warp, lane);
    __syncthreads();
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) da[nt][j] += w2[j >> 1] * s[nt][j];
    }
  }
  // Save a and da for pass 2 at slot key − t + 127 (keys above t are never read there).
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = j >> 1, t = rows.t[row], key = span_index(span0, nt, j, c);
      if (t < p.tokens && key <= t) {
        const int64_t at = static_cast<int64_t>(t) * kSlots + (key - t + kSlots - 1);
        p.a_all[at] = a[nt][j];
        p.da_all[at] = da[nt][j];
      }
    }
  }

  // Phase B, per head: dw2, dw1, dlogit, dq.
  for (int h = 0; h < p.heads; ++h) {
    const float w1[2] = {w.w1s[rows.local[0] * kMaxHeads + h], w.w1s[rows.local[1] * kMaxHeads + h]};
    float s[16][4];
    head_scores(s, sh, p, h, p.dy, q0, p.v, span_first, warp, lane);
    __syncthreads();
    float dw2[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) dw2[j >> 1] += a[nt][j] * s[nt][j];
    }
    head_scores(s, sh, p, h, p.q, q0, p.k, span_first, warp, lane);
    probabilities(s, rows, span0, c, p, h, false);
    float dw1[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) dw1[j >> 1] += s[nt][j] * da[nt][j];
    }
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      dw1[row] = quad_sum(dw1[row]);
      dw2[row] = quad_sum(dw2[row]);
      if (c == 0) {
        dw1s[rows.local[row] * kMaxHeads + h] = dw1[row];
        dw2s[rows.local[row] * kMaxHeads + h] = dw2[row];
      }
    }
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) s[nt][j] *= da[nt][j] - dw1[j >> 1];
    }
    uint32_t dlogit[8][4];
    pack_rows(dlogit, s, w1);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float dq[8][4];
      weighted_rows(dq, dlogit, sh.wide, warp * 16, half * 64, lane);
      add_rows(p.dq, p.dq, dq, rows.t, p.tokens, p.heads, h, half * 64, p.scale, c);
    }
    __syncthreads();
  }
  // Gate-lane gradients, serially over the heads per token (the w1 and w2 lanes may share columns), as v1.
  for (int i = threadIdx.x; i < kRows; i += kThreads) {
    const int t = q0 + i;
    if (t >= p.tokens) continue;
    const bf16* r = p.gates + static_cast<int64_t>(t) * p.gate_stride + p.w1_lane;
    bf16* dg = p.dgates + static_cast<int64_t>(t) * p.gate_stride;
    const float rh = rho[i];
    float dw1_dot_r = 0.f;
    for (int h = 0; h < p.heads; ++h) dw1_dot_r += dw1s[i * kMaxHeads + h] * __bfloat162float(r[h]);
    for (int h = 0; h < p.heads; ++h) {
      const float dw1 = dw1s[i * kMaxHeads + h];
      const float dr = rh * dw1 - __bfloat162float(r[h]) * rh * rh * rh * dw1_dot_r / static_cast<float>(p.heads);
      dg[p.w1_lane + h] = __float2bfloat16(__bfloat162float(dg[p.w1_lane + h]) + dr);
      dg[p.w2_lane + h] = __float2bfloat16(__bfloat162float(dg[p.w2_lane + h]) + dw2s[i * kMaxHeads + h]);
      p.w1_all[static_cast<int64_t>(t) * p.heads + h] = w.w1s[i * kMaxHeads + h];
      p.dw1_all[static_cast<int64_t>(t) * p.heads + h] = dw1;
    }
  }
}

__global__ void __launch_bounds__(kThreads, 2) dc_backward_key_v2_kernel(DcParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const SharedLayout sh = shared_layout(smem_raw);
  // Per query column of the wide span (kWide entries each): the current head's lse (log2 domain), w1, dw1, w2,
  // and the lowest key the query may see (INT_MAX past the end).
  float* lse_col = sh.f;
  float* w1_col = sh.f + kWide;
  float* dw1_col = sh.f + 2 * kWide;
  float* w2_col = sh.f + 3 * kWide;
  int* lo_col = reinterpret_cast<int*>(sh.f + 4 * kWide);
  static_assert(5 * kWide <= kFloats);
  const int k0 = blockIdx.x * kRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  stage_cu(p, sh.cu);
  __syncthreads();
  for (int i = threadIdx.x; i < kWide; i += kThreads) {
    const int t = k0 + i;
    lo_col[i] = t < p.tokens ? static_cast<int>(first_key(sh.cu, p.r, t, p.keys - 1)) : 0x7fffffff;
  }
  const int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  const int col_first = warp * 16;  // this warp's span of query columns in the wide tile

  for (int h = 0; h < p.heads; ++h) {
    load_rows<kRows>(sh.narrow, p.k, k0, p.tokens, p.heads, h);
    load_rows<kWide>(sh.wide, p.q, k0, p.tokens, p.heads, h);
    for (int i = threadIdx.x; i < kWide; i += kThreads) {
      const int t = k0 + i;
      const bool in = t < p.tokens;
      lse_col[i] = in ? p.lse[static_cast<int64_t>(h) * p.tokens + t] * kLog2e : 0.f;
      w1_col[i] = in ? p.w1_all[static_cast<int64_t>(t) * p.heads + h] : 0.f;
      dw1_col[i] = in ? p.dw1_all[static_cast<int64_t>(t) * p.heads + h] : 0.f;
      w2_col[i] = in ? __bfloat162float(p.gates[static_cast<int64_t>(t) * p.gate_stride + p.w2_lane + h]) : 0.f;
    }
    finish_loads();
    float s[16][4];
    scores(s, sh.narrow, sh.wide, warp * 16, lane);  // Sᵀ: this warp's keys × its query span
    uint32_t dlogit[8][4], weight[8][4];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      float dl[4], cw[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = j >> 1, col = col_first + nt * 8 + 2 * c + (j & 1), t = k0 + col;
        const bool ok = key[row] >= lo_col[col] && key[row] <= t;
        dl[j] = cw[j] = 0.f;
        if (ok) {
          const int64_t at = static_cast<int64_t>(t) * kSlots + (key[row] - t + kSlots - 1);
          const float prob = fast_exp2(s[nt][j] * p.scale_log2 - lse_col[col]);
          dl[j] = prob * w1_col[col] * (__ldg(p.da_all + at) - dw1_col[col]);
          cw[j] = w2_col[col] * __ldg(p.a_all + at);
        }
      }
      const int kk = nt >> 1, hi = (nt & 1) * 2;
      dlogit[kk][hi] = pack_bf16(dl[0], dl[1]);
      dlogit[kk][hi + 1] = pack_bf16(dl[2], dl[3]);
      weight[kk][hi] = pack_bf16(cw[0], cw[1]);
      weight[kk][hi + 1] = pack_bf16(cw[2], cw[3]);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float acc[8][4];
      weighted_rows(acc, dlogit, sh.wide, warp * 16, half * 64, lane);
      add_rows(p.dk, p.dk, acc, key, p.tokens, p.heads, h, half * 64, p.scale, c);
    }
    __syncthreads();  // Q tile free: dY takes its place
    load_rows<kWide>(sh.wide, p.dy, k0, p.tokens, p.heads, h);
    finish_loads();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float acc[8][4];
      weighted_rows(acc, weight, sh.wide, warp * 16, half * 64, lane);
      add_rows(p.dv, p.dv, acc, key, p.tokens, p.heads, h, half * 64, 1.f, c);
    }
    __syncthreads();
  }
}

// The parameters both passes share: shape, segments, gates, scale, and the tensors both read (q, k, v) or carry from
// the forward to the backward (lse).
DcParams make_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, const Tensor& gates,
                     DcLanes lanes, const Tensor& lse, int64_t keys, float scale, const char* op) {
  GPT_CHECK(dc_attention_v2_supports(q, gates, keys), op, " v2: needs bf16 q and gates, head dim 128, at most ",
            kMaxHeads, " heads and at most ", kDcMaxKeysV2, " keys; got ", q.describe(), ", keys ", keys);
  DcParams p{};
  p.tokens = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(1));
  p.keys = static_cast<int>(keys < q.size(0) ? keys : q.size(0));
  p.r = static_cast<int>(cu_seqlens.size(0));
  p.cu = device_ptr<int>(cu_seqlens);
  p.gates = device_ptr<bf16>(gates);
  p.gate_stride = gates.size(1);
  p.w1_lane = static_cast<int>(lanes.w1);
  p.w2_lane = static_cast<int>(lanes.w2);
  p.scale = scale;
  p.scale_log2 = scale * kLog2e;
  p.q = device_ptr<bf16>(q);
  p.k = device_ptr<bf16>(k);
  p.v = device_ptr<bf16>(v);
  p.lse = device_ptr<float>(lse);
  return p;
}

template <typename Kernel>
void launch(Kernel kernel, const DcParams& p, const char* op) {
  const size_t smem = shared_bytes(p.r);
  const size_t limit = device_properties().sharedMemPerBlockOptin;
  GPT_CHECK(smem <= limit, op, ": needs ", smem, " bytes of shared memory (", p.r,
            " cu_seqlens entries), the device allows ", limit);
  GPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const unsigned blocks = static_cast<unsigned>((p.tokens + kRows - 1) / kRows);
  kernel<<<blocks, kThreads, smem, op_stream()>>>(p);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool dc_attention_v2_supports(const Tensor& q, const Tensor& gates, int64_t keys) {
  return q.dtype() == DType::bf16 && gates.dtype() == DType::bf16 && q.shape().size() == 3 && q.size(2) == kHeadDim &&
         q.size(1) >= 1 && q.size(1) <= kMaxHeads && keys >= 1 && keys <= kDcMaxKeysV2 &&
         q.size(0) < (int64_t{1} << 31) / kSlots;
}

void dc_attention_forward_v2(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                             const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                             float scale, int64_t keys) {
  const char* op = "dc_attention_forward";
  DcParams p = make_params(q, k, v, cu_seqlens, gates, lanes, lse, keys, scale, op);
  if (p.tokens == 0) return;
  p.y_core = device_ptr<bf16>(y_core);
  p.y_out = device_ptr<bf16>(y_out);
  launch(dc_forward_v2_kernel, p, op);
}

void dc_attention_backward_v2(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse,
                              Tensor& dq, Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys) {
  const char* op = "dc_attention_backward";
  DcParams p = make_params(q, k, v, cu_seqlens, gates, lanes, lse, keys, scale, op);
  if (p.tokens == 0) return;
  p.dy = device_ptr<bf16>(dy_out);
  p.dq = device_ptr<bf16>(dq);
  p.dk = device_ptr<bf16>(dk);
  p.dv = device_ptr<bf16>(dv);
  p.dgates = device_ptr<bf16>(dgates);
  const size_t T = static_cast<size_t>(p.tokens), H = static_cast<size_t>(p.heads);
  DeviceScratch w1_all(sizeof(float) * T * H), dw1_all(sizeof(float) * T * H);
  DeviceScratch a_all(sizeof(float) * T * kSlots), da_all(sizeof(float) * T * kSlots);
  p.w1_all = w1_all.as<float>();
  p.dw1_all = dw1_all.as<float>();
  p.a_all = a_all.as<float>();
  p.da_all = da_all.as<float>();
  launch(dc_backward_query_v2_kernel, p, op);
  launch(dc_backward_key_v2_kernel, p, op);
}

}  // namespace gpt::cuda
