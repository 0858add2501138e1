// CUDA forward of kernels/attention.h, version 4 (kernels/cuda/attention_variants.h): v2's tiling and masks with
// the products on Hopper's warpgroup MMA (kernels/cuda/wgmma.cuh). bf16, head dim 128, varlen causal sliding
// window, fp32 online softmax.
//
// One block = 128 consecutive tokens × one head = two warpgroups of 64 query rows (255 registers, one block per SM).
// The block walks the keys [first_key(q0), q_last] in tiles of 64:
//   - Q and the K/V tiles sit in shared memory in the 128-byte swizzle wgmma reads; K/V tiles are triple-buffered
//     with cp.async (tiles n+1 and n+2 in flight while n is multiplied);
//   - S = Q·Kᵀ is eight m64n64k16 products with both operands in shared memory; P stays in registers and is the A
//     operand of O += P·V (four m64n128k16, V transposed on the fly from its row-major tile);
//   - each warpgroup classifies every tile against its 64 rows (skip / full / masked) as v2 does per warp;
//   - the output is staged through the Q tile's shared memory for 16-byte, row-contiguous stores.
// Not yet: TMA loads, a producer warpgroup, overlap of one warpgroup's softmax with the other's products
// (kernels/cuda/NOTES.md).
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda {

namespace {

using namespace attn;

constexpr int kBlockQ = 128, kBlockK = 64, kStages = 3;
constexpr int kWarpgroupRows = 64, kThreads = 128 * (kBlockQ / kWarpgroupRows);
constexpr int kRowBytes = wgmma::kSlabRowBytes;
constexpr int kQSlabBytes = kBlockQ * kRowBytes, kKvSlabBytes = kBlockK * kRowBytes;  // one 64-column slab
constexpr int kQBytes = 2 * kQSlabBytes, kKvBytes = 2 * kKvSlabBytes;               // head dim 128 = two slabs
constexpr size_t kSmemBytes = kQBytes + 2 * kStages * kKvBytes + 1024;                // + alignment slack
static_assert(kBlockQ * kHeadDim * sizeof(__nv_bfloat16) <= kQBytes, "the output is staged in the Q tile");

enum class TileKind { skip, full, masked };

// Tile [k0, k0 + 64) against rows [t_first, t_last] whose first allowed keys run from lo_first to lo_last.
__device__ __forceinline__ TileKind classify(int k0, int t_first, int t_last, int lo_first, int lo_last) {
  const int k_last = k0 + kBlockK - 1;
  if (t_last < t_first || k0 > t_last || k_last < lo_first) return TileKind::skip;
  if (k_last <= t_first && k0 >= lo_last) return TileKind::full;
  return TileKind::masked;
}

// Starts copying rows [first, first + kRows) of one head ([T, H, 128] bf16) into a swizzled tile (two slabs of
// kRows · 128 bytes); rows at or past `end` are zero-filled.
template <int kRows>
__device__ __forceinline__ void load_swizzled_async(uint8_t* tile, const __nv_bfloat16* base, int first, int end,
                                                    int heads, int head) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert(kRows * kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int j = 0; j < kRows * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / kChunks, chunk = i % kChunks;
    const int token = first + r;
    const bool valid = token < end;
    const __nv_bfloat16* src = base + ((static_cast<int64_t>(valid ? token : 0) * heads + head) * kHeadDim + chunk * 8);
    cp_async_16(tile + (chunk / 8) * (kRows * kRowBytes) + wgmma::swizzled_offset(r, chunk % 8), src, valid);
  }
}

// cp.async writes go through the generic proxy; wgmma reads shared memory through the async proxy.
__device__ __forceinline__ void fence_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__global__ void __launch_bounds__(kThreads, 1) attention_forward_wgmma_kernel(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const int* __restrict__ cu_seqlens, int r, __nv_bfloat16* __restrict__ y, float* __restrict__ lse, int tokens,
    int heads, int window, float scale_log2) {
  extern __shared__ unsigned char smem_raw[];
  // wgmma's swizzle is anchored at 1024-byte boundaries.
  uint8_t* qs = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* ks = qs + kQBytes;              // kStages K tiles
  uint8_t* vs = ks + kStages * kKvBytes;   // kStages V tiles
  int* cu = reinterpret_cast<int*>(vs + kStages * kKvBytes);

  const int head = blockIdx.y;
  const int q0 = blockIdx.x * kBlockQ;
  const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int q_last = min(q0 + kBlockQ, tokens) - 1;

  for (int i = threadIdx.x; i < r; i += kThreads) cu[i] = cu_seqlens[i];
  __syncthreads();
  const int key_begin = static_cast<int>(first_key(cu, r, q0, window));
  const int kv_end = q_last + 1;
  const int tiles = (q_last - key_begin) / kBlockK + 1;

  // Prologue: Q with tile 0 in the first group, then tiles 1 … kStages − 2, one group each (empty past the end).
  load_swizzled_async<kBlockQ>(qs, q, q0, tokens, heads, head);
#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) {
    if (n < tiles) {
      load_swizzled_async<kBlockK>(ks + n * kKvBytes, k, key_begin + n * kBlockK, kv_end, heads, head);
      load_swizzled_async<kBlockK>(vs + n * kKvBytes, v, key_begin + n * kBlockK, kv_end, heads, head);
    }
    cp_async_commit();
  }

  // This warpgroup's rows; this thread's rows are g and g + 8 of its warp's 16.
  const int w0 = q0 + wg * kWarpgroupRows;
  const int w_last = min(w0 + kWarpgroupRows - 1, tokens - 1);  // < w0 for a warpgroup wholly past the end
  const int lo_w_first = w0 < tokens ? static_cast<int>(first_key(cu, r, w0, window)) : 0;
  const int lo_w_last = w0 < tokens ? static_cast<int>(first_key(cu, r, w_last, window)) : 0;
  int t_row[2], lo_row[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int t = w0 + warp * 16 + g + 8 * i;
    t_row[i] = t;
    lo_row[i] = t < tokens ? static_cast<int>(first_key(cu, r, t, window)) : t + 1;
  }

  const uint32_t q_addr = wgmma::smem_addr(qs) + wg * kWarpgroupRows * kRowBytes;
  float o[kHeadDim / 2] = {};  // m64n128 accumulators
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int n = 0; n < tiles; ++n) {
    const int k0 = key_begin + n * kBlockK;
    const int stage = n % kStages;
    {  // tile n + kStages − 1 into the stage tile n − 1 used (released by the barrier that ended iteration n − 1)
      const int ahead = n + kStages - 1;
      if (ahead < tiles) {
        const int s_ahead = ahead % kStages;
        load_swizzled_async<kBlockK>(ks + s_ahead * kKvBytes, k, key_begin + ahead * kBlockK, kv_end, heads, head);
        load_swizzled_async<kBlockK>(vs + s_ahead * kKvBytes, v, key_begin + ahead * kBlockK, kv_end, heads, head);
      }
      cp_async_commit();
      cp_async_wait<kStages - 1>();  // tile n has landed
    }
    fence_async_proxy();
    __syncthreads();

    const TileKind kind = classify(k0, w0, w_last, lo_w_first, lo_w_last);  // uniform over the warpgroup
    if (kind != TileKind::skip) {
      const uint32_t k_addr = wgmma::smem_addr(ks + stage * kKvBytes);
      const uint32_t v_addr = wgmma::smem_addr(vs + stage * kKvBytes);
      float s[kBlockK / 2];  // m64n64 accumulators: s[4·nt + j] as v2's s[nt][j]
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        wgmma::mma_m64n64k16_ss(s, wgmma::k_major(q_addr + (kk / 4) * kQSlabBytes + 32 * (kk % 4)),
                                wgmma::k_major(k_addr + (kk / 4) * kKvSlabBytes + 32 * (kk % 4)), kk > 0);
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(s);

      if (kind == TileKind::masked) {
#pragma unroll
        for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int row = j >> 1, key = k0 + nt * 8 + 2 * c + (j & 1);
            if (key < lo_row[row] || key > t_row[row]) s[4 * nt + j] = -INFINITY;
          }
        }
      }
      // Row maxima on raw scores (scale > 0), then m in the log2 domain.
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt) {
        tile_max[0] = fmaxf(tile_max[0], fmaxf(s[4 * nt], s[4 * nt + 1]));
        tile_max[1] = fmaxf(tile_max[1], fmaxf(s[4 * nt + 2], s[4 * nt + 3]));
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
      for (int i = 0; i < kBlockK / 2; ++i) {
        s[i] = fast_exp2(fmaf(s[i], scale_log2, neg_m[(i >> 1) & 1]));
        sum[(i >> 1) & 1] += s[i];
      }
#pragma unroll
      for (int row = 0; row < 2; ++row) l[row] = l[row] * rescale[row] + sum[row];
#pragma unroll
      for (int i = 0; i < kHeadDim / 2; ++i) o[i] *= rescale[(i >> 1) & 1];

      // P as A fragments: k-step kk covers keys 16kk … 16kk + 15, the 8-key blocks nt = 2kk and 2kk + 1.
      uint32_t pa[kBlockK / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        pa[kk][0] = pack_bf16(s[8 * kk], s[8 * kk + 1]);
        pa[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
      }
      wgmma::fence_operands(o);
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        wgmma::mma_m64n128k16_rs_mn(o, pa[kk], wgmma::mn_major(v_addr + kk * 16 * kRowBytes, kKvSlabBytes), 1);
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(o);
    }
    __syncthreads();  // every warpgroup is done with this stage before it is refilled
  }

  // Normalise and stage the output rows row-major in the Q tile (every wgmma that read it has completed), then
  // store whole 256-byte rows with 16-byte accesses.
  auto* stage_rows = reinterpret_cast<__nv_bfloat16*>(qs);
  constexpr int kStageStride = kHeadDim;  // bf16 elements per staged row
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    float total = l[row];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const float inv = total > 0.f ? 1.f / total : 0.f;
    const int local = wg * kWarpgroupRows + warp * 16 + g + 8 * row;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      *reinterpret_cast<__nv_bfloat162*>(stage_rows + local * kStageStride + nt * 8 + 2 * c) =
          __floats2bfloat162_rn(o[4 * nt + 2 * row] * inv, o[4 * nt + 2 * row + 1] * inv);
    }
    const int t = t_row[row];
    if (c == 0 && t < tokens) lse[static_cast<int64_t>(head) * tokens + t] = (m[row] + log2f(total)) / kLog2e;
  }
  __syncthreads();
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int j = 0; j < kBlockQ * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads, rr = i / kChunks, chunk = i % kChunks;
    const int t = q0 + rr;
    if (t < tokens) {
      *reinterpret_cast<uint4*>(y + (static_cast<int64_t>(t) * heads + head) * kHeadDim + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage_rows + rr * kStageStride + chunk * 8);
    }
  }
}

}  // namespace

void attention_forward_v4(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  if (!(scale > 0.f)) {  // the kernel takes row maxima on raw scores, which needs a positive scale
    attention_forward_v1(q, k, v, cu_seqlens, y, lse, window, scale);
    return;
  }
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  if (p.tokens == 0) return;
  const size_t smem = kSmemBytes + static_cast<size_t>(p.r) * sizeof(int);
  set_smem_limit(attention_forward_wgmma_kernel, smem, "attention_forward");
  // Windows past the sequence length behave as the sequence length (and fit the kernel's int arithmetic).
  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);
  const dim3 grid(static_cast<unsigned>((p.tokens + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(p.heads));
  attention_forward_wgmma_kernel<<<grid, kThreads, smem, current_stream()>>>(
      device_bf16(q), device_bf16(k), device_bf16(v), device_i32(cu_seqlens), p.r, device_bf16(y),
      static_cast<float*>(lse.raw()), static_cast<int>(p.tokens), p.heads, win, scale * kLog2e);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
