// Kernel ladder, backward v1 (kernels/cuda/ladder/attention_versions.h; bf16, head dim 128), the recomputation
// form with the saved lse:
//   1. D[h, t] = ⟨dy_th, y_th⟩ (fp32; attention_row_dot);
//   2. per block of 64 keys: dK, dV over the queries that can see them (P and dS recomputed from q, k, lse);
//   3. per block of 64 queries: dQ over the keys they see (P and dS recomputed once more).
// Splitting dQ from dK/dV costs two extra products per tile but needs no atomics: every gradient element has one
// writer, is read, increased by its whole fp32 contribution and rounded once (the header's contract), and the
// result is deterministic.
#include <cuda_bf16.h>

#include <cmath>
#include <memory>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/ladder/attention_versions.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/runtime.h"

namespace gpt::cuda::ladder {

namespace {

using namespace attn;

constexpr int kWarps = 4, kThreads = kWarps * 32;

constexpr int kTileElems = 64 * kRowStride;

// dst[t, h, :] += scale · acc for this thread's two rows (fragment layout of 16 n-tiles), rounded once.
__device__ __forceinline__ void add_rows(__nv_bfloat16* dst, const float (&acc)[kHeadDim / 8][4], const int64_t (&t)[2],
                                         int64_t tokens, int heads, int head, float scale, int c) {
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    if (t[row] >= tokens) continue;
    __nv_bfloat16* p = dst + (t[row] * heads + head) * kHeadDim;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      auto* cell = reinterpret_cast<__nv_bfloat162*>(p + nt * 8 + 2 * c);
      const float2 old = __bfloat1622float2(*cell);
      *cell = __floats2bfloat162_rn(old.x + scale * acc[nt][2 * row], old.y + scale * acc[nt][2 * row + 1]);
    }
  }
}

// dK and dV of 64 keys (4 warps × 16 keys) against query tiles of 32.
constexpr int kKeysPerBlock = 64, kQueryTile = 32;

__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                          const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ dy,
                          const float* __restrict__ lse, const float* __restrict__ dsum,
                          const int* __restrict__ cu_seqlens, int r, __nv_bfloat16* __restrict__ dk,
                          __nv_bfloat16* __restrict__ dv, int64_t tokens, int heads, int64_t window, float scale,
                          float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* ks = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* vs = ks + kTileElems;
  __nv_bfloat16* qs = vs + kTileElems;
  __nv_bfloat16* dos = qs + kQueryTile * kRowStride;
  auto* lse2_s = reinterpret_cast<float*>(dos + kQueryTile * kRowStride);
  float* d_s = lse2_s + kQueryTile;
  auto* lo_s = reinterpret_cast<int64_t*>(d_s + kQueryTile);
  int* cu = reinterpret_cast<int*>(lo_s + kQueryTile);

  const int head = blockIdx.y;
  const int64_t s0 = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  load_tile<kThreads>(ks, k, s0, kKeysPerBlock, tokens, heads, head);
  load_tile<kThreads>(vs, v, s0, kKeysPerBlock, tokens, heads, head);
  __syncthreads();

  const int64_t key_row[2] = {s0 + warp * 16 + g, s0 + warp * 16 + g + 8};
  const int64_t s_last = (s0 + kKeysPerBlock < tokens ? s0 + kKeysPerBlock : tokens) - 1;
  // Queries that can see a key s: [s, min(segment end − 1, s + window)]; the block's union ends at s_last's bound.
  const int64_t seg_last = segment_end(cu, r, s_last) - 1;
  const int64_t q_end = seg_last < s_last + window ? seg_last : s_last + window;

  float dk_acc[kHeadDim / 8][4] = {}, dv_acc[kHeadDim / 8][4] = {};
  for (int64_t q0 = s0; q0 <= q_end; q0 += kQueryTile) {
    __syncthreads();
    load_tile<kThreads>(qs, q, q0, kQueryTile, q_end + 1, heads, head);
    load_tile<kThreads>(dos, dy, q0, kQueryTile, q_end + 1, heads, head);
    for (int i = threadIdx.x; i < kQueryTile; i += kThreads) {
      const int64_t t = q0 + i;
      const bool valid = t <= q_end;
      lse2_s[i] = valid ? lse[head * tokens + t] * kLog2e : 0.f;
      d_s[i] = valid ? dsum[head * tokens + t] : 0.f;
      lo_s[i] = valid ? first_key(cu, r, t, window) : tokens;  // invalid queries see no key
    }
    __syncthreads();

    float st[kQueryTile / 8][4] = {}, dpt[kQueryTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t ka[4], va[4];
      load_a(ka, ks, warp * 16, kk * 16, lane);
      load_a(va, vs, warp * 16, kk * 16, lane);
#pragma unroll
      for (int nt = 0; nt < kQueryTile / 8; ++nt) {
        uint32_t b0, b1;
        load_b_rows(b0, b1, qs, nt * 8, kk * 16, lane);
        mma_bf16(st[nt], ka, b0, b1);
        load_b_rows(b0, b1, dos, nt * 8, kk * 16, lane);
        mma_bf16(dpt[nt], va, b0, b1);
      }
    }
    // st becomes Pᵀ, dpt becomes dSᵀ (rows = keys, columns = queries).
#pragma unroll
    for (int nt = 0; nt < kQueryTile / 8; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = nt * 8 + 2 * c + (j & 1);
        const int64_t t = q0 + col, key = key_row[j >> 1];
        const bool allowed = key < tokens && key <= t && key >= lo_s[col];
        const float p = allowed ? exp2f(st[nt][j] * scale_log2 - lse2_s[col]) : 0.f;
        st[nt][j] = p;
        dpt[nt][j] = p * (dpt[nt][j] - d_s[col]);
      }
    }
#pragma unroll
    for (int kk = 0; kk < kQueryTile / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16(st[2 * kk][0], st[2 * kk][1]), pack_bf16(st[2 * kk][2], st[2 * kk][3]),
                              pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                              pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3])};
      const uint32_t da[4] = {pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]), pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]),
                              pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                              pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
      for (int n2 = 0; n2 < kHeadDim / 16; ++n2) {
        uint32_t b[4];
        load_b_cols_x2(b, dos, kk * 16, n2 * 16, lane);
        mma_bf16(dv_acc[2 * n2], pa, b[0], b[1]);
        mma_bf16(dv_acc[2 * n2 + 1], pa, b[2], b[3]);
        load_b_cols_x2(b, qs, kk * 16, n2 * 16, lane);
        mma_bf16(dk_acc[2 * n2], da, b[0], b[1]);
        mma_bf16(dk_acc[2 * n2 + 1], da, b[2], b[3]);
      }
    }
  }
  add_rows(dk, dk_acc, key_row, tokens, heads, head, scale, c);
  add_rows(dv, dv_acc, key_row, tokens, heads, head, 1.f, c);
}

// dQ of 64 queries (4 warps × 16 queries) against key tiles of 64.
constexpr int kQueriesPerBlock = 64, kKeyTile = 64;

__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                        const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ dy,
                        const float* __restrict__ lse, const float* __restrict__ dsum,
                        const int* __restrict__ cu_seqlens, int r, __nv_bfloat16* __restrict__ dq, int64_t tokens,
                        int heads, int64_t window, float scale, float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* dos = qs + kTileElems;
  __nv_bfloat16* ks = dos + kTileElems;
  __nv_bfloat16* vs = ks + kTileElems;
  int* cu = reinterpret_cast<int*>(vs + kTileElems);

  const int head = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kQueriesPerBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  load_tile<kThreads>(qs, q, q0, kQueriesPerBlock, tokens, heads, head);
  load_tile<kThreads>(dos, dy, q0, kQueriesPerBlock, tokens, heads, head);
  __syncthreads();

  const int64_t t_row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  int64_t lo_row[2];
  float lse2[2], d_row[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const bool valid = t_row[i] < tokens;
    lo_row[i] = valid ? first_key(cu, r, t_row[i], window) : t_row[i] + 1;
    lse2[i] = valid ? lse[head * tokens + t_row[i]] * kLog2e : 0.f;
    d_row[i] = valid ? dsum[head * tokens + t_row[i]] : 0.f;
  }
  const int64_t q_last = (q0 + kQueriesPerBlock < tokens ? q0 + kQueriesPerBlock : tokens) - 1;

  float dq_acc[kHeadDim / 8][4] = {};
  for (int64_t k0 = first_key(cu, r, q0, window); k0 <= q_last; k0 += kKeyTile) {
    __syncthreads();
    load_tile<kThreads>(ks, k, k0, kKeyTile, q_last + 1, heads, head);
    load_tile<kThreads>(vs, v, k0, kKeyTile, q_last + 1, heads, head);
    __syncthreads();

    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t qa[4], da[4];
      load_a(qa, qs, warp * 16, kk * 16, lane);
      load_a(da, dos, warp * 16, kk * 16, lane);
#pragma unroll
      for (int nt = 0; nt < kKeyTile / 8; ++nt) {
        uint32_t b0, b1;
        load_b_rows(b0, b1, ks, nt * 8, kk * 16, lane);
        mma_bf16(s[nt], qa, b0, b1);
        load_b_rows(b0, b1, vs, nt * 8, kk * 16, lane);
        mma_bf16(dp[nt], da, b0, b1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = j >> 1;
        const int64_t key = k0 + nt * 8 + 2 * c + (j & 1);
        const bool allowed = key >= lo_row[row] && key <= t_row[row];
        const float p = allowed ? exp2f(s[nt][j] * scale_log2 - lse2[row]) : 0.f;
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
        load_b_cols_x2(b, ks, kk * 16, n2 * 16, lane);
        mma_bf16(dq_acc[2 * n2], dsa, b[0], b[1]);
        mma_bf16(dq_acc[2 * n2 + 1], dsa, b[2], b[3]);
      }
    }
  }
  add_rows(dq, dq_acc, t_row, tokens, heads, head, scale, c);
}

}  // namespace

void attention_backward_v1(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  zero_overwritten(writes, dq, dk, dv);  // this version only adds
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_backward");
  const cudaStream_t stream = current_stream();
  const AttentionScratch dsum = attention_row_dot(dy, y, p);
  const auto* lse_p = static_cast<const float*>(lse.raw());

  const size_t dkdv_smem = (2 * kTileElems + 2 * kQueryTile * kRowStride) * sizeof(__nv_bfloat16) +
                           kQueryTile * (2 * sizeof(float) + sizeof(int64_t)) + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_dkdv_kernel, dkdv_smem, "attention_backward");
  const dim3 dkdv_grid(static_cast<unsigned>((p.tokens + kKeysPerBlock - 1) / kKeysPerBlock),
                       static_cast<unsigned>(p.heads));
  attention_dkdv_kernel<<<dkdv_grid, kThreads, dkdv_smem, stream>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_bf16(dy), lse_p, dsum.get(), device_i32(cu_seqlens), p.r,
      device_bf16(dk), device_bf16(dv), p.tokens, p.heads, window, scale, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();

  const size_t dq_smem = 4 * kTileElems * sizeof(__nv_bfloat16) + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_dq_kernel, dq_smem, "attention_backward");
  const dim3 dq_grid(static_cast<unsigned>((p.tokens + kQueriesPerBlock - 1) / kQueriesPerBlock),
                     static_cast<unsigned>(p.heads));
  attention_dq_kernel<<<dq_grid, kThreads, dq_smem, stream>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_bf16(dy), lse_p, dsum.get(), device_i32(cu_seqlens), p.r,
      device_bf16(dq), p.tokens, p.heads, window, scale, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda::ladder
