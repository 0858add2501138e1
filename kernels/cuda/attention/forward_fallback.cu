// The production forward's fallbacks (attention/fallback.h): attention_forward_without_tma instantiates
// attention/forward_fallback.cuh; attention_forward_any_scale is a flash-attention kernel for bf16, head dim 128,
// varlen causal sliding window, fp32 online softmax that takes any scale.
//
// any_scale: one block = 64 consecutive tokens of the packed sequence × one head; 4 warps own 16 query rows each.
// The queries of a block may only see keys in [first_key(q0), q_last] (first_key is non-decreasing in t), so the
// key loop walks exactly that range in tiles of 64: tiles fully masked by the window or by segment starts are never
// visited. Elements inside a visited tile are masked per (query, key).
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/forward_fallback.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/runtime.h"

namespace gpt::cuda {

namespace {
namespace any_scale {  // apart from forward_fallback.cuh's names

using namespace attn;

constexpr int kBlockQ = 64, kBlockK = 64, kWarps = 4, kThreads = kWarps * 32;
constexpr int kTileElems = 64 * kRowStride;

__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                             const __nv_bfloat16* __restrict__ v, const int* __restrict__ cu_seqlens, int r,
                             __nv_bfloat16* __restrict__ y, float* __restrict__ lse, int64_t tokens, int heads,
                             int64_t window, float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* ks = qs + kTileElems;
  __nv_bfloat16* vs = ks + kTileElems;
  int* cu = reinterpret_cast<int*>(vs + kTileElems);

  const int head = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kBlockQ;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  load_tile<kThreads>(qs, q, q0, kBlockQ, tokens, heads, head);
  __syncthreads();

  // This thread's two query rows and their first allowed key.
  const int64_t t_row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  int64_t lo_row[2];
  for (int i = 0; i < 2; ++i) lo_row[i] = t_row[i] < tokens ? first_key(cu, r, t_row[i], window) : t_row[i] + 1;

  uint32_t qa[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) load_a(qa[kk], qs, warp * 16, kk * 16, lane);

  float o[kHeadDim / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int64_t q_last = (q0 + kBlockQ < tokens ? q0 + kBlockQ : tokens) - 1;
  const int64_t key_begin = first_key(cu, r, q0, window);

  for (int64_t k0 = key_begin; k0 <= q_last; k0 += kBlockK) {
    __syncthreads();  // the previous tile is no longer read
    load_tile<kThreads>(ks, k, k0, kBlockK, q_last + 1, heads, head);
    load_tile<kThreads>(vs, v, k0, kBlockK, q_last + 1, heads, head);
    __syncthreads();

    float s[kBlockK / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt) {
        uint32_t b0, b1;
        load_b_rows(b0, b1, ks, nt * 8, kk * 16, lane);
        mma_bf16(s[nt], qa[kk], b0, b1);
      }
    }

    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = j >> 1;
        const int64_t key = k0 + nt * 8 + 2 * c + (j & 1);
        const bool allowed = key >= lo_row[row] && key <= t_row[row];
        s[nt][j] = allowed ? s[nt][j] * scale_log2 : -INFINITY;
        tile_max[row] = fmaxf(tile_max[row], s[nt][j]);
      }
    }
    float rescale[2];
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      tile_max[row] = quad_max(tile_max[row]);
      const float m_new = fmaxf(m[row], tile_max[row]);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing allowed yet stays at zero
      rescale[row] = exp2f(m[row] - m_use);
      m[row] = m_new;
      tile_max[row] = m_use;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[nt][j] = exp2f(s[nt][j] - tile_max[j >> 1]);
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
        load_b_cols_x2(b, vs, kk * 16, n2 * 16, lane);
        mma_bf16(o[2 * n2], pa, b[0], b[1]);
        mma_bf16(o[2 * n2 + 1], pa, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int row = 0; row < 2; ++row) {
    l[row] = quad_sum(l[row]);
  }
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const int64_t t = t_row[row];
    if (t >= tokens) continue;
    const float inv = 1.f / l[row];
    __nv_bfloat16* yr = y + (t * heads + head) * kHeadDim;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      *reinterpret_cast<__nv_bfloat162*>(yr + nt * 8 + 2 * c) =
          __floats2bfloat162_rn(o[nt][2 * row] * inv, o[nt][2 * row + 1] * inv);
    }
    if (c == 0) lse[static_cast<int64_t>(head) * tokens + t] = (m[row] + log2f(l[row])) / kLog2e;
  }
}

}  // namespace any_scale
}  // namespace

void attention_forward_without_tma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                   Tensor& y, Tensor& lse, int64_t window, float scale) {
  launch_wgmma_forward(attention_forward_wgmma_kernel<false>, 3, q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_any_scale(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                                 Tensor& lse, int64_t window, float scale) {
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  const size_t smem = 3 * any_scale::kTileElems * sizeof(__nv_bfloat16) + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(any_scale::attention_forward_kernel, smem, "attention_forward");
  const dim3 grid(static_cast<unsigned>((p.tokens + any_scale::kBlockQ - 1) / any_scale::kBlockQ),
                  static_cast<unsigned>(p.heads));
  any_scale::attention_forward_kernel<<<grid, any_scale::kThreads, smem, current_stream()>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_i32(cu_seqlens), p.r, device_bf16(y),
      static_cast<float*>(lse.raw()), p.tokens, p.heads, window, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
